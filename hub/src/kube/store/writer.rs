//! Writes the reports of the clusters streaming to this replica: a changed
//! report (after a debounce, oldest unpersisted change first, a cluster at
//! most once per [`REWRITE_EVERY`]) and a live cluster's `lastSeenTime`,
//! only the parts whose hash changed, within the API budget; starts the
//! deletion of a pruned cluster's report once its write in flight ends.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use gwhub_hub_rules::layout::{CLUSTER_LABEL, PART_LABEL, cluster_label, part_name};
use gwhub_hub_rules::report::{ClusterReport, ClusterReportSpec};
use gwhub_hub_rules::store_queue;
use jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use tokio_util::sync::CancellationToken;

use super::deletes;
use super::pack::parts_of;
use super::{Lost, LostQueue, StoredParts};
use crate::index::Index;
use crate::kube::FIELD_MANAGER;
use crate::kube::budget::ApiBudget;
use crate::kube::metrics::Metrics;

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
pub(crate) struct ReportWriter {
    pub(crate) api: Api<ClusterReport>,
    pub(crate) index: Index,
    pub(crate) metrics: Arc<Metrics>,
    /// How often a live cluster's `lastSeenTime` is refreshed.
    pub(crate) refresh: Duration,
    /// Wait after a change so a burst becomes one write.
    pub(crate) debounce: Duration,
    /// The API write budget shared with the status writer.
    pub(crate) budget: Arc<ApiBudget>,
    pub(crate) stored: StoredParts,
    /// A cluster that keeps changing is written at most this often
    /// ([`REWRITE_EVERY`]).
    pub(crate) rewrite_every: Duration,
}

/// A cluster that keeps changing is written at most this often (see
/// [`gwhub_hub_rules::store_queue`]).
pub(crate) const REWRITE_EVERY: Duration = Duration::from_secs(3);

/// Report writes the writer keeps in flight at once: one write is an API
/// round trip (~0.2 s on a loaded machine), so 8 capped the store near 40
/// writes/s below the API budget; the budget, not this, bounds the rate.
const WRITES_IN_FLIGHT: usize = 16;

/// Deletions of pruned clusters' stored reports the writer keeps in flight
/// at once, beside its writes ([`store_queue::Prunes`]).
const PRUNES_IN_FLIGHT: usize = 4;

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
    pub(crate) async fn run(self, forget: Arc<LostQueue>, shutdown: CancellationToken) {
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
                deleting.push(deletes::delete_pruned(
                    &self.api,
                    &self.budget,
                    &self.index,
                    &self.stored,
                    cluster,
                    parts,
                ));
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
                deletes::delete_stale_part(&self.api, &self.budget, &name, part).await;
            }
        }
        (name, outcome)
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
