//! Connection bounds for the hub's gRPC listeners (issue 17): at most
//! `--max-connections` open connections per listener (past it a new client
//! closes the connection idle longest, or with none idle waits while the
//! kernel's backlog pushes back: issue 25), a connection that
//! has no open call for `--idle-connection-timeout` is closed, and a failing
//! `accept` (e.g. out of file descriptors) backs off and logs instead of
//! spinning. Each connection carries a [`ConnInfo`] into its requests, so a
//! handler can close the connection it came on (a Dashboard watcher that
//! stopped reading) and count calls per connection.
//!
//! Reader listeners (Dashboard, web page) also share their slots among
//! client addresses by [`gwhub_hub_rules::reader_slots`] (issue 35): one
//! address holds at most its share, a full listener closes the oldest
//! connection of the address holding the most for an address below its
//! fair share, and a newcomer whose address has its fair share is closed
//! at once when no connection is idle, rather than holding up the accept
//! loop for everyone else. `ReaderPool` is that table shared by the
//! runtime, also for the Dashboard calls ([`crate::reader_pool::DashboardCalls`]).

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{FutureExt, Stream};
use gwhub_common::metrics_http::CountGauge;
use prometheus_client::metrics::counter::Counter;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::{CancellationToken, DropGuard, WaitForCancellationFutureOwned};
use tonic::body::Body;
use tonic::codegen::{Service, http};
use tonic::transport::server::{Connected, TlsConnectInfo};

use crate::conn_state::{ConnInfo, ConnState};
use crate::reader_pool::{PoolSlot, ReaderPool};
pub use accept::incoming;
pub use metrics::ListenerMetrics;

mod accept;
mod metrics;

/// Largest value of the count flags bounding connections and calls
/// (`--max-connections`, `--max-dashboard-*`): far above any real fleet,
/// far below what a semaphore can hold.
pub const MAX_COUNT_FLAG: u64 = 1 << 20;

/// What one listener allows.
#[derive(Clone, Debug)]
pub struct ConnLimits {
    /// Open connections at once (TLS handshakes included).
    pub max_connections: usize,
    /// A connection with no open call for this long is closed.
    pub idle_timeout: Duration,
    /// Reader listeners: open connections from one client address (a
    /// source of [`gwhub_hub_rules::reader_slots`]) at most, one past it
    /// closed as soon as it is accepted, and fair-share eviction when full
    /// (`ReaderPool`). `None` (agents): no per-address bound.
    pub max_per_address: Option<usize>,
}

/// Counters of one listener, for `/metrics`.
#[derive(Debug, Default)]
pub struct ListenerCounters {
    /// Connections open right now.
    pub open: CountGauge,
    /// Connections accepted since start.
    pub accepted: Counter,
    /// Connections closed because they had no open call for the idle timeout.
    pub idle_closed: Counter,
    /// Failed accepts (each followed by a back-off).
    pub accept_errors: Counter,
    /// Times the listener reached `max_connections` and stopped accepting.
    pub saturated: Counter,
    /// Idle connections closed for a new client while the listener was full.
    pub evicted: Counter,
    /// Connections closed while the listener was full for a client
    /// address holding less than its fair share (the oldest of the
    /// address holding the most).
    pub evicted_fair: Counter,
}

/// A listener's open connections, so that when it is full the one idle
/// longest is closed for a new client (issue 25): a flood of idle
/// connections cannot keep a fresh client out until idle timeouts catch up.
#[derive(Debug, Default)]
struct Open {
    conns: std::sync::Mutex<Vec<std::sync::Weak<ConnState>>>,
}

impl Open {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<std::sync::Weak<ConnState>>> {
        self.conns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn add(&self, state: &Arc<ConnState>, max: usize) {
        let mut conns = self.lock();
        if conns.len() >= max.saturating_mul(2).max(16) {
            conns.retain(|w| w.strong_count() > 0);
        }
        conns.push(Arc::downgrade(state));
    }

    /// Closes the connection with no open call that was active longest
    /// ago; false if every open connection has a call.
    fn evict_idlest(&self) -> bool {
        let victim = {
            let mut conns = self.lock();
            conns.retain(|w| w.strong_count() > 0);
            conns
                .iter()
                .filter_map(std::sync::Weak::upgrade)
                .filter(|c| c.open_calls() == 0 && !c.kill.is_cancelled())
                .min_by_key(|c| c.last_active())
        };
        match victim {
            Some(c) => {
                c.close();
                true
            }
            None => false,
        }
    }
}

/// One open call: the connection is not idle while it lives.
struct CallGuard(Arc<ConnState>);

impl CallGuard {
    fn new(state: Arc<ConnState>) -> Self {
        state.touch();
        state.calls.send_modify(|n| *n += 1);
        CallGuard(state)
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.0.touch();
        self.0.calls.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// The connection a request came on, with or without TLS.
pub fn conn_of<T>(request: &tonic::Request<T>) -> Option<&ConnInfo> {
    conn_in(request.extensions())
}

/// The connection a request came on, from its extensions.
pub fn conn_in(ext: &http::Extensions) -> Option<&ConnInfo> {
    ext.get::<ConnInfo>()
        .or_else(|| ext.get::<TlsConnectInfo<ConnInfo>>().map(|t| t.get_ref()))
}

/// Something a handler keeps alive until its response body has been sent
/// (or the call is dropped): put into the `tonic::Response`'s extensions,
/// moved into the body by [`Tracked`]. The Dashboard holds a unary answer's
/// call slot this way, so an answer the caller never reads stays counted.
#[derive(Clone)]
pub struct Hold(
    #[allow(dead_code, reason = "never read: held for its drop")]
    pub  Arc<dyn std::any::Any + Send + Sync>,
);

/// A service whose calls keep their connection from being idle, from the
/// request until the response body ends or the call is cancelled. Put it
/// inside any authentication, so a refused call does not count as use.
#[derive(Clone, Debug)]
pub struct Tracked<S> {
    inner: S,
}

impl<S> Tracked<S> {
    pub fn new(inner: S) -> Self {
        Tracked { inner }
    }
}

impl<S: tonic::server::NamedService> tonic::server::NamedService for Tracked<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B> Service<http::Request<B>> for Tracked<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let guard = conn_in(request.extensions()).map(|c| CallGuard::new(c.state.clone()));
        let response = self.inner.call(request);
        Box::pin(async move {
            let mut response = response.await?;
            let hold = response.extensions_mut().remove::<Hold>();
            Ok(match guard {
                None => response,
                Some(guard) => response.map(|body| {
                    Body::new(TrackedBody {
                        inner: body,
                        guard: Some(guard),
                        hold,
                        rest: None,
                    })
                }),
            })
        })
    }
}

/// The largest data frame a tracked body hands the HTTP/2 layer at once.
/// The layer asks for the next frame only while the peer's window has room,
/// so a caller that reads nothing holds at most this much beyond its
/// window, and the body ends (releasing its call and [`Hold`]) only once
/// the answer has all but gone out.
const MAX_FRAME: usize = 16 * 1024;

/// A response body holding its call open (and the handler's [`Hold`])
/// until it ends or is dropped, handing its data over in frames of at most
/// [`MAX_FRAME`].
struct TrackedBody {
    inner: Body,
    guard: Option<CallGuard>,
    hold: Option<Hold>,
    /// What is left of a data frame larger than [`MAX_FRAME`].
    rest: Option<tonic::codegen::Bytes>,
}

impl TrackedBody {
    /// The next frame of at most [`MAX_FRAME`] bytes cut from `data`,
    /// keeping the remainder.
    fn piece(
        &mut self,
        mut data: tonic::codegen::Bytes,
    ) -> http_body::Frame<tonic::codegen::Bytes> {
        if data.len() > MAX_FRAME {
            let piece = data.split_to(MAX_FRAME);
            self.rest = Some(data);
            http_body::Frame::data(piece)
        } else {
            http_body::Frame::data(data)
        }
    }
}

impl http_body::Body for TrackedBody {
    type Data = tonic::codegen::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        if let Some(rest) = self.rest.take() {
            return Poll::Ready(Some(Ok(self.piece(rest))));
        }
        match std::task::ready!(Pin::new(&mut self.inner).poll_frame(cx)) {
            None => {
                self.guard = None;
                self.hold = None;
                Poll::Ready(None)
            }
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => Poll::Ready(Some(Ok(self.piece(data)))),
                Err(other) => Poll::Ready(Some(Ok(other))),
            },
            Some(Err(e)) => Poll::Ready(Some(Err(e))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match &self.rest {
            None => self.inner.size_hint(),
            Some(_) => http_body::SizeHint::default(),
        }
    }
}

/// A TCP connection that can be closed from a request handler and holds
/// its listener slot until dropped.
pub struct Conn {
    tcp: TcpStream,
    info: ConnInfo,
    killed: Pin<Box<WaitForCancellationFutureOwned>>,
    /// Its place in its client address's count; dropped before the
    /// permit, so a client waiting for the permit finds the slot free.
    _address: Option<PoolSlot>,
    _permit: OwnedSemaphorePermit,
    _closed: DropGuard,
    counters: Arc<ListenerCounters>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.counters.open.dec();
    }
}

impl Conn {
    fn check(&mut self, cx: &mut Context<'_>) -> Result<(), io::Error> {
        match self.killed.poll_unpin(cx) {
            Poll::Ready(()) => Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "connection closed by the hub",
            )),
            Poll::Pending => Ok(()),
        }
    }
}

impl Connected for Conn {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> ConnInfo {
        self.info.clone()
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.check(cx)?;
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.check(cx)?;
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.check(cx)?;
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// Resolves once `state` has had no open call for `idle` (the timer
/// restarts each time the count drops to 0).
async fn close_when_idle(state: &ConnState, idle: Duration) {
    let mut calls = state.calls.subscribe();
    loop {
        if calls.wait_for(|n| *n == 0).await.is_err() {
            return std::future::pending().await;
        }
        tokio::select! {
            () = tokio::time::sleep(idle) => {
                if *calls.borrow() == 0 {
                    return;
                }
            }
            _ = calls.changed() => {}
        }
    }
}

fn wrap(
    tcp: TcpStream,
    remote: SocketAddr,
    permit: OwnedSemaphorePermit,
    limits: &ConnLimits,
    counters: &Arc<ListenerCounters>,
) -> Conn {
    counters.open.inc();
    counters.accepted.inc();
    let state = Arc::new(ConnState::default());
    let closed = CancellationToken::new();
    // Closes the connection once it has had no open call for `idle`.
    let (watch, on_closed, idle, idle_counter) = (
        state.clone(),
        closed.clone(),
        limits.idle_timeout,
        counters.clone(),
    );
    tokio::spawn(async move {
        tokio::select! {
            () = on_closed.cancelled() => {}
            () = close_when_idle(&watch, idle) => {
                idle_counter.idle_closed.inc();
                tracing::debug!(%remote, ?idle, "closing a connection with no open call");
                watch.close();
            }
        }
    });
    Conn {
        tcp,
        killed: Box::pin(state.kill.clone().cancelled_owned()),
        info: ConnInfo {
            remote,
            state,
            tls: None,
        },
        _address: None,
        _permit: permit,
        _closed: closed.drop_guard(),
        counters: counters.clone(),
    }
}

/// A hub connection: plaintext, or TLS from the hub's own handshake.
pub enum HubIo {
    Plain(Box<Conn>),
    Tls(Box<tokio_rustls::server::TlsStream<Conn>>),
}

impl Connected for HubIo {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> ConnInfo {
        match self {
            HubIo::Plain(c) => c.info.clone(),
            HubIo::Tls(t) => t.get_ref().0.info.clone(),
        }
    }
}

impl AsyncRead for HubIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            HubIo::Plain(c) => Pin::new(c.as_mut()).poll_read(cx, buf),
            HubIo::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for HubIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            HubIo::Plain(c) => Pin::new(c.as_mut()).poll_write(cx, buf),
            HubIo::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            HubIo::Plain(c) => Pin::new(c.as_mut()).poll_write_vectored(cx, bufs),
            HubIo::Tls(t) => Pin::new(t.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            HubIo::Plain(c) => c.is_write_vectored(),
            HubIo::Tls(t) => t.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            HubIo::Plain(c) => Pin::new(c.as_mut()).poll_flush(cx),
            HubIo::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            HubIo::Plain(c) => Pin::new(c.as_mut()).poll_shutdown(cx),
            HubIo::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
        }
    }
}

/// The hub's connections from `incoming`, through a TLS handshake when
/// `tls` is given. Handshakes run concurrently, each within `timeout` (a
/// stalled one holds its connection slot no longer), so one slow client
/// never delays another; a failed one is logged at debug and dropped.
pub fn with_tls(
    incoming: impl Stream<Item = Result<Conn, io::Error>> + Send + 'static,
    tls: Option<gwhub_identity::reload::Acceptor>,
    timeout: Duration,
    name: &'static str,
) -> Pin<Box<dyn Stream<Item = Result<HubIo, io::Error>> + Send>> {
    use futures::StreamExt;
    let Some(tls) = tls else {
        return Box::pin(incoming.map(|c| c.map(|c| HubIo::Plain(Box::new(c)))));
    };
    let state = (Box::pin(incoming), tokio::task::JoinSet::new(), false);
    Box::pin(futures::stream::unfold(
        state,
        move |(mut incoming, mut handshakes, mut done)| {
            let tls = tls.clone();
            async move {
                loop {
                    tokio::select! {
                        next = incoming.next(), if !done => match next {
                            Some(Ok(conn)) => {
                                let tls = tls.clone();
                                handshakes.spawn(handshake(conn, tls, timeout, name));
                            }
                            Some(Err(e)) => return Some((Err(e), (incoming, handshakes, done))),
                            None => done = true,
                        },
                        Some(joined) = handshakes.join_next() => {
                            if let Ok(Some(io)) = joined {
                                return Some((Ok(io), (incoming, handshakes, done)));
                            }
                        }
                        else => return None,
                    }
                }
            }
        },
    ))
}

async fn handshake(
    conn: Conn,
    tls: gwhub_identity::reload::Acceptor,
    timeout: Duration,
    name: &'static str,
) -> Option<HubIo> {
    let remote = conn.info.remote;
    match tokio::time::timeout(timeout, tls.acceptor.accept(conn)).await {
        Ok(Ok(mut stream)) => {
            let (conn, session) = stream.get_mut();
            conn.info.tls = session
                .peer_certificates()
                .filter(|c| !c.is_empty())
                .map(|c| c.iter().map(|c| c.clone().into_owned()).collect())
                .map(|certs| gwhub_identity::reload::PeerTls::new(certs, &tls));
            Some(HubIo::Tls(Box::new(stream)))
        }
        Ok(Err(e)) => {
            let reason = gwhub_identity::reload::refusal_reason(&e);
            tls.metrics.refused(name, reason);
            if matches!(reason, "expired" | "untrusted") {
                tracing::info!(listener = name, %remote, reason, error = %e, "client certificate refused");
            } else {
                tracing::debug!(listener = name, %remote, error = %e, "TLS handshake failed");
            }
            None
        }
        Err(_) => {
            tls.metrics.refused(name, "timeout");
            tracing::debug!(listener = name, %remote, ?timeout, "TLS handshake timed out");
            None
        }
    }
}
