//! The hub's budgets as a whole (issue 17): what bounds its memory and
//! connections under hostile load, each a `gwhub serve` flag with a default
//! and a counter or gauge on `/metrics`.
//!
//! Memory bound. With `C` = `--max-clusters`, `B` =
//! `--max-cluster-report-bytes` (encoded), `k` ≈ 3 (decoded status vs its
//! encoding), `V` ≤ `C·B` the encoded aggregate (what one full Dashboard
//! answer or watch snapshot weighs), `N_i` = `--max-connections`, `S_i` =
//! [`INGEST_STREAMS_PER_CONNECTION`], `D` = `--max-dashboard-calls` and `M` =
//! 4 MiB (the largest agent message):
//!
//! ```text
//! memory ≲ base
//!        + 2·k·C·B          each cluster's report, and a snapshot being assembled
//!        + V                the aggregated views
//!        + N_i·S_i·M        one message being decoded per ingest stream
//!        + 2·D·V            per Dashboard call: a watcher holds at most one
//!                           message being written and the next one; a unary
//!                           answer keeps its call slot until it is sent. A
//!                           caller that takes nothing is dropped
//!                           --watch-send-timeout after the next change (a
//!                           watcher) or after the answer (a unary call)
//! ```
//!
//! A superseded stream ends at once, so one stream per cluster assembles a
//! snapshot; under `--insecure` the registry is also pruned
//! (`--insecure-prune-after`), and never holds more than `C` clusters.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::conn::ListenerCounters;

/// HTTP/2 streams one ingest connection may have open (an agent uses one,
/// plus a health check).
pub const INGEST_STREAMS_PER_CONNECTION: u32 = 8;
/// HTTP/2 streams beyond `--max-dashboard-calls-per-connection` a Dashboard
/// connection may have open (health checks, reflection).
pub const EXTRA_DASHBOARD_STREAMS: u32 = 4;

/// Largest value of the count flags bounding connections and calls
/// (`--max-connections`, `--max-dashboard-*`): far above any real fleet,
/// far below what a semaphore can hold.
pub const MAX_COUNT_FLAG: u64 = 1 << 20;

/// The parser of a count flag: 1 to [`MAX_COUNT_FLAG`].
fn count_flag() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_COUNT_FLAG)
}

/// Default of `--max-cluster-report-bytes`: 32 MiB, about 10,000 Gateways
/// of 3 KiB (a Gateway with a few listeners encodes to well under 1 KiB).
pub const DEFAULT_MAX_CLUSTER_REPORT_BYTES: u64 = 32 * 1024 * 1024;
/// Default of `--max-clusters` and `--max-connections` (one connection per
/// agent): room for the largest fleets one hub is known to serve (Open
/// Cluster Management is scale-tested with 3,500 managed clusters).
pub const DEFAULT_MAX_CLUSTERS: usize = 4096;

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
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CLUSTERS)]
    pub max_clusters: usize,
    /// Dashboard calls (watches included) open at once; more are refused
    /// with RESOURCE_EXHAUSTED.
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = count_flag())]
    pub max_dashboard_calls: usize,
    /// Dashboard calls open at once on one connection (1 to 1,048,576, as
    /// are the other connection and call counts).
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = count_flag())]
    pub max_dashboard_calls_per_connection: usize,
    /// A Dashboard watcher that takes no message for this long (it grants
    /// no flow-control window) is dropped and its connection closed, rather
    /// than the hub buffering for it.
    #[arg(long, value_name = "DUR", default_value = "60s", value_parser = gwhub_common::time::parse_duration)]
    pub watch_send_timeout: Duration,
    /// Open connections on the ingest listener (agents hold one each);
    /// past it the hub stops accepting until one closes.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CLUSTERS, value_parser = count_flag())]
    pub max_connections: usize,
    /// Open connections on the Dashboard listener.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = count_flag())]
    pub max_dashboard_connections: usize,
    /// A TLS handshake not finished within this is dropped.
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = gwhub_common::time::parse_duration)]
    pub tls_handshake_timeout: Duration,
    /// A connection with no open call for this long is closed (agent
    /// streams and watches are open calls).
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
            max_clusters: DEFAULT_MAX_CLUSTERS,
            max_dashboard_calls: 256,
            max_dashboard_calls_per_connection: 16,
            watch_send_timeout: Duration::from_secs(60),
            max_connections: DEFAULT_MAX_CLUSTERS,
            max_dashboard_connections: 64,
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
    /// The web page's listener (`--web-listen`).
    pub web: Arc<ListenerCounters>,
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
    /// Unary Dashboard answers not taken within `--watch-send-timeout`
    /// (their connections closed).
    pub answers_dropped: AtomicU64,
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        budgets: Budgets,
    }

    fn parse(args: &[&str]) -> Result<Budgets, String> {
        Flags::try_parse_from(std::iter::once("gwhub").chain(args.iter().copied()))
            .map(|f| f.budgets)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn counts_and_durations_out_of_range_are_refused() {
        for flag in [
            "--max-connections",
            "--max-dashboard-connections",
            "--max-dashboard-calls",
            "--max-dashboard-calls-per-connection",
        ] {
            for bad in ["0", "1048577", "18446744073709551615"] {
                let e = parse(&[flag, bad]).unwrap_err();
                assert!(
                    e.contains(flag) && e.contains("1..=1048576"),
                    "{flag} {bad}: {e}"
                );
            }
            assert!(parse(&[flag, "1048576"]).is_ok(), "{flag}");
        }
        for flag in [
            "--idle-connection-timeout",
            "--tls-handshake-timeout",
            "--watch-send-timeout",
            "--insecure-prune-after",
        ] {
            let e = parse(&[flag, "0s"]).unwrap_err();
            assert!(e.contains("longer than zero"), "{flag}: {e}");
        }
        let defaults = parse(&[]).unwrap();
        assert_eq!(defaults.max_connections, Budgets::default().max_connections);
        assert_eq!(defaults.max_dashboard_connections, 64);
    }
}
