//! gRPC layer: translates between the wire and the [`crate::index::Index`];
//! owns no state of its own. [`view`] encodes the index's views for the
//! Dashboard.

use std::time::Duration;

pub mod dashboard;
pub mod ingest;
mod peer;
pub mod view;
pub(crate) mod watch_route;

/// Default of `--max-dashboard-calls-per-connection`.
pub const DEFAULT_MAX_CALLS_PER_CONNECTION: usize = 16;
/// Default of `--watch-send-timeout`.
pub const DEFAULT_WATCH_SEND_TIMEOUT: Duration = Duration::from_secs(60);

/// What one reader's connection may hold, for the Dashboard and the web
/// page alike: its calls at once and how long a message may wait to be
/// taken.
#[derive(Clone, Copy, Debug)]
pub struct ReaderLimits {
    /// Calls (or event streams) open at once on one connection
    /// (`--max-dashboard-calls-per-connection`).
    pub max_calls_per_connection: usize,
    /// A watcher or answer not taken within this is dropped with its
    /// connection (`--watch-send-timeout`).
    pub watch_send_timeout: Duration,
}

impl Default for ReaderLimits {
    fn default() -> Self {
        ReaderLimits {
            max_calls_per_connection: DEFAULT_MAX_CALLS_PER_CONNECTION,
            watch_send_timeout: DEFAULT_WATCH_SEND_TIMEOUT,
        }
    }
}
