//! The `gwhub` command line. Subcommands live in their own modules.

mod aggregate;
mod budget_args;
mod certs;
mod demo;
mod dns_flags;
pub(crate) mod serve;

pub use aggregate::{AggregateCmdError, gateways_from_objects};
pub use certs::{CertsError, Layout, generate, set_window};
pub use serve::ServeCmdError;

use clap::{Parser, Subcommand};

/// gwhub: one view of Gateway API Gateways across many clusters.
#[derive(Debug, Parser)]
#[command(name = "gwhub", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print hub Gateways with the status aggregated from per-cluster Gateway files.
    Aggregate(aggregate::Args),
    /// Run the hub: agents stream to --listen, dashboards read --dashboard-listen.
    Serve(Box<serve::Args>),
    /// A hub and simulated clusters in one process over loopback gRPC, shown live.
    Demo(demo::Args),
    /// Create a development CA, a hub certificate and per-cluster client certificates for mTLS.
    Certs(certs::Args),
}

/// Why a `gwhub` command failed; `main` prints it as `error: <msg>`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Aggregate(#[from] AggregateCmdError),
    #[error(transparent)]
    Serve(#[from] ServeCmdError),
    #[error(transparent)]
    Demo(#[from] crate::DemoError),
    #[error(transparent)]
    Certs(#[from] CertsError),
}

/// Runs the parsed command; the error is printed as `error: <msg>`.
pub fn run(cli: Cli) -> Result<String, Error> {
    match cli.command {
        // Written to standard output as it is computed; nothing is left.
        Command::Aggregate(args) => {
            let out = std::io::BufWriter::new(std::io::stdout().lock());
            aggregate::run(&args, out)
                .map(|()| String::new())
                .map_err(Error::from)
        }
        Command::Serve(args) => serve::run(&args).map_err(Error::from),
        Command::Demo(args) => demo::run(&args).map_err(Error::from),
        Command::Certs(args) => certs::run(&args).map_err(Error::from),
    }
}
