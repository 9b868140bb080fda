#![forbid(unsafe_code)]
#![warn(unreachable_pub)]
//! gwhub's hub runtime: the wiring. [`serve`] binds the listeners and
//! starts the services of `gwhub_api` (the agents' ingest stream, the
//! Dashboard API, the web page) over one `gwhub_index::Index`;
//! [`kube_hub`] attaches the management cluster's side (`gwhub_k8s`) and
//! fleet DNS (`gwhub_dns`) to them; [`metrics`] serves what they count.
//!
//! It exists apart from the parts it wires so that how the hub starts,
//! waits and stops can be read in one place, and apart from the command
//! line (`gwhub`, which parses flags and calls it). It does not know the
//! agent runtime: they meet only over gRPC.

// Private, as before the listeners' plumbing left for gwhub-net: used by
// serve only.
use gwhub_net::{conn, reader_pool};
// The services the wiring starts, from gwhub-api; private: other crates
// name `gwhub_api` themselves.
use gwhub_api::{grpc, read, web};
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
pub mod serve;
