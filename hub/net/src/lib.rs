#![forbid(unsafe_code)]
#![warn(unreachable_pub)]
//! The hub listeners' connections: what happens between `accept` and a
//! gRPC or HTTP service.
//!
//! - [`conn`]: each listener's bounds (open connections, idleness, a
//!   client address's share on reader listeners), the accept loop, the
//!   hub's own TLS handshakes, the calls that keep a connection busy, and
//!   the listeners' metrics.
//! - [`conn_state`]: one connection's state, shared by its requests and
//!   the pools that hold it, and what every request carries of it.
//! - [`reader_pool`]: the slots reader listeners share among client
//!   addresses, and the Dashboard's call slots (`--max-dashboard-calls`)
//!   over the same table.
//!
//! It is a crate of its own so that the connection plumbing names no
//! service: it depends on the TLS material below it (`gwhub-identity`, for
//! the acceptor) and on the rules (`reader_slots`), never on the index,
//! the Kubernetes client, the page's router, a DNS client or clap
//! (`scripts/check-deps.sh` checks them). The gRPC services and the page
//! above it use it; it uses none of them.

pub mod conn;
pub mod conn_state;
pub mod reader_pool;
