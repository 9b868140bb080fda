//! The Dashboard shows what the hub wrote: `GetGateway` equals the status
//! on the hub Gateway (conditions with their times, listeners, addresses,
//! observedGeneration), also when other writers' conditions push
//! aggregated ones out of the 8 slots (named in the omissions).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus};
use gwhub_k8s::metrics::Metrics;
use gwhub_proto::v1;
use gwhub_test_kit::install::management;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::support::hub_agent::Agent;
use crate::support::hub_fixtures::{
    NS, OWN, aggregated, cluster_status, cond, create_hub_gateway, find, own,
};
use crate::support::kube_hub::kube_hub;
use gwhub_test_kit::wait::WAIT;

/// A status with lists in a canonical order (conditions by type,
/// listeners by name), so two statuses compare whatever order the API
/// server merged the lists in.
fn canonical(mut s: GatewayStatus) -> GatewayStatus {
    if let Some(c) = s.conditions.as_mut() {
        c.sort_by(|a, b| a.type_.cmp(&b.type_));
    }
    if let Some(l) = s.listeners.as_mut() {
        l.sort_by(|a, b| a.name.cmp(&b.name));
        for l in l.iter_mut() {
            l.conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
        }
    }
    s
}

/// Polls until `GetGateway` for `name` and the hub Gateway's status are
/// equal (conditions with their times, listeners, addresses,
/// observedGeneration) and `pred` holds on them; returns the Dashboard's
/// Gateway.
async fn wait_dashboard_equals_written(
    dashboard: &mut v1::dashboard_client::DashboardClient<tonic::transport::Channel>,
    api: &Api<Gateway>,
    name: &str,
    pred: impl Fn(&GatewayStatus) -> bool,
) -> v1::AggregatedGateway {
    let deadline = Instant::now() + WAIT;
    loop {
        let written = canonical(api.get(name).await.unwrap().status.unwrap_or_default());
        let got = dashboard
            .get_gateway(v1::GetGatewayRequest {
                namespace: NS.into(),
                name: name.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .gateway
            .unwrap();
        let shown = canonical(
            gwhub_proto::convert::status_from_proto(got.status.clone().unwrap_or_default())
                .unwrap(),
        );
        if pred(&written) && shown == written {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: the Dashboard never showed the written status\nwritten: {written:#?}\nDashboard: {shown:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Other writers' conditions, applied by field manager `policy-controller`
/// on the status subresource (so they are its, not the hub's).
async fn apply_foreign_conditions(api: &Api<Gateway>, name: &str, types: &[String]) {
    let conditions: Vec<serde_json::Value> = types
        .iter()
        .map(|t| {
            json!({
                "type": t, "status": "True", "reason": "Attached",
                "message": format!("{t} from the policy controller"), "observedGeneration": 1,
                "lastTransitionTime": "2026-11-23T09:00:00Z"
            })
        })
        .collect();
    let patch = json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "status": {"conditions": conditions},
    });
    api.patch_status(
        name,
        &PatchParams::apply("policy-controller").force(),
        &Patch::Apply(&patch),
    )
    .await
    .unwrap();
}

/// One aggregation per hub Gateway. `GetGateway` shows exactly
/// the status the hub wrote onto the hub Gateway (conditions with their
/// times, listeners, addresses, observedGeneration 2 after a spec change),
/// also where six other writers' conditions take slots of the 8: the
/// aggregated types pushed out are named in the Dashboard's omissions and
/// in the hub's own condition; when the other writer withdraws some, they
/// come back on both.
#[tokio::test]
async fn the_dashboard_shows_what_the_hub_wrote() {
    let Some((_fleet, client, as_hub)) = management("the_dashboard_shows_what_the_hub_wrote").await
    else {
        return;
    };
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NS);
    for name in ["web", "crowded"] {
        create_hub_gateway(&gateways, name).await;
        // A spec change: generation 2, which the Dashboard must show too.
        gateways
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"listeners": [{"name": "http", "port": 8080, "protocol": "HTTP"}]}})),
            )
            .await
            .unwrap();
    }
    let foreign: Vec<String> = (0..6).map(|i| format!("example.com/Policy{i}")).collect();
    apply_foreign_conditions(&gateways, "crowded", &foreign).await;

    let hub = kube_hub(&as_hub).identity("hub-1").start().await;
    let mut dashboard = v1::dashboard_client::DashboardClient::connect(format!(
        "http://{}",
        hub.hub.dashboard_addr
    ))
    .await
    .unwrap();
    let reported = |ip: &str| {
        let mut s = cluster_status(&[ip], true);
        let conditions = s.conditions.as_mut().unwrap();
        conditions.push(cond("DNSReady", "True", "AllListenersReady", ""));
        conditions.push(cond(
            "LoadBalancerReady",
            "True",
            "LoadBalancerProvisioned",
            "",
        ));
        s
    };
    let mut east = Agent::connect(hub.hub.ingest_addr, "east").await;
    let mut west = Agent::connect(hub.hub.ingest_addr, "west").await;
    east.snapshot(&[
        (NS, "web", reported("10.0.0.1")),
        (NS, "crowded", reported("10.0.0.2")),
    ])
    .await;
    west.snapshot(&[
        (NS, "web", reported("10.0.1.1")),
        (NS, "crowded", reported("10.0.1.2")),
    ])
    .await;

    // web: every aggregated type, observedGeneration 2.
    let web = wait_dashboard_equals_written(&mut dashboard, &gateways, "web", |s| {
        aggregated(2)(s) && own(s).is_some_and(|c| c.observed_generation == Some(2))
    })
    .await;
    assert!(web.omissions.is_empty(), "{:?}", web.omissions);
    assert_eq!(web.clusters, ["east", "west"]);

    // crowded: own + 6 foreign + Accepted fill the 8; the rest is named.
    let crowded = wait_dashboard_equals_written(&mut dashboard, &gateways, "crowded", |s| {
        own(s).is_some_and(|c| c.reason == "ValidationFailed" && c.observed_generation == Some(2))
            && s.conditions.as_ref().is_some_and(|c| c.len() == 8)
    })
    .await;
    let status = canonical(
        gwhub_proto::convert::status_from_proto(crowded.status.clone().unwrap()).unwrap(),
    );
    let types: BTreeSet<&str> = status
        .conditions
        .iter()
        .flatten()
        .map(|c| c.type_.as_str())
        .collect();
    let mut want: BTreeSet<&str> = foreign.iter().map(String::as_str).collect();
    want.extend([OWN, "Accepted"]);
    assert_eq!(types, want);
    for t in &foreign {
        let c = find(&status, t).unwrap();
        assert_eq!(c.message, format!("{t} from the policy controller"));
        assert_eq!(
            c.observed_generation,
            Some(1),
            "another writer's, kept as it is"
        );
    }
    let left_out: BTreeSet<&str> = crowded
        .omissions
        .iter()
        .filter(|o| o.item == "condition" && o.rule == "too_many")
        .flat_map(|o| o.names.iter().map(String::as_str))
        .collect();
    assert_eq!(
        left_out,
        BTreeSet::from(["DNSReady", "LoadBalancerReady", "Programmed"]),
        "{:?}",
        crowded.omissions
    );
    let message = &own(&status).unwrap().message;
    for t in &left_out {
        assert!(message.contains(t), "{message}");
    }
    // ListGateways serves the same aggregation.
    let listed = dashboard
        .list_gateways(v1::ListGatewaysRequest::default())
        .await
        .unwrap()
        .into_inner()
        .gateways;
    let listed_crowded = listed.iter().find(|g| g.name == "crowded").unwrap();
    assert_eq!(listed_crowded.status, crowded.status);
    assert_eq!(listed_crowded.omissions, crowded.omissions);

    // The other writer withdraws three of its conditions: the pushed-out
    // types come back, on the hub Gateway and on the Dashboard alike.
    apply_foreign_conditions(&gateways, "crowded", &foreign[..3]).await;
    let crowded = wait_dashboard_equals_written(&mut dashboard, &gateways, "crowded", |s| {
        aggregated(2)(s) && find(s, "LoadBalancerReady").is_some()
    })
    .await;
    assert!(crowded.omissions.is_empty(), "{:?}", crowded.omissions);
    assert_eq!(
        crowded.status.unwrap().conditions.len(),
        3 + 5,
        "3 foreign, own, Accepted, Programmed, DNSReady, LoadBalancerReady"
    );
    assert_eq!(Metrics::get(&hub.metrics.status_write_errors), 0);
    hub.shutdown().await.unwrap();
}
