//! The hub's status writer against a real kube-apiserver: the aggregate
//! lands on the hub Gateways as the CRD accepts it (other writers'
//! conditions kept, invalid input left out and reported), withdrawn
//! addresses and listeners leave the Gateway, and an API budget coalesces
//! a burst into a few writes of the latest state.

use std::time::{Duration, Instant};

use gateway_api::apis::standard::gateways::Gateway;
use gwhub_hub_rules::report::ClusterReport;
use gwhub_k8s::metrics::Metrics;
use gwhub_model::cluster::object_name;
use gwhub_test_kit::install::management;
use gwhub_test_kit::wait::{settled, until};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::support::hub_agent::Agent;
use crate::support::hub_fixtures::{
    HUB_NS, NS, cluster_status, create_hub_gateway, find, own, wait_status,
};
use crate::support::kube_hub::kube_hub;
use gwhub_test_kit::wait::WAIT;

/// The aggregate lands on the hub Gateways: accepted by the API server,
/// with other writers' conditions kept, invalid names and more than 16
/// addresses left out and reported, Gateways no cluster reports marked
/// NoClusters; reports stored as ClusterReports; unchanged input writes
/// nothing; a generation bump is observed.
#[tokio::test]
async fn hub_writes_the_aggregate_onto_hub_gateways() {
    let Some((_fleet, client, as_hub)) =
        management("hub_writes_the_aggregate_onto_hub_gateways").await
    else {
        return;
    };
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NS);
    for name in ["web", "many", "lonely"] {
        create_hub_gateway(&gateways, name).await;
    }
    // Another writer's condition, there before the hub starts.
    let foreign = json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "status": {"conditions": [{
            "type": "example.com/PolicyAffected", "status": "True", "reason": "Attached",
            "message": "a policy targets this Gateway", "observedGeneration": 1,
            "lastTransitionTime": "2026-11-23T09:00:00Z"
        }]}
    });
    gateways
        .patch_status(
            "web",
            &PatchParams::apply("policy-controller"),
            &Patch::Apply(&foreign),
        )
        .await
        .unwrap();

    // lonely may be a real Gateway: its controller's addresses and listener.
    let real = json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "status": {
            "addresses": [{"type": "IPAddress", "value": "192.0.2.7"}],
            "listeners": [{"name": "http", "attachedRoutes": 0, "supportedKinds": [], "conditions": []}],
        }
    });
    gateways
        .patch_status("lonely", &PatchParams::apply("istio"), &Patch::Apply(&real))
        .await
        .unwrap();

    let hub = kube_hub(&as_hub).identity("hub-1").start().await;
    let addr = hub.hub.ingest_addr;
    let mut a = Agent::connect(addr, "cluster-a").await;
    let mut b = Agent::connect(addr, "cluster_1").await;
    let many_ips: Vec<Vec<String>> = (0..3)
        .map(|c| (0..6).map(|i| format!("10.{c}.0.{i}")).collect())
        .collect();
    let ips = |c: usize| many_ips[c].iter().map(String::as_str).collect::<Vec<_>>();
    a.snapshot(&[
        (NS, "web", cluster_status(&["10.0.0.1"], true)),
        (NS, "many", cluster_status(&ips(0), true)),
    ])
    .await;
    b.snapshot(&[
        (NS, "web", cluster_status(&["10.0.1.1"], true)),
        (NS, "many", cluster_status(&ips(1), true)),
    ])
    .await;
    let mut c = Agent::connect(addr, "cluster-c").await;
    c.snapshot(&[(NS, "many", cluster_status(&ips(2), true))])
        .await;

    // web: cluster_1's listener cannot be written -> ValidationFailed, yet
    // the status is accepted and Accepted/Programmed are aggregated.
    let web = wait_status(&gateways, "web", "ValidationFailed naming cluster_1", |s| {
        own(s).is_some_and(|c| c.reason == "ValidationFailed" && c.message.contains("cluster_1"))
            && find(s, "Accepted").is_some_and(|c| c.reason == "TrueInAllClusters")
    })
    .await;
    let st = web.status.clone().unwrap();
    let values: Vec<&str> = st
        .addresses
        .iter()
        .flatten()
        .map(|a| a.value.as_str())
        .collect();
    assert_eq!(values, ["cluster-a/10.0.0.1", "cluster_1/10.0.1.1"]);
    let listeners: Vec<&str> = st
        .listeners
        .iter()
        .flatten()
        .map(|l| l.name.as_str())
        .collect();
    assert_eq!(listeners, ["cluster-a.http"]);
    let policy = find(&st, "example.com/PolicyAffected").expect("foreign condition kept");
    assert_eq!(policy.message, "a policy targets this Gateway");
    assert_eq!(find(&st, "Programmed").unwrap().status, "True");
    for cond in st
        .conditions
        .iter()
        .flatten()
        .filter(|c| c.type_ != "example.com/PolicyAffected")
    {
        assert_eq!(
            cond.observed_generation, web.metadata.generation,
            "{cond:?}"
        );
    }
    // The foreign condition still belongs to its writer.
    let owners: Vec<String> = web
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.fields_v1
                .as_ref()
                .is_some_and(|f| f.0.to_string().contains("example.com/PolicyAffected"))
        })
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(owners, ["policy-controller"]);

    // many: 18 addresses reported, 16 written, round-robin over clusters.
    let many = wait_status(
        &gateways,
        "many",
        "16 addresses and ValidationFailed",
        |s| {
            own(s).is_some_and(|c| c.reason == "ValidationFailed")
                && s.addresses.as_ref().is_some_and(|a| a.len() == 16)
        },
    )
    .await;
    let st = many.status.unwrap();
    let per_cluster = |p: &str| {
        st.addresses
            .iter()
            .flatten()
            .filter(|a| a.value.starts_with(p))
            .count()
    };
    assert!(per_cluster("cluster-a/") >= 5 && per_cluster("cluster-c/") >= 5);
    assert!(own(&st).unwrap().message.contains("16"), "{:?}", own(&st));

    // lonely: no cluster reports it. The hub says so and leaves its
    // controller's addresses and listeners alone.
    let lonely = wait_status(&gateways, "lonely", "NoClusters", |s| {
        own(s).is_some_and(|c| c.reason == "NoClusters" && c.status == "False")
    })
    .await
    .status
    .unwrap_or_default();
    let values: Vec<&str> = lonely
        .addresses
        .iter()
        .flatten()
        .map(|a| a.value.as_str())
        .collect();
    assert_eq!(values, ["192.0.2.7"], "{lonely:?}");
    let names: Vec<&str> = lonely
        .listeners
        .iter()
        .flatten()
        .map(|l| l.name.as_str())
        .collect();
    assert_eq!(names, ["http"], "{lonely:?}");

    // The store: one ClusterReport per cluster, object names valid.
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    let stored = until(
        WAIT,
        || async { reports.list(&Default::default()).await.unwrap().items },
        |items| items.len() == 3,
    )
    .await;
    let mut clusters: Vec<(String, String, u32)> = stored
        .iter()
        .map(|r| (r.name_any(), r.spec.cluster.clone(), r.spec.gateway_count))
        .collect();
    clusters.sort();
    assert_eq!(
        clusters[0],
        (object_name("cluster_1"), "cluster_1".to_owned(), 2)
    );
    assert!(clusters[0].0.starts_with("cluster-1-"), "{clusters:?}");
    assert_eq!(
        clusters[1],
        ("cluster-a".to_owned(), "cluster-a".to_owned(), 2)
    );
    assert_eq!(
        clusters[2],
        ("cluster-c".to_owned(), "cluster-c".to_owned(), 1)
    );
    assert!(stored.iter().all(|r| r.spec.last_report_time.is_some()));

    // Same input again: no write to the Gateway, no write to the store
    // (counted from when the writes of the input before have landed).
    let (rv, writes, report_writes) = settled(
        "web's status and the hub's write counters",
        Duration::from_secs(1),
        WAIT,
        || async {
            (
                gateways.get("web").await.unwrap().resource_version(),
                Metrics::get(&hub.metrics.status_writes),
                Metrics::get(&hub.metrics.report_writes),
            )
        },
    )
    .await;
    a.snapshot(&[
        (NS, "web", cluster_status(&["10.0.0.1"], true)),
        (NS, "many", cluster_status(&ips(0), true)),
    ])
    .await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        gateways.get("web").await.unwrap().resource_version(),
        rv,
        "the same snapshot again wrote the hub Gateway"
    );
    assert_eq!(
        Metrics::get(&hub.metrics.status_writes),
        writes,
        "the same snapshot again counted a status write"
    );
    assert_eq!(
        Metrics::get(&hub.metrics.report_writes),
        report_writes,
        "the same snapshot again wrote the store"
    );

    // A change on a cluster reaches the hub Gateway.
    a.snapshot(&[
        (NS, "web", cluster_status(&["10.0.0.1"], false)),
        (NS, "many", cluster_status(&ips(0), true)),
    ])
    .await;
    wait_status(&gateways, "web", "Programmed False naming cluster-a", |s| {
        find(s, "Programmed")
            .is_some_and(|c| c.status == "False" && c.message.contains("cluster-a Address pending"))
    })
    .await;

    // A spec change bumps the generation; the hub observes it.
    gateways
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"listeners": [{"name": "http", "port": 8080, "protocol": "HTTP"}]}})),
        )
        .await
        .unwrap();
    let web = wait_status(&gateways, "web", "observedGeneration 2", |s| {
        own(s).is_some_and(|c| c.observed_generation == Some(2))
    })
    .await;
    assert!(find(web.status.as_ref().unwrap(), "example.com/PolicyAffected").is_some());
    assert_eq!(Metrics::get(&hub.metrics.status_write_errors), 0);
    hub.shutdown().await.unwrap();
}

/// When its clusters withdraw every address and listener (the conditions
/// staying the same), or stop reporting the Gateway, the hub Gateway drops
/// what the hub wrote, and no write is refused on the way (an empty
/// listener list left by server-side apply is null, which the CRD refuses).
#[tokio::test]
async fn withdrawn_addresses_and_listeners_leave_the_hub_gateway() {
    let Some((_fleet, client, as_hub)) =
        management("withdrawn_addresses_and_listeners_leave_the_hub_gateway").await
    else {
        return;
    };
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NS);
    create_hub_gateway(&gateways, "web").await;
    let hub = kube_hub(&as_hub).identity("hub-1").start().await;
    let mut east = Agent::connect(hub.hub.ingest_addr, "east").await;
    east.snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    wait_status(&gateways, "web", "east's address and listener", |s| {
        s.addresses.as_ref().is_some_and(|a| a.len() == 1)
            && s.listeners.as_ref().is_some_and(|l| l.len() == 1)
    })
    .await;

    let mut bare = cluster_status(&[], true);
    bare.listeners = None;
    east.snapshot(&[(NS, "web", bare)]).await;
    let web = wait_status(&gateways, "web", "no addresses or listeners", |s| {
        s.addresses.as_deref().unwrap_or_default().is_empty()
            && s.listeners.as_deref().unwrap_or_default().is_empty()
    })
    .await;
    assert!(own(web.status.as_ref().unwrap()).is_some_and(|c| c.reason == "Aggregated"));

    // Reported again, then no longer at all: NoClusters, nothing of east's left.
    east.snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    wait_status(&gateways, "web", "east's listener again", |s| {
        s.listeners.as_ref().is_some_and(|l| l.len() == 1)
    })
    .await;
    east.snapshot(&[]).await;
    wait_status(&gateways, "web", "NoClusters without listeners", |s| {
        own(s).is_some_and(|c| c.reason == "NoClusters")
            && s.addresses.as_deref().unwrap_or_default().is_empty()
            && s.listeners.as_deref().unwrap_or_default().is_empty()
    })
    .await;
    assert_eq!(Metrics::get(&hub.metrics.status_write_errors), 0);
    hub.shutdown().await.unwrap();
}

/// `--kube-api-qps`: with a budget of one write a second (shared by the
/// status writer and the store), a burst of 20 changes is written as a few
/// writes that carry the latest state; nothing is lost.
#[tokio::test]
async fn a_write_budget_coalesces_writes_to_the_latest_state() {
    let Some((_fleet, client, as_hub)) =
        management("a_write_budget_coalesces_writes_to_the_latest_state").await
    else {
        return;
    };
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NS);
    create_hub_gateway(&gateways, "web").await;
    let hub = kube_hub(&as_hub)
        .identity("hub-1")
        .options(|o| {
            o.api_qps = 1.0;
            o.api_burst = 1;
        })
        .start()
        .await;
    let mut a = Agent::connect(hub.hub.ingest_addr, "cluster-a").await;
    a.snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    wait_status(&gateways, "web", "aggregated over 1 cluster", |s| {
        own(s).is_some_and(|c| c.message == "Aggregated the status of 1 cluster")
    })
    .await;
    let before = Metrics::get(&hub.metrics.status_writes);
    let ips: Vec<String> = (0..20).map(|i| format!("10.0.1.{i}")).collect();
    for (i, ip) in ips.iter().enumerate() {
        a.snapshot(&[(NS, "web", cluster_status(&[ip.as_str()], i % 2 == 0))])
            .await;
    }
    // The last change: address 10.0.1.19, Programmed False.
    wait_status(&gateways, "web", "the last change", |s| {
        s.addresses
            .iter()
            .flatten()
            .any(|a| a.value == "cluster-a/10.0.1.19")
            && find(s, "Programmed").is_some_and(|c| c.status == "False")
    })
    .await;
    let writes = Metrics::get(&hub.metrics.status_writes) - before;
    assert!(writes < 20, "{writes} status writes for 20 changes");
    assert!(Metrics::get(&hub.metrics.api_throttled_waits) > 0);
    assert_eq!(Metrics::get(&hub.metrics.status_write_errors), 0);
    // The store holds the last report too.
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    let deadline = Instant::now() + WAIT;
    loop {
        let r = reports.get(&object_name("cluster-a")).await.unwrap();
        let stored = r
            .spec
            .reported_gateways()
            .unwrap()
            .first()
            .and_then(|g| g.status.addresses.clone());
        if stored.is_some_and(|a| a.iter().any(|a| a.value == "10.0.1.19")) {
            break;
        }
        assert!(Instant::now() < deadline, "the last report never stored");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(a);
    hub.shutdown().await.unwrap();
}
