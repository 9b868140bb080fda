//! The Kubernetes controller's counters: plain atomics so every task can bump
//! them without a lock, rendered as Prometheus text for `--metrics-listen`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters since start. `Relaxed` is enough: each is independent.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Gateways evaluated.
    pub reconciles: AtomicU64,
    /// Status applies the API server accepted.
    pub writes: AtomicU64,
    /// Evaluations whose result differed from the live status in nothing
    /// but time, so no write was sent.
    pub skipped_writes: AtomicU64,
    /// Applies rejected with a conflict (another manager changed a field we
    /// co-own); retried from the fresh object.
    pub write_conflicts: AtomicU64,
    /// Applies that failed otherwise.
    pub write_errors: AtomicU64,
    /// Watch errors (the watcher backs off and resumes).
    pub watch_errors: AtomicU64,
    /// Objects that did not parse as their kind (skipped).
    pub parse_errors: AtomicU64,
    /// Evaluations refused for a missing/unusable cluster DNS or
    /// Infrastructure config.
    pub config_errors: AtomicU64,
    /// Fresh lists of a Service's Events that failed.
    pub event_list_errors: AtomicU64,
    /// Conditions or listener entries skipped for lack of room.
    pub condition_limit: AtomicU64,
    /// Kubernetes Events the agent failed to publish.
    pub event_publish_errors: AtomicU64,
}

impl Metrics {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A counter's current value.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// Prometheus text exposition (version 0.0.4).
    pub fn render(&self) -> String {
        let rows: [(&str, &AtomicU64, &str); 11] = [
            ("reconciles", &self.reconciles, "Gateways evaluated."),
            (
                "status_writes",
                &self.writes,
                "Status applies accepted by the API server.",
            ),
            (
                "status_writes_skipped",
                &self.skipped_writes,
                "Evaluations where nothing but time changed, so no write was sent.",
            ),
            (
                "status_write_conflicts",
                &self.write_conflicts,
                "Status applies rejected with a conflict (retried).",
            ),
            (
                "status_write_errors",
                &self.write_errors,
                "Status applies that failed otherwise.",
            ),
            (
                "watch_errors",
                &self.watch_errors,
                "Watch errors (the watch resumes).",
            ),
            (
                "parse_errors",
                &self.parse_errors,
                "Objects that did not parse and were skipped.",
            ),
            (
                "cluster_config_errors",
                &self.config_errors,
                "Evaluations refused for a missing cluster DNS or Infrastructure config.",
            ),
            (
                "event_list_errors",
                &self.event_list_errors,
                "Failed fresh lists of a Service's Events.",
            ),
            (
                "condition_limit",
                &self.condition_limit,
                "Conditions or listener entries skipped for lack of room.",
            ),
            (
                "event_publish_errors",
                &self.event_publish_errors,
                "Kubernetes Events that could not be published.",
            ),
        ];
        let mut out = String::new();
        for (name, counter, help) in rows {
            let _ = writeln!(out, "# HELP gwhub_agent_{name}_total {help}");
            let _ = writeln!(out, "# TYPE gwhub_agent_{name}_total counter");
            let _ = writeln!(out, "gwhub_agent_{name}_total {}", Self::get(counter));
        }
        out
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
        assert!(text.contains("# TYPE gwhub_agent_reconciles_total counter\n"));
    }
}
