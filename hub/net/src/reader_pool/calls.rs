//! The slots of `--max-dashboard-calls`, a [`ReaderPool`] with a refusal
//! signal: one pool for the gRPC Dashboard's calls and the web page's event
//! streams, what each call holds of it ([`CallPermit`]) and what they
//! count ([`CallCounters`]). What these slots bound in memory, term by
//! term, is in `docs/operating.md` ("The memory bound").

use std::sync::Arc;
use std::time::Duration;

use gwhub_common::metrics_http::CountGauge;
use prometheus_client::metrics::counter::Counter;

use super::{PoolSlot, ReaderPool, per_address};
use crate::conn_state::{ConnInfo, ConnState};

/// Default of `--max-dashboard-calls`.
pub const DEFAULT_MAX_DASHBOARD_CALLS: usize = 256;

/// The slots of `--max-dashboard-calls`: one pool for the gRPC Dashboard's
/// calls and the web page's event streams, so the flag bounds both
/// together (the memory bound counts D calls in all). Shared as a
/// `ReaderPool`: one client address holds at most
/// `--max-dashboard-calls-per-address` of them (an eighth by default),
/// whatever its connections; when the pool is full, a caller from an
/// address holding less than its fair share closes the connection of the
/// oldest call of the address holding the most; an eighth of the pool is
/// kept for readers already authorized
/// ([`gwhub_identity::tls::DashboardAuth::known`]).
#[derive(Clone, Debug)]
pub struct DashboardCalls {
    pool: Arc<ReaderPool>,
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
pub(crate) const STALLED_WHILE_OTHERS_WAIT: Duration = Duration::from_secs(5);

/// A call's hold on the budgets ([`DashboardCalls::admit`]); released
/// when dropped.
pub struct CallPermit {
    _slot: PoolSlot,
    pub conn: Option<Arc<ConnState>>,
    pub counters: Arc<CallCounters>,
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
            pool: ReaderPool::new(
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

    /// Resolves once a call that has taken nothing since `since` counts as
    /// stalled: `send_timeout` after it, or `STALLED_WHILE_OTHERS_WAIT`
    /// after it once a caller is refused for a full pool meanwhile.
    pub async fn stalled(&self, since: tokio::time::Instant, send_timeout: Duration) {
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
    pub fn admit(
        &self,
        conn: Option<&ConnInfo>,
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
