//! Kubernetes Events for a cluster's liveness: when a cluster goes stale
//! (its agent silent for `--stale-after`) and when it is heard from again,
//! on the cluster's `ClusterReport`, so `kubectl describe clusterreport`
//! and `kubectl get events` tell an operator when and why a cluster's
//! status is shown as stale. One Event per transition, from the leader only
//! (every replica sees the same transitions).

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::Api;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use super::FIELD_MANAGER;
use super::metrics::Metrics;
use gwhub_hub_rules::layout::object_name;
use gwhub_hub_rules::report::ClusterReport;
use gwhub_index::{ClusterTransition, EventsPort};

/// Event reason when a cluster goes stale.
pub const CLUSTER_STALE: &str = "ClusterStale";
/// Event reason when a stale cluster is heard from again.
pub const CLUSTER_FRESH: &str = "ClusterFresh";

/// Publishes the index's cluster transitions as Events while this replica
/// leads, until `shutdown`.
pub async fn run(
    client: Client,
    namespace: String,
    index: EventsPort,
    leader: watch::Receiver<bool>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let mut transitions = index.subscribe_transitions();
    let reporter = Reporter {
        controller: FIELD_MANAGER.into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    let recorder = Recorder::new(client.clone(), reporter);
    let reports: Api<ClusterReport> = Api::namespaced(client, &namespace);
    loop {
        let transition = tokio::select! {
            _ = shutdown.cancelled() => return,
            t = transitions.recv() => t,
        };
        let transition = match transition {
            Ok(t) => t,
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(
                    missed = n,
                    "cluster transitions came faster than Events could be published; some have no Event"
                );
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if !*leader.borrow() {
            continue;
        }
        let (cluster, event) = describe(&transition, index.stale_after());
        let name = object_name(cluster);
        let mut reference = ObjectReference {
            api_version: Some(ClusterReport::api_version(&()).into_owned()),
            kind: Some(ClusterReport::kind(&()).into_owned()),
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            ..ObjectReference::default()
        };
        // With its uid, `kubectl describe clusterreport` lists the Event.
        match reports.get_opt(&name).await {
            Ok(Some(r)) => reference.uid = r.meta().uid.clone(),
            Ok(None) => {}
            Err(e) => {
                tracing::debug!(error = %e, cluster, "cannot read the ClusterReport for its uid")
            }
        }
        if let Err(e) = recorder.publish(&event, &reference).await {
            Metrics::bump(&metrics.event_publish_errors);
            tracing::warn!(error = %e, cluster, reason = event.reason, "cannot publish a Kubernetes Event");
        } else {
            Metrics::bump(&metrics.events_published);
        }
    }
}

/// The Event for `t`, and the cluster it is about.
fn describe(t: &ClusterTransition, stale_after: std::time::Duration) -> (&str, Event) {
    match t {
        ClusterTransition::Stale { cluster, last_seen } => (
            cluster,
            Event {
                type_: EventType::Warning,
                reason: CLUSTER_STALE.into(),
                note: Some(format!(
                    "cluster {cluster} sent nothing since {} (--stale-after {}): its reports are shown as stale on every hub Gateway it reports",
                    gwhub_model::time::rfc3339(*last_seen),
                    humantime::format_duration(stale_after)
                )),
                action: "Aggregate".into(),
                secondary: None,
            },
        ),
        ClusterTransition::Fresh { cluster } => (
            cluster,
            Event {
                type_: EventType::Normal,
                reason: CLUSTER_FRESH.into(),
                note: Some(format!(
                    "cluster {cluster} is reporting again: its reports count as current"
                )),
                action: "Aggregate".into(),
                secondary: None,
            },
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn notes_name_the_cluster_and_the_last_message() {
        let t = ClusterTransition::Stale {
            cluster: "east".into(),
            last_seen: "2026-01-02T03:04:05Z".parse().unwrap(),
        };
        let (cluster, e) = describe(&t, Duration::from_secs(60));
        assert_eq!(cluster, "east");
        assert_eq!(e.reason, CLUSTER_STALE);
        assert_eq!(e.type_, EventType::Warning);
        assert_eq!(
            e.note.as_deref(),
            Some(
                "cluster east sent nothing since 2026-01-02T03:04:05Z (--stale-after 1m): its reports are shown as stale on every hub Gateway it reports"
            )
        );
        let (_, e) = describe(
            &ClusterTransition::Fresh {
                cluster: "east".into(),
            },
            Duration::from_secs(60),
        );
        assert_eq!(e.reason, CLUSTER_FRESH);
        assert_eq!(e.type_, EventType::Normal);
    }
}
