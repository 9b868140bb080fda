#![forbid(unsafe_code)]
//! gwhub's command lines, over the libraries: [`hub`] is `gwhub` (aggregate,
//! serve, demo, certs), [`agent`] is `gwhub-agent` (compute, run), [`ctl`] is
//! `gwhubctl`; the binaries in `src/main.rs` and `src/bin/` only parse and
//! print. `demo` runs a hub and real agents in one process.
//!
//! It exists so that flag parsing and wiring stay out of the runtimes, and it
//! is the only crate that depends on both the hub runtime (`gwhub-hub`) and
//! the agent runtime (`gwhub-agent`): they cannot reach each other.

#![warn(unreachable_pub)]

// One public module per binary (its `Cli` and `run`); the rest is private.
pub mod agent;
pub mod ctl;
mod demo;
pub mod hub;
mod join;
mod spool;

/// Why `gwhub demo` (or a [`SimCluster`]) failed.
pub use demo::DemoError;
/// A simulated cluster of `gwhub demo` (the browser test drives one).
pub use demo::cluster::SimCluster;
