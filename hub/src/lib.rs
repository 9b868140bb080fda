#![forbid(unsafe_code)]
//! The gwhub hub: aggregates the Gateway status its clusters report onto the
//! hub Gateways. The engine in [`aggregate`] is pure; [`cli`] wraps it for
//! the command line.

pub mod aggregate;
pub mod budget;
pub mod cli;
pub mod conn;
pub mod ctl;
pub mod demo;
pub mod grpc;
pub mod history;
pub mod index;
pub mod kube;
pub mod listing;
pub mod metrics;
pub mod serve;
pub mod tls;
pub mod web;
