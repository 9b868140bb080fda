//! The hub's `ClusterReport` store: the last report before a disconnect
//! is stored, a pruned cluster's report (every part) is deleted, the
//! importer keeps importing while the writer waits for the API budget, and
//! a mass deregistration deletes every part without a LIST per cluster.

use std::time::{Duration, Instant};

use futures::StreamExt;
use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_hub_rules::report::ClusterReport;
use gwhub_model::cluster::object_name;
use gwhub_test_kit::apiserver::Fleet;
use gwhub_test_kit::install::management;
use gwhub_test_kit::wait::until;
use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::support::hub_agent::Agent;
use crate::support::hub_fixtures::{HUB_NS, NS, cluster_status, large_status, stored_report};
use crate::support::kube_hub::kube_hub;
use gwhub_test_kit::wait::WAIT;

/// A report that changes just before its agent disconnects (within the
/// store's debounce) is still stored, so a restarted hub resumes from it,
/// not from the one before.
#[tokio::test]
async fn the_last_report_before_a_disconnect_is_stored() {
    let Some((_fleet, client, as_hub)) =
        management("the_last_report_before_a_disconnect_is_stored").await
    else {
        return;
    };
    let hub = kube_hub(&as_hub).identity("hub-1").start().await;
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    let stored_with = |gateways: usize| {
        let reports = reports.clone();
        async move {
            until(
                WAIT,
                || async { reports.get_opt(&object_name("east")).await.unwrap() },
                |r| {
                    r.as_ref()
                        .is_some_and(|r| r.spec.reported_gateways().unwrap().len() == gateways)
                },
            )
            .await;
        }
    };
    let mut east = Agent::connect(hub.hub.ingest_addr, "east").await;
    east.snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    stored_with(1).await;
    // A second Gateway, acked, then the stream ends at once.
    east.snapshot(&[
        (NS, "web", cluster_status(&["10.0.0.1"], true)),
        (NS, "api", cluster_status(&["10.0.0.2"], true)),
    ])
    .await;
    drop(east);
    stored_with(2).await;
    hub.shutdown().await.unwrap();
}

/// Under --insecure, a cluster pruned for silence loses its stored report
/// too (as the hub's ServiceAccount), so a relist or restart does not
/// bring the made-up name back; a cluster stored in parts loses them all
/// (those its writer and its importer know of: no list).
#[tokio::test]
async fn a_pruned_clusters_stored_report_is_deleted() {
    let Some((fleet, client, as_hub)) =
        management("a_pruned_clusters_stored_report_is_deleted").await
    else {
        return;
    };
    let hub = kube_hub(&as_hub)
        .identity("hub-1")
        .config(|c| c.budgets.insecure_prune_after = Duration::from_secs(1))
        .start()
        .await;
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    let stored = |present: bool| {
        let reports = reports.clone();
        async move {
            until(
                WAIT,
                || async { reports.get_opt(&object_name("rogue")).await.unwrap() },
                |r| r.is_some() == present,
            )
            .await;
        }
    };
    let mut rogue = Agent::connect(hub.hub.ingest_addr, "rogue").await;
    rogue
        .snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    stored(true).await;
    drop(rogue);
    stored(false).await;

    let names: Vec<String> = (0..500).map(|i| format!("gw-{i:03}")).collect();
    let big: Vec<(&str, &str, GatewayStatus)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (NS, n.as_str(), large_status(i, 16)))
        .collect();
    let mut agent = Agent::connect(hub.hub.ingest_addr, "rogue-big").await;
    agent.snapshot_chunked(&big, 25).await;
    let names: Vec<String> = stored_report(&reports, "rogue-big", 500)
        .await
        .iter()
        .map(|r| r.name_any())
        .collect();
    assert!(names.len() > 1, "one object for 500 x 16");
    let (seen, watching) = watched_reports(reports.clone()).await;
    let before = clusterreport_lists(&fleet).await;
    drop(agent);
    until_gone(&seen, &names).await;
    watching.abort();
    // The hub knew every part: it listed none.
    assert_eq!(
        clusterreport_lists(&fleet).await - before,
        0,
        "ClusterReport LISTs"
    );
    hub.shutdown().await.unwrap();
}

/// The store's importer keeps importing while the writer waits for the API
/// budget: here a pruned cluster's delete waits (one write per 100 s, the
/// one token spent on its report) while 70 objects are deleted behind the
/// hub's back (70 entries for the writer) and another replica stores a
/// new cluster, which this hub still imports. The delete used to run
/// inline in the writer, and the importer handed entries over on a
/// 64-slot channel: the 65th blocked its watch.
#[tokio::test]
async fn the_importer_keeps_importing_while_the_writer_waits_for_the_budget() {
    let Some((_fleet, client, as_hub)) =
        management("the_importer_keeps_importing_while_the_writer_waits_for_the_budget").await
    else {
        return;
    };
    let hub = kube_hub(&as_hub)
        .identity("hub-1")
        .config(|c| c.budgets.insecure_prune_after = Duration::from_secs(1))
        .options(|o| {
            o.api_qps = 0.01;
            o.api_burst = 1;
        })
        .start()
        .await;
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    let mut rogue = Agent::connect(hub.hub.ingest_addr, "rogue").await;
    rogue
        .snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    // Its report takes the one token.
    until(
        WAIT,
        || async { reports.get_opt(&object_name("rogue")).await.unwrap() },
        Option::is_some,
    )
    .await;
    drop(rogue);
    // Pruned.
    until(
        WAIT,
        || async { hub.hub.index.cluster_record("rogue") },
        Option::is_none,
    )
    .await;
    // Heard from in an hour: not pruned while the test looks (a head
    // without a lastSeenTime would be silent since 1970).
    let last_seen = Timestamp::now()
        .checked_add(jiff::SignedDuration::from_hours(1))
        .unwrap()
        .to_string();
    let object = |cluster: &str, part: u32| -> ClusterReport {
        serde_json::from_value(json!({
            "apiVersion": "gwhub.io/v1alpha1", "kind": "ClusterReport",
            "metadata": {
                "name": gwhub_hub_rules::layout::part_name(cluster, part),
                "labels": {"gwhub.io/cluster": cluster, "gwhub.io/part": part.to_string()},
            },
            "spec": {"cluster": cluster, "part": part, "parts": 2, "gatewayCount": 0,
                "gateways": [], "lastReportTime": Timestamp::now().to_string(),
                "lastSeenTime": last_seen},
        }))
        .unwrap()
    };
    for part in 1..=70 {
        let o = object("ghost", part);
        reports.create(&PostParams::default(), &o).await.unwrap();
        reports
            .delete(&o.name_any(), &Default::default())
            .await
            .unwrap();
    }
    reports
        .create(&PostParams::default(), &object("other", 0))
        .await
        .unwrap();
    // Another replica's report, imported.
    until(
        WAIT,
        || async { hub.hub.index.cluster_record("other") },
        Option::is_some,
    )
    .await;
    hub.shutdown().await.unwrap();
}

/// ClusterReport LISTs the API server has answered so far (its
/// `apiserver_request_total`, read with kubectl; awaited, so the hub in
/// this process keeps running meanwhile).
async fn clusterreport_lists(fleet: &Fleet) -> u64 {
    let out = tokio::process::Command::new(gwhub_test_kit::install::kubectl())
        .arg("--kubeconfig")
        .arg(&fleet.cluster("mgmt").kubeconfig)
        .args(["get", "--raw", "/metrics"])
        .output()
        .await
        .expect("kubectl runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_request_total{")
                && l.contains("resource=\"clusterreports\"")
                && l.contains("verb=\"LIST\"")
                // Not a GET of a missing object (the server counts it as a
                // LIST answered 404).
                && l.contains("code=\"200\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// The ClusterReports as a watch sees them: listed once (before this
/// returns), then watched, so waiting on it asks the API server nothing
/// (this API server counts a GET of a ClusterReport as a LIST).
async fn watched_reports(
    api: Api<ClusterReport>,
) -> (
    kube::runtime::reflector::Store<ClusterReport>,
    tokio::task::JoinHandle<()>,
) {
    use kube::runtime::{reflector, watcher};
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher::watcher(api, watcher::Config::default()));
    let task = tokio::spawn(stream.for_each(|_| async {}));
    reader.wait_until_ready().await.unwrap();
    (reader, task)
}

/// Waits until none of `names` is stored, as `seen` watches them.
async fn until_gone(seen: &kube::runtime::reflector::Store<ClusterReport>, names: &[String]) {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = seen
            .state()
            .iter()
            .filter(|r| names.contains(&r.name_any()))
            .count();
        if left == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{left} of {} objects left",
            names.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An admin deleting many clusters' heads at once (a mass
/// deregistration): the hub deletes every part of theirs as its importer
/// last saw it, without a LIST per cluster (it used to list each
/// cluster's objects by label, on every replica).
#[tokio::test]
async fn a_mass_deregistration_deletes_every_part_without_listing() {
    let Some((fleet, client, as_hub)) =
        management("a_mass_deregistration_deletes_every_part_without_listing").await
    else {
        return;
    };
    let hub = kube_hub(&as_hub).identity("hub-1").start().await;
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    let part_name = gwhub_hub_rules::layout::part_name;
    let object = |cluster: &str, part: u32| -> ClusterReport {
        serde_json::from_value(json!({
            "apiVersion": "gwhub.io/v1alpha1", "kind": "ClusterReport",
            "metadata": {
                "name": part_name(cluster, part),
                "labels": {"gwhub.io/cluster": cluster, "gwhub.io/part": part.to_string()},
            },
            "spec": {"cluster": cluster, "part": part, "parts": 3, "gatewayCount": 0,
                "gateways": [], "lastReportTime": Timestamp::now().to_string(),
                // Not silent: not pruned (--insecure-prune-after 10m).
                "lastSeenTime": Timestamp::now().to_string()},
        }))
        .unwrap()
    };
    let clusters: Vec<String> = (0..10).map(|i| format!("gone-{i}")).collect();
    for c in &clusters {
        for part in [1, 2, 0] {
            reports
                .create(&PostParams::default(), &object(c, part))
                .await
                .unwrap();
        }
    }
    // Every cluster imported: none left to wait for.
    until(
        WAIT,
        || async {
            clusters
                .iter()
                .filter(|c| hub.hub.index.cluster_record(c).is_none())
                .cloned()
                .collect::<Vec<_>>()
        },
        Vec::is_empty,
    )
    .await;
    let parts: Vec<String> = clusters
        .iter()
        .flat_map(|c| [part_name(c, 1), part_name(c, 2)])
        .collect();
    let (seen, watching) = watched_reports(reports.clone()).await;
    let before = clusterreport_lists(&fleet).await;
    for c in &clusters {
        reports.delete(c, &Default::default()).await.unwrap();
    }
    until_gone(&seen, &parts).await;
    assert!(
        clusters
            .iter()
            .all(|c| hub.hub.index.cluster_record(c).is_none()),
        "deregistered"
    );
    // One at most (the importer's watch may relist).
    let lists = clusterreport_lists(&fleet).await - before;
    watching.abort();
    assert!(
        lists <= 1,
        "{lists} ClusterReport LISTs for {} deregistered clusters",
        clusters.len()
    );
    hub.shutdown().await.unwrap();
}
