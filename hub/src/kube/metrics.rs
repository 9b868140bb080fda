//! Counters of the hub's Kubernetes mode, readable by tests and logs.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Metrics {
    /// Hub Gateway status applies the API server accepted.
    pub status_writes: AtomicU64,
    /// Status applies skipped because the live status already matched
    /// (ignoring times).
    pub status_writes_skipped: AtomicU64,
    pub status_write_errors: AtomicU64,
    pub report_writes: AtomicU64,
    pub report_writes_skipped: AtomicU64,
    pub report_write_errors: AtomicU64,
    /// Bytes of Gateway status in the ClusterReport writes accepted.
    pub report_write_bytes: AtomicU64,
    /// Gateways left out of the store: too large for any object.
    pub report_gateways_unstored: AtomicU64,
    /// API writes that waited for the `--kube-api-qps` budget.
    pub api_throttled_waits: AtomicU64,
    /// Microseconds API writes waited for the budget, summed.
    pub api_throttled_micros: AtomicU64,
    /// Times this replica became leader.
    pub leader_transitions: AtomicU64,
    /// Cluster stale/fresh Events published (see `kube::events`).
    pub events_published: AtomicU64,
    pub event_publish_errors: AtomicU64,
}

impl Metrics {
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
