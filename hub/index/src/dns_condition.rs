//! The hub's `gwhub.io/DNSPublished` condition (spec section 8,
//! "Visible"), set by the fleet DNS controller per hub Gateway and written
//! with the hub's status: the aggregator puts it first among the
//! conditions kept beside the aggregated ones, so it is kept, like
//! `kuadrant.io/MultiClusterAggregated`, when conditions are cut to 8.
//!
//! Decided here: the condition travels through the engine as the first of
//! the "kept as they are" conditions (other writers' take the slots after
//! it), so the engine needs no new input; it is then not counted as another
//! writer's (the status writer applies it with field manager `gwhub`).
//! Only the leader decides DNS: a replica that does not lead but writes
//! status (`--status-shards`) carries the condition on the hub Gateway as
//! it is ([`DnsMode::Following`]); with fleet DNS off it is removed.

use std::collections::BTreeMap;

use gwhub_dns_rules::{CONDITION_TYPE, DnsCondition};
use gwhub_hub_rules::aggregate::{GatewayKey, HubGateway};
use parking_lot::Mutex;

use super::Index;

/// Per hub Gateway, the condition the DNS controller wants (taken alone),
/// and whether it decides them.
#[derive(Default)]
pub(super) struct DnsConditions(
    pub(super) Mutex<BTreeMap<GatewayKey, DnsCondition>>,
    pub(super) Mutex<DnsMode>,
);

/// Who decides `gwhub.io/DNSPublished` on this replica.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DnsMode {
    /// Fleet DNS is off: the condition is removed.
    #[default]
    Off,
    /// Another replica leads: the condition is carried as it is.
    Following,
    /// This replica's controller decides it ([`Index::set_dns_condition`]).
    Leading,
}

impl Index {
    /// Sets (or, with `None`, removes) `key`'s `gwhub.io/DNSPublished`; the
    /// hub Gateway is re-aggregated (and its status written) if it changed.
    pub fn set_dns_condition(&self, key: &GatewayKey, condition: Option<DnsCondition>) -> bool {
        let changed = {
            let mut map = self.inner.dns_conditions.0.lock();
            match condition {
                Some(c) if map.get(key) == Some(&c) => false,
                Some(c) => {
                    map.insert(key.clone(), c);
                    true
                }
                None => map.remove(key).is_some(),
            }
        };
        if changed {
            self.mark_dirty_hub(std::iter::once(key.clone()).collect());
        }
        changed
    }

    /// The DNS condition of each of `keys` that has one, under one short
    /// lock (an aggregation pass's read).
    pub(super) fn dns_conditions_of(
        &self,
        keys: &[GatewayKey],
    ) -> BTreeMap<GatewayKey, DnsCondition> {
        let all = self.inner.dns_conditions.0.lock();
        keys.iter()
            .filter_map(|k| all.get(k).map(|c| (k.clone(), c.clone())))
            .collect()
    }

    /// Who decides the condition now (see [`DnsMode`]); every hub Gateway
    /// is re-aggregated when that changes.
    pub fn set_dns_mode(&self, mode: DnsMode) {
        let changed = {
            let mut m = self.inner.dns_conditions.1.lock();
            std::mem::replace(&mut *m, mode) != mode
        };
        if changed {
            let keys = self.live_hub_keys().into_iter().collect();
            self.mark_dirty_hub(keys);
        }
    }

    pub(super) fn dns_mode(&self) -> DnsMode {
        *self.inner.dns_conditions.1.lock()
    }

    /// `key`'s `gwhub.io/DNSPublished`, as set.
    pub fn dns_condition(&self, key: &GatewayKey) -> Option<DnsCondition> {
        self.inner.dns_conditions.0.lock().get(key).cloned()
    }
}

/// Puts `wanted` into `hub` as the first condition kept as it is (its
/// lastTransitionTime carried from the one on the hub Gateway while the
/// status is the same), and takes any other copy out; `carry`: keep the
/// one on the hub Gateway as it is instead ([`DnsMode::Following`]).
pub(super) fn inject(
    hub: &mut HubGateway,
    wanted: Option<&DnsCondition>,
    carry: bool,
    now: jiff::Timestamp,
) {
    let previous: Vec<_> = hub
        .previous
        .iter()
        .chain(hub.foreign.iter())
        .filter(|c| c.type_ == CONDITION_TYPE)
        .cloned()
        .collect();
    hub.previous.retain(|c| c.type_ != CONDITION_TYPE);
    hub.foreign.retain(|c| c.type_ != CONDITION_TYPE);
    if carry {
        if let Some(c) = previous.into_iter().next() {
            hub.foreign.insert(0, c);
        }
        return;
    }
    if let Some(w) = wanted {
        let c = gwhub_hub_rules::aggregate::conditions::to_condition(
            CONDITION_TYPE,
            w.status,
            w.reason,
            w.message.clone(),
            hub.generation,
            &previous,
            now,
        );
        hub.foreign.insert(0, c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_condition_goes_first_and_keeps_its_transition_time() {
        let old = jiff::Timestamp::from_second(1_000).unwrap();
        let now = jiff::Timestamp::from_second(2_000).unwrap();
        let prev =
            gwhub_model::conditions::new(CONDITION_TYPE, "True", "Published", "", Some(1), old);
        let other = gwhub_model::conditions::new("example.com/X", "True", "R", "", Some(1), old);
        let mut hub = HubGateway {
            generation: 2,
            previous: vec![prev],
            foreign: vec![other],
        };
        let want = DnsCondition {
            status: "True",
            reason: "Published",
            message: String::new(),
        };
        inject(&mut hub, Some(&want), false, now);
        assert!(hub.previous.is_empty());
        assert_eq!(hub.foreign[0].type_, CONDITION_TYPE);
        assert_eq!(hub.foreign[0].observed_generation, Some(2));
        assert_eq!(hub.foreign[0].last_transition_time.0, old);
        assert_eq!(hub.foreign[1].type_, "example.com/X");
        let carried = hub.clone();
        inject(&mut hub, None, true, now);
        assert_eq!(hub.foreign, carried.foreign);
        inject(&mut hub, None, false, now);
        assert_eq!(hub.foreign.len(), 1);
    }
}
