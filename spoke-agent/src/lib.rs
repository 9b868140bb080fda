#![forbid(unsafe_code)]
//! gwhub's spoke agent. The pure condition engine (data in, status out) is
//! [`engine::evaluate`] over a [`snapshot::Snapshot`]; [`conditions`] holds
//! the rules, [`scope`] which objects belong together, [`status`] the merge
//! that never touches another writer's fields. [`compute`] is the
//! `gwhub-agent compute` command over files; [`runtime`] streams to the hub.

pub mod cli;
pub mod compute;
pub mod conditions;
pub mod controller;
pub mod engine;
pub mod openshift;
pub mod ownership;
pub mod runtime;
pub mod scope;
pub mod snapshot;
pub mod status;

pub use engine::{EngineError, Evaluation, evaluate};
pub use scope::Options;
pub use snapshot::Snapshot;
