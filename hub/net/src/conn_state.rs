//! One connection's state shared by its requests and the pools that hold
//! it: whether it was closed, its open calls, its Dashboard calls and when
//! it was last active; and what every request carries of its connection
//! ([`ConnInfo`]). It lives apart from the listener ([`crate::conn`])
//! and the reader pools ([`crate::reader_pool`]) because both need it and
//! neither should need the other for it: the listener uses the pools, and
//! the pools name nothing of the listener.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The `ConnectInfo` of a hub connection (in every request's extensions;
/// with TLS it also carries the peer's certificates).
#[derive(Clone, Debug)]
pub struct ConnInfo {
    pub remote: SocketAddr,
    pub state: Arc<ConnState>,
    /// The peer's certificates, on a TLS connection of the hub's own
    /// handshake (`with_tls`).
    pub tls: Option<gwhub_identity::reload::PeerTls>,
}

/// One connection's shared state, reachable from its requests.
#[derive(Debug)]
pub struct ConnState {
    pub(crate) kill: CancellationToken,
    /// Calls open on this connection (counted by [`crate::conn::Tracked`]): the
    /// connection is idle while there is none.
    pub(crate) calls: watch::Sender<usize>,
    /// Dashboard calls open on this connection.
    pub(crate) dashboard_calls: AtomicUsize,
    /// When a call last started or ended (or the connection was
    /// accepted): the idle connection with the oldest is evicted first.
    last_active: std::sync::Mutex<tokio::time::Instant>,
}

impl Default for ConnState {
    fn default() -> Self {
        ConnState {
            kill: CancellationToken::new(),
            calls: watch::Sender::new(0),
            dashboard_calls: AtomicUsize::new(0),
            last_active: std::sync::Mutex::new(tokio::time::Instant::now()),
        }
    }
}

impl ConnState {
    /// Closes the connection: its reads and writes fail from now on, so
    /// the HTTP/2 server drops it with everything it buffered.
    pub fn close(&self) {
        self.kill.cancel();
    }

    /// Whether [`Self::close`] was called.
    #[cfg(test)]
    pub(crate) fn is_closed(&self) -> bool {
        self.kill.is_cancelled()
    }

    /// Calls open on this connection right now.
    pub(crate) fn open_calls(&self) -> usize {
        *self.calls.borrow()
    }

    pub(crate) fn touch(&self) {
        *self
            .last_active
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = tokio::time::Instant::now();
    }

    pub(crate) fn last_active(&self) -> tokio::time::Instant {
        *self
            .last_active
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
