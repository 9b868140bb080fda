//! Kubernetes Events on the Gateway for what an operator should see: a
//! condition with no room in its list, duplicate DNSRecords, a missing
//! cluster config. Raised when the situation starts or changes, not on every
//! evaluation, so a stuck Gateway does not flood the Event store.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use gateway_api::apis::standard::gateways::Gateway;
use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use super::FIELD_MANAGER;
use super::metrics::Metrics;
use crate::engine::EngineError;
use crate::status::Problem;
use gwhub_model::text::truncate_bytes;

/// Longest wait for the API server to take an Event.
const PUBLISH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Event reason when a condition or listener entry had no room.
pub const CONDITION_LIMIT_REACHED: &str = "ConditionLimitReached";
/// Event reason for several DNSRecords with one hostname.
pub const DUPLICATE_DNS_RECORDS: &str = "DuplicateDNSRecords";
/// Event reason when the cluster DNS config is missing.
pub const CLUSTER_CONFIG_MISSING: &str = "ClusterConfigMissing";

#[derive(Default)]
struct Seen {
    problems: BTreeMap<String, Vec<String>>,
    config: BTreeMap<String, String>,
}

/// Remembers what was reported per Gateway and publishes what is new.
pub(crate) struct Notices {
    recorder: Recorder,
    metrics: Arc<Metrics>,
    seen: Mutex<Seen>,
}

impl Notices {
    pub(crate) fn new(client: kube::Client, metrics: Arc<Metrics>) -> Self {
        let reporter = Reporter {
            controller: FIELD_MANAGER.into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client, reporter),
            metrics,
            seen: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets a Gateway that was deleted or left scope.
    pub(crate) fn forget(&self, name: &str) {
        let mut s = self.lock();
        s.problems.remove(name);
        s.config.remove(name);
    }

    /// Reports `problems` of one evaluation of `gw`: each counts in the
    /// metrics every time, but is logged and published only when new.
    pub(crate) async fn problems(&self, gw: &Gateway, problems: &[Problem]) {
        let name = gw.metadata.name.clone().unwrap_or_default();
        for p in problems {
            if matches!(p, Problem::NoRoomForCondition { .. }) {
                Metrics::bump(&self.metrics.condition_limit);
            }
        }
        let messages: Vec<String> = problems.iter().map(ToString::to_string).collect();
        let new: Vec<(&Problem, &String)> = {
            let mut s = self.lock();
            let before = s.problems.get(&name).cloned().unwrap_or_default();
            if messages.is_empty() {
                s.problems.remove(&name);
            } else {
                s.problems.insert(name.clone(), messages.clone());
            }
            problems
                .iter()
                .zip(&messages)
                .filter(|(_, m)| !before.contains(m))
                .collect()
        };
        for (p, message) in new {
            let reason = match p {
                Problem::DuplicateDNSRecords { .. } => DUPLICATE_DNS_RECORDS,
                _ => CONDITION_LIMIT_REACHED,
            };
            tracing::warn!(reason, "{message}");
            self.publish(gw, reason, message).await;
        }
    }

    /// Reports that `gw` could not be evaluated for `error`.
    pub(crate) async fn config_error(&self, gw: &Gateway, error: &EngineError) {
        Metrics::bump(&self.metrics.config_errors);
        let name = gw.metadata.name.clone().unwrap_or_default();
        let message = error.to_string();
        let is_new =
            self.lock().config.insert(name.clone(), message.clone()) != Some(message.clone());
        if is_new {
            tracing::error!(
                "cannot compute conditions (retrying when the config appears): {message}"
            );
            self.publish(gw, CLUSTER_CONFIG_MISSING, &message).await;
        }
    }

    /// Notes that `gw` could be evaluated again.
    pub(crate) fn config_ok(&self, gw: &Gateway) {
        let name = gw.metadata.name.as_deref().unwrap_or_default();
        if self.lock().config.remove(name).is_some() {
            tracing::info!("cluster config usable again; computing conditions");
        }
    }

    async fn publish(&self, gw: &Gateway, reason: &str, message: &str) {
        let event = Event {
            type_: EventType::Warning,
            reason: reason.into(),
            note: Some(truncate_bytes(message, 1000)),
            action: "ComputeStatus".into(),
            secondary: None,
        };
        // The one evaluation loop waits for this: a hung API server must
        // not hold back every Gateway's evaluation and the hub's updates.
        let reference = gw.object_ref(&());
        let publish = self.recorder.publish(&event, &reference);
        match tokio::time::timeout(PUBLISH_TIMEOUT, publish).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                Metrics::bump(&self.metrics.event_publish_errors);
                tracing::warn!(error = %e, reason, "cannot publish a Kubernetes Event");
            }
            Err(_) => {
                Metrics::bump(&self.metrics.event_publish_errors);
                tracing::warn!(reason, timeout = ?PUBLISH_TIMEOUT, "publishing a Kubernetes Event timed out");
            }
        }
    }
}
