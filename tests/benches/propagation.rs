//! Propagation on real API servers: how fast does a change on
//! a workload cluster reach the control-plane Gateway through gwhub, next to
//! the floor (an ideal relay that watches the same input and writes the
//! control-plane Gateway directly: the two API hops no design avoids), and
//! how many API writes does a storm of input changes cost?
//!
//! `cargo bench -p gwhub-tests --bench propagation -- --changes 500`
//! (`--help` for the rest). Without `--bench` (as `cargo test --all-targets`
//! runs it) it makes a few changes only, to prove it works.
//!
//! Both paths see the same change at the same moment: one Service status
//! patch on the workload cluster (the load balancer controller provisions or
//! withdraws the address). gwhub's path: the agent's watch, its evaluation,
//! its status write on the workload Gateway and its report over gRPC, the
//! hub's aggregation and its write on the hub Gateway. The relay's path: a
//! watch on the Service and one status write on its own hub Gateway.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use futures::StreamExt;
use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus};
use gwhub_test_kit::apiserver::{create_namespaces, require_assets};
use gwhub_test_kit::latency::Latencies;
use gwhub_test_kit::recorder::Recorder;
use gwhub_test_kit::scenario::{GW, HUB_NS, NS, Proc, Scenario, free_port, wait_listening};
use k8s_openapi::api::core::v1::Service;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

/// Where the relay writes: a namespace gwhub does not watch.
const RELAY_NS: &str = "relay";
const SVC: &str = "gw-lb";
const LB_READY: &str = "LoadBalancerReady";
/// Quiet time after a burst before its writes are counted.
const SETTLE: Duration = Duration::from_secs(3);

#[derive(Debug, Parser)]
#[command(about = "gwhub end-to-end propagation and write amplification on real API servers")]
struct Args {
    /// Input changes to time (each waits until both paths show it).
    #[arg(long, default_value_t = 500)]
    changes: usize,
    /// Quiet time after each timed change has shown on both paths, before
    /// the next: `250ms` makes each change a lone one; `50ms`-`100ms` make
    /// one Gateway change ~10 times a second, which the agent's budget per
    /// cluster (`--kube-api-qps` 20, burst 30) passes at once, and so does
    /// the hub's per-Gateway pacing (one per 50 ms after a burst of three);
    /// the storm shows both bounds.
    #[arg(long, default_value = "250ms", value_parser = humantime::parse_duration)]
    gap: Duration,
    /// The agent's `--kube-api-qps` (its pass budget for the cluster).
    /// `--agent-qps 10 --agent-burst 3` paces this bench's one Gateway as
    /// the per-Gateway bucket before issue 26 did.
    #[arg(long, default_value_t = gwhub_common::fair_pace::DEFAULT_QPS)]
    agent_qps: f64,
    /// The agent's `--kube-api-burst`.
    #[arg(long, default_value_t = gwhub_common::fair_pace::DEFAULT_BURST)]
    agent_burst: u32,
    /// Input changes in the storm.
    #[arg(long, default_value_t = 1000)]
    storm: usize,
    /// How long the storm should take.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    storm_over: Duration,
    /// Give up on one change after this long (counted, not timed).
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Copy the hub's and the agent's logs here at the end (set
    /// `GWHUB_E2E_LOG` for more than `info`).
    #[arg(long)]
    logs_to: Option<std::path::PathBuf>,
    /// Set by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() {
    let raw: Vec<String> = std::env::args().collect();
    if gwhub_test_kit::smoke::answered_listing(&raw) {
        return;
    }
    let args = if raw.iter().any(|a| a == "--bench") {
        Args::parse_from(raw)
    } else {
        // `cargo test --all-targets` or cargo-nextest: a smoke run; harness
        // flags are not ours.
        Args::parse_from(["propagation", "--changes", "4", "--storm", "40"])
    };
    if !require_assets("propagation bench") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    if let Err(e) = runtime.block_on(run(args)) {
        eprintln!("propagation: {e}");
        std::process::exit(1);
    }
}

type Result<T, E = String> = std::result::Result<T, E>;

fn kube_err(what: &str) -> impl Fn(kube::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

async fn run(args: Args) -> Result<()> {
    let scenario = Scenario::start(&["east"], Duration::from_secs(30)).await;
    let workload = scenario.workloads["east"].clone();
    let port = free_port();
    let _hub: Proc = scenario.hub("hub", port, None);
    if !wait_listening(port, Duration::from_secs(30)).await {
        return Err(format!(
            "the hub did not listen: {}",
            scenario.log("hub").display()
        ));
    }
    let _agent: Proc = scenario.agent_with(
        "agent",
        "east",
        &format!("http://127.0.0.1:{port}"),
        &[
            format!("--kube-api-qps={}", args.agent_qps),
            format!("--kube-api-burst={}", args.agent_burst),
        ],
    );

    create_namespaces(&scenario.mgmt, &[RELAY_NS])
        .await
        .map_err(|e| format!("relay namespace: {e}"))?;
    create_relay_gateway(&scenario.mgmt).await?;
    let relay = tokio::spawn(relay(workload.clone(), scenario.mgmt.clone()));

    let began = Instant::now();
    let hub_gw = Recorder::start(scenario.hub_gateways(), GW);
    let relay_gw = Recorder::start(Api::namespaced(scenario.mgmt.clone(), RELAY_NS), GW);
    // Both paths settled on "provisioned" before the clock starts.
    for (name, r) in [("gwhub", &hub_gw), ("relay", &relay_gw)] {
        first_with(r, began, "True", args.timeout)
            .await
            .ok_or_else(|| format!("{name}: never showed {LB_READY}=True"))?;
    }

    // ---- propagation -----------------------------------------------------
    let services: Api<Service> = Api::namespaced(workload.clone(), NS);
    let (mut ours, mut floor, mut timeouts) = (Vec::new(), Vec::new(), 0usize);
    for i in 0..args.changes {
        let provisioned = i % 2 == 1;
        let want = if provisioned { "True" } else { "False" };
        let t0 = Instant::now();
        if args.logs_to.is_some() {
            eprintln!("{} change {i} sent", jiff::Timestamp::now());
        }
        set_lb(&services, provisioned, i).await?;
        let (a, b) = tokio::join!(
            first_with(&hub_gw, t0, want, args.timeout),
            first_with(&relay_gw, t0, want, args.timeout)
        );
        match (a, b) {
            (Some(a), Some(b)) => {
                ours.push(a - t0);
                floor.push(b - t0);
            }
            _ => timeouts += 1,
        }
        tokio::time::sleep(args.gap).await;
    }
    // End provisioned, for the storm's baseline.
    if args.changes % 2 == 1 {
        set_lb(&services, true, args.changes).await?;
    }

    // ---- write amplification ---------------------------------------------
    tokio::time::sleep(SETTLE).await;
    let writes = WriteCounter::start(&workload, &scenario.mgmt);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = writes.snapshot();
    let storm_started = Instant::now();
    let gap = args.storm_over / args.storm.max(1) as u32;
    // Each change is sent at its time; API calls overlap so the storm keeps
    // its pace however long one call takes.
    let results: Vec<Result<()>> = futures::stream::iter(0..args.storm)
        .map(|i| {
            let services = services.clone();
            async move {
                tokio::time::sleep_until((storm_started + gap * i as u32).into()).await;
                set_lb(&services, i % 2 == 1, i).await
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    results.into_iter().collect::<Result<()>>()?;
    let storm_took = storm_started.elapsed();
    // Whatever order the calls landed in, end provisioned.
    set_lb(&services, true, args.storm).await?;
    tokio::time::sleep(SETTLE).await;
    let storm = writes.snapshot().since(&before);
    let storm_counted = storm_started.elapsed();

    let before = writes.snapshot();
    for i in 0..args.storm {
        // A change no status depends on: an annotation on the Service.
        let patch = json!({"metadata": {"annotations": {"gwhub.bench/touch": i.to_string()}}});
        services
            .patch(SVC, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(kube_err("annotate the Service"))?;
    }
    tokio::time::sleep(SETTLE).await;
    let noop = writes.snapshot().since(&before);
    relay.abort();
    if let Some(dir) = &args.logs_to {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for tag in ["hub", "agent"] {
            let to = dir.join(format!("{tag}.log"));
            std::fs::copy(scenario.log(tag), &to).map_err(|e| format!("{}: {e}", to.display()))?;
        }
    }

    report(
        &args,
        &ours,
        &floor,
        timeouts,
        (storm_took, storm_counted),
        &storm,
        &noop,
    );
    let agent_bound = agent_bound(&args, storm_counted);
    if storm.workload_gateway > agent_bound {
        return Err(format!(
            "the storm cost {} workload Gateway writes, over the agent's budget of {agent_bound}",
            storm.workload_gateway
        ));
    }
    if timeouts > 0 {
        return Err(format!("{timeouts} changes never reached the hub Gateway"));
    }
    // ClusterReports also carry a `lastSeenTime` refreshed on a timer: not
    // a write caused by the change.
    if noop.workload_gateway + noop.hub_gateway != 0 {
        return Err(format!(
            "changes that alter no status caused writes: {noop:?}"
        ));
    }
    Ok(())
}

/// The load balancer controller provisions (a fresh address each time) or
/// withdraws the Service's address.
async fn set_lb(services: &Api<Service>, provisioned: bool, i: usize) -> Result<()> {
    let lb = if provisioned {
        json!({"ingress": [{"ip": format!("192.0.2.{}", 10 + i % 200)}]})
    } else {
        json!({})
    };
    let body = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": SVC},
                      "status": {"loadBalancer": lb}});
    services
        .patch_status(
            SVC,
            &PatchParams::apply("lb-controller").force(),
            &Patch::Apply(&body),
        )
        .await
        .map(|_| ())
        .map_err(kube_err("patch the Service status"))
}

/// The first status at or after `since` whose `LoadBalancerReady` is `want`.
async fn first_with(r: &Recorder, since: Instant, want: &str, within: Duration) -> Option<Instant> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(s) = r
            .seen()
            .into_iter()
            .find(|s| s.at >= since && lb_ready(&s.status) == Some(want))
        {
            return Some(s.at);
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn lb_ready(status: &GatewayStatus) -> Option<&str> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == LB_READY)
        .map(|c| c.status.as_str())
}

// ---- the ideal relay ----------------------------------------------------

async fn create_relay_gateway(mgmt: &Client) -> Result<()> {
    let gw: Gateway = serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": GW, "namespace": RELAY_NS},
        "spec": {"gatewayClassName": "relay", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}
    }))
    .map_err(|e| e.to_string())?;
    Api::<Gateway>::namespaced(mgmt.clone(), RELAY_NS)
        .create(&PostParams::default(), &gw)
        .await
        .map(|_| ())
        .map_err(kube_err("create the relay's Gateway"))
}

/// The floor: watch the Service, write the verdict onto the control-plane
/// Gateway. Nothing else: no evaluation rules, no aggregation, no report.
async fn relay(workload: Client, mgmt: Client) {
    let services: Api<Service> = Api::namespaced(workload, NS);
    let target: Api<Gateway> = Api::namespaced(mgmt, RELAY_NS);
    let cfg = watcher::Config::default().fields(&format!("metadata.name={SVC}"));
    let mut stream = watcher::watcher(services, cfg).boxed();
    let mut last = None;
    while let Some(ev) = stream.next().await {
        let (Ok(watcher::Event::Apply(svc)) | Ok(watcher::Event::InitApply(svc))) = ev else {
            continue;
        };
        let ready = svc
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|lb| lb.ingress)
            .is_some_and(|i| !i.is_empty());
        if last == Some(ready) {
            continue;
        }
        last = Some(ready);
        let (status, reason) = if ready {
            ("True", "LoadBalancerProvisioned")
        } else {
            ("False", "LoadBalancerPending")
        };
        let body = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": GW, "namespace": RELAY_NS},
            "status": {"conditions": [{"type": LB_READY, "status": status, "reason": reason,
                "message": "", "observedGeneration": 1,
                "lastTransitionTime": jiff::Timestamp::now().to_string()}]}});
        let _ = target
            .patch_status(
                GW,
                &PatchParams::apply("relay").force(),
                &Patch::Apply(&body),
            )
            .await;
    }
}

// ---- API writes ---------------------------------------------------------

/// Counts writes the API server saw (new resourceVersions) on the workload
/// Gateway (the agent's), the hub Gateway and the hub's ClusterReports.
struct WriteCounter {
    counts: Arc<[AtomicU64; 3]>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

#[derive(Clone, Debug, Default)]
struct Writes {
    workload_gateway: u64,
    hub_gateway: u64,
    cluster_reports: u64,
}

impl Writes {
    fn since(&self, before: &Writes) -> Writes {
        Writes {
            workload_gateway: self.workload_gateway - before.workload_gateway,
            hub_gateway: self.hub_gateway - before.hub_gateway,
            cluster_reports: self.cluster_reports - before.cluster_reports,
        }
    }
}

impl WriteCounter {
    fn start(workload: &Client, mgmt: &Client) -> WriteCounter {
        let counts: Arc<[AtomicU64; 3]> = Arc::new(Default::default());
        let gw_cfg = || watcher::Config::default().fields(&format!("metadata.name={GW}"));
        let tasks = vec![
            count(
                Api::<Gateway>::namespaced(workload.clone(), NS),
                gw_cfg(),
                counts.clone(),
                0,
            ),
            count(
                Api::<Gateway>::namespaced(mgmt.clone(), NS),
                gw_cfg(),
                counts.clone(),
                1,
            ),
            count(
                Api::<gwhub_hub_rules::report::ClusterReport>::namespaced(mgmt.clone(), HUB_NS),
                watcher::Config::default(),
                counts.clone(),
                2,
            ),
        ];
        WriteCounter { counts, tasks }
    }

    fn snapshot(&self) -> Writes {
        let c = |i: usize| self.counts[i].load(Ordering::SeqCst);
        Writes {
            workload_gateway: c(0),
            hub_gateway: c(1),
            cluster_reports: c(2),
        }
    }
}

impl Drop for WriteCounter {
    fn drop(&mut self) {
        self.tasks.iter().for_each(|t| t.abort());
    }
}

fn count<K>(
    api: Api<K>,
    cfg: watcher::Config,
    counts: Arc<[AtomicU64; 3]>,
    slot: usize,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    tokio::spawn(async move {
        let mut versions: BTreeMap<String, String> = BTreeMap::new();
        let mut stream = watcher::watcher(api, cfg).boxed();
        while let Some(ev) = stream.next().await {
            let (Ok(watcher::Event::Apply(o)) | Ok(watcher::Event::InitApply(o))) = ev else {
                continue;
            };
            let meta = o.meta();
            let (Some(name), Some(rv)) = (meta.name.clone(), meta.resource_version.clone()) else {
                continue;
            };
            // The initial list (and a re-list) repeats versions already seen.
            if let Some(old) = versions.insert(name, rv.clone())
                && old != rv
            {
                counts[slot].fetch_add(1, Ordering::SeqCst);
            }
        }
    })
}

// ---- the report -----------------------------------------------------------

/// The agent's passes (each at most one workload Gateway write) over
/// `counted` (the storm and the settling time after it): its budget per
/// cluster, `burst + qps·W`, plus one pass begun before (no bound for qps 0).
fn agent_bound(args: &Args, counted: Duration) -> u64 {
    if args.agent_qps <= 0.0 {
        return u64::MAX;
    }
    u64::from(args.agent_burst.max(1)) + (args.agent_qps * counted.as_secs_f64()).ceil() as u64 + 1
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn report(
    args: &Args,
    ours: &[Duration],
    floor: &[Duration],
    timeouts: usize,
    (storm_took, storm_counted): (Duration, Duration),
    storm: &Writes,
    noop: &Writes,
) {
    let histogram = |v: &[Duration]| {
        let mut l = Latencies::new();
        for d in v {
            l.record(*d);
        }
        l
    };
    let (ours, floor) = (histogram(ours), histogram(floor));
    let at = |l: &Latencies, q: f64| l.quantile(q).unwrap_or_default();
    println!(
        "propagation: {} changes timed ({} apart), {timeouts} timed out",
        ours.len(),
        humantime::format_duration(args.gap)
    );
    println!("| | p50 | p99 | max |");
    println!("| --- | --- | --- | --- |");
    for (name, v) in [("gwhub", &ours), ("ideal relay", &floor)] {
        println!(
            "| {name} | {} | {} | {} |",
            ms(at(v, 0.5)),
            ms(at(v, 0.99)),
            ms(at(v, 1.0))
        );
    }
    let ratio = |q: f64| at(&ours, q).as_secs_f64() / at(&floor, q).as_secs_f64().max(1e-9);
    println!(
        "| gwhub / relay | {:.2}x (target <= 2x) | {:.2}x (target <= 3x) | |",
        ratio(0.5),
        ratio(0.99)
    );
    println!(
        "storm: {} Service status changes in {} -> API writes: workload Gateway {}, hub Gateway {}, ClusterReports {}",
        args.storm,
        ms(storm_took),
        storm.workload_gateway,
        storm.hub_gateway,
        storm.cluster_reports
    );
    // The hub: per Gateway a burst of KEYED_BURST passes, then one per
    // 50 ms window (the default), counted over the storm plus the settling
    // time after it.
    let windows = |w: u64| {
        ((storm_took + SETTLE).as_millis() as u64).div_ceil(w)
            + u64::from(gwhub_common::pace::KEYED_BURST)
    };
    println!(
        "storm bound: workload Gateway <= {} (the agent's cluster budget: burst {} + {}/s), hub Gateway <= {} (burst + 50 ms windows)",
        agent_bound(args, storm_counted),
        args.agent_burst,
        args.agent_qps,
        windows(50)
    );
    println!(
        "no-op: {} annotation changes -> API writes: workload Gateway {}, hub Gateway {}, ClusterReports {} (target 0; ClusterReports also refresh lastSeenTime on a timer)",
        args.storm, noop.workload_gateway, noop.hub_gateway, noop.cluster_reports
    );
}
