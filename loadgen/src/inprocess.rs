//! The in-process mode: `gwhub serve
//! --no-kube` as a child process driven over loopback gRPC; measures
//! snapshot ingest, sustained deltas/s, delta -> Dashboard latency and
//! hub RSS per (cluster, Gateway).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use gwhub_proto::v1;
use gwhub_test_kit::latency::Latencies;
use prost::Message;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::agents::{AgentDone, Shared, agent, wait_for_marks};
use crate::dashboard::{WatchStats, wait_fleet, watcher};
use crate::error::{AgentFailure, BenchError};
use crate::hub_process::{HubProcess, start_hub};
use crate::probes::{machine, rss};
use crate::report::{latency_json, mib, print_problems};
use crate::scenario::{Args, FirstSnapshot};

pub(crate) fn run(args: Args) -> Result<serde_json::Value, BenchError> {
    if args.clusters == 0 || args.gateways == 0 {
        return Err(BenchError::Usage(
            "--clusters and --gateways must be at least 1",
        ));
    }
    let args = Arc::new(args);

    // Messages first, so ingest times only sending and the hub.
    let snapshots: Vec<FirstSnapshot> = (0..args.clusters)
        .map(|c| FirstSnapshot::of(c, &args))
        .collect();
    let (snapshot_bytes, decode_s) = time_decode(&snapshots)?;

    let bin = args
        .hub_bin
        .clone()
        .unwrap_or_else(gwhub_test_kit::procs::gwhub_binary);
    let hub = start_hub(&bin)?;
    let pid = hub.child.id();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(BenchError::Runtime)?;
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
                    .map_err(BenchError::Runtime)?
                    .block_on(watcher(url, clusters, shared, complete_tx, finish))
            })
        };
        // The watch's first (empty) snapshot must not count.
        tokio::time::sleep(Duration::from_millis(100)).await;

        let (go_tx, go) = watch::channel(false);
        let t0 = Instant::now();
        let fleet_task = tokio::spawn(wait_fleet(
            hub.dashboard.clone(),
            args.clusters,
            args.gateways,
        ));
        // The first agent to fail ends the run at once (not after the
        // 600 s wait for a Dashboard that can no longer be complete).
        let (fail_tx, mut failed) = watch::channel(None::<Arc<AgentFailure>>);
        let agents = spawn_agents(snapshots, &hub, &args, &shared, &go, &fail_tx);
        let (dashboard_at, watch_task) =
            wait_dashboard(&mut complete, &mut failed, watch_task, &hub).await?;
        let fleet_at = fleet_task.await??;
        let ingest_s = (dashboard_at - t0).as_secs_f64();
        let fleet_s = (fleet_at - t0).as_secs_f64();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (rss_ingest, _) = rss(pid);

        let (acked, delta_s) = sustain(&args, &shared, &go_tx).await;
        let snapshots_acked_s = snapshots_acked(agents, t0).await?;
        // Let the last marks reach the watcher.
        let unobserved = wait_for_marks(&shared).await;
        let (rss_deltas, rss_peak) = rss(pid);
        let _ = finish_tx.send(true);
        let (latencies, watch) = watch_task
            .join()
            .map_err(|_| BenchError::WatcherPanicked)??;
        let problems = hub.problems.lock().clone();
        print_problems(&problems);

        let figures = Figures {
            pairs: args.clusters * args.gateways,
            snapshot_bytes,
            decode_s,
            snapshots_acked_s,
            fleet_s,
            ingest_s,
            acked,
            delta_s,
            latencies,
            unobserved,
            watch,
            rss: [rss_idle, rss_ingest, rss_deltas, rss_peak],
            warnings: problems.0,
        };
        let json = figures.json(&args);
        if !args.json {
            figures.print(&args, &json);
        }
        Ok(json)
    })
}

/// Encodes every snapshot message and decodes them all (best of three):
/// their bytes, and prost's time alone, to set beside the ingest.
fn time_decode(snapshots: &[FirstSnapshot]) -> Result<(usize, f64), BenchError> {
    let encoded: Vec<Vec<u8>> = snapshots
        .iter()
        .flat_map(FirstSnapshot::messages)
        .map(|m| m.encode_to_vec())
        .collect();
    let snapshot_bytes: usize = encoded.iter().map(Vec::len).sum();
    let mut decode_s = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        for b in &encoded {
            let m = v1::AgentMessage::decode(&b[..]).map_err(BenchError::Decode)?;
            std::hint::black_box(m);
        }
        decode_s = decode_s.min(t.elapsed().as_secs_f64());
    }
    drop(encoded);
    Ok((snapshot_bytes, decode_s))
}

/// One agent per snapshot, each telling `fail_tx` when it fails (the
/// first failure only).
fn spawn_agents(
    snapshots: Vec<FirstSnapshot>,
    hub: &HubProcess,
    args: &Arc<Args>,
    shared: &Arc<Shared>,
    go: &watch::Receiver<bool>,
    fail_tx: &watch::Sender<Option<Arc<AgentFailure>>>,
) -> Vec<JoinHandle<Result<AgentDone, Arc<AgentFailure>>>> {
    snapshots
        .into_iter()
        .enumerate()
        .map(|(c, m)| {
            let run = agent(
                c,
                hub.ingest.clone(),
                m,
                args.clone(),
                shared.clone(),
                go.clone(),
                None,
                false,
            );
            let fail_tx = fail_tx.clone();
            tokio::spawn(async move {
                let done = run.await.map_err(Arc::new);
                if let Err(e) = &done {
                    fail_tx.send_if_modified(|f| f.is_none() && f.replace(e.clone()).is_none());
                }
                done
            })
        })
        .collect()
}

/// The Dashboard watcher's thread: its latencies and what it received.
type WatchTask = std::thread::JoinHandle<Result<(Latencies, WatchStats), BenchError>>;

/// Waits (up to 600 s) until the Dashboard shows every snapshot: when it
/// did, or the first agent's failure, or why the watcher ended first.
async fn wait_dashboard(
    complete: &mut watch::Receiver<Option<Instant>>,
    failed: &mut watch::Receiver<Option<Arc<AgentFailure>>>,
    watch_task: WatchTask,
    hub: &HubProcess,
) -> Result<(Instant, WatchTask), BenchError> {
    let timeout = Duration::from_secs(600);
    let complete_or_failed = async {
        tokio::select! {
            done = complete.wait_for(Option::is_some) => {
                done.map(|t| t.unwrap_or_else(Instant::now)).map_err(|_| None)
            }
            Ok(e) = failed.wait_for(Option::is_some) => Err(e.clone()),
        }
    };
    match tokio::time::timeout(timeout, complete_or_failed).await {
        Err(_) => Err(BenchError::Timeout(
            "snapshots did not reach the Dashboard within 600 s",
        )),
        Ok(Ok(at)) => Ok((at, watch_task)),
        Ok(Err(Some(e))) => Err(BenchError::Agent(e)),
        // The watcher returned before the fleet was complete: say why,
        // and what the hub logged.
        Ok(Err(None)) => Err(watcher_ended(watch_task, hub)),
    }
}

/// The sustained deltas: lets the agents go and waits for `--duration`
/// (or `--deltas` sent), then stops them; the deltas acked and the
/// phase's seconds.
async fn sustain(args: &Args, shared: &Shared, go_tx: &watch::Sender<bool>) -> (u64, f64) {
    let _ = go_tx.send(true);
    let d0 = Instant::now();
    let acked0 = shared.acked.load(Ordering::Relaxed);
    while d0.elapsed() < args.duration && !shared.stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let acked = shared.acked.load(Ordering::Relaxed) - acked0;
    let delta_s = d0.elapsed().as_secs_f64();
    shared.stop.store(true, Ordering::Relaxed);
    (acked, delta_s)
}

/// Waits for every agent to end: seconds from `t0` until the last
/// snapshot was acked.
async fn snapshots_acked(
    agents: Vec<JoinHandle<Result<AgentDone, Arc<AgentFailure>>>>,
    t0: Instant,
) -> Result<f64, BenchError> {
    let mut acked_at = Vec::with_capacity(agents.len());
    for a in agents {
        acked_at.push(a.await??.snapshot_acked);
    }
    Ok(acked_at
        .iter()
        .max()
        .map_or(0.0, |t| (*t - t0).as_secs_f64()))
}

/// The watcher returned before the fleet was complete: why, and what the
/// hub logged.
fn watcher_ended(watch_task: WatchTask, hub: &HubProcess) -> BenchError {
    let why = match watch_task.join() {
        Ok(Err(e)) => e,
        Ok(Ok(_)) => BenchError::WatchEnded,
        Err(_) => BenchError::WatcherPanicked,
    };
    let (count, lines) = hub.problems.lock().clone();
    BenchError::WatcherEnded {
        why: Box::new(why),
        count,
        lines,
    }
}

/// What one in-process run measured.
struct Figures {
    pairs: usize,
    snapshot_bytes: usize,
    decode_s: f64,
    snapshots_acked_s: f64,
    fleet_s: f64,
    ingest_s: f64,
    acked: u64,
    delta_s: f64,
    latencies: Latencies,
    unobserved: usize,
    watch: WatchStats,
    /// The hub's RSS idle, after ingest, after the deltas, and its peak.
    rss: [u64; 4],
    warnings: usize,
}

impl Figures {
    /// What ingest added to the hub's RSS per (cluster, Gateway) pair.
    fn rss_per_pair(&self) -> f64 {
        let [idle, after_ingest, ..] = self.rss;
        after_ingest.saturating_sub(idle) as f64 / self.pairs as f64
    }

    /// The run's JSON line (`--json`).
    fn json(&self, args: &Args) -> serde_json::Value {
        let [rss_idle, rss_ingest, rss_deltas, rss_peak] = self.rss;
        let per_pair = self.rss_per_pair();
        serde_json::json!({
            "bench": "hub_scale",
            "machine": machine(),
            "clusters": args.clusters,
            "gateways": args.gateways,
            "listeners": args.listeners,
            "pairs": self.pairs,
            "snapshot_messages": args.clusters * (args.gateways.div_ceil(args.chunk.max(1))),
            "snapshot_bytes": self.snapshot_bytes,
            "prost_decode_s": self.decode_s,
            "snapshots_acked_s": self.snapshots_acked_s,
            "ingest_fleet_s": self.fleet_s,
            "ingest_dashboard_s": self.ingest_s,
            "decode_vs_ingest_pct": 100.0 * self.decode_s / self.ingest_s,
            "window": args.window,
            "deltas": self.acked,
            "delta_phase_s": self.delta_s,
            "deltas_per_s": self.acked as f64 / self.delta_s,
            "latency_ms": latency_json(&self.latencies, self.unobserved),
            "watch_messages": self.watch.messages,
            "watch_bytes": self.watch.bytes,
            "watch_max_message_bytes": self.watch.max_bytes,
            "rss_idle_bytes": rss_idle,
            "rss_after_ingest_bytes": rss_ingest,
            "rss_after_deltas_bytes": rss_deltas,
            "rss_peak_bytes": rss_peak,
            "rss_bytes_per_pair": per_pair,
            "hub_warnings": self.warnings,
        })
    }

    /// The run's summary for a reader.
    fn print(&self, args: &Args, json: &serde_json::Value) {
        let Figures {
            pairs,
            snapshot_bytes,
            decode_s,
            snapshots_acked_s,
            fleet_s,
            ingest_s,
            acked,
            delta_s,
            ref latencies,
            unobserved,
            ref watch,
            ..
        } = *self;
        let [rss_idle, rss_ingest, rss_deltas, rss_peak] = self.rss;
        let per_pair = self.rss_per_pair();
        let rate = acked as f64 / delta_s;
        let (p50, p99, max) = (latencies.ms(0.5), latencies.ms(0.99), latencies.ms(1.0));
        println!(
            "gwhub hub scale: {} clusters x {} Gateways x {} listeners = {} (cluster, Gateway) reports; {}",
            args.clusters,
            args.gateways,
            args.listeners,
            pairs,
            machine()
        );
        println!(
            "  snapshot                 {:.1} MB in {} messages",
            snapshot_bytes as f64 / 1e6,
            json["snapshot_messages"]
        );
        println!(
            "  prost decode (raw)       {decode_s:.3} s ({:.0} MB/s)",
            snapshot_bytes as f64 / 1e6 / decode_s
        );
        println!("  ingest: snapshots acked  {snapshots_acked_s:.3} s");
        println!("  ingest: ListClusters     {fleet_s:.3} s");
        println!(
            "  ingest: Dashboard watch  {ingest_s:.3} s  (raw decode = {:.0}% of it)",
            100.0 * decode_s / ingest_s
        );
        println!(
            "  deltas                   {acked} in {delta_s:.1} s = {rate:.0}/s (window {} per agent)",
            args.window
        );
        println!(
            "  delta -> Dashboard       p50 {p50:.1} ms  p99 {p99:.1} ms  max {max:.1} ms  ({} samples, {unobserved} unobserved)",
            latencies.len()
        );
        println!(
            "  Dashboard watch          {} messages, {:.1} MB, largest {:.1} MB",
            watch.messages,
            watch.bytes as f64 / 1e6,
            watch.max_bytes as f64 / 1e6
        );
        println!(
            "  hub RSS                  idle {:.1} MiB, after ingest {:.1} MiB ({per_pair:.0} B per (cluster, Gateway)), after deltas {:.1} MiB, peak {:.1} MiB",
            mib(rss_idle),
            mib(rss_ingest),
            mib(rss_deltas),
            mib(rss_peak)
        );
    }
}
