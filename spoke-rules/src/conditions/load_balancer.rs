//! `LoadBalancerReady` for a Gateway's Service (spec §2), with the reasons and
//! messages of the OpenShift ingress operator's `ComputeLoadBalancerStatus`.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, Service};

use super::{LOAD_BALANCER_READY, Verdict};

/// The component whose events explain a pending load balancer.
pub const SERVICE_CONTROLLER: &str = "service-controller";
/// The event reason the service controller uses when provisioning fails.
pub const SYNC_LOAD_BALANCER_FAILED: &str = "SyncLoadBalancerFailed";

/// `LoadBalancerReady` given the Gateway's Service (if any) and the events
/// of its namespace (only matching ones are looked at).
pub fn load_balancer_ready(service: Option<&Service>, events: &[Event]) -> Verdict {
    let Some(service) =
        service.filter(|s| s.metadata.name.as_deref().is_some_and(|n| !n.is_empty()))
    else {
        return Verdict::new(
            LOAD_BALANCER_READY,
            "False",
            "ServiceNotFound",
            "The LoadBalancer service resource is missing",
        );
    };
    if is_provisioned(service) {
        return Verdict::new(
            LOAD_BALANCER_READY,
            "True",
            "LoadBalancerProvisioned",
            "The LoadBalancer service is provisioned",
        );
    }
    if let Some(event) = newest_sync_failure(service, events) {
        return Verdict::new(
            LOAD_BALANCER_READY,
            "False",
            SYNC_LOAD_BALANCER_FAILED,
            format!(
                "The {SERVICE_CONTROLLER} component is reporting {SYNC_LOAD_BALANCER_FAILED} events like: {}\n{}",
                event.message.as_deref().unwrap_or_default(),
                "The cloud-controller-manager logs may contain more details."
            ),
        );
    }
    Verdict::new(
        LOAD_BALANCER_READY,
        "False",
        "LoadBalancerPending",
        "The LoadBalancer service is pending",
    )
}

/// Whether `status.loadBalancer.ingress[]` has an ip or a hostname.
pub fn is_provisioned(service: &Service) -> bool {
    service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .is_some_and(|ingress| {
            ingress.iter().any(|i| {
                i.ip.as_deref().is_some_and(|s| !s.is_empty())
                    || i.hostname.as_deref().is_some_and(|s| !s.is_empty())
            })
        })
}

/// Whether `event` is a service-controller `SyncLoadBalancerFailed` event
/// about `service`, as the operator matches them: `involvedObject` kind
/// `Service`, apiVersion `v1`, the Service's namespace, name and uid (a
/// Service without uid has no events: the operator does not list them);
/// `source.component: service-controller`; reason `SyncLoadBalancerFailed`.
pub(crate) fn is_sync_failure_for(event: &Event, service: &Service) -> bool {
    let obj = &event.involved_object;
    let uid = service.metadata.uid.as_deref().filter(|u| !u.is_empty());
    uid.is_some()
        && obj.uid.as_deref() == uid
        && event.source.as_ref().and_then(|s| s.component.as_deref()) == Some(SERVICE_CONTROLLER)
        && event.reason.as_deref() == Some(SYNC_LOAD_BALANCER_FAILED)
        && obj.kind.as_deref() == Some("Service")
        && obj.api_version.as_deref() == Some("v1")
        && obj.name.is_some()
        && obj.name == service.metadata.name
        && obj.namespace.is_some()
        && obj.namespace == service.metadata.namespace
}

/// When the event last happened: the latest of `series.lastObservedTime`,
/// `lastTimestamp`, `eventTime`, `firstTimestamp` and `creationTimestamp`
/// (old- and new-style events fill different ones).
pub fn event_time(event: &Event) -> Option<Timestamp> {
    [
        event
            .series
            .as_ref()
            .and_then(|s| s.last_observed_time.as_ref())
            .map(|t| t.0),
        event.last_timestamp.as_ref().map(|t| t.0),
        event.event_time.as_ref().map(|t| t.0),
        event.first_timestamp.as_ref().map(|t| t.0),
        event.metadata.creation_timestamp.as_ref().map(|t| t.0),
    ]
    .into_iter()
    .flatten()
    .max()
}

/// The newest matching `SyncLoadBalancerFailed` event (ties: the later one in
/// `events`), whose message explains why the load balancer is not ready.
pub(crate) fn newest_sync_failure<'a>(service: &Service, events: &'a [Event]) -> Option<&'a Event> {
    events
        .iter()
        .filter(|e| is_sync_failure_for(e, service))
        .max_by_key(|e| event_time(e))
}
