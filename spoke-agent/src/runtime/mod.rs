//! The agent runtime: keeps a cluster's in-scope Gateways in a
//! [`GatewayStore`], fed by a source (a directory today, the Kubernetes API
//! later, a simulation in `gwhub demo`), and streams them to the hub with
//! the identity [`tls`] loads and [`join`] obtains and renews.

pub mod dir_source;
pub mod hub_client;
pub mod join;
pub mod outbox;
pub mod store;
pub mod tls;

pub use dir_source::{DirSource, Evaluate};
pub use hub_client::{ClientStats, HubClient, HubConfig};
pub use outbox::{Change, Outbox, Pushed};
pub use store::{GatewayKey, GatewayStore};

use std::sync::Arc;

use gwhub_common::metrics_http::Probes;
use tokio_util::sync::CancellationToken;

/// Why `gwhub-agent run` cannot start (or stops before it streams); each
/// message names the flag or the step to fix.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("--from-dir: {0}")]
    Dir(#[from] dir_source::DirError),
    #[error(transparent)]
    Join(#[from] join::JoinError),
    #[error(transparent)]
    Controller(#[from] crate::controller::Error),
    #[error(transparent)]
    Tracing(#[from] gwhub_common::logging::OtlpError),
    #[error("cannot start the async runtime: {0}")]
    AsyncRuntime(#[source] std::io::Error),
}

/// Streams `store` to the hub until `shutdown`: the library entry point for
/// any source (a `gwhub demo` simulating clusters fills a store per cluster
/// with [`GatewayStore::replace_all`], calls [`GatewayStore::mark_ready`] and
/// runs one of these per cluster). Returns after shutdown.
pub(crate) async fn run_agent(
    config: HubConfig,
    store: Arc<GatewayStore>,
    shutdown: CancellationToken,
) {
    HubClient::new(config, store).run(shutdown).await
}

/// An agent fed by a directory: follows `source` and streams it to the hub
/// until `shutdown`.
pub async fn run_dir_agent(config: HubConfig, source: DirSource, shutdown: CancellationToken) {
    run_dir_agent_with(config, source, Arc::new(GatewayStore::default()), shutdown).await
}

/// [`run_dir_agent`] feeding the caller's (empty) `store`, e.g. to answer
/// probes from it ([`probes`]).
pub async fn run_dir_agent_with(
    config: HubConfig,
    source: DirSource,
    store: Arc<GatewayStore>,
    shutdown: CancellationToken,
) {
    let source = source.for_cluster(config.cluster.clone());
    let follow = tokio::spawn(source.run(store.clone(), shutdown.clone()));
    let watchdog = stop_if_source_ends(follow, store.clone(), shutdown.clone());
    run_agent(config, store, shutdown).await;
    let _ = watchdog.await;
}

/// The agent's probes (`/healthz`, `/readyz` on `--metrics-listen`): ready
/// once the source has read its first full state into `store` (the
/// controller's caches synced and evaluated, or the directory read); live
/// while a heartbeat can take the store's lock. Neither depends on the hub
/// being reachable.
pub fn probes(store: Arc<GatewayStore>, shutdown: CancellationToken) -> Probes {
    let ready = store.clone();
    Probes::new(
        move || ready.is_ready(),
        move || {
            store.len();
        },
        shutdown,
    )
}

/// Watches the task that feeds `store` (the controller or a directory
/// source); it runs until `shutdown`. If it ends before (a panic, a bug),
/// the agent stops vouching for the cluster at once (no more heartbeats, so
/// the hub marks it stale instead of trusting frozen reports) and shuts
/// down so that it is restarted.
pub(crate) fn stop_if_source_ends(
    source: tokio::task::JoinHandle<()>,
    store: Arc<GatewayStore>,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let ended = source.await;
        if shutdown.is_cancelled() {
            return;
        }
        store.set_source_ok(false);
        match ended {
            Ok(()) => tracing::error!("the Gateway source stopped unexpectedly; shutting down"),
            Err(e) => tracing::error!(error = %e, "the Gateway source failed; shutting down"),
        }
        shutdown.cancel();
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_source_that_dies_stops_vouching_and_shuts_down() {
        let store = Arc::new(GatewayStore::default());
        let shutdown = CancellationToken::new();
        let source = tokio::spawn(async { panic!("bug in the source") });
        stop_if_source_ends(source, store.clone(), shutdown.clone())
            .await
            .unwrap();
        assert!(!*store.subscribe_source().borrow());
        assert!(shutdown.is_cancelled());

        // Ending because of shutdown is the normal way: nothing to do.
        let store = Arc::new(GatewayStore::default());
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        let source = tokio::spawn(async move { stop.cancelled().await });
        let watchdog = stop_if_source_ends(source, store.clone(), shutdown.clone());
        shutdown.cancel();
        watchdog.await.unwrap();
        assert!(*store.subscribe_source().borrow());
    }
}
