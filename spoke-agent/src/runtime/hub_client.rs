//! The agent's side of `gwhub.v1.Ingest/Report`: one long-lived stream that
//! carries a full snapshot on every (re)connect and deltas after it.
//!
//! Protocol (see `proto/gwhub/v1/ingest.proto`): Hello first, then a chunked
//! snapshot whose `seq` the deltas continue from (`seq + 1`, `+ 2`, ...).
//! The hub acks cumulatively; at most `max_unacked` sequence numbers are in
//! flight, and while the window is full changes wait in the store's
//! coalescing outbox (one entry per Gateway), so a slow hub bounds the
//! agent's memory by its Gateway count. A ResyncRequest gets a fresh
//! snapshot; the NEW_CONNECTION one every stream starts with is already
//! satisfied by the snapshot sent right after Hello.
//!
//! Inbound messages are read by their own task, so the agent never stops
//! reading acks while it waits to send (no deadlock with a hub that stops
//! reading while its own replies are unread). Any stream error or close ends
//! the connection; the client reconnects with exponential backoff and jitter.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus};
use gwhub_common::backoff::Exponential;
use gwhub_model::error_chain;
use gwhub_proto::client::{ReportStream, open_report};
use gwhub_proto::convert::report_to_proto;
use gwhub_proto::v1::{
    self, AgentMessage, HubMessage, ResyncReason, agent_message, hub_message,
    ingest_client::IngestClient,
};
use prost::Message;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Channel, Endpoint};
use tracing::Instrument;

use super::outbox::Change;
use super::store::{GatewayKey, GatewayStore, Next};

/// The agent version sent in Hello.
pub const AGENT_VERSION: &str = concat!("gwhub-agent/", env!("CARGO_PKG_VERSION"));

/// Capabilities this agent announces in Hello.
pub const CAPABILITIES: &[&str] = &["delta-batch"];

/// How the agent reaches the hub.
#[derive(Clone, Debug)]
pub struct HubConfig {
    /// `http://host:port` of the hub's Ingest service (`https://` with `tls`).
    pub endpoint: String,
    /// mTLS: the agent's certificate and the CA the hub's must chain to.
    pub tls: Option<tonic::transport::ClientTlsConfig>,
    /// With `tls`: the files it came from, re-read at every (re)connect
    /// (a renewed certificate is used without a restart).
    pub tls_files: Option<super::tls::TlsFiles>,
    /// The cluster reported in Hello (honoured by the hub in insecure mode).
    pub cluster: String,
    /// Send a Heartbeat after this long without any other message (the hub
    /// may ask for a shorter interval in HubHello).
    pub heartbeat: Duration,
    /// First reconnect delay; doubles per failed attempt up to `backoff_max`.
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// Give up a connection attempt after this long.
    pub connect_timeout: Duration,
    /// Largest message encoded or decoded (the hub's HubHello may lower the
    /// encode budget further).
    pub max_message_bytes: usize,
    /// Most Gateways per snapshot chunk.
    pub chunk_gateways: usize,
    /// Most changes batched under one delta sequence number.
    pub delta_batch: usize,
    /// Most sequence numbers sent but not acked (flow control).
    pub max_unacked: u64,
}

impl HubConfig {
    /// Defaults suited to a real deployment.
    pub fn new(endpoint: impl Into<String>, cluster: impl Into<String>) -> Self {
        Self {
            endpoint: endpoint.into(),
            tls: None,
            tls_files: None,
            cluster: cluster.into(),
            heartbeat: Duration::from_secs(5),
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            max_message_bytes: gwhub_model::limits::MAX_MESSAGE_BYTES,
            chunk_gateways: 256,
            delta_batch: 64,
            max_unacked: 64,
        }
    }
}

/// Counters of what the client did; shared so tests and the demo can see
/// progress without parsing logs.
#[derive(Debug, Default)]
pub struct ClientStats {
    /// Streams opened (a Hello was sent).
    pub connections: AtomicU64,
    /// Complete snapshots sent.
    pub snapshots: AtomicU64,
    /// Delta messages sent.
    pub deltas: AtomicU64,
    /// Changes sent inside deltas.
    pub changes: AtomicU64,
    /// Heartbeats sent.
    pub heartbeats: AtomicU64,
    /// Highest sequence number the hub acked on the current stream.
    pub acked: AtomicU64,
    /// Whether a stream is open now.
    pub connected: AtomicBool,
}

impl ClientStats {
    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
enum StreamError {
    #[error("invalid hub URL {0:?}: {1}")]
    Url(String, String),
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("hub ended the stream: {0}")]
    Status(#[from] tonic::Status),
    #[error("hub closed the stream")]
    Closed,
    #[error("shutting down")]
    Shutdown,
}

/// Streams `store` to the hub until `shutdown`, reconnecting as needed.
#[derive(Debug)]
pub struct HubClient {
    config: HubConfig,
    store: Arc<GatewayStore>,
    stats: Arc<ClientStats>,
    /// Last sequence number used; never reused across connections, so a
    /// hub never confuses an old delta with a new one.
    seq: u64,
    snapshot_id: u64,
}

impl HubClient {
    pub fn new(config: HubConfig, store: Arc<GatewayStore>) -> Self {
        Self {
            config,
            store,
            stats: Arc::default(),
            seq: 0,
            snapshot_id: 0,
        }
    }

    /// The client's counters.
    pub fn stats(&self) -> Arc<ClientStats> {
        self.stats.clone()
    }

    /// Runs until `shutdown` is cancelled, in a span naming the cluster
    /// (its log lines carry it; the demo runs several agents in one process).
    #[tracing::instrument(name = "hub_client", skip_all, fields(cluster = %self.config.cluster))]
    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut backoff =
            Exponential::new(self.config.backoff_initial, self.config.backoff_max).jittered();
        while !shutdown.is_cancelled() {
            let mut healthy = false;
            let result = self.connection(&shutdown, &mut healthy).await;
            self.stats.connected.store(false, Ordering::Relaxed);
            if shutdown.is_cancelled() {
                break;
            }
            if healthy {
                backoff.reset();
            }
            let delay = backoff.failed();
            match result {
                Ok(()) => {}
                Err(e) => tracing::warn!(
                    hub = %self.config.endpoint,
                    error = %e,
                    retry_in_ms = delay.as_millis() as u64,
                    "hub connection failed; reconnecting"
                ),
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(delay) => {}
            }
        }
        tracing::info!("hub client stopped");
    }

    async fn connect(&mut self) -> Result<IngestClient<Channel>, StreamError> {
        if let Some(files) = &self.config.tls_files {
            match files.load() {
                Ok(tls) => self.config.tls = Some(tls),
                Err(e) => tracing::warn!(
                    error = %e,
                    "cannot reload the TLS files; connecting with the last good ones"
                ),
            }
        }
        let cfg = &self.config;
        let mut endpoint = Endpoint::from_shared(cfg.endpoint.clone())
            .map_err(|e| StreamError::Url(cfg.endpoint.clone(), e.to_string()))?;
        if let Some(tls) = &cfg.tls {
            endpoint = endpoint
                .tls_config(tls.clone())
                .map_err(|e| StreamError::Connect(error_chain(&e)))?;
        }
        let endpoint = endpoint
            .connect_timeout(cfg.connect_timeout)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(20))
            .keep_alive_timeout(Duration::from_secs(10));
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| StreamError::Connect(error_chain(&e)))?;
        Ok(IngestClient::new(channel)
            .max_encoding_message_size(cfg.max_message_bytes)
            .max_decoding_message_size(cfg.max_message_bytes))
    }

    /// One stream, from Hello to its end. `Ok` only on shutdown. Sets
    /// `healthy` once the hub acked something (resets the backoff).
    async fn connection(
        &mut self,
        shutdown: &CancellationToken,
        healthy: &mut bool,
    ) -> Result<(), StreamError> {
        let mut client = tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            c = self.connect() => c?,
        };
        let hello = v1::Hello {
            agent_version: AGENT_VERSION.to_owned(),
            capabilities: CAPABILITIES.iter().map(|c| (*c).to_owned()).collect(),
            cluster: self.config.cluster.clone(),
        };
        // A hub that accepts the connection but never answers must not
        // hold the agent forever.
        let call = tokio::time::timeout(
            self.config.connect_timeout,
            open_report(&mut client, hello, 16),
        );
        let response = tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            r = call => r.map_err(|_| StreamError::Connect("the hub did not answer the stream in time".into()))??,
        };
        ClientStats::bump(&self.stats.connections);
        self.stats.connected.store(true, Ordering::Relaxed);
        self.stats.acked.store(0, Ordering::Relaxed);
        tracing::info!(hub = %self.config.endpoint, "connected to hub");

        let inbound = Arc::new(Inbound::default());
        let ReportStream { tx, rx } = response;
        let reader = tokio::spawn(read_inbound(rx, inbound.clone()));
        let result = self.stream(&tx, &inbound, shutdown, healthy).await;
        reader.abort();
        match result {
            Err(StreamError::Shutdown) => Ok(()),
            r => r,
        }
    }

    async fn stream(
        &mut self,
        tx: &mpsc::Sender<AgentMessage>,
        inbound: &Inbound,
        shutdown: &CancellationToken,
        healthy: &mut bool,
    ) -> Result<(), StreamError> {
        let mut out = Sender {
            tx,
            shutdown,
            last_sent: Instant::now(),
        };
        let mut need_snapshot = true;
        let mut snapshot_sent = false;
        // Sequence numbers up to `floor` need no ack on this stream.
        let mut floor = self.seq;
        let mut heartbeat = self.config.heartbeat;
        let mut encode_budget = self.config.max_message_bytes;
        let mut source = self.store.subscribe_source();
        loop {
            if let Some(end) = inbound.end.lock().map(|mut e| e.take()).unwrap_or(None) {
                return Err(end);
            }
            if let Some(h) = inbound.hello.lock().ok().and_then(|mut h| h.take()) {
                if h.heartbeat_interval_millis > 0 {
                    heartbeat =
                        heartbeat.min(Duration::from_millis(h.heartbeat_interval_millis.into()));
                }
                if h.max_message_bytes > 0 {
                    encode_budget = encode_budget.min(h.max_message_bytes as usize);
                }
                tracing::debug!(cluster = %h.cluster, hub_version = %h.hub_version, "hub hello");
            }
            if let Some((reason, message)) = inbound.resync.lock().ok().and_then(|mut r| r.take()) {
                let first = reason == ResyncReason::NewConnection as i32;
                if !(first && snapshot_sent) {
                    tracing::info!(reason = reason_name(reason), %message, "hub asked for a resync");
                    need_snapshot = true;
                }
            }
            let acked = inbound.acked.load(Ordering::Relaxed);
            self.stats.acked.store(acked, Ordering::Relaxed);
            if acked > 0 && snapshot_sent {
                *healthy = true;
            }
            let acked = acked.max(floor);

            let ready = self.store.is_ready();
            let source_ok = *source.borrow_and_update();
            // A snapshot vouches for the whole cluster: not while it is unread.
            if need_snapshot && ready && source_ok {
                need_snapshot = false;
                snapshot_sent = true;
                floor = self.seq;
                self.send_snapshot(&mut out, encode_budget).await?;
                continue;
            }
            if !need_snapshot && self.seq.saturating_sub(acked) < self.config.max_unacked {
                match self.store.next(self.config.delta_batch) {
                    Next::Snapshot => {
                        need_snapshot = true;
                        continue;
                    }
                    Next::Deltas(changes, observed, trace) if !changes.is_empty() => {
                        self.report(&mut out, changes, observed, &trace, encode_budget)
                            .await?;
                        continue;
                    }
                    Next::Deltas(..) => {}
                }
            }

            let idle_until = out.last_sent + heartbeat;
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = inbound.wake.notified() => {}
                _ = self.store.changed(), if !need_snapshot => {}
                _ = self.store.wait_ready(), if need_snapshot && !ready => {}
                _ = source.changed() => {}
                // No heartbeat while the source is failing: silence is what
                // makes the hub mark this cluster stale.
                _ = tokio::time::sleep_until(idle_until), if source_ok => {
                    let ms = jiff::Timestamp::now().as_millisecond();
                    out.send(agent_message::Message::Heartbeat(v1::Heartbeat { sent_unix_millis: ms })).await?;
                    ClientStats::bump(&self.stats.heartbeats);
                }
            }
        }
    }

    /// Sends one batch of deltas under a `report` span. The report
    /// continues the reconcile's trace; the hub continues the report's
    /// (Delta.traceparent). A root (not a child of the hub_client span)
    /// when the reconcile was not traced.
    async fn report(
        &mut self,
        out: &mut Sender<'_>,
        changes: Vec<(GatewayKey, Change<Arc<Gateway>>)>,
        observed: i64,
        trace: &str,
        budget: usize,
    ) -> Result<(), StreamError> {
        let span = tracing::info_span!(
            parent: None,
            "report",
            cluster = %self.config.cluster,
            gateway = tracing::field::Empty,
            changes = changes.len(),
        );
        if let [(key, _)] = changes.as_slice() {
            span.record("gateway", tracing::field::display(key));
        }
        gwhub_common::logging::set_parent(&span, trace);
        self.send_deltas(out, changes, observed, budget)
            .instrument(span)
            .await
    }

    async fn send_snapshot(
        &mut self,
        out: &mut Sender<'_>,
        budget: usize,
    ) -> Result<(), StreamError> {
        let gateways = self.store.snapshot();
        self.seq += 1;
        self.snapshot_id += 1;
        let (id, seq) = (self.snapshot_id, self.seq);
        let mut chunk = 0u32;
        let mut reports = Vec::new();
        let mut bytes = 0usize;
        // Leave room for framing and the chunk's own fields.
        let limit = budget.saturating_sub(1024).max(1);
        let total = gateways.len();
        for gw in gateways {
            let Some(report) = encode(&gw, limit) else {
                continue;
            };
            let len = report.encoded_len() + 8;
            if !reports.is_empty()
                && (reports.len() >= self.config.chunk_gateways || bytes + len > limit)
            {
                let part = v1::SnapshotChunk {
                    snapshot_id: id,
                    chunk,
                    r#final: false,
                    seq,
                    gateways: std::mem::take(&mut reports),
                };
                out.send(agent_message::Message::Snapshot(part)).await?;
                chunk += 1;
                bytes = 0;
            }
            bytes += len;
            reports.push(report);
        }
        let last = v1::SnapshotChunk {
            snapshot_id: id,
            chunk,
            r#final: true,
            seq,
            gateways: reports,
        };
        out.send(agent_message::Message::Snapshot(last)).await?;
        ClientStats::bump(&self.stats.snapshots);
        tracing::info!(gateways = total, chunks = chunk + 1, seq, "snapshot sent");
        Ok(())
    }

    async fn send_deltas(
        &mut self,
        out: &mut Sender<'_>,
        changes: Vec<(GatewayKey, Change<Arc<Gateway>>)>,
        observed: i64,
        budget: usize,
    ) -> Result<(), StreamError> {
        let limit = budget.saturating_sub(1024).max(1);
        let mut batch: Vec<v1::Change> = Vec::new();
        let mut bytes = 0usize;
        for (key, change) in changes {
            let change = match change {
                Change::Upsert(gw) => match encode(&gw, limit) {
                    Some(r) => v1::change::Change::Upsert(r),
                    None => continue,
                },
                Change::Delete => v1::change::Change::Delete(v1::GatewayRef {
                    namespace: key.namespace,
                    name: key.name,
                }),
            };
            let change = v1::Change {
                change: Some(change),
            };
            let len = change.encoded_len() + 8;
            if !batch.is_empty() && bytes + len > limit {
                self.send_delta(out, std::mem::take(&mut batch), observed)
                    .await?;
                bytes = 0;
            }
            bytes += len;
            batch.push(change);
        }
        if !batch.is_empty() {
            self.send_delta(out, batch, observed).await?;
        }
        Ok(())
    }

    async fn send_delta(
        &mut self,
        out: &mut Sender<'_>,
        changes: Vec<v1::Change>,
        observed_unix_millis: i64,
    ) -> Result<(), StreamError> {
        self.seq += 1;
        let n = changes.len() as u64;
        let seq = self.seq;
        out.send(agent_message::Message::Delta(v1::Delta {
            seq,
            changes,
            observed_unix_millis,
            traceparent: gwhub_common::logging::traceparent(),
        }))
        .await?;
        ClientStats::bump(&self.stats.deltas);
        self.stats.changes.fetch_add(n, Ordering::Relaxed);
        tracing::debug!(seq, changes = n, "delta sent");
        Ok(())
    }
}

/// Encodes one Gateway, or logs why it cannot be sent (a status the API
/// would reject, or a report bigger than a message) and skips it.
fn encode(gw: &Gateway, limit: usize) -> Option<v1::GatewayReport> {
    let key = GatewayKey::of(gw);
    let none = GatewayStatus::default();
    let report = match report_to_proto(
        &key.namespace,
        &key.name,
        gw.metadata.uid.as_deref().unwrap_or_default(),
        gw.metadata.generation.unwrap_or_default(),
        gw.status.as_ref().unwrap_or(&none),
    ) {
        Ok(mut r) => {
            with_hostnames(&mut r, gw);
            r
        }
        Err(e) => {
            tracing::error!(gateway = %key, error = %e, "cannot report Gateway; skipping it");
            return None;
        }
    };
    let len = report.encoded_len();
    if len > limit {
        tracing::error!(gateway = %key, bytes = len, limit, "Gateway status exceeds the message size limit; skipping it");
        return None;
    }
    Some(report)
}

/// Sets each reported listener's hostname from the Gateway's spec (fleet
/// DNS on the hub, spec section 8): the listener of the same name.
fn with_hostnames(report: &mut v1::GatewayReport, gw: &Gateway) {
    let Some(status) = report.status.as_mut() else {
        return;
    };
    for l in &mut status.listeners {
        l.hostname = gw
            .spec
            .listeners
            .iter()
            .find(|s| s.name == l.name)
            .and_then(|s| s.hostname.clone());
    }
}

/// The outgoing half of a stream; remembers when it last sent (heartbeats
/// are only sent when idle).
struct Sender<'a> {
    tx: &'a mpsc::Sender<AgentMessage>,
    shutdown: &'a CancellationToken,
    last_sent: Instant,
}

impl Sender<'_> {
    /// Sends one message; waits while the hub is slow (HTTP/2 flow control)
    /// but not past shutdown.
    async fn send(&mut self, m: agent_message::Message) -> Result<(), StreamError> {
        tokio::select! {
            r = self.tx.send(AgentMessage { message: Some(m) }) => r.map_err(|_| StreamError::Closed)?,
            _ = self.shutdown.cancelled() => return Err(StreamError::Shutdown),
        }
        self.last_sent = Instant::now();
        Ok(())
    }
}

/// What the reader task hands the sender: coalesced, so reading never blocks.
#[derive(Default)]
struct Inbound {
    wake: Notify,
    acked: AtomicU64,
    hello: std::sync::Mutex<Option<v1::HubHello>>,
    resync: std::sync::Mutex<Option<(i32, String)>>,
    end: std::sync::Mutex<Option<StreamError>>,
}

async fn read_inbound(mut stream: tonic::Streaming<HubMessage>, inbound: Arc<Inbound>) {
    let end = loop {
        match stream.message().await {
            Ok(Some(HubMessage { message: Some(m) })) => match m {
                hub_message::Message::Hello(h) => {
                    if let Ok(mut slot) = inbound.hello.lock() {
                        *slot = Some(h);
                    }
                }
                hub_message::Message::Ack(a) => {
                    inbound.acked.fetch_max(a.seq, Ordering::Relaxed);
                }
                hub_message::Message::Resync(r) => {
                    if let Ok(mut slot) = inbound.resync.lock() {
                        // A pending non-initial request wins over the initial one.
                        let keep = slot
                            .as_ref()
                            .is_some_and(|(old, _)| *old != ResyncReason::NewConnection as i32);
                        if !keep {
                            *slot = Some((r.reason, r.message));
                        }
                    }
                }
                hub_message::Message::Heartbeat(_) => continue,
            },
            // An empty or unknown message from a newer hub: ignore it.
            Ok(Some(HubMessage { message: None })) => continue,
            Ok(None) => break StreamError::Closed,
            Err(status) => break StreamError::Status(status),
        }
        inbound.wake.notify_one();
    };
    if let Ok(mut slot) = inbound.end.lock() {
        *slot = Some(end);
    }
    inbound.wake.notify_one();
}

fn reason_name(reason: i32) -> &'static str {
    ResyncReason::try_from(reason)
        .map(|r| r.as_str_name())
        .unwrap_or("unknown")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each reported listener carries its spec hostname (fleet DNS); one
    /// without a hostname carries none.
    #[test]
    fn reports_carry_listener_hostnames_from_the_spec() {
        let gw: Gateway = serde_json::from_value(serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"namespace": "ns", "name": "gw"},
            "spec": {"gatewayClassName": "c", "listeners": [
                {"name": "web", "port": 80, "protocol": "HTTP", "hostname": "app.fleet.test"},
                {"name": "any", "port": 81, "protocol": "HTTP"}
            ]},
            "status": {"listeners": [
                {"name": "any", "attachedRoutes": 0, "supportedKinds": [], "conditions": []},
                {"name": "web", "attachedRoutes": 1, "supportedKinds": [], "conditions": []}
            ]}
        }))
        .unwrap();
        let r = encode(&gw, usize::MAX).unwrap();
        let hosts: Vec<Option<&str>> = r
            .status
            .as_ref()
            .unwrap()
            .listeners
            .iter()
            .map(|l| l.hostname.as_deref())
            .collect();
        assert_eq!(hosts, [None, Some("app.fleet.test")]);
    }
}
