//! What the status writer takes from a pass: the agent's observed time of
//! the changes a new view carries (for the propagation histogram) and the
//! trace of the aggregation that made it. Apart from the passes because
//! the aggregator only sets these aside; the status writer takes them.

use gwhub_hub_rules::aggregate::GatewayKey;

use crate::Index;

impl Index {
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

    /// Takes the trace an aggregation of `key` left for its status write.
    pub fn take_write_trace(&self, key: &GatewayKey) -> Option<String> {
        self.inner.aggregator.write_traces.lock().remove(key)
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
