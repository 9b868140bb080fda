#![forbid(unsafe_code)]
#![warn(unreachable_pub)]
//! Plumbing shared by the agent and the hub: reading Kubernetes manifests the
//! way `kubectl` writes them, printing results the same way, pacing, logging,
//! and the cluster identity of an mTLS certificate. The shared vocabulary
//! (keys, names, limits, conditions) is `gwhub_model`.
//!
//! Nothing here talks to a cluster or the network (data in, data out), with
//! two exceptions, runtime plumbing both binaries share: [`metrics_http`],
//! the `GET /metrics` responder of `--metrics-listen`, and
//! [`watch_events`], the one loop over a Kubernetes watch.

pub mod backoff;
pub mod bucket;
pub mod fair_pace;
pub mod identity;
pub mod join;
pub mod logging;

pub mod metrics_http;
pub mod output;
pub mod pace;
pub mod pem;
pub mod watch_events;

pub use backoff::Backoff;
pub use bucket::{Class, PriorityBucket, TokenBucket};
pub use fair_pace::FairPacer;
pub use output::{ListWriter, OutputFormat, render_list, render_object};
pub use pace::{CoalescingQueue, KeyedPacer, Pacer};
