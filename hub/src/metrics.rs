//! The hub's `--metrics-listen`: Prometheus text built from the index's
//! cluster summaries and, in Kubernetes mode, the writers' counters
//! ([`crate::kube::metrics`]). Rendering is pure; serving is the responder
//! shared with the agent ([`gwhub_common::metrics_http`]).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use gwhub_common::metrics_http::{self, Render, escape_label_value, write_header};
use tokio_util::sync::CancellationToken;

use crate::budget::Counters;
use crate::conn::ListenerCounters;
use crate::index::{ClusterSummary, Index};
use crate::kube::metrics::Metrics;

/// Prometheus text exposition (version 0.0.4) of the hub's state: one gauge
/// row per cluster, the hub Gateway count, and the Kubernetes counters when
/// `kube` is given (absent with `--no-kube`).
pub fn render(clusters: &[ClusterSummary], hub_gateways: usize, kube: Option<&Metrics>) -> String {
    let mut out = String::new();
    if let Some(m) = kube {
        let rows: [(&str, &AtomicU64, &str); 13] = [
            (
                "status_writes",
                &m.status_writes,
                "Hub Gateway status applies accepted by the API server.",
            ),
            (
                "status_writes_skipped",
                &m.status_writes_skipped,
                "Status applies skipped because the live status already matched.",
            ),
            (
                "status_write_errors",
                &m.status_write_errors,
                "Hub Gateway status applies that failed.",
            ),
            (
                "report_writes",
                &m.report_writes,
                "ClusterReport writes accepted by the API server.",
            ),
            (
                "report_writes_skipped",
                &m.report_writes_skipped,
                "ClusterReport writes skipped because nothing changed.",
            ),
            (
                "report_write_errors",
                &m.report_write_errors,
                "ClusterReport writes that failed.",
            ),
            (
                "report_write_bytes",
                &m.report_write_bytes,
                "Bytes of Gateway status in the ClusterReport writes accepted.",
            ),
            (
                "report_gateways_unstored",
                &m.report_gateways_unstored,
                "Gateways left out of a ClusterReport write: larger than any object may be.",
            ),
            (
                "api_throttled_waits",
                &m.api_throttled_waits,
                "API writes that waited for the --kube-api-qps budget.",
            ),
            (
                "api_throttled_microseconds",
                &m.api_throttled_micros,
                "Microseconds API writes waited for the --kube-api-qps budget, summed.",
            ),
            (
                "leader_transitions",
                &m.leader_transitions,
                "Times this replica became leader.",
            ),
            (
                "events_published",
                &m.events_published,
                "Cluster stale/fresh Events published.",
            ),
            (
                "event_publish_errors",
                &m.event_publish_errors,
                "Cluster stale/fresh Events the API server refused.",
            ),
        ];
        for (name, counter, help) in rows {
            let name = format!("gwhub_{name}_total");
            write_header(&mut out, &name, "counter", help);
            let _ = writeln!(out, "{name} {}", Metrics::get(counter));
        }
    }
    type Field = fn(&ClusterSummary) -> u64;
    let per_cluster: [(&str, &str, Field); 4] = [
        (
            "gwhub_cluster_connected",
            "1 while the cluster's agent has a stream open.",
            |c| u64::from(c.connected),
        ),
        (
            "gwhub_cluster_stale",
            "1 while the cluster has sent no report or heartbeat within --stale-after.",
            |c| u64::from(c.stale),
        ),
        (
            "gwhub_cluster_gateways",
            "Gateways the cluster reports.",
            |c| c.gateway_count as u64,
        ),
        (
            "gwhub_cluster_report_bytes",
            "Encoded bytes of the cluster's report (budget: --max-cluster-report-bytes).",
            |c| c.report_bytes,
        ),
    ];
    for (name, help, field) in per_cluster {
        write_header(&mut out, name, "gauge", help);
        for c in clusters {
            let _ = writeln!(
                out,
                "{name}{{cluster=\"{}\"}} {}",
                escape_label_value(&c.name),
                field(c)
            );
        }
    }
    write_header(
        &mut out,
        "gwhub_hub_gateways",
        "gauge",
        "Hub Gateways with an aggregated status.",
    );
    let _ = writeln!(out, "gwhub_hub_gateways {hub_gateways}");
    out
}

/// Prometheus text of the hub's budgets ([`crate::budget`]): what was
/// refused or dropped, and connections and calls open.
pub fn render_budgets(c: &Counters) -> String {
    let mut out = String::new();
    let counters: [(&str, &AtomicU64, &str); 7] = [
        (
            "gwhub_budget_refused_cluster_report_bytes_total",
            &c.refused_cluster_report_bytes,
            "Agent streams ended for --max-cluster-report-bytes.",
        ),
        (
            "gwhub_budget_refused_clusters_total",
            &c.refused_clusters,
            "Agent streams refused for --max-clusters.",
        ),
        (
            "gwhub_budget_refused_dashboard_calls_total",
            &c.refused_dashboard_calls,
            "Dashboard calls refused for --max-dashboard-calls.",
        ),
        (
            "gwhub_budget_refused_dashboard_calls_per_connection_total",
            &c.refused_dashboard_calls_per_connection,
            "Dashboard calls refused for --max-dashboard-calls-per-connection.",
        ),
        (
            "gwhub_budget_watchers_dropped_total",
            &c.watchers_dropped,
            "Dashboard watchers dropped for --watch-send-timeout.",
        ),
        (
            "gwhub_budget_unread_answers_dropped_total",
            &c.answers_dropped,
            "Dashboard answers not taken within --watch-send-timeout (connection closed).",
        ),
        (
            "gwhub_clusters_pruned_total",
            &c.clusters_pruned,
            "Silent disconnected clusters forgotten (--insecure-prune-after).",
        ),
    ];
    for (name, counter, help) in counters {
        write_header(&mut out, name, "counter", help);
        let _ = writeln!(out, "{name} {}", Counters::get(counter));
    }
    write_header(
        &mut out,
        "gwhub_dashboard_calls",
        "gauge",
        "Dashboard calls open (budget: --max-dashboard-calls).",
    );
    let _ = writeln!(
        out,
        "gwhub_dashboard_calls {}",
        Counters::get(&c.dashboard_calls)
    );
    type Field = fn(&ListenerCounters) -> &AtomicU64;
    let listeners: [(&str, &str, &str, Field); 5] = [
        (
            "gwhub_connections_open",
            "gauge",
            "Connections open per listener (budget: --max-connections).",
            |l| &l.open,
        ),
        (
            "gwhub_connections_accepted_total",
            "counter",
            "Connections accepted per listener.",
            |l| &l.accepted,
        ),
        (
            "gwhub_connections_idle_closed_total",
            "counter",
            "Connections closed for having no open call for --idle-connection-timeout.",
            |l| &l.idle_closed,
        ),
        (
            "gwhub_connections_saturated_total",
            "counter",
            "Times a listener reached --max-connections and paused accepting.",
            |l| &l.saturated,
        ),
        (
            "gwhub_accept_errors_total",
            "counter",
            "Failed accepts (e.g. out of file descriptors), each followed by a back-off.",
            |l| &l.accept_errors,
        ),
    ];
    for (name, kind, help, field) in listeners {
        write_header(&mut out, name, kind, help);
        for (listener, l) in [("ingest", &c.ingest), ("dashboard", &c.dashboard)] {
            let _ = writeln!(
                out,
                "{name}{{listener=\"{listener}\"}} {}",
                Counters::get(field(l))
            );
        }
    }
    out
}

/// Serves [`render`] of `index` (and `kube`) on `addr` until `shutdown`;
/// returns the bound address.
pub async fn serve(
    addr: SocketAddr,
    index: Index,
    kube: Option<Arc<Metrics>>,
    shutdown: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let render: Render = Arc::new(move || {
        let hub_gateways = index.subscribe().borrow().gateways.len();
        let mut text = render(&index.clusters(), hub_gateways, kube.as_deref());
        text.push_str(&render_budgets(index.counters()));
        text
    });
    let local = metrics_http::serve(addr, render, shutdown).await?;
    tracing::info!(addr = %local, "serving metrics on /metrics");
    Ok(local)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            "# TYPE gwhub_status_writes_total counter",
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

    #[test]
    fn without_kube_there_are_no_counters() {
        let text = render(&[], 0, None);
        assert!(!text.contains("_total"), "{text}");
        assert!(text.lines().any(|l| l == "gwhub_hub_gateways 0"), "{text}");
    }
}
