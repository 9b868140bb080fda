//! The fleet inventory's watch (`gwhub serve --inventory-namespace NS`):
//! the ClusterProfiles in NS (`multicluster.x-k8s.io/v1alpha1`) kept in the
//! index, which decides who may stream and which clusters a hub Gateway
//! expects; a deleted ClusterProfile removes its cluster (stream ended,
//! reports deleted by the store's prune path, dropped from every hub
//! Gateway). `synced` turns true once the first full list is in. Beside
//! it, the PlacementDecisions (`gwhub.io/placement`) where their CRD is
//! installed.

use std::collections::BTreeMap;

use futures::StreamExt;
use gwhub_common::watch_events::{Change, changes};
use gwhub_hub_rules::inventory::{ClusterProfile, Placement, PlacementDecision};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::index::{Index, Labels};

fn labels(profile: &ClusterProfile) -> Labels {
    profile.labels().clone()
}

/// Watches the ClusterProfiles of `api` into `index` until `shutdown`.
pub(crate) async fn run_inventory_watch(
    api: Api<ClusterProfile>,
    index: Index,
    synced: watch::Sender<bool>,
    shutdown: CancellationToken,
) {
    let events = watcher::watcher(api, watcher::Config::default()).default_backoff();
    let mut changes = std::pin::pin!(changes(events, shutdown));
    while let Some(change) = changes.next().await {
        match change {
            Change::Listed(profiles) => {
                let all: BTreeMap<String, Labels> =
                    profiles.iter().map(|p| (p.name_any(), labels(p))).collect();
                tracing::info!(clusters = all.len(), "fleet inventory listed");
                index.replace_inventory(all);
                synced.send_replace(true);
            }
            Change::Applied(p) => index.upsert_inventory(&p.name_any(), labels(&p)),
            Change::Deleted(p) => {
                tracing::info!(cluster = %p.name_any(), "ClusterProfile deleted: the cluster leaves the fleet");
                index.remove_from_inventory(&p.name_any());
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
