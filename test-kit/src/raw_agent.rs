//! A hand-rolled agent for driving the hub's `Ingest` stream in tests and
//! the load generator: it sends exactly the messages its caller gives it
//! (well-formed or not) and reads the hub's answers, heartbeats skipped.
//! The real agent runtime is tested through its own suites; this one stays
//! small and predictable. Tests use the asserting helpers ([`Agent::connect`],
//! [`Agent::expect_ack`]); the load generator the fallible ones
//! ([`channel`], [`Agent::open_on`], [`Agent::next_ack`]), which return an
//! [`AgentError`] instead of panicking.

use std::net::SocketAddr;
use std::time::Duration;

use gwhub_proto::client::{ReportStream, open_report};
use gwhub_proto::v1::{self, agent_message, change, hub_message, ingest_client::IngestClient};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::wait::WAIT;

/// What went wrong on a load generator's stream.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("{url} is not a valid endpoint: {reason}")]
    Url { url: String, reason: String },
    #[error("cannot connect to {url}: {reason}")]
    Connect { url: String, reason: String },
    #[error("open stream: {0}")]
    Open(tonic::Status),
    #[error("hub asked for a resync: {0}")]
    Resync(String),
    #[error("stream: closed by the hub")]
    Closed,
    #[error("stream: {0}")]
    Stream(tonic::Status),
}

/// A channel to `url` for many agents or big messages: `TCP_NODELAY`, large
/// HTTP/2 windows (so flow control round trips do not pace big Dashboard
/// messages), and up to 20 connection attempts 100 ms apart (a loaded
/// hub's listen backlog can refuse some).
pub async fn channel(url: &str) -> Result<Channel, AgentError> {
    let endpoint = Endpoint::from_shared(url.to_owned())
        .map_err(|e| AgentError::Url {
            url: url.to_owned(),
            reason: e.to_string(),
        })?
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(10))
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
    Err(AgentError::Connect {
        url: url.to_owned(),
        reason: last,
    })
}

/// An `Ingest` client over mTLS to `addr` (the hub's serving certificate
/// names `localhost`), trusting `ca` (PEM) and presenting `identity`
/// (certificate and key PEM) when given; without one, the unauthenticated
/// `Join` path.
pub async fn tls_ingest(
    addr: SocketAddr,
    ca: &[u8],
    identity: Option<(&str, &str)>,
) -> IngestClient<Channel> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .domain_name("localhost");
    if let Some((cert, key)) = identity {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    let channel = Endpoint::from_shared(format!("https://{addr}"))
        .expect("a valid endpoint")
        .tls_config(tls)
        .expect("a valid TLS config")
        .connect()
        .await
        .unwrap_or_else(|e| panic!("cannot connect to the hub at {addr}: {e:?}"));
    IngestClient::new(channel)
}

/// A `Report` stream with `hello`, once the hub admits it, answered with the
/// hub's Hello. The hub refuses a stream either when it is opened or as the
/// stream's first message (an inventory not loaded yet or a full hub:
/// `UNAVAILABLE`, "reconnect shortly"; a cluster its inventory does not list
/// yet: `PERMISSION_DENIED`): both are retried on a fresh client from
/// `connect`, every 200 ms, as an agent reconnects. Panics after `within`
/// naming the last refusal, or at once on a first message that is neither a
/// refusal nor the hub's Hello.
pub async fn admitted<F: Future<Output = IngestClient<Channel>>>(
    mut connect: impl FnMut() -> F,
    hello: v1::Hello,
    within: Duration,
) -> ReportStream {
    let cluster = hello.cluster.clone();
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let mut client = connect().await;
        let refusal = match open_report(&mut client, hello.clone(), 4).await {
            Ok(mut s) => match s.rx.next().await {
                Some(Ok(first)) => match first.message {
                    Some(hub_message::Message::Hello(_)) => return s,
                    other => {
                        panic!("{cluster}: the hub's first message is not its Hello: {other:?}")
                    }
                },
                Some(Err(status)) => status,
                None => tonic::Status::unavailable("the stream ended before the hub's Hello"),
            },
            Err(status) => status,
        };
        assert!(
            tokio::time::Instant::now() < deadline,
            "{cluster} never admitted within {within:?}; the last refusal: {refusal:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The hub's lasting refusal of a `Report` stream with `hello`, whether it
/// refuses the open or sends the refusal as the stream's first message. A
/// passing `UNAVAILABLE` ("reconnect shortly": an inventory not loaded yet,
/// a full hub) is not the answer: retried on a fresh client from `connect`
/// every 200 ms. Panics if the hub admits the stream (its Hello), or after
/// `within` of passing refusals.
pub async fn refusal<F: Future<Output = IngestClient<Channel>>>(
    mut connect: impl FnMut() -> F,
    hello: v1::Hello,
    within: Duration,
) -> tonic::Status {
    let cluster = hello.cluster.clone();
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let mut client = connect().await;
        let status = match open_report(&mut client, hello.clone(), 4).await {
            Ok(mut s) => match s.rx.next().await {
                Some(Ok(first)) => panic!("{cluster} was admitted: {first:?}"),
                Some(Err(status)) => status,
                None => tonic::Status::unavailable("the stream ended before the hub's Hello"),
            },
            Err(status) => status,
        };
        if status.code() != tonic::Code::Unavailable {
            return status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{cluster}: the hub said only UNAVAILABLE for {within:?}; the last: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One `Report` stream to the hub.
pub struct Agent {
    /// Messages to the hub, after the Hello.
    pub tx: mpsc::Sender<v1::AgentMessage>,
    /// The hub's messages.
    pub rx: tonic::Streaming<v1::HubMessage>,
}

/// Wraps one message body.
pub fn msg(m: agent_message::Message) -> v1::AgentMessage {
    v1::AgentMessage { message: Some(m) }
}

/// A one-chunk snapshot `id` at sequence number `seq`.
pub fn one_chunk_snapshot(id: u64, seq: u64, gateways: Vec<v1::GatewayReport>) -> v1::AgentMessage {
    msg(agent_message::Message::Snapshot(v1::SnapshotChunk {
        snapshot_id: id,
        chunk: 0,
        r#final: true,
        seq,
        gateways,
    }))
}

/// The Hello of a test agent for `cluster`.
pub fn hello(cluster: &str) -> v1::Hello {
    v1::Hello {
        agent_version: "test".into(),
        capabilities: vec![],
        cluster: cluster.into(),
    }
}

impl Agent {
    /// Connects, says Hello and checks the hub's greeting and its
    /// NEW_CONNECTION resync request.
    pub async fn connect(addr: SocketAddr, cluster: &str) -> Agent {
        Agent::connect_with(addr, hello(cluster)).await
    }

    /// [`Agent::connect`] with the given Hello.
    pub async fn connect_with(addr: SocketAddr, hello: v1::Hello) -> Agent {
        let cluster = hello.cluster.clone();
        let mut agent = Agent::open(addr, hello)
            .await
            .unwrap_or_else(|s| panic!("{cluster}: the hub refused to open the stream: {s:?}"));
        match agent.try_recv().await {
            Ok(hub_message::Message::Hello(h)) => assert_eq!(h.cluster, cluster),
            Ok(other) => panic!("{cluster}: expected the hub's Hello, got {other:?}"),
            Err(s) => panic!("{cluster}: the hub ended the stream instead of its Hello: {s:?}"),
        }
        let r = agent.expect_resync().await;
        assert_eq!(
            r.reason,
            v1::ResyncReason::NewConnection as i32,
            "{cluster}: the hub's first resync request is not NEW_CONNECTION: {r:?}"
        );
        agent
    }

    /// Opens the stream with `hello`; the hub's answers are left unread.
    pub async fn open(addr: SocketAddr, hello: v1::Hello) -> Result<Agent, tonic::Status> {
        let mut client = IngestClient::connect(format!("http://{addr}"))
            .await
            .unwrap_or_else(|e| panic!("cannot connect to the hub at {addr}: {e:?}"))
            .max_encoding_message_size(64 * 1024 * 1024);
        let ReportStream { tx, rx } = open_report(&mut client, hello, 64).await?;
        Ok(Agent { tx, rx })
    }

    /// Opens the stream on `channel` with `hello`, room for `buffer` queued
    /// messages and no message size limits; the hub's answers are left
    /// unread.
    pub async fn open_on(
        channel: Channel,
        hello: v1::Hello,
        buffer: usize,
    ) -> Result<Agent, AgentError> {
        let mut client = IngestClient::new(channel)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX);
        let ReportStream { tx, rx } = open_report(&mut client, hello, buffer)
            .await
            .map_err(AgentError::Open)?;
        Ok(Agent { tx, rx })
    }

    /// Reads one hub message, without a time bound: `Some(seq)` for an ack,
    /// `None` for anything else a healthy stream carries (Hello,
    /// heartbeats, the NEW_CONNECTION resync request); another resync
    /// request or the end of the stream is an error.
    pub async fn next_ack(&mut self) -> Result<Option<u64>, AgentError> {
        match self.rx.message().await {
            Ok(Some(m)) => match m.message {
                Some(hub_message::Message::Ack(a)) => Ok(Some(a.seq)),
                Some(hub_message::Message::Resync(r))
                    if r.reason != v1::ResyncReason::NewConnection as i32 =>
                {
                    Err(AgentError::Resync(r.message))
                }
                _ => Ok(None),
            },
            Ok(None) => Err(AgentError::Closed),
            Err(e) => Err(AgentError::Stream(e)),
        }
    }

    /// Sends, ignoring a stream the hub already ended (what the hub said
    /// about it is read with [`Agent::try_recv`]).
    pub async fn send(&self, m: agent_message::Message) {
        let _ = self.tx.send(msg(m)).await;
    }

    /// The next hub message other than a heartbeat.
    pub async fn recv(&mut self) -> hub_message::Message {
        self.try_recv()
            .await
            .unwrap_or_else(|s| panic!("the hub ended the stream instead of answering: {s:?}"))
    }

    /// [`Agent::recv`] waiting up to `within` (for answers that wait on
    /// the API server, say) instead of [`WAIT`].
    pub async fn recv_within(&mut self, within: Duration) -> hub_message::Message {
        self.try_recv_within(within)
            .await
            .unwrap_or_else(|s| panic!("the hub ended the stream instead of answering: {s:?}"))
    }

    /// The next hub message other than a heartbeat, or how the stream ended.
    pub async fn try_recv(&mut self) -> Result<hub_message::Message, tonic::Status> {
        self.try_recv_within(WAIT).await
    }

    /// [`Agent::try_recv`] waiting up to `within` instead of [`WAIT`].
    pub async fn try_recv_within(
        &mut self,
        within: Duration,
    ) -> Result<hub_message::Message, tonic::Status> {
        loop {
            let m = tokio::time::timeout(within, self.rx.next())
                .await
                .unwrap_or_else(|_| panic!("the hub did not answer within {within:?}"))
                .expect("the hub closed the stream without a status")?;
            match m.message {
                Some(hub_message::Message::Heartbeat(_)) => continue,
                Some(m) => return Ok(m),
                None => panic!("empty hub message"),
            }
        }
    }

    /// The status the hub ended the stream with (acks skipped).
    pub async fn expect_error(&mut self) -> tonic::Status {
        loop {
            match self.try_recv().await {
                Ok(hub_message::Message::Ack(_)) => continue,
                Ok(other) => panic!("expected an error, got {other:?}"),
                Err(status) => return status,
            }
        }
    }

    /// The status the hub ended the stream with (acks and resyncs skipped).
    pub async fn ended(&mut self) -> tonic::Status {
        loop {
            match self.try_recv().await {
                Ok(hub_message::Message::Ack(_) | hub_message::Message::Resync(_)) => continue,
                Ok(other) => panic!("expected the stream to end, got {other:?}"),
                Err(status) => return status,
            }
        }
    }

    pub async fn expect_ack(&mut self, seq: u64) {
        match self.recv().await {
            hub_message::Message::Ack(a) => assert_eq!(a.seq, seq),
            other => panic!("expected ack {seq}, got {other:?}"),
        }
    }

    pub async fn expect_resync(&mut self) -> v1::ResyncRequest {
        match self.recv().await {
            hub_message::Message::Resync(r) => r,
            other => panic!("expected a resync request, got {other:?}"),
        }
    }

    /// A one-chunk snapshot, then its ack.
    pub async fn snapshot(&mut self, id: u64, seq: u64, gateways: Vec<v1::GatewayReport>) {
        self.send_snapshot(id, seq, gateways).await;
        self.expect_ack(seq).await;
    }

    /// The one-report snapshot 1 at sequence number 0, answer unread.
    pub async fn snapshot_no_ack(&self, r: v1::GatewayReport) {
        self.send_snapshot(1, 0, vec![r]).await;
    }

    /// A one-chunk snapshot, answer unread.
    pub async fn send_snapshot(&self, id: u64, seq: u64, gateways: Vec<v1::GatewayReport>) {
        let _ = self.tx.send(one_chunk_snapshot(id, seq, gateways)).await;
    }

    pub async fn upsert(&self, seq: u64, report: v1::GatewayReport) {
        self.send(agent_message::Message::Delta(v1::Delta {
            seq,
            changes: vec![v1::Change {
                change: Some(change::Change::Upsert(report)),
            }],
            ..Default::default()
        }))
        .await;
    }

    pub async fn delete(&self, seq: u64, namespace: &str, name: &str) {
        self.send(agent_message::Message::Delta(v1::Delta {
            seq,
            changes: vec![v1::Change {
                change: Some(change::Change::Delete(v1::GatewayRef {
                    namespace: namespace.into(),
                    name: name.into(),
                })),
            }],
            ..Default::default()
        }))
        .await;
    }

    pub async fn heartbeat(&self) {
        self.send(agent_message::Message::Heartbeat(v1::Heartbeat {
            sent_unix_millis: 0,
        }))
        .await;
    }
}
