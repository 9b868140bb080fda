//! The hub Gateways as the management cluster holds them (Kubernetes
//! mode): set by its Gateway watch and by the answers of status writes,
//! read by the passes and the status writer. Apart from the passes
//! because only the watch and the writer change them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use gwhub_hub_rules::aggregate::{GatewayKey, LiveHub};

use crate::Index;

impl Index {
    /// Sets (or, with `None`, forgets) the hub Gateway `key` as the
    /// management cluster holds it; it is re-aggregated if that changed.
    /// Returns whether it changed.
    pub fn set_live_hub(&self, key: GatewayKey, live: Option<LiveHub>) -> bool {
        let changed = {
            let mut map = self.inner.aggregator.live.lock();
            match live {
                Some(mut live) => {
                    if let Some(before) = map.get(&key) {
                        live.carry_written(before);
                        if **before == live {
                            return false;
                        }
                    }
                    map.insert(key.clone(), Arc::new(live));
                    true
                }
                None => map.remove(&key).is_some(),
            }
        };
        if changed {
            self.mark_dirty_hub(BTreeSet::from([key]));
        }
        changed
    }

    /// Installs `written` (the answer to a status write planned against
    /// `planned`, read by [`LiveHub::from_written`]) as the live hub
    /// Gateway `key`, unless the watch installed another object meanwhile:
    /// the answer may be older than that (a spec edited since), and the
    /// watch is then the source; that object then takes the hub's written
    /// conditions as its [`LiveHub::written`], since the watch's copy may
    /// as well predate the write. Returns whether anything changed.
    pub fn set_live_hub_written(
        &self,
        key: GatewayKey,
        planned: &Arc<LiveHub>,
        written: LiveHub,
    ) -> bool {
        {
            let mut map = self.inner.aggregator.live.lock();
            match map.get(&key) {
                Some(current) if Arc::ptr_eq(current, planned) => {
                    if **current == written {
                        return false;
                    }
                    map.insert(key.clone(), Arc::new(written));
                }
                Some(current)
                    if current.uid == written.uid && current.written != written.written =>
                {
                    let mut newer = LiveHub::clone(current);
                    newer.written = written.written;
                    map.insert(key.clone(), Arc::new(newer));
                }
                _ => return false,
            }
        }
        self.mark_dirty_hub(BTreeSet::from([key]));
        true
    }

    /// Replaces every live hub Gateway (after the watch listed them all);
    /// the ones that changed, came or went are re-aggregated.
    pub fn replace_live_hubs(&self, all: BTreeMap<GatewayKey, LiveHub>) {
        let affected: BTreeSet<GatewayKey> = {
            let mut map = self.inner.aggregator.live.lock();
            let mut affected: BTreeSet<GatewayKey> = map
                .keys()
                .filter(|k| !all.contains_key(*k))
                .cloned()
                .collect();
            let mut next = BTreeMap::new();
            for (key, mut live) in all {
                let old = map.remove(&key);
                if let Some(old) = &old {
                    live.carry_written(old);
                }
                match old {
                    Some(old) if *old == live => {
                        next.insert(key, old);
                    }
                    _ => {
                        affected.insert(key.clone());
                        next.insert(key, Arc::new(live));
                    }
                }
            }
            *map = next;
            affected
        };
        self.mark_dirty_hub(affected);
    }

    /// The hub Gateway `key` as the management cluster holds it.
    pub fn live_hub(&self, key: &GatewayKey) -> Option<Arc<LiveHub>> {
        self.inner.aggregator.live.lock().get(key).cloned()
    }

    /// The live hub Gateway of each of `keys`, in their order, under
    /// one short lock (an aggregation pass's read).
    pub(in crate::aggregator) fn live_hubs_of(
        &self,
        keys: &[GatewayKey],
    ) -> Vec<Option<Arc<LiveHub>>> {
        let live = self.inner.aggregator.live.lock();
        keys.iter().map(|k| live.get(k).cloned()).collect()
    }

    /// Every hub Gateway the management cluster holds.
    pub fn live_hub_keys(&self) -> Vec<GatewayKey> {
        self.inner.aggregator.live.lock().keys().cloned().collect()
    }
}
