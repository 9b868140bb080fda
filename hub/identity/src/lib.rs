#![forbid(unsafe_code)]
#![warn(unreachable_pub)]
//! The hub's identity: the TLS material its listeners present and trust,
//! and who may read the Dashboard.
//!
//! - [`tls`]: what `gwhub serve` was given for TLS ([`tls::HubTls`]) and
//!   the Dashboard's gate ([`tls::DashboardAuth`]).
//! - [`reload`]: that material followed as its files or Secrets change, the
//!   acceptors the listeners' handshakes use, each agent stream's watch on
//!   its certificate, and the TLS metrics.
//! - [`pki`]: the hub's own certificates (its CA, its serving certificate,
//!   agents' certificates signed from a CSR), as pure functions.
//! - [`authz`]: `--dashboard-auth=kubernetes`, readers decided by
//!   TokenReviews and SubjectAccessReviews.
//! - [`issuer`]: the port through which the ingest listener has agent
//!   certificates issued (Join and Renew).
//!
//! It is a crate of its own because both the listeners (their handshakes,
//! the Dashboard's readers) and the Kubernetes side (the hub's Secrets,
//! the CSRs it signs) need certificates, and certificates need nothing of
//! them: its direct gwhub dependencies are the rules, the wire types and
//! the shared plumbing, and it names no HTTP server, DNS client or clap
//! (`scripts/check-deps.sh` checks them). Every crate that uses it names
//! it directly (`gwhub_identity::tls`, ...): the runtime re-exports none
//! of it.

pub mod authz;
pub mod issuer;
pub mod pki;
pub mod reload;
pub mod tls;
