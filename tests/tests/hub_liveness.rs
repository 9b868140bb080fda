//! Cluster liveness in Kubernetes mode: stale and fresh clusters get
//! Events on their `ClusterReport`, and liveness lives in one record per
//! replica (with its heartbeat Lease), not in the reports, so a connected
//! cluster's report is not rewritten while nothing changes and a restart
//! keeps each cluster's freshness.

use std::time::Duration;

use gwhub_hub::kube_hub::KubeHub;
use gwhub_hub_rules::report::ClusterReport;
use gwhub_k8s::metrics::Metrics;
use gwhub_model::cluster::object_name;
use gwhub_test_kit::install::management;
use gwhub_test_kit::wait::until;
use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::Api;

use crate::support::hub_agent::{Agent, keep_alive};
use crate::support::hub_fixtures::{HUB_NS, NS, cluster_status, create_hub_gateway};
use crate::support::kube_hub::kube_hub;
use gwhub_test_kit::wait::WAIT;

/// A cluster that goes silent gets a `ClusterStale` Warning Event on its
/// `ClusterReport` (with the report's uid, so `kubectl describe
/// clusterreport` lists it), and a `ClusterFresh` Event when it reports
/// again; one Event per transition, not one per sweep.
#[tokio::test]
async fn stale_and_fresh_clusters_get_events_on_their_cluster_report() {
    let Some((_fleet, client, as_hub)) =
        management("stale_and_fresh_clusters_get_events_on_their_cluster_report").await
    else {
        return;
    };
    create_hub_gateway(&Api::namespaced(client.clone(), NS), "web").await;
    let stale_after = Duration::from_secs(2);
    let hub = kube_hub(&as_hub)
        .identity("hub-1")
        .stale_after(stale_after)
        .start()
        .await;
    let mut east = Agent::connect(hub.hub.ingest_addr, "east").await;
    east.snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    let uid = until(
        WAIT,
        || async { reports.get_opt(&object_name("east")).await.unwrap() },
        Option::is_some,
    )
    .await
    .and_then(|r| r.uid())
    .expect("a stored object has a uid");

    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), HUB_NS);
    let about_east = |reason: &'static str| {
        let events = events.clone();
        let uid = uid.clone();
        async move {
            let list = events.list(&Default::default()).await.unwrap();
            list.items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some(reason))
                .filter(|e| {
                    e.regarding.as_ref().is_some_and(|r| {
                        r.kind.as_deref() == Some("ClusterReport")
                            && r.name.as_deref() == Some("east")
                            && r.uid.as_deref() == Some(uid.as_str())
                    })
                })
                .collect::<Vec<_>>()
        }
    };
    let wait_for = |reason: &'static str| async move {
        until(WAIT, || about_east(reason), |found| !found.is_empty()).await
    };

    // Silent (the stream closes; no heartbeats): stale after 2 s.
    drop(east);
    let stale = wait_for("ClusterStale").await;
    let note = stale[0].note.clone().unwrap_or_default();
    assert!(
        note.starts_with("cluster east sent nothing since "),
        "{note}"
    );
    assert!(note.contains("(--stale-after 2s)"), "{note}");
    assert_eq!(stale[0].type_.as_deref(), Some("Warning"));
    assert!(about_east("ClusterFresh").await.is_empty());
    // Many sweeps later, still one Event for the one transition.
    tokio::time::sleep(stale_after).await;
    let stale = about_east("ClusterStale").await;
    assert_eq!(
        stale.len(),
        1,
        "a later sweep published another ClusterStale Event: {stale:?}"
    );
    assert_eq!(stale[0].deprecated_count.unwrap_or(1), 1, "{stale:?}");

    let _east = Agent::connect(hub.hub.ingest_addr, "east").await;
    let fresh = wait_for("ClusterFresh").await;
    assert_eq!(fresh[0].type_.as_deref(), Some("Normal"));
    // The Event is on the API server before the hub has its answer and
    // counts it.
    // gwhub_events_published_total
    until(
        WAIT,
        || async { Metrics::get(&hub.metrics.events_published) },
        |n| *n >= 2,
    )
    .await;
    hub.shutdown().await.unwrap();
}

/// Whether the index of `hub` holds `cluster` as stale (`None`: unknown).
fn stale_in(hub: &KubeHub, cluster: &str) -> Option<bool> {
    hub.hub
        .index
        .clusters()
        .into_iter()
        .find(|c| c.name == cluster)
        .map(|c| c.stale)
}

/// Liveness lives in one record per replica, not in the ClusterReports: a
/// connected cluster's report is not rewritten while nothing changes (its
/// resourceVersion stays over several --stale-after periods), the
/// replica's record lists it and its heartbeat Lease is renewed, and
/// another replica keeps it fresh from them. Once its stream ends, its
/// report gets its last-seen (once) and it goes stale on both replicas.
/// A restart keeps the right freshness: a cluster the ended process served
/// until just now is fresh (its report alone is older than --stale-after),
/// one silent for longer is stale, and the first goes stale in time. An
/// ended replica's record is deleted once nothing depends on it.
#[tokio::test]
async fn liveness_lives_in_one_record_per_replica_not_in_the_reports() {
    use gwhub_hub_rules::liveness::{self, CLUSTERS_KEY, LABEL, REPLICA_KEY};
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ListParams;
    let Some((_fleet, client, as_hub)) =
        management("liveness_lives_in_one_record_per_replica_not_in_the_reports").await
    else {
        return;
    };
    create_hub_gateway(&Api::namespaced(client.clone(), NS), "web").await;
    let stale_after = Duration::from_secs(3);
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
    let a = start("hub-a").await;
    let mut east = Agent::connect(a.hub.ingest_addr, "east").await;
    let mut west = Agent::connect(a.hub.ingest_addr, "west").await;
    east.snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    west.snapshot(&[(NS, "web", cluster_status(&["10.0.1.1"], true))])
        .await;
    let east_alive = keep_alive(&east);
    let west_alive = keep_alive(&west);
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    let stored = |name: &'static str| {
        let reports = reports.clone();
        async move {
            until(
                WAIT,
                || async { reports.get_opt(&object_name(name)).await.unwrap() },
                Option::is_some,
            )
            .await
            .expect("stored")
        }
    };
    stored("east").await;
    stored("west").await;
    // The writes of the connect settle (debounce, rewrite interval).
    tokio::time::sleep(Duration::from_secs(4)).await;
    let before = stored("east").await;

    // A second replica imports both and keeps them fresh from hub-a's
    // heartbeat and record, though their reports stay as written.
    let b = start("hub-b").await;
    until(WAIT, || async { *b.ready.borrow() }, |r| *r).await;
    for _ in 0..3 {
        tokio::time::sleep(stale_after).await;
        assert_eq!(stale_in(&b, "east"), Some(false), "east stale on hub-b");
        assert_eq!(stale_in(&b, "west"), Some(false), "west stale on hub-b");
    }
    let after = stored("east").await;
    assert_eq!(
        after.resource_version(),
        before.resource_version(),
        "a connected cluster's report was rewritten though nothing changed"
    );

    // hub-a's record lists both (one per process: its identity and start
    // time); its heartbeat Lease is renewed.
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), HUB_NS);
    let labelled = ListParams::default().labels(&format!("{LABEL}=replica"));
    let records = configmaps.list(&labelled).await.unwrap().items;
    assert_eq!(records.len(), 2, "one record per replica");
    let record = records
        .into_iter()
        .find(|r| r.data.as_ref().unwrap()[REPLICA_KEY].starts_with("hub-a@"))
        .expect("hub-a's liveness record");
    let holder = record.data.as_ref().unwrap()[REPLICA_KEY].clone();
    assert_eq!(record.name_any(), liveness::object_name(&holder, 0));
    let (served, bad) = liveness::decode(&record.data.unwrap()[CLUSTERS_KEY]);
    assert_eq!(bad, 0);
    assert_eq!(
        served.keys().cloned().collect::<Vec<_>>(),
        vec!["east".to_string(), "west".to_string()]
    );
    let leases: Api<Lease> = Api::namespaced(client.clone(), HUB_NS);
    let lease = leases
        .get(&liveness::object_name(&holder, 0))
        .await
        .expect("hub-a's heartbeat");
    assert!(lease.labels().contains_key(LABEL));
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(holder.as_str()));
    let renewed = spec.renew_time.unwrap().0;
    assert!(
        Timestamp::now().duration_since(renewed).as_secs_f64() < stale_after.as_secs_f64(),
        "hub-a's heartbeat is old: {renewed}"
    );

    // east's stream ends: its report gets its last-seen, once; it goes
    // stale on both replicas.
    let seen_before = before.spec.last_seen_time.clone();
    east_alive.abort();
    drop(east);
    let farewell = until(
        WAIT,
        || async { reports.get_opt(&object_name("east")).await.unwrap() },
        |r| {
            r.as_ref()
                .is_some_and(|r| r.spec.last_seen_time != seen_before)
        },
    )
    .await
    .expect("east's last-seen stored at its disconnect");
    until(
        WAIT,
        || async { stale_in(&a, "east") },
        |s| *s == Some(true),
    )
    .await;
    until(
        WAIT,
        || async { stale_in(&b, "east") },
        |s| *s == Some(true),
    )
    .await;
    tokio::time::sleep(stale_after).await;
    assert_eq!(
        stored("east").await.resource_version(),
        farewell.resource_version(),
        "east's report was rewritten after its last-seen"
    );
    assert_eq!(
        stale_in(&b, "west"),
        Some(false),
        "west, still served by hub-a, went stale on hub-b"
    );

    // Restart: both replicas end (west's agent with them); a new process
    // starts at once. west was served until just now (hub-a's last
    // heartbeat), east has been silent for longer than --stale-after.
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
    west_alive.abort();
    drop(west);
    let c = start("hub-c").await;
    until(WAIT, || async { *c.ready.borrow() }, |r| *r).await;
    assert_eq!(stale_in(&c, "east"), Some(true), "east fresh after restart");
    assert_eq!(
        stale_in(&c, "west"),
        Some(false),
        "west stale after restart"
    );
    // Nobody serves west any more: stale in time.
    until(
        WAIT,
        || async { stale_in(&c, "west") },
        |s| *s == Some(true),
    )
    .await;

    // Ended replicas' records go once nothing depends on them: hub-b's
    // (it served nobody) soon; hub-a's only once west is seen later
    // elsewhere (it is the only word on west's last-seen until then).
    let holders = || async {
        let list = configmaps.list(&labelled).await.unwrap().items;
        let mut ids: Vec<String> = list
            .into_iter()
            .map(|r| r.data.unwrap()[REPLICA_KEY].clone())
            .map(|id| id.split('@').next().unwrap().to_owned())
            .collect();
        ids.sort();
        ids
    };
    let kept = until(WAIT, holders, |ids| !ids.contains(&"hub-b".to_string())).await;
    assert_eq!(kept, vec!["hub-a".to_string(), "hub-c".to_string()]);
    let west = Agent::connect(c.hub.ingest_addr, "west").await;
    let _west_alive = keep_alive(&west);
    until(
        WAIT,
        || async { stale_in(&c, "west") },
        |s| *s == Some(false),
    )
    .await;
    let kept = until(WAIT, holders, |ids| ids == &["hub-c".to_string()]).await;
    assert_eq!(kept, vec!["hub-c".to_string()]);
    let lease_holders: Vec<String> = leases
        .list(&labelled)
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|l| l.spec?.holder_identity)
        .collect();
    assert_eq!(lease_holders.len(), 1, "{lease_holders:?}");
    assert!(lease_holders[0].starts_with("hub-c@"));
    c.shutdown().await.unwrap();
}
