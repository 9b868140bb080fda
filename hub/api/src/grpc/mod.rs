//! gRPC layer: translates between the wire and the [`crate::index::Index`];
//! owns no state of its own. [`view`] encodes the index's views for the
//! Dashboard.

pub mod dashboard;
pub mod ingest;
mod peer;
pub mod view;
pub mod watch_route;
