//! gRPC layer: translates between the wire and the [`crate::index::Index`];
//! owns no state of its own.

pub mod dashboard;
pub mod ingest;

/// Resolves once the hub starts shutting down (or the flag's sender is
/// gone). Returns `()` so no watch guard lives in a `select!` output.
pub async fn shutting_down(rx: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}
