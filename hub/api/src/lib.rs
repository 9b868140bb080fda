#![forbid(unsafe_code)]
#![warn(unreachable_pub)]
//! gwhub's hub, as its clients meet it: agents stream their reports to
//! [`grpc::ingest`], readers watch the fleet through the Dashboard API
//! ([`grpc::dashboard`]) and the web page ([`web`]), and [`read`] holds
//! what both front ends decide alike (a listing's authorization, the diff a
//! watcher is sent, the DNS and history answers).
//!
//! It exists apart from the wiring (`gwhub-hub`, which binds the listeners
//! and starts these services with the Kubernetes side) so that a change to
//! what a client sees is made here without reading how the hub starts, and
//! apart from the index (`gwhub_index`), which it reads and feeds but does
//! not own. It names no Kubernetes client and no name server: the
//! management cluster's side (`gwhub_k8s`) and fleet DNS (`gwhub_dns`) reach
//! the clients only through the index's views.

// The crate's own short paths to the parts below it; private: other crates
// name `gwhub_index`, `gwhub_identity` and `gwhub_net` themselves.
use gwhub_identity::{authz, issuer, tls};
use gwhub_index as index;
use gwhub_net::{conn, conn_state, reader_pool};

pub mod grpc;
pub mod read;
pub mod web;
