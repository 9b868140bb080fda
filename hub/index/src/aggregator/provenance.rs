//! Where a change came from, carried beside it to its status write: the
//! agent's observed time (for the propagation histogram) and the trace
//! of the delta apply. Apart from the passes because the aggregator only
//! moves these along; the status writer takes them.

use std::collections::BTreeSet;

use gwhub_hub_rules::aggregate::GatewayKey;

use crate::Index;
use crate::provenance::Stamp;

impl Index {
    /// The stamp of a delta an agent observed at `unix_millis` (0:
    /// unknown) changing `keys`, for the hub Gateways on the management
    /// cluster among them; `None` when there is nothing to measure.
    pub fn stamp(
        &self,
        keys: impl IntoIterator<Item = GatewayKey>,
        unix_millis: i64,
    ) -> Option<Stamp> {
        if unix_millis <= 0 {
            return None;
        }
        let keys: Vec<GatewayKey> = keys
            .into_iter()
            .filter(|k| self.live_hub(k).is_some())
            .collect();
        (!keys.is_empty()).then_some(Stamp {
            keys,
            at: unix_millis,
        })
    }

    /// Notes `stamp` beside the changes it came with; called by
    /// [`Index::apply_stamped`] holding the fleet lock for writing.
    pub(crate) fn note_observed_locked(&self, stamp: Stamp, changed: &BTreeSet<GatewayKey>) {
        let mut observed = self.inner.aggregator.observed.lock();
        for key in stamp.keys.into_iter().filter(|k| changed.contains(k)) {
            observed
                .entry(key)
                .and_modify(|t| *t = (*t).min(stamp.at))
                .or_insert(stamp.at);
        }
    }

    /// A stamp the status writer took for a write that failed: the next
    /// write of `key` carries its change.
    pub fn give_back_observed(&self, key: GatewayKey, unix_millis: i64) {
        self.inner
            .aggregator
            .ready
            .lock()
            .entry(key)
            .and_modify(|t| *t = (*t).min(unix_millis))
            .or_insert(unix_millis);
    }

    /// Notes that the current span (a delta apply) changed `keys`, so their
    /// next aggregation continues its trace; nothing when not traced.
    pub fn note_trace(&self, keys: impl IntoIterator<Item = GatewayKey>) {
        let traceparent = gwhub_common::logging::traceparent();
        if traceparent.is_empty() {
            return;
        }
        let mut traces = self.inner.aggregator.traces.lock();
        for key in keys {
            traces
                .aggregate
                .entry(key)
                .or_insert_with(|| traceparent.clone());
        }
    }

    /// Takes the trace an aggregation of `key` left for its status write.
    pub fn take_write_trace(&self, key: &GatewayKey) -> Option<String> {
        self.inner.aggregator.traces.lock().write.remove(key)
    }

    /// Takes the stamp of the changes aggregated into `key`'s published
    /// view, for the write planned from it (a pass moves a stamp here
    /// before it publishes the view, so a write planned from that view
    /// finds it; one moved by a newer pass meanwhile is counted with this
    /// write, a little early, never twice).
    pub fn take_observed(&self, key: &GatewayKey) -> Option<i64> {
        self.inner.aggregator.ready.lock().remove(key)
    }
}
