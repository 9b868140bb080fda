//! The listeners' metrics: one family per figure, labelled by listener
//! (`ingest`, `dashboard`, `web`), and each listener's row of them as the
//! [`ListenerCounters`] its accept loop bumps. They live with the
//! connection plumbing because only it counts connections; the runtime
//! registers them on `/metrics`.

use std::sync::Arc;

use gwhub_common::metrics_http::CountGauge;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::ListenerCounters;

/// The `listener` label of the per-listener metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct Listener {
    listener: &'static str,
}

gwhub_common::metrics! {
    /// The per-listener metrics, served on `/metrics`.
    #[derive(Debug)]
    pub struct ListenerMetrics {
        /// The ingest listener's row of the per-listener metrics.
        pub ingest: Arc<ListenerCounters>,
        /// The Dashboard listener's row.
        pub dashboard: Arc<ListenerCounters>,
        /// The web page's listener's row (`--web-listen`; zeros when off).
        pub web: Arc<ListenerCounters>,
        connections_open: Family<Listener, CountGauge> => "gwhub_connections_open",
            "Connections open per listener (budget: --max-connections).",
        connections_accepted: Family<Listener, Counter> =>
            "gwhub_connections_accepted", "Connections accepted per listener.",
        connections_idle_closed: Family<Listener, Counter> =>
            "gwhub_connections_idle_closed",
            "Connections closed for having no open call for --idle-connection-timeout.",
        connections_saturated: Family<Listener, Counter> => "gwhub_connections_saturated",
            "Times a listener reached --max-connections and paused accepting.",
        connections_evicted: Family<Listener, Counter> => "gwhub_connections_evicted_idle",
            "Idle connections closed to make room for a new client while a listener was full.",
        connections_evicted_fair: Family<Listener, Counter> => "gwhub_connections_evicted_fair",
            "Connections closed while a reader listener was full, for a client address holding less than its fair share (the oldest of the address holding the most).",
        accept_errors: Family<Listener, Counter> => "gwhub_accept_errors",
            "Failed accepts (e.g. out of file descriptors), each followed by a back-off.",
    }
}

impl Default for ListenerMetrics {
    fn default() -> Self {
        let connections_open: Family<Listener, CountGauge> = Family::default();
        let connections_accepted: Family<Listener, Counter> = Family::default();
        let connections_idle_closed: Family<Listener, Counter> = Family::default();
        let connections_saturated: Family<Listener, Counter> = Family::default();
        let connections_evicted: Family<Listener, Counter> = Family::default();
        let connections_evicted_fair: Family<Listener, Counter> = Family::default();
        let accept_errors: Family<Listener, Counter> = Family::default();
        let listener = |listener: &'static str| {
            let l = Listener { listener };
            Arc::new(ListenerCounters {
                open: connections_open.get_or_create(&l).clone(),
                accepted: connections_accepted.get_or_create(&l).clone(),
                idle_closed: connections_idle_closed.get_or_create(&l).clone(),
                accept_errors: accept_errors.get_or_create(&l).clone(),
                saturated: connections_saturated.get_or_create(&l).clone(),
                evicted: connections_evicted.get_or_create(&l).clone(),
                evicted_fair: connections_evicted_fair.get_or_create(&l).clone(),
            })
        };
        ListenerMetrics {
            ingest: listener("ingest"),
            dashboard: listener("dashboard"),
            web: listener("web"),
            connections_open,
            connections_accepted,
            connections_idle_closed,
            connections_saturated,
            connections_evicted,
            connections_evicted_fair,
            accept_errors,
        }
    }
}
