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
//! ConfigMap `gwhub-revoked`, see [`super::revocations`]); so is, at start,
//! a cluster issued an identity under the inventory whose ClusterProfile
//! is gone ([`revoke_orphans`]).

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

/// What keeps [`revoke_orphans`] from checking the identities.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OrphansError {
    #[error("cannot list the ClusterProfiles: {0}")]
    Profiles(kube::Error),
    #[error(transparent)]
    Issued(#[from] super::issued::IssuedError),
    #[error(transparent)]
    Removed(#[from] super::revocations::RevocationsError),
}

/// Attempts of [`revoke_orphans`], [`ORPHANS_RETRY`] apart: an API server
/// that stays away this long is logged, not waited on forever.
const ORPHANS_ATTEMPTS: u32 = 10;
const ORPHANS_RETRY: std::time::Duration = std::time::Duration::from_secs(3);

/// Once this replica leads: every cluster with a live identity issued
/// while inventory `namespace` was configured (ConfigMap `gwhub-issued`)
/// and no ClusterProfile now is revoked as if its ClusterProfile had been
/// deleted (spec section 7, "Hardening": a deletion while no hub ran is
/// never seen by the watch).
pub(crate) async fn revoke_orphans(
    api: Api<ClusterProfile>,
    removals: Removals,
    namespace: String,
    shutdown: CancellationToken,
) {
    // Spawned at the hub's start: identities issued since are not orphans
    // (see `issued::orphaned`).
    let started = jiff::Timestamp::now().as_second();
    revoke_orphans_once(api, removals, namespace, started, shutdown.clone()).await;
    // One check per start, but a task of the hub's set: one that ends
    // before shutdown reads as a failure and stops the hub.
    shutdown.cancelled().await;
}

async fn revoke_orphans_once(
    api: Api<ClusterProfile>,
    removals: Removals,
    namespace: String,
    started: i64,
    shutdown: CancellationToken,
) {
    let mut leader = removals.leader.clone();
    tokio::select! {
        _ = shutdown.cancelled() => return,
        led = leader.wait_for(|l| *l) => if led.is_err() { return },
    }
    for attempt in 1..=ORPHANS_ATTEMPTS {
        match orphans(&api, &removals.configmaps, &namespace, started).await {
            Ok(clusters) => {
                for cluster in clusters {
                    tracing::info!(
                        %cluster,
                        "an identity was issued under the fleet inventory, but its ClusterProfile is gone"
                    );
                    removals.revoke(&cluster).await;
                }
                return;
            }
            Err(e) => {
                tracing::warn!(attempt, error = %e, "cannot check for identities without a ClusterProfile")
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(ORPHANS_RETRY) => {}
        }
    }
}

async fn orphans(
    api: &Api<ClusterProfile>,
    configmaps: &Api<ConfigMap>,
    namespace: &str,
    started: i64,
) -> Result<Vec<String>, OrphansError> {
    // The identities first, then the ClusterProfiles: a join publishes its
    // ClusterProfile before it records the identity, so an identity read
    // here has its ClusterProfile in the list below unless it was deleted.
    let issued = super::issued::read(configmaps).await?;
    let profiles: std::collections::BTreeSet<String> = api
        .list(&Default::default())
        .await
        .map_err(OrphansError::Profiles)?
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    let removed = super::revocations::read(configmaps).await?;
    let now = jiff::Timestamp::now().as_second();
    Ok(
        super::issued::orphaned(&issued, &removed, namespace, &profiles, started, now)
            .into_iter()
            .map(str::to_owned)
            .collect(),
    )
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
