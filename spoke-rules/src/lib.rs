#![forbid(unsafe_code)]
#![warn(unreachable_pub)]
//! The spoke agent's rules, pure: [`engine::evaluate`] takes a
//! [`snapshot::Snapshot`] of one cluster's objects and the time, and returns
//! every in-scope Gateway's status. [`conditions`] holds the condition rules,
//! [`scope`] which objects belong together, [`status`] the merge that never
//! touches another writer's fields, [`ownership`] who wrote what, and
//! [`manifest`] reads the objects as `kubectl` writes them.
//!
//! It exists apart from the agent runtime so the compiler keeps the rules
//! free of I/O: it depends on no async runtime, gRPC or Kubernetes client
//! (`scripts/check-deps.sh`), and `gwhub-agent compute` and the tests use it
//! without them.

pub mod conditions;
pub mod engine;
pub mod manifest;
pub mod openshift;
pub mod ownership;
pub mod scope;
pub mod snapshot;
pub mod status;

pub use engine::{EngineError, Evaluation, evaluate};
pub use scope::Options;
pub use snapshot::Snapshot;
