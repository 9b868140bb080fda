//! The `gwhub-agent` command line (spec §6). Parsing only; every command's
//! work lives in its own module so `main` stays a dispatcher and `run` can be
//! added as another [`Command`] variant.

pub mod compute;
pub mod run;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use gwhub_common::output::OutputFormat;
use gwhub_model::time::parse_rfc3339;
use jiff::Timestamp;

use gwhub_spoke_rules::scope::{DEFAULT_CONTROLLER_NAME, DEFAULT_SCOPE_NAMESPACE, Options};

/// gwhub spoke agent: computes DNS and LoadBalancer conditions for the
/// OpenShift-managed Gateways of one cluster.
#[derive(Debug, Parser)]
#[command(name = "gwhub-agent", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The agent's subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the in-scope Gateways found in the files, each with the status
    /// the agent would write (its conditions merged into the file's status).
    Compute(ComputeArgs),
    /// Run the agent: stream the in-scope Gateways' status to the hub
    /// (snapshot on connect, changes after), following the cluster's state.
    Run(Box<crate::agent::run::RunArgs>),
}

/// The scope flags every mode shares.
#[derive(Debug, Clone, Args)]
pub struct ScopeArgs {
    /// Namespace whose Gateways are in scope.
    #[arg(long, default_value = DEFAULT_SCOPE_NAMESPACE)]
    pub namespace: String,
    /// GatewayClass controllerName whose Gateways are in scope.
    #[arg(long, default_value = DEFAULT_CONTROLLER_NAME)]
    pub controller_name: String,
}

impl ScopeArgs {
    pub fn options(&self) -> Options {
        Options {
            namespace: self.namespace.clone(),
            controller_name: self.controller_name.clone(),
        }
    }
}

/// `gwhub-agent compute -f PATH [-f PATH ...] [-o yaml|json] [--now RFC3339]`.
#[derive(Debug, Clone, Args)]
pub struct ComputeArgs {
    /// File or directory of Kubernetes YAML/JSON (multi-document, `kind: List`);
    /// repeatable. Directories are read non-recursively (`*.yaml`, `*.yml`, `*.json`).
    #[arg(short = 'f', long = "filename", required = true, value_name = "PATH")]
    pub files: Vec<PathBuf>,
    /// Output format: yaml or json.
    #[arg(
        short = 'o',
        long = "output",
        default_value = "yaml",
        value_name = "FORMAT"
    )]
    pub output: OutputFormat,
    /// Fix the clock (RFC 3339) for reproducible transition times.
    #[arg(long, value_parser = parse_rfc3339, value_name = "RFC3339")]
    pub now: Option<Timestamp>,
    #[command(flatten)]
    pub scope: ScopeArgs,
}
