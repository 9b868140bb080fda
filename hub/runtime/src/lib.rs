#![forbid(unsafe_code)]
#![warn(unreachable_pub)]
//! gwhub's hub runtime: agents stream to [`grpc::ingest`], [`index`] keeps
//! what every cluster reported and aggregates it with the pure engine of
//! `gwhub_hub_rules`, [`grpc::dashboard`] serves the result, and
//! `gwhub_k8s` stores reports and writes the hub Gateways' status in
//! Kubernetes mode. [`serve`] puts them together, and [`kube_hub`]
//! attaches the Kubernetes side and fleet DNS (`gwhub_dns`) to them.
//!
//! It exists apart from the rules (which it runs) and from the command line
//! (`gwhub`, which parses flags and calls it), and it does not know the agent
//! runtime: they meet only over gRPC.

// Private, as before the listeners' plumbing left for gwhub-net: used by
// serve, grpc and web only.
use gwhub_net::{conn, conn_state, reader_pool};
pub mod grpc;
// The runtime's own short paths to the parts below it (`crate::index`,
// `crate::tls`, ...); private: other crates name `gwhub_index` and
// `gwhub_identity` themselves.
use gwhub_identity::{authz, issuer, tls};
use gwhub_index as index;
// Private, as before the TLS material left for gwhub-identity: the
// runtime's own path to it.
use gwhub_identity::reload as tls_reload;
pub mod kube_hub;
pub mod metrics;
pub mod read;
pub mod serve;
pub mod web;
