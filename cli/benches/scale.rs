#![forbid(unsafe_code)]
//! Hub scale benchmark (issue #5 item 8, issue #8 item 2).
//!
//! Starts `gwhub serve --no-kube --insecure` as a child process and drives it
//! over loopback gRPC with simulated agents (one stream and one TCP
//! connection per cluster; Hello, a chunked snapshot, then deltas with
//! sequence numbers under an unacked window). Every cluster reports the same
//! Gateways, so each hub Gateway aggregates `--clusters` reports. Measures:
//!
//! - snapshot ingest: from the first connect until a Dashboard watch shows
//!   every hub Gateway with every cluster (also: all snapshots acked, and
//!   `ListClusters` counting every Gateway);
//! - raw `prost` decode of the same snapshot messages, for comparison;
//! - sustained deltas/s (acked) over `--duration`;
//! - delta-to-Dashboard latency: a sampled delta sets a condition False with
//!   a send timestamp in its message; the watcher times when the aggregated
//!   condition names it;
//! - hub RSS per (cluster, Gateway), from `/proc/<pid>/status`.
//!
//! Run: `cargo bench -p gwhub --bench scale -- [--clusters N] [--gateways N]
//! [--listeners N] [--deltas N] [--duration 10s]`. Without `--bench` (as
//! `cargo test --all-targets` runs it) it ignores its arguments and runs a
//! tiny smoke configuration.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use gwhub_proto::v1::{
    self, agent_message, change, dashboard_client::DashboardClient, hub_message,
    ingest_client::IngestClient,
};
use parking_lot::Mutex;
use prost::Message;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint};

/// Prefix of the condition message that carries a latency mark.
const MARK: &str = "bench-mark t=";
/// How long to wait for the last marks and acks after the delta phase.
const GRACE: Duration = Duration::from_secs(10);

#[derive(Parser, Debug, Clone)]
#[command(about = "gwhub hub scale benchmark (simulated agents over loopback gRPC)")]
struct Args {
    /// Simulated agents, one per cluster.
    #[arg(long, default_value_t = 100)]
    clusters: usize,
    /// Gateways per cluster (the same names in every cluster).
    #[arg(long, default_value_t = 100)]
    gateways: usize,
    /// Listeners per Gateway.
    #[arg(long, default_value_t = 4)]
    listeners: usize,
    /// End the delta phase after this many deltas in total (0: only --duration).
    #[arg(long, default_value_t = 0)]
    deltas: u64,
    /// Length of the sustained delta phase.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Unacked deltas per agent.
    #[arg(long, default_value_t = 32)]
    window: u64,
    /// Mark one delta in this many (per agent) for latency.
    #[arg(long, default_value_t = 50)]
    mark_every: u64,
    /// Gateways per snapshot chunk.
    #[arg(long, default_value_t = 25)]
    chunk: usize,
    /// Hub binary (default: the `gwhub` built with this bench).
    #[arg(long)]
    hub_bin: Option<PathBuf>,
    /// Print only the JSON line.
    #[arg(long)]
    json: bool,
    /// Set by `cargo bench`; without it this is a smoke test.
    #[arg(long, hide = true)]
    bench: bool,
}

/// State the agents and the watcher share.
struct Shared {
    start: Instant,
    gateways: usize,
    /// Outstanding latency mark per (cluster, gateway): send time in µs
    /// since `start` (never 0), or 0 when none.
    marks: Vec<AtomicU64>,
    /// Deltas acked by the hub, all agents.
    acked: AtomicU64,
    /// Deltas sent, all agents (for `--deltas`).
    sent: AtomicU64,
    stop: AtomicBool,
}

impl Shared {
    fn now_us(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX) + 1
    }
}

fn cluster_name(c: usize) -> String {
    format!("c{c:04}")
}

fn gateway_name(g: usize) -> String {
    format!("gw-{g:04}")
}

fn condition(type_: &str, ok: bool, reason: &str, message: String) -> v1::Condition {
    let status = if ok {
        v1::ConditionStatus::True
    } else {
        v1::ConditionStatus::False
    };
    v1::Condition {
        r#type: type_.to_owned(),
        status: status as i32,
        reason: reason.to_owned(),
        message,
        observed_generation: Some(1),
        last_transition_time: 1_746_100_800,
    }
}

/// A realistic report: 3 Gateway conditions, 2 addresses, `listeners`
/// listeners with 2 conditions and one route kind each. `version` varies
/// attachedRoutes so every delta is a real change; a nonzero `mark` turns
/// LoadBalancerReady False with the mark in its message.
fn report(c: usize, g: usize, listeners: usize, version: u64, mark: u64) -> v1::GatewayReport {
    const NAMES: [&str; 4] = ["http", "https", "grpc", "admin"];
    let lb = if mark == 0 {
        condition(
            "LoadBalancerReady",
            true,
            "Ready",
            "The LoadBalancer service is ready".to_owned(),
        )
    } else {
        condition(
            "LoadBalancerReady",
            false,
            "Pending",
            format!("{MARK}{mark}"),
        )
    };
    v1::GatewayReport {
        namespace: format!("ns-{}", g % 10),
        name: gateway_name(g),
        uid: format!("{c:08x}-0000-4000-8000-{g:012x}"),
        generation: 1,
        status: Some(v1::GatewayStatus {
            conditions: vec![
                condition("Accepted", true, "Accepted", "Resource accepted".to_owned()),
                condition(
                    "Programmed",
                    true,
                    "Programmed",
                    "Resource programmed".to_owned(),
                ),
                lb,
            ],
            addresses: (0..2)
                .map(|j| v1::GatewayAddress {
                    r#type: Some("IPAddress".to_owned()),
                    value: format!("10.{}.{}.{}", c / 256, c % 256, (g * 2 + j) % 256),
                })
                .collect(),
            listeners: (0..listeners)
                .map(|l| v1::ListenerStatus {
                    name: NAMES
                        .get(l)
                        .map_or_else(|| format!("l{l}"), |n| (*n).to_owned()),
                    attached_routes: if l == 0 { (version % 7) as i32 } else { 2 },
                    supported_kinds: vec![v1::RouteGroupKind {
                        group: Some("gateway.networking.k8s.io".to_owned()),
                        kind: "HTTPRoute".to_owned(),
                    }],
                    conditions: vec![
                        condition("Accepted", true, "Accepted", String::new()),
                        condition("Programmed", true, "Programmed", String::new()),
                    ],
                })
                .collect(),
            attached_listener_sets: None,
        }),
    }
}

fn msg(m: agent_message::Message) -> v1::AgentMessage {
    v1::AgentMessage { message: Some(m) }
}

/// Hello plus the snapshot chunks (seq 0) of cluster `c`.
fn snapshot_messages(c: usize, args: &Args) -> Vec<v1::AgentMessage> {
    let mut out = vec![msg(agent_message::Message::Hello(v1::Hello {
        agent_version: "gwhub-bench".to_owned(),
        capabilities: Vec::new(),
        cluster: cluster_name(c),
    }))];
    let chunk = args.chunk.max(1);
    let chunks = args.gateways.div_ceil(chunk).max(1);
    for i in 0..chunks {
        let gateways = (i * chunk..((i + 1) * chunk).min(args.gateways))
            .map(|g| report(c, g, args.listeners, 0, 0))
            .collect();
        out.push(msg(agent_message::Message::Snapshot(v1::SnapshotChunk {
            snapshot_id: 1,
            chunk: i as u32,
            r#final: i + 1 == chunks,
            seq: 0,
            gateways,
        })));
    }
    out
}

/// When an agent's snapshot was acked, and how many deltas it had acked.
struct AgentDone {
    snapshot_acked: Instant,
}

async fn connect(url: &str) -> Result<Channel, String> {
    let endpoint = Endpoint::from_shared(url.to_owned())
        .map_err(|e| e.to_string())?
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(10))
        // Large windows, so HTTP/2 flow control round trips do not pace
        // the Dashboard watch's big messages.
        .initial_stream_window_size(Some(64 << 20))
        .initial_connection_window_size(Some(128 << 20));
    let mut last = String::new();
    for _ in 0..20 {
        match endpoint.connect().await {
            Ok(c) => return Ok(c),
            Err(e) => last = format!("{e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("cannot connect to {url}: {last}"))
}

/// One simulated agent: snapshot, wait for `go`, then deltas as fast as
/// acks allow until `shared.stop`.
async fn agent(
    c: usize,
    url: String,
    messages: Vec<v1::AgentMessage>,
    args: Arc<Args>,
    shared: Arc<Shared>,
    mut go: watch::Receiver<bool>,
) -> Result<AgentDone, String> {
    let cluster = cluster_name(c);
    let err = |what: &str, e: &dyn std::fmt::Display| format!("{cluster}: {what}: {e}");
    let mut client = IngestClient::new(connect(&url).await?)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX);
    let (tx, rx) = mpsc::channel(messages.len() + args.window as usize + 1);
    for m in messages {
        tx.send(m).await.map_err(|e| err("queue", &e))?;
    }
    let mut inbound = client
        .report(ReceiverStream::new(rx))
        .await
        .map_err(|e| err("open stream", &e))?
        .into_inner();
    let next =
        async |inbound: &mut tonic::Streaming<v1::HubMessage>| -> Result<Option<u64>, String> {
            match inbound.message().await {
                Ok(Some(m)) => match m.message {
                    Some(hub_message::Message::Ack(a)) => Ok(Some(a.seq)),
                    Some(hub_message::Message::Resync(r))
                        if r.reason != v1::ResyncReason::NewConnection as i32 =>
                    {
                        Err(err("hub asked for a resync", &r.message))
                    }
                    _ => Ok(None),
                },
                Ok(None) => Err(err("stream", &"closed by the hub")),
                Err(e) => Err(err("stream", &e)),
            }
        };
    while next(&mut inbound).await? != Some(0) {}
    let snapshot_acked = Instant::now();
    go.wait_for(|g| *g).await.map_err(|e| err("go", &e))?;

    let g_count = args.gateways;
    let mut next_g = (c * 37) % g_count.max(1);
    let (mut seq, mut acked) = (0u64, 0u64);
    loop {
        while !shared.stop.load(Ordering::Relaxed) && seq - acked < args.window {
            if args.deltas > 0 && shared.sent.fetch_add(1, Ordering::Relaxed) >= args.deltas {
                shared.stop.store(true, Ordering::Relaxed);
                break;
            }
            seq += 1;
            let g = next_g;
            next_g = (next_g + 1) % g_count;
            let slot = &shared.marks[c * shared.gateways + g];
            let mut mark = slot.load(Ordering::Acquire);
            // Keep an outstanding mark until the watcher saw it, so
            // coalescing cannot hide a slow sample.
            if mark == 0 && seq.is_multiple_of(args.mark_every.max(1)) {
                mark = shared.now_us();
                slot.store(mark, Ordering::Release);
            }
            let delta = v1::Delta {
                seq,
                changes: vec![v1::Change {
                    change: Some(change::Change::Upsert(report(
                        c,
                        g,
                        args.listeners,
                        seq,
                        mark,
                    ))),
                }],
            };
            tx.send(msg(agent_message::Message::Delta(delta)))
                .await
                .map_err(|e| err("send", &e))?;
        }
        if acked == seq && shared.stop.load(Ordering::Relaxed) {
            break;
        }
        let wait = if shared.stop.load(Ordering::Relaxed) {
            GRACE
        } else {
            Duration::from_secs(60)
        };
        match tokio::time::timeout(wait, next(&mut inbound)).await {
            Err(_) => return Err(err("waiting for acks", &format!("{acked}/{seq}"))),
            Ok(r) => {
                if let Some(a) = r?
                    && a > acked
                {
                    shared.acked.fetch_add(a - acked, Ordering::Relaxed);
                    acked = a;
                }
            }
        }
    }
    Ok(AgentDone { snapshot_acked })
}

/// What the Dashboard watch delivered.
#[derive(Default)]
struct WatchStats {
    messages: u64,
    bytes: u64,
    max_bytes: u64,
}

/// Follows `WatchGateways`: reports when every hub Gateway has every
/// cluster, and records mark latencies (µs) until `finish`.
async fn watcher(
    url: String,
    clusters: usize,
    shared: Arc<Shared>,
    complete: watch::Sender<Option<Instant>>,
    mut finish: watch::Receiver<bool>,
) -> Result<(Vec<u64>, WatchStats), String> {
    let mut client =
        DashboardClient::new(connect(&url).await?).max_decoding_message_size(usize::MAX);
    let mut stream = client
        .watch_gateways(v1::WatchGatewaysRequest {
            omit_unchanged_omissions: true,
            ..Default::default()
        })
        .await
        .map_err(|e| format!("watch: {e}"))?
        .into_inner();
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut full = 0usize;
    let mut latencies = Vec::new();
    let mut stats = WatchStats::default();
    loop {
        let m = tokio::select! {
            m = stream.message() => m.map_err(|e| format!("watch: {e}"))?,
            _ = finish.wait_for(|f| *f) => break,
        };
        let Some(m) = m else { break };
        let now = shared.now_us();
        let bytes = m.encoded_len() as u64;
        stats.messages += 1;
        stats.bytes += bytes;
        stats.max_bytes = stats.max_bytes.max(bytes);
        if std::env::var_os("GWHUB_BENCH_TRACE").is_some() {
            eprintln!(
                "watch message at {:.3} s: {bytes} bytes, {} upserted",
                now as f64 / 1e6,
                m.upserted.len()
            );
        }
        for gw in &m.upserted {
            let n = gw.clusters.len();
            let old = counts.insert(gw.name.clone(), n).unwrap_or(0);
            if n == clusters && old != clusters {
                full += 1;
            } else if n != clusters && old == clusters {
                full -= 1;
            }
            let Some(g) = gw
                .name
                .strip_prefix("gw-")
                .and_then(|g| g.parse::<usize>().ok())
            else {
                continue;
            };
            let conditions = gw
                .status
                .as_ref()
                .map(|s| &s.conditions[..])
                .unwrap_or_default();
            for cond in conditions {
                if !cond.message.contains(MARK) {
                    continue;
                }
                for fragment in cond.message.split("; ") {
                    let Some((cluster, rest)) = fragment.split_once(' ') else {
                        continue;
                    };
                    let (Some(c), Some(t)) = (
                        cluster
                            .strip_prefix('c')
                            .and_then(|c| c.parse::<usize>().ok()),
                        rest.strip_prefix(MARK).and_then(|t| t.parse::<u64>().ok()),
                    ) else {
                        continue;
                    };
                    let Some(slot) = shared.marks.get(c * shared.gateways + g) else {
                        continue;
                    };
                    if slot
                        .compare_exchange(t, 0, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                    {
                        latencies.push(now.saturating_sub(t));
                    }
                }
            }
        }
        for d in &m.deleted {
            if counts.remove(&d.name) == Some(clusters) {
                full -= 1;
            }
        }
        if full == shared.gateways && complete.borrow().is_none() {
            let _ = complete.send(Some(Instant::now()));
        }
    }
    Ok((latencies, stats))
}

/// The hub child process; killed on drop.
struct HubProcess {
    child: Child,
    ingest: String,
    dashboard: String,
    problems: Arc<Mutex<(usize, Vec<String>)>>,
}

impl Drop for HubProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn field(line: &str, name: &str) -> Option<String> {
    let at = line.find(name)? + name.len();
    Some(line[at..].split_whitespace().next()?.to_owned())
}

/// Starts `gwhub serve` on loopback ports the OS picks, read back from its log.
fn start_hub(bin: &PathBuf) -> Result<HubProcess, String> {
    let mut child = Command::new(bin)
        .args([
            "serve",
            "--no-kube",
            "--insecure",
            "--listen",
            "127.0.0.1:0",
            "--dashboard-listen",
            "127.0.0.1:0",
            "--stale-after",
            "1h",
        ])
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
    let stderr = child.stderr.take().expect("piped");
    let problems = Arc::new(Mutex::new((0usize, Vec::new())));
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let p = problems.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("hub serving") {
                let _ = addr_tx.send((
                    field(&line, "ingest_addr="),
                    field(&line, "dashboard_addr="),
                ));
            } else if (line.contains("WARN") || line.contains("ERROR"))
                && !line.contains("--insecure:")
            {
                let mut p = p.lock();
                p.0 += 1;
                if p.1.len() < 5 {
                    p.1.push(line);
                }
            }
        }
    });
    let mut hub = HubProcess {
        child,
        ingest: String::new(),
        dashboard: String::new(),
        problems,
    };
    match addr_rx.recv_timeout(Duration::from_secs(30)) {
        Ok((Some(i), Some(d))) => {
            hub.ingest = format!("http://{i}");
            hub.dashboard = format!("http://{d}");
            Ok(hub)
        }
        _ => Err(format!("{} did not report its addresses", bin.display())),
    }
}

/// `VmRSS` and `VmHWM` of `pid`, in bytes.
fn rss(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (kib("VmRSS:"), kib("VmHWM:"))
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    format!("{cpus} cpus, {model}")
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i] as f64 / 1000.0
}

/// Polls `ListClusters` until every cluster reports every Gateway.
async fn wait_fleet(url: String, clusters: usize, gateways: usize) -> Result<Instant, String> {
    let mut client =
        DashboardClient::new(connect(&url).await?).max_decoding_message_size(usize::MAX);
    loop {
        let list = client
            .list_clusters(v1::ListClustersRequest {})
            .await
            .map_err(|e| format!("ListClusters: {e}"))?
            .into_inner();
        let done = list
            .clusters
            .iter()
            .filter(|c| c.gateway_count as usize == gateways)
            .count();
        if done == clusters {
            return Ok(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn run(args: Args) -> Result<serde_json::Value, String> {
    if args.clusters == 0 || args.gateways == 0 {
        return Err("--clusters and --gateways must be at least 1".to_owned());
    }
    let args = Arc::new(args);
    let pairs = args.clusters * args.gateways;

    // Messages first, so ingest times only sending and the hub.
    let snapshots: Vec<Vec<v1::AgentMessage>> = (0..args.clusters)
        .map(|c| snapshot_messages(c, &args))
        .collect();
    let encoded: Vec<Vec<u8>> = snapshots
        .iter()
        .flatten()
        .map(|m| m.encode_to_vec())
        .collect();
    let snapshot_bytes: usize = encoded.iter().map(Vec::len).sum();
    let decode_s = (0..3)
        .map(|_| {
            let t = Instant::now();
            for b in &encoded {
                let m = v1::AgentMessage::decode(&b[..]).expect("decodes");
                std::hint::black_box(m);
            }
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min);
    drop(encoded);

    let bin = args
        .hub_bin
        .clone()
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_gwhub")));
    let hub = start_hub(&bin)?;
    let pid = hub.child.id();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        // Let the hub settle before the baseline.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (rss_idle, _) = rss(pid);
        let shared = Arc::new(Shared {
            start: Instant::now(),
            gateways: args.gateways,
            marks: (0..pairs).map(|_| AtomicU64::new(0)).collect(),
            acked: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        let (complete_tx, mut complete) = watch::channel(None);
        let (finish_tx, finish) = watch::channel(false);
        // Its own thread and runtime, so the agents' tasks cannot delay it.
        let watch_task = {
            let (url, clusters, shared) = (hub.dashboard.clone(), args.clusters, shared.clone());
            std::thread::spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())?
                    .block_on(watcher(url, clusters, shared, complete_tx, finish))
            })
        };
        // The watch's first (empty) snapshot must not count.
        tokio::time::sleep(Duration::from_millis(100)).await;

        let (go_tx, go) = watch::channel(false);
        let t0 = Instant::now();
        let fleet_task = tokio::spawn(wait_fleet(hub.dashboard.clone(), args.clusters, args.gateways));
        // The first agent to fail ends the run at once (not after the
        // 600 s wait for a Dashboard that can no longer be complete).
        let (fail_tx, mut failed) = watch::channel(None::<String>);
        let agents: Vec<_> = snapshots
            .into_iter()
            .enumerate()
            .map(|(c, m)| {
                let run = agent(c, hub.ingest.clone(), m, args.clone(), shared.clone(), go.clone());
                let fail_tx = fail_tx.clone();
                tokio::spawn(async move {
                    let done = run.await;
                    if let Err(e) = &done {
                        fail_tx.send_if_modified(|f| f.is_none() && f.replace(e.clone()).is_none());
                    }
                    done
                })
            })
            .collect();
        let timeout = Duration::from_secs(600);
        let complete_or_failed = async {
            tokio::select! {
                done = complete.wait_for(Option::is_some) => {
                    done.map(|t| t.expect("some")).map_err(|_| "watcher ended early".to_owned())
                }
                Ok(e) = failed.wait_for(Option::is_some) => Err(e.clone().expect("some")),
            }
        };
        let dashboard_at = tokio::time::timeout(timeout, complete_or_failed)
            .await
            .map_err(|_| "snapshots did not reach the Dashboard within 600 s".to_owned())??;
        let fleet_at = fleet_task.await.map_err(|e| e.to_string())??;
        let ingest_s = (dashboard_at - t0).as_secs_f64();
        let fleet_s = (fleet_at - t0).as_secs_f64();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (rss_ingest, _) = rss(pid);

        // Sustained deltas.
        let _ = go_tx.send(true);
        let d0 = Instant::now();
        let acked0 = shared.acked.load(Ordering::Relaxed);
        while d0.elapsed() < args.duration && !shared.stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let acked = shared.acked.load(Ordering::Relaxed) - acked0;
        let delta_s = d0.elapsed().as_secs_f64();
        shared.stop.store(true, Ordering::Relaxed);
        let mut acked_at = Vec::with_capacity(agents.len());
        for a in agents {
            acked_at.push(a.await.map_err(|e| e.to_string())??.snapshot_acked);
        }
        let snapshots_acked_s = acked_at
            .iter()
            .max()
            .map_or(0.0, |t| (*t - t0).as_secs_f64());
        // Let the last marks reach the watcher.
        let g0 = Instant::now();
        let outstanding = || shared.marks.iter().filter(|m| m.load(Ordering::Acquire) != 0).count();
        while outstanding() > 0 && g0.elapsed() < GRACE {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let unobserved = outstanding();
        let (rss_deltas, rss_peak) = rss(pid);
        let _ = finish_tx.send(true);
        let (mut latencies, watch) = watch_task
            .join()
            .map_err(|_| "the watcher panicked".to_owned())??;
        latencies.sort_unstable();
        let problems = hub.problems.lock().clone();
        if problems.0 > 0 {
            eprintln!("hub logged {} warnings/errors, e.g.:", problems.0);
            for l in &problems.1 {
                eprintln!("  {l}");
            }
        }

        let per_pair = rss_ingest.saturating_sub(rss_idle) as f64 / pairs as f64;
        let rate = acked as f64 / delta_s;
        let (p50, p99, max) = (
            percentile(&latencies, 0.50),
            percentile(&latencies, 0.99),
            percentile(&latencies, 1.0),
        );
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        let json = serde_json::json!({
            "bench": "hub_scale",
            "machine": machine(),
            "clusters": args.clusters,
            "gateways": args.gateways,
            "listeners": args.listeners,
            "pairs": pairs,
            "snapshot_messages": args.clusters * (args.gateways.div_ceil(args.chunk.max(1))),
            "snapshot_bytes": snapshot_bytes,
            "prost_decode_s": decode_s,
            "snapshots_acked_s": snapshots_acked_s,
            "ingest_fleet_s": fleet_s,
            "ingest_dashboard_s": ingest_s,
            "decode_vs_ingest_pct": 100.0 * decode_s / ingest_s,
            "window": args.window,
            "deltas": acked,
            "delta_phase_s": delta_s,
            "deltas_per_s": rate,
            "latency_ms": {"p50": p50, "p99": p99, "max": max, "samples": latencies.len(), "unobserved": unobserved},
            "watch_messages": watch.messages,
            "watch_bytes": watch.bytes,
            "watch_max_message_bytes": watch.max_bytes,
            "rss_idle_bytes": rss_idle,
            "rss_after_ingest_bytes": rss_ingest,
            "rss_after_deltas_bytes": rss_deltas,
            "rss_peak_bytes": rss_peak,
            "rss_bytes_per_pair": per_pair,
            "hub_warnings": problems.0,
        });
        if !args.json {
            println!(
                "gwhub hub scale: {} clusters x {} Gateways x {} listeners = {} (cluster, Gateway) reports; {}",
                args.clusters, args.gateways, args.listeners, pairs, machine()
            );
            println!("  snapshot                 {:.1} MB in {} messages", snapshot_bytes as f64 / 1e6, json["snapshot_messages"]);
            println!("  prost decode (raw)       {decode_s:.3} s ({:.0} MB/s)", snapshot_bytes as f64 / 1e6 / decode_s);
            println!("  ingest: snapshots acked  {snapshots_acked_s:.3} s");
            println!("  ingest: ListClusters     {fleet_s:.3} s");
            println!("  ingest: Dashboard watch  {ingest_s:.3} s  (raw decode = {:.0}% of it)", 100.0 * decode_s / ingest_s);
            println!("  deltas                   {acked} in {delta_s:.1} s = {rate:.0}/s (window {} per agent)", args.window);
            println!("  delta -> Dashboard       p50 {p50:.1} ms  p99 {p99:.1} ms  max {max:.1} ms  ({} samples, {unobserved} unobserved)", latencies.len());
            println!("  Dashboard watch          {} messages, {:.1} MB, largest {:.1} MB", watch.messages, watch.bytes as f64 / 1e6, watch.max_bytes as f64 / 1e6);
            println!(
                "  hub RSS                  idle {:.1} MiB, after ingest {:.1} MiB ({per_pair:.0} B per (cluster, Gateway)), after deltas {:.1} MiB, peak {:.1} MiB",
                mib(rss_idle), mib(rss_ingest), mib(rss_deltas), mib(rss_peak)
            );
        }
        Ok(json)
    })
}

fn main() {
    let raw: Vec<String> = std::env::args().collect();
    let args = if raw.iter().any(|a| a == "--bench") {
        Args::parse_from(raw)
    } else {
        // `cargo test --all-targets`: a quick smoke run; test harness flags
        // are not ours to parse.
        Args::parse_from([
            "scale",
            "--clusters",
            "3",
            "--gateways",
            "4",
            "--chunk",
            "3",
            "--duration",
            "300ms",
            "--mark-every",
            "2",
        ])
    };
    let smoke = !args.bench;
    match run(args) {
        Ok(json) => {
            println!("{json}");
            if smoke {
                assert!(json["deltas"].as_u64().unwrap_or(0) > 0, "no delta acked");
                assert!(
                    json["latency_ms"]["samples"].as_u64().unwrap_or(0) > 0,
                    "no latency sample"
                );
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
