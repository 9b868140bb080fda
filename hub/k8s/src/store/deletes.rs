//! Deletes what no cluster needs any more, beside the writer and the
//! importer so neither waits for a delete: a deregistered cluster's parts
//! as the importer last saw them (a few workers, each delete only as last
//! seen), a pruned cluster's whole report (started by the writer once its
//! write in flight ends), and parts beyond a cluster's new layout. Every
//! delete takes its own token from the API budget.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use gwhub_common::CoalescingQueue;
use gwhub_hub_rules::layout::part_name;
use gwhub_hub_rules::report::ClusterReport;
use kube::api::{Api, DeleteParams};
use tokio_util::sync::CancellationToken;

use super::{Lost, LostQueue, StoredParts};
use crate::budget::ApiBudget;
use gwhub_index::StorePort;

/// One stored object's identity as last seen: deleted only as such (a
/// part rewritten since keeps its uid but not its resourceVersion).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Seen {
    pub(super) uid: Option<String>,
    pub(super) resource_version: Option<String>,
}

/// The parts of deregistered clusters to delete, each as last seen: one
/// entry per (cluster, part), so it stays bounded by the store's objects.
pub(super) type PartDeletions = CoalescingQueue<(String, u32), Seen>;

/// Deletions of deregistered clusters' parts running at once (on every
/// replica: each saw the head go).
pub(super) const PART_DELETIONS_AT_ONCE: usize = 4;

/// `cluster`'s head is gone: deregistered, its `parts` (as the importer
/// last saw them) are queued for deletion; streaming here, it is written
/// back on the next pass.
pub(super) fn deleted(
    index: &StorePort,
    forget: &LostQueue,
    deletions: &PartDeletions,
    cluster: &str,
    parts: BTreeMap<u32, Seen>,
) {
    if index.deregister(cluster) {
        // The cluster's other parts go with its head.
        deletions.extend(
            parts
                .into_iter()
                .map(|(part, seen)| ((cluster.to_owned(), part), seen)),
        );
    } else {
        // Streaming here: written back on the next pass.
        forget.insert(Lost::Cluster(cluster.to_owned()));
    }
}

/// Deletes deregistered clusters' parts, one at a time per task (the
/// importer runs PART_DELETIONS_AT_ONCE), each with its own API token and
/// only as last seen (uid and resourceVersion preconditions): a part
/// rewritten meanwhile is left alone, and a cluster known again (its head
/// is back: it reconnected, here or to another replica) keeps its parts.
pub(super) async fn delete_parts(
    api: Api<ClusterReport>,
    budget: Arc<ApiBudget>,
    index: StorePort,
    queue: Arc<PartDeletions>,
    shutdown: CancellationToken,
) {
    loop {
        while let Some(((cluster, part), seen)) = queue.pop_first() {
            // More may wait: another task may take them.
            queue.wake();
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = delete_seen_part(&api, &budget, &index, &cluster, part, seen) => {}
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = queue.notified() => {}
        }
    }
}

async fn delete_seen_part(
    api: &Api<ClusterReport>,
    budget: &ApiBudget,
    index: &StorePort,
    cluster: &str,
    part: u32,
    seen: Seen,
) {
    let back = || {
        let back = index.has_cluster(cluster);
        if back {
            tracing::debug!(
                cluster,
                part,
                "a deregistered cluster's head is back; its parts stay"
            );
        }
        back
    };
    if back() {
        return;
    }
    budget.acquire_report().await;
    // The token may have taken a while.
    if back() {
        budget.refund();
        return;
    }
    let name = part_name(cluster, part);
    let params = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: seen.uid,
            resource_version: seen.resource_version,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&name, &params).await {
        Ok(_) => tracing::debug!(cluster, object = %name, "deregistered cluster's part deleted"),
        // Gone, or rewritten by now.
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
        Err(e) => {
            tracing::warn!(cluster, object = %name, error = %e, "cannot delete a deregistered cluster's report part")
        }
    }
}

/// Deletes a cluster's stored report: `parts` (other than the head) first,
/// then the head, each delete with its own token from `budget`, while
/// `still_gone()` holds (checked after each token: a cluster back
/// meanwhile keeps what is left, and its writer rewrites the rest); stops
/// at the first failure (the head, kept, brings the cluster back on a
/// relist or restart, to be pruned and deleted again).
async fn delete(
    api: &Api<ClusterReport>,
    budget: &ApiBudget,
    cluster: &str,
    parts: impl IntoIterator<Item = u32>,
    still_gone: impl Fn() -> bool,
) -> kube::Result<()> {
    let parts: BTreeSet<u32> = parts.into_iter().filter(|p| *p != 0).collect();
    for part in parts.into_iter().chain([0]) {
        budget.acquire_report().await;
        if !still_gone() {
            budget.refund();
            tracing::debug!(
                cluster,
                "a pruned cluster is back; what is left of its report stays"
            );
            return Ok(());
        }
        match api
            .delete(&part_name(cluster, part), &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Deletes the stored report of a cluster `--insecure-prune-after`
/// forgot (kept, it would be imported again on a relist or restart):
/// the `parts` the writer wrote and every part the importer saw, no
/// list needed; returns the cluster.
pub(super) async fn delete_pruned(
    api: &Api<ClusterReport>,
    budget: &ApiBudget,
    index: &StorePort,
    stored: &StoredParts,
    cluster: String,
    parts: u32,
) -> String {
    let mut all: BTreeSet<u32> = (0..parts).collect();
    if let Some(stored) = stored.lock().get(&cluster) {
        all.extend(stored.keys());
    }
    let still_gone = || !index.has_cluster(&cluster);
    match delete(api, budget, &cluster, all, still_gone).await {
        Ok(()) => tracing::debug!(cluster, "pruned cluster's stored report deleted"),
        Err(e) => {
            tracing::warn!(cluster, error = %e, "cannot delete a pruned cluster's stored report")
        }
    }
    cluster
}

/// Deletes a part no count names any more (beyond the layout just
/// written: the writer's own, or a previous process's).
pub(super) async fn delete_stale_part(
    api: &Api<ClusterReport>,
    budget: &ApiBudget,
    cluster: &str,
    part: u32,
) {
    budget.acquire_report().await;
    let name = part_name(cluster, part);
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => tracing::debug!(cluster, object = %name, "stale report part deleted"),
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => {
            tracing::warn!(cluster, object = %name, error = %e, "cannot delete a stale report part")
        }
    }
}
