//! The agent stream (`gwhub.v1.Ingest/Report`): identity, snapshot assembly,
//! sequence checking, acks and heartbeats. Each stream runs in its own task;
//! a bad message ends only that stream, with a status naming the problem.
//! What a report's content does to the index (snapshots, deltas) is in
//! `content`.

mod content;

use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt};
use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_common::TokenBucket;
use gwhub_model::limits::*;
use gwhub_proto::convert::{self, check_count, check_str};
use gwhub_proto::v1::{self, agent_message, hub_message};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};
use tracing::Instrument;

use crate::index::{IngestPort, Session};
use crate::issuer::Issuer;
use gwhub_hub_rules::aggregate::GatewayKey;

/// Messages handled before the hub acks and yields, so a fast agent gets
/// coalesced acks and cannot starve the other streams.
const BATCH: usize = 256;
/// Outbound messages queued per stream; a full queue stops reading
/// inbound, so HTTP/2 flow control slows the agent instead of the hub
/// buffering.
const OUTBOUND_QUEUE: usize = 16;
/// How long the hub waits to hand an ending stream's status to an agent
/// whose queue is full (it stopped reading).
const FINAL_SEND_TIMEOUT: Duration = Duration::from_secs(1);

/// How the ingest endpoint behaves.
#[derive(Clone, Debug)]
pub struct IngestConfig {
    /// Take the cluster from Hello (no client certificates).
    pub insecure: bool,
    /// How often the hub heartbeats, and asks agents to.
    pub heartbeat_interval: Duration,
    /// How long a new stream may take to send Hello.
    pub hello_timeout: Duration,
    /// Messages per second one stream may send (token bucket, bursts of one
    /// second's worth); past it the stream ends with RESOURCE_EXHAUSTED.
    /// 0 turns the limit off.
    pub max_messages_per_second: u32,
    /// Encoded bytes of status one cluster may report
    /// (`--max-cluster-report-bytes`).
    pub max_cluster_report_bytes: u64,
}

gwhub_common::metrics! {
    /// What ingest refuses, served on `/metrics`.
    #[derive(Debug, Default)]
    pub struct IngestCounters {
        /// Streams refused for `--max-cluster-report-bytes`.
        pub refused_cluster_report_bytes: prometheus_client::metrics::counter::Counter =>
            "gwhub_budget_refused_cluster_report_bytes",
            "Agent streams ended for --max-cluster-report-bytes.",
    }
}

/// Default of `--max-cluster-report-bytes`: 32 MiB, about 10,000 Gateways
/// of 3 KiB (a Gateway with a few listeners encodes to well under 1 KiB).
pub const DEFAULT_MAX_CLUSTER_REPORT_BYTES: u64 = 32 * 1024 * 1024;
/// Default of `gwhub serve --max-messages-per-second`: far above what an
/// agent sends (a snapshot in chunks, then one delta per change batch) and
/// above the scale bench's per-stream rate, so only a runaway or hostile
/// stream meets it.
pub const DEFAULT_MAX_MESSAGES_PER_SECOND: u32 = 50_000;

impl IngestConfig {
    /// Heartbeats three times per staleness window, so one lost heartbeat
    /// never makes a cluster stale.
    pub fn for_stale_after(insecure: bool, stale_after: Duration) -> Self {
        IngestConfig {
            insecure,
            heartbeat_interval: (stale_after / 3).max(Duration::from_millis(100)),
            hello_timeout: Duration::from_secs(10),
            max_messages_per_second: DEFAULT_MAX_MESSAGES_PER_SECOND,
            max_cluster_report_bytes: DEFAULT_MAX_CLUSTER_REPORT_BYTES,
        }
    }
}

pub struct IngestService {
    index: IngestPort,
    config: IngestConfig,
    shutdown: CancellationToken,
    /// Serves Join and Renew (`None`: joining is off).
    issuer: Option<std::sync::Arc<dyn Issuer>>,
    /// Counted into by every stream ([`Self::count_in`]).
    counters: std::sync::Arc<IngestCounters>,
}

impl IngestService {
    /// `shutdown` being cancelled ends every stream with UNAVAILABLE.
    pub fn new(index: IngestPort, config: IngestConfig, shutdown: CancellationToken) -> Self {
        IngestService {
            index,
            config,
            shutdown,
            issuer: None,
            counters: std::sync::Arc::default(),
        }
    }

    /// Counts refusals into `counters` (the hub's, on `/metrics`).
    pub fn count_in(mut self, counters: std::sync::Arc<IngestCounters>) -> Self {
        self.counters = counters;
        self
    }

    /// Serves Join and Renew with `issuer`.
    pub fn with_issuer(mut self, issuer: Option<std::sync::Arc<dyn Issuer>>) -> Self {
        self.issuer = issuer;
        self
    }

    /// The tonic service with the hub's message size limit.
    pub fn into_server(self) -> v1::ingest_server::IngestServer<Self> {
        v1::ingest_server::IngestServer::new(self)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }
}

type Outbound = mpsc::Sender<Result<v1::HubMessage, Status>>;

#[tonic::async_trait]
impl v1::ingest_server::Ingest for IngestService {
    type ReportStream =
        Pin<Box<dyn Stream<Item = Result<v1::HubMessage, Status>> + Send + 'static>>;

    async fn join(
        &self,
        request: Request<v1::JoinRequest>,
    ) -> Result<Response<v1::JoinResponse>, Status> {
        let Some(issuer) = &self.issuer else {
            return Err(Status::unimplemented(
                "this hub does not issue certificates: joining needs its Secrets \
                 (Kubernetes mode without --tls-cert or --insecure)",
            ));
        };
        let peer = crate::conn::conn_of(&request)
            .map(|c| c.remote)
            .or_else(|| request.remote_addr())
            .map(|a| a.ip());
        issuer
            .join(peer, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn renew(
        &self,
        request: Request<v1::RenewRequest>,
    ) -> Result<Response<v1::JoinResponse>, Status> {
        let Some(issuer) = &self.issuer else {
            return Err(Status::unimplemented(
                "this hub does not issue certificates: renew the certificate where it was made",
            ));
        };
        let cluster = super::peer::peer_cluster(&request)?;
        let presented = crate::conn::conn_of(&request)
            .and_then(|c| c.tls.as_ref())
            .map(|t| t.certs.clone())
            .unwrap_or_default();
        issuer
            .renew(&cluster, &presented, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn report(
        &self,
        request: Request<Streaming<v1::AgentMessage>>,
    ) -> Result<Response<Self::ReportStream>, Status> {
        let peer = crate::conn::conn_of(&request)
            .map(|c| c.remote)
            .or_else(|| request.remote_addr());
        // With mTLS the certificate, not Hello, names the cluster.
        let identity = match self.config.insecure {
            true => None,
            false => Some(super::peer::peer_cluster(&request).inspect_err(|status| {
                tracing::warn!(?peer, message = status.message(), "agent refused");
            })?),
        };
        // With mTLS the stream ends when its certificate expires or is
        // no longer trusted after a client-CA reload.
        let cert_end = super::peer::stream_end(&request);
        let inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(OUTBOUND_QUEUE);
        let index = self.index.clone();
        let config = self.config.clone();
        let shutdown = self.shutdown.clone();
        let counters = self.counters.clone();
        // The stream's log lines name its peer and, once Hello told it,
        // its cluster.
        let span = tracing::info_span!(
            "agent_stream",
            peer = ?peer,
            cluster = tracing::field::Empty,
        );
        tokio::spawn(async move {
            let mut stream = AgentStream::new(index, config, tx.clone(), shutdown);
            stream.identity = identity;
            stream.counters = counters;
            let result = match cert_end {
                None => stream.run(inbound).await,
                Some(end) => tokio::select! {
                    r = stream.run(inbound) => r,
                    status = end => Err(status),
                },
            };
            if let Some(session) = &stream.session {
                stream.index.disconnect(session);
            }
            // The stream's state (a partial snapshot may be as large as the
            // cluster budget) goes before the final status is handed over.
            drop(stream);
            match result {
                Ok(()) => tracing::info!("agent stream closed"),
                Err(status) => {
                    tracing::warn!(code = ?status.code(), message = status.message(), "agent stream ended");
                    // An agent that stopped reading gets no status rather
                    // than holding the task.
                    let _ = tokio::time::timeout(FINAL_SEND_TIMEOUT, tx.send(Err(status))).await;
                }
            }
        }.instrument(span));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

struct Partial {
    id: u64,
    next_chunk: u32,
    gateways: BTreeMap<GatewayKey, GatewayStatus>,
    /// Each Gateway's listener hostnames (fleet DNS).
    hostnames: BTreeMap<GatewayKey, Vec<(String, String)>>,
    /// Each Gateway's encoded size, and their sum.
    sizes: HashMap<GatewayKey, u64>,
    bytes: u64,
}

struct AgentStream {
    index: IngestPort,
    config: IngestConfig,
    tx: Outbound,
    shutdown: CancellationToken,
    session: Option<Session>,
    /// The cluster the client certificate names (mTLS only).
    identity: Option<String>,
    /// The last sequence number applied; `None` until a complete snapshot
    /// on this stream (and again after a gap).
    applied: Option<u64>,
    acked: Option<u64>,
    /// A ResyncRequest is outstanding; deltas are dropped silently meanwhile.
    resync_requested: bool,
    partial: Option<Partial>,
    pending: Vec<v1::HubMessage>,
    /// `--max-messages-per-second`: a burst of one second's worth, then
    /// refusals (the stream ends) rather than waits.
    rate: Option<TokenBucket>,
    /// Encoded size of each Gateway the cluster's report holds since this
    /// stream's last snapshot, and their sum (the cluster budget).
    sizes: HashMap<GatewayKey, u64>,
    bytes: u64,
    /// The service's counters.
    counters: std::sync::Arc<IngestCounters>,
}

fn hub_msg(m: hub_message::Message) -> v1::HubMessage {
    v1::HubMessage { message: Some(m) }
}

/// Maps errors tonic raised while decoding into statuses naming the problem.
fn inbound_error(status: Status) -> Status {
    match status.code() {
        tonic::Code::OutOfRange if status.message().contains("too large") => {
            Status::resource_exhausted(format!(
                "message too large: the hub accepts at most {MAX_MESSAGE_BYTES} bytes per message ({})",
                status.message()
            ))
        }
        tonic::Code::Internal if status.message().contains("decode") => {
            Status::invalid_argument(format!("malformed message: {}", status.message()))
        }
        _ => status,
    }
}

/// How every stream ends when the hub shuts down.
fn shutting_down() -> Status {
    Status::unavailable("the hub is shutting down; reconnect")
}

/// How a stream a newer one for its cluster took over ends (or one whose
/// cluster left the fleet inventory).
fn superseded(session: &Session) -> Status {
    if session.removed() {
        return Status::permission_denied(crate::index::removed_message(session));
    }
    Status::aborted(crate::index::Superseded(session.cluster().to_owned()).to_string())
}

/// A refused connection's status: a stranger to the inventory is denied;
/// an inventory not loaded yet or a full hub asks the agent to come back.
fn refused(e: crate::index::ConnectError) -> Status {
    use crate::index::ConnectError;
    use gwhub_hub_rules::inventory::Refusal;
    match e {
        ConnectError::TooMany(e) => Status::resource_exhausted(e.to_string()),
        ConnectError::Inventory(e @ Refusal::NotLoaded { .. }) => {
            Status::unavailable(e.to_string())
        }
        ConnectError::Inventory(e) => Status::permission_denied(e.to_string()),
    }
}

/// The one cluster-name rule, the same an mTLS certificate's name meets.
fn valid_cluster_name(name: &str) -> Result<(), Status> {
    gwhub_model::cluster::validate(name)
        .map_err(|e| Status::invalid_argument(format!("Hello.cluster: {e}")))
}

fn check_hello(hello: &v1::Hello) -> Result<(), Status> {
    let invalid = |e: convert::Invalid| Status::invalid_argument(format!("Hello.{e}"));
    check_str(
        "agent_version",
        &hello.agent_version,
        MAX_AGENT_VERSION_LEN,
        false,
    )
    .map_err(invalid)?;
    check_count("capabilities", hello.capabilities.len(), MAX_CAPABILITIES).map_err(invalid)?;
    for (i, c) in hello.capabilities.iter().enumerate() {
        check_str(&format!("capabilities[{i}]"), c, MAX_CAPABILITY_LEN, false).map_err(invalid)?;
    }
    Ok(())
}

impl AgentStream {
    fn new(
        index: IngestPort,
        config: IngestConfig,
        tx: Outbound,
        shutdown: CancellationToken,
    ) -> Self {
        AgentStream {
            index,
            config,
            tx,
            shutdown,
            session: None,
            identity: None,
            applied: None,
            acked: None,
            resync_requested: false,
            partial: None,
            pending: Vec::new(),
            rate: None,
            sizes: HashMap::new(),
            bytes: 0,
            counters: std::sync::Arc::default(),
        }
    }

    /// `Ok` when the agent closed the stream (or went away).
    async fn run(&mut self, mut inbound: Streaming<v1::AgentMessage>) -> Result<(), Status> {
        let hello = match tokio::time::timeout(self.config.hello_timeout, inbound.next()).await {
            Err(_) => {
                return Err(Status::deadline_exceeded(format!(
                    "no Hello within {:?}",
                    self.config.hello_timeout
                )));
            }
            Ok(None) => return Ok(()),
            Ok(Some(m)) => m.map_err(inbound_error)?,
        };
        self.accept_hello(hello)?;
        let per_second = self.config.max_messages_per_second;
        self.rate = (per_second > 0).then(|| {
            TokenBucket::new(f64::from(per_second), per_second, std::time::Instant::now())
        });
        if !self.flush().await? {
            return Ok(());
        }

        let period = self.config.heartbeat_interval;
        let mut heartbeat = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        let shutdown = self.shutdown.clone();
        let session = self.session().clone();
        loop {
            let first = tokio::select! {
                biased;
                _ = shutdown.cancelled() => return Err(shutting_down()),
                () = session.superseded() => return Err(superseded(&session)),
                m = inbound.next() => m,
                _ = heartbeat.tick() => {
                    self.pending.push(hub_msg(hub_message::Message::Heartbeat(v1::Heartbeat {
                        sent_unix_millis: jiff::Timestamp::now().as_millisecond(),
                    })));
                    if !self.flush().await? {
                        return Ok(());
                    }
                    continue;
                }
            };
            let Some(first) = first else { return Ok(()) };
            if !self.index.touch(&session) {
                return Err(superseded(&session));
            }
            let now = tokio::time::Instant::now();
            self.limit(now)?;
            self.handle(first)?;
            let mut closed = false;
            for _ in 1..BATCH {
                match inbound.next().now_or_never() {
                    Some(Some(m)) => {
                        self.limit(now)?;
                        self.handle(m)?;
                    }
                    Some(None) => {
                        closed = true;
                        break;
                    }
                    None => break,
                }
            }
            if !self.flush().await? || closed {
                return Ok(());
            }
        }
    }

    /// Checks the first message (it must be Hello), settles the cluster and
    /// registers the session; queues the hub's Hello and a resync request.
    fn accept_hello(&mut self, hello: v1::AgentMessage) -> Result<(), Status> {
        let Some(agent_message::Message::Hello(hello)) = hello.message else {
            return Err(Status::invalid_argument("the first message must be Hello"));
        };
        check_hello(&hello)?;
        let cluster = if self.config.insecure {
            valid_cluster_name(&hello.cluster)?;
            hello.cluster.clone()
        } else {
            let Some(certified) = self.identity.clone() else {
                return Err(Status::unauthenticated(
                    "no client certificate identity: the hub needs mTLS (or --insecure)",
                ));
            };
            valid_cluster_name(&certified)?;
            super::peer::check_claim(&certified, &hello.cluster)?;
            certified
        };
        let session = self
            .index
            .connect(&cluster, &hello.agent_version)
            .map_err(refused)?;
        tracing::Span::current().record("cluster", cluster.as_str());
        tracing::info!(agent_version = hello.agent_version, "agent connected");
        self.session = Some(session);
        self.pending
            .push(hub_msg(hub_message::Message::Hello(v1::HubHello {
                hub_version: env!("CARGO_PKG_VERSION").to_owned(),
                capabilities: Vec::new(),
                cluster,
                max_message_bytes: MAX_MESSAGE_BYTES as u32,
                max_gateways: MAX_GATEWAYS as u32,
                heartbeat_interval_millis: u32::try_from(
                    self.config.heartbeat_interval.as_millis(),
                )
                .unwrap_or(u32::MAX),
            })));
        self.request_resync(
            v1::ResyncReason::NewConnection,
            "new connection: send a full snapshot".to_owned(),
        );
        Ok(())
    }

    /// Counts one inbound message against the stream's rate limit.
    fn limit(&mut self, now: tokio::time::Instant) -> Result<(), Status> {
        let over = self
            .rate
            .as_mut()
            .is_some_and(|rate| rate.try_take(now.into_std()).is_err());
        if over {
            return Err(Status::resource_exhausted(format!(
                "rate limit: more than {} messages per second on this stream; slow down (the hub's --max-messages-per-second)",
                self.config.max_messages_per_second
            )));
        }
        Ok(())
    }

    fn session(&self) -> &Session {
        self.session.as_ref().expect("set after Hello")
    }

    fn request_resync(&mut self, reason: v1::ResyncReason, message: String) {
        self.applied = None;
        self.partial = None;
        self.resync_requested = true;
        tracing::debug!(?reason, message, "requesting resync");
        self.pending
            .push(hub_msg(hub_message::Message::Resync(v1::ResyncRequest {
                reason: reason as i32,
                message,
            })));
    }

    /// Sends what is queued plus an ack; `Ok(false)` if the agent went away.
    /// An agent that stops reading does not hold a superseded stream (or
    /// shutdown): the wait for room in the queue gives way to both.
    async fn flush(&mut self) -> Result<bool, Status> {
        if self.applied.is_some() && self.applied != self.acked {
            self.acked = self.applied;
            let seq = self.applied.unwrap_or_default();
            self.pending
                .push(hub_msg(hub_message::Message::Ack(v1::Ack { seq })));
        }
        let session = self.session().clone();
        let shutdown = self.shutdown.clone();
        for m in std::mem::take(&mut self.pending) {
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return Err(shutting_down()),
                () = session.superseded() => return Err(superseded(&session)),
                sent = self.tx.send(Ok(m)) => {
                    if sent.is_err() {
                        return Ok(false);
                    }
                }
            }
        }
        Ok(true)
    }

    fn handle(&mut self, message: Result<v1::AgentMessage, Status>) -> Result<(), Status> {
        let message = message.map_err(inbound_error)?;
        match message.message {
            // A message kind from a newer agent: ignored, as the versioning
            // rules promise.
            None => Ok(()),
            Some(agent_message::Message::Hello(_)) => {
                Err(Status::invalid_argument("Hello sent twice on one stream"))
            }
            Some(agent_message::Message::Heartbeat(_)) => Ok(()),
            Some(agent_message::Message::Snapshot(chunk)) => self.snapshot(chunk),
            Some(agent_message::Message::Delta(delta)) => self.delta(delta),
        }
    }
}

/// Runs already-decoded agent messages through exactly what a plaintext
/// (`--insecure`) stream does with them (Hello first and its checks, snapshot
/// assembly, sequence checks and resyncs, validation against
/// [`gwhub_model::limits`], the index), without the network, timers or rate
/// limit. For the fuzzers and tests. Returns the status the live stream would
/// have ended with, or what the hub would have sent.
pub fn replay(
    index: &IngestPort,
    messages: impl IntoIterator<Item = v1::AgentMessage>,
) -> Result<Vec<v1::HubMessage>, Status> {
    let (tx, _rx) = mpsc::channel(1);
    let shutdown = CancellationToken::new();
    let config = IngestConfig::for_stale_after(true, Duration::from_secs(60));
    let mut stream = AgentStream::new(index.clone(), config, tx, shutdown);
    let mut messages = messages.into_iter();
    let result = match messages.next() {
        None => Ok(()),
        Some(hello) => stream
            .accept_hello(hello)
            .and_then(|()| messages.try_for_each(|m| stream.handle(Ok(m)))),
    };
    if let Some(session) = &stream.session {
        index.disconnect(session);
    }
    result.map(|()| stream.pending)
}

#[cfg(test)]
mod tests;
