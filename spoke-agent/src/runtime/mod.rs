//! The agent runtime: keeps a cluster's in-scope Gateways in a
//! [`GatewayStore`], fed by a source (a directory today, the Kubernetes API
//! later, a simulation in `gwhub demo`), and streams them to the hub.

pub mod command;
pub mod dir_source;
pub mod hub_client;
pub mod outbox;
pub mod store;
pub mod tls;

pub use dir_source::{DirSource, Evaluate};
pub use hub_client::{ClientStats, HubClient, HubConfig};
pub use outbox::{Change, Outbox, Pushed};
pub use store::{GatewayKey, GatewayStore};

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

/// Streams `store` to the hub until `shutdown`: the library entry point for
/// any source (a `gwhub demo` simulating clusters fills a store per cluster
/// with [`GatewayStore::replace_all`], calls [`GatewayStore::mark_ready`] and
/// runs one of these per cluster). Returns after shutdown.
pub async fn run_agent(config: HubConfig, store: Arc<GatewayStore>, shutdown: CancellationToken) {
    HubClient::new(config, store).run(shutdown).await
}

/// An agent fed by a directory: follows `source` and streams it to the hub
/// until `shutdown`.
pub async fn run_dir_agent(config: HubConfig, source: DirSource, shutdown: CancellationToken) {
    let store = Arc::new(GatewayStore::default());
    let follow = tokio::spawn(source.run(store.clone(), shutdown.clone()));
    run_agent(config, store, shutdown).await;
    // The source stops on the same token; a panic there is already logged.
    let _ = follow.await;
}
