//! The Kubernetes controller's metrics: `prometheus_client` counters (shared
//! atomics, so every task bumps them without a lock), each declared once
//! with its name and help in [`Metrics::register`], served on
//! `--metrics-listen`.

use std::collections::BTreeMap;
use std::sync::Mutex;

use gwhub_common::metrics_http::{self, CountGauge, Seconds, Value};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::ownership::GatewayMode;

/// The labels of `gwhub_agent_gateway_write_mode`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModeLabels {
    namespace: String,
    name: String,
    mode: &'static str,
}

gwhub_common::metrics! {
    /// Counters since start.
    #[derive(Debug, Default)]
    pub struct Metrics {
        /// Gateways evaluated.
        pub reconciles: Counter => "gwhub_agent_reconciles", "Gateways evaluated.",
        /// Status applies the API server accepted.
        pub writes: Counter =>
            "gwhub_agent_status_writes", "Status applies accepted by the API server.",
        /// Evaluations whose result differed from the live status in nothing
        /// but time, so no write was sent.
        pub skipped_writes: Counter => "gwhub_agent_status_writes_skipped",
            "Evaluations where nothing but time changed, so no write was sent.",
        /// Applies rejected with a conflict (another manager changed a field
        /// we co-own); retried from the fresh object.
        pub write_conflicts: Counter => "gwhub_agent_status_write_conflicts",
            "Status applies rejected with a conflict (retried).",
        /// Applies that failed otherwise.
        pub write_errors: Counter =>
            "gwhub_agent_status_write_errors", "Status applies that failed otherwise.",
        /// Watch errors (the watcher backs off and resumes).
        pub watch_errors: Counter =>
            "gwhub_agent_watch_errors", "Watch errors (the watch resumes).",
        /// Objects that did not parse as their kind (skipped).
        pub parse_errors: Counter =>
            "gwhub_agent_parse_errors", "Objects that did not parse and were skipped.",
        /// Evaluations refused for a missing/unusable cluster DNS or
        /// Infrastructure config.
        pub config_errors: Counter => "gwhub_agent_cluster_config_errors",
            "Evaluations refused for a missing cluster DNS config.",
        /// Fresh lists of a Service's Events that failed.
        pub event_list_errors: Counter =>
            "gwhub_agent_event_list_errors", "Failed fresh lists of a Service's Events.",
        /// Conditions or listener entries skipped for lack of room.
        pub condition_limit: Counter => "gwhub_agent_condition_limit",
            "Conditions or listener entries skipped for lack of room.",
        /// Kubernetes Events the agent failed to publish.
        pub event_publish_errors: Counter => "gwhub_agent_event_publish_errors",
            "Kubernetes Events that could not be published.",
        /// notAfter of the client certificate in use (0 without mTLS).
        pub certificate_expiry: Gauge => "gwhub_agent_certificate_expiry_timestamp_seconds",
            "notAfter (Unix seconds) of the agent's client certificate (--tls-cert), read at each connect; 0 without mTLS.",
        /// One Gateway's evaluation: reading the caches, a fresh Event
        /// list when its load balancer is not provisioned, evaluating,
        /// queueing the write (the write itself is the writer's).
        pub reconcile_seconds: Seconds => "gwhub_agent_reconcile_duration_seconds",
            "One Gateway's evaluation, from the caches to the queued status write.",
        /// Per in-scope Gateway, 1 for its current mode and 0 for the others
        /// (kept by [`Metrics::set_mode`] from `modes`).
        write_mode: Family<ModeLabels, CountGauge> => "gwhub_agent_gateway_write_mode",
            "Per Gateway, 1 for its current --write-local-status outcome: write (the agent writes every condition of ours), partial (another field manager writes some), stream (the agent writes none and only streams).",
        /// Per in-scope Gateway (`namespace/name`): does the agent write our
        /// conditions, some of them, or only stream (`--write-local-status`).
        modes: Mutex<BTreeMap<String, GatewayMode>>,
    }
}

impl Metrics {
    pub(crate) fn bump(counter: &Counter) {
        counter.inc();
    }

    /// A counter's current value.
    pub fn get(counter: &Counter) -> u64 {
        counter.value()
    }

    /// Records `gateway`'s mode; returns the previous one when it changed
    /// (`Some(None)` for a Gateway seen the first time), `None` when not.
    pub fn set_mode(&self, gateway: &str, mode: GatewayMode) -> Option<Option<GatewayMode>> {
        let mut modes = self.modes.lock().unwrap_or_else(|e| e.into_inner());
        let before = modes.insert(gateway.to_owned(), mode);
        for m in GatewayMode::ALL {
            self.write_mode
                .get_or_create(&mode_labels(gateway, m))
                .set(u64::from(m == mode));
        }
        (before != Some(mode)).then_some(before)
    }

    /// Forgets a Gateway that left scope.
    pub fn forget_mode(&self, gateway: &str) {
        let mut modes = self.modes.lock().unwrap_or_else(|e| e.into_inner());
        modes.remove(gateway);
        for m in GatewayMode::ALL {
            self.write_mode.remove(&mode_labels(gateway, m));
        }
    }

    /// `gateway`'s current mode.
    pub fn mode(&self, gateway: &str) -> Option<GatewayMode> {
        self.modes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(gateway)
            .copied()
    }

    /// The OpenMetrics text of these metrics alone.
    pub fn render(&self) -> String {
        let mut registry = Registry::default();
        self.register(&mut registry);
        metrics_http::encode(&registry)
    }
}

/// The gauge labels of `gateway` (`namespace/name`) in `mode`.
fn mode_labels(gateway: &str, mode: GatewayMode) -> ModeLabels {
    let (ns, name) = gateway.split_once('/').unwrap_or(("", gateway));
    ModeLabels {
        namespace: ns.to_owned(),
        name: name.to_owned(),
        mode: mode.as_str(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters() {
        let m = Metrics::default();
        Metrics::bump(&m.writes);
        let text = m.render();
        assert!(
            text.contains("gwhub_agent_status_writes_total 1\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE gwhub_agent_reconciles counter\n"));
        assert!(text.contains("gwhub_agent_reconciles_total 0\n"));
        assert_eq!(m.set_mode("ns/gw", GatewayMode::Write), Some(None));
        assert_eq!(m.set_mode("ns/gw", GatewayMode::Write), None);
        assert_eq!(
            m.set_mode("ns/gw", GatewayMode::Stream),
            Some(Some(GatewayMode::Write))
        );
        let text = m.render();
        assert!(
            text.contains(
                "gwhub_agent_gateway_write_mode{namespace=\"ns\",name=\"gw\",mode=\"stream\"} 1\n"
            ),
            "{text}"
        );
        assert!(text.contains(
            "gwhub_agent_gateway_write_mode{namespace=\"ns\",name=\"gw\",mode=\"write\"} 0\n"
        ));
    }

    /// What dashboards, the README and the end-to-end tests scrape: every
    /// sample the agent exposes, by name and labels. A rename fails here.
    #[test]
    fn exposed_names_and_labels_are_pinned() {
        let m = Metrics::default();
        m.set_mode("ns/gw", GatewayMode::Partial);
        let text = m.render();
        let samples: Vec<&str> = metrics_http::samples(&text).into_keys().collect();
        let mut pinned = vec![
            "gwhub_agent_reconciles_total",
            "gwhub_agent_status_writes_total",
            "gwhub_agent_status_writes_skipped_total",
            "gwhub_agent_status_write_conflicts_total",
            "gwhub_agent_status_write_errors_total",
            "gwhub_agent_watch_errors_total",
            "gwhub_agent_parse_errors_total",
            "gwhub_agent_cluster_config_errors_total",
            "gwhub_agent_event_list_errors_total",
            "gwhub_agent_condition_limit_total",
            "gwhub_agent_event_publish_errors_total",
            "gwhub_agent_certificate_expiry_timestamp_seconds",
            "gwhub_agent_gateway_write_mode{namespace=\"ns\",name=\"gw\",mode=\"write\"}",
            "gwhub_agent_gateway_write_mode{namespace=\"ns\",name=\"gw\",mode=\"partial\"}",
            "gwhub_agent_gateway_write_mode{namespace=\"ns\",name=\"gw\",mode=\"stream\"}",
        ];
        // The reconcile histogram (issue 27: p99 in Prometheus).
        let histogram = "gwhub_agent_reconcile_duration_seconds";
        let bounds = [
            "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05",
            "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "30.0", "+Inf",
        ];
        let mut hist: Vec<String> = bounds
            .iter()
            .map(|le| format!("{histogram}_bucket{{le=\"{le}\"}}"))
            .collect();
        hist.push(format!("{histogram}_sum"));
        hist.push(format!("{histogram}_count"));
        pinned.extend(hist.iter().map(String::as_str));
        pinned.sort_unstable();
        assert_eq!(samples, pinned, "{text}");
        // A Gateway that left scope leaves no rows.
        m.forget_mode("ns/gw");
        assert!(!m.render().contains("name=\"gw\""));
    }
}
