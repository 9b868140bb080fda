//! `gwhubctl`: a kubectl-style client of the Dashboard API, and the
//! management-cluster commands `join` and `cluster`.
//!
//! This module holds the command line and its dispatch; the jobs live
//! beside it: `connect` and `auth` reach the hub as a reader, [`format`]
//! prints, and one module per command group does the calls (`get`,
//! `describe`, `watch`, `history`, `dns`). Errors are [`CtlError`].

use std::io::Write;

use gwhub_proto::v1;

mod auth;
mod connect;
mod describe;
mod dns;
mod error;
mod format;
mod get;
mod history;
mod watch;

pub use describe::describe_json;
pub use dns::{plan_text, sets_cell};
pub use error::{ClientPemError, CtlError, Result};
pub use format::{condition, gateway_json, printable, status_word, table};
pub use history::history_json;
pub use watch::watch_events;

/// gwhubctl: read the hub's aggregated Gateways and clusters.
#[derive(Debug, clap::Parser)]
#[command(name = "gwhubctl", version, about)]
pub struct Cli {
    /// The hub's Dashboard API (by default where `gwhub serve` listens for
    /// it by default, on this host).
    #[arg(
        long,
        global = true,
        default_value = crate::hub::serve::DEFAULT_DASHBOARD_SERVER,
        env = "GWHUB_SERVER"
    )]
    pub server: String,
    /// CA (PEM) the hub's certificate chains to; use with an https:// --server.
    #[arg(long, global = true, value_name = "PATH", env = "GWHUB_CA")]
    pub ca: Option<std::path::PathBuf>,
    /// Client certificate (PEM), for a hub run with --dashboard-client-ca
    /// (default: the kubeconfig user's, if it has one).
    #[arg(long, global = true, value_name = "PATH", requires_all = ["tls_key", "ca"])]
    pub tls_cert: Option<std::path::PathBuf>,
    /// Client private key (PEM) for --tls-cert.
    #[arg(long, global = true, value_name = "PATH", requires_all = ["tls_cert", "ca"])]
    pub tls_key: Option<std::path::PathBuf>,
    /// File holding a bearer token, for a hub run with --dashboard-token-file.
    #[arg(long, global = true, value_name = "PATH", env = "GWHUB_TOKEN_FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// A bearer token (a Kubernetes token for a hub run with
    /// --dashboard-auth=kubernetes); visible to other local users in the
    /// process list, so prefer --token-file or the kubeconfig.
    #[arg(
        long,
        global = true,
        value_name = "TOKEN",
        conflicts_with = "token_file"
    )]
    pub token: Option<String>,
    /// Kubeconfig whose current context's user is presented, for a hub run
    /// with --dashboard-auth=kubernetes: its token (`token`, `tokenFile`,
    /// or what its exec plugin gives) and its client certificate. Without
    /// --token, --token-file or this flag, KUBECONFIG or ~/.kube/config is
    /// used for an https:// --server (never sent in plaintext unless named
    /// here).
    #[arg(long, global = true, value_name = "PATH", conflicts_with_all = ["token_file", "token"])]
    pub kubeconfig: Option<std::path::PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Join tokens for workload clusters (uses the management cluster's
    /// kubeconfig, not the Dashboard).
    #[command(subcommand)]
    Join(crate::join::JoinCommand),
    /// Clusters of the fleet (uses the management cluster's kubeconfig).
    #[command(subcommand)]
    Cluster(crate::join::ClusterCommand),
    /// List hub Gateways or clusters.
    Get {
        what: What,
        /// wide (more columns), yaml or json; a table by default.
        #[arg(short, long)]
        output: Option<Output>,
        #[command(flatten)]
        filter: FilterArgs,
        /// Gateways fetched per call (1 to 1000); all pages are printed.
        #[arg(long, value_name = "N", default_value_t = 500,
              value_parser = clap::value_parser!(u32).range(1..=gwhub_hub_rules::listing::MAX_PAGE_SIZE as i64))]
        page_size: u32,
    },
    /// Show one hub Gateway with each cluster's report and what was left out.
    Describe {
        /// Only `gateway` for now.
        what: DescribeWhat,
        /// NAMESPACE/NAME
        name: String,
        /// yaml or json (the Gateway with each cluster's report); text by default.
        #[arg(short, long)]
        output: Option<Output>,
    },
    /// Print the hub Gateways, then a line per change (like `kubectl get -w`).
    Watch {
        /// wide (more columns), or yaml or json: one watch event
        /// (`{type, object}`) per change, as `kubectl get -w
        /// --output-watch-events -o json|yaml` prints them.
        #[arg(short, long)]
        output: Option<Output>,
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Fleet DNS: what the hub would publish (reads the Dashboard only).
    #[command(subcommand)]
    Dns(DnsCommand),
    /// Show the last status transitions of one hub Gateway (aggregated and
    /// per cluster), oldest first, as the hub saw them since it started.
    History {
        /// NAMESPACE/NAME
        name: String,
        /// Only the newest N transitions (0: every one the hub keeps).
        #[arg(long, value_name = "N", default_value_t = 0)]
        limit: u32,
        /// yaml or json; a table by default.
        #[arg(short, long)]
        output: Option<Output>,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum DnsCommand {
    /// What the hub would publish now, against what it published: per
    /// name, the targets a write would add and remove and each cluster's
    /// eligibility with the rule it fails. Writes nothing.
    Plan {
        /// Only names of hub Gateways in this namespace.
        #[arg(short = 'n', long, value_name = "NS")]
        namespace: Option<String>,
        /// yaml or json; text by default.
        #[arg(short, long)]
        output: Option<Output>,
    },
}

/// Which hub Gateways `get gateways` and `watch` show (ignored by `get
/// clusters`).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct FilterArgs {
    /// Only hub Gateways in this namespace.
    #[arg(short = 'n', long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Only hub Gateways this cluster reports.
    #[arg(long, value_name = "NAME")]
    pub cluster: Option<String>,
    /// Only hub Gateways with an aggregated condition that is not True.
    #[arg(long)]
    pub not_ready: bool,
}

impl FilterArgs {
    fn to_proto(&self) -> Option<v1::GatewayFilter> {
        Some(v1::GatewayFilter {
            namespace: self.namespace.clone().unwrap_or_default(),
            cluster: self.cluster.clone().unwrap_or_default(),
            not_ready: self.not_ready,
        })
    }
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum What {
    #[value(alias = "gateway", alias = "gw")]
    Gateways,
    #[value(alias = "cluster")]
    Clusters,
    /// Fleet DNS names (`-n` filters by the owning hub Gateway's namespace).
    #[value(alias = "dnsnames")]
    Dns,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum DescribeWhat {
    #[value(alias = "gateways", alias = "gw")]
    Gateway,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Wide,
    Yaml,
    Json,
}

/// Runs one `gwhubctl` command and prints what it answers.
pub fn run(cli: Cli) -> Result<()> {
    if matches!(cli.command, Command::Join(_) | Command::Cluster(_)) {
        let text = match cli.command {
            Command::Join(cmd) => crate::join::run(cmd)?,
            Command::Cluster(cmd) => crate::join::run_cluster(cmd)?,
            _ => String::new(),
        };
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CtlError::Runtime)?;
    runtime.block_on(async {
        let mut client = connect::connect(&cli).await?;
        let mut out = std::io::stdout().lock();
        let text = match cli.command {
            Command::Get {
                what,
                output,
                filter,
                page_size,
            } => get::get(&mut client, what, output, &filter, page_size).await?,
            Command::Describe { name, output, .. } => {
                describe::describe(&mut client, &name, output).await?
            }
            Command::Dns(DnsCommand::Plan { namespace, output }) => {
                dns::dns_plan(&mut client, namespace.as_deref(), output).await?
            }
            Command::History {
                name,
                limit,
                output,
            } => history::history(&mut client, &name, limit, output).await?,
            Command::Watch { output, filter } => {
                return watch::watch(&mut client, output, &filter, &mut out).await;
            }
            Command::Join(_) | Command::Cluster(_) => return Ok(()),
        };
        // A closed pipe (e.g. `| head`) is not worth an error.
        let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
        Ok(())
    })
}
