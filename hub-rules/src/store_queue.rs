//! Which clusters' reports the store writes next: a pure rule the hub's
//! `kube::store` writer executes.
//!
//! The writer keeps up to a few writes in flight and, whenever a slot is
//! free, writes the dirty cluster whose oldest unpersisted change is oldest
//! (not name order: a fleet larger than the write budget would otherwise
//! leave the clusters late in the alphabet behind for ever), skipping a
//! cluster whose last write started less than `min_interval` ago, so one
//! that keeps changing is written at most once per interval and cannot hog
//! the budget. Every dirty cluster is then persisted within about
//! (dirty clusters / write rate), or `min_interval`, whichever is longer.
//!
//! The stored reports of clusters `--insecure-prune-after` forgot are
//! deleted beside the writes ([`Prunes`]), never while a write of the same
//! cluster is in flight.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// One dirty cluster as the writer sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dirty {
    /// When the writer first saw the change not persisted yet.
    pub since: Instant,
    /// When its last write started (`None`: never here).
    pub last_start: Option<Instant>,
}

/// Up to `slots` clusters to write at `now`, oldest change first (ties by
/// name), and when the next cluster left out for its interval becomes
/// writable (`None`: none waits for its interval).
pub fn next_writes<'a>(
    dirty: impl IntoIterator<Item = (&'a str, Dirty)>,
    now: Instant,
    min_interval: Duration,
    slots: usize,
) -> (Vec<&'a str>, Option<Instant>) {
    let mut ready: Vec<(Instant, &'a str)> = Vec::new();
    let mut next: Option<Instant> = None;
    for (name, d) in dirty {
        match d.last_start.map(|t| t + min_interval) {
            Some(at) if at > now => next = Some(next.map_or(at, |n| n.min(at))),
            _ => ready.push((d.since, name)),
        }
    }
    ready.sort_unstable();
    let picked: Vec<&'a str> = ready.into_iter().take(slots).map(|(_, n)| n).collect();
    (picked, next)
}

/// Deletions of pruned clusters' stored reports, run beside the writes
/// (not in the writer's loop, where one waiting for the API budget would
/// hold every write). A cluster pruned while its write is in flight is
/// deleted only once that write ends (deleted before, the write would land
/// after the delete and re-create the objects), and that write's outcome is
/// not kept; a cluster waiting for or under deletion is not written; at
/// most `limit` deletions run at once, in name order.
#[derive(Debug, Default)]
pub struct Prunes {
    /// Pruned, deletion not started: the count of parts known written.
    waiting: BTreeMap<String, u32>,
    deleting: BTreeSet<String>,
}

impl Prunes {
    /// `cluster` was pruned; `parts`: how many parts of it are known
    /// written (0: none known).
    pub fn pruned(&mut self, cluster: &str, parts: u32) {
        let known = self.waiting.entry(cluster.to_owned()).or_default();
        *known = (*known).max(parts);
    }

    /// A write of `cluster` ended, having laid it out over `parts` (0: it
    /// wrote nothing): true if the cluster was pruned meanwhile (its
    /// outcome is not to be kept; its deletion may start now).
    pub fn write_ended(&mut self, cluster: &str, parts: u32) -> bool {
        match self.waiting.get_mut(cluster) {
            Some(known) => {
                *known = (*known).max(parts);
                true
            }
            None => false,
        }
    }

    /// Whether `cluster` is not to be written now (its deletion waits or
    /// runs).
    pub fn holds(&self, cluster: &str) -> bool {
        self.waiting.contains_key(cluster) || self.deleting.contains(cluster)
    }

    /// The deletions to start now, as (cluster, parts known written): not
    /// of a cluster whose write is in flight (`writing`) or whose earlier
    /// deletion still runs, and only up to `limit` running at once.
    pub fn start(&mut self, writing: impl Fn(&str) -> bool, limit: usize) -> Vec<(String, u32)> {
        let free = limit.saturating_sub(self.deleting.len());
        let due: Vec<String> = self
            .waiting
            .keys()
            .filter(|c| !writing(c) && !self.deleting.contains(*c))
            .take(free)
            .cloned()
            .collect();
        due.into_iter()
            .filter_map(|c| {
                let parts = self.waiting.remove(&c)?;
                self.deleting.insert(c.clone());
                Some((c, parts))
            })
            .collect()
    }

    /// `cluster`'s deletion ended.
    pub fn done(&mut self, cluster: &str) {
        self.deleting.remove(cluster);
    }

    /// Deletions running.
    pub fn running(&self) -> usize {
        self.deleting.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Each case: dirty clusters as (name, since ms, last start ms), now
    /// ms, slots -> picked names, next eligible ms. Interval 1,000 ms.
    #[test]
    fn oldest_change_first_and_at_most_once_per_interval() {
        type Case = (
            &'static [(&'static str, u64, Option<u64>)],
            u64,
            usize,
            &'static [&'static str],
            Option<u64>,
        );
        let cases: &[Case] = &[
            // Nothing dirty.
            (&[], 5000, 8, &[], None),
            // Oldest change first, not name order.
            (
                &[("a", 300, None), ("b", 100, None), ("c", 200, None)],
                5000,
                8,
                &["b", "c", "a"],
                None,
            ),
            // Only as many as there are slots.
            (
                &[("a", 300, None), ("b", 100, None), ("c", 200, None)],
                5000,
                2,
                &["b", "c"],
                None,
            ),
            // Ties go by name.
            (&[("b", 100, None), ("a", 100, None)], 5000, 1, &["a"], None),
            // A cluster written 400 ms ago waits for its interval, even if
            // its change is the oldest; the next one goes meanwhile.
            (
                &[("hot", 100, Some(4600)), ("cold", 4900, Some(0))],
                5000,
                8,
                &["cold"],
                Some(5600),
            ),
            // Its interval over, it goes first again.
            (
                &[("hot", 100, Some(4600)), ("cold", 4900, Some(0))],
                5600,
                8,
                &["hot", "cold"],
                None,
            ),
            // No slot: nothing, and no next time either (a slot frees it).
            (&[("a", 100, None)], 5000, 0, &[], None),
        ];
        for (i, (dirty, now, slots, want, next)) in cases.iter().enumerate() {
            let t0 = Instant::now();
            let items = dirty.iter().map(|(n, since, last)| {
                (
                    *n,
                    Dirty {
                        since: t0 + ms(*since),
                        last_start: last.map(|l| t0 + ms(l)),
                    },
                )
            });
            let (got, got_next) = next_writes(items, t0 + ms(*now), ms(1000), *slots);
            assert_eq!(&got, want, "case {i}");
            assert_eq!(got_next, next.map(|n| t0 + ms(n)), "case {i}");
        }
    }

    /// A fleet larger than the write rate: every cluster changes all the
    /// time, the writer has 4 writes per step; each cluster is written
    /// round-robin, so none waits longer than fleet / rate steps.
    #[test]
    fn a_fleet_over_the_rate_is_written_round_robin() {
        let t0 = Instant::now();
        let names: Vec<String> = (0..100).map(|i| format!("c{i:03}")).collect();
        let mut since: Vec<Instant> = vec![t0; 100];
        let mut last: Vec<Option<Instant>> = vec![None; 100];
        let mut worst = Duration::ZERO;
        for step in 0..1000u64 {
            let now = t0 + ms(step * 100);
            let items = names.iter().enumerate().map(|(i, n)| {
                (
                    n.as_str(),
                    Dirty {
                        since: since[i],
                        last_start: last[i],
                    },
                )
            });
            let (picked, _) = next_writes(items, now, ms(1000), 4);
            for p in picked {
                let i = names.iter().position(|n| n == p).unwrap();
                worst = worst.max(now - since[i]);
                last[i] = Some(now);
                // Changed again right after the write.
                since[i] = now + ms(1);
            }
        }
        // 100 clusters at 4 per 100 ms: each every 2.5 s.
        assert!(worst <= ms(2600), "{worst:?}");
    }

    /// One step of the writer's life with [`Prunes`].
    enum Op {
        /// (cluster, parts known written)
        Pruned(&'static str, u32),
        /// (cluster, parts written) -> whether its outcome is dropped
        WriteEnded(&'static str, u32, bool),
        /// (clusters writing, limit) -> deletions started
        Start(
            &'static [&'static str],
            usize,
            &'static [(&'static str, u32)],
        ),
        Done(&'static str),
        /// (cluster, held)
        Holds(&'static str, bool),
    }

    #[test]
    fn pruned_clusters_are_deleted_after_their_write_and_a_few_at_once() {
        use Op::*;
        let cases: &[(&str, &[Op])] = &[
            (
                "idle: deleted at once, held until done",
                &[
                    Pruned("a", 3),
                    Holds("a", true),
                    Start(&[], 4, &[("a", 3)]),
                    Holds("a", true),
                    Start(&[], 4, &[]),
                    Done("a"),
                    Holds("a", false),
                ],
            ),
            (
                "pruned mid-write: deleted after it, with what it wrote",
                &[
                    Pruned("a", 1),
                    Start(&["a"], 4, &[]),
                    Holds("a", true),
                    WriteEnded("a", 5, true),
                    Start(&[], 4, &[("a", 5)]),
                ],
            ),
            (
                "a write of a cluster not pruned is kept",
                &[WriteEnded("a", 2, false), Holds("a", false)],
            ),
            (
                "at most `limit` at once, in name order",
                &[
                    Pruned("c", 0),
                    Pruned("a", 0),
                    Pruned("b", 0),
                    Start(&[], 2, &[("a", 0), ("b", 0)]),
                    Start(&[], 2, &[]),
                    Done("b"),
                    Start(&[], 2, &[("c", 0)]),
                ],
            ),
            (
                "pruned again while deleted: once more after that ends",
                &[
                    Pruned("a", 2),
                    Start(&[], 4, &[("a", 2)]),
                    Pruned("a", 1),
                    Start(&[], 4, &[]),
                    Done("a"),
                    Holds("a", true),
                    Start(&[], 4, &[("a", 1)]),
                ],
            ),
        ];
        for (name, ops) in cases {
            let mut p = Prunes::default();
            for (step, op) in ops.iter().enumerate() {
                match op {
                    Pruned(c, n) => p.pruned(c, *n),
                    WriteEnded(c, n, dropped) => {
                        assert_eq!(p.write_ended(c, *n), *dropped, "{name}: step {step}")
                    }
                    Start(writing, limit, want) => {
                        let got = p.start(|c| writing.contains(&c), *limit);
                        let want: Vec<(String, u32)> =
                            want.iter().map(|(c, n)| (c.to_string(), *n)).collect();
                        assert_eq!(got, want, "{name}: step {step}");
                        assert!(p.running() <= *limit, "{name}: step {step}");
                    }
                    Done(c) => p.done(c),
                    Holds(c, held) => assert_eq!(p.holds(c), *held, "{name}: step {step}"),
                }
            }
        }
    }
}
