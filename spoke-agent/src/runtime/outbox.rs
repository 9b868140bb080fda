//! The agent's send queue: bounded and coalescing, so a slow or absent hub
//! costs at most one pending entry per Gateway instead of one per change.
//!
//! Each key has at most one pending entry; a newer change replaces it (a
//! delete replaces an upsert and vice versa) but keeps its place in line, so
//! entries leave in order of the *first* change still pending. If more keys
//! are pending than `capacity`, the outbox gives up on deltas: it drops them
//! all and reports [`Pushed::Overflow`]; the caller then owes the hub a full
//! snapshot, which supersedes every delta anyway.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// One pending change for a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change<V> {
    /// The key now has this value.
    Upsert(V),
    /// The key is gone.
    Delete,
}

/// What [`Outbox::push`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pushed {
    /// The key had nothing pending; it joined the end of the line.
    Queued,
    /// The key already had a pending entry; it was replaced in place.
    Coalesced,
    /// Capacity exceeded (or already overflowed): everything was dropped and
    /// a full snapshot is owed. See `Outbox::overflowed`.
    Overflow,
}

/// Bounded coalescing FIFO of changes keyed by `K`.
#[derive(Debug)]
pub struct Outbox<K, V> {
    entries: HashMap<K, Change<V>>,
    order: VecDeque<K>,
    capacity: usize,
    overflowed: bool,
}

impl<K: Hash + Eq + Clone, V> Outbox<K, V> {
    /// An outbox holding at most `capacity` distinct pending keys (min 1).
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
            overflowed: false,
        }
    }

    /// Queues `change` for `key`, coalescing with a pending entry.
    pub fn push(&mut self, key: K, change: Change<V>) -> Pushed {
        if self.overflowed {
            return Pushed::Overflow;
        }
        match self.entries.entry(key) {
            Entry::Occupied(mut slot) => {
                slot.insert(change);
                Pushed::Coalesced
            }
            Entry::Vacant(slot) => {
                if self.order.len() >= self.capacity {
                    self.entries.clear();
                    self.order.clear();
                    self.overflowed = true;
                    return Pushed::Overflow;
                }
                self.order.push_back(slot.key().clone());
                slot.insert(change);
                Pushed::Queued
            }
        }
    }

    /// Takes the oldest pending entry.
    pub(crate) fn pop(&mut self) -> Option<(K, Change<V>)> {
        let key = self.order.pop_front()?;
        let change = self
            .entries
            .remove(&key)
            .expect("outbox order and entries agree");
        Some((key, change))
    }

    /// Takes up to `max` of the oldest pending entries, oldest first.
    pub fn drain(&mut self, max: usize) -> Vec<(K, Change<V>)> {
        let n = max.min(self.order.len());
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.extend(self.pop());
        }
        out
    }

    /// Drops everything pending and the overflow mark: a full snapshot is
    /// being sent, which carries every change.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.order.clear();
        self.overflowed = false;
    }

    /// Whether deltas were dropped and a full snapshot is owed.
    pub(crate) fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Number of keys with a pending entry.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The most keys that can be pending at once.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_by_first_pending_time() {
        let mut o = Outbox::new(10);
        assert_eq!(o.push("a", Change::Upsert(1)), Pushed::Queued);
        assert_eq!(o.push("b", Change::Upsert(1)), Pushed::Queued);
        assert_eq!(o.push("a", Change::Upsert(2)), Pushed::Coalesced);
        assert_eq!(o.push("c", Change::Delete), Pushed::Queued);
        assert_eq!(
            o.drain(10),
            vec![
                ("a", Change::Upsert(2)),
                ("b", Change::Upsert(1)),
                ("c", Change::Delete)
            ]
        );
        assert!(o.is_empty());
    }

    #[test]
    fn newest_wins_delete_and_upsert_replace_each_other() {
        let mut o = Outbox::new(10);
        o.push("a", Change::Upsert(1));
        o.push("a", Change::Delete);
        assert_eq!(o.pop(), Some(("a", Change::Delete)));
        o.push("a", Change::Delete);
        o.push("a", Change::Upsert(3));
        assert_eq!(o.pop(), Some(("a", Change::Upsert(3))));
        assert_eq!(o.pop(), None);
    }

    #[test]
    fn burst_of_one_key_is_one_entry() {
        let mut o = Outbox::new(4);
        for i in 0..100_000 {
            o.push("gw", Change::Upsert(i));
        }
        assert_eq!(o.len(), 1);
        assert_eq!(o.pop(), Some(("gw", Change::Upsert(99_999))));
    }

    #[test]
    fn popped_key_requeues_at_the_end() {
        let mut o = Outbox::new(10);
        o.push("a", Change::Upsert(1));
        o.push("b", Change::Upsert(1));
        assert_eq!(o.pop().unwrap().0, "a");
        o.push("a", Change::Upsert(2));
        assert_eq!(o.drain(1), vec![("b", Change::Upsert(1))]);
        assert_eq!(o.drain(5), vec![("a", Change::Upsert(2))]);
    }

    #[test]
    fn overflow_drops_everything_until_cleared() {
        let mut o = Outbox::new(2);
        o.push(1, Change::Upsert(()));
        o.push(2, Change::Upsert(()));
        // Coalescing into a pending key never overflows.
        assert_eq!(o.push(2, Change::Delete), Pushed::Coalesced);
        assert_eq!(o.push(3, Change::Upsert(())), Pushed::Overflow);
        assert!(o.overflowed());
        assert!(o.is_empty());
        assert_eq!(o.push(1, Change::Upsert(())), Pushed::Overflow);
        assert!(o.is_empty());
        o.clear();
        assert!(!o.overflowed());
        assert_eq!(o.push(1, Change::Upsert(())), Pushed::Queued);
        assert_eq!(o.len(), 1);
        assert_eq!(o.capacity(), 2);
    }
}
