//! The simulated agents: one `Report` stream per cluster on test-kit's raw
//! agent, a snapshot, then deltas under an unacked window (as fast as acks
//! allow, or one per requested Gateway), reconnecting with a fresh
//! snapshot when the hub goes away. Also the counters the agents and the
//! watchers share, and the latency marks a delta carries.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use gwhub_proto::v1::{self, agent_message, change, hub_message, ingest_client::IngestClient};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint};

use crate::scenario::{Args, GRACE, MARK, cluster_name, msg, report};

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
    /// Per cluster, wall-clock ms of the last delta sent (for the store's lag).
    pub(crate) last_sent_ms: Vec<AtomicU64>,
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
            last_sent_ms: (0..clusters).map(|_| AtomicU64::new(0)).collect(),
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

pub(crate) async fn connect(url: &str) -> Result<Channel, String> {
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
pub(crate) async fn open(
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

pub(crate) async fn next_ack(
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
pub(crate) async fn agent(
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
pub(crate) fn take_marks(
    message: &str,
    g: usize,
    shared: &Shared,
    now: u64,
    latencies: &mut Vec<u64>,
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
            latencies.push(now.saturating_sub(t));
        }
    }
}
