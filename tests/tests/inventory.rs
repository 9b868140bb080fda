//! The fleet inventory on a real API server (ClusterProfiles,
//! `multicluster.x-k8s.io/v1alpha1`) of `gwhub serve --inventory-namespace`.
//! The hub runs as the ServiceAccount `manifests/` creates, with the
//! upstream CRDs (CEL stripped) or, in a bare clone, the ones generated
//! from the Rust types. ClusterProfiles `east`, `west`, `north`; agents for
//! `east`, `west` and `rogue`: `rogue` is refused (or, observing, admitted
//! and flagged), `north` is listed as never connected and named in every
//! aggregated condition of a hub Gateway that expects all clusters, and
//! deleting `west`'s ClusterProfile ends its stream, deletes its
//! ClusterReports and drops it from the hub Gateway.

use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus};
use gwhub_hub::kube_hub::KubeHub;
use gwhub_hub_rules::inventory::{ClusterProfile, Mode, PlacementDecision};
use gwhub_hub_rules::report::ClusterReport;
use gwhub_model::conditions::Condition;
use gwhub_proto::convert::status_to_proto;
use gwhub_proto::v1::{self, dashboard_client::DashboardClient};
use gwhub_test_kit::apiserver::{Fleet, create_namespaces};
use gwhub_test_kit::install::SYSTEM_NS;
use gwhub_test_kit::kube_objects::apply;
use gwhub_test_kit::raw_agent::{Agent, hello};
use gwhub_test_kit::wait::{WAIT, until};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::json;

use crate::support::kube_hub::kube_hub;

const FLEET_NS: &str = "fleet";
const NS: &str = "default";
const OWN: &str = "kuadrant.io/MultiClusterAggregated";

/// The management API server with the hub installed as the README says,
/// the inventory CRDs, and ClusterProfiles `east`, `west`, `north`; the
/// admin's client and the hub's ServiceAccount's.
async fn management(test: &str) -> Option<(Fleet, Client, Client)> {
    let (fleet, admin, as_hub) = gwhub_test_kit::install::management(test).await?;
    gwhub_test_kit::crds::install_inventory(&admin)
        .await
        .expect("install the ClusterProfile CRD");
    create_namespaces(&admin, &[FLEET_NS]).await.unwrap();
    for name in ["east", "west", "north"] {
        profile(&admin, name).await;
    }
    Some((fleet, admin, as_hub))
}

async fn profile(admin: &Client, name: &str) {
    let api: Api<ClusterProfile> = Api::namespaced(admin.clone(), FLEET_NS);
    apply(
        &api,
        name,
        json!({"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
               "metadata": {"name": name, "namespace": FLEET_NS,
                            "labels": {"x-k8s.io/cluster-manager": "test"}},
               "spec": {"displayName": name, "clusterManager": {"name": "test"}}}),
    )
    .await;
}

/// Hub Gateway `default/web`, expecting every inventory cluster.
async fn hub_gateway(admin: &Client) -> Api<Gateway> {
    hub_gateway_with(admin, "gwhub.io/expected-clusters", "").await
}

/// Hub Gateway `default/web` with one annotation.
async fn hub_gateway_with(admin: &Client, annotation: &str, value: &str) -> Api<Gateway> {
    let api: Api<Gateway> = Api::namespaced(admin.clone(), NS);
    apply(
        &api,
        "web",
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": "web", "namespace": NS,
                            "annotations": {annotation: value}},
               "spec": {"gatewayClassName": "kuadrant-multi-cluster",
                        "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}),
    )
    .await;
    api
}

async fn start_hub(as_hub: &Client, mode: Mode) -> KubeHub {
    start_replica(as_hub, mode, None).await
}

/// A hub replica; with `identity`, electing a leader over the Lease.
async fn start_replica(as_hub: &Client, mode: Mode, identity: Option<&str>) -> KubeHub {
    let hub = kube_hub(as_hub).inventory(FLEET_NS, mode);
    match identity {
        Some(identity) => hub.identity(identity),
        None => hub,
    }
    .start()
    .await
}

fn cond(t: &str) -> Condition {
    gwhub_model::conditions::new(t, "True", t, "", Some(1), jiff::Timestamp::UNIX_EPOCH)
}

/// `default/web` as a cluster reports it: everything True.
fn web(ip: &str) -> v1::GatewayReport {
    let status = GatewayStatus {
        addresses: Some(vec![
            gateway_api::apis::standard::gateways::GatewayStatusAddresses {
                r#type: Some("IPAddress".into()),
                value: ip.into(),
            },
        ]),
        conditions: Some(vec![
            cond("Accepted"),
            cond("Programmed"),
            cond("LoadBalancerReady"),
        ]),
        ..GatewayStatus::default()
    };
    v1::GatewayReport {
        namespace: NS.into(),
        name: "web".into(),
        uid: "uid-web".into(),
        generation: 1,
        status: Some(status_to_proto(&status).unwrap()),
    }
}

/// Connects once the hub took in the inventory (before, it asks agents to
/// come back with UNAVAILABLE) and reports `default/web`.
async fn reporting_agent(hub: &KubeHub, cluster: &str, ip: &str) -> Agent {
    let index = &hub.hub.index;
    until(WAIT, || async { index.inventory_synced() }, |s| *s).await;
    let mut agent = Agent::connect(hub.hub.ingest_addr, cluster).await;
    agent.snapshot(1, 1, vec![web(ip)]).await;
    agent
}

/// How the hub ends (or refuses) a stream for `cluster`, once it took in
/// the inventory.
async fn refused(hub: &KubeHub, cluster: &str) -> tonic::Status {
    let index = &hub.hub.index;
    until(WAIT, || async { index.inventory_synced() }, |s| *s).await;
    match Agent::open(hub.hub.ingest_addr, hello(cluster)).await {
        Err(status) => status,
        Ok(mut agent) => agent.expect_error().await,
    }
}

/// `gwhubctl ARGS` against the hub's Dashboard; its output.
async fn gwhubctl(hub: &KubeHub, args: &[&str]) -> String {
    gwhub_test_kit::workspace_bin::gwhubctl(hub.hub.dashboard_addr, args).await
}

async fn clusters(hub: &KubeHub) -> Vec<v1::ClusterInfo> {
    let mut dashboard = DashboardClient::connect(format!("http://{}", hub.hub.dashboard_addr))
        .await
        .unwrap();
    dashboard
        .list_clusters(v1::ListClustersRequest {})
        .await
        .unwrap()
        .into_inner()
        .clusters
}

fn condition(gw: &Gateway, t: &str) -> Option<(String, String)> {
    gw.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == t)
        .map(|c| (c.status.clone(), c.message.clone()))
}

/// What the hub Gateway says: LoadBalancerReady, the hub's own condition
/// and the clusters its addresses name.
async fn web_status(
    api: &Api<Gateway>,
) -> (
    Option<(String, String)>,
    Option<(String, String)>,
    Vec<String>,
) {
    let gw = api.get("web").await.unwrap();
    let addresses = gw
        .status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|a| a.value)
        .collect();
    (
        condition(&gw, "LoadBalancerReady"),
        condition(&gw, OWN),
        addresses,
    )
}

async fn report_clusters(admin: &Client) -> Vec<String> {
    let api: Api<ClusterReport> = Api::namespaced(admin.clone(), SYSTEM_NS);
    let mut names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|r| r.spec.cluster)
        .collect();
    names.sort();
    names.dedup();
    names
}

#[tokio::test]
async fn the_inventory_names_refuses_expects_and_removes() {
    let Some((_fleet, admin, as_hub)) =
        management("the_inventory_names_refuses_expects_and_removes").await
    else {
        return;
    };
    let gateways = hub_gateway(&admin).await;
    let hub = start_hub(&as_hub, Mode::Enforce).await;
    let _east = reporting_agent(&hub, "east", "192.0.2.1").await;
    let mut west = reporting_agent(&hub, "west", "192.0.2.2").await;

    // A cluster outside the inventory cannot speak.
    let status = refused(&hub, "rogue").await;
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    assert!(
        status.message().contains("\"rogue\"") && status.message().contains("\"fleet\""),
        "{}",
        status.message()
    );

    // Every inventory cluster is listed; the silent one as never connected.
    let listed = clusters(&hub).await;
    let row = |n: &str| listed.iter().find(|c| c.name == n).cloned();
    let north = row("north").expect("north listed");
    assert!(
        north.in_inventory && north.never_connected && !north.connected,
        "{north:?}"
    );
    let east = row("east").expect("east listed");
    assert!(
        east.in_inventory && !east.never_connected && east.connected,
        "{east:?}"
    );
    assert!(row("rogue").is_none(), "{listed:?}");

    // The hub Gateway expecting every cluster is not ready while north is
    // silent.
    let (lb, own, _) = until(
        WAIT,
        || web_status(&gateways),
        |(lb, own, _)| {
            lb.as_ref().is_some_and(|(s, _)| s == "False")
                && own.as_ref().is_some_and(|(_, m)| m.contains("2 of 3"))
        },
    )
    .await;
    assert_eq!(lb, Some(("False".into(), "north never reported".into())));
    assert_eq!(
        own,
        Some((
            "True".into(),
            "Aggregated the status of 2 of 3 expected clusters; north never reported".into()
        ))
    );
    until(WAIT, || report_clusters(&admin), |r| r == &["east", "west"]).await;
    // The Dashboard names the missing cluster as such.
    let mut dashboard = DashboardClient::connect(format!("http://{}", hub.hub.dashboard_addr))
        .await
        .unwrap();
    let gw = dashboard
        .get_gateway(v1::GetGatewayRequest {
            namespace: NS.into(),
            name: "web".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .gateway
        .unwrap();
    assert_eq!(
        gw.missing_clusters,
        [v1::MissingCluster {
            cluster: "north".into(),
            never_reported: true
        }]
    );
    assert_eq!(gw.clusters, ["east", "west"]);
    // And so does gwhubctl.
    let clusters_table = gwhubctl(&hub, &["get", "clusters"]).await;
    let north_row = clusters_table
        .lines()
        .find(|l| l.starts_with("north "))
        .unwrap_or_else(|| panic!("{clusters_table}"));
    assert!(north_row.ends_with("never-connected"), "{clusters_table}");
    assert!(clusters_table.lines().next().unwrap().contains("INVENTORY"));
    let gateways_table = gwhubctl(&hub, &["get", "gateways", "--cluster", "north"]).await;
    assert!(gateways_table.contains("2 (1 missing)"), "{gateways_table}");
    let described = gwhubctl(&hub, &["describe", "gateway", "default/web"]).await;
    assert!(
        described.contains("Missing:    north (never reported)"),
        "{described}"
    );

    // West leaves: its stream ends, its reports go, it drops out.
    let profiles: Api<ClusterProfile> = Api::namespaced(admin.clone(), FLEET_NS);
    profiles
        .delete("west", &DeleteParams::default())
        .await
        .unwrap();
    let ended = west.ended().await;
    assert_eq!(ended.code(), tonic::Code::PermissionDenied, "{ended:?}");
    assert!(ended.message().contains("\"west\""), "{}", ended.message());
    until(WAIT, || report_clusters(&admin), |r| r == &["east"]).await;
    let (lb, own, addresses) = until(
        WAIT,
        || web_status(&gateways),
        |(_, own, _)| own.as_ref().is_some_and(|(_, m)| m.contains("1 of 2")),
    )
    .await;
    assert_eq!(lb, Some(("False".into(), "north never reported".into())));
    assert_eq!(
        own.unwrap().1,
        "Aggregated the status of 1 of 2 expected clusters; north never reported"
    );
    assert_eq!(addresses, ["east/192.0.2.1"]);
    let listed = clusters(&hub).await;
    assert!(listed.iter().all(|c| c.name != "west"), "{listed:?}");
    // And it cannot come back.
    let status = refused(&hub, "west").await;
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");

    // North joins: the hub Gateway is ready again.
    let _north = reporting_agent(&hub, "north", "192.0.2.3").await;
    let (lb, _, _) = until(
        WAIT,
        || web_status(&gateways),
        |(lb, _, _)| lb.as_ref().is_some_and(|(s, _)| s == "True"),
    )
    .await;
    assert_eq!(lb.unwrap().1, "LoadBalancerReady is True in all 2 clusters");
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn observing_admits_and_flags_clusters_outside_the_inventory() {
    let Some((_fleet, _admin, as_hub)) =
        management("observing_admits_and_flags_clusters_outside_the_inventory").await
    else {
        return;
    };
    let hub = start_hub(&as_hub, Mode::Observe).await;
    let _rogue = reporting_agent(&hub, "rogue", "192.0.2.9").await;
    let listed = until(
        WAIT,
        || clusters(&hub),
        |l| l.iter().any(|c| c.name == "rogue" && c.connected),
    )
    .await;
    let rogue = listed.iter().find(|c| c.name == "rogue").unwrap();
    assert!(rogue.outside_inventory && !rogue.in_inventory, "{rogue:?}");
    let names: Vec<&str> = listed.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["east", "north", "rogue", "west"]);
    assert!(
        listed
            .iter()
            .filter(|c| c.name != "rogue")
            .all(|c| c.never_connected && c.in_inventory),
        "{listed:?}"
    );
    hub.shutdown().await.unwrap();
}

/// A slice of the placement `web` in `default`.
async fn placement_slice(admin: &Client, name: &str, clusters: &[&str]) {
    let api: Api<PlacementDecision> = Api::namespaced(admin.clone(), NS);
    apply(
        &api,
        name,
        json!({"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "PlacementDecision",
               "metadata": {"name": name, "namespace": NS,
                            "labels": {"multicluster.x-k8s.io/decision-key": "web"}},
               "decisions": clusters.iter()
                   .map(|c| json!({"clusterProfileRef": {"name": c, "namespace": FLEET_NS}}))
                   .collect::<Vec<_>>(),
               "schedulerName": "test"}),
    )
    .await;
}

/// `gwhub.io/placement: web` expects the clusters of every slice of the
/// decision `web`, and follows the scheduler.
#[tokio::test]
async fn a_placement_decision_names_the_expected_clusters() {
    let Some((_fleet, admin, as_hub)) =
        management("a_placement_decision_names_the_expected_clusters").await
    else {
        return;
    };
    placement_slice(&admin, "web-0", &["east", "west"]).await;
    placement_slice(&admin, "web-1", &["north"]).await;
    let gateways = hub_gateway_with(&admin, "gwhub.io/placement", "web").await;
    let hub = start_hub(&as_hub, Mode::Enforce).await;
    let _east = reporting_agent(&hub, "east", "192.0.2.1").await;
    let _west = reporting_agent(&hub, "west", "192.0.2.2").await;
    let (lb, own, _) = until(
        WAIT,
        || web_status(&gateways),
        |(_, own, _)| own.as_ref().is_some_and(|(_, m)| m.contains("2 of 3")),
    )
    .await;
    assert_eq!(lb, Some(("False".into(), "north never reported".into())));
    assert_eq!(
        own.unwrap().1,
        "Aggregated the status of 2 of 3 expected clusters; north never reported"
    );
    // The scheduler drops north: its slice goes.
    let api: Api<PlacementDecision> = Api::namespaced(admin.clone(), NS);
    api.delete("web-1", &DeleteParams::default()).await.unwrap();
    let (lb, _, _) = until(
        WAIT,
        || web_status(&gateways),
        |(_, own, _)| own.as_ref().is_some_and(|(_, m)| m.contains("2 of 2")),
    )
    .await;
    assert_eq!(
        lb,
        Some((
            "True".into(),
            "LoadBalancerReady is True in all 2 clusters".into()
        ))
    );
    hub.shutdown().await.unwrap();
}

/// A cluster that left while the hub was down stays gone: the restarted
/// hub deletes its stored ClusterReports at the inventory's first list and
/// never writes it onto a hub Gateway again.
#[tokio::test]
async fn a_cluster_that_left_while_the_hub_was_down_stays_gone() {
    let Some((_fleet, admin, as_hub)) =
        management("a_cluster_that_left_while_the_hub_was_down_stays_gone").await
    else {
        return;
    };
    let gateways = hub_gateway(&admin).await;
    let hub = start_hub(&as_hub, Mode::Enforce).await;
    let east = reporting_agent(&hub, "east", "192.0.2.1").await;
    let west = reporting_agent(&hub, "west", "192.0.2.2").await;
    until(WAIT, || report_clusters(&admin), |r| r == &["east", "west"]).await;
    until(WAIT, || web_status(&gateways), |(_, _, a)| a.len() == 2).await;
    drop((east, west));
    hub.shutdown().await.unwrap();

    let profiles: Api<ClusterProfile> = Api::namespaced(admin.clone(), FLEET_NS);
    profiles
        .delete("west", &DeleteParams::default())
        .await
        .unwrap();
    let hub = start_hub(&as_hub, Mode::Enforce).await;
    until(WAIT, || report_clusters(&admin), |r| r == &["east"]).await;
    let (_, own, addresses) = until(
        WAIT,
        || web_status(&gateways),
        |(_, own, _)| {
            own.as_ref()
                .is_some_and(|(_, m)| m.contains("of 2 expected"))
        },
    )
    .await;
    assert_eq!(addresses, ["east/192.0.2.1"]);
    assert_eq!(
        own.unwrap().1,
        "Aggregated the status of 1 of 2 expected clusters; north never reported"
    );
    let listed = clusters(&hub).await;
    let names: Vec<&str> = listed.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["east", "north"]);
    hub.shutdown().await.unwrap();
}

/// Two replicas agree on the inventory: each refuses a stranger, and a
/// ClusterProfile deleted ends its cluster's stream on the replica it
/// streams to, while the other (the writer, which only read its report
/// from the store) drops it from the hub Gateway.
#[tokio::test]
async fn two_replicas_agree_on_the_inventory() {
    let Some((_fleet, admin, as_hub)) = management("two_replicas_agree_on_the_inventory").await
    else {
        return;
    };
    let gateways = hub_gateway(&admin).await;
    let a = start_replica(&as_hub, Mode::Enforce, Some("a")).await;
    let mut leader = a.leader.clone();
    tokio::time::timeout(WAIT, leader.wait_for(|l| *l))
        .await
        .expect("a leads in time")
        .unwrap();
    let b = start_replica(&as_hub, Mode::Enforce, Some("b")).await;
    for hub in [&a, &b] {
        let status = refused(hub, "rogue").await;
        assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    }
    let _east = reporting_agent(&a, "east", "192.0.2.1").await;
    let mut west = reporting_agent(&b, "west", "192.0.2.2").await;
    // A writes west's report, which it read from B's store.
    until(
        WAIT,
        || web_status(&gateways),
        |(_, _, addresses)| addresses.len() == 2,
    )
    .await;

    let profiles: Api<ClusterProfile> = Api::namespaced(admin.clone(), FLEET_NS);
    profiles
        .delete("west", &DeleteParams::default())
        .await
        .unwrap();
    let ended = west.ended().await;
    assert_eq!(ended.code(), tonic::Code::PermissionDenied, "{ended:?}");
    until(WAIT, || report_clusters(&admin), |r| r == &["east"]).await;
    let (_, own, addresses) = until(
        WAIT,
        || web_status(&gateways),
        |(_, own, _)| own.as_ref().is_some_and(|(_, m)| m.contains("1 of 2")),
    )
    .await;
    assert_eq!(addresses, ["east/192.0.2.1"]);
    assert!(own.unwrap().1.ends_with("north never reported"));
    for hub in [&a, &b] {
        let names: Vec<String> = clusters(hub).await.into_iter().map(|c| c.name).collect();
        assert_eq!(names, ["east", "north"]);
    }
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
}
