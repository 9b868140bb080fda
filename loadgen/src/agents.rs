//! The simulated agents: one `Report` stream per cluster on test-kit's raw
//! agent, a snapshot, then deltas under an unacked window (as fast as acks
//! allow, or one per requested Gateway), reconnecting with a fresh
//! snapshot when the hub goes away. Also the counters the agents and the
//! watchers share, and the latency marks a delta carries.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use gwhub_proto::v1::{self, agent_message, change};
use gwhub_test_kit::latency::Latencies;
use gwhub_test_kit::raw_agent::{self, Agent, AgentError, msg};
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};

use crate::error::AgentFailure;
use crate::scenario::{
    Args, FirstSnapshot, GRACE, MARK, cluster_name, hello, report, snapshot_chunks,
};

/// Send times kept per cluster for the store's lag: at the rates the
/// bench offers a cluster rarely sends more between two of its store
/// writes; past it the lag is measured from the oldest kept.
pub(crate) const SENT_KEPT: usize = 64;

/// The store's lag for one cluster at `now_ms`: how long the oldest change
/// sent after `persisted_ms` (the newest report time the store holds for
/// it) has waited; 0 when the store holds the last change. `sent_ms`
/// oldest first.
pub(crate) fn store_lag_ms(sent_ms: &VecDeque<u64>, persisted_ms: u64, now_ms: u64) -> u64 {
    sent_ms
        .iter()
        .find(|&&t| t > persisted_ms)
        .map_or(0, |&t| now_ms.saturating_sub(t))
}

/// State the agents and the watcher share.
pub(crate) struct Shared {
    pub(crate) start: Instant,
    pub(crate) gateways: usize,
    /// Outstanding latency mark per (cluster, gateway): send time in µs
    /// since `start` (never 0), or 0 when none.
    pub(crate) marks: Vec<AtomicU64>,
    /// Deltas acked by the hub, all agents.
    pub(crate) acked: AtomicU64,
    /// Deltas sent, all agents (for `--deltas`).
    pub(crate) sent: AtomicU64,
    pub(crate) stop: AtomicBool,
    /// Per cluster, wall-clock ms of the deltas sent, oldest first (the
    /// last [`SENT_KEPT`]), for the store's lag: how long the oldest change
    /// the store does not hold yet has waited.
    pub(crate) sent_ms: Vec<Mutex<VecDeque<u64>>>,
    /// Agents whose stream is open and snapshot acked (restart recovery).
    pub(crate) streaming: AtomicU64,
    /// Agents opening their stream at once: 1,000 connecting together on a
    /// loaded machine overflowed the listen backlog and some agents gave up
    /// (the run then waited for them until its timeout).
    pub(crate) opening: tokio::sync::Semaphore,
}

impl Shared {
    /// A run's counters for `clusters` x `gateways`, started now.
    pub(crate) fn new(clusters: usize, gateways: usize) -> Self {
        Shared {
            start: Instant::now(),
            gateways,
            marks: (0..clusters * gateways)
                .map(|_| AtomicU64::new(0))
                .collect(),
            acked: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            sent_ms: (0..clusters).map(|_| Mutex::new(VecDeque::new())).collect(),
            streaming: AtomicU64::new(0),
            opening: tokio::sync::Semaphore::new(64),
        }
    }
}

pub(crate) fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Shared {
    pub(crate) fn now_us(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX) + 1
    }
}

/// When an agent's snapshot was acked, and how many deltas it had acked.
pub(crate) struct AgentDone {
    pub(crate) snapshot_acked: Instant,
}

/// Opens cluster `hello.cluster`'s report stream on test-kit's raw agent,
/// sends the snapshot `chunks` and waits for the ack of `snapshot_seq`.
async fn open(
    url: &str,
    hello: v1::Hello,
    chunks: Vec<v1::AgentMessage>,
    window: u64,
    snapshot_seq: u64,
) -> Result<Agent, AgentError> {
    let buffer = chunks.len() + window as usize + 1;
    let mut agent = Agent::open_on(raw_agent::channel(url).await?, hello, buffer).await?;
    for m in chunks {
        agent.tx.send(m).await.map_err(|_| AgentError::Closed)?;
    }
    while agent.next_ack().await?.is_none_or(|a| a < snapshot_seq) {}
    Ok(agent)
}

/// A simulated agent's heartbeat after this long without sending: the
/// agent's default (`gwhub-agent`'s hub client), so a cluster that changes
/// less often than `--stale-after` stays fresh, as a real one does.
const HEARTBEAT: Duration = Duration::from_secs(5);

/// One simulated agent: snapshot, wait for `go`, then deltas as fast as
/// acks allow (or, with `requests`, one per requested Gateway) until
/// `shared.stop`. With `reconnect`, a broken stream (the hub killed) is
/// opened again with a fresh snapshot, as a real agent does.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn agent(
    c: usize,
    url: String,
    first: FirstSnapshot,
    args: Arc<Args>,
    shared: Arc<Shared>,
    mut go: watch::Receiver<bool>,
    mut requests: Option<mpsc::UnboundedReceiver<usize>>,
    reconnect: bool,
) -> Result<AgentDone, AgentFailure> {
    let cluster = cluster_name(c);
    let permit = shared
        .opening
        .acquire()
        .await
        .map_err(|e| AgentFailure::Opening(cluster.clone(), e))?;
    let mut stream = open(&url, first.hello, first.chunks, args.window, 0)
        .await
        .map_err(|source| AgentFailure::Stream {
            cluster: cluster.clone(),
            source,
        })?;
    drop(permit);
    // When this agent last sent the hub anything, for its heartbeats.
    let mut last_sent = Instant::now();
    shared.streaming.fetch_add(1, Ordering::Relaxed);
    let snapshot_acked = Instant::now();
    wait_for_go(&mut stream, &mut go, &cluster, &mut last_sent).await?;

    let g_count = args.gateways;
    let mut next_g = (c * 37) % g_count.max(1);
    let (mut seq, mut acked) = (0u64, 0u64);
    let mut requested: Option<usize> = None;
    // Each Gateway's last delta version, for a resent snapshot.
    let mut versions = vec![0u64; g_count];
    loop {
        let stopping = shared.stop.load(Ordering::Relaxed);
        let mut wanted: Option<usize> = requested.take();
        if wanted.is_none() && !stopping && seq - acked < args.window {
            wanted = next_wanted(requests.as_mut(), &args, &shared, &mut next_g);
        }
        if let Some(g) = wanted {
            seq += 1;
            versions[g] = seq;
            let sent = send_delta(&mut stream, c, g, seq, &args, &shared, &mut last_sent).await;
            if !sent && !reconnect {
                return Err(AgentFailure::SendClosed(cluster));
            }
            continue;
        }
        if acked == seq && shared.stop.load(Ordering::Relaxed) {
            break;
        }
        let stopping = shared.stop.load(Ordering::Relaxed);
        let room = seq - acked < args.window;
        let got = idle(&mut stream, requests.as_mut(), room, stopping, last_sent).await;
        match got {
            // Sent at the top of the loop.
            Woken::Requested(g) => requested = Some(g),
            Woken::Ack(Err(_)) if !stopping => {
                // Nothing sent for HEARTBEAT: a heartbeat keeps the
                // cluster fresh on the hub, as the agent's does. A broken
                // stream tells on the next ack.
                stream.heartbeat().await;
                last_sent = Instant::now();
            }
            Woken::Ack(Err(_)) => {
                return Err(AgentFailure::AcksLate {
                    cluster,
                    acked,
                    seq,
                });
            }
            Woken::Ack(Ok(Ok(a))) => {
                if let Some(a) = a
                    && a > acked
                {
                    shared.acked.fetch_add(a - acked, Ordering::Relaxed);
                    acked = a;
                }
            }
            Woken::Ack(Ok(Err(e))) if reconnect => {
                // The hub went away: reconnect with a snapshot of what was
                // last sent (its unacked deltas included), seq carried on.
                shared.streaming.fetch_sub(1, Ordering::Relaxed);
                if std::env::var_os("GWHUB_BENCH_TRACE").is_some() {
                    eprintln!("{e}; reconnecting");
                }
                stream = reopen(&url, c, &args, &shared, &versions, &mut seq).await;
                last_sent = Instant::now();
                acked = seq;
                shared.streaming.fetch_add(1, Ordering::Relaxed);
            }
            Woken::Ack(Ok(Err(source))) => return Err(AgentFailure::Stream { cluster, source }),
        }
    }
    Ok(AgentDone { snapshot_acked })
}

/// The Gateway to send a delta for next, if any: one asked for (with
/// `requests`), else the next in turn, until `--deltas` are sent (which
/// stops the load).
fn next_wanted(
    requests: Option<&mut mpsc::UnboundedReceiver<usize>>,
    args: &Args,
    shared: &Shared,
    next_g: &mut usize,
) -> Option<usize> {
    match requests {
        None => {
            if args.deltas > 0 && shared.sent.fetch_add(1, Ordering::Relaxed) >= args.deltas {
                shared.stop.store(true, Ordering::Relaxed);
                None
            } else {
                let g = *next_g;
                *next_g = (*next_g + 1) % args.gateways;
                Some(g)
            }
        }
        Some(r) => r.try_recv().ok(),
    }
}

/// What ended an idle wait of a simulated agent.
enum Woken {
    /// The next ack or the stream's error; `Err` when the wait ran out.
    Ack(Result<Result<Option<u64>, AgentError>, tokio::time::error::Elapsed>),
    /// A Gateway asked for (with `requests` and `room` in the window).
    Requested(usize),
}

/// Waits for the next ack: while stopping up to [`GRACE`], else until the
/// next heartbeat is due; or, with room in the window, for the next
/// Gateway asked for.
async fn idle(
    stream: &mut Agent,
    requests: Option<&mut mpsc::UnboundedReceiver<usize>>,
    room: bool,
    stopping: bool,
    last_sent: Instant,
) -> Woken {
    let wait = if stopping {
        GRACE
    } else {
        HEARTBEAT.saturating_sub(last_sent.elapsed())
    };
    tokio::select! {
        r = tokio::time::timeout(wait, stream.next_ack()) => Woken::Ack(r),
        Some(g) = async {
            match requests {
                Some(r) if room => r.recv().await,
                _ => std::future::pending().await,
            }
        } => Woken::Requested(g),
    }
}

/// Until the load starts (the rest of the fleet still opening), a
/// heartbeat every [`HEARTBEAT`] as well.
async fn wait_for_go(
    stream: &mut Agent,
    go: &mut watch::Receiver<bool>,
    cluster: &str,
    last_sent: &mut Instant,
) -> Result<(), AgentFailure> {
    loop {
        let started = tokio::time::timeout(HEARTBEAT, go.wait_for(|g| *g))
            .await
            .map(|r| r.map(|_| ()));
        match started {
            Ok(r) => {
                r.map_err(|e| AgentFailure::Go(cluster.to_owned(), e))?;
                return Ok(());
            }
            Err(_) => {
                stream.heartbeat().await;
                *last_sent = Instant::now();
            }
        }
    }
}

/// Cluster `c`'s report of Gateway `g` at version `seq`, with a mark to
/// time when none is outstanding: on every delta with an offered rate,
/// else every `--mark-every`. An outstanding mark is kept until the
/// watcher saw it, so coalescing cannot hide a slow sample.
fn delta_for(c: usize, g: usize, seq: u64, args: &Args, shared: &Shared) -> v1::GatewayReport {
    let slot = &shared.marks[c * shared.gateways + g];
    let mut mark = slot.load(Ordering::Acquire);
    let every = if args.rate > 0.0 {
        1
    } else {
        args.mark_every.max(1)
    };
    if mark == 0 && seq.is_multiple_of(every) {
        mark = shared.now_us();
        slot.store(mark, Ordering::Release);
    }
    report(c, g, args.listeners, seq, mark)
}

/// Sends Gateway `g`'s delta as `seq`, noting when for the store's lag
/// and the heartbeats; whether the stream took it.
async fn send_delta(
    stream: &mut Agent,
    c: usize,
    g: usize,
    seq: u64,
    args: &Args,
    shared: &Shared,
    last_sent: &mut Instant,
) -> bool {
    let upsert = delta_for(c, g, seq, args, shared);
    let delta = v1::Delta {
        seq,
        changes: vec![v1::Change {
            change: Some(change::Change::Upsert(upsert)),
        }],
        ..Default::default()
    };
    {
        let mut sent = shared.sent_ms[c].lock();
        if sent.len() == SENT_KEPT {
            sent.pop_front();
        }
        sent.push_back(wall_ms());
    }
    *last_sent = Instant::now();
    stream
        .tx
        .send(msg(agent_message::Message::Delta(delta)))
        .await
        .is_ok()
}

/// The hub went away: opens the stream again (every 200 ms until it
/// opens) with a snapshot of what was last sent, its unacked deltas
/// included, `seq` carried on.
async fn reopen(
    url: &str,
    c: usize,
    args: &Args,
    shared: &Shared,
    versions: &[u64],
    seq: &mut u64,
) -> Agent {
    loop {
        *seq += 1;
        let chunks = snapshot_chunks(args, *seq, *seq, |g| {
            let mark = shared.marks[c * shared.gateways + g].load(Ordering::Acquire);
            report(c, g, args.listeners, versions[g], mark)
        });
        match open(url, hello(c), chunks, args.window, *seq).await {
            Ok(s) => return s,
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Waits, for at most [`GRACE`], until the watcher saw every outstanding
/// mark: how many it did not.
pub(crate) async fn wait_for_marks(shared: &Shared) -> usize {
    let g0 = Instant::now();
    let outstanding = || {
        shared
            .marks
            .iter()
            .filter(|m| m.load(Ordering::Acquire) != 0)
            .count()
    };
    while outstanding() > 0 && g0.elapsed() < GRACE {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    outstanding()
}

/// Records the latency of every outstanding mark `message` shows for
/// Gateway `g` (clusters' messages joined by "; ").
pub(crate) fn take_marks(
    message: &str,
    g: usize,
    shared: &Shared,
    now: u64,
    latencies: &mut Latencies,
) {
    take_marks_with(message, g, shared, now, |us| latencies.record_us(us));
}

/// [`take_marks`], handing each latency (µs) to `record`.
pub(crate) fn take_marks_with(
    message: &str,
    g: usize,
    shared: &Shared,
    now: u64,
    mut record: impl FnMut(u64),
) {
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
            record(now.saturating_sub(t));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_lag_is_the_wait_of_the_oldest_change_not_stored() {
        let sent: VecDeque<u64> = [1_000, 5_000, 9_000].into_iter().collect();
        // Stored the last change: no lag.
        assert_eq!(store_lag_ms(&sent, 9_050, 10_000), 0);
        // Stored up to the second: the third has waited 1 s.
        assert_eq!(store_lag_ms(&sent, 5_040, 10_000), 1_000);
        // Nothing of the load stored: the first has waited 9 s, however
        // long before it the cluster's previous report was.
        assert_eq!(store_lag_ms(&sent, 0, 10_000), 9_000);
        assert_eq!(store_lag_ms(&VecDeque::new(), 0, 10_000), 0);
    }
}
