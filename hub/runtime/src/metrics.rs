//! The hub's `--metrics-listen`: one `prometheus_client` registry built at
//! start with each part's counters ([`HubMetrics`], and the index's own), in
//! Kubernetes mode the writers' counters ([`gwhub_k8s::metrics`]), and the
//! index's gauges, which it declares and which read it at each scrape
//! ([`ClusterGauges`], [`HubGatewayGauges`]).
//! Serving is the responder shared with the agent
//! ([`gwhub_common::metrics_http`]), with the hub's probes (`probes`).

use std::net::SocketAddr;
use std::sync::Arc;

use gwhub_common::metrics_http::{self, Probes, Registry};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::authz::ReviewCounters;
use crate::conn::ListenerMetrics;
use crate::grpc::ingest::IngestCounters;
use crate::index::{ClusterGauges, ClusterSummary, HubGatewayGauges, Index, IndexCounters};
use crate::reader_pool::CallCounters;
use crate::tls_reload::TlsMetrics;
use gwhub_k8s::join_limits::JoinCounters;
use gwhub_k8s::metrics::Metrics;

/// The counters of the hub's parts, each declared by the part that bumps
/// it: the runtime hands each to its part at start and registers them all
/// (the index keeps its own, [`Index::counters`]). Cheap to clone; clones
/// share the counters.
#[derive(Clone, Debug, Default)]
pub struct HubMetrics {
    /// The listeners' connections (`gwhub_connections_*`).
    pub listeners: Arc<ListenerMetrics>,
    /// The Dashboard's call slots, shared with the web page.
    pub calls: Arc<CallCounters>,
    /// Ingest's refusals.
    pub ingest: Arc<IngestCounters>,
    /// TokenReviews of `--dashboard-auth=kubernetes`.
    pub reviews: Arc<ReviewCounters>,
    /// Join and Renew.
    pub joins: Arc<JoinCounters>,
    /// TLS material: expiry, reloads, streams ended for a certificate.
    pub tls: TlsMetrics,
}

impl HubMetrics {
    /// Declares every part's metrics, and the index's `counters`, in
    /// `registry`.
    fn register(&self, index: &IndexCounters, registry: &mut Registry) {
        self.ingest.register(registry);
        self.joins.register(registry);
        index.register(registry);
        self.calls.register(registry);
        self.reviews.register(registry);
        self.listeners.register(registry);
        self.tls.register(registry);
    }
}

/// The hub's registry: the Kubernetes counters when `kube` is given (absent
/// with `--no-kube`), the index's gauges (`clusters`, `gateways`, read at
/// each scrape), and the parts' counters (`parts`, and the index's `index`).
fn registry(
    parts: &HubMetrics,
    index: &IndexCounters,
    clusters: ClusterGauges,
    gateways: HubGatewayGauges,
    kube: Option<&Metrics>,
) -> Registry {
    let mut registry = Registry::default();
    if let Some(m) = kube {
        m.register(&mut registry);
    }
    registry.register_collector(Box::new(clusters));
    registry.register_collector(Box::new(gateways));
    registry.register_collector(Box::new(metrics_http::ProcessMemory));
    parts.register(index, &mut registry);
    registry
}

/// The OpenMetrics text of `clusters` and `hub_gateways` as they are now,
/// with the Kubernetes counters when `kube` is given; no budget counters.
pub fn render(clusters: &[ClusterSummary], hub_gateways: usize, kube: Option<&Metrics>) -> String {
    let mut registry = Registry::default();
    if let Some(m) = kube {
        m.register(&mut registry);
    }
    let clusters = clusters.to_vec();
    registry.register_collector(Box::new(ClusterGauges::new(Box::new(move || {
        (clusters.clone(), hub_gateways)
    }))));
    metrics_http::encode(&registry)
}

/// The hub's probes: ready once `synced` is true (the Kubernetes mode's
/// stored reports and hub Gateways loaded: leader or standby, it can
/// serve; always with `None`, `--no-kube`); live while a heartbeat can take
/// the index's cluster table (see [`metrics_http::Probes`]).
pub(crate) fn probes(
    index: Index,
    synced: Option<watch::Receiver<bool>>,
    shutdown: CancellationToken,
) -> Probes {
    let ready = move || synced.as_ref().is_none_or(|s| *s.borrow());
    let check = move || {
        index.has_cluster("");
    };
    Probes::new(ready, check, shutdown)
}

/// Serves the metrics of `index`, `parts` (and `kube`) on `addr` until
/// `shutdown`, with `probes` on `/healthz` and `/readyz`; returns the bound
/// address.
pub(crate) async fn serve(
    addr: SocketAddr,
    index: Index,
    parts: HubMetrics,
    kube: Option<Arc<Metrics>>,
    probes: Probes,
    shutdown: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let summaries = ClusterGauges::of(index.clone());
    let gateways = HubGatewayGauges::of(index.clone());
    let registry = registry(
        &parts,
        index.counters(),
        summaries,
        gateways,
        kube.as_deref(),
    );
    let local = metrics_http::serve_probes(addr, Arc::new(registry), probes, shutdown).await?;
    tracing::info!(addr = %local, "serving metrics on /metrics, probes on /healthz and /readyz");
    Ok(local)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gwhub_hub_rules::aggregate::GatewayKey;

    fn summary(name: &str, connected: bool, stale: bool, gateways: usize) -> ClusterSummary {
        ClusterSummary {
            name: name.to_owned(),
            connected,
            stale,
            last_report_millis: 0,
            last_seen_millis: 0,
            gateway_count: gateways,
            agent_version: String::new(),
            report_bytes: 0,
            report_rev: 0,
            session: 0,
        }
    }

    #[test]
    fn renders_gauges_counters_and_escapes_labels() {
        let m = Metrics::default();
        Metrics::bump(&m.status_writes);
        Metrics::bump(&m.status_writes);
        Metrics::bump(&m.leader_transitions);
        let text = render(
            &[
                summary("east", true, false, 3),
                summary("we\"ird\\", false, true, 0),
            ],
            5,
            Some(&m),
        );
        for line in [
            "# TYPE gwhub_status_writes counter",
            "gwhub_status_writes_total 2",
            "gwhub_leader_transitions_total 1",
            "gwhub_report_write_errors_total 0",
            "gwhub_events_published_total 0",
            "# TYPE gwhub_cluster_connected gauge",
            "gwhub_cluster_connected{cluster=\"east\"} 1",
            "gwhub_cluster_stale{cluster=\"east\"} 0",
            "gwhub_cluster_gateways{cluster=\"east\"} 3",
            "gwhub_cluster_connected{cluster=\"we\\\"ird\\\\\"} 0",
            "gwhub_cluster_stale{cluster=\"we\\\"ird\\\\\"} 1",
            "gwhub_hub_gateways 5",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
    }

    /// The samples of a [`metrics_http::Seconds`] histogram named `name`.
    pub(crate) fn histogram_samples(name: &str) -> Vec<String> {
        let bounds = [
            "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05",
            "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "30.0", "+Inf",
        ];
        let mut out: Vec<String> = bounds
            .iter()
            .map(|le| format!("{name}_bucket{{le=\"{le}\"}}"))
            .collect();
        out.push(format!("{name}_sum"));
        out.push(format!("{name}_count"));
        out
    }

    /// What dashboards, alerts, the README and the end-to-end tests scrape:
    /// every sample the hub exposes, by name and labels. A rename fails here.
    #[test]
    fn exposed_names_and_labels_are_pinned() {
        let summaries = ClusterGauges::new(Box::new(|| (vec![summary("east", true, false, 1)], 1)));
        let gateways =
            HubGatewayGauges::new(Box::new(|| vec![(GatewayKey::new("ns", "gw"), false)]));
        let registry = registry(
            &HubMetrics::default(),
            &IndexCounters::default(),
            summaries,
            gateways,
            Some(&Metrics::default()),
        );
        let text = metrics_http::encode(&registry);
        let samples: Vec<&str> = metrics_http::samples(&text).into_keys().collect();
        let mut pinned: Vec<String> = [
            "gwhub_status_writes_total",
            "gwhub_status_writes_skipped_total",
            "gwhub_status_write_errors_total",
            "gwhub_report_writes_total",
            "gwhub_report_writes_skipped_total",
            "gwhub_report_write_errors_total",
            "gwhub_report_write_bytes_total",
            "gwhub_report_gateways_unstored_total",
            "gwhub_report_unreadable_total",
            "gwhub_api_throttled_waits_total",
            "gwhub_api_throttled_microseconds_total",
            "gwhub_api_throttled_status_microseconds_total",
            "gwhub_api_throttled_report_microseconds_total",
            "gwhub_status_api_microseconds_total",
            "gwhub_status_prepare_microseconds_total",
            "gwhub_leader_transitions_total",
            "gwhub_events_published_total",
            "gwhub_event_publish_errors_total",
            "gwhub_cluster_connected{cluster=\"east\"}",
            "gwhub_cluster_stale{cluster=\"east\"}",
            "gwhub_cluster_gateways{cluster=\"east\"}",
            "gwhub_cluster_report_bytes{cluster=\"east\"}",
            "gwhub_hub_gateways",
            "gwhub_budget_refused_cluster_report_bytes_total",
            "gwhub_budget_refused_clusters_total",
            "gwhub_budget_refused_dashboard_calls_total",
            "gwhub_budget_refused_dashboard_calls_per_connection_total",
            "gwhub_budget_watchers_dropped_total",
            "gwhub_budget_unread_answers_dropped_total",
            "gwhub_budget_dashboard_calls_evicted_total",
            // Readers (issue 35): the TokenReview budget.
            "gwhub_dashboard_token_reviews_total{result=\"authenticated\"}",
            "gwhub_dashboard_token_reviews_total{result=\"unauthenticated\"}",
            "gwhub_dashboard_token_reviews_total{result=\"error\"}",
            "gwhub_dashboard_token_reviews_refused_total{limit=\"rate\"}",
            "gwhub_dashboard_token_reviews_refused_total{limit=\"in_flight\"}",
            "gwhub_clusters_pruned_total",
            "gwhub_renewals_outside_inventory_total",
            "gwhub_dashboard_calls",
            "gwhub_tls_streams_ended_total{reason=\"expired\"}",
            "gwhub_tls_streams_ended_total{reason=\"untrusted\"}",
            // Operating (issue 27): alerts, probes, histograms.
            "gwhub_cluster_last_seen_timestamp_seconds{cluster=\"east\"}",
            "gwhub_cluster_last_report_timestamp_seconds{cluster=\"east\"}",
            "gwhub_hub_gateway_ready{namespace=\"ns\",name=\"gw\"}",
            "gwhub_leader",
            // Issue 26: status writing sharded over replicas.
            "gwhub_status_shards_held",
            // Issue 26: a restarted hub waits for its clusters.
            "gwhub_restart_awaited_clusters",
            "process_resident_memory_bytes",
        ]
        .map(str::to_owned)
        .to_vec();
        for name in [
            "gwhub_status_write_api_duration_seconds",
            "gwhub_status_aggregation_duration_seconds",
            "gwhub_store_write_duration_seconds",
        ] {
            pinned.extend(histogram_samples(name));
        }
        let name = "gwhub_propagation_seconds";
        for le in [
            "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "20.0", "30.0", "60.0",
            "120.0", "300.0", "600.0", "+Inf",
        ] {
            pinned.push(format!("{name}_bucket{{le=\"{le}\"}}"));
        }
        pinned.push(format!("{name}_sum"));
        pinned.push(format!("{name}_count"));
        // Issue 33: fleet DNS (`gwhub_dns_writes_total{output,result}` has
        // samples only once a write was made).
        pinned.extend(histogram_samples("gwhub_dns_write_seconds"));
        let name = "gwhub_dns_removal_seconds";
        for le in [
            "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "20.0", "30.0", "60.0",
            "120.0", "300.0", "600.0", "+Inf",
        ] {
            pinned.push(format!("{name}_bucket{{le=\"{le}\"}}"));
        }
        pinned.push(format!("{name}_sum"));
        pinned.push(format!("{name}_count"));
        let name = "gwhub_dns_records_per_name";
        for le in [
            "1.0", "2.0", "4.0", "8.0", "16.0", "32.0", "64.0", "128.0", "256.0", "+Inf",
        ] {
            pinned.push(format!("{name}_bucket{{le=\"{le}\"}}"));
        }
        pinned.push(format!("{name}_sum"));
        pinned.push(format!("{name}_count"));
        for name in [
            "gwhub_connections_open",
            "gwhub_connections_accepted_total",
            "gwhub_connections_idle_closed_total",
            "gwhub_connections_saturated_total",
            "gwhub_connections_evicted_idle_total",
            "gwhub_connections_evicted_fair_total",
            "gwhub_accept_errors_total",
        ] {
            for listener in ["ingest", "dashboard", "web"] {
                pinned.push(format!("{name}{{listener=\"{listener}\"}}"));
            }
        }
        for certificate in ["serving", "client_ca", "dashboard_client_ca"] {
            for result in ["ok", "error"] {
                pinned.push(format!(
                    "gwhub_tls_reloads_total{{certificate=\"{certificate}\",result=\"{result}\"}}"
                ));
            }
        }
        pinned.sort_unstable();
        assert_eq!(samples, pinned, "{text}");
        // Help texts keep their one final period.
        assert!(
            text.contains("# HELP gwhub_hub_gateways Hub Gateways with an aggregated status.\n"),
            "{text}"
        );
        assert!(
            text.contains("# HELP gwhub_status_writes Hub Gateway status applies accepted by the API server.\n"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    /// Kubernetes mode: ready once the stored reports and hub Gateways are
    /// loaded (leader or not); `--no-kube`: ready at once. Live either way.
    #[tokio::test]
    async fn ready_once_synced() {
        let shutdown = CancellationToken::new();
        let index = Index::new(crate::index::IndexConfig::new(
            Default::default(),
            std::time::Duration::from_secs(60),
        ));
        let (synced_tx, synced) = watch::channel(false);
        let kube = probes(index.clone(), Some(synced), shutdown.clone());
        assert!(kube.is_live());
        assert!(!kube.is_ready());
        synced_tx.send_replace(true);
        assert!(kube.is_ready());
        assert!(probes(index, None, shutdown.clone()).is_ready());
        shutdown.cancel();
    }

    #[test]
    fn without_kube_there_are_no_counters() {
        let text = render(&[], 0, None);
        assert!(!text.contains("_total"), "{text}");
        assert!(text.lines().any(|l| l == "gwhub_hub_gateways 0"), "{text}");
    }
}
