#![forbid(unsafe_code)]
//! Plumbing shared by the agent and the hub: reading Kubernetes manifests the
//! way `kubectl` writes them, printing results the same way, and the one
//! implementation of condition bookkeeping (transition times, no-op compare).
//!
//! Nothing here talks to a cluster or the network (data in, data out), with
//! one exception: [`metrics_http`], the `GET /metrics` responder both
//! binaries' `--metrics-listen` share ([`workspace_bin`] only runs cargo, for
//! the tests).

pub mod bucket;
pub mod conditions;
pub mod errors;
pub mod identity;
pub mod key;
pub mod logging;
pub mod manifest;
pub mod metrics_http;
pub mod output;
pub mod pace;
pub mod text;
pub mod time;
pub mod workspace_bin;

pub use bucket::TokenBucket;
pub use conditions::{Condition, MAX_CONDITIONS};
pub use errors::error_chain;
pub use key::GatewayKey;
pub use manifest::{ManifestError, Object, read_paths};
pub use output::{OutputFormat, render_list, render_object};
pub use pace::{Backoff, KeyedPacer, Pacer};
