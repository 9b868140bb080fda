//! Test helpers: builders for statuses and an independent CRD checker.
#![allow(dead_code)]

pub use gwhub_test_kit::crd_check as crd;

pub mod strategies;

use gateway_api::apis::standard::gateways::{
    GatewayStatus, GatewayStatusAddresses, GatewayStatusListeners,
    GatewayStatusListenersSupportedKinds,
};
use gwhub_hub_rules::aggregate::{
    Aggregation, ClusterReport, Freshness, HubGateway, Options, ReportedStatus, aggregate,
};
use gwhub_model::Condition;
use jiff::Timestamp;

pub fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

pub fn now() -> Timestamp {
    ts("2025-05-01T12:00:00Z")
}

pub fn cond(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
    gwhub_model::conditions::new(
        type_,
        status,
        reason,
        message,
        Some(1),
        ts("2025-01-01T00:00:00Z"),
    )
}

pub fn addr(type_: Option<&str>, value: &str) -> GatewayStatusAddresses {
    GatewayStatusAddresses {
        r#type: type_.map(str::to_owned),
        value: value.to_owned(),
    }
}

pub fn ip(value: &str) -> GatewayStatusAddresses {
    addr(Some("IPAddress"), value)
}

pub fn listener(name: &str, routes: i32, conditions: Vec<Condition>) -> GatewayStatusListeners {
    GatewayStatusListeners {
        attached_routes: routes,
        conditions,
        name: name.to_owned(),
        supported_kinds: Some(vec![GatewayStatusListenersSupportedKinds {
            group: Some("gateway.networking.k8s.io".into()),
            kind: "HTTPRoute".into(),
        }]),
    }
}

pub fn status(
    conditions: Vec<Condition>,
    addresses: Vec<GatewayStatusAddresses>,
    listeners: Vec<GatewayStatusListeners>,
) -> GatewayStatus {
    GatewayStatus {
        addresses: Some(addresses),
        attached_listener_sets: None,
        conditions: Some(conditions),
        listeners: Some(listeners),
    }
}

/// `status` in the compact form the engine reads, for as long as the test
/// runs (leaked: a test's statuses are few and small).
pub fn compact(status: &GatewayStatus) -> &'static ReportedStatus {
    Box::leak(Box::new(ReportedStatus::from(status)))
}

pub fn fresh<'a>(cluster: &'a str, status: &'a GatewayStatus) -> ClusterReport<'a> {
    ClusterReport {
        cluster,
        status: compact(status),
        freshness: Freshness::Fresh,
    }
}

pub fn hub(generation: i64) -> HubGateway {
    HubGateway {
        generation,
        ..HubGateway::default()
    }
}

/// Aggregates with default options at [`now`], checking the CRD rules.
pub fn run(hub: &HubGateway, reports: &[ClusterReport<'_>]) -> Aggregation {
    let agg = aggregate(hub, reports, &Options::default(), now()).unwrap();
    if let Err(e) = crd::check_status(&agg.status) {
        panic!("output violates the CRD: {e}\n{:#?}", agg.status);
    }
    agg
}

pub fn conditions(agg: &Aggregation) -> &[Condition] {
    agg.status.conditions.as_deref().unwrap()
}

pub fn find<'a>(agg: &'a Aggregation, type_: &str) -> &'a Condition {
    conditions(agg)
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no condition {type_} in {:#?}", conditions(agg)))
}

pub fn own(agg: &Aggregation) -> &Condition {
    find(agg, gwhub_hub_rules::aggregate::OWN_CONDITION)
}

pub fn address_values(agg: &Aggregation) -> Vec<String> {
    agg.status
        .addresses
        .as_deref()
        .unwrap()
        .iter()
        .map(|a| a.value.clone())
        .collect()
}

pub fn listener_names(agg: &Aggregation) -> Vec<String> {
    agg.status
        .listeners
        .as_deref()
        .unwrap()
        .iter()
        .map(|l| l.name.clone())
        .collect()
}
