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
//! exists (`publish`), and a deleted ClusterProfile revokes the cluster's
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

use super::revocations::covered;
use crate::readiness::Reached;
use gwhub_index::{InventoryPort, Labels};

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

/// The removals this replica saw (a deleted ClusterProfile, an orphaned
/// identity), by cluster, each with the time it was seen, until one is
/// recorded in ConfigMap `gwhub-revoked` by the leader ([`record_removals`]).
///
/// Every replica keeps them, not only the leader: a deletion seen while
/// this replica was not leading (its Lease lost for a renewal, another
/// replica leading and ending) is recorded once it leads. A removal is
/// never dropped for a failed write either; it stays until written. At
/// most one entry per deleted cluster, gone once recorded.
#[derive(Clone, Default)]
pub struct Removals {
    pending: watch::Sender<BTreeMap<String, jiff::Timestamp>>,
}

impl Removals {
    /// `cluster` is removed now (its ClusterProfile is gone).
    fn revoke(&self, cluster: &str) {
        let at = super::revocations::now();
        self.pending.send_modify(|p| {
            let seen = p.entry(cluster.to_owned()).or_insert(at);
            *seen = (*seen).max(at);
        });
        tracing::info!(cluster, %at, "ClusterProfile gone: the cluster's identity is to be revoked");
    }

    /// Drops the entries `done` covers (recorded at or after the time
    /// they were seen); a removal seen again since stays.
    fn settle(&self, done: &BTreeMap<String, i64>) {
        self.pending.send_if_modified(|p| {
            let before = p.len();
            p.retain(|cluster, at| !covered(at.as_second(), done.get(cluster).copied()));
            p.len() != before
        });
    }
}

/// The first and the longest wait of [`record_removals`] between attempts
/// (a failed write, or, not leading, a check whether the leader wrote).
const RECORD_RETRY_FIRST: std::time::Duration = std::time::Duration::from_secs(1);
const RECORD_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(30);

/// Records the pending [`Removals`] in ConfigMap `gwhub-revoked` until
/// `shutdown`: while this replica leads, each one is written (retried with
/// the common backoff until it lands); while it does not, the ConfigMap is
/// read and the removals the leader already wrote are dropped. A change of
/// leadership is acted on at once.
pub async fn record_removals(
    removals: Removals,
    configmaps: Api<ConfigMap>,
    mut leader: watch::Receiver<bool>,
    shutdown: CancellationToken,
) {
    let mut pending = removals.pending.subscribe();
    let mut backoff = gwhub_common::backoff::Exponential::new(RECORD_RETRY_FIRST, RECORD_RETRY_MAX);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            some = pending.wait_for(|p| !p.is_empty()) => if some.is_err() { return },
        }
        let todo = pending.borrow_and_update().clone();
        let leading = *leader.borrow_and_update();
        let (done, failed) = if leading {
            record_all(&configmaps, &todo).await
        } else {
            match super::revocations::read(&configmaps).await {
                Ok(recorded) => (recorded, false),
                Err(e) => {
                    tracing::debug!(error = %e, "cannot read the recorded removals");
                    (BTreeMap::new(), true)
                }
            }
        };
        removals.settle(&done);
        if leading && !failed {
            backoff.reset();
            continue;
        }
        let wait = backoff.failed();
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
            changed = leader.changed() => if changed.is_err() {
                // No election any more: the wait alone paces the retries.
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(wait) => {}
                }
            },
        }
    }
}

/// Writes every removal of `todo`; the ones written (cluster -> their
/// time) and whether any failed.
async fn record_all(
    configmaps: &Api<ConfigMap>,
    todo: &BTreeMap<String, jiff::Timestamp>,
) -> (BTreeMap<String, i64>, bool) {
    let mut done = BTreeMap::new();
    let mut failed = false;
    for (cluster, at) in todo {
        match super::revocations::record(configmaps, cluster, *at).await {
            Ok(()) => {
                tracing::info!(%cluster, %at, "ClusterProfile gone: the cluster's identity is revoked");
                done.insert(cluster.clone(), at.as_second());
            }
            Err(e) => {
                failed = true;
                tracing::warn!(%cluster, error = %e, "a removal could not be recorded yet; retrying");
            }
        }
    }
    (done, failed)
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
pub async fn revoke_orphans(
    api: Api<ClusterProfile>,
    configmaps: Api<ConfigMap>,
    leader: watch::Receiver<bool>,
    removals: Removals,
    namespace: String,
    shutdown: CancellationToken,
) {
    // Spawned at the hub's start: identities issued since are not orphans
    // (see `issued::orphaned`).
    let started = jiff::Timestamp::now().as_second();
    let check = Orphans {
        api,
        configmaps,
        removals,
        namespace,
        started,
    };
    check.revoke_once(leader, shutdown.clone()).await;
    // One check per start, but a task of the hub's set: one that ends
    // before shutdown reads as a failure and stops the hub.
    shutdown.cancelled().await;
}

/// What [`revoke_orphans`] checks: the ClusterProfiles of `namespace`
/// against the identities in `configmaps` issued by `started`.
struct Orphans {
    api: Api<ClusterProfile>,
    configmaps: Api<ConfigMap>,
    removals: Removals,
    namespace: String,
    started: i64,
}

impl Orphans {
    async fn revoke_once(&self, mut leader: watch::Receiver<bool>, shutdown: CancellationToken) {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            led = leader.wait_for(|l| *l) => if led.is_err() { return },
        }
        for attempt in 1..=ORPHANS_ATTEMPTS {
            match orphans(&self.api, &self.configmaps, &self.namespace, self.started).await {
                Ok(clusters) => {
                    for cluster in clusters {
                        tracing::info!(
                            %cluster,
                            "an identity was issued under the fleet inventory, but its ClusterProfile is gone"
                        );
                        self.removals.revoke(&cluster);
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
pub async fn run_inventory_watch(
    api: Api<ClusterProfile>,
    index: InventoryPort,
    synced: Reached,
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
                synced.reach();
                for cluster in gone {
                    removals.revoke(&cluster);
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
                removals.revoke(&cluster);
            }
            Change::Failed(e) => {
                tracing::warn!(error = %e, "watching the fleet inventory (ClusterProfiles) failed; retrying")
            }
        }
    }
}

/// Watches the PlacementDecisions of `api` into `index` until `shutdown`.
pub async fn run_placement_watch(
    api: Api<PlacementDecision>,
    index: InventoryPort,
    synced: Reached,
    shutdown: CancellationToken,
) {
    let events = watcher::watcher(api, watcher::Config::default()).default_backoff();
    let mut changes = std::pin::pin!(changes(events, shutdown));
    while let Some(change) = changes.next().await {
        match change {
            Change::Listed(all) => {
                index.replace_placements(all.iter().map(Placement::of).collect());
                synced.reach();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// (seen at, recorded at) -> whether the removal is settled.
    #[test]
    fn settling_keeps_a_removal_seen_again_since() {
        let removals = Removals::default();
        let at = |s| jiff::Timestamp::from_second(s).unwrap();
        removals.pending.send_modify(|p| {
            p.insert("east".into(), at(100));
            p.insert("west".into(), at(200));
        });
        removals.settle(&BTreeMap::from([
            ("east".into(), 100),
            ("west".into(), 150),
        ]));
        let left: Vec<String> = removals.pending.borrow().keys().cloned().collect();
        assert_eq!(left, ["west"]);
    }
}
