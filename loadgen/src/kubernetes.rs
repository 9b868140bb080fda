//! The Kubernetes mode (`--kube`, issue #15): the hub against a real
//! management API server from test-kit's harness, one hub Gateway per
//! Gateway name, optionally an offered change rate and a `kill -9` and
//! restart of the hub; measures change -> hub Gateway status latency, the
//! API writes, the store's size and lag, CPU and RSS.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use gwhub_test_kit::latency::Latencies;
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};

use crate::agents::{Shared, agent, take_marks_with};
use crate::dashboard::wait_fleet;
use crate::error::BenchError;
use crate::probes::{apiserver_pid, apiserver_writes, cpu_seconds, loadavg, machine};
use crate::replicas::{Holders, Replica, follow_leases, replica_flags};
use crate::report::{latency_json, mib, print_problems};
use crate::scenario::{Args, FirstSnapshot, GRACE, cluster_name, gateway_name};

/// What a hub Gateway's status looks like, for "whole again" after a
/// restart: the hub's own verdict and how many listeners and addresses it
/// carries (a cluster missing shows as fewer), and whether a cluster is
/// shown stale.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Shape {
    pub(crate) own_reason: String,
    pub(crate) listeners: usize,
    pub(crate) addresses: usize,
    pub(crate) stale: bool,
}

impl Shape {
    pub(crate) fn of(status: &serde_json::Value) -> Shape {
        let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
        let own_reason = conditions
            .iter()
            .find(|c| c["type"] == "kuadrant.io/MultiClusterAggregated")
            .and_then(|c| c["reason"].as_str())
            .unwrap_or("")
            .to_owned();
        Shape {
            own_reason,
            listeners: status["listeners"].as_array().map_or(0, Vec::len),
            addresses: status["addresses"].as_array().map_or(0, Vec::len),
            stale: conditions.iter().any(|c| {
                c["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("status is stale"))
            }),
        }
    }
}

/// The first stale fragment a status shows, for the report of a wrong
/// status (empty when none).
fn stale_fragment(status: &serde_json::Value) -> String {
    let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    conditions
        .iter()
        .filter_map(|c| c["message"].as_str())
        .flat_map(|m| m.split("; "))
        .find(|f| f.contains("status is stale"))
        .map(|f| format!(": {f}"))
        .unwrap_or_default()
}

/// What the watch on the hub Gateways saw.
#[derive(Default)]
pub(crate) struct KubeView {
    pub(crate) shapes: HashMap<String, Shape>,
    /// Shapes when the hub was killed; `Some` while a restart is judged.
    pub(crate) baseline: Option<HashMap<String, Shape>>,
    /// Statuses written during the restart that differ from the baseline's
    /// shape, name a stale cluster or no clusters.
    pub(crate) wrong: u64,
    pub(crate) events: u64,
}

impl KubeView {
    pub(crate) fn whole(&self) -> bool {
        self.baseline
            .as_ref()
            .is_some_and(|b| b.iter().all(|(n, s)| self.shapes.get(n) == Some(s)))
    }
}

/// Watches the hub Gateways on the management API server: mark
/// latencies (change -> status there) and the shapes.
/// Latencies are also counted per replica, for the replica `holders`
/// shows writing the hub Gateway when its status arrives.
pub(crate) async fn hub_gateway_watcher(
    client: kube::Client,
    shared: Arc<Shared>,
    view: Arc<Mutex<KubeView>>,
    writers: Writers,
    mut finish: watch::Receiver<bool>,
) -> Result<(Latencies, Vec<Latencies>), BenchError> {
    use futures::StreamExt;
    use kube::runtime::watcher::{self, Event};
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
        client,
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "Gateway"),
            "gateways",
        ),
    );
    let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
    let mut latencies = Latencies::new();
    let mut per_replica: Vec<Latencies> = (0..writers.replicas).map(|_| Latencies::new()).collect();
    loop {
        let event = tokio::select! {
            e = stream.next() => e,
            _ = finish.wait_for(|f| *f) => break,
        };
        let Some(event) = event else { break };
        let obj = match event {
            Ok(Event::Apply(o)) | Ok(Event::InitApply(o)) => o,
            Ok(_) => continue,
            Err(e) => {
                eprintln!("hub Gateway watch: {e}");
                continue;
            }
        };
        let now = shared.now_us();
        let name = obj.metadata.name.clone().unwrap_or_default();
        let namespace = obj.metadata.namespace.clone().unwrap_or_default();
        let status = obj.data.get("status").cloned().unwrap_or_default();
        if let Some(g) = name
            .strip_prefix("gw-")
            .and_then(|g| g.parse::<usize>().ok())
        {
            let writer =
                writers
                    .holders
                    .lock()
                    .writer(writers.replicas, writers.shards, &namespace, &name);
            for c in status["conditions"].as_array().into_iter().flatten() {
                if let Some(m) = c["message"].as_str() {
                    take_marks_with(m, g, &shared, now, |us| {
                        latencies.record_us(us);
                        if let Some(l) = writer.and_then(|w| per_replica.get_mut(w)) {
                            l.record_us(us);
                        }
                    });
                }
            }
        }
        let shape = Shape::of(&status);
        let mut v = view.lock();
        v.events += 1;
        let judged = v.baseline.as_ref().map(|b| {
            let before = b.get(&name).cloned();
            let wrong = shape.stale
                || shape.own_reason == "NoClusters"
                || before.as_ref().is_some_and(|s| *s != shape);
            (wrong, before)
        });
        if let Some((true, before)) = judged {
            v.wrong += 1;
            // The first few, to say what was wrong.
            if v.wrong <= 5 {
                eprintln!(
                    "wrong status during the restart: {namespace}/{name} {shape:?} (before the kill: {before:?}){}",
                    stale_fragment(&status)
                );
            }
        }
        v.shapes.insert(name, shape);
    }
    Ok((latencies, per_replica))
}

/// Who writes which hub Gateway, for the watcher.
pub(crate) struct Writers {
    pub(crate) replicas: usize,
    pub(crate) shards: u32,
    pub(crate) holders: Arc<Mutex<Holders>>,
}

/// Per cluster, the newest `lastReportTime` over its ClusterReports (ms)
/// and how many bytes its objects take.
/// The largest hub Gateway on the API server: its status's and its whole
/// object's size (managedFields included), in bytes of JSON, and the
/// object. What each status write carries and the API server decodes,
/// merges and stores.
pub(crate) async fn largest_hub_gateway(
    client: &kube::Client,
) -> Result<
    (
        usize,
        usize,
        Option<gateway_api::apis::standard::gateways::Gateway>,
    ),
    BenchError,
> {
    let api: kube::Api<gateway_api::apis::standard::gateways::Gateway> =
        kube::Api::all(client.clone());
    let list = api
        .list(&Default::default())
        .await
        .map_err(BenchError::kube("list hub Gateways"))?;
    let len = |v: serde_json::Result<Vec<u8>>| v.map_or(0, |b| b.len());
    let largest = list
        .items
        .into_iter()
        .max_by_key(|gw| len(serde_json::to_vec(&gw.status)));
    Ok(match largest {
        Some(gw) => (
            len(serde_json::to_vec(&gw.status)),
            len(serde_json::to_vec(&gw)),
            Some(gw),
        ),
        None => (0, 0, None),
    })
}

/// What one hub Gateway status apply costs the API server alone (the hub
/// stopped, nothing else writing): `APPLIES` server-side applies of
/// `gw`'s status as the hub's field manager, one at a time, each with a
/// condition message changed. Returns (API server CPU ms, wall ms) per
/// apply.
pub(crate) async fn status_apply_cost(
    client: &kube::Client,
    api_pid: Option<u32>,
    gw: &gateway_api::apis::standard::gateways::Gateway,
) -> Result<(f64, f64), BenchError> {
    const APPLIES: u32 = 40;
    let ns = gw.metadata.namespace.clone().unwrap_or_default();
    let name = gw.metadata.name.clone().unwrap_or_default();
    let api: kube::Api<gateway_api::apis::standard::gateways::Gateway> =
        kube::Api::namespaced(client.clone(), &ns);
    let mut status = serde_json::to_value(&gw.status).map_err(BenchError::Json)?;
    let cpu0 = api_pid.map_or(0.0, cpu_seconds);
    let t0 = Instant::now();
    for i in 0..APPLIES {
        if let Some(c) = status.pointer_mut("/conditions/0/message") {
            *c = serde_json::Value::String(format!("cost probe {i}"));
        }
        let body = serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": name, "namespace": ns},
            "status": status,
        });
        api.patch_status(
            &name,
            &kube::api::PatchParams::apply("gwhub").force(),
            &kube::api::Patch::Apply(&body),
        )
        .await
        .map_err(BenchError::kube("status apply probe"))?;
    }
    let wall_ms = t0.elapsed().as_secs_f64() * 1000.0 / f64::from(APPLIES);
    let cpu_ms = (api_pid.map_or(0.0, cpu_seconds) - cpu0) * 1000.0 / f64::from(APPLIES);
    Ok((cpu_ms, wall_ms))
}

pub(crate) async fn stored_reports(
    client: &kube::Client,
) -> Result<(HashMap<String, u64>, HashMap<String, u64>, usize), BenchError> {
    let api: kube::Api<gwhub_hub_rules::report::ClusterReport> =
        kube::Api::namespaced(client.clone(), "gwhub-system");
    let list = api
        .list(&Default::default())
        .await
        .map_err(BenchError::kube("list ClusterReports"))?;
    let mut newest: HashMap<String, u64> = HashMap::new();
    let mut bytes: HashMap<String, u64> = HashMap::new();
    for r in &list.items {
        let t = r
            .spec
            .last_report_time
            .as_deref()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .map_or(0, |t| t.as_millisecond() as u64);
        let e = newest.entry(r.spec.cluster.clone()).or_default();
        *e = (*e).max(t);
        *bytes.entry(r.spec.cluster.clone()).or_default() +=
            serde_json::to_vec(r).map_or(0, |b| b.len() as u64);
    }
    Ok((newest, bytes, list.items.len()))
}

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
    let pairs = args.clusters * args.gateways;
    let replicas = args.replicas.max(1) as usize;
    let shards = args.shards();
    let bin = args
        .hub_bin
        .clone()
        .unwrap_or_else(gwhub_test_kit::procs::gwhub_binary);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(BenchError::Runtime)?;
    runtime.block_on(async {
        let fleet = gwhub_test_kit::apiserver::Fleet::start(&["mgmt"])
            .await
            .map_err(BenchError::fleet("start the API server"))?;
        let mgmt = fleet.cluster("mgmt");
        gwhub_test_kit::install::install_hub(mgmt).await;
        let admin = mgmt
            .client()
            .await
            .map_err(BenchError::fleet("the API server's client"))?;
        let namespaces: Vec<String> = (0..10.min(args.gateways)).map(|i| format!("ns-{i}")).collect();
        let ns_refs: Vec<&str> = namespaces.iter().map(String::as_str).collect();
        gwhub_test_kit::apiserver::create_namespaces(&admin, &ns_refs)
            .await
            .map_err(BenchError::fleet("namespaces"))?;
        let dns = if args.dns {
            Some(crate::dns::DnsBench::start(&fleet.dir, args.gateways)?)
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
                .map_err(BenchError::kube(format!("create hub Gateway {}", gateway_name(g))))?;
        }
        let api_pid = apiserver_pid(mgmt.port);
        let kubeconfig = mgmt.kubeconfig_as(gwhub_test_kit::install::HUB_SA);
        let common: Vec<String> = vec![
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
        // Past the hub's default of 4,096 clusters and agent connections
        // (`--max-clusters`, `--max-connections`) it refuses the rest.
        let mut common = common;
        if let Some(d) = &dns {
            common.extend(d.hub_flags());
        }
        if args.clusters > 4096 {
            let n = (args.clusters + 64).to_string();
            common.extend(["--max-clusters".into(), n.clone(), "--max-connections".into(), n]);
        }
        let mut hubs: Vec<Replica> = Vec::with_capacity(replicas);
        for i in 0..replicas {
            let (ingest_port, metrics_port) =
                (gwhub_test_kit::procs::free_port(), gwhub_test_kit::procs::free_port());
            let flags = replica_flags(&common, replicas, shards, ingest_port, metrics_port);
            hubs.push(Replica::start(&bin, i, flags, metrics_port)?);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        for h in &mut hubs {
            h.rss_idle = h.rss().0;
        }
        let shared = Arc::new(Shared::new(args.clusters, args.gateways));
        let view = Arc::new(Mutex::new(KubeView::default()));
        let holders = Arc::new(Mutex::new(Holders::default()));
        let (finish_tx, finish) = watch::channel(false);
        let leases_task = tokio::spawn(follow_leases(
            admin.clone(),
            "gwhub-system".to_owned(),
            shards,
            holders.clone(),
            finish.clone(),
        ));
        let watch_task = {
            let (client, shared, view) = (admin.clone(), shared.clone(), view.clone());
            let writers = Writers { replicas, shards, holders: holders.clone() };
            let finish = finish.clone();
            std::thread::spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(BenchError::Runtime)?
                    .block_on(hub_gateway_watcher(client, shared, view, writers, finish))
            })
        };

        // Snapshots, then wait until every replica's hub Gateways
        // aggregate every cluster (its own agents' and, through the
        // store, the others').
        let (go_tx, go) = watch::channel(false);
        let t0 = Instant::now();
        let mut senders = Vec::new();
        let agents: Vec<_> = (0..args.clusters)
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
                    FirstSnapshot::of(c, &args),
                    args.clone(),
                    shared.clone(),
                    go.clone(),
                    requests,
                    true,
                ))
            })
            .collect();
        let waits = hubs
            .iter()
            .map(|h| wait_fleet(h.hub.dashboard.clone(), args.clusters, args.gateways));
        tokio::time::timeout(Duration::from_secs(900), futures::future::try_join_all(waits))
            .await
            .map_err(|_| BenchError::Timeout("the hubs did not take every snapshot within 900 s"))??;
        let fleet_at = Instant::now();
        // Every cluster persisted (some object per cluster) and the hub
        // Gateways written.
        let persisted_at = loop {
            let (newest, _, _) = stored_reports(&admin).await?;
            if newest.len() >= args.clusters {
                break Instant::now();
            }
            if t0.elapsed() > Duration::from_secs(900) {
                return Err(BenchError::NotPersisted { persisted: newest.len(), clusters: args.clusters });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let ingest_s = (fleet_at - t0).as_secs_f64();
        let persist_s = (persisted_at - t0).as_secs_f64();
        tokio::time::sleep(Duration::from_secs(1)).await;
        for h in &mut hubs {
            h.rss_ingest = h.rss().0;
        }
        let (_, store_bytes, store_objects) = stored_reports(&admin).await?;
        let store_total: u64 = store_bytes.values().sum();
        // Fleet DNS: the poller, and every name published (after the
        // rise) before the load.
        let dns_poller = dns.as_ref().map(|d| tokio::spawn(d.clone().poll(finish.clone())));
        let mut dns_published_s = f64::NAN;
        if let Some(d) = &dns {
            let w0 = Instant::now();
            while !d.all_published() {
                if w0.elapsed() > Duration::from_secs(180) {
                    return Err(BenchError::Timeout("fleet DNS: not every name published within 180 s"));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            dns_published_s = (Instant::now() - t0).as_secs_f64();
        }
        let dns_serial0 = dns.as_ref().map_or(0, |d| d.serial());

        // The delta phase.
        for h in &mut hubs {
            h.begin().await;
        }
        let api_writes0 = apiserver_writes(&admin).await?;
        let api_cpu0 = api_pid.map_or(0.0, cpu_seconds);
        let _ = go_tx.send(true);
        let d0 = Instant::now();
        let acked0 = shared.acked.load(Ordering::Relaxed);
        let dispatcher = (args.rate > 0.0).then(|| {
            let (shared, rate, clusters, gateways) =
                (shared.clone(), args.rate, args.clusters, args.gateways);
            let dns = dns.clone();
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
        });
        // (killed replica, its shards, hub up, agents back, wrong, whole)
        let mut restart: Option<(usize, usize, f64, f64, u64, f64)> = None;
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
                {
                    let mut v = view.lock();
                    v.baseline = Some(v.shapes.clone());
                    v.wrong = 0;
                }
                let killed = Instant::now();
                hubs[victim].kill_and_restart(&bin).await?;
                let started = killed.elapsed().as_secs_f64();
                let mut whole_s = f64::NAN;
                let mut agents_back_s = f64::NAN;
                while killed.elapsed() < Duration::from_secs(120) {
                    let back = shared.streaming.load(Ordering::Relaxed) as usize == args.clusters;
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
                restart = Some((victim, victim_shards, started, agents_back_s, wrong, whole_s));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let delta_s = d0.elapsed().as_secs_f64();
        let acked = shared.acked.load(Ordering::Relaxed) - acked0;
        // The store's lag at the end of the load: per cluster that sent a
        // change, how long the oldest change newer than its newest
        // persisted lastReportTime has waited (0 when the store has it).
        // Before, "newest change sent minus newest persisted": at 10,000
        // clusters, each changing about once a minute, that measured the
        // gap between a cluster's changes, not the store's delay.
        let (newest, _, _) = stored_reports(&admin).await?;
        let now = crate::agents::wall_ms();
        let mut lags = Latencies::new();
        for c in 0..args.clusters {
            let sent = shared.sent_ms[c].lock();
            if !sent.is_empty() {
                let persisted = newest.get(&cluster_name(c)).copied().unwrap_or(0);
                let lag = crate::agents::store_lag_ms(&sent, persisted, now);
                lags.record_us(lag.saturating_mul(1000));
            }
        }
        let mut m1 = Vec::with_capacity(replicas);
        for h in &hubs {
            m1.push(gwhub_test_kit::procs::scrape(h.metrics_port).await);
        }
        let api_writes1 = apiserver_writes(&admin).await?;
        let held_end = holders.lock().held(replicas);
        let (status_bytes, object_bytes, largest) = largest_hub_gateway(&admin).await?;
        let hub_cpu: Vec<f64> = hubs.iter().map(Replica::cpu_s).collect();
        let hub_cpu_s: f64 = hub_cpu.iter().sum();
        // Applied UPDATEs by the zone's serial (0 when dig could not read
        // it), and the hub's successful writes.
        let dns_serial1 = dns.as_ref().map_or(0, |d| d.serial());
        let dns_updates = if dns_serial0 == 0 || dns_serial1 == 0 {
            0
        } else {
            dns_serial1.saturating_sub(dns_serial0)
        };
        let dns_writes: u64 = hubs
            .iter()
            .zip(&m1)
            .map(|(h, m)| h.diff(m, "gwhub_dns_writes_total{output=\"rfc2136\",result=\"ok\"}"))
            .sum();
        let api_cpu_s = api_pid.map_or(0.0, cpu_seconds) - api_cpu0;
        shared.stop.store(true, Ordering::Relaxed);
        let offered = match dispatcher {
            Some(d) => d.await?,
            None => acked,
        };
        for a in agents {
            a.await?.map_err(Arc::new)?;
        }
        let g0 = Instant::now();
        let outstanding = || shared.marks.iter().filter(|m| m.load(Ordering::Acquire) != 0).count();
        while outstanding() > 0 && g0.elapsed() < GRACE {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let unobserved = outstanding();
        let rss_end: Vec<(u64, u64)> = hubs.iter().map(Replica::rss).collect();
        // The last removals, for as long as the marks' grace.
        if let Some(d) = &dns {
            let g0 = Instant::now();
            while d.results_pending() > 0 && g0.elapsed() < GRACE {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        let _ = finish_tx.send(true);
        if let Some(p) = dns_poller {
            let _ = p.await;
        }
        let mut dns_line = None;
        let dns_json = dns.as_ref().map(|d| {
            let (lat, unobserved, cycle) = d.results();
            let skipped = d.skipped.load(Ordering::Relaxed);
            if !args.json {
                dns_line = Some(format!(
                    "  fleet DNS (BIND)         every name published {dns_published_s:.1} s after start; change -> answer without the cluster p50 {:.0} ms  p99 {:.0} ms  max {:.0} ms ({} samples, {unobserved} unobserved, poll cycle {:.1} ms); {dns_updates} updates (SOA serial), {dns_writes} hub writes ok, {:.1}/s; hub CPU {:.2} ms per write",
                    lat.ms(0.5), lat.ms(0.99), lat.ms(1.0), lat.len(), cycle.as_secs_f64() * 1000.0,
                    dns_writes as f64 / delta_s, hub_cpu_s * 1000.0 / dns_writes.max(1) as f64,
                ));
            }
            serde_json::json!({
                "removal_latency_ms": latency_json(&lat, unobserved),
                "poll_cycle_ms": cycle.as_secs_f64() * 1000.0,
                "every_name_published_s": dns_published_s,
                "updates_by_serial": dns_updates,
                "hub_writes_ok": dns_writes,
                "writes_per_s": dns_writes as f64 / delta_s,
                "hub_cpu_ms_per_write": hub_cpu_s * 1000.0 / dns_writes.max(1) as f64,
                "changes_without_a_published_cluster": skipped,
            })
        });
        let (latencies, per_replica_latencies) = watch_task
            .join()
            .map_err(|_| BenchError::WatcherPanicked)??;
        let _ = leases_task.await;
        // The hubs stopped: what a status apply costs the API server alone.
        for h in &mut hubs {
            let _ = h.hub.child.kill();
            let _ = h.hub.child.wait();
        }
        let (apply_cpu_ms, apply_wall_ms) = match &largest {
            Some(gw) => status_apply_cost(&admin, api_pid, gw).await?,
            None => (f64::NAN, f64::NAN),
        };
        let mut problems = (0usize, Vec::new());
        for h in &hubs {
            let p = h.hub.problems.lock();
            problems.0 += p.0;
            problems.1.extend(p.1.iter().take(5usize.saturating_sub(problems.1.len())).cloned());
        }
        print_problems(&problems);
        // Totals over the replicas.
        let diff = |k: &str| -> u64 { hubs.iter().zip(&m1).map(|(h, m)| h.diff(m, k)).sum() };
        let report_writes = diff("gwhub_report_writes_total");
        let report_bytes = diff("gwhub_report_write_bytes_total");
        let status_writes = diff("gwhub_status_writes_total");
        let throttled = diff("gwhub_api_throttled_waits_total");
        let waited_ms = |k: &str| diff(k) as f64 / 1000.0;
        let status_waited_ms = waited_ms("gwhub_api_throttled_status_microseconds_total");
        let report_waited_ms = waited_ms("gwhub_api_throttled_report_microseconds_total");
        // Where a status write's time goes: the API call vs aggregating and
        // planning it (mean per accepted write).
        let per_status_write = |k: &str| waited_ms(k) / status_writes.max(1) as f64;
        let status_api_ms = per_status_write("gwhub_status_api_microseconds_total");
        let status_prepare_ms = per_status_write("gwhub_status_prepare_microseconds_total");
        let (p50, p99, max) = (latencies.ms(0.5), latencies.ms(0.99), latencies.ms(1.0));
        let lag = |q: f64| lags.ms(q);
        let per_pair_of = |h: &Replica| h.rss_ingest.saturating_sub(h.rss_idle) as f64 / pairs as f64;
        let (rss_idle, rss_ingest) = (hubs[0].rss_idle, hubs[0].rss_ingest);
        let per_pair = per_pair_of(&hubs[0]);
        let (rss_deltas, rss_peak) = rss_end[0];
        let api_writes: BTreeMap<String, f64> = api_writes1
            .iter()
            .map(|(k, n)| (k.clone(), n.saturating_sub(*api_writes0.get(k).unwrap_or(&0)) as f64 / delta_s))
            .filter(|(_, r)| *r > 0.0)
            .collect();
        let changes = offered.max(1) as f64;
        let per_replica: Vec<serde_json::Value> = hubs
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let d = |k: &str| h.diff(&m1[i], k);
                serde_json::json!({
                    "replica": i,
                    "clusters": (0..args.clusters).filter(|c| c % replicas == i).count(),
                    "shards_held_at_end": held_end[i],
                    "restarted": h.restarted(),
                    "hub_gateway_latency_ms": latency_json(&per_replica_latencies[i], 0),
                    "status_writes_per_s": d("gwhub_status_writes_total") as f64 / delta_s,
                    "report_writes_per_s": d("gwhub_report_writes_total") as f64 / delta_s,
                    "cpu_cores": hub_cpu[i] / delta_s,
                    "rss_idle_bytes": h.rss_idle,
                    "rss_after_ingest_bytes": h.rss_ingest,
                    "rss_bytes_per_pair": per_pair_of(h),
                    "rss_after_deltas_bytes": rss_end[i].0,
                    "rss_peak_bytes": rss_end[i].1,
                })
            })
            .collect();
        let restart_json = restart.map(|(victim, held, started, back, wrong, whole)| serde_json::json!({
            "hub_restarted_s": started, "agents_back_s": back,
            "whole_s": whole, "wrong_statuses": wrong,
            "replica": victim, "shards_held": held,
        }));
        let cpu_per_change = serde_json::json!({
            "hubs": hub_cpu_s * 1000.0 / changes, "apiserver": api_cpu_s * 1000.0 / changes,
        });
        let json = serde_json::json!({
            "bench": "hub_scale_kube",
            "machine": machine(),
            "loadavg_end": loadavg(),
            "clusters": args.clusters,
            "gateways": args.gateways,
            "listeners": args.listeners,
            "pairs": pairs,
            "rate": args.rate,
            "offered_changes": offered,
            "kube_api_qps": args.qps,
            "kube_api_burst": args.burst,
            "replicas": replicas,
            "status_shards": shards,
            "ingest_fleet_s": ingest_s,
            "every_cluster_persisted_s": persist_s,
            "store_objects": store_objects,
            "store_bytes": store_total,
            "store_bytes_per_pair": store_total as f64 / pairs as f64,
            "delta_phase_s": delta_s,
            "deltas": acked,
            "deltas_per_s": acked as f64 / delta_s,
            "hub_gateway_latency_ms": latency_json(&latencies, unobserved),
            "report_writes_per_s": report_writes as f64 / delta_s,
            "report_bytes_per_s": report_bytes as f64 / delta_s,
            "status_writes_per_s": status_writes as f64 / delta_s,
            "api_writes_per_s": api_writes,
            "api_throttled_waits": throttled,
            "api_waited_ms": {"status": status_waited_ms, "reports": report_waited_ms},
            "status_write": {
                "mean_ms": {"api_call": status_api_ms, "prepare": status_prepare_ms},
                "largest_hub_gateway_bytes": {"status": status_bytes, "object": object_bytes},
                "alone_ms": {"apiserver_cpu": apply_cpu_ms, "wall": apply_wall_ms},
            },
            "persisted_lag_ms": {"p50": lag(0.5), "p99": lag(0.99), "max": lag(1.0), "clusters": lags.len()},
            "hub_cpu_cores": hub_cpu_s / delta_s,
            "apiserver_cpu_cores": api_cpu_s / delta_s,
            "cpu_ms_per_change": cpu_per_change,
            "rss_idle_bytes": rss_idle,
            "rss_after_ingest_bytes": rss_ingest,
            "rss_bytes_per_pair": per_pair,
            "rss_after_deltas_bytes": rss_deltas,
            "rss_peak_bytes": rss_peak,
            "per_replica": per_replica,
            "restart": restart_json,
            "hub_warnings": problems.0,
        });
        let mut json = json;
        if let (Some(d), Some(o)) = (dns_json, json.as_object_mut()) {
            o.insert("dns".to_owned(), d);
        }
        if !args.json {
            println!(
                "gwhub hub scale (Kubernetes mode): {} clusters x {} Gateways x {} listeners = {} pairs, {} hub Gateways, {replicas} replica(s), {shards} status shards; {}; load {}",
                args.clusters, args.gateways, args.listeners, pairs, args.gateways, machine(), loadavg()
            );
            println!("  ingest (ListClusters)    {ingest_s:.2} s; every cluster persisted {persist_s:.2} s");
            println!(
                "  store                    {store_objects} objects, {:.1} MB, {:.0} B per (cluster, Gateway)",
                store_total as f64 / 1e6,
                store_total as f64 / pairs as f64
            );
            println!(
                "  load                     {} ({offered} changes offered), {acked} acked in {delta_s:.1} s",
                if args.rate > 0.0 { format!("{} changes/s", args.rate) } else { "as fast as acks allow".to_owned() }
            );
            println!("  change -> hub Gateway    p50 {p50:.0} ms  p99 {p99:.0} ms  max {max:.0} ms  ({} samples, {unobserved} unobserved)", latencies.len());
            println!(
                "  API writes               reports {:.1}/s ({:.0} KB/s), status {:.1}/s, throttled waits {throttled} (qps {}, burst {}): status waited {status_waited_ms:.0} ms, reports {report_waited_ms:.0} ms in all",
                report_writes as f64 / delta_s, report_bytes as f64 / delta_s / 1e3,
                status_writes as f64 / delta_s, args.qps, args.burst
            );
            let kinds: Vec<String> = api_writes.iter().map(|(k, r)| format!("{k} {r:.1}")).collect();
            println!("  API server writes/s      {}", kinds.join(", "));
            println!("  per status write (mean)  API call {status_api_ms:.1} ms, aggregate + plan {status_prepare_ms:.1} ms; largest hub Gateway status {:.1} KB (object {:.1} KB)", status_bytes as f64 / 1e3, object_bytes as f64 / 1e3);
            println!("  one status apply alone   API server CPU {apply_cpu_ms:.1} ms, {apply_wall_ms:.1} ms round trip (the largest hub Gateway, hub stopped, one at a time)");
            println!("  persisted lag at the end p50 {:.0} ms  p99 {:.0} ms  max {:.0} ms", lag(0.5), lag(0.99), lag(1.0));
            println!(
                "  CPU                      hubs {:.2} cores, API server {:.2} cores; per change offered: hubs {:.2} ms, API server {:.2} ms",
                hub_cpu_s / delta_s, api_cpu_s / delta_s, hub_cpu_s * 1000.0 / changes, api_cpu_s * 1000.0 / changes
            );
            for (i, h) in hubs.iter().enumerate() {
                let l = &per_replica_latencies[i];
                println!(
                    "  replica {i}{}                shards {}, status {:.1}/s, reports {:.1}/s, p50 {:.0} ms p99 {:.0} ms ({} samples), CPU {:.2} cores, RSS idle {:.1} MiB, after ingest {:.1} MiB ({:.0} B per pair), after deltas {:.1} MiB",
                    if h.restarted() { "*" } else { " " },
                    held_end[i],
                    h.diff(&m1[i], "gwhub_status_writes_total") as f64 / delta_s,
                    h.diff(&m1[i], "gwhub_report_writes_total") as f64 / delta_s,
                    l.ms(0.5), l.ms(0.99), l.len(),
                    hub_cpu[i] / delta_s, mib(h.rss_idle), mib(h.rss_ingest), per_pair_of(h), mib(rss_end[i].0),
                );
            }
            if let Some((victim, held, started, back, wrong, whole)) = restart {
                println!("  kill -9 + restart        replica {victim} ({held} shards): hub up {started:.2} s, agents back {back:.2} s, whole {whole:.2} s, wrong statuses {wrong}");
            }
            if let Some(l) = dns_line {
                println!("{l}");
            }
        }
        drop(hubs);
        drop(fleet);
        Ok(json)
    })
}
