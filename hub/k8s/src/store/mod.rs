//! The hub's store: each cluster's report as `ClusterReport` objects on the
//! management cluster, holding everything the cluster last reported and
//! when it was last heard from as of its last change or disconnect (while
//! it is connected, its liveness is its replica's, [`super::liveness`]).
//!
//! Namespaced, in the hub's own namespace: the hub then needs only a Role
//! (not cluster-wide rights) for its store, and `kubectl -n gwhub-system get
//! clusterreports` lists the fleet. Per cluster (not per Gateway) because a
//! cluster's snapshot replaces all its Gateways at once and its liveness is
//! per cluster; a large cluster is split over several objects (the head,
//! named after the cluster, and `<head>.part-<i>`) so none exceeds the API
//! server's object limit; [`gwhub_hub_rules::layout`] has the rules. Each object is
//! labelled `gwhub.io/cluster` and `gwhub.io/part`.
//!
//! Writes: the parts that changed first, the head last (it names how many
//! parts there are), then parts beyond that count are deleted. Reads: a part
//! counts only once the head names its layout, so a reader never mixes two
//! layouts; a part missing after a crash mid-write leaves its Gateways out
//! until the cluster reports again (logged).
//!
//! Every replica writes the reports of the agents streaming to it and
//! imports the others' from a watch, so a restarted hub, or the replica that
//! becomes leader, starts from the fleet's last known state instead of
//! "no clusters". Deleting the head deregisters its cluster (unless the
//! cluster is streaming to this replica, which writes it back) and the
//! hub deletes its other parts as its watch last saw them (no list), a few
//! at a time. Every write and delete takes a token from the API budget
//! ([`super::budget::ApiBudget`]); the importer never waits for the writer.
//!
//! One file per job:
//! - `pack`: a cluster's record packed into parts and hashed, and stored
//!   parts read back (pure, beside [`gwhub_hub_rules::layout`]);
//! - `writer`: writes the reports of the clusters streaming here, oldest
//!   change first, within the API budget;
//! - `importer`: watches the store into the index (a previous hub's,
//!   another replica's reports) and tells the writer what was deleted;
//! - `deletes`: deletes what no cluster needs any more (a deregistered
//!   cluster's parts, a pruned cluster's report, parts beyond a layout).
//!
//! What they pass each other lives here: the importer's [`Lost`] entries
//! for the writer and the [`StoredParts`] it saw; so does [`StoreTasks`],
//! which starts them with the replicas' liveness they read. The writer's
//! decisions are [`gwhub_hub_rules::store_writer`]'s, tested without an
//! API server.

mod deletes;
mod importer;
mod pack;
mod writer;

use gwhub_common::CoalescingQueue;
use gwhub_hub_rules::store_writer::Lost;

use std::sync::Arc;

use gwhub_index::StorePort;
use kube::Client;
use kube::api::Api;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::budget::ApiBudget;
use crate::liveness::{self, Heartbeats, Liveness};
use crate::metrics::Metrics;
use crate::readiness::Reached;
use crate::{KubeOptions, leader};
use importer::{Store, run_importer};
use writer::{REWRITE_EVERY, ReportWriter};

/// What the store's tasks work with: the management cluster and the
/// hub's options, the index they import into and write from, and the
/// Kubernetes side's metrics and API budget.
pub struct StoreTasks {
    pub client: Client,
    pub options: KubeOptions,
    pub index: StorePort,
    pub metrics: Arc<Metrics>,
    pub budget: Arc<ApiBudget>,
}

impl StoreTasks {
    /// Spawns on `tasks`, until `shutdown`: the replicas' liveness records
    /// (which set `caught_up` once this replica caught up with the
    /// clusters of replicas that ended), the importer of stored reports
    /// (which sets `restored` once its first list is in the index) and the
    /// report writer. Returns the heartbeats the status shards judge
    /// replicas by.
    pub fn spawn(
        self,
        restored: Reached,
        caught_up: Reached,
        tasks: &mut JoinSet<()>,
        shutdown: &CancellationToken,
    ) -> Heartbeats {
        let StoreTasks {
            client,
            options,
            index,
            metrics,
            budget,
        } = self;
        let ns = options.namespace.as_str();
        let forget = Arc::new(LostQueue::default());
        let stored = StoredParts::default();
        // Where the status shards judge replicas alive by the heartbeat,
        // it beats at least as often as a shard Lease is renewed.
        let beat_every = match &options.lease {
            Some(lease) if options.status_shards > 0 => {
                liveness::heartbeat_every(index.stale_after()).min(lease.renew_every)
            }
            _ => liveness::heartbeat_every(index.stale_after()),
        };
        let (sightings, heartbeats) = Liveness {
            leases: Api::namespaced(client.clone(), ns),
            configmaps: Api::namespaced(client.clone(), ns),
            index: index.clone(),
            identity: options
                .lease
                .as_ref()
                .map_or_else(leader::default_identity, |l| l.identity.clone()),
            stored: stored.clone(),
            restored: restored.follow(),
            caught_up,
            lost_own: Default::default(),
            beat_every,
            metrics: metrics.clone(),
        }
        .spawn(tasks, shutdown.clone());
        let reports = Api::namespaced(client.clone(), ns);
        tasks.spawn(run_importer(
            Store {
                api: reports.clone(),
                index: index.clone(),
                stored: stored.clone(),
                metrics: metrics.clone(),
                budget: budget.clone(),
                sightings,
            },
            restored,
            forget.clone(),
            shutdown.clone(),
        ));
        tasks.spawn(
            ReportWriter {
                api: reports,
                index,
                metrics,
                debounce: options.debounce,
                budget,
                stored,
                rewrite_every: REWRITE_EVERY,
                writes_in_flight: gwhub_hub_rules::store_writer::writes_in_flight(options.api_qps),
            }
            .run(forget, shutdown.clone()),
        );
        heartbeats
    }
}

/// The importer's [`Lost`] entries for the writer: pushing never waits
/// (the importer's watch keeps importing while the writer waits for the
/// API budget), and an entry is held once however often it is pushed, so
/// the queue holds at most one entry per stored object.
pub type LostQueue = CoalescingQueue<Lost>;

pub use crate::stored::{StoredPart, StoredParts};

#[cfg(test)]
mod tests {
    use super::*;

    /// The importer's lost entries never wait for the writer (nobody takes
    /// them here, as while the writer waits for the API budget) and stay
    /// one per object however often an object is deleted.
    #[test]
    fn lost_entries_never_wait_and_coalesce() {
        let q = LostQueue::default();
        for round in 0..1000 {
            for part in 1..5 {
                q.insert(Lost::Part("east".into(), part));
            }
            q.insert(Lost::Cluster("east".into()));
            q.insert(Lost::Cluster(format!("c{}", round % 10)));
        }
        let got = q.take_keys();
        assert_eq!(got.len(), 4 + 1 + 10);
        assert!(got.contains(&Lost::Part("east".into(), 4)));
        assert!(q.take_keys().is_empty());
    }
}
