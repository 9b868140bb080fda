#![forbid(unsafe_code)]
#![warn(unreachable_pub)]
//! The hub's rules, pure: [`aggregate`] turns the statuses the clusters
//! reported for one Gateway (and the hub Gateway as it is) into the status
//! the hub writes, with everything left out named; [`status_plan`] decides
//! what the status writer applies and clears; [`report`] is the
//! `ClusterReport` type the hub stores reports in; [`listing`] filters and
//! pages the Dashboard's lists and sums up a cluster's report in one word;
//! [`history`] decides which condition changes are a hub Gateway's
//! transitions and keeps the last ones in a bounded ring; [`web_host`]
//! decides which `Host` the web page answers to; [`inventory`]
//! is the fleet inventory (`ClusterProfile`s, label selectors, who may
//! stream and which clusters a hub Gateway expects); [`read_access`] keeps
//! what Kubernetes RBAC lets each Dashboard reader see; [`reader_slots`]
//! shares the reader pools' slots among client addresses; [`causes`] groups
//! what is not ready across the fleet by cause for the web page;
//! [`store_queue`] and [`store_writer`] are the store writer's rules;
//! [`shards`] spreads the status writing over the hub's replicas.
//! [`liveness`] is what each replica's liveness record holds.
//!
//! It exists apart from the hub runtime so the compiler keeps the rules free
//! of I/O: it depends on no async runtime, gRPC or Kubernetes client
//! (`scripts/check-deps.sh`), and `gwhub aggregate`, the benchmarks and the
//! tests use it without them.

pub mod aggregate;
pub mod causes;
pub mod dnsendpoint;
pub mod history;
pub mod inventory;
pub mod layout;
pub mod listing;
pub mod liveness;
pub mod read_access;
pub mod reader_slots;
pub mod report;
pub mod shards;
pub mod status_plan;
pub mod store_queue;
pub mod store_writer;
pub mod web_host;
