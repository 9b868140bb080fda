//! The hub's budgets as a whole (issue 17): what bounds its memory and
//! connections under hostile load, each a `gwhub serve` flag with a default
//! and a counter or gauge on `/metrics`.
//!
//! Memory bound (see the README's security notes), roughly:
//! `clusters × 2 × max-cluster-report-bytes` (a cluster's report plus a
//! snapshot being assembled) `+ ingest streams × 4 MiB` (one decoded
//! message each) `+ max-dashboard-calls × 2 × view` (a watch message queued
//! and one in flight, for at most `--watch-send-timeout`), where `view`,
//! the encoded aggregate, is at most the sum of the clusters' reports.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::conn::ListenerCounters;

/// Default of `--max-cluster-report-bytes`: 32 MiB, about 10,000 Gateways
/// of 3 KiB (a Gateway with a few listeners encodes to well under 1 KiB).
pub const DEFAULT_MAX_CLUSTER_REPORT_BYTES: u64 = 32 * 1024 * 1024;

/// The flags; [`Default`] is what `gwhub serve` uses without them.
#[derive(Clone, Debug, clap::Args)]
pub struct Budgets {
    /// Bytes of reported status one cluster may hold (the encoded size of
    /// its Gateways). A snapshot or delta past it ends the stream with
    /// RESOURCE_EXHAUSTED; the cluster keeps its last good report.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_CLUSTER_REPORT_BYTES)]
    pub max_cluster_report_bytes: u64,
    /// Clusters the hub keeps (connected or remembered); a stream for a new
    /// cluster past it is refused with RESOURCE_EXHAUSTED.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub max_clusters: usize,
    /// Dashboard calls (watches included) open at once; more are refused
    /// with RESOURCE_EXHAUSTED.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_dashboard_calls: usize,
    /// Dashboard calls open at once on one connection.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub max_dashboard_calls_per_connection: usize,
    /// A Dashboard watcher that takes no message for this long (it grants
    /// no flow-control window) is dropped and its connection closed, rather
    /// than the hub buffering for it.
    #[arg(long, value_name = "DUR", default_value = "60s", value_parser = gwhub_common::time::parse_duration)]
    pub watch_send_timeout: Duration,
    /// Open connections per gRPC listener (ingest, Dashboard); past it the
    /// hub stops accepting until one closes.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_connections: usize,
    /// A TLS handshake not finished within this is dropped.
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = gwhub_common::time::parse_duration)]
    pub tls_handshake_timeout: Duration,
    /// A connection that starts no call within this is closed.
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = gwhub_common::time::parse_duration)]
    pub idle_connection_timeout: Duration,
    /// With --insecure, a disconnected cluster silent for this long is
    /// forgotten (its report and its /metrics rows), so made-up cluster
    /// names cannot grow the registry.
    #[arg(long, value_name = "DUR", default_value = "10m", value_parser = gwhub_common::time::parse_duration)]
    pub insecure_prune_after: Duration,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            max_cluster_report_bytes: DEFAULT_MAX_CLUSTER_REPORT_BYTES,
            max_clusters: 1000,
            max_dashboard_calls: 256,
            max_dashboard_calls_per_connection: 16,
            watch_send_timeout: Duration::from_secs(60),
            max_connections: 1024,
            tls_handshake_timeout: Duration::from_secs(10),
            idle_connection_timeout: Duration::from_secs(30),
            insecure_prune_after: Duration::from_secs(600),
        }
    }
}

/// The budgets' counters, rendered on `/metrics`.
#[derive(Debug, Default)]
pub struct Counters {
    pub ingest: Arc<ListenerCounters>,
    pub dashboard: Arc<ListenerCounters>,
    /// Streams refused for `--max-cluster-report-bytes`.
    pub refused_cluster_report_bytes: AtomicU64,
    /// Streams refused for `--max-clusters`.
    pub refused_clusters: AtomicU64,
    /// Dashboard calls refused for `--max-dashboard-calls`.
    pub refused_dashboard_calls: AtomicU64,
    /// Dashboard calls refused for `--max-dashboard-calls-per-connection`.
    pub refused_dashboard_calls_per_connection: AtomicU64,
    /// Watchers dropped for `--watch-send-timeout`.
    pub watchers_dropped: AtomicU64,
    /// Dashboard calls open right now.
    pub dashboard_calls: AtomicU64,
    /// Clusters forgotten by `--insecure-prune-after`.
    pub clusters_pruned: AtomicU64,
}

impl Counters {
    pub fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}
