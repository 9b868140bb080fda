//! Who may hold a slot of the hub's reader pools (issue 35, spec §5): the
//! Dashboard's and the web page's connections, and the Dashboard calls
//! (web page event streams included). Per-address caps that add up to the
//! whole pool let two addresses deny every reader; this table keeps them
//! from it, the one rule for every pool, sans I/O so it is tested as a
//! table and a property:
//!
//! - one source (an exact IPv4 address, or an IPv6 /64: one host's usual
//!   allotment, where a new address costs an attacker nothing) holds at
//!   most `per_source` slots, by default [`eighth`] of the pool;
//! - when the pool is full, a newcomer from a source holding less than its
//!   fair share (`capacity / sources present`, the newcomer's counted)
//!   takes the oldest slot of the source holding the most, provided that
//!   source holds at least two more than the newcomer (so two sources never
//!   trade a slot back and forth);
//! - `reserve` slots are kept for callers the runtime already authorized:
//!   others are admitted while fewer than `capacity - reserve` are held.
//!
//! The runtime closes what an eviction names and gives each slot back
//! ([`Slots::release`]) when its connection or call ends.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

/// Where a reader comes from, as the pools count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// An exact IPv4 address (IPv4-mapped IPv6 addresses included).
    V4([u8; 4]),
    /// The first 64 bits of an IPv6 address.
    V6(u64),
}

impl Source {
    pub fn of(ip: IpAddr) -> Source {
        match ip {
            IpAddr::V4(v4) => Source::V4(v4.octets()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Source::V4(v4.octets()),
                None => Source::V6((u128::from(v6) >> 64) as u64),
            },
        }
    }
}

/// One slot held, as the table names it.
pub type SlotId = u64;

/// An eighth of `capacity`, at least one: what one source holds at most
/// by default (64 connections -> 8; 256 calls -> 32).
pub fn eighth(capacity: usize) -> usize {
    (capacity / 8).max(1)
}

/// A slot given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// A free slot.
    Admitted(SlotId),
    /// The pool was full: `evicted` (the oldest slot of the source holding
    /// the most) is released for the newcomer; the runtime closes it.
    Evicting { id: SlotId, evicted: SlotId },
}

impl Admission {
    pub fn id(self) -> SlotId {
        match self {
            Admission::Admitted(id) | Admission::Evicting { id, .. } => id,
        }
    }
}

/// Why no slot was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("this client address holds {max}, its share of the pool")]
    Source { max: usize },
    #[error("all {held} slots are held and this client address holds its fair share")]
    Full { held: usize },
}

/// The slots of one pool: who holds which, oldest first.
#[derive(Debug, Clone)]
pub struct Slots {
    capacity: usize,
    per_source: usize,
    reserve: usize,
    held: HashMap<Source, VecDeque<SlotId>>,
    owner: HashMap<SlotId, Source>,
    next: SlotId,
}

impl Slots {
    /// `capacity` slots (at least 1), `per_source` at most per source
    /// (clamped to 1..=capacity), `reserve` kept for authorized callers
    /// (clamped below `capacity`).
    pub fn new(capacity: usize, per_source: usize, reserve: usize) -> Self {
        let capacity = capacity.max(1);
        Slots {
            capacity,
            per_source: per_source.clamp(1, capacity),
            reserve: reserve.min(capacity - 1),
            held: HashMap::new(),
            owner: HashMap::new(),
            next: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn per_source(&self) -> usize {
        self.per_source
    }

    /// Slots held in all.
    pub fn len(&self) -> usize {
        self.owner.len()
    }

    pub fn is_empty(&self) -> bool {
        self.owner.is_empty()
    }

    /// Whether `id` is held (not released nor evicted).
    pub fn held(&self, id: SlotId) -> bool {
        self.owner.contains_key(&id)
    }

    /// Slots `source` holds.
    pub fn held_by(&self, source: Source) -> usize {
        self.held.get(&source).map_or(0, VecDeque::len)
    }

    /// Sources holding a slot.
    pub fn sources(&self) -> usize {
        self.held.len()
    }

    /// A slot for `source` (`authorized`: may use the reserve), or why
    /// not. Nothing changes on a refusal.
    pub fn admit(&mut self, source: Source, authorized: bool) -> Result<Admission, Refusal> {
        let mine = self.held_by(source);
        let room = match authorized {
            true => self.capacity,
            false => self.capacity - self.reserve,
        };
        if mine >= self.per_source {
            // Full as well: the pool's limit is the one to name.
            return Err(match self.len() >= room {
                true => Refusal::Full { held: self.len() },
                false => Refusal::Source {
                    max: self.per_source,
                },
            });
        }
        if self.len() < room {
            return Ok(Admission::Admitted(self.insert(source)));
        }
        let present = self.held.len() + usize::from(mine == 0);
        let fair = self.capacity / present;
        let victim = self
            .held
            .iter()
            .filter(|(s, _)| **s != source)
            .filter_map(|(s, ids)| Some((ids.len(), *ids.front()?, *s)))
            // The most held; among those, the oldest slot.
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        match victim {
            Some((most, evicted, _)) if mine < fair && most > mine + 1 => {
                self.release(evicted);
                let id = self.insert(source);
                Ok(Admission::Evicting { id, evicted })
            }
            _ => Err(Refusal::Full { held: self.len() }),
        }
    }

    fn insert(&mut self, source: Source) -> SlotId {
        let id = self.next;
        self.next += 1;
        self.held.entry(source).or_default().push_back(id);
        self.owner.insert(id, source);
        id
    }

    /// Gives `id` back (nothing if it was evicted or released already).
    pub fn release(&mut self, id: SlotId) {
        let Some(source) = self.owner.remove(&id) else {
            return;
        };
        if let Some(ids) = self.held.get_mut(&source) {
            ids.retain(|i| *i != id);
            if ids.is_empty() {
                self.held.remove(&source);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v4(last: u8) -> Source {
        Source::V4([10, 0, 0, last])
    }

    #[test]
    fn sources_are_ipv4_addresses_and_ipv6_slash_64s() {
        let of = |s: &str| Source::of(s.parse().unwrap());
        assert_eq!(of("10.0.0.1"), v4(1));
        assert_ne!(of("10.0.0.1"), of("10.0.0.2"));
        assert_eq!(of("::ffff:10.0.0.1"), v4(1));
        assert_eq!(of("2001:db8:1:2::1"), of("2001:db8:1:2:ffff::9"));
        assert_ne!(of("2001:db8:1:2::1"), of("2001:db8:1:3::1"));
        assert_eq!(eighth(64), 8);
        assert_eq!(eighth(256), 32);
        assert_eq!(eighth(4), 1);
    }

    /// Each case: (capacity, per source, reserve, admissions as (source,
    /// authorized)) -> per admission: Ok(Some(evicted index)) /
    /// Ok(None) admitted / Err(()) refused. Indices count admissions.
    #[test]
    fn admissions_follow_the_rules() {
        type Case = (
            usize,
            usize,
            usize,
            &'static [(u8, bool)],
            &'static [Result<Option<usize>, ()>],
        );
        let cases: &[Case] = &[
            // One source stops at its share; another still gets in.
            (
                8,
                2,
                0,
                &[(1, true), (1, true), (1, true), (2, true)],
                &[Ok(None), Ok(None), Err(()), Ok(None)],
            ),
            // Full of one source: a newcomer takes its oldest slot, a
            // second newcomer the next oldest.
            (
                4,
                4,
                0,
                &[
                    (1, true),
                    (1, true),
                    (1, true),
                    (1, true),
                    (2, true),
                    (3, true),
                ],
                &[
                    Ok(None),
                    Ok(None),
                    Ok(None),
                    Ok(None),
                    Ok(Some(0)),
                    Ok(Some(1)),
                ],
            ),
            // Two sources 2+2 of 4: a third (fair 4/3 = 1) evicts the
            // oldest of the tied holders, then is at its fair share.
            (
                4,
                4,
                0,
                &[
                    (1, true),
                    (2, true),
                    (2, true),
                    (1, true),
                    (3, true),
                    (3, true),
                ],
                &[Ok(None), Ok(None), Ok(None), Ok(None), Ok(Some(0)), Err(())],
            ),
            // No trading back and forth: 3+1 of 4, the one-holder's fair
            // share is 2 and the other holds 3 = 1 + 2: one more, then no.
            (
                4,
                4,
                0,
                &[
                    (1, true),
                    (1, true),
                    (1, true),
                    (2, true),
                    (2, true),
                    (2, true),
                ],
                &[Ok(None), Ok(None), Ok(None), Ok(None), Ok(Some(0)), Err(())],
            ),
            // The reserve: unauthorized callers stop at capacity - 1,
            // an authorized one takes the last slot.
            (
                4,
                4,
                1,
                &[(1, false), (2, false), (3, false), (4, false), (4, true)],
                &[Ok(None), Ok(None), Ok(None), Err(()), Ok(None)],
            ),
        ];
        for (i, (capacity, per, reserve, asks, want)) in cases.iter().enumerate() {
            let mut slots = Slots::new(*capacity, *per, *reserve);
            let mut ids = Vec::new();
            let got: Vec<Result<Option<usize>, ()>> = asks
                .iter()
                .map(|(s, authorized)| match slots.admit(v4(*s), *authorized) {
                    Ok(a) => {
                        ids.push(a.id());
                        Ok(match a {
                            Admission::Admitted(_) => None,
                            Admission::Evicting { evicted, .. } => {
                                ids.iter().position(|id| *id == evicted)
                            }
                        })
                    }
                    Err(_) => {
                        ids.push(SlotId::MAX);
                        Err(())
                    }
                })
                .collect();
            assert_eq!(&got, want, "case {i}");
        }
    }

    #[test]
    fn released_slots_are_free_again_and_sources_forgotten() {
        let mut slots = Slots::new(2, 1, 0);
        let a = slots.admit(v4(1), false).unwrap().id();
        assert_eq!(slots.admit(v4(1), false), Err(Refusal::Source { max: 1 }));
        slots.release(a);
        slots.release(a);
        assert!(slots.is_empty());
        assert_eq!(slots.sources(), 0);
        assert!(slots.admit(v4(1), false).is_ok());
    }

    /// An operation on the table: admit from a source, or release the
    /// n-th slot held (modulo).
    #[derive(Clone, Debug)]
    enum Op {
        Admit(u8, bool),
        Release(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u8..6, any::<bool>()).prop_map(|(s, a)| Op::Admit(s, a)),
            1 => any::<usize>().prop_map(Op::Release),
        ]
    }

    proptest! {
        /// Whatever the sequence: no source above its share, never more
        /// than capacity held, unauthorized callers never take the
        /// reserve, an eviction always takes from a source holding at
        /// least two more than the newcomer and the most of all.
        #[test]
        fn bounds_hold_after_every_admission(
            capacity in 1usize..24,
            per in 1usize..24,
            reserve in 0usize..4,
            ops in proptest::collection::vec(op(), 0..200),
        ) {
            let mut slots = Slots::new(capacity, per, reserve);
            let mut held: Vec<SlotId> = Vec::new();
            for op in ops {
                match op {
                    Op::Admit(s, authorized) => {
                        let before = slots.clone();
                        let source = v4(s);
                        match slots.admit(source, authorized) {
                            Ok(Admission::Admitted(id)) => {
                                prop_assert_eq!(slots.len(), before.len() + 1);
                                if !authorized {
                                    prop_assert!(slots.len() <= slots.capacity() - slots.reserve);
                                }
                                held.push(id);
                            }
                            Ok(Admission::Evicting { id, evicted }) => {
                                let victim = before.owner[&evicted];
                                prop_assert_ne!(victim, source);
                                let most = before.held.values().map(VecDeque::len).max().unwrap_or(0);
                                prop_assert_eq!(before.held_by(victim), most);
                                prop_assert!(most >= before.held_by(source) + 2);
                                prop_assert_eq!(slots.len(), before.len());
                                held.retain(|h| *h != evicted);
                                held.push(id);
                            }
                            Err(_) => prop_assert_eq!(slots.len(), before.len()),
                        }
                        prop_assert!(slots.held_by(source) <= slots.per_source());
                    }
                    Op::Release(n) => {
                        if !held.is_empty() {
                            let id = held.remove(n % held.len());
                            slots.release(id);
                        }
                    }
                }
                prop_assert!(slots.len() <= slots.capacity());
                prop_assert_eq!(slots.len(), held.len());
                for s in 0..6 {
                    prop_assert!(slots.held_by(v4(s)) <= slots.per_source());
                }
            }
        }

        /// A pool full of one source (its share the whole pool): a
        /// newcomer holding less than its fair share is always admitted.
        #[test]
        fn a_newcomer_gets_into_a_pool_full_of_one_address(
            capacity in 2usize..64,
            newcomers in 1usize..8,
        ) {
            let mut slots = Slots::new(capacity, capacity, 0);
            for _ in 0..capacity {
                slots.admit(v4(0), false).unwrap();
            }
            for n in 1..=newcomers {
                let fair = capacity / (slots.sources() + 1);
                if fair == 0 {
                    break;
                }
                let admitted = slots.admit(v4(n as u8), false);
                prop_assert!(
                    matches!(admitted, Ok(Admission::Evicting { .. })),
                    "newcomer {} refused: {:?}", n, admitted
                );
            }
        }
    }
}
