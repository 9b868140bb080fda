//! The fleet inventory's watch (`gwhub serve --inventory-namespace NS`):
//! the ClusterProfiles in NS (`multicluster.x-k8s.io/v1alpha1`) kept in the
//! index, which decides who may stream and which clusters a hub Gateway
//! expects; a deleted ClusterProfile removes its cluster (stream ended,
//! reports deleted by the store's prune path, dropped from every hub
//! Gateway). `synced` turns true once the first full list is in. Beside
//! it, the PlacementDecisions (`gwhub.io/placement`) where their CRD is
//! installed.
//!
//! Spec section 7: a join publishes the cluster's ClusterProfile when none
//! exists ([`publish`]), and a deleted ClusterProfile revokes the cluster's
//! identity as `gwhubctl cluster remove` does (the leader records it in
//! ConfigMap `gwhub-revoked`, see [`super::revocations`]).

use std::collections::BTreeMap;

use futures::StreamExt;
use gwhub_common::watch_events::{Change, changes};
use gwhub_hub_rules::inventory::{ClusterProfile, Placement, PlacementDecision};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::index::{Index, Labels};

fn labels(profile: &ClusterProfile) -> Labels {
    profile.labels().clone()
}

/// Creates `cluster`'s ClusterProfile in `namespace` with the hub as its
/// cluster manager unless one exists (whoever manages it, it is left as
/// it is); returns whether it created it.
pub(crate) async fn publish(
    api: &Api<ClusterProfile>,
    namespace: &str,
    cluster: &str,
) -> Result<bool, kube::Error> {
    let profile = ClusterProfile::for_join(cluster, namespace);
    match api.create(&PostParams::default(), &profile).await {
        Ok(_) => {
            tracing::info!(
                cluster,
                namespace,
                "published the joined cluster's ClusterProfile"
            );
            Ok(true)
        }
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Where a deleted ClusterProfile's removal is recorded: ConfigMap
/// `gwhub-revoked` in the hub's namespace, written by the leader only.
pub(crate) struct Removals {
    pub configmaps: Api<ConfigMap>,
    pub leader: watch::Receiver<bool>,
}

impl Removals {
    /// Revokes `cluster` (its ClusterProfile is gone) when this replica
    /// leads; the write is retried on conflict, so it is also safe beside
    /// another writer.
    async fn revoke(&self, cluster: &str) {
        if !*self.leader.borrow() {
            return;
        }
        let at = super::revocations::now();
        match super::revocations::record(&self.configmaps, cluster, at).await {
            Ok(()) => tracing::info!(
                cluster,
                %at,
                "ClusterProfile deleted: the cluster's identity is revoked"
            ),
            Err(e) => tracing::warn!(
                cluster,
                error = %e,
                "ClusterProfile deleted, but its removal could not be recorded"
            ),
        }
    }
}

/// Watches the ClusterProfiles of `api` into `index` until `shutdown`; a
/// deleted one (also one gone from a relist) is revoked through `removals`;
/// those the hub published are kept in `managed` (see [`super::reporting`]).
pub(crate) async fn run_inventory_watch(
    api: Api<ClusterProfile>,
    index: Index,
    synced: watch::Sender<bool>,
    removals: Removals,
    managed: watch::Sender<BTreeMap<String, ClusterProfile>>,
    shutdown: CancellationToken,
) {
    let events = watcher::watcher(api, watcher::Config::default()).default_backoff();
    let mut changes = std::pin::pin!(changes(events, shutdown));
    // The names of the last list: a relist that misses one saw it deleted
    // while the watch was down. None until the first list.
    let mut known: Option<std::collections::BTreeSet<String>> = None;
    while let Some(change) = changes.next().await {
        match change {
            Change::Listed(profiles) => {
                let all: BTreeMap<String, Labels> =
                    profiles.iter().map(|p| (p.name_any(), labels(p))).collect();
                tracing::info!(clusters = all.len(), "fleet inventory listed");
                let gone: Vec<String> = known
                    .iter()
                    .flatten()
                    .filter(|c| !all.contains_key(*c))
                    .cloned()
                    .collect();
                known = Some(all.keys().cloned().collect());
                managed.send_replace(
                    profiles
                        .iter()
                        .filter(|p| p.managed_by_hub())
                        .map(|p| (p.name_any(), p.clone()))
                        .collect(),
                );
                index.replace_inventory(all);
                synced.send_replace(true);
                for cluster in gone {
                    removals.revoke(&cluster).await;
                }
            }
            Change::Applied(p) => {
                if let Some(k) = known.as_mut() {
                    k.insert(p.name_any());
                }
                index.upsert_inventory(&p.name_any(), labels(&p));
                managed.send_modify(|m| {
                    if p.managed_by_hub() {
                        m.insert(p.name_any(), p.clone());
                    } else {
                        m.remove(&p.name_any());
                    }
                });
            }
            Change::Deleted(p) => {
                let cluster = p.name_any();
                tracing::info!(%cluster, "ClusterProfile deleted: the cluster leaves the fleet");
                if let Some(k) = known.as_mut() {
                    k.remove(&cluster);
                }
                index.remove_from_inventory(&cluster);
                managed.send_if_modified(|m| m.remove(&cluster).is_some());
                removals.revoke(&cluster).await;
            }
            Change::Failed(e) => {
                tracing::warn!(error = %e, "watching the fleet inventory (ClusterProfiles) failed; retrying")
            }
        }
    }
}

/// Watches the PlacementDecisions of `api` into `index` until `shutdown`.
pub(crate) async fn run_placement_watch(
    api: Api<PlacementDecision>,
    index: Index,
    synced: watch::Sender<bool>,
    shutdown: CancellationToken,
) {
    let events = watcher::watcher(api, watcher::Config::default()).default_backoff();
    let mut changes = std::pin::pin!(changes(events, shutdown));
    while let Some(change) = changes.next().await {
        match change {
            Change::Listed(all) => {
                index.replace_placements(all.iter().map(Placement::of).collect());
                synced.send_replace(true);
            }
            Change::Applied(d) => {
                let p = Placement::of(&d);
                index.set_placement(&p.namespace.clone(), &p.name.clone(), Some(p));
            }
            Change::Deleted(d) => {
                let p = Placement::of(&d);
                index.set_placement(&p.namespace, &p.name, None);
            }
            Change::Failed(e) => {
                tracing::warn!(error = %e, "watching PlacementDecisions failed; retrying")
            }
        }
    }
}
