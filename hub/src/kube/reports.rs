//! The hub's store: each cluster's report as `ClusterReport` objects on the
//! management cluster, holding everything the cluster last reported and
//! when it was last heard from.
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
//! ([`ApiBudget`]); the importer never waits for the writer.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_common::CoalescingQueue;
use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::FIELD_MANAGER;
use super::budget::ApiBudget;
use super::metrics::Metrics;
use crate::aggregate::GatewayKey;
use crate::index::{ClusterRecord, Index};
use gwhub_hub_rules::layout::{self, CLUSTER_LABEL, PART_LABEL, cluster_label, part_name};
use gwhub_hub_rules::store_queue;

pub use gwhub_hub_rules::layout::object_name;
use gwhub_hub_rules::report;
pub use gwhub_hub_rules::report::{ClusterReport, ClusterReportSpec, ReportedGateway};

fn rfc3339(millis: i64) -> Option<String> {
    (millis > 0)
        .then(|| Timestamp::from_millisecond(millis).ok())
        .flatten()
        .map(|t| t.to_string())
}

fn millis(s: Option<&str>) -> i64 {
    s.and_then(|s| s.parse::<Timestamp>().ok())
        .map(Timestamp::as_millisecond)
        .unwrap_or(0)
}

/// One part of a cluster's report, ready to write: its spec (Gateways
/// packed) and the hash and packed size of its Gateways.
pub struct PartSpec {
    pub spec: ClusterReportSpec,
    pub hash: u64,
    pub bytes: usize,
}

/// A cluster's record laid out over parts ([`layout::part_count`], given
/// the count it is stored in now), the head first; Gateways too large for
/// any object are left out and counted in the second value. A Gateway's
/// size for the layout is its packed size on its own, which is never less
/// than what it adds to its part's packed string (a part compresses better
/// than its Gateways one by one), so a part stays within the budget.
pub fn parts_of(record: ClusterRecord, current: u32) -> (Vec<PartSpec>, usize) {
    // (json, key hash, packed bytes, content hash)
    let mut sized: Vec<(Vec<u8>, u64, usize, u64)> = Vec::new();
    let mut left_out = 0;
    for (k, status) in record.gateways {
        let g = ReportedGateway {
            namespace: k.namespace.clone(),
            name: k.name.clone(),
            status,
        };
        let json = serde_json::to_vec(&g).unwrap_or_default();
        let bytes = report::packed_len(&json);
        if bytes > layout::MAX_GATEWAY_BYTES {
            tracing::warn!(cluster = %record.cluster, gateway = %k, bytes, "a Gateway's status is too large for a ClusterReport; not stored (still aggregated)");
            left_out += 1;
            continue;
        }
        let content = content_hash(&json);
        sized.push((json, layout::key_hash(&k), bytes, content));
    }
    let items: Vec<(u64, usize)> = sized.iter().map(|(_, h, b, _)| (*h, *b)).collect();
    let n = layout::part_count(&items, current, layout::PART_BUDGET_BYTES);
    let mut arrays: Vec<Vec<u8>> = vec![b"[".to_vec(); n as usize];
    let mut parts: Vec<PartSpec> = (0..n)
        .map(|part| PartSpec {
            spec: ClusterReportSpec {
                cluster: record.cluster.clone(),
                part,
                parts: n,
                gateway_count: 0,
                last_report_time: rfc3339(record.last_report_millis),
                last_seen_time: None,
                gateways_packed: None,
                gateways: Vec::new(),
            },
            hash: part_hash(n, []),
            bytes: 0,
        })
        .collect();
    // In key order (the record's), so each part's list is sorted.
    for (json, h, _, content) in sized {
        let i = (h % u64::from(n)) as usize;
        let p = &mut parts[i];
        if p.spec.gateway_count > 0 {
            arrays[i].push(b',');
        }
        arrays[i].extend_from_slice(&json);
        p.spec.gateway_count += 1;
        p.hash = layout::fnv(
            p.hash
                .to_le_bytes()
                .into_iter()
                .chain(content.to_le_bytes()),
        );
    }
    for (p, mut array) in parts.iter_mut().zip(arrays) {
        array.push(b']');
        let packed = report::pack(&array);
        p.bytes = packed.len();
        p.spec.gateways_packed = Some(packed);
    }
    parts[0].spec.last_seen_time = rfc3339(record.last_seen_millis);
    (parts, left_out)
}

/// Stored parts back into what the index takes (later parts win a key
/// that two hold); a part whose Gateways cannot be read adds none.
pub fn gateways_of<'a>(
    parts: impl IntoIterator<Item = &'a ClusterReportSpec>,
) -> BTreeMap<GatewayKey, GatewayStatus> {
    let mut out = BTreeMap::new();
    for spec in parts {
        match spec.reported_gateways() {
            Ok(list) => out.extend(
                list.into_iter()
                    .map(|g| (GatewayKey::new(g.namespace, g.name), g.status)),
            ),
            Err(e) => {
                tracing::error!(cluster = %spec.cluster, object = %part_name(&spec.cluster, spec.part), error = %e, "a stored ClusterReport cannot be read; its Gateways are left out")
            }
        }
    }
    out
}

/// What the importer saw removed of a cluster's stored report while the
/// cluster may be streaming here: the writer writes it again.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lost {
    /// The head was deleted (the whole report is rewritten).
    Cluster(String),
    /// One part other than the head was deleted.
    Part(String, u32),
}

/// The importer's [`Lost`] entries for the writer: pushing never waits
/// (the importer's watch keeps importing while the writer waits for the
/// API budget), and an entry is held once however often it is pushed, so
/// the queue holds at most one entry per stored object.
pub type LostQueue = CoalescingQueue<Lost>;

/// Which parts of each cluster the store holds (from the importer's
/// watch), so the writer can delete parts no count names any more, also
/// ones a previous process left.
pub type StoredParts = Arc<Mutex<BTreeMap<String, BTreeMap<u32, StoredPart>>>>;

/// One stored object as the importer last saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoredPart {
    /// The count of parts it was written for.
    pub parts: u32,
    /// The hash of its Gateways as [`parts_of`] computes it (`None`:
    /// unreadable, or written in the earlier format: to be rewritten).
    pub hash: Option<u64>,
    /// On a head: its lastSeenTime (ms).
    pub last_seen_millis: i64,
}

/// The hash of one Gateway's stored JSON.
fn content_hash(json: &[u8]) -> u64 {
    layout::fnv(json.iter().copied())
}

/// A part's hash: its count and its Gateways' content hashes in order.
fn part_hash(parts: u32, contents: impl IntoIterator<Item = u64>) -> u64 {
    contents
        .into_iter()
        .fold(layout::fnv(parts.to_le_bytes()), |h, c| {
            layout::fnv(h.to_le_bytes().into_iter().chain(c.to_le_bytes()))
        })
}

/// A part of `cluster`'s written layout is gone: written again on the next
/// pass (a part beyond the layout is one the writer deleted itself).
fn mark_lost(written: &mut BTreeMap<String, Written>, cluster: &str, part: u32) {
    if let Some(w) = written.get_mut(cluster)
        && let Some(h) = w.hashes.get_mut(part as usize)
    {
        *h = None;
        w.report_rev = 0;
    }
}

/// What a cluster's store pass leaves to remember.
enum Outcome {
    Nothing,
    /// Nothing to write for this report revision.
    Rev(u64),
    Written(Written),
}

/// What was last written for a cluster.
#[derive(Clone)]
struct Written {
    /// The cluster's stream (here) this was written for: after another
    /// stream, possibly to another replica that rewrote the objects in its
    /// own layout, nothing of this is known to be stored any more.
    session: u64,
    report_rev: u64,
    parts: u32,
    /// Per part, the hash of the Gateways written (`None`: not written).
    hashes: Vec<Option<u64>>,
    last_seen_millis: i64,
}

/// Writes the reports of the clusters streaming to this replica.
pub struct ReportWriter {
    pub api: Api<ClusterReport>,
    pub index: Index,
    pub metrics: Arc<Metrics>,
    /// How often a live cluster's `lastSeenTime` is refreshed.
    pub refresh: Duration,
    /// Wait after a change so a burst becomes one write.
    pub debounce: Duration,
    /// The API write budget shared with the status writer.
    pub budget: Arc<ApiBudget>,
    pub stored: StoredParts,
    /// A cluster that keeps changing is written at most this often
    /// ([`REWRITE_EVERY`]).
    pub rewrite_every: Duration,
}

/// A cluster that keeps changing is written at most this often (see
/// [`gwhub_hub_rules::store_queue`]).
pub const REWRITE_EVERY: Duration = Duration::from_secs(3);

/// Report writes the writer keeps in flight at once: one write is an API
/// round trip (~0.2 s on a loaded machine), so 8 capped the store near 40
/// writes/s below the API budget; the budget, not this, bounds the rate.
pub const WRITES_IN_FLIGHT: usize = 16;

/// Deletions of pruned clusters' stored reports the writer keeps in flight
/// at once, beside its writes ([`store_queue::Prunes`]).
pub const PRUNES_IN_FLIGHT: usize = 4;

/// What the writer knows of a cluster waiting for a write.
struct Pending {
    dirty: store_queue::Dirty,
    summary: crate::index::ClusterSummary,
    refresh_due: bool,
}

impl ReportWriter {
    /// Writes changed reports until `shutdown`, up to WRITES_IN_FLIGHT at
    /// once, oldest unpersisted change first ([`store_queue::next_writes`]);
    /// `forget` names clusters whose object was deleted while they stream
    /// here (written again). Beside the writes, deletes the reports of
    /// clusters `--insecure-prune-after` forgot, up to PRUNES_IN_FLIGHT at
    /// once, each after its cluster's write in flight ends
    /// ([`store_queue::Prunes`]).
    pub async fn run(self, forget: Arc<LostQueue>, shutdown: CancellationToken) {
        let mut reports = self.index.subscribe_reports();
        let mut pruned = self.index.subscribe_pruned();
        let mut written: BTreeMap<String, Written> = BTreeMap::new();
        let mut pending: BTreeMap<String, Pending> = BTreeMap::new();
        // When each cluster's last write started (for REWRITE_EVERY).
        let mut started: BTreeMap<String, Instant> = BTreeMap::new();
        let mut in_flight: BTreeSet<String> = BTreeSet::new();
        // Parts deleted while their cluster's write was in flight.
        let mut lost_in_flight: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
        // Heads deleted while their cluster's write was in flight.
        let mut heads_lost_in_flight: BTreeSet<String> = BTreeSet::new();
        let mut running = futures::stream::FuturesUnordered::new();
        let mut prunes = store_queue::Prunes::default();
        let mut deleting = futures::stream::FuturesUnordered::new();
        let mut tick = tokio::time::interval(self.refresh.min(Duration::from_secs(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut scan_at: Option<Instant> = Some(Instant::now());
        loop {
            let now = Instant::now();
            if scan_at.is_some_and(|t| t <= now) {
                scan_at = None;
                // Not a cluster written or deleted now.
                let busy = |c: &str| in_flight.contains(c) || prunes.holds(c);
                self.scan(&mut written, busy, &mut pending, &mut started, now);
            }
            for (cluster, parts) in prunes.start(|c| in_flight.contains(c), PRUNES_IN_FLIGHT) {
                deleting.push(self.forget_pruned(cluster, parts));
            }
            let slots = WRITES_IN_FLIGHT.saturating_sub(running.len());
            let (picked, next) = store_queue::next_writes(
                pending
                    .iter()
                    .filter(|(n, _)| !prunes.holds(n))
                    .map(|(n, p)| (n.as_str(), p.dirty)),
                now,
                self.rewrite_every,
                slots,
            );
            let picked: Vec<String> = picked.into_iter().map(str::to_owned).collect();
            for name in picked {
                let Some(p) = pending.remove(&name) else {
                    continue;
                };
                let w = written
                    .get(&name)
                    .filter(|w| w.session == p.summary.session)
                    .cloned();
                started.insert(name.clone(), now);
                in_flight.insert(name);
                running.push(self.store(p.summary, w, p.refresh_due));
            }
            let wake = match (next, scan_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                r = reports.changed() => {
                    if r.is_err() {
                        return;
                    }
                    reports.mark_unchanged();
                    // A burst of changes becomes one scan.
                    scan_at.get_or_insert(Instant::now() + self.debounce);
                }
                Some((name, outcome)) = running.next(), if !running.is_empty() => {
                    in_flight.remove(&name);
                    let parts = match &outcome {
                        Outcome::Written(w) => w.parts,
                        Outcome::Nothing | Outcome::Rev(_) => 0,
                    };
                    if prunes.write_ended(&name, parts) {
                        // Pruned meanwhile: deleted next, not kept as
                        // written.
                        written.remove(&name);
                        lost_in_flight.remove(&name);
                        heads_lost_in_flight.remove(&name);
                        continue;
                    }
                    match outcome {
                        Outcome::Nothing => {}
                        Outcome::Rev(rev) => {
                            if let Some(w) = written.get_mut(&name) {
                                w.report_rev = rev;
                            }
                        }
                        Outcome::Written(w) => {
                            written.insert(name.clone(), w);
                        }
                    }
                    for part in lost_in_flight.remove(&name).unwrap_or_default() {
                        mark_lost(&mut written, &name, part);
                    }
                    if heads_lost_in_flight.remove(&name) {
                        written.remove(&name);
                    }
                    // A change that came during the write is due (one scan
                    // per debounce, however many writes end).
                    scan_at.get_or_insert(Instant::now() + self.debounce);
                }
                _ = forget.notified() => {
                    for lost in forget.take_keys() {
                        match lost {
                            Lost::Cluster(cluster) => {
                                if in_flight.contains(&cluster) {
                                    // Its outcome would record it as written.
                                    heads_lost_in_flight.insert(cluster.clone());
                                }
                                written.remove(&cluster);
                            }
                            // A part of the layout written (a part beyond it
                            // is one this writer deleted): written again.
                            Lost::Part(cluster, part) => {
                                if in_flight.contains(&cluster) {
                                    // Its outcome would overwrite the mark.
                                    lost_in_flight.entry(cluster).or_default().insert(part);
                                } else {
                                    mark_lost(&mut written, &cluster, part);
                                }
                            }
                        }
                    }
                    scan_at = Some(Instant::now());
                }
                r = pruned.recv() => match r {
                    Ok(cluster) => {
                        let parts = written.remove(&cluster).map_or(0, |w| w.parts);
                        pending.remove(&cluster);
                        prunes.pruned(&cluster, parts);
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "pruned clusters' reports not deleted (too many at once); a relist brings them back stale, to be pruned again");
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                },
                Some(cluster) = deleting.next(), if !deleting.is_empty() => {
                    prunes.done(&cluster);
                    // Back meanwhile: written whole.
                    written.remove(&cluster);
                    scan_at.get_or_insert(Instant::now());
                }
                _ = gwhub_common::pace::sleep_until(wake), if wake.is_some() => {}
                _ = tick.tick() => {
                    scan_at.get_or_insert(Instant::now());
                }
            }
            if shutdown.is_cancelled() {
                return;
            }
        }
    }

    /// Finds the clusters with something to write (not `busy`: a write in
    /// flight, or a pruned cluster's deletion waiting or running) and notes
    /// since when; drops bookkeeping of deregistered clusters.
    fn scan(
        &self,
        written: &mut BTreeMap<String, Written>,
        busy: impl Fn(&str) -> bool,
        pending: &mut BTreeMap<String, Pending>,
        started: &mut BTreeMap<String, Instant>,
        now: Instant,
    ) {
        let wall = Timestamp::now().as_millisecond();
        let refresh = i64::try_from(self.refresh.as_millis()).unwrap_or(i64::MAX);
        let clusters = self.index.clusters();
        // Deregistered clusters need no bookkeeping.
        let names: BTreeSet<&str> = clusters.iter().map(|c| c.name.as_str()).collect();
        written.retain(|name, _| names.contains(name.as_str()));
        pending.retain(|name, _| names.contains(name.as_str()));
        started.retain(|name, _| names.contains(name.as_str()) || busy(name));
        for summary in clusters {
            if busy(&summary.name) {
                continue;
            }
            // A cluster that left keeps its last report: written if it
            // changed before the stream ended (within the debounce), never
            // refreshed (it is silent). Clusters never streamed here are
            // another replica's to write.
            if !summary.connected && !written.contains_key(&summary.name) {
                pending.remove(&summary.name);
                continue;
            }
            // Only what this replica heard from the cluster itself.
            if summary.report_rev == 0 {
                continue;
            }
            if written
                .get(&summary.name)
                .is_none_or(|w| w.session != summary.session)
                && let Some(seed) = self.seed(&summary)
            {
                written.insert(summary.name.clone(), seed);
            }
            let w = written
                .get(&summary.name)
                .filter(|w| w.session == summary.session);
            let changed = w.is_none_or(|w| w.report_rev != summary.report_rev);
            // Refresh lastSeenTime only when there is news of the cluster
            // (a silent connected one would be rewritten on every tick
            // with the same time).
            let refresh_due = w.is_some_and(|w| {
                summary.connected
                    && summary.last_seen_millis > w.last_seen_millis
                    && wall.saturating_sub(w.last_seen_millis) >= refresh
            });
            if !changed && !refresh_due {
                pending.remove(&summary.name);
                continue;
            }
            let since = pending.get(&summary.name).map_or(now, |p| p.dirty.since);
            let last_start = started.get(&summary.name).copied();
            pending.insert(
                summary.name.clone(),
                Pending {
                    dirty: store_queue::Dirty { since, last_start },
                    summary,
                    refresh_due,
                },
            );
        }
    }

    /// What the store holds of a cluster new here (a new stream, e.g. after
    /// a restart), as the importer last saw it: only its parts that differ
    /// (or are missing, unreadable, in the earlier format) are written,
    /// not the whole fleet again after a restart.
    fn seed(&self, summary: &crate::index::ClusterSummary) -> Option<Written> {
        let stored = self.stored.lock();
        let parts = stored.get(&summary.name)?;
        let head = parts.get(&0)?;
        let n = head.parts;
        let hashes = (0..n)
            .map(|i| parts.get(&i).filter(|p| p.parts == n).and_then(|p| p.hash))
            .collect();
        Some(Written {
            session: summary.session,
            report_rev: 0,
            parts: n,
            hashes,
            last_seen_millis: head.last_seen_millis,
        })
    }

    /// Writes what changed of one cluster's report: parts first, the head
    /// last, then deletes the parts no count names any more.
    async fn store(
        &self,
        summary: crate::index::ClusterSummary,
        w: Option<Written>,
        refresh_due: bool,
    ) -> (String, Outcome) {
        // The budget first: what waited for it is the latest state.
        self.budget.acquire_report().await;
        let mut prepaid = true;
        let Some(record) = self.index.cluster_record(&summary.name) else {
            self.budget.refund();
            return (summary.name, Outcome::Nothing);
        };
        let w = w.as_ref();
        let report_rev = record.report_rev;
        let last_seen_millis = record.last_seen_millis;
        let current = w.map_or(1, |w| w.parts);
        let (parts, left_out) = parts_of(record, current);
        if left_out > 0 {
            Metrics::add(&self.metrics.report_gateways_unstored, left_out as u64);
        }
        let n = parts.len() as u32;
        let relaid = w.is_none_or(|w| w.parts != n);
        let dirty: Vec<bool> = parts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                relaid || w.and_then(|w| w.hashes.get(i).copied().flatten()) != Some(p.hash)
            })
            .collect();
        let head_due = dirty[0] || refresh_due;
        if !head_due && !dirty.iter().any(|d| *d) {
            Metrics::bump(&self.metrics.report_writes_skipped);
            self.budget.refund();
            return (summary.name, Outcome::Rev(report_rev));
        }
        let old_parts = w.map_or(0, |w| w.parts);
        let mut hashes: Vec<Option<u64>> = if relaid {
            vec![None; n as usize]
        } else {
            w.map(|w| w.hashes.clone()).unwrap_or_default()
        };
        hashes.resize(n as usize, None);
        // Parts first, the head (naming the count) last.
        let mut all_parts = true;
        for (i, p) in parts.iter().enumerate().skip(1) {
            if !dirty[i] {
                continue;
            }
            if self.write(&p.spec, p.bytes, &mut prepaid).await {
                hashes[i] = Some(p.hash);
            } else {
                // Unknown now: written again on the next pass.
                hashes[i] = None;
                all_parts = false;
            }
        }
        let mut head_written = false;
        if all_parts && head_due {
            head_written = self
                .write(&parts[0].spec, parts[0].bytes, &mut prepaid)
                .await;
            if head_written {
                hashes[0] = Some(parts[0].hash);
            } else {
                hashes[0] = None;
            }
        }
        let name = summary.name.clone();
        let mut outcome = Outcome::Nothing;
        if head_written || !relaid {
            outcome = Outcome::Written(Written {
                session: summary.session,
                // A failed part is retried on the next pass.
                report_rev: if hashes.iter().all(Option::is_some) {
                    report_rev
                } else {
                    0
                },
                parts: n,
                hashes,
                last_seen_millis: if head_written {
                    last_seen_millis
                } else {
                    w.map_or(0, |w| w.last_seen_millis)
                },
            });
        }
        if head_written {
            // Parts no count names any more: ours and a previous
            // process's.
            let mut stale: BTreeSet<u32> = (n..old_parts).collect();
            if let Some(stored) = self.stored.lock().get(&name) {
                stale.extend(stored.keys().filter(|p| **p >= n));
            }
            for part in stale {
                self.delete_part(&name, part).await;
            }
        }
        (name, outcome)
    }

    /// Deletes the stored report of a cluster `--insecure-prune-after`
    /// forgot (kept, it would be imported again on a relist or restart):
    /// the `parts` this writer wrote and every part the importer saw, no
    /// list needed; returns the cluster.
    async fn forget_pruned(&self, cluster: String, parts: u32) -> String {
        let mut all: BTreeSet<u32> = (0..parts).collect();
        if let Some(stored) = self.stored.lock().get(&cluster) {
            all.extend(stored.keys());
        }
        let still_gone = || !self.index.has_cluster(&cluster);
        match delete(&self.api, &self.budget, &cluster, all, still_gone).await {
            Ok(()) => tracing::debug!(cluster, "pruned cluster's stored report deleted"),
            Err(e) => {
                tracing::warn!(cluster, error = %e, "cannot delete a pruned cluster's stored report")
            }
        }
        cluster
    }

    async fn delete_part(&self, cluster: &str, part: u32) {
        self.budget.acquire_report().await;
        let name = part_name(cluster, part);
        match self.api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => tracing::debug!(cluster, object = %name, "stale report part deleted"),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                tracing::warn!(cluster, object = %name, error = %e, "cannot delete a stale report part")
            }
        }
    }

    /// Writes one object; takes a token unless `prepaid` (then spends it).
    async fn write(&self, spec: &ClusterReportSpec, bytes: usize, prepaid: &mut bool) -> bool {
        let name = part_name(&spec.cluster, spec.part);
        let body = serde_json::json!({
            "apiVersion": "gwhub.io/v1alpha1",
            "kind": "ClusterReport",
            "metadata": {
                "name": name,
                "labels": {
                    CLUSTER_LABEL: cluster_label(&spec.cluster),
                    PART_LABEL: spec.part.to_string(),
                },
            },
            "spec": spec,
        });
        if !std::mem::take(prepaid) {
            self.budget.acquire_report().await;
        }
        let sent = std::time::Instant::now();
        let answer = self
            .api
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await;
        self.metrics.store_write_seconds.observe(sent.elapsed());
        match answer {
            // An API server whose ClusterReport CRD predates
            // `gatewaysPacked` prunes it and stores no Gateways: say so
            // instead of counting an empty report as written.
            Ok(stored)
                if spec.gateways_packed.is_some() && stored.spec.gateways_packed.is_none() =>
            {
                Metrics::bump(&self.metrics.report_write_errors);
                tracing::error!(cluster = %spec.cluster, object = %name, "the management cluster's ClusterReport CRD is older than this hub (it drops spec.gatewaysPacked): apply manifests/crd-clusterreports.yaml; retrying");
                false
            }
            Ok(_) => {
                Metrics::bump(&self.metrics.report_writes);
                Metrics::add(&self.metrics.report_write_bytes, bytes as u64);
                tracing::debug!(cluster = %spec.cluster, object = %name, "report stored");
                true
            }
            Err(e) => {
                Metrics::bump(&self.metrics.report_write_errors);
                tracing::warn!(cluster = %spec.cluster, object = %name, error = %e, "cannot store the cluster's report; retrying");
                false
            }
        }
    }
}

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

/// One stored object's identity as last seen: deleted only as such (a
/// part rewritten since keeps its uid but not its resourceVersion).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Seen {
    uid: Option<String>,
    resource_version: Option<String>,
}

/// The parts of deregistered clusters to delete, each as last seen: one
/// entry per (cluster, part), so it stays bounded by the store's objects.
type PartDeletions = CoalescingQueue<(String, u32), Seen>;

/// Deletions of deregistered clusters' parts running at once (on every
/// replica: each saw the head go).
pub const PART_DELETIONS_AT_ONCE: usize = 4;

struct Importer {
    index: Index,
    stored: StoredParts,
    metrics: Arc<Metrics>,
    clusters: BTreeMap<String, Assembly>,
    /// The clusters whose head the current (re-)list named.
    listed: BTreeSet<String>,
    /// The parts of each cluster the current (re-)list named.
    relisted: BTreeMap<String, BTreeSet<u32>>,
}

impl Importer {
    fn new(index: Index, stored: StoredParts, metrics: Arc<Metrics>) -> Self {
        Importer {
            index,
            stored,
            metrics,
            clusters: BTreeMap::new(),
            listed: BTreeSet::new(),
            relisted: BTreeMap::new(),
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
        if let Some(mut record) = self.index.cluster_record(cluster) {
            record.gateways.retain(|k, _| !keys.contains(k));
            self.index
                .import_cluster(cluster, record.gateways, last_report, last_seen);
        }
    }
}

/// What the importer works on.
pub struct Store {
    pub api: Api<ClusterReport>,
    pub index: Index,
    pub stored: StoredParts,
    pub metrics: Arc<Metrics>,
    /// For deleting a deregistered cluster's parts.
    pub budget: Arc<ApiBudget>,
}

/// Imports other writers' reports (a previous hub, another replica) into
/// the index. `restored` turns true once the first full list is in.
pub async fn run_importer(
    store: Store,
    restored: watch::Sender<bool>,
    forget: Arc<LostQueue>,
    shutdown: CancellationToken,
) {
    let Store {
        api,
        index,
        stored,
        metrics,
        budget,
    } = store;
    let stream = watcher::watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut stream = stream
        .take_until(shutdown.clone().cancelled_owned())
        .boxed();
    let mut importer = Importer::new(index.clone(), stored, metrics);
    let deletions = Arc::new(PartDeletions::default());
    // The deleting tasks end with the importer, also when it is dropped
    // rather than shut down.
    let deleters = shutdown.child_token();
    let _deleters_end = deleters.clone().drop_guard();
    for _ in 0..PART_DELETIONS_AT_ONCE {
        tokio::spawn(delete_parts(
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
                let gone: Vec<String> = index
                    .clusters()
                    .into_iter()
                    .map(|c| c.name)
                    .filter(|n| !listed.contains(n))
                    .collect();
                let clusters = listed.len();
                for cluster in gone {
                    let parts = importer.head_deleted(&cluster);
                    deleted(&index, &forget, &deletions, &cluster, parts);
                }
                if !*restored.borrow() {
                    tracing::info!(clusters, "restored cluster reports from the store");
                }
                restored.send_replace(true);
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
                    deleted(&index, &forget, &deletions, &cluster, parts);
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

/// `cluster`'s head is gone: deregistered, its `parts` (as the importer
/// last saw them) are queued for deletion; streaming here, it is written
/// back on the next pass.
fn deleted(
    index: &Index,
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
async fn delete_parts(
    api: Api<ClusterReport>,
    budget: Arc<ApiBudget>,
    index: Index,
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
    index: &Index,
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
pub async fn delete(
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A Gateway's status with `listeners` listeners, each with a message
    /// of 256 hex digits unique to (`gateway`, listener): hardly
    /// compressible, so the packed size grows with the count.
    fn status(gateway: usize, listeners: usize) -> GatewayStatus {
        let ls: Vec<serde_json::Value> = (0..listeners)
            .map(|i| {
                let noise: String = (0..16u64)
                    .map(|k| {
                        format!(
                            "{:016x}",
                            layout::fnv(
                                [gateway as u64, i as u64, k]
                                    .iter()
                                    .flat_map(|v| v.to_le_bytes())
                            )
                        )
                    })
                    .collect();
                serde_json::json!({"name": format!("listener-{i}"), "attachedRoutes": 1,
                    "supportedKinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}],
                    "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                        "message": noise, "observedGeneration": 1,
                        "lastTransitionTime": "2026-11-23T10:00:00Z"}]})
            })
            .collect();
        serde_json::from_value(serde_json::json!({"listeners": ls})).unwrap()
    }

    fn record(gateways: usize, listeners: usize) -> ClusterRecord {
        ClusterRecord {
            cluster: "cluster_1".into(),
            gateways: (0..gateways)
                .map(|i| {
                    (
                        GatewayKey::new("ns", format!("gw-{i}")),
                        status(i, listeners),
                    )
                })
                .collect(),
            last_report_millis: 1_700_000_000_123,
            last_seen_millis: 1_700_000_005_000,
            connected: true,
            report_rev: 3,
        }
    }

    /// A record laid out over parts and read back is the same record; each
    /// part fits the API server's limit; the head carries lastSeenTime.
    #[test]
    fn parts_round_trip_a_record_at_any_size() {
        // (gateways, listeners) -> parts
        let cases: &[(usize, usize, u32)] = &[(0, 0, 1), (1, 4, 1), (100, 4, 1), (500, 16, 8)];
        for (gateways, listeners, want) in cases {
            let rec = record(*gateways, *listeners);
            let (parts, left_out) = parts_of(rec.clone(), 1);
            assert_eq!(left_out, 0);
            assert_eq!(parts.len() as u32, *want, "{gateways} x {listeners}");
            for (i, p) in parts.iter().enumerate() {
                assert_eq!(p.spec.part as usize, i);
                assert!(
                    p.bytes <= layout::PART_BUDGET_BYTES,
                    "part {i}: {}",
                    p.bytes
                );
                assert_eq!(
                    Some(p.bytes),
                    p.spec.gateways_packed.as_ref().map(String::len)
                );
                assert_eq!(p.spec.parts, *want);
                assert_eq!(
                    p.spec.gateway_count as usize,
                    p.spec.reported_gateways().unwrap().len()
                );
                assert!(p.spec.gateways.is_empty(), "written packed only");
                assert_eq!(p.spec.last_seen_time.is_some(), i == 0);
                let json = serde_json::to_vec(&p.spec).unwrap();
                assert!(json.len() < 1024 * 1024, "part {i}: {} bytes", json.len());
                let back: ClusterReportSpec = serde_json::from_slice(&json).unwrap();
                assert_eq!(back, p.spec);
            }
            let specs: Vec<&ClusterReportSpec> = parts.iter().map(|p| &p.spec).collect();
            assert_eq!(gateways_of(specs), rec.gateways);
            // Same content, same hashes: nothing to rewrite.
            let (again, _) = parts_of(rec.clone(), *want);
            let hashes = |p: &[PartSpec]| p.iter().map(|p| p.hash).collect::<Vec<_>>();
            assert_eq!(hashes(&again), hashes(&parts));
        }
        // One Gateway changes: one part's hash changes.
        let mut rec = record(500, 16);
        let (before, _) = parts_of(rec.clone(), 1);
        rec.gateways
            .insert(GatewayKey::new("ns", "gw-7"), status(7, 15));
        let (after, _) = parts_of(rec, 8);
        let changed = before
            .iter()
            .zip(&after)
            .filter(|(a, b)| a.hash != b.hash)
            .count();
        assert_eq!(changed, 1);
    }

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
        let index = Index::new(Default::default(), Duration::from_secs(60));
        let mut importer = Importer::new(
            index.clone(),
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
        let index = Index::new(Default::default(), Duration::from_secs(60));
        let mut importer = Importer::new(
            index.clone(),
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

    #[test]
    fn old_objects_without_parts_read_as_one_part() {
        let spec: ClusterReportSpec = serde_json::from_value(serde_json::json!({
            "cluster": "east", "gatewayCount": 0, "gateways": []
        }))
        .unwrap();
        assert_eq!((spec.part, spec.parts), (0, 1));
    }

    #[test]
    fn times_round_trip() {
        assert_eq!(
            millis(rfc3339(1_700_000_000_123).as_deref()),
            1_700_000_000_123
        );
        assert_eq!(rfc3339(0), None);
        assert_eq!(millis(Some("not a time")), 0);
    }
}
