//! `gwhub demo`: flags, quiet logging and a runtime around
//! [`crate::demo::run`].

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::time::Duration;

use crate::demo::{DemoConfig, DemoError, run as run_demo};
use gwhub_hub::serve::shutdown_signal;

/// Most simulated clusters: each gets an agent, a directory and an address.
const MAX_CLUSTERS: usize = 200;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Each simulated cluster is a real agent reading its own temporary directory of \
manifests (templates in cli/demo/); every --interval one cluster's files change \
(load balancer loses its address, a DNS zone fails, a route attaches) and come \
back the next time round. The Dashboard API stays up for gwhubctl or grpcurl \
until the demo ends.

Logging: RUST_LOG (default warn), to stderr.")]
pub struct Args {
    /// Number of simulated clusters (east, west, central, cluster-4, ...).
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u16).range(1..=MAX_CLUSTERS as i64))]
    pub clusters: u16,
    /// Address the simulated agents connect to (gwhub.v1.Ingest).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:50051")]
    pub listen: SocketAddr,
    /// Address of the read-only Dashboard API, for gwhubctl or grpcurl.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:50052")]
    pub dashboard_listen: SocketAddr,
    /// Address of the read-only web status page (open it in a browser).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:50053")]
    pub web_listen: SocketAddr,
    /// Time between two simulated changes (e.g. 3s, 500ms).
    #[arg(long, value_name = "DUR", default_value = "3s", value_parser = gwhub_model::time::parse_duration)]
    pub interval: Duration,
    /// Stop after this long and exit 0 (default: run until Ctrl-C).
    #[arg(long, value_name = "DUR", value_parser = gwhub_model::time::parse_duration)]
    pub duration: Option<Duration>,
    /// Wait until every cluster has reported, print the aggregated hub
    /// Gateways as YAML and exit.
    #[arg(long, conflicts_with_all = ["duration"])]
    pub once: bool,
}

/// Logs to stderr at `warn` unless `RUST_LOG` says otherwise, so the live
/// table on stdout is not drowned by the hub's and agents' info lines.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// Runs the demo until Ctrl-C / SIGTERM, `--duration` or (`--once`) a
/// complete aggregate; the live view goes straight to stdout.
pub(super) fn run(args: &Args) -> Result<String, DemoError> {
    init_logging();
    let stdout = std::io::stdout();
    let config = DemoConfig {
        clusters: usize::from(args.clusters),
        listen: args.listen,
        dashboard_listen: args.dashboard_listen,
        web_listen: Some(args.web_listen),
        interval: args.interval,
        duration: args.duration,
        once: args.once,
        color: stdout.is_terminal(),
    };
    let runtime = tokio::runtime::Runtime::new().map_err(DemoError::Runtime)?;
    runtime.block_on(async {
        // Poll once so the handlers are installed now: a signal during
        // start-up then ends the demo cleanly instead of killing it.
        let mut stop = Box::pin(shutdown_signal());
        if futures::poll!(stop.as_mut()).is_ready() {
            return Ok(String::new());
        }
        let mut out = stdout.lock();
        run_demo(config, &mut out, stop).await
    })
}
