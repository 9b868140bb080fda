//! gRPC layer: translates between the wire and the [`crate::index::Index`];
//! owns no state of its own. [`view`] encodes the index's views for the
//! Dashboard.

pub mod dashboard;
pub mod ingest;
pub mod view;
pub(crate) mod watch_route;

/// Resolves once the hub starts shutting down (or the flag's sender is
/// gone). Returns `()` so no watch guard lives in a `select!` output.
pub(crate) async fn shutting_down(rx: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}
