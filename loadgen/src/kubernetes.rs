//! The Kubernetes mode (`--kube`): the hub against a real
//! management API server from test-kit's harness, one hub Gateway per
//! Gateway name, optionally an offered change rate and a `kill -9` and
//! restart of the hub; measures change -> hub Gateway status latency, the
//! API writes, the store's size and lag, CPU and RSS.
//!
//! [`run`] is the outline: set up, ingest, the delta phase, the end; each
//! phase is a step below, the watch on the hub Gateways in [`watch`], the
//! direct reads of the API server in [`api`], the report in [`figures`].

mod api;
mod figures;
mod watch;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use gateway_api::apis::standard::gateways::Gateway;
use gwhub_test_kit::latency::Latencies;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::agents::{AgentDone, Shared, agent, wait_for_marks};
use crate::dashboard::wait_fleet;
use crate::dns::DnsBench;
use crate::error::{AgentFailure, BenchError};
use crate::probes::{apiserver_pid, apiserver_writes, cpu_seconds};
use crate::replicas::{Counters, Holders, Replica, follow_leases, replica_flags};
use crate::report::print_problems;
use crate::scenario::{Args, FirstSnapshot, GRACE, cluster_name, gateway_name};

use api::{largest_hub_gateway, status_apply_cost, stored_reports};
use figures::{End, Figures, Ingested, Restart};
use watch::{KubeView, Writers, hub_gateway_watcher};

pub(crate) fn run(args: Args) -> Result<serde_json::Value, BenchError> {
    if args.clusters == 0 || args.gateways == 0 {
        return Err(BenchError::Usage(
            "--clusters and --gateways must be at least 1",
        ));
    }
    if !gwhub_test_kit::apiserver::require_assets("scale --kube") {
        return Err(BenchError::Usage(
            "no kube-apiserver assets (see scripts/kube-assets.sh)",
        ));
    }
    let args = Arc::new(args);
    let bin = args
        .hub_bin
        .clone()
        .unwrap_or_else(gwhub_test_kit::procs::gwhub_binary);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(BenchError::Runtime)?;
    runtime.block_on(bench(args, &bin))
}

/// The run on the runtime: set up, ingest, the delta phase, the end.
async fn bench(args: Arc<Args>, bin: &Path) -> Result<serde_json::Value, BenchError> {
    let replicas = args.replicas.max(1) as usize;
    let shards = args.shards();
    let fleet = gwhub_test_kit::apiserver::Fleet::start(&["mgmt"])
        .await
        .map_err(BenchError::fleet("start the API server"))?;
    let (admin, api_pid, dns, mut hubs) = set_up(&fleet, &args, bin).await?;
    let shared = Arc::new(Shared::new(args.clusters, args.gateways));
    let view = Arc::new(Mutex::new(KubeView::default()));
    let holders = Arc::new(Mutex::new(Holders::default()));
    let (finish_tx, finish) = tokio::sync::watch::channel(false);
    let writers = Writers {
        replicas,
        shards,
        holders: holders.clone(),
    };
    let (leases_task, watch_task) = spawn_followers(&admin, &shared, &view, writers, &finish);

    // Snapshots, then wait until every replica's hub Gateways
    // aggregate every cluster (its own agents' and, through the
    // store, the others').
    let (go_tx, go) = tokio::sync::watch::channel(false);
    let t0 = Instant::now();
    let (agents, senders) = spawn_agents(&args, &hubs, &shared, &go);
    let ingested = ingest(&admin, &mut hubs, &args, t0).await?;
    // Fleet DNS: the poller, and every name published (after the
    // rise) before the load.
    let dns_poller = dns
        .as_ref()
        .map(|d| tokio::spawn(d.clone().poll(finish.clone())));
    let dns_published_s = wait_published(dns.as_deref(), t0).await?;
    let dns_serial0 = dns.as_ref().map_or(0, |d| d.serial());

    // The delta phase.
    let (api_writes0, api_cpu0) = begin(&mut hubs, &admin, api_pid).await?;
    let _ = go_tx.send(true);
    let d0 = Instant::now();
    let acked0 = shared.acked.load(Ordering::Relaxed);
    let dispatcher = spawn_dispatcher(&args, &shared, dns.clone(), senders);
    let restart = deltas(&args, d0, &mut hubs, bin, &holders, &view, &shared).await?;
    let delta_s = d0.elapsed().as_secs_f64();
    let acked = shared.acked.load(Ordering::Relaxed) - acked0;
    let (end, largest) = measure_end(&admin, &hubs, &holders, &shared, args.clusters).await?;
    let (dns_updates, dns_writes) = dns_counts(dns.as_deref(), dns_serial0, &hubs, &end.m1);
    let api_cpu_s = api_pid.map_or(0.0, cpu_seconds) - api_cpu0;
    let offered = stop_load(&shared, dispatcher, acked, agents).await?;
    let unobserved = wait_for_marks(&shared).await;
    let rss_end: Vec<(u64, u64)> = hubs.iter().map(Replica::rss).collect();
    drain_dns(dns.as_deref()).await;
    let _ = finish_tx.send(true);
    if let Some(p) = dns_poller {
        let _ = p.await;
    }
    let (latencies, per_replica_latencies) = watch_task
        .join()
        .map_err(|_| BenchError::WatcherPanicked)??;
    let _ = leases_task.await;
    let apply_ms = stop_hubs(&mut hubs, &admin, api_pid, largest.as_ref()).await?;
    let problems = problems(&hubs);
    print_problems(&problems);
    let dns = dns.map(|bench| figures::Dns {
        bench,
        published_s: dns_published_s,
        updates: dns_updates,
        writes: dns_writes,
    });
    let figures = Figures {
        args: &args,
        hubs: &hubs,
        ingest: ingested,
        end,
        delta_s,
        acked,
        offered,
        latencies,
        unobserved,
        per_replica_latencies,
        rss_end,
        api_writes0,
        api_cpu_s,
        apply_ms,
        restart,
        warnings: problems.0,
        dns,
    };
    let json = figures.report();
    drop(hubs);
    drop(fleet);
    Ok(json)
}

/// The management API server's side of the bench: the hub installed, the
/// hub Gateways created (and fleet DNS's server started), the replicas
/// started. The admin client, the API server's pid, fleet DNS, the
/// replicas.
async fn set_up(
    fleet: &gwhub_test_kit::apiserver::Fleet,
    args: &Args,
    bin: &Path,
) -> Result<
    (
        kube::Client,
        Option<u32>,
        Option<Arc<DnsBench>>,
        Vec<Replica>,
    ),
    BenchError,
> {
    let mgmt = fleet.cluster("mgmt");
    gwhub_test_kit::install::install_hub(mgmt).await;
    let admin = mgmt
        .client()
        .await
        .map_err(BenchError::fleet("the API server's client"))?;
    let dns = create_hub_gateways(&admin, &fleet.dir, args).await?;
    let api_pid = apiserver_pid(mgmt.port);
    let kubeconfig = mgmt.kubeconfig_as(gwhub_test_kit::install::HUB_SA);
    let common = hub_flags(args, &kubeconfig, dns.as_deref());
    let (replicas, shards) = (args.replicas.max(1) as usize, args.shards());
    let hubs = start_replicas(bin, &common, replicas, shards).await?;
    Ok((admin, api_pid, dns, hubs))
}

/// Creates the namespaces and one hub Gateway per Gateway name; with
/// fleet DNS (`--dns`), starts its server first and gives each hub
/// Gateway two listeners with a hostname each.
async fn create_hub_gateways(
    admin: &kube::Client,
    dir: &Path,
    args: &Args,
) -> Result<Option<Arc<DnsBench>>, BenchError> {
    let namespaces: Vec<String> = (0..10.min(args.gateways))
        .map(|i| format!("ns-{i}"))
        .collect();
    let ns_refs: Vec<&str> = namespaces.iter().map(String::as_str).collect();
    gwhub_test_kit::apiserver::create_namespaces(admin, &ns_refs)
        .await
        .map_err(BenchError::fleet("namespaces"))?;
    let dns = if args.dns {
        Some(DnsBench::start(dir, args.gateways)?)
    } else {
        None
    };
    for g in 0..args.gateways {
        let ns = format!("ns-{}", g % 10);
        let api: kube::Api<gateway_api::apis::standard::gateways::Gateway> =
            kube::Api::namespaced(admin.clone(), &ns);
        let listeners = if dns.is_some() {
            serde_json::json!([
                {"name": crate::dns::LISTENERS[0], "port": 80, "protocol": "HTTP",
                 "hostname": crate::dns::hostname(g, 0)},
                {"name": crate::dns::LISTENERS[1], "port": 81, "protocol": "HTTP",
                 "hostname": crate::dns::hostname(g, 1)},
            ])
        } else {
            serde_json::json!([{"name": "http", "port": 80, "protocol": "HTTP"}])
        };
        let gw = serde_json::from_value(serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": gateway_name(g), "namespace": ns},
            "spec": {"gatewayClassName": "kuadrant-multi-cluster-gateway-instance-per-cluster",
                     "listeners": listeners}
        }))
        .map_err(BenchError::Json)?;
        api.create(&Default::default(), &gw)
            .await
            .map_err(BenchError::kube(format!(
                "create hub Gateway {}",
                gateway_name(g)
            )))?;
    }
    Ok(dns)
}

/// The flags every replica shares: the management cluster as the hub's
/// service account, the bench's API rate and no message limit, fleet
/// DNS's flags, and past the hub's default of 4,096 clusters and agent
/// connections (`--max-clusters`, `--max-connections`, past which it
/// refuses the rest) room for the fleet.
fn hub_flags(args: &Args, kubeconfig: &Path, dns: Option<&DnsBench>) -> Vec<String> {
    let mut common: Vec<String> = vec![
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
        "--namespace".into(),
        "gwhub-system".into(),
        "--dashboard-listen".into(),
        "127.0.0.1:0".into(),
        "--stale-after".into(),
        "60s".into(),
        "--kube-api-qps".into(),
        args.qps.to_string(),
        "--kube-api-burst".into(),
        args.burst.to_string(),
        "--max-messages-per-second".into(),
        "0".into(),
    ];
    if let Some(d) = dns {
        common.extend(d.hub_flags());
    }
    if args.clusters > 4096 {
        let n = (args.clusters + 64).to_string();
        common.extend([
            "--max-clusters".into(),
            n.clone(),
            "--max-connections".into(),
            n,
        ]);
    }
    common
}

/// Starts the replicas on free ports, lets them settle and notes each
/// one's idle RSS.
async fn start_replicas(
    bin: &Path,
    common: &[String],
    replicas: usize,
    shards: u32,
) -> Result<Vec<Replica>, BenchError> {
    let mut hubs: Vec<Replica> = Vec::with_capacity(replicas);
    for i in 0..replicas {
        let (ingest_port, metrics_port) = (
            gwhub_test_kit::procs::free_port(),
            gwhub_test_kit::procs::free_port(),
        );
        let flags = replica_flags(common, replicas, shards, ingest_port, metrics_port);
        hubs.push(Replica::start(bin, i, flags, metrics_port)?);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    for h in &mut hubs {
        h.rss_idle = h.rss().0;
    }
    Ok(hubs)
}

/// What follows the run beside the agents: the shard Leases (who writes
/// which hub Gateway) and the watch on the hub Gateways, on its own
/// thread and runtime so the agents' tasks cannot delay it.
#[allow(clippy::type_complexity)]
fn spawn_followers(
    admin: &kube::Client,
    shared: &Arc<Shared>,
    view: &Arc<Mutex<KubeView>>,
    writers: Writers,
    finish: &tokio::sync::watch::Receiver<bool>,
) -> (
    JoinHandle<()>,
    std::thread::JoinHandle<Result<(Latencies, Vec<Latencies>), BenchError>>,
) {
    let leases_task = tokio::spawn(follow_leases(
        admin.clone(),
        "gwhub-system".to_owned(),
        writers.shards,
        writers.holders.clone(),
        finish.clone(),
    ));
    let (client, shared, view) = (admin.clone(), shared.clone(), view.clone());
    let finish = finish.clone();
    let watch_task = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(BenchError::Runtime)?
            .block_on(hub_gateway_watcher(client, shared, view, writers, finish))
    });
    (leases_task, watch_task)
}

/// Agents of one cluster each, spread over the replicas, reconnecting
/// when theirs is killed; with an offered rate (`--rate`), each with the
/// channel the dispatcher names the Gateways to change on.
#[allow(clippy::type_complexity)]
fn spawn_agents(
    args: &Arc<Args>,
    hubs: &[Replica],
    shared: &Arc<Shared>,
    go: &tokio::sync::watch::Receiver<bool>,
) -> (
    Vec<JoinHandle<Result<AgentDone, AgentFailure>>>,
    Vec<mpsc::UnboundedSender<usize>>,
) {
    let replicas = hubs.len();
    let mut senders = Vec::new();
    let agents = (0..args.clusters)
        .map(|c| {
            let requests = if args.rate > 0.0 {
                let (tx, rx) = mpsc::unbounded_channel();
                senders.push(tx);
                Some(rx)
            } else {
                None
            };
            tokio::spawn(agent(
                c,
                hubs[c % replicas].hub.ingest.clone(),
                FirstSnapshot::of(c, args),
                args.clone(),
                shared.clone(),
                go.clone(),
                requests,
                true,
            ))
        })
        .collect();
    (agents, senders)
}

/// Waits (900 s at most) until every replica shows every snapshot, then
/// until the store holds every cluster (both timed from `t0`); then notes
/// the replicas' RSS and the store's size.
async fn ingest(
    admin: &kube::Client,
    hubs: &mut [Replica],
    args: &Args,
    t0: Instant,
) -> Result<Ingested, BenchError> {
    let waits = hubs
        .iter()
        .map(|h| wait_fleet(h.hub.dashboard.clone(), args.clusters, args.gateways));
    tokio::time::timeout(
        Duration::from_secs(900),
        futures::future::try_join_all(waits),
    )
    .await
    .map_err(|_| BenchError::Timeout("the hubs did not take every snapshot within 900 s"))??;
    let fleet_at = Instant::now();
    // Every cluster persisted (some object per cluster) and the hub
    // Gateways written.
    let persisted_at = loop {
        let (newest, _, _) = stored_reports(admin).await?;
        if newest.len() >= args.clusters {
            break Instant::now();
        }
        if t0.elapsed() > Duration::from_secs(900) {
            return Err(BenchError::NotPersisted {
                persisted: newest.len(),
                clusters: args.clusters,
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let ingest_s = (fleet_at - t0).as_secs_f64();
    let persist_s = (persisted_at - t0).as_secs_f64();
    tokio::time::sleep(Duration::from_secs(1)).await;
    for h in hubs.iter_mut() {
        h.rss_ingest = h.rss().0;
    }
    let (_, store_bytes, store_objects) = stored_reports(admin).await?;
    Ok(Ingested {
        ingest_s,
        persist_s,
        store_objects,
        store_total: store_bytes.values().sum(),
    })
}

/// Fleet DNS: waits (180 s at most) until every name is published;
/// seconds from `t0` (NaN without fleet DNS).
async fn wait_published(dns: Option<&DnsBench>, t0: Instant) -> Result<f64, BenchError> {
    let mut dns_published_s = f64::NAN;
    if let Some(d) = dns {
        let w0 = Instant::now();
        while !d.all_published() {
            if w0.elapsed() > Duration::from_secs(180) {
                return Err(BenchError::Timeout(
                    "fleet DNS: not every name published within 180 s",
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        dns_published_s = (Instant::now() - t0).as_secs_f64();
    }
    Ok(dns_published_s)
}

/// With an offered rate (`--rate`), the task asking agents for changes at
/// that rate, a random Gateway each (under fleet DNS, in a cluster its
/// answer holds now), until the load stops: how many it asked for.
fn spawn_dispatcher(
    args: &Args,
    shared: &Arc<Shared>,
    dns: Option<Arc<DnsBench>>,
    senders: Vec<mpsc::UnboundedSender<usize>>,
) -> Option<JoinHandle<u64>> {
    (args.rate > 0.0).then(|| {
        let (shared, rate, clusters, gateways) =
            (shared.clone(), args.rate, args.clusters, args.gateways);
        tokio::spawn(async move {
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            let mut rng = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            let mut tick = tokio::time::interval(Duration::from_millis(10));
            let (mut due, start) = (0.0f64, Instant::now());
            let mut sent = 0u64;
            while !shared.stop.load(Ordering::Relaxed) {
                tick.tick().await;
                due = start.elapsed().as_secs_f64() * rate;
                while (sent as f64) < due {
                    let g = (rng() % gateways as u64) as usize;
                    // Fleet DNS: a cluster the answer holds now.
                    let c = match &dns {
                        Some(d) => d.mark(g, rng()),
                        None => Some((rng() % clusters as u64) as usize),
                    };
                    if let Some(c) = c {
                        let _ = senders[c].send(g);
                    }
                    sent += 1;
                }
            }
            let _ = due;
            sent
        })
    })
}

/// The delta phase's clock: `--duration` from `d0`, with a `kill -9` and
/// restart of one replica at `--restart-at`.
async fn deltas(
    args: &Args,
    d0: Instant,
    hubs: &mut [Replica],
    bin: &Path,
    holders: &Mutex<Holders>,
    view: &Mutex<KubeView>,
    shared: &Shared,
) -> Result<Option<Restart>, BenchError> {
    let (replicas, shards) = (args.replicas.max(1) as usize, args.shards());
    let mut restart: Option<Restart> = None;
    while d0.elapsed() < args.duration {
        if let Some(at) = args.restart_at
            && restart.is_none()
            && d0.elapsed() >= at
        {
            // kill -9 and start again on the same ports.
            let (victim, victim_shards) = {
                let h = holders.lock();
                let v = h.victim(replicas, shards);
                (v, h.held(replicas).get(v).copied().unwrap_or(0))
            };
            let (started, agents_back_s, wrong, whole_s) =
                kill_and_restart(&mut hubs[victim], bin, view, shared, args.clusters).await?;
            restart = Some((
                victim,
                victim_shards,
                started,
                agents_back_s,
                wrong,
                whole_s,
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(restart)
}

/// Kills `hub` (`kill -9`), starts it again on the same ports and judges
/// the next two minutes: seconds until it was up, until every agent
/// streamed again and until every hub Gateway was whole again, and how
/// many statuses were wrong meanwhile.
async fn kill_and_restart(
    hub: &mut Replica,
    bin: &Path,
    view: &Mutex<KubeView>,
    shared: &Shared,
    clusters: usize,
) -> Result<(f64, f64, u64, f64), BenchError> {
    {
        let mut v = view.lock();
        v.baseline = Some(v.shapes.clone());
        v.wrong = 0;
    }
    let killed = Instant::now();
    hub.kill_and_restart(bin).await?;
    let started = killed.elapsed().as_secs_f64();
    let mut whole_s = f64::NAN;
    let mut agents_back_s = f64::NAN;
    while killed.elapsed() < Duration::from_secs(120) {
        let back = shared.streaming.load(Ordering::Relaxed) as usize == clusters;
        if back && agents_back_s.is_nan() {
            agents_back_s = killed.elapsed().as_secs_f64();
        }
        if back && view.lock().whole() {
            whole_s = killed.elapsed().as_secs_f64();
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let wrong = {
        let mut v = view.lock();
        let w = v.wrong;
        v.baseline = None;
        w
    };
    Ok((started, agents_back_s, wrong, whole_s))
}

/// The start of the delta phase: each replica's counters and CPU, the
/// API server's writes and CPU.
async fn begin(
    hubs: &mut [Replica],
    admin: &kube::Client,
    api_pid: Option<u32>,
) -> Result<(Counters, f64), BenchError> {
    for h in hubs.iter_mut() {
        h.begin().await;
    }
    let api_writes0 = apiserver_writes(admin).await?;
    let api_cpu0 = api_pid.map_or(0.0, cpu_seconds);
    Ok((api_writes0, api_cpu0))
}

/// What is read at the end of the delta phase, the load still running:
/// the store's lag, the replicas' counters and CPU, the API server's
/// writes, the shards held, and the largest hub Gateway (with its sizes).
async fn measure_end(
    admin: &kube::Client,
    hubs: &[Replica],
    holders: &Mutex<Holders>,
    shared: &Shared,
    clusters: usize,
) -> Result<(End, Option<Gateway>), BenchError> {
    let lags = store_lags(admin, shared, clusters).await?;
    let mut m1 = Vec::with_capacity(hubs.len());
    for h in hubs {
        m1.push(gwhub_test_kit::procs::scrape(h.metrics_port).await);
    }
    let api_writes1 = apiserver_writes(admin).await?;
    let held_end = holders.lock().held(hubs.len());
    let (status_bytes, object_bytes, largest) = largest_hub_gateway(admin).await?;
    let hub_cpu: Vec<f64> = hubs.iter().map(Replica::cpu_s).collect();
    let end = End {
        lags,
        m1,
        api_writes1,
        held_end,
        largest_bytes: (status_bytes, object_bytes),
        hub_cpu,
    };
    Ok((end, largest))
}

/// Fleet DNS's writes: applied UPDATEs by the zone's serial (0 when dig
/// could not read it), and the hub's successful writes.
fn dns_counts(
    dns: Option<&DnsBench>,
    serial0: u64,
    hubs: &[Replica],
    m1: &[Counters],
) -> (u64, u64) {
    let dns_serial1 = dns.map_or(0, |d| d.serial());
    let dns_updates = if serial0 == 0 || dns_serial1 == 0 {
        0
    } else {
        dns_serial1.saturating_sub(serial0)
    };
    let dns_writes: u64 = hubs
        .iter()
        .zip(m1)
        .map(|(h, m)| {
            h.diff(
                m,
                "gwhub_dns_writes_total{output=\"rfc2136\",result=\"ok\"}",
            )
        })
        .sum();
    (dns_updates, dns_writes)
}

/// Stops the load and waits for the dispatcher and the agents: the
/// changes offered (without a dispatcher, those acked).
async fn stop_load(
    shared: &Shared,
    dispatcher: Option<JoinHandle<u64>>,
    acked: u64,
    agents: Vec<JoinHandle<Result<AgentDone, AgentFailure>>>,
) -> Result<u64, BenchError> {
    shared.stop.store(true, Ordering::Relaxed);
    let offered = match dispatcher {
        Some(d) => d.await?,
        None => acked,
    };
    for a in agents {
        a.await?.map_err(Arc::new)?;
    }
    Ok(offered)
}

/// Fleet DNS: the last removals, for as long as the marks' grace.
async fn drain_dns(dns: Option<&DnsBench>) {
    if let Some(d) = dns {
        let g0 = Instant::now();
        while d.results_pending() > 0 && g0.elapsed() < GRACE {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Stops the hubs, then measures what a status apply of the largest hub
/// Gateway costs the API server alone: (CPU ms, wall ms), NaN without one.
async fn stop_hubs(
    hubs: &mut [Replica],
    admin: &kube::Client,
    api_pid: Option<u32>,
    largest: Option<&Gateway>,
) -> Result<(f64, f64), BenchError> {
    for h in hubs.iter_mut() {
        let _ = h.hub.child.kill();
        let _ = h.hub.child.wait();
    }
    Ok(match largest {
        Some(gw) => status_apply_cost(admin, api_pid, gw).await?,
        None => (f64::NAN, f64::NAN),
    })
}

/// The store's lag at the end of the load: per cluster that sent a
/// change, how long the oldest change newer than its newest persisted
/// lastReportTime has waited (0 when the store has it). Before, "newest
/// change sent minus newest persisted": at 10,000 clusters, each changing
/// about once a minute, that measured the gap between a cluster's
/// changes, not the store's delay.
async fn store_lags(
    admin: &kube::Client,
    shared: &Shared,
    clusters: usize,
) -> Result<Latencies, BenchError> {
    let (newest, _, _) = stored_reports(admin).await?;
    let now = crate::agents::wall_ms();
    let mut lags = Latencies::new();
    for c in 0..clusters {
        let sent = shared.sent_ms[c].lock();
        if !sent.is_empty() {
            let persisted = newest.get(&cluster_name(c)).copied().unwrap_or(0);
            let lag = crate::agents::store_lag_ms(&sent, persisted, now);
            lags.record_us(lag.saturating_mul(1000));
        }
    }
    Ok(lags)
}

/// What the replicas logged as warnings or errors: how many, and the
/// first five lines.
fn problems(hubs: &[Replica]) -> (usize, Vec<String>) {
    let mut problems = (0usize, Vec::new());
    for h in hubs {
        let p = h.hub.problems.lock();
        problems.0 += p.0;
        problems.1.extend(
            p.1.iter()
                .take(5usize.saturating_sub(problems.1.len()))
                .cloned(),
        );
    }
    problems
}
