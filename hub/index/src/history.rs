//! Each hub Gateway's last status transitions (`--gateway-history`), for
//! `GetGatewayHistory` and the web page. The aggregation pass records
//! them; the rules (what a transition is) are `gwhub_hub_rules::history`.
//! Its own lock, taken alone.

use std::collections::{BTreeMap, BTreeSet};

use gwhub_hub_rules::history::{Conditions, Ring, Transition};
use parking_lot::Mutex;

use super::Index;
use gwhub_hub_rules::aggregate::GatewayKey;

/// The history part of the index.
pub(super) struct History {
    /// The last status transitions of each reported hub Gateway (taken
    /// alone, by the aggregation pass and `GetGatewayHistory`).
    rings: Mutex<BTreeMap<GatewayKey, Ring>>,
    /// `--gateway-history`: transitions kept per hub Gateway; 0: none.
    capacity: usize,
}

impl History {
    pub(super) fn new(capacity: usize) -> Self {
        History {
            rings: Mutex::new(BTreeMap::new()),
            capacity,
        }
    }

    pub(super) fn capacity(&self) -> usize {
        self.capacity
    }

    fn latest(&self, key: &GatewayKey, limit: usize) -> Option<Vec<Transition>> {
        self.rings.lock().get(key).map(|r| r.latest(limit))
    }

    /// Records the transitions of `key` when only `clusters` changed since
    /// the last record: `now` holds the hub Gateway's own conditions and
    /// those clusters' (see `Ring::record_clusters`). Returns `false`, having
    /// recorded nothing, when `key` has no history yet (then every
    /// cluster's conditions are needed: [`History::record`]).
    pub(super) fn record_clusters(
        &self,
        key: &GatewayKey,
        now: &Conditions,
        clusters: &BTreeSet<&str>,
        millis: i64,
    ) -> bool {
        let mut all = self.rings.lock();
        match all.get_mut(key) {
            Some(ring) if self.capacity > 0 => {
                ring.record_clusters(now, clusters, millis, self.capacity);
                true
            }
            _ => false,
        }
    }

    /// Records the transitions of `key`; `None` forgets its history.
    pub(super) fn record(&self, key: &GatewayKey, now: Option<&Conditions>, millis: i64) {
        let mut all = self.rings.lock();
        match now {
            Some(now) if self.capacity > 0 => {
                all.entry(key.clone())
                    .or_default()
                    .record(now, millis, self.capacity);
            }
            _ => {
                all.remove(key);
            }
        }
    }
}

impl Index {
    /// The transitions kept per hub Gateway.
    pub fn history_capacity(&self) -> usize {
        self.inner.history.capacity()
    }

    /// The newest `limit` (0: all) status transitions of `key`, oldest
    /// first; `None` if the hub keeps no history for it.
    pub fn history(&self, key: &GatewayKey, limit: usize) -> Option<Vec<Transition>> {
        self.inner.history.latest(key, limit)
    }
}
