//! The Kubernetes controller's counters: plain atomics so every task can bump
//! them without a lock, rendered as Prometheus text for `--metrics-listen`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::ownership::GatewayMode;

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
    /// Per in-scope Gateway (`namespace/name`): does the agent write our
    /// conditions, some of them, or only stream (`--write-local-status`).
    modes: Mutex<BTreeMap<String, GatewayMode>>,
}

impl Metrics {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Records `gateway`'s mode; returns the previous one when it changed
    /// (`Some(None)` for a Gateway seen the first time), `None` when not.
    pub fn set_mode(&self, gateway: &str, mode: GatewayMode) -> Option<Option<GatewayMode>> {
        let mut modes = self.modes.lock().unwrap_or_else(|e| e.into_inner());
        let before = modes.insert(gateway.to_owned(), mode);
        (before != Some(mode)).then_some(before)
    }

    /// Forgets a Gateway that left scope.
    pub fn forget_mode(&self, gateway: &str) {
        self.modes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(gateway);
    }

    /// `gateway`'s current mode.
    pub fn mode(&self, gateway: &str) -> Option<GatewayMode> {
        self.modes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(gateway)
            .copied()
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
                "Evaluations refused for a missing cluster DNS config.",
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
        let _ = writeln!(
            out,
            "# HELP gwhub_agent_gateway_write_mode Per Gateway, 1 for its current --write-local-status outcome: write (the agent writes every condition of ours), partial (another field manager writes some), stream (the agent writes none and only streams)."
        );
        let _ = writeln!(out, "# TYPE gwhub_agent_gateway_write_mode gauge");
        let modes = self.modes.lock().unwrap_or_else(|e| e.into_inner());
        for (gateway, current) in modes.iter() {
            let (ns, name) = gateway.split_once('/').unwrap_or(("", gateway));
            for m in GatewayMode::ALL {
                let _ = writeln!(
                    out,
                    "gwhub_agent_gateway_write_mode{{namespace=\"{ns}\",name=\"{name}\",mode=\"{}\"}} {}",
                    m.as_str(),
                    u8::from(m == *current)
                );
            }
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
}
