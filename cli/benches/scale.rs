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
//! [--listeners N] [--deltas N] [--duration 10s]`.
//!
//! `--kube` (issue #15): the hub in Kubernetes mode against a real
//! management API server (etcd + kube-apiserver from the end-to-end
//! harness in `gwhub-test-kit`, the manifests installed, the hub running as its
//! ServiceAccount), one hub Gateway per Gateway name. `--rate N` offers N
//! changes per second over all clusters, each to a random (cluster,
//! Gateway), instead of every agent as fast as acks allow. Measures change
//! -> the hub Gateway's status on the API server (a watch there) p50 / p99
//! / max, ClusterReport writes/s and bytes/s, status writes/s, waits for
//! `--kube-api-qps`, how far the newest persisted report lags the newest
//! change sent at the end of the load, hub and API server CPU, hub RSS,
//! the store's bytes per (cluster, Gateway), and with `--restart-at 20s` a
//! `kill -9` and restart of the hub: time until the agents are back and
//! every hub Gateway has its pre-kill shape, and the statuses written
//! meanwhile that had another shape or showed a cluster stale. Without `--bench` (as
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
    /// Kubernetes mode: a real management API server (the end-to-end
    /// harness), the manifests installed, one hub Gateway per Gateway name,
    /// `gwhub serve` writing status and ClusterReports there.
    #[arg(long)]
    kube: bool,
    /// Offered load in changes per second over all clusters, each to a
    /// random (cluster, Gateway); 0: every agent as fast as acks allow.
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// `gwhub serve --kube-api-qps` (Kubernetes mode).
    #[arg(long, default_value_t = 100.0)]
    qps: f64,
    /// `gwhub serve --kube-api-burst` (Kubernetes mode).
    #[arg(long, default_value_t = 200)]
    burst: u32,
    /// Kubernetes mode: `kill -9` the hub this far into the delta phase and
    /// start it again (agents reconnect and resend their snapshot).
    #[arg(long, value_parser = humantime::parse_duration)]
    restart_at: Option<Duration>,
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
    /// Per cluster, wall-clock ms of the last delta sent (for the store's lag).
    last_sent_ms: Vec<AtomicU64>,
    /// Agents whose stream is open and snapshot acked (restart recovery).
    streaming: AtomicU64,
    /// Agents opening their stream at once: 1,000 connecting together on a
    /// loaded machine overflowed the listen backlog and some agents gave up
    /// (the run then waited for them until its timeout).
    opening: tokio::sync::Semaphore,
}

impl Shared {
    /// A run's counters for `clusters` x `gateways`, started now.
    fn new(clusters: usize, gateways: usize) -> Self {
        Shared {
            start: Instant::now(),
            gateways,
            marks: (0..clusters * gateways)
                .map(|_| AtomicU64::new(0))
                .collect(),
            acked: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            last_sent_ms: (0..clusters).map(|_| AtomicU64::new(0)).collect(),
            streaming: AtomicU64::new(0),
            opening: tokio::sync::Semaphore::new(64),
        }
    }
}

fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
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

/// Opens the report stream, sends `messages` (Hello and the snapshot)
/// and waits for the snapshot's ack.
async fn open(
    url: &str,
    messages: Vec<v1::AgentMessage>,
    window: u64,
    cluster: &str,
    snapshot_seq: u64,
) -> Result<
    (
        mpsc::Sender<v1::AgentMessage>,
        tonic::Streaming<v1::HubMessage>,
    ),
    String,
> {
    let err = |what: &str, e: &dyn std::fmt::Display| format!("{cluster}: {what}: {e}");
    let mut client = IngestClient::new(connect(url).await?)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX);
    let (tx, rx) = mpsc::channel(messages.len() + window as usize + 1);
    for m in messages {
        tx.send(m).await.map_err(|e| err("queue", &e))?;
    }
    let mut inbound = client
        .report(ReceiverStream::new(rx))
        .await
        .map_err(|e| err("open stream", &e))?
        .into_inner();
    while next_ack(&mut inbound, cluster)
        .await?
        .is_none_or(|a| a < snapshot_seq)
    {}
    Ok((tx, inbound))
}

async fn next_ack(
    inbound: &mut tonic::Streaming<v1::HubMessage>,
    cluster: &str,
) -> Result<Option<u64>, String> {
    let err = |what: &str, e: &dyn std::fmt::Display| format!("{cluster}: {what}: {e}");
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
}

/// One simulated agent: snapshot, wait for `go`, then deltas as fast as
/// acks allow (or, with `requests`, one per requested Gateway) until
/// `shared.stop`. With `reconnect`, a broken stream (the hub killed) is
/// opened again with a fresh snapshot, as a real agent does.
#[allow(clippy::too_many_arguments)]
async fn agent(
    c: usize,
    url: String,
    messages: Vec<v1::AgentMessage>,
    args: Arc<Args>,
    shared: Arc<Shared>,
    mut go: watch::Receiver<bool>,
    mut requests: Option<mpsc::UnboundedReceiver<usize>>,
    reconnect: bool,
) -> Result<AgentDone, String> {
    let cluster = cluster_name(c);
    let err = |what: &str, e: &dyn std::fmt::Display| format!("{cluster}: {what}: {e}");
    let permit = shared
        .opening
        .acquire()
        .await
        .map_err(|e| err("opening", &e))?;
    let (mut tx, mut inbound) = open(&url, messages, args.window, &cluster, 0).await?;
    drop(permit);
    shared.streaming.fetch_add(1, Ordering::Relaxed);
    let snapshot_acked = Instant::now();
    go.wait_for(|g| *g).await.map_err(|e| err("go", &e))?;

    let g_count = args.gateways;
    let mut next_g = (c * 37) % g_count.max(1);
    let (mut seq, mut acked) = (0u64, 0u64);
    let mut requested: Option<usize> = None;
    // Each Gateway's last delta version, for a resent snapshot.
    let mut versions = vec![0u64; g_count];
    let delta_for = |g: usize, seq: u64, shared: &Shared| {
        let slot = &shared.marks[c * shared.gateways + g];
        let mut mark = slot.load(Ordering::Acquire);
        // Keep an outstanding mark until the watcher saw it, so
        // coalescing cannot hide a slow sample.
        let every = if args.rate > 0.0 {
            1
        } else {
            args.mark_every.max(1)
        };
        if mark == 0 && seq.is_multiple_of(every) {
            mark = shared.now_us();
            slot.store(mark, Ordering::Release);
        }
        (mark, report(c, g, args.listeners, seq, mark))
    };
    loop {
        let stopping = shared.stop.load(Ordering::Relaxed);
        let mut wanted: Option<usize> = requested.take();
        if wanted.is_none() && !stopping && seq - acked < args.window {
            match requests.as_mut() {
                None => {
                    if args.deltas > 0 && shared.sent.fetch_add(1, Ordering::Relaxed) >= args.deltas
                    {
                        shared.stop.store(true, Ordering::Relaxed);
                    } else {
                        wanted = Some(next_g);
                        next_g = (next_g + 1) % g_count;
                    }
                }
                Some(r) => {
                    if let Ok(g) = r.try_recv() {
                        wanted = Some(g);
                    }
                }
            }
        }
        if let Some(g) = wanted {
            seq += 1;
            versions[g] = seq;
            let (_, upsert) = delta_for(g, seq, &shared);
            let delta = v1::Delta {
                seq,
                changes: vec![v1::Change {
                    change: Some(change::Change::Upsert(upsert)),
                }],
                ..Default::default()
            };
            shared.last_sent_ms[c].store(wall_ms(), Ordering::Relaxed);
            if tx
                .send(msg(agent_message::Message::Delta(delta)))
                .await
                .is_err()
                && !reconnect
            {
                return Err(err("send", &"stream closed"));
            }
            continue;
        }
        if acked == seq && shared.stop.load(Ordering::Relaxed) {
            break;
        }
        let wait = if shared.stop.load(Ordering::Relaxed) {
            GRACE
        } else {
            Duration::from_secs(60)
        };
        let got = tokio::select! {
            r = tokio::time::timeout(wait, next_ack(&mut inbound, &cluster)) => Some(r),
            Some(g) = async {
                match requests.as_mut() {
                    Some(r) if seq - acked < args.window => r.recv().await,
                    _ => std::future::pending().await,
                }
            } => {
                // Sent at the top of the loop.
                requested = Some(g);
                None
            }
        };
        match got {
            None => {}
            Some(Err(_)) => return Err(err("waiting for acks", &format!("{acked}/{seq}"))),
            Some(Ok(Ok(a))) => {
                if let Some(a) = a
                    && a > acked
                {
                    shared.acked.fetch_add(a - acked, Ordering::Relaxed);
                    acked = a;
                }
            }
            Some(Ok(Err(e))) if reconnect => {
                // The hub went away: reconnect with a snapshot of what was
                // last sent (its unacked deltas included), seq carried on.
                shared.streaming.fetch_sub(1, Ordering::Relaxed);
                if std::env::var_os("GWHUB_BENCH_TRACE").is_some() {
                    eprintln!("{e}; reconnecting");
                }
                loop {
                    let mut messages = vec![msg(agent_message::Message::Hello(v1::Hello {
                        agent_version: "gwhub-bench".to_owned(),
                        capabilities: Vec::new(),
                        cluster: cluster.clone(),
                    }))];
                    let chunk = args.chunk.max(1);
                    let chunks = g_count.div_ceil(chunk).max(1);
                    seq += 1;
                    for i in 0..chunks {
                        let gateways = (i * chunk..((i + 1) * chunk).min(g_count))
                            .map(|g| {
                                let mark =
                                    shared.marks[c * shared.gateways + g].load(Ordering::Acquire);
                                report(c, g, args.listeners, versions[g], mark)
                            })
                            .collect();
                        messages.push(msg(agent_message::Message::Snapshot(v1::SnapshotChunk {
                            snapshot_id: seq,
                            chunk: i as u32,
                            r#final: i + 1 == chunks,
                            seq,
                            gateways,
                        })));
                    }
                    match open(&url, messages, args.window, &cluster, seq).await {
                        Ok((t, i)) => {
                            (tx, inbound) = (t, i);
                            acked = seq;
                            shared.streaming.fetch_add(1, Ordering::Relaxed);
                            break;
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                    }
                }
            }
            Some(Ok(Err(e))) => return Err(e),
        }
    }
    Ok(AgentDone { snapshot_acked })
}

/// Records the latency of every outstanding mark `message` shows for
/// Gateway `g` (clusters' messages joined by "; ").
fn take_marks(message: &str, g: usize, shared: &Shared, now: u64, latencies: &mut Vec<u64>) {
    if !message.contains(MARK) {
        return;
    }
    for fragment in message.split("; ") {
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
                take_marks(&cond.message, g, &shared, now, &mut latencies);
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
    start_hub_with(
        bin,
        &[
            "--no-kube",
            "--listen",
            "127.0.0.1:0",
            "--dashboard-listen",
            "127.0.0.1:0",
            "--stale-after",
            "1h",
        ],
    )
}

/// `gwhub serve --insecure` with `extra` flags.
fn start_hub_with(bin: &PathBuf, extra: &[&str]) -> Result<HubProcess, String> {
    let mut child = Command::new(bin)
        .args(["serve", "--insecure"])
        .args(extra)
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
                && !line.contains("Server cert bypassed")
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
        let shared = Arc::new(Shared::new(args.clusters, args.gateways));
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
                let run = agent(c, hub.ingest.clone(), m, args.clone(), shared.clone(), go.clone(), None, false);
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
                    done.map(|t| t.expect("some")).map_err(|_| None)
                }
                Ok(e) = failed.wait_for(Option::is_some) => Err(e.clone()),
            }
        };
        let dashboard_at = match tokio::time::timeout(timeout, complete_or_failed).await {
            Err(_) => return Err("snapshots did not reach the Dashboard within 600 s".to_owned()),
            Ok(Ok(at)) => at,
            Ok(Err(Some(e))) => return Err(e),
            // The watcher returned before the fleet was complete: say why,
            // and what the hub logged.
            Ok(Err(None)) => {
                let why = match watch_task.join() {
                    Ok(Err(e)) => e,
                    Ok(Ok(_)) => "the hub ended the Dashboard watch".to_owned(),
                    Err(_) => "the watcher panicked".to_owned(),
                };
                let problems = hub.problems.lock().clone();
                return Err(format!(
                    "watcher ended before the fleet was complete: {why}; the hub logged {} warnings/errors: {:?}",
                    problems.0, problems.1
                ));
            }
        };
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

// ------------------------------------------------------------ Kubernetes mode

/// What a hub Gateway's status looks like, for "whole again" after a
/// restart: the hub's own verdict and how many listeners and addresses it
/// carries (a cluster missing shows as fewer), and whether a cluster is
/// shown stale.
#[derive(Clone, Debug, PartialEq)]
struct Shape {
    own_reason: String,
    listeners: usize,
    addresses: usize,
    stale: bool,
}

impl Shape {
    fn of(status: &serde_json::Value) -> Shape {
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

/// What the watch on the hub Gateways saw.
#[derive(Default)]
struct KubeView {
    shapes: HashMap<String, Shape>,
    /// Shapes when the hub was killed; `Some` while a restart is judged.
    baseline: Option<HashMap<String, Shape>>,
    /// Statuses written during the restart that differ from the baseline's
    /// shape, name a stale cluster or no clusters.
    wrong: u64,
    events: u64,
}

impl KubeView {
    fn whole(&self) -> bool {
        self.baseline
            .as_ref()
            .is_some_and(|b| b.iter().all(|(n, s)| self.shapes.get(n) == Some(s)))
    }
}

/// Watches the hub Gateways on the management API server: mark
/// latencies (change -> status there) and the shapes.
async fn hub_gateway_watcher(
    client: kube::Client,
    shared: Arc<Shared>,
    view: Arc<Mutex<KubeView>>,
    mut finish: watch::Receiver<bool>,
) -> Result<Vec<u64>, String> {
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
    let mut latencies = Vec::new();
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
        let status = obj.data.get("status").cloned().unwrap_or_default();
        if let Some(g) = name
            .strip_prefix("gw-")
            .and_then(|g| g.parse::<usize>().ok())
        {
            for c in status["conditions"].as_array().into_iter().flatten() {
                if let Some(m) = c["message"].as_str() {
                    take_marks(m, g, &shared, now, &mut latencies);
                }
            }
        }
        let shape = Shape::of(&status);
        let mut v = view.lock();
        v.events += 1;
        if let Some(b) = &v.baseline {
            let wrong = shape.stale
                || shape.own_reason == "NoClusters"
                || b.get(&name).is_some_and(|s| *s != shape);
            if wrong {
                v.wrong += 1;
            }
        }
        v.shapes.insert(name, shape);
    }
    Ok(latencies)
}

/// utime + stime of `pid` in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command (which may hold spaces) end with ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15; `rest` starts at field 3.
    (ticks(11) + ticks(12)) as f64 / 100.0
}

/// The pid of the kube-apiserver serving `port`.
fn apiserver_pid(port: u16) -> Option<u32> {
    let flag = format!("--secure-port={port}");
    std::fs::read_dir("/proc").ok()?.find_map(|e| {
        let e = e.ok()?;
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        let cmd = String::from_utf8_lossy(&cmd);
        (cmd.contains("kube-apiserver") && cmd.split('\0').any(|a| a == flag)).then_some(pid)
    })
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Per cluster, the newest `lastReportTime` over its ClusterReports (ms)
/// and how many bytes its objects take.
/// The largest hub Gateway on the API server: its status's and its whole
/// object's size (managedFields included), in bytes of JSON, and the
/// object. What each status write carries and the API server decodes,
/// merges and stores.
async fn largest_hub_gateway(
    client: &kube::Client,
) -> Result<
    (
        usize,
        usize,
        Option<gateway_api::apis::standard::gateways::Gateway>,
    ),
    String,
> {
    let api: kube::Api<gateway_api::apis::standard::gateways::Gateway> =
        kube::Api::all(client.clone());
    let list = api
        .list(&Default::default())
        .await
        .map_err(|e| format!("list hub Gateways: {e}"))?;
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
async fn status_apply_cost(
    client: &kube::Client,
    api_pid: Option<u32>,
    gw: &gateway_api::apis::standard::gateways::Gateway,
) -> Result<(f64, f64), String> {
    const APPLIES: u32 = 40;
    let ns = gw.metadata.namespace.clone().unwrap_or_default();
    let name = gw.metadata.name.clone().unwrap_or_default();
    let api: kube::Api<gateway_api::apis::standard::gateways::Gateway> =
        kube::Api::namespaced(client.clone(), &ns);
    let mut status = serde_json::to_value(&gw.status).map_err(|e| e.to_string())?;
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
        .map_err(|e| format!("status apply probe: {e}"))?;
    }
    let wall_ms = t0.elapsed().as_secs_f64() * 1000.0 / f64::from(APPLIES);
    let cpu_ms = (api_pid.map_or(0.0, cpu_seconds) - cpu0) * 1000.0 / f64::from(APPLIES);
    Ok((cpu_ms, wall_ms))
}

async fn stored_reports(
    client: &kube::Client,
) -> Result<(HashMap<String, u64>, HashMap<String, u64>, usize), String> {
    let api: kube::Api<gwhub_hub_rules::report::ClusterReport> =
        kube::Api::namespaced(client.clone(), "gwhub-system");
    let list = api
        .list(&Default::default())
        .await
        .map_err(|e| format!("list ClusterReports: {e}"))?;
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

fn run_kube(args: Args) -> Result<serde_json::Value, String> {
    if args.clusters == 0 || args.gateways == 0 {
        return Err("--clusters and --gateways must be at least 1".to_owned());
    }
    if !gwhub_test_kit::apiserver::require_assets("scale --kube") {
        return Err("no kube-apiserver assets (see scripts/kube-assets.sh)".to_owned());
    }
    let args = Arc::new(args);
    let pairs = args.clusters * args.gateways;
    let bin = args
        .hub_bin
        .clone()
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_gwhub")));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let fleet = gwhub_test_kit::apiserver::Fleet::start(&["mgmt"])
            .await
            .map_err(|e| format!("start the API server: {e}"))?;
        let mgmt = fleet.cluster("mgmt");
        gwhub_test_kit::install::install_hub(mgmt).await;
        let admin = mgmt.client().await.map_err(|e| e.to_string())?;
        let namespaces: Vec<String> = (0..10.min(args.gateways)).map(|i| format!("ns-{i}")).collect();
        let ns_refs: Vec<&str> = namespaces.iter().map(String::as_str).collect();
        gwhub_test_kit::apiserver::create_namespaces(&admin, &ns_refs)
            .await
            .map_err(|e| format!("namespaces: {e}"))?;
        for g in 0..args.gateways {
            let ns = format!("ns-{}", g % 10);
            let api: kube::Api<gateway_api::apis::standard::gateways::Gateway> =
                kube::Api::namespaced(admin.clone(), &ns);
            let gw = serde_json::from_value(serde_json::json!({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": {"name": gateway_name(g), "namespace": ns},
                "spec": {"gatewayClassName": "kuadrant-multi-cluster-gateway-instance-per-cluster",
                         "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}
            }))
            .map_err(|e| e.to_string())?;
            api.create(&Default::default(), &gw)
                .await
                .map_err(|e| format!("create hub Gateway {}: {e}", gateway_name(g)))?;
        }
        let api_pid = apiserver_pid(mgmt.port);
        let kubeconfig = mgmt.kubeconfig_as(gwhub_test_kit::install::HUB_SA);
        let (ingest_port, metrics_port) =
            (gwhub_test_kit::procs::free_port(), gwhub_test_kit::procs::free_port());
        let hub_flags: Vec<String> = vec![
            "--kubeconfig".into(),
            kubeconfig.display().to_string(),
            "--namespace".into(),
            "gwhub-system".into(),
            "--no-leader-election".into(),
            "--listen".into(),
            format!("127.0.0.1:{ingest_port}"),
            "--dashboard-listen".into(),
            "127.0.0.1:0".into(),
            "--metrics-listen".into(),
            format!("127.0.0.1:{metrics_port}"),
            "--stale-after".into(),
            "60s".into(),
            "--kube-api-qps".into(),
            args.qps.to_string(),
            "--kube-api-burst".into(),
            args.burst.to_string(),
            "--max-messages-per-second".into(),
            "0".into(),
        ];
        let flag_refs: Vec<&str> = hub_flags.iter().map(String::as_str).collect();
        let mut hub = start_hub_with(&bin, &flag_refs)?;
        let mut pid = hub.child.id();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (rss_idle, _) = rss(pid);
        let shared = Arc::new(Shared::new(args.clusters, args.gateways));
        let view = Arc::new(Mutex::new(KubeView::default()));
        let (finish_tx, finish) = watch::channel(false);
        let watch_task = {
            let (client, shared, view) = (admin.clone(), shared.clone(), view.clone());
            std::thread::spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())?
                    .block_on(hub_gateway_watcher(client, shared, view, finish))
            })
        };

        // Snapshots, then wait until every hub Gateway aggregates every cluster.
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
                    hub.ingest.clone(),
                    snapshot_messages(c, &args),
                    args.clone(),
                    shared.clone(),
                    go.clone(),
                    requests,
                    true,
                ))
            })
            .collect();
        let fleet_at = tokio::time::timeout(
            Duration::from_secs(600),
            wait_fleet(hub.dashboard.clone(), args.clusters, args.gateways),
        )
        .await
        .map_err(|_| "the hub did not take every snapshot within 600 s".to_owned())??;
        // Every cluster persisted (some object per cluster) and the hub
        // Gateways written.
        let persisted_at = loop {
            let (newest, _, _) = stored_reports(&admin).await?;
            if newest.len() >= args.clusters {
                break Instant::now();
            }
            if t0.elapsed() > Duration::from_secs(900) {
                return Err(format!("only {} of {} clusters persisted", newest.len(), args.clusters));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let ingest_s = (fleet_at - t0).as_secs_f64();
        let persist_s = (persisted_at - t0).as_secs_f64();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (rss_ingest, _) = rss(pid);
        let (_, store_bytes, store_objects) = stored_reports(&admin).await?;
        let store_total: u64 = store_bytes.values().sum();

        // The delta phase.
        let m0 = gwhub_test_kit::procs::scrape(metrics_port).await;
        let (hub_cpu0, api_cpu0) = (cpu_seconds(pid), api_pid.map_or(0.0, cpu_seconds));
        let _ = go_tx.send(true);
        let d0 = Instant::now();
        let acked0 = shared.acked.load(Ordering::Relaxed);
        let dispatcher = (args.rate > 0.0).then(|| {
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
                        let c = (rng() % clusters as u64) as usize;
                        let g = (rng() % gateways as u64) as usize;
                        let _ = senders[c].send(g);
                        sent += 1;
                    }
                }
                let _ = due;
                sent
            })
        });
        let mut restart: Option<(f64, f64, u64, f64)> = None;
        let mut hub_cpu_before_kill = 0.0;
        let mut before_kill = std::collections::BTreeMap::new();
        while d0.elapsed() < args.duration {
            if let Some(at) = args.restart_at
                && restart.is_none()
                && d0.elapsed() >= at
            {
                // kill -9 and start again on the same ports.
                {
                    let mut v = view.lock();
                    v.baseline = Some(v.shapes.clone());
                    v.wrong = 0;
                }
                hub_cpu_before_kill = cpu_seconds(pid) - hub_cpu0;
                before_kill = gwhub_test_kit::procs::scrape(metrics_port).await;
                let killed = Instant::now();
                let _ = hub.child.kill();
                let _ = hub.child.wait();
                hub = start_hub_with(&bin, &flag_refs)?;
                pid = hub.child.id();
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
                restart = Some((started, agents_back_s, wrong, whole_s));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let delta_s = d0.elapsed().as_secs_f64();
        let acked = shared.acked.load(Ordering::Relaxed) - acked0;
        // The store's lag at the end of the load: per cluster, newest
        // change sent minus newest lastReportTime persisted.
        let (newest, _, _) = stored_reports(&admin).await?;
        let mut lags: Vec<u64> = (0..args.clusters)
            .filter_map(|c| {
                let sent = shared.last_sent_ms[c].load(Ordering::Relaxed);
                (sent > 0).then(|| sent.saturating_sub(*newest.get(&cluster_name(c)).unwrap_or(&0)))
            })
            .collect();
        lags.sort_unstable();
        let m1 = gwhub_test_kit::procs::scrape(metrics_port).await;
        let (status_bytes, object_bytes, largest) = largest_hub_gateway(&admin).await?;
        let hub_cpu_s = if restart.is_some() {
            hub_cpu_before_kill + cpu_seconds(pid)
        } else {
            cpu_seconds(pid) - hub_cpu0
        };
        let api_cpu_s = api_pid.map_or(0.0, cpu_seconds) - api_cpu0;
        shared.stop.store(true, Ordering::Relaxed);
        let offered = match dispatcher {
            Some(d) => d.await.map_err(|e| e.to_string())?,
            None => acked,
        };
        for a in agents {
            a.await.map_err(|e| e.to_string())??;
        }
        let g0 = Instant::now();
        let outstanding = || shared.marks.iter().filter(|m| m.load(Ordering::Acquire) != 0).count();
        while outstanding() > 0 && g0.elapsed() < GRACE {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let unobserved = outstanding();
        let (rss_deltas, rss_peak) = rss(pid);
        let _ = finish_tx.send(true);
        let mut latencies = watch_task
            .join()
            .map_err(|_| "the watcher panicked".to_owned())??;
        // The hub stopped: what a status apply costs the API server alone.
        let _ = hub.child.kill();
        let _ = hub.child.wait();
        let (apply_cpu_ms, apply_wall_ms) = match &largest {
            Some(gw) => status_apply_cost(&admin, api_pid, gw).await?,
            None => (f64::NAN, f64::NAN),
        };
        latencies.sort_unstable();
        let problems = hub.problems.lock().clone();
        if problems.0 > 0 {
            eprintln!("hub logged {} warnings/errors, e.g.:", problems.0);
            for l in &problems.1 {
                eprintln!("  {l}");
            }
        }
        let counter = |m: &std::collections::BTreeMap<String, u64>, k: &str| *m.get(k).unwrap_or(&0);
        // Counters start over in a restarted hub.
        let diff = |k: &str| {
            if restart.is_some() {
                counter(&before_kill, k).saturating_sub(counter(&m0, k)) + counter(&m1, k)
            } else {
                counter(&m1, k).saturating_sub(counter(&m0, k))
            }
        };
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
        let (p50, p99, max) = (
            percentile(&latencies, 0.50),
            percentile(&latencies, 0.99),
            percentile(&latencies, 1.0),
        );
        let lag = |p: f64| percentile(&lags, p) * 1000.0;
        let per_pair = rss_ingest.saturating_sub(rss_idle) as f64 / pairs as f64;
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
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
            "ingest_fleet_s": ingest_s,
            "every_cluster_persisted_s": persist_s,
            "store_objects": store_objects,
            "store_bytes": store_total,
            "store_bytes_per_pair": store_total as f64 / pairs as f64,
            "delta_phase_s": delta_s,
            "deltas": acked,
            "deltas_per_s": acked as f64 / delta_s,
            "hub_gateway_latency_ms": {"p50": p50, "p99": p99, "max": max, "samples": latencies.len(), "unobserved": unobserved},
            "report_writes_per_s": report_writes as f64 / delta_s,
            "report_bytes_per_s": report_bytes as f64 / delta_s,
            "status_writes_per_s": status_writes as f64 / delta_s,
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
            "rss_idle_bytes": rss_idle,
            "rss_after_ingest_bytes": rss_ingest,
            "rss_bytes_per_pair": per_pair,
            "rss_after_deltas_bytes": rss_deltas,
            "rss_peak_bytes": rss_peak,
            "restart": restart.map(|(started, back, wrong, whole)| serde_json::json!({
                "hub_restarted_s": started, "agents_back_s": back,
                "whole_s": whole, "wrong_statuses": wrong,
            })),
            "hub_warnings": problems.0,
        });
        if !args.json {
            println!(
                "gwhub hub scale (Kubernetes mode): {} clusters x {} Gateways x {} listeners = {} pairs, {} hub Gateways; {}; load {}",
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
            println!("  per status write (mean)  API call {status_api_ms:.1} ms, aggregate + plan {status_prepare_ms:.1} ms; largest hub Gateway status {:.1} KB (object {:.1} KB)", status_bytes as f64 / 1e3, object_bytes as f64 / 1e3);
            println!("  one status apply alone   API server CPU {apply_cpu_ms:.1} ms, {apply_wall_ms:.1} ms round trip (the largest hub Gateway, hub stopped, one at a time)");
            println!("  persisted lag at the end p50 {:.0} ms  p99 {:.0} ms  max {:.0} ms", lag(0.5), lag(0.99), lag(1.0));
            println!(
                "  CPU                      hub {:.2} cores, API server {:.2} cores",
                hub_cpu_s / delta_s, api_cpu_s / delta_s
            );
            println!(
                "  hub RSS                  idle {:.1} MiB, after ingest {:.1} MiB ({per_pair:.0} B per (cluster, Gateway)), after deltas {:.1} MiB",
                mib(rss_idle), mib(rss_ingest), mib(rss_deltas)
            );
            if let Some((started, back, wrong, whole)) = restart {
                println!("  kill -9 + restart        hub up {started:.2} s, agents back {back:.2} s, whole {whole:.2} s, wrong statuses {wrong}");
            }
        }
        drop(hub);
        drop(fleet);
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
    let result = if args.kube { run_kube(args) } else { run(args) };
    match result {
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
