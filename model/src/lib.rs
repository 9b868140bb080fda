#![forbid(unsafe_code)]
#![warn(unreachable_pub)]
//! gwhub's vocabulary, shared by the agent, the hub and the wire contract:
//! a Gateway's key, a cluster's name (one validator, with its DNS-label and
//! object-name views), the Gateway CRD's limits, condition bookkeeping,
//! status equality that ignores transition times, and lengths counted in
//! characters as the CRD counts them.
//!
//! It exists so that every crate agrees on these rules by construction: each
//! concept has exactly one implementation here. It is pure data (no async
//! runtime, no gRPC, no Kubernetes client; `scripts/check-deps.sh` checks).

pub mod cluster;
pub mod conditions;
pub mod errors;
pub mod key;
pub mod limits;
pub mod names;
pub mod status;
pub mod text;
pub mod time;

pub use cluster::{ClusterName, ClusterNameError};
pub use conditions::{Condition, MAX_CONDITIONS};
pub use errors::error_chain;
pub use key::GatewayKey;
