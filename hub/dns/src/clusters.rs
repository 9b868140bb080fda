//! The rules' inputs from the hub's state: each cluster's [`ClusterView`]
//! of a hub Gateway from its REPORT (the index's copy of what the cluster
//! sent, with the listener hostnames), never from the hub Gateway's status
//! (capped at 16 addresses); and the hub Gateways' spec as the names need
//! it ([`HubSpec`]).

use std::collections::BTreeSet;

use gwhub_dns_rules::{
    Address, AddressType, ClusterView, ConditionStatus, HubListener, ListenerView,
};
use gwhub_hub_rules::aggregate::GatewayKey;
use gwhub_proto::{convert, v1};

use gwhub_index::{ClusterGateway, DnsPort};

/// A hub Gateway's spec and metadata as fleet DNS needs them (from the
/// management cluster's watch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubSpec {
    pub uid: String,
    /// `metadata.creationTimestamp`, ms since the epoch.
    pub created_millis: i64,
    pub listeners: Vec<HubListener>,
}

impl HubSpec {
    /// From a Gateway on the management cluster.
    pub fn of(gw: &gateway_api::apis::standard::gateways::Gateway) -> Self {
        HubSpec {
            uid: gw.metadata.uid.clone().unwrap_or_default(),
            created_millis: gw
                .metadata
                .creation_timestamp
                .as_ref()
                .map_or(0, |t| t.0.as_millisecond()),
            listeners: gw
                .spec
                .listeners
                .iter()
                .map(|l| HubListener {
                    name: l.name.clone(),
                    hostname: l.hostname.clone(),
                })
                .collect(),
        }
    }
}

fn condition(list: &[v1::Condition], type_: &str) -> Option<ConditionStatus> {
    list.iter()
        .find(|c| c.r#type == type_)
        .map(|c| ConditionStatus::parse(convert::status_word(c.status).unwrap_or("Unknown")))
}

/// One reporting cluster's view; `expected`: see [`ClusterView::expected`].
pub(crate) fn reported(
    index: &DnsPort,
    key: &GatewayKey,
    r: &ClusterGateway,
    expected: Option<bool>,
) -> ClusterView {
    let hostnames = index.listener_hostnames(&r.cluster, key);
    let s = &r.status;
    ClusterView {
        cluster: r.cluster.clone(),
        reports_gateway: true,
        stale: r.stale,
        revoked: false,
        member: None,
        expected,
        load_balancer_ready: condition(&s.conditions, "LoadBalancerReady"),
        programmed: condition(&s.conditions, "Programmed"),
        listeners: s
            .listeners
            .iter()
            .map(|l| ListenerView {
                name: l.name.clone(),
                hostname: hostnames
                    .iter()
                    .find(|(n, _)| *n == l.name)
                    .map(|(_, h)| h.clone())
                    .or_else(|| l.hostname.clone()),
                attached_routes: i64::from(l.attached_routes),
                programmed: condition(&l.conditions, "Programmed"),
            })
            .collect(),
        addresses: s
            .addresses
            .iter()
            .map(|a| Address {
                address_type: AddressType::parse(a.r#type.as_deref()),
                value: a.value.clone(),
            })
            .collect(),
    }
}

/// An expected cluster that does not report the Gateway.
pub(crate) fn missing(cluster: &str) -> ClusterView {
    ClusterView {
        cluster: cluster.to_owned(),
        reports_gateway: false,
        stale: false,
        revoked: false,
        member: None,
        expected: Some(true),
        load_balancer_ready: None,
        programmed: None,
        listeners: Vec::new(),
        addresses: Vec::new(),
    }
}

/// Every cluster of hub Gateway `key`: its reporting clusters (from their
/// reports) and its expected clusters that do not report it.
pub(crate) fn views(index: &DnsPort, key: &GatewayKey) -> Vec<ClusterView> {
    let agg = index.subscribe().borrow().get(key).cloned();
    let names_expected = index
        .live_hub(key)
        .is_some_and(|l| l.expected_clusters.is_some() || l.placement.is_some());
    let unexpected: BTreeSet<String> = agg
        .as_ref()
        .map(|v| v.lean.unexpected_clusters.iter().cloned().collect())
        .unwrap_or_default();
    let mut out: Vec<ClusterView> = index
        .cluster_reports(key)
        .iter()
        .map(|r| {
            let expected = names_expected.then(|| !unexpected.contains(&r.cluster));
            reported(index, key, r, expected)
        })
        .collect();
    if let Some(v) = &agg {
        out.extend(v.missing.iter().map(|c| missing(c)));
    }
    out.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    out
}
