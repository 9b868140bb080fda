//! How the store lays reports out in `ClusterReport` objects: a cluster
//! too large for one object is stored in parts (written again when lost,
//! reassembled exactly, shrunk when no longer needed), a store in the
//! earlier format is imported and rewritten, a bad object is skipped, and
//! an older `ClusterReport` CRD fails writes instead of storing nothing.

use std::time::{Duration, Instant};

use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_hub_rules::report::ClusterReport;
use gwhub_k8s::metrics::Metrics;
use gwhub_model::cluster::object_name;
use gwhub_model::status::same_applied_status as same_status;
use gwhub_test_kit::install::management;
use gwhub_test_kit::wait::{until, until_named};
use jiff::Timestamp;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::support::hub_agent::Agent;
use crate::support::hub_fixtures::{HUB_NS, NS, away, cluster_status, large_status, stored_report};
use crate::support::kube_hub::kube_hub;
use gwhub_test_kit::wait::WAIT;

/// A cluster of 500 Gateways x 16 listeners (far over one
/// object's ~1.5 MiB) is stored over several ClusterReports, each within
/// the limit; a part lost while the cluster was away is written again when
/// it reconnects; a new hub reassembles it exactly; when the cluster
/// shrinks, the parts no longer needed are deleted.
#[tokio::test]
async fn a_cluster_of_500_gateways_x_16_listeners_is_stored_in_parts() {
    let Some((_fleet, client, as_hub)) =
        management("a_cluster_of_500_gateways_x_16_listeners_is_stored_in_parts").await
    else {
        return;
    };
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    let first = kube_hub(&as_hub).identity("hub-1").start().await;
    let names: Vec<String> = (0..500).map(|i| format!("gw-{i:03}")).collect();
    let big: Vec<(&str, &str, GatewayStatus)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (NS, n.as_str(), large_status(i, 16)))
        .collect();
    let mut agent = Agent::connect(first.hub.ingest_addr, "big").await;
    agent.snapshot_chunked(&big, 25).await;
    let stored = stored_report(&reports, "big", 500).await;
    assert!(stored.len() > 1, "one object for 500 x 16");
    let mut bytes = 0;
    for r in &stored {
        let n = serde_json::to_vec(r).unwrap().len();
        assert!(n < 1024 * 1024, "{}: {n} bytes", r.name_any());
        assert_eq!(
            r.name_any(),
            gwhub_hub_rules::layout::part_name("big", r.spec.part)
        );
        assert_eq!(
            r.labels().get("gwhub.io/cluster").map(String::as_str),
            Some("big")
        );
        bytes += n;
    }
    println!(
        "500 x 16 listeners: {} objects, {bytes} bytes, {} bytes per (cluster, Gateway)",
        stored.len(),
        bytes / 500
    );
    let want = first.hub.index.cluster_record("big").unwrap().gateways;
    assert_eq!(want.len(), 500);
    assert_eq!(Metrics::get(&first.metrics.report_write_errors), 0);

    // A part deleted behind the hub's back (or rewritten by another replica
    // the cluster streamed to meanwhile) is written again once the cluster
    // streams here anew: a new stream trusts nothing written for the old.
    drop(agent);
    let delete_part_1 = || {
        let reports = reports.clone();
        async move {
            reports
                .delete(
                    &gwhub_hub_rules::layout::part_name("big", 1),
                    &Default::default(),
                )
                .await
                .unwrap();
        }
    };
    delete_part_1().await;
    let mut agent = Agent::connect(first.hub.ingest_addr, "big").await;
    agent.snapshot_chunked(&big, 25).await;
    let stored = stored_report(&reports, "big", 500).await;
    assert!(
        stored.iter().any(|r| r.spec.part == 1),
        "part 1 never written again"
    );
    drop(agent);
    first.shutdown().await.unwrap();

    // A new hub reassembles the cluster from the parts.
    let second = kube_hub(&as_hub).identity("hub-2").start().await;
    let deadline = Instant::now() + WAIT;
    while !*second.ready.borrow() {
        assert!(Instant::now() < deadline, "second hub never ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let restored = second.hub.index.cluster_record("big").expect("restored");
    assert!(restored.gateways == want, "restored report differs");

    // A part deleted while the cluster streams here is written again
    // (the importer sees the Delete), without a change or a reconnect.
    let mut agent = Agent::connect(second.hub.ingest_addr, "big").await;
    agent.snapshot_chunked(&big, 25).await;
    let stored = stored_report(&reports, "big", 500).await;
    let parts = stored.len();
    delete_part_1().await;
    let stored = stored_report(&reports, "big", 500).await;
    assert_eq!(stored.len(), parts);

    // The cluster shrinks: one object again, the other parts deleted.
    agent.snapshot(&big[..3]).await;
    let stored = stored_report(&reports, "big", 3).await;
    assert_eq!(stored.len(), 1, "stale parts left");
    assert_eq!(stored[0].spec.parts, 1);

    // Grown again, then away: deleting the head deregisters the cluster
    // and the hub deletes its other parts (through its API budget).
    agent.snapshot_chunked(&big, 25).await;
    stored_report(&reports, "big", 500).await;
    drop(agent);
    away(&second, "big").await;
    reports.delete("big", &Default::default()).await.unwrap();
    let deadline = Instant::now() + WAIT;
    loop {
        let left = reports
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|r| r.spec.cluster == "big")
            .count();
        if left == 0 && second.hub.index.cluster_record("big").is_none() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{left} objects of a deregistered cluster left"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    second.shutdown().await.unwrap();
}

/// The store packs each part's Gateways into one string. A hub
/// upgraded over a store written in the earlier format (a deep `gateways`
/// list, by the same field manager) imports it, and its first write of the
/// cluster replaces the list with the packed form; an object whose packed
/// string does not unpack is skipped with an error naming it (counted),
/// and the rest of the store still imports.
#[tokio::test]
async fn an_old_format_store_is_imported_and_a_bad_object_is_skipped() {
    let Some((_fleet, client, as_hub)) =
        management("an_old_format_store_is_imported_and_a_bad_object_is_skipped").await
    else {
        return;
    };
    let reports: Api<ClusterReport> = Api::namespaced(as_hub.clone(), HUB_NS);
    let apply = |name: &str, spec: serde_json::Value| {
        let reports = reports.clone();
        let body = json!({
            "apiVersion": "gwhub.io/v1alpha1", "kind": "ClusterReport",
            "metadata": {"name": name, "labels": {"gwhub.io/cluster": name, "gwhub.io/part": "0"}},
            "spec": spec,
        });
        let name = name.to_owned();
        async move {
            reports
                .patch(
                    &name,
                    &PatchParams::apply(gwhub_k8s::FIELD_MANAGER).force(),
                    &Patch::Apply(&body),
                )
                .await
                .unwrap();
        }
    };
    let old_status = cluster_status(&["10.0.0.1"], true);
    // Seen just now: a cluster silent for longer than
    // --insecure-prune-after (10m; this hub is --insecure) is forgotten at
    // the staleness sweep after its import, within a second of ready, and
    // its stored report deleted.
    let now = Timestamp::now().to_string();
    apply(
        "old",
        json!({"cluster": "old", "gatewayCount": 1, "lastReportTime": now,
            "lastSeenTime": now,
            "gateways": [{"namespace": NS, "name": "web", "status": old_status}]}),
    )
    .await;
    apply(
        "broken",
        json!({"cluster": "broken", "gatewayCount": 1, "lastReportTime": now,
            "lastSeenTime": now, "gatewaysPacked": "not base64 %%%"}),
    )
    .await;

    let hub = kube_hub(&as_hub).identity("hub-1").start().await;
    let deadline = Instant::now() + WAIT;
    while !*hub.ready.borrow() {
        assert!(Instant::now() < deadline, "hub never ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Imported by the time the hub is ready.
    let old = hub
        .hub
        .index
        .cluster_record("old")
        .expect("old imported at ready");
    let web = gwhub_model::GatewayKey::new(NS, "web");
    assert!(
        old.gateways
            .get(&web)
            .is_some_and(|s| same_status(s, &old_status)),
        "old-format Gateway not imported: {:?}",
        old.gateways
    );
    let broken = hub
        .hub
        .index
        .cluster_record("broken")
        .expect("an unreadable object keeps its cluster registered");
    assert!(broken.gateways.is_empty());
    assert_eq!(Metrics::get(&hub.metrics.report_unreadable), 1);

    // The cluster reports: written packed, the old list gone.
    let mut agent = Agent::connect(hub.hub.ingest_addr, "old").await;
    let new_status = cluster_status(&["10.0.0.9"], true);
    agent.snapshot(&[(NS, "web", new_status.clone())]).await;
    let deadline = Instant::now() + WAIT;
    loop {
        let r = client_reports(&client).get("old").await.unwrap();
        if r.spec.gateways_packed.is_some() {
            assert!(r.spec.gateways.is_empty(), "old list kept: {:?}", r.spec);
            let got = r.spec.reported_gateways().unwrap();
            assert_eq!(got.len(), 1);
            assert!(same_status(&got[0].status, &new_status));
            break;
        }
        assert!(Instant::now() < deadline, "old never rewritten packed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(agent);
    hub.shutdown().await.unwrap();
}

fn client_reports(client: &Client) -> Api<ClusterReport> {
    Api::namespaced(client.clone(), HUB_NS)
}

/// A hub newer than the management cluster's ClusterReport CRD (the CRD
/// not applied before the hub on an upgrade) does not count a report the
/// API server stripped of `gatewaysPacked` as stored: it fails the write,
/// names the CRD, and stores the report once the CRD is applied.
#[tokio::test]
async fn an_older_clusterreport_crd_fails_writes_instead_of_storing_nothing() {
    let Some((_fleet, client, as_hub)) =
        management("an_older_clusterreport_crd_fails_writes_instead_of_storing_nothing").await
    else {
        return;
    };
    let gvk = GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition");
    let ar = kube::discovery::ApiResource::from_gvk_with_plural(&gvk, "customresourcedefinitions");
    let crds: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let name = "clusterreports.gwhub.io";
    let current = crds.get(name).await.unwrap();
    let mut older = current.clone();
    let removed = older.data["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
        ["spec"]["properties"]
        .as_object_mut()
        .and_then(|p| p.remove("gatewaysPacked"));
    assert!(removed.is_some(), "the CRD has no gatewaysPacked to remove");
    crds.replace(name, &PostParams::default(), &older)
        .await
        .unwrap();
    // The API server serves the new schema in its own time: until it no
    // longer takes gatewaysPacked in a (dry-run) apply of a ClusterReport,
    // refusing the field or pruning it, a write would still store it.
    let probes: Api<ClusterReport> = Api::namespaced(client.clone(), NS);
    let probe = json!({
        "apiVersion": "gwhub.io/v1alpha1", "kind": "ClusterReport",
        "metadata": {"name": "schema-probe"},
        "spec": {"cluster": "schema-probe", "gatewayCount": 0,
            "lastReportTime": Timestamp::now().to_string(),
            "lastSeenTime": Timestamp::now().to_string(), "gatewaysPacked": ""},
    });
    let _pruned = until_named(
        "the API server never served the CRD without gatewaysPacked",
        WAIT,
        || async {
            probes
                .patch(
                    "schema-probe",
                    &PatchParams::apply("hub-kube-test").dry_run(),
                    &Patch::Apply(&probe),
                )
                .await
                .map(|r| r.spec.gateways_packed)
                .map_err(|e| e.to_string())
        },
        |packed| match packed {
            Ok(packed) => packed.is_none(),
            Err(e) => e.contains("gatewaysPacked: field not declared in schema"),
        },
    )
    .await;

    let hub = kube_hub(&as_hub).identity("hub-1").start().await;
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    let mut east = Agent::connect(hub.hub.ingest_addr, "east").await;
    east.snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    // A write failed on the old CRD.
    until(
        WAIT,
        || async { Metrics::get(&hub.metrics.report_write_errors) },
        |n| *n > 0,
    )
    .await;
    assert_eq!(
        Metrics::get(&hub.metrics.report_writes),
        0,
        "a report stripped of gatewaysPacked counted as stored"
    );

    // The current CRD back: the next attempt stores the Gateway.
    let mut fixed = crds.get(name).await.unwrap();
    fixed.data["spec"] = current.data["spec"].clone();
    crds.replace(name, &PostParams::default(), &fixed)
        .await
        .unwrap();
    until(
        WAIT,
        || async { reports.get_opt(&object_name("east")).await.unwrap() },
        |r| {
            r.as_ref()
                .and_then(|r| r.spec.reported_gateways().ok())
                .is_some_and(|g| g.len() == 1)
        },
    )
    .await;
    hub.shutdown().await.unwrap();
}
