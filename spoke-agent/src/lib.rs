#![forbid(unsafe_code)]
//! gwhub's spoke agent. The pure condition engine (data in, status out) is
//! [`engine::evaluate`] over a [`snapshot::Snapshot`]; [`conditions`] holds
//! the rules, [`scope`] which objects belong together, [`status`] the merge
//! that never touches another writer's fields. [`compute`] is the
//! `gwhub-agent compute` command over files; [`runtime`] streams to the hub.

pub mod cli;
pub mod compute;
pub mod controller;
pub mod runtime;

// The pure rules, under the paths the runtime has always used.
pub(crate) use gwhub_spoke_rules::{
    conditions, engine, openshift, ownership, scope, snapshot, status,
};
