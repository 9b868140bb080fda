#![forbid(unsafe_code)]
#![warn(unreachable_pub)]
//! gwhub's spoke agent runtime: [`controller`] watches the cluster's API
//! server, evaluates the rules of `gwhub_spoke_rules` on every change and
//! applies the agent's conditions; [`runtime`] keeps the Gateways the hub
//! should see and streams them to the hub (snapshot on connect, changes
//! after).
//!
//! It exists apart from the rules (which it runs) and from the command line
//! (`gwhub`, which parses flags and calls it), and it does not know the hub
//! runtime: they meet only over gRPC.

pub mod controller;
pub mod runtime;

// The pure rules, under the paths the runtime has always used.
pub(crate) use gwhub_spoke_rules::{
    conditions, engine, openshift, ownership, scope, snapshot, status,
};
