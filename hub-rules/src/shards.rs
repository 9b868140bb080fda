//! Which replica writes which hub Gateway's status, as pure rules: hub
//! Gateways fall into a fixed number of shards by a stable hash of
//! `namespace/name` ([`shard_of`]), each shard has a Lease, and every
//! replica decides from the Leases and the live replicas it observed which
//! shards to keep, acquire or release ([`decide`]), aiming at a fair share
//! ([`fair_share`]) each. The runtime (`hub/k8s/src/shards.rs`) does the
//! I/O; keeping the decision here makes it testable without an API server.
//!
//! The live replicas come from the replicas' liveness heartbeats (one
//! Lease each, [`crate::liveness`]): [`LiveReplicas`] counts a replica
//! live while this replica saw its heartbeat change within a Lease
//! duration, by its own clock.
//!
//! No shard has two holders because a replica only acquires a shard it saw
//! free (never held, released, or expired by its own clock) and the
//! acquisition is a write guarded by the Lease's resourceVersion.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use gwhub_model::cluster::fnv;

use crate::liveness::replica_of;

/// The live replicas as one replica judges them from the liveness
/// heartbeats it observes: a replica is live while one of its heartbeats
/// changed within the window (a Lease duration) by this replica's clock,
/// so clocks need not agree. A heartbeat seen for the first time counts
/// as a change only if its beat is within the window by the wall clock:
/// an ended replica's heartbeat stays behind for a while (its record's
/// clusters were last seen then), and a newcomer must not wait a window
/// for it to stop counting. A live replica whose clock is off by more is
/// counted at its next beat.
#[derive(Debug, Default)]
pub struct LiveReplicas {
    /// Per heartbeat (liveness identity): its last beat (ms, its writer's
    /// clock) and when it was seen changing here (`None`: not yet).
    seen: BTreeMap<String, (i64, Option<Instant>)>,
}

impl LiveReplicas {
    /// Takes the heartbeats now observed (liveness identity -> last beat,
    /// ms) at `now` (`wall_millis` on the wall clock); returns the live
    /// replicas ([`replica_of`] their identities).
    pub fn observe(
        &mut self,
        beats: &BTreeMap<String, i64>,
        now: Instant,
        wall_millis: i64,
        window: Duration,
    ) -> BTreeSet<String> {
        let window_millis = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
        self.seen.retain(|id, _| beats.contains_key(id));
        for (id, beat) in beats {
            match self.seen.get_mut(id) {
                Some((last, at)) => {
                    if last != beat {
                        *last = *beat;
                        *at = Some(now);
                    }
                }
                None => {
                    let recent = wall_millis.saturating_sub(*beat) < window_millis;
                    self.seen.insert(id.clone(), (*beat, recent.then_some(now)));
                }
            }
        }
        self.seen
            .iter()
            .filter(|(_, (_, at))| at.is_some_and(|at| now.saturating_duration_since(at) < window))
            .map(|(id, _)| replica_of(id).to_owned())
            .collect()
    }
}

/// The shard of hub Gateway `namespace/name` among `shards` (0 when
/// `shards` is 0): 64-bit FNV-1a of the UTF-8 bytes of `namespace/name`,
/// mixed by MurmurHash3's 64-bit finaliser, then mapped onto `0..shards`
/// by its high bits (`hash * shards >> 64`). Stable across processes,
/// versions and platforms, so every replica puts a Gateway in the same
/// shard. The finaliser matters: FNV-1a's low bits depend only on the
/// low bits of each byte, so `FNV-1a mod 8` put names differing in
/// repeated digits (`ns-1/gw-0001`, `ns-2/gw-0002`, ...) in one shard.
pub fn shard_of(namespace: &str, name: &str, shards: u32) -> u32 {
    if shards == 0 {
        return 0;
    }
    let mut hash = fnv(namespace.bytes().chain([b'/']).chain(name.bytes()));
    // MurmurHash3's fmix64: every input bit reaches every output bit.
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    hash ^= hash >> 33;
    // The product's high 64 bits are below `shards`, a u32.
    let shard = (u128::from(hash) * u128::from(shards)) >> 64;
    u32::try_from(shard).unwrap_or(0)
}

/// The most shards one replica should hold: `ceil(shards / replicas)`
/// (every shard when there is no other replica).
pub fn fair_share(shards: u32, replicas: usize) -> u32 {
    let replicas = u32::try_from(replicas.max(1)).unwrap_or(u32::MAX);
    shards.div_ceil(replicas)
}

/// What one replica does with the shards this round.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// Held by this replica and kept (renewed).
    pub keep: BTreeSet<u32>,
    /// Free: try to take them.
    pub acquire: BTreeSet<u32>,
    /// Held by this replica beyond its fair share: stop writing them and
    /// release their Leases, so a replica under its share takes them.
    pub release: BTreeSet<u32>,
}

/// Decides for replica `me` given `holders` (per shard, the identity
/// holding its Lease, `None` when it is free: never held, released or
/// expired) and `replicas` (the replicas seen alive; `me` and every holder
/// count too).
///
/// With `floor` = shards / live replicas and `ceil` = [`fair_share`]:
/// `me` keeps up to `ceil` of what it holds (the lowest shards) and
/// releases the rest; acquires free shards up to `ceil`, or only up to
/// `floor` while another live replica holds fewer than `floor` (they are
/// left to it); and when no shard is free but another holds fewer than
/// `floor`, releases down to `floor` so it can take them. Free shards are
/// tried in an order particular to `me`, so replicas starting together
/// mostly try different ones. Settled, every live replica holds between
/// `floor` and `ceil` shards and every shard is held.
pub fn decide(me: &str, holders: &[Option<String>], replicas: &BTreeSet<String>) -> Decision {
    let shards = u32::try_from(holders.len()).unwrap_or(u32::MAX);
    let mut live: BTreeSet<&str> = replicas.iter().map(String::as_str).collect();
    live.insert(me);
    live.extend(holders.iter().flatten().map(String::as_str));
    let count = u32::try_from(live.len()).unwrap_or(u32::MAX);
    let ceil = fair_share(shards, live.len());
    let floor = shards / count.max(1);
    let held = |r: &str| holders.iter().filter(|h| h.as_deref() == Some(r)).count();
    let needy = live
        .iter()
        .any(|r| *r != me && u32::try_from(held(r)).unwrap_or(u32::MAX) < floor);
    let free: Vec<u32> = (0..shards)
        .zip(holders)
        .filter(|(_, h)| h.is_none())
        .map(|(s, _)| s)
        .collect();
    let keep_limit = if needy && free.is_empty() {
        floor
    } else {
        ceil
    };
    let mut decision = Decision::default();
    for (shard, holder) in (0..shards).zip(holders) {
        if holder.as_deref() == Some(me) {
            if u32::try_from(decision.keep.len()).unwrap_or(u32::MAX) < keep_limit {
                decision.keep.insert(shard);
            } else {
                decision.release.insert(shard);
            }
        }
    }
    let target = if needy { floor } else { ceil };
    let room = target.saturating_sub(u32::try_from(decision.keep.len()).unwrap_or(u32::MAX));
    let mut free = free;
    free.sort_by_key(|s| preference(me, *s));
    decision.acquire = free
        .into_iter()
        .take(usize::try_from(room).unwrap_or(usize::MAX))
        .collect();
    decision
}

/// `me`'s order of preference among free shards (rendezvous hashing).
fn preference(me: &str, shard: u32) -> u64 {
    fnv(me.bytes().chain(shard.to_be_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn holders(spec: &[Option<&str>]) -> Vec<Option<String>> {
        spec.iter().map(|h| h.map(str::to_owned)).collect()
    }

    fn set(items: &[u32]) -> BTreeSet<u32> {
        items.iter().copied().collect()
    }

    fn replicas(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn the_hash_is_stable_and_spreads() {
        // Pinned: every replica, version and platform agrees.
        assert_eq!(
            shard_of("default", "web", 16),
            shard_of("default", "web", 16)
        );
        assert_eq!(shard_of("a", "b", 0), 0);
        assert_eq!(shard_of("a", "b", 1), 0);
        let pinned: Vec<u32> = ["web", "api", "shop", "gw-0"]
            .iter()
            .map(|n| shard_of("default", n, 16))
            .collect();
        assert_eq!(pinned, PINNED);
        // "ns/a" + "b" and "ns" + "a/b" are the same text, so the same shard.
        assert_eq!(shard_of("ns/a", "b", 16), shard_of("ns", "a/b", 16));
        let used: BTreeSet<u32> = (0..200)
            .map(|i| shard_of("default", &format!("gw-{i}"), 16))
            .collect();
        assert_eq!(used.len(), 16, "200 Gateways cover all 16 shards");
    }

    /// Names that differ only in repeated digits (the load generator's
    /// `ns-<g>/gw-000<g>`) once all fell in one shard of 8.
    #[test]
    fn similar_names_spread_over_a_power_of_two() {
        for shards in [2u32, 4, 8, 16] {
            let used: BTreeSet<u32> = (0..10)
                .map(|g| shard_of(&format!("ns-{g}"), &format!("gw-000{g}"), shards))
                .collect();
            assert!(
                used.len() as u32 >= shards.min(10) / 2,
                "{shards} shards: ten similar names use only {used:?}"
            );
            let mut counts = vec![0u32; shards as usize];
            for i in 0..4000 {
                let s = shard_of(&format!("ns-{}", i % 50), &format!("gw-{i:04}"), shards);
                counts[s as usize] += 1;
            }
            let fair = 4000 / shards;
            for (s, n) in counts.iter().enumerate() {
                assert!(
                    *n > fair * 3 / 4 && *n < fair * 5 / 4,
                    "{shards} shards: shard {s} got {n} of 4000 (fair {fair}): {counts:?}"
                );
            }
        }
    }

    // FNV-1a 64 of "default/web" etc., through fmix64, times 16, high
    // 64 bits (checked against an independent implementation).
    const PINNED: [u32; 4] = [0, 13, 9, 5];

    #[test]
    fn fair_share_is_the_ceiling() {
        assert_eq!(fair_share(16, 0), 16);
        assert_eq!(fair_share(16, 1), 16);
        assert_eq!(fair_share(16, 2), 8);
        assert_eq!(fair_share(16, 3), 6);
        assert_eq!(fair_share(16, 17), 1);
        assert_eq!(fair_share(0, 3), 0);
    }

    /// A replica is live while its heartbeat moves, by this replica's
    /// clock; a heartbeat first seen counts only if it is recent by the
    /// wall clock (an ended replica's stays behind); a process restarted
    /// under its replica's identity is that replica.
    #[test]
    fn live_replicas_follow_the_heartbeats() {
        let window = Duration::from_secs(4);
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let wall = 1_000_000i64;
        let beats = |b: &[(&str, i64)]| -> BTreeMap<String, i64> {
            b.iter().map(|(id, t)| ((*id).to_owned(), *t)).collect()
        };
        let mut live = LiveReplicas::default();
        // b beat a second ago; c ended a minute ago.
        let got = live.observe(
            &beats(&[("b@1", wall - 1_000), ("c@1", wall - 60_000)]),
            at(0),
            wall,
            window,
        );
        assert_eq!(got, replicas(&["b"]));
        // b keeps beating, c's restart beats: both live.
        let got = live.observe(
            &beats(&[
                ("b@1", wall + 2_000),
                ("c@1", wall - 60_000),
                ("c@2", wall + 2_000),
            ]),
            at(2),
            wall + 2_000,
            window,
        );
        assert_eq!(got, replicas(&["b", "c"]));
        // b stops: live until a window after its last change here.
        let still = beats(&[("b@1", wall + 2_000), ("c@2", wall + 5_000)]);
        assert_eq!(
            live.observe(&still, at(5), wall + 5_000, window),
            replicas(&["b", "c"])
        );
        assert_eq!(
            live.observe(&still, at(6), wall + 6_000, window),
            replicas(&["c"])
        );
        // A heartbeat gone (collected): not live.
        assert!(
            live.observe(&beats(&[]), at(6), wall + 6_000, window)
                .is_empty()
        );
    }

    #[test]
    fn table() {
        struct Case {
            what: &'static str,
            holders: Vec<Option<&'static str>>,
            replicas: Vec<&'static str>,
            keep: Vec<u32>,
            acquire_count: usize,
            release: Vec<u32>,
        }
        let cases = [
            Case {
                what: "alone: take everything",
                holders: vec![None; 4],
                replicas: vec![],
                keep: vec![],
                acquire_count: 4,
                release: vec![],
            },
            Case {
                what: "alone and holding all: keep all",
                holders: vec![Some("a"); 4],
                replicas: vec!["a"],
                keep: vec![0, 1, 2, 3],
                acquire_count: 0,
                release: vec![],
            },
            Case {
                what: "a newcomer seen: release down to the share",
                holders: vec![Some("a"); 4],
                replicas: vec!["a", "b"],
                keep: vec![0, 1],
                acquire_count: 0,
                release: vec![2, 3],
            },
            Case {
                what: "a holder counts as live though not listed",
                holders: vec![Some("a"), Some("a"), Some("b"), Some("a")],
                replicas: vec![],
                keep: vec![0, 1],
                acquire_count: 0,
                release: vec![3],
            },
            Case {
                what: "under the share: take free shards only",
                holders: vec![Some("b"), None, Some("b"), None],
                replicas: vec!["b"],
                keep: vec![],
                acquire_count: 2,
                release: vec![],
            },
            Case {
                what: "at the share: free shards are left to others",
                holders: vec![Some("a"), Some("a"), None, None],
                replicas: vec!["b"],
                keep: vec![0, 1],
                acquire_count: 0,
                release: vec![],
            },
            Case {
                what: "a replica gone: its expired shards are taken",
                holders: vec![Some("a"), Some("a"), None, None],
                replicas: vec![],
                keep: vec![0, 1],
                acquire_count: 2,
                release: vec![],
            },
            Case {
                what: "more replicas than shards: at most one each",
                holders: vec![None, Some("b")],
                replicas: vec!["b", "c"],
                keep: vec![],
                acquire_count: 1,
                release: vec![],
            },
        ];
        for c in cases {
            let d = decide("a", &holders(&c.holders), &replicas(&c.replicas));
            assert_eq!(d.keep, set(&c.keep), "{}", c.what);
            assert_eq!(d.release, set(&c.release), "{}", c.what);
            assert_eq!(d.acquire.len(), c.acquire_count, "{}", c.what);
            for s in &d.acquire {
                assert!(
                    c.holders[*s as usize].is_none(),
                    "{}: took a held shard",
                    c.what
                );
            }
        }
    }

    /// The shared state of a simulated fleet: one holder per shard, so
    /// what the model checks is that replicas only take free shards and
    /// only release their own.
    fn round(holders: &mut [Option<String>], alive: &[String], order: &[usize]) {
        let live: BTreeSet<String> = alive.iter().cloned().collect();
        for i in order {
            let Some(me) = alive.get(*i % alive.len().max(1)) else {
                continue;
            };
            let d = decide(me, holders, &live);
            for s in &d.release {
                assert_eq!(holders[*s as usize].as_deref(), Some(me.as_str()));
                holders[*s as usize] = None;
            }
            for s in &d.acquire {
                // The resourceVersion guard: another took it first.
                assert!(holders[*s as usize].is_none(), "acquired a held shard");
                holders[*s as usize] = Some(me.clone());
            }
            for s in &d.keep {
                assert_eq!(holders[*s as usize].as_deref(), Some(me.as_str()));
            }
        }
    }

    fn settled(holders: &[Option<String>], alive: &[String]) {
        let shards = u32::try_from(holders.len()).unwrap();
        let share = fair_share(shards, alive.len());
        assert!(
            holders.iter().all(Option::is_some),
            "a shard unheld: {holders:?}"
        );
        let floor = shards / alive.len() as u32;
        for r in alive {
            let held = holders.iter().filter(|h| h.as_deref() == Some(r)).count() as u32;
            assert!(held <= share, "{r} holds {held} > {share}: {holders:?}");
            assert!(held >= floor, "{r} holds {held} < {floor}: {holders:?}");
        }
        for h in holders.iter().flatten() {
            assert!(alive.contains(h), "a dead replica holds a shard");
        }
    }

    proptest! {
        /// Replicas come and go; after each change and a few rounds (in any
        /// order), every shard has exactly one live holder and nobody holds
        /// more than its fair share.
        #[test]
        fn rounds_converge(
            shards in 1u32..24,
            events in proptest::collection::vec((any::<bool>(), 0usize..6), 1..8),
            orders in proptest::collection::vec(proptest::collection::vec(0usize..8, 1..16), 6),
        ) {
            let mut holders: Vec<Option<String>> = vec![None; shards as usize];
            let mut alive: Vec<String> = vec!["r0".to_owned()];
            let mut next = 1;
            for (join, victim) in events {
                if join || alive.len() == 1 {
                    alive.push(format!("r{next}"));
                    next += 1;
                } else {
                    // Killed: its Leases expire, so its shards are free.
                    let gone = alive.remove(victim % alive.len());
                    for h in holders.iter_mut() {
                        if h.as_deref() == Some(gone.as_str()) {
                            *h = None;
                        }
                    }
                }
                // One round with every replica, then the random orders.
                let all: Vec<usize> = (0..alive.len()).collect();
                round(&mut holders, &alive, &all);
                for order in &orders {
                    round(&mut holders, &alive, order);
                }
                // Then full rounds until nothing changes (a bound, so a
                // livelock fails the test).
                let mut rounds = 0;
                loop {
                    let before = holders.clone();
                    round(&mut holders, &alive, &all);
                    if before == holders {
                        break;
                    }
                    rounds += 1;
                    prop_assert!(rounds < 8, "no convergence: {holders:?}");
                }
                settled(&holders, &alive);
            }
        }
    }
}
