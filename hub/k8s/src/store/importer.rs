//! Imports the store into the index: a watch on the `ClusterReport`s
//! (a previous hub's, another replica's, this one's echoes), a cluster's
//! parts taken only once its head names their layout. It notes what the
//! store holds for the writer ([`super::StoredParts`]), tells the writer
//! what was deleted of a cluster streaming here ([`super::Lost`]), and
//! hands a deregistered cluster's parts to [`super::deletes`]; it never
//! waits for the writer or for a delete. A stored `lastSeenTime` is taken
//! with the replicas' liveness records ([`crate::liveness`]): a
//! cluster connected to another replica (or to a process that just
//! ended) is as fresh as that replica's heartbeat, though its report was
//! written long ago.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use gwhub_hub_rules::layout::{self, part_name};
use gwhub_hub_rules::report::{ClusterReport, ClusterReportSpec};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio_util::sync::CancellationToken;

use super::deletes::{self, PART_DELETIONS_AT_ONCE, PartDeletions, Seen};
use super::pack::{content_hash, gateways_of, millis, part_hash};
use super::{Lost, LostQueue, StoredPart, StoredParts};
use crate::budget::ApiBudget;
use crate::liveness::Sightings;
use crate::metrics::Metrics;
use crate::readiness::Reached;
use gwhub_hub_rules::aggregate::GatewayKey;
use gwhub_index::StorePort;

/// What the importer knows of one cluster's stored objects.
#[derive(Default)]
struct Assembly {
    /// From the head: (parts, lastReportTime, lastSeenTime).
    head: Option<(u32, i64, i64)>,
    /// Parts taken into the index: (their count, lastReportTime, keys).
    taken: BTreeMap<u32, (u32, i64, BTreeSet<GatewayKey>)>,
    /// Parts not taken yet (during a list, or written for a count the head
    /// does not name yet).
    pending: BTreeMap<u32, ClusterReportSpec>,
    /// Every object of the cluster seen (head and parts), as last seen:
    /// what deleting them once the head is gone needs, without a list.
    seen: BTreeMap<u32, Seen>,
}

struct Importer {
    index: StorePort,
    sightings: Sightings,
    stored: StoredParts,
    metrics: Arc<Metrics>,
    clusters: BTreeMap<String, Assembly>,
    /// The clusters whose head the current (re-)list named.
    listed: BTreeSet<String>,
    /// The parts of each cluster the current (re-)list named.
    relisted: BTreeMap<String, BTreeSet<u32>>,
    /// The clusters whose head was in the store before the current
    /// (re-)list: only these can have been deleted while the watch was
    /// down. A cluster that streamed here and is not written yet (e.g. it
    /// connected during the first list) is not gone; the writer stores it.
    had_head: BTreeSet<String>,
}

impl Importer {
    fn new(
        index: StorePort,
        sightings: Sightings,
        stored: StoredParts,
        metrics: Arc<Metrics>,
    ) -> Self {
        Importer {
            index,
            sightings,
            stored,
            metrics,
            clusters: BTreeMap::new(),
            listed: BTreeSet::new(),
            relisted: BTreeMap::new(),
            had_head: BTreeSet::new(),
        }
    }

    fn observe(&mut self, cr: &ClusterReport) -> bool {
        let spec = &cr.spec;
        if part_name(&spec.cluster, spec.part) != cr.name_any() {
            tracing::warn!(object = %cr.name_any(), cluster = %spec.cluster, part = spec.part, "ClusterReport name does not match its cluster and part; ignored");
            return false;
        }
        if spec.parts > layout::MAX_PARTS {
            tracing::error!(object = %cr.name_any(), cluster = %spec.cluster, parts = spec.parts, max = layout::MAX_PARTS, "a stored ClusterReport names more parts than any hub writes; ignored");
            Metrics::bump(&self.metrics.report_unreadable);
            return false;
        }
        // Unpacked once, here. An object whose Gateways cannot be read
        // adds none (they come back when the cluster reports; its writer
        // replaces the object); its scalars still count, so an unreadable
        // head does not deregister its cluster.
        let gateways = match spec.reported_gateways() {
            Ok(g) => Some(g),
            Err(e) => {
                tracing::error!(object = %cr.name_any(), cluster = %spec.cluster, part = spec.part, error = %e, "a stored ClusterReport's Gateways cannot be read; skipped");
                Metrics::bump(&self.metrics.report_unreadable);
                None
            }
        };
        let hash = gateways
            .as_ref()
            .filter(|_| spec.gateways_packed.is_some())
            .map(|g| {
                part_hash(
                    spec.parts.max(1),
                    g.iter()
                        .map(|g| content_hash(&serde_json::to_vec(g).unwrap_or_default())),
                )
            });
        let gateways = gateways.unwrap_or_default();
        self.stored
            .lock()
            .entry(spec.cluster.clone())
            .or_default()
            .insert(
                spec.part,
                StoredPart {
                    parts: spec.parts.max(1),
                    hash,
                    last_seen_millis: millis(spec.last_seen_time.as_deref()),
                },
            );
        let spec = &ClusterReportSpec {
            gateways_packed: None,
            gateways,
            ..spec.clone()
        };
        let a = self.clusters.entry(spec.cluster.clone()).or_default();
        a.seen.insert(
            spec.part,
            Seen {
                uid: cr.uid(),
                resource_version: cr.resource_version(),
            },
        );
        if spec.part == 0 {
            a.head = Some((
                spec.parts.max(1),
                millis(spec.last_report_time.as_deref()),
                millis(spec.last_seen_time.as_deref()),
            ));
        }
        a.pending.insert(spec.part, spec.clone());
        true
    }

    /// Takes what the head's count names into the index.
    fn settle(&mut self, cluster: &str) {
        let Some(a) = self.clusters.get_mut(cluster) else {
            return;
        };
        let Some((n, head_report, last_seen)) = a.head else {
            return;
        };
        let promote: Vec<u32> = a
            .pending
            .iter()
            .filter(|(i, s)| s.parts.max(1) == n && **i < n)
            .map(|(i, _)| *i)
            .collect();
        let before = a.taken.len();
        a.taken.retain(|i, (count, _, _)| *count == n && *i < n);
        if promote.is_empty() && a.taken.len() == before {
            return;
        }
        let mut gateways = self
            .index
            .cluster_record(cluster)
            .map(|r| r.gateways)
            .unwrap_or_default();
        let keep: BTreeSet<&GatewayKey> = a.taken.values().flat_map(|(_, _, k)| k).collect();
        gateways.retain(|k, _| keep.contains(k));
        for i in promote {
            let Some(spec) = a.pending.remove(&i) else {
                continue;
            };
            if let Some((_, _, old)) = a.taken.remove(&i) {
                for k in &old {
                    gateways.remove(k);
                }
            }
            let new = gateways_of([&spec]);
            let keys = new.keys().cloned().collect();
            gateways.extend(new);
            a.taken
                .insert(i, (n, millis(spec.last_report_time.as_deref()), keys));
        }
        // Written for another count: the head will name it or it goes.
        a.pending.retain(|_, s| s.parts.max(1) != n);
        let last_report = a
            .taken
            .values()
            .map(|(_, t, _)| *t)
            .fold(head_report, i64::max);
        if (a.taken.len() as u32) < n {
            tracing::warn!(
                cluster,
                parts = n,
                stored = a.taken.len(),
                "a cluster's stored report is missing parts (a write was cut short); their Gateways come back when the cluster reports"
            );
        }
        let count = gateways.len();
        let last_seen = last_seen.max(self.sightings.get(cluster).unwrap_or(0));
        if self
            .index
            .import_cluster(cluster, gateways, last_report, last_seen)
        {
            tracing::debug!(cluster, gateways = count, "imported stored report");
        }
    }

    /// `cluster`'s head is gone: its bookkeeping is dropped; returns its
    /// other parts as last seen.
    fn head_deleted(&mut self, cluster: &str) -> BTreeMap<u32, Seen> {
        let mut seen = self
            .clusters
            .remove(cluster)
            .map(|a| a.seen)
            .unwrap_or_default();
        seen.remove(&0);
        seen
    }

    /// A (re-)list of the store begins.
    fn list_begins(&mut self) {
        self.had_head = self
            .clusters
            .iter()
            .filter(|(_, a)| a.head.is_some())
            .map(|(c, _)| c.clone())
            .collect();
        self.listed.clear();
        self.relisted.clear();
        self.stored.lock().clear();
        for a in self.clusters.values_mut() {
            a.pending.clear();
            a.head = None;
            a.seen.clear();
        }
    }

    /// One object of the (re-)list.
    fn list_apply(&mut self, cr: &ClusterReport) {
        if self.observe(cr) {
            self.relisted
                .entry(cr.spec.cluster.clone())
                .or_default()
                .insert(cr.spec.part);
            if cr.spec.part == 0 {
                self.listed.insert(cr.spec.cluster.clone());
            }
        }
    }

    /// The (re-)list is in: clusters whose head is gone lose their
    /// bookkeeping (parts without a head yet, a new cluster being written,
    /// wait for it); parts taken before that the list did not name were
    /// deleted while the watch was down, and leave with their Gateways;
    /// every listed cluster is settled. Deregistering clusters whose head
    /// is gone is the caller's (it deletes through the API).
    fn list_done(&mut self) {
        let (listed, relisted) = (&self.listed, &self.relisted);
        self.clusters
            .retain(|c, a| listed.contains(c) || (a.head.is_none() && !a.pending.is_empty()));
        for (cluster, a) in &mut self.clusters {
            let seen = relisted.get(cluster);
            a.taken
                .retain(|part, _| seen.is_some_and(|s| s.contains(part)));
        }
        let listed: Vec<String> = self.listed.iter().cloned().collect();
        for cluster in &listed {
            self.settle(cluster);
        }
    }

    /// A part other than the head was deleted.
    fn part_deleted(&mut self, cluster: &str, part: u32) {
        if let Some(s) = self.stored.lock().get_mut(cluster) {
            s.remove(&part);
        }
        let Some(a) = self.clusters.get_mut(cluster) else {
            return;
        };
        a.pending.remove(&part);
        a.seen.remove(&part);
        let Some((_, _, keys)) = a.taken.remove(&part) else {
            return;
        };
        let Some((_, last_report, last_seen)) = a.head else {
            return;
        };
        let last_seen = last_seen.max(self.sightings.get(cluster).unwrap_or(0));
        if let Some(mut record) = self.index.cluster_record(cluster) {
            record.gateways.retain(|k, _| !keys.contains(k));
            self.index
                .import_cluster(cluster, record.gateways, last_report, last_seen);
        }
    }
}

/// What the importer works on.
pub(crate) struct Store {
    pub(crate) api: Api<ClusterReport>,
    pub(crate) index: StorePort,
    pub(crate) stored: StoredParts,
    pub(crate) metrics: Arc<Metrics>,
    /// For deleting a deregistered cluster's parts.
    pub(crate) budget: Arc<ApiBudget>,
    /// The other replicas' heartbeats for their clusters.
    pub(crate) sightings: Sightings,
}

/// Imports other writers' reports (a previous hub, another replica) into
/// the index. `restored` is reached once the first full list is in.
pub(crate) async fn run_importer(
    store: Store,
    restored: Reached,
    forget: Arc<LostQueue>,
    shutdown: CancellationToken,
) {
    let Store {
        api,
        index,
        stored,
        metrics,
        budget,
        sightings,
    } = store;
    // The replicas' records first, so a restart imports every cluster
    // with its last-seen by them (not all stale, then fresh again).
    sightings.synced(Duration::from_secs(10)).await;
    let stream = watcher::watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut stream = stream
        .take_until(shutdown.clone().cancelled_owned())
        .boxed();
    let mut importer = Importer::new(index.clone(), sightings, stored, metrics);
    let deletions = Arc::new(PartDeletions::default());
    // The deleting tasks end with the importer, also when it is dropped
    // rather than shut down.
    let deleters = shutdown.child_token();
    let _deleters_end = deleters.clone().drop_guard();
    for _ in 0..PART_DELETIONS_AT_ONCE {
        tokio::spawn(deletes::delete_parts(
            api.clone(),
            budget.clone(),
            index.clone(),
            deletions.clone(),
            deleters.clone(),
        ));
    }
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => importer.list_begins(),
            Ok(Event::InitApply(cr)) => importer.list_apply(&cr),
            Ok(Event::InitDone) => {
                importer.list_done();
                let listed = &importer.listed;
                // Heads deleted while the watch was down: deregister.
                let had_head = &importer.had_head;
                let gone: Vec<String> = index
                    .clusters()
                    .into_iter()
                    .map(|c| c.name)
                    .filter(|n| !listed.contains(n) && had_head.contains(n))
                    .collect();
                let clusters = listed.len();
                for cluster in gone {
                    let parts = importer.head_deleted(&cluster);
                    deletes::deleted(&index, &forget, &deletions, &cluster, parts);
                }
                if !restored.holds() {
                    tracing::info!(clusters, "restored cluster reports from the store");
                }
                restored.reach();
            }
            Ok(Event::Apply(cr)) => {
                if importer.observe(&cr) {
                    importer.settle(&cr.spec.cluster);
                }
            }
            Ok(Event::Delete(cr)) => {
                let cluster = cr.spec.cluster.clone();
                if part_name(&cluster, cr.spec.part) != cr.name_any() {
                    continue;
                }
                if cr.spec.part == 0 {
                    importer.stored.lock().remove(&cluster);
                    let parts = importer.head_deleted(&cluster);
                    deletes::deleted(&index, &forget, &deletions, &cluster, parts);
                } else {
                    importer.part_deleted(&cluster, cr.spec.part);
                    // Streaming here: its writer writes the part again.
                    forget.insert(Lost::Part(cluster, cr.spec.part));
                }
            }
            Err(e) => tracing::warn!(error = %e, "watching ClusterReports failed; retrying"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::pack::parts_of;
    use crate::store::pack::tests::record;
    use gwhub_index::{ClusterRecord, IndexConfig};

    /// The objects `parts_of` lays `rec` out in, as the API server would
    /// list them.
    fn objects(rec: &ClusterRecord) -> Vec<ClusterReport> {
        let (parts, _) = parts_of(rec.clone(), 1);
        parts
            .into_iter()
            .map(|p| ClusterReport::new(&part_name(&rec.cluster, p.spec.part), p.spec))
            .collect()
    }

    /// A re-list that no longer names a part (deleted while the watch was
    /// down) drops that part's Gateways; one that names them all keeps
    /// them; a cluster whose head the list no longer names loses its
    /// bookkeeping (the caller deregisters it).
    #[test]
    fn a_relist_drops_parts_that_vanished_meanwhile() {
        let index = gwhub_index::Index::new(IndexConfig::new(
            Default::default(),
            Duration::from_secs(60),
        ));
        let mut importer = Importer::new(
            index.store_port(),
            Sightings::none(),
            StoredParts::default(),
            Arc::new(Metrics::default()),
        );
        let rec = record(500, 16);
        let objs = objects(&rec);
        assert!(objs.len() > 2, "{} objects", objs.len());
        let list = |importer: &mut Importer, objs: &[&ClusterReport]| {
            importer.list_begins();
            for o in objs {
                importer.list_apply(o);
            }
            importer.list_done();
        };
        list(&mut importer, &objs.iter().collect::<Vec<_>>());
        let got = index.cluster_record("cluster_1").unwrap().gateways;
        assert!(got == rec.gateways, "first list imports every part");
        // What the importer saw hashes as the writer's layout does, so a
        // new stream rewrites nothing unchanged.
        let (laid, _) = parts_of(rec.clone(), 1);
        let seen: Vec<Option<u64>> = importer.stored.lock()["cluster_1"]
            .values()
            .map(|p| p.hash)
            .collect();
        let want: Vec<Option<u64>> = laid.iter().map(|p| Some(p.hash)).collect();
        assert_eq!(seen, want);
        // Part 1 vanished during an outage.
        let without: Vec<&ClusterReport> = objs.iter().filter(|o| o.spec.part != 1).collect();
        list(&mut importer, &without);
        let got = index.cluster_record("cluster_1").unwrap().gateways;
        let part1 = gateways_of([&objs[1].spec]);
        assert!(!part1.is_empty());
        assert_eq!(got.len(), rec.gateways.len() - part1.len());
        assert!(got.keys().all(|k| !part1.contains_key(k)));
        assert_eq!(importer.stored.lock()["cluster_1"].len(), objs.len() - 1);
        // Back again: whole.
        list(&mut importer, &objs.iter().collect::<Vec<_>>());
        let got = index.cluster_record("cluster_1").unwrap().gateways;
        assert!(got == rec.gateways, "re-listed part imported again");
        // The head gone: bookkeeping dropped.
        list(&mut importer, &objs[1..].iter().collect::<Vec<_>>());
        assert!(!importer.listed.contains("cluster_1"));
    }

    /// A deleted head leaves its cluster's other parts to delete as the
    /// importer last saw them (uid and resourceVersion: no list needed); a
    /// part deleted before is not among them, one rewritten is as seen
    /// last; the cluster's bookkeeping goes.
    #[test]
    fn a_deleted_heads_parts_are_known_as_last_seen() {
        let index = gwhub_index::Index::new(IndexConfig::new(
            Default::default(),
            Duration::from_secs(60),
        ));
        let mut importer = Importer::new(
            index.store_port(),
            Sightings::none(),
            StoredParts::default(),
            Arc::new(Metrics::default()),
        );
        let mut objs = objects(&record(500, 16));
        let n = objs.len() as u32;
        assert!(n > 3, "{n} objects");
        for (i, o) in objs.iter_mut().enumerate() {
            o.metadata.uid = Some(format!("uid-{i}"));
            o.metadata.resource_version = Some(format!("{}", 10 + i));
        }
        importer.list_begins();
        for o in &objs {
            importer.list_apply(o);
        }
        importer.list_done();
        objs[2].metadata.resource_version = Some("99".into());
        assert!(importer.observe(&objs[2]));
        importer.settle("cluster_1");
        importer.part_deleted("cluster_1", 1);
        let got = importer.head_deleted("cluster_1");
        let seen = |i: u32, rv: &str| Seen {
            uid: Some(format!("uid-{i}")),
            resource_version: Some(rv.to_owned()),
        };
        let mut want: BTreeMap<u32, Seen> = (3..n)
            .map(|i| (i, seen(i, &format!("{}", 10 + i))))
            .collect();
        want.insert(2, seen(2, "99"));
        assert_eq!(got, want);
        assert!(!importer.clusters.contains_key("cluster_1"));
        // A cluster never seen leaves nothing to delete.
        assert!(importer.head_deleted("elsewhere").is_empty());
    }
}
