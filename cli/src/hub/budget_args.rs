//! `gwhub serve`'s budget flags: what bounds the hub's memory and
//! connections under hostile load, each with its default. The hub takes
//! them as a plain [`Budgets`]; the flags, their parsers and their range
//! checks live here, with the rest of the command line.

use std::time::Duration;

use gwhub_api::grpc::ingest::DEFAULT_MAX_CLUSTER_REPORT_BYTES;
use gwhub_hub::serve::{Budgets, DEFAULT_PER_ADDRESS, MAX_COUNT_FLAG};
use gwhub_index::DEFAULT_MAX_CLUSTERS;

/// The parser of a count flag: 1 to [`MAX_COUNT_FLAG`].
fn count_flag() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_COUNT_FLAG)
}

/// The parser of a per-address flag: 0 (an eighth of the pool) to
/// [`MAX_COUNT_FLAG`].
fn per_address_flag() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(0..=MAX_COUNT_FLAG)
}

/// The flags; their defaults are [`Budgets::default`].
#[derive(Clone, Debug, clap::Args)]
pub struct BudgetArgs {
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
    /// Dashboard calls and web page event streams open at once from one
    /// client address (an IPv4 address or an IPv6 /64), whatever its
    /// connections (HTTP/1.1 streams take a connection each); 0: an
    /// eighth of --max-dashboard-calls.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_PER_ADDRESS, value_parser = per_address_flag())]
    pub max_dashboard_calls_per_address: usize,
    /// Dashboard calls open at once on one connection (1 to 1,048,576, as
    /// are the other connection and call counts).
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = count_flag())]
    pub max_dashboard_calls_per_connection: usize,
    /// A Dashboard watcher that takes no message for this long (it grants
    /// no flow-control window) is dropped and its connection closed, rather
    /// than the hub buffering for it.
    #[arg(long, value_name = "DUR", default_value = "60s", value_parser = gwhub_model::time::parse_duration)]
    pub watch_send_timeout: Duration,
    /// Open connections on the ingest listener (agents hold one each);
    /// past it the hub stops accepting until one closes.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CLUSTERS, value_parser = count_flag())]
    pub max_connections: usize,
    /// Open connections on the Dashboard listener.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = count_flag())]
    pub max_dashboard_connections: usize,
    /// Open connections from one client address (an IPv4 address or an
    /// IPv6 /64) on the Dashboard listener and on the web page's (each); a
    /// connection past it is closed at once, so few addresses cannot take
    /// every slot; 0: an eighth of --max-dashboard-connections. Clients
    /// behind one proxy or NAT share an address.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_PER_ADDRESS, value_parser = per_address_flag())]
    pub max_dashboard_connections_per_address: usize,
    /// A TLS handshake not finished within this is dropped.
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = gwhub_model::time::parse_duration)]
    pub tls_handshake_timeout: Duration,
    /// A connection with no open call for this long is closed (agent
    /// streams and watches are open calls).
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = gwhub_model::time::parse_duration)]
    pub idle_connection_timeout: Duration,
    /// With --insecure, a disconnected cluster silent for this long is
    /// forgotten (its report and its /metrics rows), so made-up cluster
    /// names cannot grow the registry.
    #[arg(long, value_name = "DUR", default_value = "10m", value_parser = gwhub_model::time::parse_duration)]
    pub insecure_prune_after: Duration,
}

impl From<BudgetArgs> for Budgets {
    fn from(a: BudgetArgs) -> Self {
        Budgets {
            max_cluster_report_bytes: a.max_cluster_report_bytes,
            max_clusters: a.max_clusters,
            max_dashboard_calls: a.max_dashboard_calls,
            max_dashboard_calls_per_connection: a.max_dashboard_calls_per_connection,
            max_dashboard_calls_per_address: a.max_dashboard_calls_per_address,
            watch_send_timeout: a.watch_send_timeout,
            max_connections: a.max_connections,
            max_dashboard_connections: a.max_dashboard_connections,
            max_dashboard_connections_per_address: a.max_dashboard_connections_per_address,
            tls_handshake_timeout: a.tls_handshake_timeout,
            idle_connection_timeout: a.idle_connection_timeout,
            insecure_prune_after: a.insecure_prune_after,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use gwhub_hub::serve::per_address;

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        budgets: BudgetArgs,
    }

    fn parse(args: &[&str]) -> Result<Budgets, String> {
        Flags::try_parse_from(std::iter::once("gwhub").chain(args.iter().copied()))
            .map(|f| f.budgets.into())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn counts_and_durations_out_of_range_are_refused() {
        for flag in [
            "--max-dashboard-connections-per-address",
            "--max-dashboard-calls-per-address",
        ] {
            for bad in ["1048577", "18446744073709551615"] {
                let e = parse(&[flag, bad]).unwrap_err();
                assert!(e.contains("0..=1048576"), "{flag} {bad}: {e}");
            }
            assert!(parse(&[flag, "0"]).is_ok(), "{flag}");
        }
        assert_eq!(per_address(0, 64), 8);
        assert_eq!(per_address(0, 256), 32);
        assert_eq!(per_address(5, 256), 5);
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

    /// The flags' defaults are the hub's defaults, field by field.
    #[test]
    fn defaults_are_the_hubs() {
        let d = parse(&[]).unwrap();
        let h = Budgets::default();
        assert_eq!(format!("{d:?}"), format!("{h:?}"));
    }
}
