//! What the suites of the in-process hub in Kubernetes mode share: the
//! hub Gateway they create, the statuses their clusters report, and the
//! waits on what the API server (or the hub's index) holds. One home, so a
//! suite split by feature still reads the same fixtures.

use std::time::{Duration, Instant};

use gateway_api::apis::standard::gateways::{
    Gateway, GatewayStatus, GatewayStatusAddresses, GatewayStatusListeners,
    GatewayStatusListenersSupportedKinds,
};
use gwhub_hub::kube_hub::KubeHub;
use gwhub_hub_rules::report::ClusterReport;
use gwhub_model::conditions::{Condition, new};
use gwhub_test_kit::install::SYSTEM_NS;
use gwhub_test_kit::wait::{until, until_named};
use jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;

pub(crate) const NS: &str = "default";

/// The hub's own namespace (its ClusterReports, Lease and Events), where
/// `manifests/` installs it.
pub(crate) const HUB_NS: &str = SYSTEM_NS;

pub(crate) const OWN: &str = "kuadrant.io/MultiClusterAggregated";

use gwhub_test_kit::wait::WAIT;

pub(crate) fn t0() -> Timestamp {
    "2026-11-23T10:00:00Z".parse().unwrap()
}

pub(crate) fn cond(t: &str, status: &str, reason: &str, message: &str) -> Condition {
    new(t, status, reason, message, Some(1), t0())
}

pub(crate) fn cluster_status(ips: &[&str], programmed: bool) -> GatewayStatus {
    GatewayStatus {
        addresses: Some(
            ips.iter()
                .map(|ip| GatewayStatusAddresses {
                    r#type: Some("IPAddress".into()),
                    value: (*ip).into(),
                })
                .collect(),
        ),
        conditions: Some(vec![
            cond("Accepted", "True", "Accepted", ""),
            if programmed {
                cond("Programmed", "True", "Programmed", "")
            } else {
                cond(
                    "Programmed",
                    "False",
                    "AddressNotAssigned",
                    "Address pending",
                )
            },
        ]),
        listeners: Some(vec![GatewayStatusListeners {
            name: "http".into(),
            attached_routes: 1,
            supported_kinds: Some(vec![GatewayStatusListenersSupportedKinds {
                group: Some("gateway.networking.k8s.io".into()),
                kind: "HTTPRoute".into(),
            }]),
            conditions: vec![cond("Accepted", "True", "Accepted", "")],
        }]),
        attached_listener_sets: None,
    }
}

pub(crate) async fn create_hub_gateway(api: &Api<Gateway>, name: &str) {
    let gw: Gateway = serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "gatewayClassName": "kuadrant-multi-cluster-gateway-instance-per-cluster",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]
        }
    }))
    .unwrap();
    api.create(&PostParams::default(), &gw).await.unwrap();
}

pub(crate) fn own(status: &GatewayStatus) -> Option<&Condition> {
    status.conditions.iter().flatten().find(|c| c.type_ == OWN)
}

pub(crate) fn find<'a>(status: &'a GatewayStatus, type_: &str) -> Option<&'a Condition> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
}

/// Polls `name` until `pred` holds on its status; returns it.
pub(crate) async fn wait_status(
    api: &Api<Gateway>,
    name: &str,
    what: &str,
    pred: impl Fn(&GatewayStatus) -> bool,
) -> Gateway {
    let deadline = Instant::now() + WAIT;
    loop {
        let gw = api.get(name).await.unwrap();
        if pred(gw.status.as_ref().unwrap_or(&GatewayStatus::default())) {
            return gw;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: {what}; last status: {:#?}",
            gw.status
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `hub` has seen the stream of `cluster`, whose agent was
/// dropped, end (in its own time): it is registered but not connected.
pub(crate) async fn away(hub: &KubeHub, cluster: &str) {
    let index = &hub.hub.index;
    until_named(
        &format!("the hub never saw {cluster}'s stream end"),
        WAIT,
        || async { index.clusters().into_iter().find(|c| c.name == cluster) },
        |c| c.as_ref().is_some_and(|c| !c.connected),
    )
    .await;
}

pub(crate) fn aggregated(n: usize) -> impl Fn(&GatewayStatus) -> bool {
    move |s| {
        own(s).is_some_and(|c| {
            c.status == "True" && c.message == format!("Aggregated the status of {n} clusters")
        })
    }
}

/// Waits until a liveness record of a process of `replica` lists exactly
/// `clusters` (records are rewritten at most every 2 s).
pub(crate) async fn wait_listed(client: &Client, replica: &str, clusters: &[&str]) {
    use gwhub_hub_rules::liveness::{self, CLUSTERS_KEY, LABEL, REPLICA_KEY};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ListParams;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), HUB_NS);
    let labelled = ListParams::default().labels(&format!("{LABEL}=replica"));
    let want: Vec<String> = clusters.iter().map(|c| c.to_string()).collect();
    let prefix = format!("{replica}@");
    until(
        WAIT,
        || async { configmaps.list(&labelled).await.unwrap().items },
        |records| {
            records.iter().any(|r| {
                let data = r.data.clone().unwrap_or_default();
                data.get(REPLICA_KEY)
                    .is_some_and(|id| id.starts_with(&prefix))
                    && data.get(CLUSTERS_KEY).is_some_and(|text| {
                        liveness::decode(text).0.into_keys().collect::<Vec<_>>() == want
                    })
            })
        },
    )
    .await;
}

/// A Gateway of `listeners` listeners as OpenShift's agent reports it: four
/// conditions on the Gateway, four per listener, two addresses.
pub(crate) fn large_status(i: usize, listeners: usize) -> GatewayStatus {
    let c = |t: &str, reason: &str, message: &str| cond(t, "True", reason, message);
    GatewayStatus {
        addresses: Some(vec![
            GatewayStatusAddresses {
                r#type: Some("IPAddress".into()),
                value: format!("10.{}.{}.1", i / 256, i % 256),
            },
            GatewayStatusAddresses {
                r#type: Some("Hostname".into()),
                value: format!("a{i}-1234567890.us-east-1.elb.amazonaws.com"),
            },
        ]),
        conditions: Some(vec![
            c("Accepted", "Accepted", "Resource accepted"),
            c(
                "Programmed",
                "Programmed",
                "Resource programmed, assigned to service(s)",
            ),
            c(
                "LoadBalancerReady",
                "LoadBalancerProvisioned",
                "The LoadBalancer service is provisioned",
            ),
            c(
                "DNSReady",
                "AllListenersReady",
                "All the listeners have DNS ready",
            ),
        ]),
        listeners: Some(
            (0..listeners)
                .map(|l| GatewayStatusListeners {
                    name: format!("https-{l}"),
                    attached_routes: 3,
                    supported_kinds: Some(vec![GatewayStatusListenersSupportedKinds {
                        group: Some("gateway.networking.k8s.io".into()),
                        kind: "HTTPRoute".into(),
                    }]),
                    conditions: vec![
                        c("Accepted", "Accepted", "No errors found"),
                        c("Programmed", "Programmed", "No errors found"),
                        c("ResolvedRefs", "ResolvedRefs", "No errors found"),
                        c(
                            "DNSReady",
                            "NoFailedZones",
                            "The record is provisioned in all reported zones.",
                        ),
                    ],
                })
                .collect(),
        ),
        attached_listener_sets: None,
    }
}

/// The stored objects of `cluster` once they hold `gateways` Gateways in
/// as many objects as the head names.
pub(crate) async fn stored_report(
    reports: &Api<ClusterReport>,
    cluster: &str,
    gateways: usize,
) -> Vec<ClusterReport> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let mine: Vec<ClusterReport> = reports
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|r| r.spec.cluster == cluster)
            .collect();
        let total: usize = mine
            .iter()
            .map(|r| r.spec.reported_gateways().unwrap().len())
            .sum();
        let head = mine.iter().find(|r| r.spec.part == 0);
        if total == gateways && head.is_some_and(|h| h.spec.parts as usize == mine.len()) {
            return mine;
        }
        assert!(
            Instant::now() < deadline,
            "{cluster}: {} objects holding {total} Gateways, head {:?}",
            mine.len(),
            head.map(|h| h.spec.parts)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
