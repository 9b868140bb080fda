//! A hub restarting or joined by another replica: a second replica
//! imports the store and stays passive, a restarted hub restores from the
//! store without ever showing a wrong status, and one whose store lags
//! what the ended process heard writes nothing until the fleet is back
//! (or its silent clusters are stale).

use std::time::{Duration, Instant};

use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus};
use gwhub_hub::kube_hub::KubeHub;
use gwhub_hub_rules::report::ClusterReport;
use gwhub_k8s::metrics::Metrics;
use gwhub_model::cluster::object_name;
use gwhub_model::status::same_applied_status as same_status;
use gwhub_test_kit::install::management;
use gwhub_test_kit::recorder::Recorder;
use gwhub_test_kit::wait::until;
use kube::api::Api;

use crate::support::hub_agent::{Agent, keep_alive};
use crate::support::hub_fixtures::{
    HUB_NS, NS, aggregated, away, cluster_status, create_hub_gateway, find, own, wait_listed,
    wait_status,
};
use crate::support::kube_hub::kube_hub;
use gwhub_test_kit::wait::WAIT;

/// A second replica imports the store but never writes; a restarted hub
/// restores from the store and the hub Gateway never shows a wrong status
/// on the way, though the agents come back only later.
#[tokio::test]
async fn restart_restores_without_flapping_and_a_second_replica_stays_passive() {
    let Some((_fleet, client, as_hub)) =
        management("restart_restores_without_flapping_and_a_second_replica_stays_passive").await
    else {
        return;
    };
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NS);
    create_hub_gateway(&gateways, "web").await;

    let first = kube_hub(&as_hub).identity("hub-1").start().await;
    let addr = first.hub.ingest_addr;
    let mut a = Agent::connect(addr, "cluster-a").await;
    let mut b = Agent::connect(addr, "cluster-b").await;
    a.snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    b.snapshot(&[(NS, "web", cluster_status(&["10.0.1.1"], true))])
        .await;
    let settled = wait_status(
        &gateways,
        "web",
        "aggregated over 2 clusters",
        aggregated(2),
    )
    .await;
    let settled = settled.status.unwrap();
    assert!(*first.leader.borrow());

    // A second replica: imports both clusters from the store, writes nothing.
    let second = kube_hub(&as_hub).identity("hub-2").start().await;
    let deadline = Instant::now() + WAIT;
    while second.hub.index.clusters().len() < 2 || !*second.ready.borrow() {
        assert!(
            Instant::now() < deadline,
            "second replica did not import the store"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    b.snapshot(&[(NS, "web", cluster_status(&["10.0.1.1"], false))])
        .await;
    wait_status(&gateways, "web", "Programmed False", |s| {
        find(s, "Programmed").is_some_and(|c| c.status == "False")
    })
    .await;
    b.snapshot(&[(NS, "web", cluster_status(&["10.0.1.1"], true))])
        .await;
    wait_status(&gateways, "web", "Programmed True again", |s| {
        find(s, "Programmed").is_some_and(|c| c.status == "True")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!*second.leader.borrow(), "second replica took the lease");
    assert_eq!(
        Metrics::get(&second.metrics.status_writes),
        0,
        "passive replica wrote"
    );
    assert_eq!(
        Metrics::get(&second.metrics.report_writes),
        0,
        "passive replica stored"
    );
    assert!(
        Metrics::get(&first.metrics.status_writes) >= 3,
        "the leader did not count the status writes seen above"
    );
    second.shutdown().await.unwrap();

    // Restart: the hub goes away with its agents; a new process starts with
    // nothing in memory and the agents return a while later.
    let recorder = Recorder::start(gateways.clone(), "web");
    assert!(
        recorder.wait_first(WAIT).await,
        "the recorder's watch never delivered web's status"
    );
    drop((a, b));
    first.shutdown().await.unwrap();
    let restarted = kube_hub(&as_hub).identity("hub-3").start().await;
    let deadline = Instant::now() + WAIT;
    while !*restarted.leader.borrow() || !*restarted.ready.borrow() {
        assert!(Instant::now() < deadline, "restarted hub did not lead");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        restarted.hub.index.clusters().len(),
        2,
        "restored from the store"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let addr = restarted.hub.ingest_addr;
    let mut a = Agent::connect(addr, "cluster-a").await;
    let mut b = Agent::connect(addr, "cluster-b").await;
    a.snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    b.snapshot(&[(NS, "web", cluster_status(&["10.0.1.1"], true))])
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen: Vec<GatewayStatus> = recorder.seen().into_iter().map(|s| s.status).collect();
    drop(recorder);
    assert!(!seen.is_empty(), "the recorder saw no status of web");
    for (i, s) in seen.iter().enumerate() {
        assert!(
            same_status(s, &settled),
            "status #{i} during the restart differs from the settled one:\n{s:#?}\nsettled:\n{settled:#?}"
        );
        let own = own(s).unwrap();
        assert_ne!(own.reason, "NoClusters");
        assert!(!own.message.contains("stale"));
    }
    // lastTransitionTime survived the restart too.
    let now = gateways.get("web").await.unwrap().status.unwrap();
    assert_eq!(
        own(&now).unwrap().last_transition_time,
        own(&settled).unwrap().last_transition_time
    );

    // Deleting a cluster's stored report while it is away deregisters it.
    drop(b);
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    away(&restarted, "cluster-b").await;
    reports
        .delete("cluster-b", &Default::default())
        .await
        .unwrap();
    wait_status(&gateways, "web", "aggregated over 1 cluster", |s| {
        own(s).is_some_and(|c| c.message == "Aggregated the status of 1 cluster")
    })
    .await;
    drop(a);
    restarted.shutdown().await.unwrap();
}

/// A restarted hub whose store lags what the ended process had heard
/// (west streamed to it, but its report is not in the store) writes no
/// hub Gateway status until every cluster the ended process served is
/// back: no status shows a shape the fleet never had (here: east alone),
/// while the probe is ready and ingest serves. A cluster that never
/// comes back lets it write once its last-seen is --stale-after old,
/// showing it stale.
#[tokio::test]
async fn a_restarted_hub_writes_no_status_from_a_store_that_lags() {
    let Some((_fleet, client, as_hub)) =
        management("a_restarted_hub_writes_no_status_from_a_store_that_lags").await
    else {
        return;
    };
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NS);
    create_hub_gateway(&gateways, "web").await;
    // Long enough for the steps below before the gate's bound, short
    // enough to wait out in the second part.
    let stale_after = Duration::from_secs(20);
    let start = |identity: &'static str| {
        let as_hub = as_hub.clone();
        async move {
            kube_hub(&as_hub)
                .identity(identity)
                .stale_after(stale_after)
                .start()
                .await
        }
    };
    let report = |agent: &'static str| async move {
        let ip = if agent == "east" {
            "10.0.0.1"
        } else {
            "10.0.1.1"
        };
        (NS, "web", cluster_status(&[ip], true))
    };
    let connect = |hub: &KubeHub, name: &'static str| {
        let addr = hub.hub.ingest_addr;
        async move {
            let mut agent = Agent::connect(addr, name).await;
            agent.snapshot(&[report(name).await]).await;
            let beating = keep_alive(&agent);
            (agent, beating)
        }
    };
    let awaited = |hub: &KubeHub| hub.metrics.restart_awaited_clusters.get();
    let wait_awaited = |hub: &KubeHub, n: u64| {
        let metrics = hub.metrics.clone();
        async move {
            until(
                WAIT,
                || async { metrics.restart_awaited_clusters.get() },
                |a| *a == n,
            )
            .await;
        }
    };

    let first = start("hub-1").await;
    let east = connect(&first, "east").await;
    let west = connect(&first, "west").await;
    let settled = wait_status(&gateways, "web", "aggregated over 2", aggregated(2))
        .await
        .status
        .unwrap();
    wait_listed(&client, "hub-1", &["east", "west"]).await;

    // hub-1 ends with both streaming; west's report is lost from the
    // store (as if its first write had not happened yet).
    let recorder = Recorder::start(gateways.clone(), "web");
    assert!(recorder.wait_first(WAIT).await);
    first.shutdown().await.unwrap();
    for (agent, beating) in [east, west] {
        beating.abort();
        drop(agent);
    }
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    reports
        .delete(&object_name("west"), &Default::default())
        .await
        .unwrap();

    let second = start("hub-2").await;
    // Ready (the probe) at once: agents come back through the Service.
    until(WAIT, || async { *second.ready.borrow() }, |r| *r).await;
    wait_awaited(&second, 2).await;
    assert_eq!(
        second.hub.index.clusters().len(),
        1,
        "only east restored from the store"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let east = connect(&second, "east").await;
    wait_awaited(&second, 1).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        Metrics::get(&second.metrics.status_writes),
        0,
        "wrote status while west, served by the ended process, was not back"
    );
    let west = connect(&second, "west").await;
    wait_awaited(&second, 0).await;
    wait_status(&gateways, "web", "aggregated over 2", aggregated(2)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    for (i, s) in recorder.seen().iter().enumerate() {
        assert!(
            same_status(&s.status, &settled),
            "status #{i} during the restart differs from the settled one:\n{:#?}\nsettled:\n{settled:#?}",
            s.status
        );
    }
    drop(recorder);

    // Again, and west never comes back: the gate opens once west's
    // last-seen (hub-2's last heartbeat) is --stale-after old, and the
    // status shows it stale.
    wait_listed(&client, "hub-2", &["east", "west"]).await;
    second.shutdown().await.unwrap();
    for (agent, beating) in [east, west] {
        beating.abort();
        drop(agent);
    }
    let third = start("hub-3").await;
    let _east = connect(&third, "east").await;
    wait_awaited(&third, 1).await;
    assert_eq!(Metrics::get(&third.metrics.status_writes), 0);
    wait_awaited(&third, 0).await;
    let west_stale = |s: &GatewayStatus| {
        s.conditions
            .iter()
            .flatten()
            .any(|c| c.message.contains("west status is stale"))
    };
    wait_status(&gateways, "web", "west stale", west_stale).await;
    assert_eq!(awaited(&third), 0);
    third.shutdown().await.unwrap();
}
