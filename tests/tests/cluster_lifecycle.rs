//! A cluster's life in the fleet inventory (spec section 7), on a real
//! API server, the hub acting as its ServiceAccount from
//! `manifests/` with `--inventory-namespace`: a join publishes the
//! cluster's ClusterProfile when none exists (the hub as its cluster
//! manager) so it streams at once; another manager's ClusterProfile is left
//! as it is; deleting a ClusterProfile revokes the cluster as
//! `gwhubctl cluster remove` does (recorded in ConfigMap gwhub-revoked:
//! its certificate is refused even when the ClusterProfile comes back, and
//! after a restart), and joining again needs a new token.

use std::time::Duration;

use futures::StreamExt;
use gwhub_hub::kube_hub::KubeHub;
use gwhub_hub_rules::inventory::{ClusterProfile, Mode};
use gwhub_hub_rules::report::ClusterReport;
use gwhub_k8s::revocations::REVOKED_CONFIGMAP;
use gwhub_k8s::tls_secrets::CA_SECRET;
use gwhub_proto::client::ReportStream;
use gwhub_proto::v1;
use gwhub_test_kit::apiserver::{Fleet, create_namespaces};
use gwhub_test_kit::install::SYSTEM_NS;
use gwhub_test_kit::kube_objects::apply;
use gwhub_test_kit::raw_agent::{admitted, hello, refusal, tls_ingest};
use gwhub_test_kit::wait::{WAIT, until};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use crate::support::hub_secrets::{csr_for, make_token};
use crate::support::kube_hub::{kube_hub, lease_held_elsewhere, lease_released};

const FLEET_NS: &str = "fleet";

/// The management API server with the hub installed as shipped and the
/// inventory CRDs; the admin's client and the hub's ServiceAccount's.
async fn management(test: &str) -> Option<(Fleet, Client, Client)> {
    let (fleet, admin, as_hub) = gwhub_test_kit::install::management(test).await?;
    gwhub_test_kit::crds::install_inventory(&admin)
        .await
        .expect("install the ClusterProfile CRD");
    create_namespaces(&admin, &[FLEET_NS]).await.unwrap();
    Some((fleet, admin, as_hub))
}

/// ClusterProfile `name` published by another cluster manager, `ocm`.
async fn foreign_profile(admin: &Client, name: &str) {
    let api: Api<ClusterProfile> = Api::namespaced(admin.clone(), FLEET_NS);
    apply(
        &api,
        name,
        json!({"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
               "metadata": {"name": name, "namespace": FLEET_NS,
                            "labels": {"x-k8s.io/cluster-manager": "ocm"}},
               "spec": {"displayName": format!("{name} (ocm)"), "clusterManager": {"name": "ocm"}}}),
    )
    .await;
}

/// The hub with its TLS from its Secrets, the inventory enforced, clusters
/// stale after `stale_after`.
async fn start_hub(as_hub: &Client, stale_after: Duration) -> KubeHub {
    start_hub_with(
        as_hub,
        stale_after,
        gwhub_identity::pki::AGENT_CERT_LIFETIME,
    )
    .await
}

/// [`start_hub`], its agent certificates living `agent_lifetime`.
async fn start_hub_with(
    as_hub: &Client,
    stale_after: Duration,
    agent_lifetime: Duration,
) -> KubeHub {
    kube_hub(as_hub)
        .identity("lifecycle")
        .inventory(FLEET_NS, Mode::Enforce)
        .stale_after(stale_after)
        .tls_from_secrets(|s| s.agent_lifetime = agent_lifetime)
        .start()
        .await
}

/// The hub's CA certificate, from Secret gwhub-ca.
async fn hub_ca(admin: &Client) -> Vec<u8> {
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), SYSTEM_NS);
    secrets.get(CA_SECRET).await.unwrap().data.unwrap()["tls.crt"]
        .0
        .clone()
}

/// Joins `cluster` with a fresh token, as `gwhubctl join create` makes it;
/// its certificate and key.
async fn join(admin: &Client, hub: &KubeHub, cluster: &str) -> (String, String) {
    let token = make_token(&Api::namespaced(admin.clone(), SYSTEM_NS), cluster, 600).await;
    let (csr, key) = csr_for(cluster);
    let ca = hub_ca(admin).await;
    let cert = tls_ingest(hub.hub.ingest_addr, &ca, None)
        .await
        .join(v1::JoinRequest {
            cluster: cluster.into(),
            token,
            csr_pem: csr,
        })
        .await
        .expect("a valid token joins")
        .into_inner()
        .certificate_pem;
    (cert, key)
}

/// A Report stream as `cluster` with `identity`, once the hub admits it
/// (its inventory follows the API server), answered with the hub's Hello.
async fn stream(
    admin: &Client,
    hub: &KubeHub,
    cluster: &str,
    identity: &(String, String),
) -> ReportStream {
    let ca = hub_ca(admin).await;
    let connect = || tls_ingest(hub.hub.ingest_addr, &ca, Some((&identity.0, &identity.1)));
    admitted(connect, hello(cluster), WAIT).await
}

/// How an admitted stream ends (within [`WAIT`], with a status).
async fn stream_end(open: &mut ReportStream) -> tonic::Status {
    tokio::time::timeout(WAIT, async {
        loop {
            match open.rx.next().await {
                Some(Ok(_)) => continue,
                Some(Err(s)) => return Some(s),
                None => return None,
            }
        }
    })
    .await
    .expect("the stream ends")
    .expect("with a status")
}

/// The refusal of a new Report stream as `cluster` with `identity` (a
/// passing UNAVAILABLE, e.g. a restarted hub's inventory not loaded yet,
/// is waited out).
async fn refused(
    admin: &Client,
    hub: &KubeHub,
    cluster: &str,
    identity: &(String, String),
) -> tonic::Status {
    let ca = hub_ca(admin).await;
    let connect = || tls_ingest(hub.hub.ingest_addr, &ca, Some((&identity.0, &identity.1)));
    refusal(connect, hello(cluster), WAIT).await
}

/// A join publishes the cluster's ClusterProfile (the hub as its cluster
/// manager, label and spec) before the certificate is issued, so the new
/// cluster streams in enforce mode; a cluster whose ClusterProfile another
/// manager published joins too, and that ClusterProfile is not touched.
#[tokio::test]
async fn a_join_publishes_the_clusters_profile_unless_one_exists() {
    let Some((_fleet, admin, as_hub)) =
        management("a_join_publishes_the_clusters_profile_unless_one_exists").await
    else {
        return;
    };
    foreign_profile(&admin, "west").await;
    let profiles: Api<ClusterProfile> = Api::namespaced(admin.clone(), FLEET_NS);
    let west_before = profiles.get("west").await.unwrap();
    let hub = start_hub(&as_hub, Duration::from_secs(60)).await;

    assert!(profiles.get_opt("east").await.unwrap().is_none());
    let east = join(&admin, &hub, "east").await;
    let published = profiles.get("east").await.expect("published at join");
    assert_eq!(published.spec.cluster_manager.name, "gwhub");
    assert_eq!(published.spec.display_name.as_deref(), Some("east"));
    assert_eq!(
        published.metadata.labels.as_ref().unwrap()["x-k8s.io/cluster-manager"],
        "gwhub"
    );
    let _east = stream(&admin, &hub, "east", &east).await;

    let west = join(&admin, &hub, "west").await;
    let _west = stream(&admin, &hub, "west", &west).await;
    let west_after = profiles.get("west").await.unwrap();
    assert_eq!(
        west_after.metadata.resource_version,
        west_before.metadata.resource_version
    );
    assert_eq!(west_after.spec.cluster_manager.name, "ocm");
    hub.shutdown().await.unwrap();
}

/// Deleting a ClusterProfile revokes the cluster: its stream ends, the
/// removal is in ConfigMap gwhub-revoked, and its certificate stays refused
/// when the ClusterProfile is back and after a restart; a join with a new
/// token streams again.
#[tokio::test]
async fn deleting_a_cluster_profile_revokes_the_cluster() {
    let Some((_fleet, admin, as_hub)) =
        management("deleting_a_cluster_profile_revokes_the_cluster").await
    else {
        return;
    };
    let hub = start_hub(&as_hub, Duration::from_secs(60)).await;
    let profiles: Api<ClusterProfile> = Api::namespaced(admin.clone(), FLEET_NS);
    let configmaps: Api<ConfigMap> = Api::namespaced(admin.clone(), SYSTEM_NS);
    let east = join(&admin, &hub, "east").await;
    let mut open = stream(&admin, &hub, "east", &east).await;

    profiles
        .delete("east", &DeleteParams::default())
        .await
        .unwrap();
    let ended = stream_end(&mut open).await;
    assert_eq!(ended.code(), tonic::Code::PermissionDenied, "{ended:?}");
    let recorded = until(
        WAIT,
        || async {
            configmaps
                .get_opt(REVOKED_CONFIGMAP)
                .await
                .unwrap()
                .and_then(|cm| cm.data)
                .and_then(|d| d.get("east").cloned())
        },
        |r| r.is_some(),
    )
    .await
    .unwrap();
    let at: jiff::Timestamp = recorded.parse().expect("an RFC 3339 time");
    assert!(
        (jiff::Timestamp::now() - at).get_seconds().abs() < 60,
        "{at}"
    );

    // The ClusterProfile back (its manager re-publishes it): the cluster is
    // in the inventory, its old certificate still refused as removed.
    foreign_profile(&admin, "east").await;
    until(
        WAIT,
        || async {
            hub.hub
                .index
                .listed_clusters()
                .iter()
                .any(|c| c.summary.name == "east" && c.in_inventory)
        },
        |listed| *listed,
    )
    .await;
    let e = refused(&admin, &hub, "east", &east).await;
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains("removed"), "{e:?}");

    // A restarted hub too.
    hub.shutdown().await.unwrap();
    let hub = start_hub(&as_hub, Duration::from_secs(60)).await;
    let e = refused(&admin, &hub, "east", &east).await;
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains("removed"), "{e:?}");

    // Joining again with a new token (after the removal's second) streams.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let again = join(&admin, &hub, "east").await;
    let _open = stream(&admin, &hub, "east", &again).await;
    hub.shutdown().await.unwrap();
}

/// A removal recorded while another replica leads is acted on once the hub
/// leads: the removed cluster's reports are deleted (its deregistration)
/// without waiting for another removal to come by.
#[tokio::test]
async fn a_removal_recorded_while_not_leading_deregisters_once_leading() {
    let Some((_fleet, admin, as_hub)) =
        management("a_removal_recorded_while_not_leading_deregisters_once_leading").await
    else {
        return;
    };
    let hub = start_hub(&as_hub, Duration::from_secs(60)).await;
    let east = join(&admin, &hub, "east").await;
    let mut open = stream(&admin, &hub, "east", &east).await;
    open.tx
        .send(gwhub_test_kit::raw_agent::one_chunk_snapshot(1, 1, vec![]))
        .await
        .unwrap();
    let reports: Api<ClusterReport> = Api::namespaced(admin.clone(), SYSTEM_NS);
    let head = gwhub_model::cluster::object_name("east");
    let stored = || async { reports.get_opt(&head).await.unwrap().is_some() };
    until(WAIT, stored, |s| *s).await;

    lease_held_elsewhere(&admin).await;
    let mut leader = hub.leader.clone();
    tokio::time::timeout(WAIT, leader.wait_for(|l| !*l))
        .await
        .expect("the hub stops leading")
        .unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(admin.clone(), SYSTEM_NS);
    gwhub_k8s::revocations::record(&configmaps, "east", gwhub_k8s::revocations::now())
        .await
        .unwrap();
    // Every replica follows the removal: the stream ends.
    let ended = stream_end(&mut open).await;
    assert_eq!(ended.code(), tonic::Code::PermissionDenied, "{ended:?}");
    assert!(
        stored().await,
        "only the leader deletes a removed cluster's reports"
    );

    lease_released(&admin).await;
    until(WAIT, stored, |s| !*s).await;
    hub.shutdown().await.unwrap();
}

/// A deletion this replica sees while another one leads is not lost: it is
/// recorded once this replica leads (here: the other's Lease is deleted, as
/// a replica that ends releases it), at the time it was seen.
#[tokio::test]
async fn a_deletion_seen_while_not_leading_is_recorded_once_leading() {
    let Some((_fleet, admin, as_hub)) =
        management("a_deletion_seen_while_not_leading_is_recorded_once_leading").await
    else {
        return;
    };
    lease_held_elsewhere(&admin).await;
    foreign_profile(&admin, "west").await;
    let hub = kube_hub(&as_hub)
        .identity("lifecycle")
        .inventory(FLEET_NS, Mode::Enforce)
        .start()
        .await;
    let in_inventory = |hub: &KubeHub| {
        hub.hub
            .index
            .listed_clusters()
            .iter()
            .any(|c| c.summary.name == "west" && c.in_inventory)
    };
    until(WAIT, || async { in_inventory(&hub) }, |listed| *listed).await;

    let before = gwhub_k8s::revocations::now();
    let profiles: Api<ClusterProfile> = Api::namespaced(admin.clone(), FLEET_NS);
    profiles
        .delete("west", &DeleteParams::default())
        .await
        .unwrap();
    until(WAIT, || async { in_inventory(&hub) }, |listed| !*listed).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(admin.clone(), SYSTEM_NS);
    let recorded = || async {
        configmaps
            .get_opt(REVOKED_CONFIGMAP)
            .await
            .unwrap()
            .and_then(|cm| cm.data)
            .and_then(|d| d.get("west").cloned())
    };
    // The other replica still leads (its Lease runs for an hour): nothing
    // is written.
    assert_eq!(recorded().await, None, "only the leader records removals");
    assert!(!*hub.leader.borrow(), "the hub does not lead");

    lease_released(&admin).await;
    let at = until(WAIT, &recorded, |r| r.is_some())
        .await
        .expect("recorded once the hub leads");
    let at: jiff::Timestamp = at.parse().expect("an RFC 3339 time");
    assert!(
        at >= before && at <= jiff::Timestamp::now(),
        "recorded at the time the deletion was seen ({before} .. now), not {at}"
    );
    hub.shutdown().await.unwrap();
}

/// `gwhub.io/Reporting` on the ClusterProfile `east` the hub published at
/// the join, and only there.
fn reporting_condition(
    profile: &ClusterProfile,
) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    profile
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "gwhub.io/Reporting")
        .cloned()
}

/// The hub as a cluster manager: on the ClusterProfile it published, the
/// leader keeps `gwhub.io/Reporting` (server-side applied on the status
/// subresource by field manager gwhub-reporting): False NeverConnected
/// before the agent streams, True Streaming while it reports, False Stale
/// (saying since when) once it is silent, and not rewritten while nothing
/// changes. Another manager's ClusterProfile is never written.
#[tokio::test]
async fn the_hub_reports_on_its_own_cluster_profiles_only() {
    let Some((_fleet, admin, as_hub)) =
        management("the_hub_reports_on_its_own_cluster_profiles_only").await
    else {
        return;
    };
    foreign_profile(&admin, "west").await;
    let profiles: Api<ClusterProfile> = Api::namespaced(admin.clone(), FLEET_NS);
    let west_before = profiles.get("west").await.unwrap();
    let hub = start_hub(&as_hub, Duration::from_secs(3)).await;
    let condition = |want: &'static str| {
        let profiles = profiles.clone();
        async move {
            until(
                WAIT,
                || async { profiles.get("east").await.unwrap() },
                |p| reporting_condition(p).is_some_and(|c| c.reason == want),
            )
            .await
        }
    };

    let east = join(&admin, &hub, "east").await;
    let p = condition("NeverConnected").await;
    let c = reporting_condition(&p).unwrap();
    assert_eq!(c.status, "False");
    assert!(c.message.contains("never connected"), "{c:?}");
    // (An API server before 1.22 does not record the subresource.)
    let managers: Vec<(String, Option<String>)> = p
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|m| (m.manager.clone().unwrap_or_default(), m.operation.clone()))
        .collect();
    assert!(
        managers.contains(&("gwhub-reporting".into(), Some("Apply".into()))),
        "{managers:?}"
    );

    let open = stream(&admin, &hub, "east", &east).await;
    open.tx
        .send(gwhub_test_kit::raw_agent::one_chunk_snapshot(1, 1, vec![]))
        .await
        .unwrap();
    let p = condition("Streaming").await;
    assert_eq!(reporting_condition(&p).unwrap().status, "True");

    // Silent: stale, saying since when.
    drop(open);
    let p = condition("Stale").await;
    let c = reporting_condition(&p).unwrap();
    assert_eq!(c.status, "False");
    assert!(c.message.contains(" since 20"), "{c:?}");
    // Nothing changes: nothing is written.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let again = profiles.get("east").await.unwrap();
    assert_eq!(again.metadata.resource_version, p.metadata.resource_version);

    let west_after = profiles.get("west").await.unwrap();
    assert_eq!(
        west_after.metadata.resource_version,
        west_before.metadata.resource_version
    );
    assert!(reporting_condition(&west_after).is_none());
    hub.shutdown().await.unwrap();
}

/// A removal is kept while a certificate it covers may live: the leader
/// drops the entries of `gwhub-revoked` older than the agent certificate
/// lifetime and keeps the others.
#[tokio::test]
async fn removals_older_than_any_certificate_are_dropped() {
    let Some((_fleet, admin, as_hub)) =
        management("removals_older_than_any_certificate_are_dropped").await
    else {
        return;
    };
    let configmaps: Api<ConfigMap> = Api::namespaced(admin.clone(), SYSTEM_NS);
    let now = jiff::Timestamp::now();
    let long_ago = now - jiff::SignedDuration::from_secs(3600);
    configmaps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": REVOKED_CONFIGMAP},
                "data": {"gone": long_ago.to_string(), "recent": now.to_string()},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let hub = start_hub_with(&as_hub, Duration::from_secs(60), Duration::from_secs(20)).await;
    let data = until(
        WAIT,
        || async {
            configmaps
                .get(REVOKED_CONFIGMAP)
                .await
                .unwrap()
                .data
                .unwrap_or_default()
        },
        |d| !d.contains_key("gone"),
    )
    .await;
    assert_eq!(data.get("recent"), Some(&now.to_string()));
    hub.shutdown().await.unwrap();
}
