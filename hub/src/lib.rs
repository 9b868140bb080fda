#![forbid(unsafe_code)]
//! The gwhub hub: aggregates the Gateway status its clusters report onto the
//! hub Gateways. The engine in [`aggregate`] is pure; [`cli`] wraps it for
//! the command line.

pub mod budget;
pub mod cli;
pub mod conn;
pub mod ctl;
pub mod demo;
pub mod grpc;
pub mod index;
pub mod kube;
pub mod metrics;
pub mod serve;
pub mod tls;

// The pure engine, under the path the runtime has always used.
pub(crate) use gwhub_hub_rules::aggregate;
