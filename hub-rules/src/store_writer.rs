//! The store writer's bookkeeping, sans I/O: which cluster's report to
//! write next, which pruned cluster's report to delete, what is known
//! written, and the race rules between them. The hub's `kube::store`
//! writer is a thin loop around it: it feeds [`Writer`] the events it sees
//! (reports changed, a write ended, an object lost, a cluster pruned, a
//! deletion ended) and performs the [`Actions`] it gets back (write a
//! cluster's report, delete a pruned cluster's report). So the rules are
//! tested here, without an API server, against random event sequences.
//!
//! The rules:
//! - a burst of changes becomes one scan of the index (after `debounce`);
//!   a cluster is written at most once per `rewrite_every`, oldest
//!   unpersisted change first ([`store_queue::next_writes`]), at most
//!   `writes_in_flight` at once, never two writes of one cluster at once;
//! - only what changed is written: [`Pass`] compares a cluster's parts'
//!   hashes with what is known written for its stream (a new stream starts
//!   from what the store holds, the seed);
//! - an object deleted while its cluster streams here is written again,
//!   also when the deletion is seen while a write of that cluster is in
//!   flight (its outcome would record the object as written);
//! - a pruned cluster's report is deleted only once its write in flight
//!   ends, and it is not written while its deletion waits or runs, so a
//!   late write never re-creates it ([`store_queue::Prunes`]);
//! - liveness is not the store's: a connected cluster's report is written
//!   only when it changes (its last-seen is its replica's heartbeat,
//!   [`crate::liveness`]); once its stream here ends, its head is written
//!   once more for its last-seen if the head does not hold it yet, and
//!   never again for that stream.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::store_queue::{self, Dirty, Prunes};

/// What the importer saw removed of a cluster's stored report while the
/// cluster may be streaming here: the writer writes it again.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lost {
    /// The head was deleted (the whole report is rewritten).
    Cluster(String),
    /// One part other than the head was deleted.
    Part(String, u32),
}

/// What was last written for a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// The cluster's stream (here) this was written for: after another
    /// stream, possibly to another replica that rewrote the objects in its
    /// own layout, nothing of this is known to be stored any more.
    pub session: u64,
    /// The report revision all parts hold (0: not known to be whole).
    pub report_rev: u64,
    pub parts: u32,
    /// Per part, the hash of the Gateways written (`None`: not written).
    pub hashes: Vec<Option<u64>>,
    pub last_seen_millis: i64,
    /// The head holds the cluster's last-seen at the end of this stream
    /// (written once; from then on other replicas vouch for it).
    pub final_seen: bool,
}

/// What the store holds of a cluster as the importer last saw it, for a
/// cluster new here (a new stream, e.g. after a restart): only the parts
/// that differ are written, not the whole fleet again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seed {
    /// The count of parts the head names.
    pub parts: u32,
    /// Per part of that count, its hash (`None`: missing, unreadable,
    /// written for another count or in the earlier format).
    pub hashes: Vec<Option<u64>>,
    /// The head's lastSeenTime (ms).
    pub last_seen_millis: i64,
}

/// What a cluster's write pass leaves to remember.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Nothing,
    /// Nothing to write for this report revision.
    Rev(u64),
    Written(Written),
}

impl Outcome {
    /// The count of parts the pass laid the cluster out over (0: none).
    fn parts(&self) -> u32 {
        match self {
            Outcome::Written(w) => w.parts,
            Outcome::Nothing | Outcome::Rev(_) => 0,
        }
    }
}

/// One cluster as the index holds it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cluster {
    pub name: String,
    /// Whether it streams to this replica now.
    pub connected: bool,
    /// Its report's revision (0: nothing heard here from the cluster).
    pub report_rev: u64,
    /// Its latest stream's id here.
    pub session: u64,
    pub last_seen_millis: i64,
}

/// A write to start: `cluster`'s report as the index holds it now, with
/// what is known written for its stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    pub cluster: String,
    pub session: u64,
    pub written: Option<Written>,
    /// Its stream here ended: its head is to be written for its
    /// last-seen (once), also when nothing else changed.
    pub final_seen_due: bool,
}

/// What the writer is to do now.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Actions {
    /// Pruned clusters' reports to delete: (cluster, parts known written).
    pub deletes: Vec<(String, u32)>,
    pub writes: Vec<Write>,
    /// When to call [`Writer::next`] again at the latest (`None`: on the
    /// next event).
    pub wake: Option<Instant>,
}

/// The writer's bounds and pacing.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Wait after a change so a burst becomes one scan.
    pub debounce: Duration,
    /// A cluster that keeps changing is written at most this often.
    pub rewrite_every: Duration,
    pub writes_in_flight: usize,
    pub prunes_in_flight: usize,
}

/// The fewest report writes kept in flight (a budget of a few writes/s
/// still gets a pipeline while one round trip is slow).
pub const MIN_WRITES_IN_FLIGHT: usize = 16;
/// The most report writes kept in flight: each holds a connection to the
/// API server (kube's client speaks HTTP/1.1, one request per
/// connection) and a packed body, and the API server refuses mutating
/// requests past its `--max-mutating-requests-inflight` (200 by default,
/// shared with every other writer), so the store keeps well under it.
/// Also the count with no budget (`qps` 0).
pub const MAX_WRITES_IN_FLIGHT: usize = 128;
/// The round trip of one report write the pipeline is sized for: a
/// ClusterReport apply measured 0.2 s on a loaded 2-core machine at 1,000
/// clusters and 1.7-2.3 s during the first persistence of 10,000
/// (docs/benchmarks.md); 1 s keeps the budget reachable in between.
pub const EXPECTED_WRITE_SECONDS: f64 = 1.0;

/// Report writes to keep in flight so that the API budget, not this
/// bound, sets the store's write rate. By Little's law a pipeline of `n`
/// writes each taking `t` seconds writes `n / t` per second, so reaching
/// `qps` (report writes may take the whole budget while no status waits)
/// at a round trip of [`EXPECTED_WRITE_SECONDS`] needs
/// `n = ceil(qps x EXPECTED_WRITE_SECONDS)`, kept within
/// [[`MIN_WRITES_IN_FLIGHT`], [`MAX_WRITES_IN_FLIGHT`]]. A constant 16
/// capped the first persistence of 10,000 clusters near 16 / 2 s = 8
/// writes/s while the budget allowed 100. `qps` 0 (no budget) or not a
/// number: the maximum.
pub fn writes_in_flight(qps: f64) -> usize {
    if !qps.is_finite() || qps <= 0.0 {
        return MAX_WRITES_IN_FLIGHT;
    }
    let n = (qps * EXPECTED_WRITE_SECONDS).ceil();
    if n >= MAX_WRITES_IN_FLIGHT as f64 {
        MAX_WRITES_IN_FLIGHT
    } else {
        (n as usize).max(MIN_WRITES_IN_FLIGHT)
    }
}

/// What the writer knows of a cluster waiting for a write.
#[derive(Clone, Debug)]
struct Pending {
    dirty: Dirty,
    session: u64,
    final_seen_due: bool,
}

/// The store writer's state: what is written, waiting, in flight, pruned.
#[derive(Debug)]
pub struct Writer {
    config: Config,
    written: BTreeMap<String, Written>,
    pending: BTreeMap<String, Pending>,
    /// When each cluster's last write started (for `rewrite_every`).
    started: BTreeMap<String, Instant>,
    in_flight: BTreeSet<String>,
    /// Parts deleted while their cluster's write was in flight.
    lost_in_flight: BTreeMap<String, BTreeSet<u32>>,
    /// Heads deleted while their cluster's write was in flight.
    heads_lost_in_flight: BTreeSet<String>,
    prunes: Prunes,
    /// When the index is to be scanned for changes next.
    scan_at: Option<Instant>,
}

impl Writer {
    /// A writer that scans the index first thing.
    pub fn new(config: Config, now: Instant) -> Writer {
        Writer {
            config,
            written: BTreeMap::new(),
            pending: BTreeMap::new(),
            started: BTreeMap::new(),
            in_flight: BTreeSet::new(),
            lost_in_flight: BTreeMap::new(),
            heads_lost_in_flight: BTreeSet::new(),
            prunes: Prunes::default(),
            scan_at: Some(now),
        }
    }

    /// Reports changed: a burst of changes becomes one scan.
    pub fn changed(&mut self, now: Instant) {
        self.scan_at.get_or_insert(now + self.config.debounce);
    }

    /// The periodic tick: scan (a missed change, a retry may be due).
    pub fn tick(&mut self, now: Instant) {
        self.scan_at.get_or_insert(now);
    }

    /// Whether [`Writer::scan`] is due before [`Writer::next`].
    pub fn scan_due(&self, now: Instant) -> bool {
        self.scan_at.is_some_and(|t| t <= now)
    }

    /// Whether `cluster` is written or deleted now.
    fn busy(&self, cluster: &str) -> bool {
        self.in_flight.contains(cluster) || self.prunes.holds(cluster)
    }

    /// Finds the clusters with something to write among the index's
    /// `clusters` (not one written or deleted now) and notes since when;
    /// drops bookkeeping of deregistered clusters. `seed`: what the store
    /// holds of a cluster.
    pub fn scan(
        &mut self,
        now: Instant,
        clusters: Vec<Cluster>,
        seed: impl Fn(&str) -> Option<Seed>,
    ) {
        self.scan_at = None;
        // Deregistered clusters need no bookkeeping.
        let names: BTreeSet<&str> = clusters.iter().map(|c| c.name.as_str()).collect();
        self.written.retain(|name, _| names.contains(name.as_str()));
        self.pending.retain(|name, _| names.contains(name.as_str()));
        let (in_flight, prunes) = (&self.in_flight, &self.prunes);
        self.started.retain(|name, _| {
            names.contains(name.as_str()) || in_flight.contains(name) || prunes.holds(name)
        });
        for c in clusters {
            if self.busy(&c.name) {
                continue;
            }
            // A cluster that left keeps its last report: written if it
            // changed before the stream ended (within the debounce), and
            // its last-seen once. Clusters never streamed here are another
            // replica's to write.
            if !c.connected && !self.written.contains_key(&c.name) {
                self.pending.remove(&c.name);
                continue;
            }
            // Only what this replica heard from the cluster itself.
            if c.report_rev == 0 {
                continue;
            }
            if self
                .written
                .get(&c.name)
                .is_none_or(|w| w.session != c.session)
                && let Some(seed) = seed(&c.name)
            {
                let w = Written {
                    session: c.session,
                    report_rev: 0,
                    parts: seed.parts,
                    hashes: seed.hashes,
                    last_seen_millis: seed.last_seen_millis,
                    final_seen: false,
                };
                self.written.insert(c.name.clone(), w);
            }
            let w = self
                .written
                .get_mut(&c.name)
                .filter(|w| w.session == c.session);
            let changed = w.as_ref().is_none_or(|w| w.report_rev != c.report_rev);
            // No periodic refresh: a connected cluster's liveness is its
            // replica's heartbeat. Its stream ended: its last-seen, once
            // (not again when other replicas' heartbeats move it on).
            let final_seen_due = match w {
                Some(w) if !c.connected && !w.final_seen => {
                    if c.last_seen_millis <= w.last_seen_millis {
                        // The head holds it already.
                        w.final_seen = true;
                        false
                    } else {
                        true
                    }
                }
                _ => false,
            };
            if !changed && !final_seen_due {
                self.pending.remove(&c.name);
                continue;
            }
            let since = self.pending.get(&c.name).map_or(now, |p| p.dirty.since);
            let last_start = self.started.get(&c.name).copied();
            self.pending.insert(
                c.name,
                Pending {
                    dirty: Dirty { since, last_start },
                    session: c.session,
                    final_seen_due,
                },
            );
        }
    }

    /// What to start now: pruned clusters' deletions (not of a cluster
    /// whose write is in flight) and writes into the free slots, oldest
    /// change first (not of a cluster whose deletion waits or runs).
    pub fn next(&mut self, now: Instant) -> Actions {
        let in_flight = &self.in_flight;
        let deletes = self
            .prunes
            .start(|c| in_flight.contains(c), self.config.prunes_in_flight);
        let slots = self
            .config
            .writes_in_flight
            .saturating_sub(self.in_flight.len());
        let prunes = &self.prunes;
        let (picked, next) = store_queue::next_writes(
            self.pending
                .iter()
                .filter(|(n, _)| !prunes.holds(n))
                .map(|(n, p)| (n.as_str(), p.dirty)),
            now,
            self.config.rewrite_every,
            slots,
        );
        let picked: Vec<String> = picked.into_iter().map(str::to_owned).collect();
        let mut writes = Vec::with_capacity(picked.len());
        for name in picked {
            let Some(p) = self.pending.remove(&name) else {
                continue;
            };
            let written = self
                .written
                .get(&name)
                .filter(|w| w.session == p.session)
                .cloned();
            self.started.insert(name.clone(), now);
            self.in_flight.insert(name.clone());
            writes.push(Write {
                cluster: name,
                session: p.session,
                written,
                final_seen_due: p.final_seen_due,
            });
        }
        let wake = match (next, self.scan_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Actions {
            deletes,
            writes,
            wake,
        }
    }

    /// A write of `cluster` ended with `outcome`.
    pub fn write_ended(&mut self, now: Instant, cluster: &str, outcome: Outcome) {
        self.in_flight.remove(cluster);
        if self.prunes.write_ended(cluster, outcome.parts()) {
            // Pruned meanwhile: deleted next, not kept as written.
            self.written.remove(cluster);
            self.lost_in_flight.remove(cluster);
            self.heads_lost_in_flight.remove(cluster);
            return;
        }
        match outcome {
            Outcome::Nothing => {}
            Outcome::Rev(rev) => {
                if let Some(w) = self.written.get_mut(cluster) {
                    w.report_rev = rev;
                }
            }
            Outcome::Written(w) => {
                self.written.insert(cluster.to_owned(), w);
            }
        }
        for part in self.lost_in_flight.remove(cluster).unwrap_or_default() {
            self.mark_lost(cluster, part);
        }
        if self.heads_lost_in_flight.remove(cluster) {
            self.written.remove(cluster);
        }
        // A change that came during the write is due (one scan per
        // debounce, however many writes end).
        self.scan_at.get_or_insert(now + self.config.debounce);
    }

    /// The importer saw objects of clusters deleted: written again, after
    /// a scan now.
    pub fn lost(&mut self, now: Instant, lost: impl IntoIterator<Item = Lost>) {
        for lost in lost {
            match lost {
                Lost::Cluster(cluster) => {
                    if self.in_flight.contains(&cluster) {
                        // Its outcome would record it as written.
                        self.heads_lost_in_flight.insert(cluster.clone());
                    }
                    self.written.remove(&cluster);
                }
                // A part of the layout written (a part beyond it is one
                // this writer deleted): written again.
                Lost::Part(cluster, part) => {
                    if self.in_flight.contains(&cluster) {
                        // Its outcome would overwrite the mark.
                        self.lost_in_flight.entry(cluster).or_default().insert(part);
                    } else {
                        self.mark_lost(&cluster, part);
                    }
                }
            }
        }
        self.scan_at = Some(now);
    }

    /// `cluster` was pruned (`--insecure-prune-after`): its report is to
    /// be deleted, after its write in flight if any.
    pub fn pruned(&mut self, cluster: &str) {
        let parts = self.written.remove(cluster).map_or(0, |w| w.parts);
        self.pending.remove(cluster);
        self.prunes.pruned(cluster, parts);
    }

    /// A pruned cluster's deletion ended.
    pub fn deletion_done(&mut self, now: Instant, cluster: &str) {
        self.prunes.done(cluster);
        // Back meanwhile: written whole.
        self.written.remove(cluster);
        self.scan_at.get_or_insert(now);
    }

    /// A part of `cluster`'s written layout is gone: written again on the
    /// next pass (a part beyond the layout is one the writer deleted
    /// itself).
    fn mark_lost(&mut self, cluster: &str, part: u32) {
        if let Some(w) = self.written.get_mut(cluster)
            && let Some(h) = w.hashes.get_mut(part as usize)
        {
            *h = None;
            w.report_rev = 0;
        }
    }

    /// The clusters whose write is in flight.
    pub fn in_flight(&self) -> impl Iterator<Item = &str> {
        self.in_flight.iter().map(String::as_str)
    }
}

/// One write pass over a cluster's report: which of its parts (laid out
/// anew, with these hashes) to write given what is known written, and
/// what to remember once they are written. Parts first, the head (naming
/// the count) last, and only if every part was written.
#[derive(Clone, Debug)]
pub struct Pass {
    session: u64,
    report_rev: u64,
    last_seen_millis: i64,
    /// The lastSeenTime known written (kept if the head is not).
    old_last_seen_millis: i64,
    /// Whether the head held the stream's final last-seen before.
    old_final_seen: bool,
    /// Whether this pass writes the stream's final last-seen.
    final_seen_due: bool,
    /// The count of parts known written (0: none).
    old_parts: u32,
    relaid: bool,
    new: Vec<u64>,
    dirty: Vec<bool>,
    head_due: bool,
    /// What is known written now.
    hashes: Vec<Option<u64>>,
    all_parts: bool,
    head_written: bool,
}

impl Pass {
    /// The pass for a cluster laid out as `new` (a hash per part, the head
    /// first; at least one), given what is `written` for its stream;
    /// `final_seen_due`: its stream here ended, the head is due for its
    /// last-seen; `None`: nothing to write for `report_rev` (remember it:
    /// [`Outcome::Rev`]).
    pub fn new(
        written: Option<&Written>,
        session: u64,
        report_rev: u64,
        last_seen_millis: i64,
        new: Vec<u64>,
        final_seen_due: bool,
    ) -> Option<Pass> {
        let n = new.len();
        let relaid = written.is_none_or(|w| w.parts as usize != n);
        let dirty: Vec<bool> = new
            .iter()
            .enumerate()
            .map(|(i, h)| {
                relaid || written.and_then(|w| w.hashes.get(i).copied().flatten()) != Some(*h)
            })
            .collect();
        let head_due = dirty.first().copied().unwrap_or(true) || final_seen_due;
        if !head_due && !dirty.iter().any(|d| *d) {
            return None;
        }
        let mut hashes: Vec<Option<u64>> = if relaid {
            vec![None; n]
        } else {
            written.map(|w| w.hashes.clone()).unwrap_or_default()
        };
        hashes.resize(n, None);
        Some(Pass {
            session,
            report_rev,
            last_seen_millis,
            old_last_seen_millis: written.map_or(0, |w| w.last_seen_millis),
            old_final_seen: written.is_some_and(|w| w.final_seen),
            final_seen_due,
            old_parts: written.map_or(0, |w| w.parts),
            relaid,
            new,
            dirty,
            head_due,
            hashes,
            all_parts: true,
            head_written: false,
        })
    }

    /// The parts other than the head to write, in order.
    pub fn parts_to_write(&self) -> Vec<u32> {
        (1..self.new.len())
            .filter(|i| self.dirty[*i])
            .filter_map(|i| u32::try_from(i).ok())
            .collect()
    }

    /// Part `part` (not the head) was written (`ok`) or not.
    pub fn part_written(&mut self, part: u32, ok: bool) {
        let i = part as usize;
        let Some(h) = self.new.get(i).copied() else {
            return;
        };
        // Unknown when failed: written again on the next pass.
        self.hashes[i] = ok.then_some(h);
        self.all_parts &= ok;
    }

    /// Whether the head is to be written now (due, and every part written).
    pub fn head_due(&self) -> bool {
        self.all_parts && self.head_due
    }

    /// The head was written (`ok`) or not.
    pub fn head_written(&mut self, ok: bool) {
        self.hashes[0] = ok.then_some(self.new[0]);
        self.head_written = ok;
    }

    /// The count of parts the cluster is laid out over now.
    pub fn parts(&self) -> u32 {
        u32::try_from(self.new.len()).unwrap_or(u32::MAX)
    }

    /// Parts beyond the new count that this writer wrote before (deleted
    /// once the head is written; the caller adds those the store holds).
    pub fn stale_parts(&self) -> std::ops::Range<u32> {
        let n = self.parts();
        n..self.old_parts.max(n)
    }

    /// Whether the head naming the new count is written.
    pub fn head_is_written(&self) -> bool {
        self.head_written
    }

    /// What the pass leaves to remember.
    pub fn outcome(self) -> Outcome {
        if !self.head_written && self.relaid {
            return Outcome::Nothing;
        }
        let whole = self.hashes.iter().all(Option::is_some);
        Outcome::Written(Written {
            session: self.session,
            // A failed part is retried on the next pass.
            report_rev: if whole { self.report_rev } else { 0 },
            parts: self.parts(),
            hashes: self.hashes,
            last_seen_millis: if self.head_written {
                self.last_seen_millis
            } else {
                self.old_last_seen_millis
            },
            final_seen: self.old_final_seen || (self.head_written && self.final_seen_due),
        })
    }
}

#[cfg(test)]
mod tests;
