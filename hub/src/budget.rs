//! The hub's budgets as a whole (issue 17): what bounds its memory and
//! connections under hostile load, each a `gwhub serve` flag with a default
//! and a counter or gauge on `/metrics`.
//!
//! Memory bound. With `C` = `--max-clusters`, `B` =
//! `--max-cluster-report-bytes` (encoded), `k` ≈ 3 (decoded status vs its
//! encoding), `V` ≤ `C·B` the encoded aggregate (what one full Dashboard
//! answer or watch snapshot weighs), `N_i` = `--max-connections`, `S_i` =
//! [`INGEST_STREAMS_PER_CONNECTION`], `D` = `--max-dashboard-calls` and `M` =
//! 4 MiB (the largest agent message):
//!
//! ```text
//! memory ≲ base
//!        + 2·k·C·B          each cluster's report, and a snapshot being assembled
//!        + V                the aggregated views
//!        + N_i·S_i·M        one message being decoded per ingest stream
//!        + V                the views' wire encodings, made once per change
//!                           and shared by every watcher
//!        + D·(2·P + W + F + n·K)  per Dashboard call (watch or event stream)
//! ```
//!
//! with `P` = [`crate::grpc::view::WATCH_PAGE_BYTES`] (256 KiB; a watch
//! message holds at most that much of Gateways, or one larger Gateway
//! alone, and a web event at most that much of rows), `W` = 400 KiB
//! (hyper's HTTP/2 send buffer per stream, or its HTTP/1.1 write buffer),
//! `F` = 16 KiB (the frame a body hands over at once) and `n·K` what a
//! watcher remembers it sent (`K` ≈ 150 B per Gateway it sees, `n` of
//! them). What a watcher holds of its own does not grow with `V`: its
//! messages are the views' shared encodings put together
//! ([`crate::grpc::watch_route`]), and it is sent the next message only
//! once its transport took all of the last, diffed against the views of
//! then. The `2·P` are the page it is being sent and, while the fleet
//! changes under it, the encodings that page still pins after the views
//! moved on (one Gateway larger than `P`: that Gateway). A watcher or
//! page that has not taken a message within `--watch-send-timeout` is
//! dropped with its connection, whether or not the fleet changes (the
//! timer runs from the message, not from the next change). A unary answer
//! keeps its call slot until it is sent, and one not taken within
//! `--watch-send-timeout` closes its connection. A `ListGateways` answer
//! is put together from the shared encodings too (a page, or every
//! Gateway the reader sees for a `page_size` of 0; while the fleet
//! changes, an unread one pins the encodings it lists, superseded or
//! not, until `--watch-send-timeout`); the other unary
//! answers are small (one Gateway and its clusters' reports, the cluster
//! list, a history) and hold their own copy until sent.
//!
//! At the defaults (D = 256) the Dashboard's readers take at most
//! 256·(512 + 400 + 16) KiB ≈ 232 MiB plus `n·K` each (≈ 1.5 MiB at
//! 10,000 Gateways), within the shipped Deployment's 512 MiB limit with
//! room for the hub's own state at a fleet of typical size; lower
//! `--max-dashboard-calls` on hubs whose fleet fills more of it.
//!
//! A superseded stream ends at once, so one stream per cluster assembles a
//! snapshot; under `--insecure` the registry is also pruned
//! (`--insecure-prune-after`), and never holds more than `C` clusters.

use std::sync::Arc;
use std::time::Duration;

use gwhub_common::metrics_http::CountGauge;
use prometheus_client::metrics::counter::Counter;

/// HTTP/2 streams one ingest connection may have open (an agent uses one,
/// plus a health check).
pub const INGEST_STREAMS_PER_CONNECTION: u32 = 8;
/// HTTP/2 streams beyond `--max-dashboard-calls-per-connection` a Dashboard
/// connection may have open (health checks, reflection).
pub const EXTRA_DASHBOARD_STREAMS: u32 = 4;

/// Default of `--max-dashboard-connections-per-address` and
/// `--max-dashboard-calls-per-address`: 0, an eighth of the pool
/// ([`gwhub_hub_rules::reader_slots::eighth`]: 64 connections -> 8 per
/// address, 256 calls -> 32), so eight addresses are needed to fill a
/// pool and a newcomer then still gets its fair share (spec section 5).
pub const DEFAULT_PER_ADDRESS: usize = 0;

/// What one address may hold of a pool of `max`: `per_address`, or an
/// eighth of `max` for 0.
pub fn per_address(per_address: usize, max: usize) -> usize {
    match per_address {
        0 => gwhub_hub_rules::reader_slots::eighth(max),
        n => n,
    }
}

/// Largest value of the count flags bounding connections and calls
/// (`--max-connections`, `--max-dashboard-*`): far above any real fleet,
/// far below what a semaphore can hold.
pub const MAX_COUNT_FLAG: u64 = 1 << 20;

/// Default of `--max-cluster-report-bytes`: 32 MiB, about 10,000 Gateways
/// of 3 KiB (a Gateway with a few listeners encodes to well under 1 KiB).
pub const DEFAULT_MAX_CLUSTER_REPORT_BYTES: u64 = 32 * 1024 * 1024;
/// Default of `--max-clusters` and `--max-connections` (one connection per
/// agent): room for the largest fleets one hub is known to serve (Open
/// Cluster Management is scale-tested with 3,500 managed clusters).
pub const DEFAULT_MAX_CLUSTERS: usize = 4096;

/// The slots of `--max-dashboard-calls`: one pool for the gRPC Dashboard's
/// calls and the web page's event streams, so the flag bounds both
/// together (the memory bound above counts D calls in all). Shared as a
/// [`crate::conn::ReaderPool`]: one client address holds at most
/// `--max-dashboard-calls-per-address` of them (an eighth by default),
/// whatever its connections; when the pool is full, a caller from an
/// address holding less than its fair share closes the connection of the
/// oldest call of the address holding the most; an eighth of the pool is
/// kept for readers already authorized ([`crate::tls::DashboardAuth::known`]).
#[derive(Clone, Debug)]
pub struct DashboardCalls {
    pool: Arc<crate::conn::ReaderPool>,
    max: usize,
    /// Bumped each time a call is refused for a full pool: watchers that
    /// take nothing are dropped sooner while others wait
    /// ([`STALLED_WHILE_OTHERS_WAIT`]).
    refusals: tokio::sync::watch::Sender<u64>,
    /// Calls open, refused, evicted and dropped.
    counters: Arc<CallCounters>,
}

/// A watcher (or page event stream) that took nothing for this long is
/// dropped once callers are refused for a full pool, rather than after
/// `--watch-send-timeout`.
pub const STALLED_WHILE_OTHERS_WAIT: Duration = Duration::from_secs(5);

/// A call's hold on the budgets ([`DashboardCalls::admit`]); released
/// when dropped.
pub struct CallPermit {
    _slot: crate::conn::PoolSlot,
    pub(crate) conn: Option<Arc<crate::conn::ConnState>>,
    pub(crate) counters: Arc<CallCounters>,
}

impl Drop for CallPermit {
    fn drop(&mut self) {
        self.counters.dashboard_calls.dec();
        if let Some(c) = &self.conn {
            c.dashboard_calls
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// Why a Dashboard call or event stream was refused (the message names
/// the flag).
#[derive(Debug, thiserror::Error)]
pub enum CallRefused {
    #[error(
        "Dashboard budget: {0} calls (web page event streams included) are open, the hub's --max-dashboard-calls; retry later (this client address holds its fair share)"
    )]
    Total(usize),
    #[error(
        "Dashboard budget: this client address has {0} calls open, the hub's --max-dashboard-calls-per-address; retry later"
    )]
    Address(usize),
    #[error(
        "Dashboard budget: {0} calls are open on this connection, the hub's --max-dashboard-calls-per-connection"
    )]
    Connection(usize),
}

impl DashboardCalls {
    /// `max` in all, `max_per_address` from one client address (0: an
    /// eighth of `max`), counted in `counters`.
    pub fn new(max: usize, max_per_address: usize, counters: Arc<CallCounters>) -> Self {
        let max = max.max(1);
        DashboardCalls {
            pool: crate::conn::ReaderPool::new(
                max,
                per_address(max_per_address, max),
                gwhub_hub_rules::reader_slots::eighth(max),
            ),
            max,
            refusals: tokio::sync::watch::Sender::new(0),
            counters,
        }
    }

    /// What the calls count (`/metrics`).
    pub fn counters(&self) -> &Arc<CallCounters> {
        &self.counters
    }

    /// `--max-dashboard-calls`, for messages.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Resolves once a call that has taken nothing since `since` counts as
    /// stalled: `send_timeout` after it, or [`STALLED_WHILE_OTHERS_WAIT`]
    /// after it once a caller is refused for a full pool meanwhile.
    pub(crate) async fn stalled(&self, since: tokio::time::Instant, send_timeout: Duration) {
        let mut refusals = self.refusals.subscribe();
        refusals.borrow_and_update();
        let mut deadline = since + send_timeout;
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => return,
                r = refusals.changed() => match r {
                    Ok(()) => deadline = deadline.min(since + STALLED_WHILE_OTHERS_WAIT),
                    // Cannot happen (self holds the sender): the timeout alone.
                    Err(_) => return tokio::time::sleep_until(deadline).await,
                },
            }
        }
    }

    /// A slot for a call on `conn` (none: a caller of the service itself,
    /// counted as one address), within `max_per_connection`, its client
    /// address's share and the total (`authorized`: a reader already
    /// reviewed, who may take the reserve); counted in
    /// `gwhub_dashboard_calls`.
    pub(crate) fn admit(
        &self,
        conn: Option<&crate::conn::ConnInfo>,
        authorized: bool,
        max_per_connection: usize,
    ) -> Result<CallPermit, CallRefused> {
        let counters = &self.counters;
        use gwhub_hub_rules::reader_slots::Refusal;
        use std::sync::atomic::Ordering;
        if let Some(c) = conn {
            let open = c.state.dashboard_calls.fetch_add(1, Ordering::Relaxed);
            if open >= max_per_connection {
                c.state.dashboard_calls.fetch_sub(1, Ordering::Relaxed);
                counters.refused_dashboard_calls_per_connection.inc();
                return Err(CallRefused::Connection(open));
            }
        }
        let ip = conn.map_or(std::net::IpAddr::from([0, 0, 0, 0]), |c| c.remote.ip());
        let admitted = self
            .pool
            .admit(ip, authorized || conn.is_none(), conn.map(|c| &c.state));
        let (slot, evicted) = match admitted {
            Ok(a) => a,
            Err(refusal) => {
                if let Some(c) = conn {
                    c.state.dashboard_calls.fetch_sub(1, Ordering::Relaxed);
                }
                counters.refused_dashboard_calls.inc();
                return Err(match refusal {
                    Refusal::Source { max } => CallRefused::Address(max),
                    Refusal::Full { .. } => {
                        self.refusals.send_modify(|n| *n += 1);
                        CallRefused::Total(self.max)
                    }
                });
            }
        };
        if evicted {
            counters.dashboard_calls_evicted.inc();
        }
        counters.dashboard_calls.inc();
        Ok(CallPermit {
            _slot: slot,
            conn: conn.map(|c| c.state.clone()),
            counters: counters.clone(),
        })
    }
}

/// The budgets the hub runs with (the command line fills them from
/// `gwhub serve`'s flags, whose defaults are [`Default`]'s).
#[derive(Clone, Debug)]
pub struct Budgets {
    /// Bytes of reported status one cluster may hold (the encoded size of
    /// its Gateways): `--max-cluster-report-bytes`.
    pub max_cluster_report_bytes: u64,
    /// Clusters the hub keeps (connected or remembered): `--max-clusters`.
    pub max_clusters: usize,
    /// Dashboard calls (watches included) open at once:
    /// `--max-dashboard-calls`.
    pub max_dashboard_calls: usize,
    /// Dashboard calls and web page event streams open at once from one
    /// client address; 0: an eighth of `max_dashboard_calls`
    /// (`--max-dashboard-calls-per-address`).
    pub max_dashboard_calls_per_address: usize,
    /// Dashboard calls open at once on one connection
    /// (`--max-dashboard-calls-per-connection`).
    pub max_dashboard_calls_per_connection: usize,
    /// A watcher that takes no message for this long is dropped
    /// (`--watch-send-timeout`).
    pub watch_send_timeout: Duration,
    /// Open connections on the ingest listener (`--max-connections`).
    pub max_connections: usize,
    /// Open connections on the Dashboard listener
    /// (`--max-dashboard-connections`).
    pub max_dashboard_connections: usize,
    /// Open connections from one client address on each reader listener;
    /// 0: an eighth of `max_dashboard_connections`
    /// (`--max-dashboard-connections-per-address`).
    pub max_dashboard_connections_per_address: usize,
    /// A TLS handshake not finished within this is dropped
    /// (`--tls-handshake-timeout`).
    pub tls_handshake_timeout: Duration,
    /// A connection with no open call for this long is closed
    /// (`--idle-connection-timeout`).
    pub idle_connection_timeout: Duration,
    /// With `--insecure`, a disconnected cluster silent for this long is
    /// forgotten (`--insecure-prune-after`).
    pub insecure_prune_after: Duration,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            max_cluster_report_bytes: DEFAULT_MAX_CLUSTER_REPORT_BYTES,
            max_clusters: DEFAULT_MAX_CLUSTERS,
            max_dashboard_calls: 256,
            max_dashboard_calls_per_connection: 16,
            max_dashboard_calls_per_address: DEFAULT_PER_ADDRESS,
            watch_send_timeout: Duration::from_secs(60),
            max_connections: DEFAULT_MAX_CLUSTERS,
            max_dashboard_connections: 64,
            max_dashboard_connections_per_address: DEFAULT_PER_ADDRESS,
            tls_handshake_timeout: Duration::from_secs(10),
            idle_connection_timeout: Duration::from_secs(30),
            insecure_prune_after: Duration::from_secs(600),
        }
    }
}

gwhub_common::metrics! {
    /// What the Dashboard's call slots count, served on `/metrics`; held by
    /// [`DashboardCalls`] and carried by each [`CallPermit`].
    #[derive(Debug, Default)]
    pub struct CallCounters {
        /// Dashboard calls refused for `--max-dashboard-calls`.
        pub refused_dashboard_calls: Counter => "gwhub_budget_refused_dashboard_calls",
            "Dashboard calls refused for --max-dashboard-calls.",
        /// Dashboard calls refused for `--max-dashboard-calls-per-connection`.
        pub refused_dashboard_calls_per_connection: Counter =>
            "gwhub_budget_refused_dashboard_calls_per_connection",
            "Dashboard calls refused for --max-dashboard-calls-per-connection.",
        /// Watchers dropped for `--watch-send-timeout`.
        pub watchers_dropped: Counter => "gwhub_budget_watchers_dropped",
            "Dashboard watchers dropped for --watch-send-timeout.",
        /// Unary Dashboard answers not taken within `--watch-send-timeout`
        /// (their connections closed).
        pub answers_dropped: Counter => "gwhub_budget_unread_answers_dropped",
            "Dashboard answers not taken within --watch-send-timeout (connection closed).",
        /// Dashboard calls whose connection was closed for a caller from
        /// an address holding less than its fair share of a full pool.
        pub dashboard_calls_evicted: Counter => "gwhub_budget_dashboard_calls_evicted",
            "Dashboard calls (and event streams) whose connection was closed while the pool was full, for a client address holding less than its fair share.",
        /// Dashboard calls open right now.
        pub dashboard_calls: CountGauge => "gwhub_dashboard_calls",
            "Dashboard calls open (budget: --max-dashboard-calls).",
    }
}
