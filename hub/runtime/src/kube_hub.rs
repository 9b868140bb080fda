//! The hub in Kubernetes mode, put together: [`Builder`] (from
//! [`Builder::new`]) starts it, the one start-up path of `gwhub serve`
//! and the tests; `attach` adds every Kubernetes task (store,
//! status writer, Leases, liveness, joins, inventory, Events) and fleet
//! DNS to the running [`Hub`], and [`KubeHub`] runs them until shutdown.
//!
//! It exists beside [`crate::serve`], above the parts, because attaching
//! is wiring: it names the running hub, the DNS controller and each
//! Kubernetes task, so none of those parts has to name another. The steps
//! of attaching are in `attach.rs`; what each task brings about or waits
//! on at start-up is one type, `gwhub_k8s::readiness::Readiness`.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::serve::{Hub, HubConfig, ServeError};
use gwhub_dns::DnsConfig;
use gwhub_k8s::metrics::Metrics;
use gwhub_k8s::{Connected, KubeError, KubeOptions, shards};

mod attach;
mod builder;

pub use builder::Builder;

/// Why a hub in Kubernetes mode could not start.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// The management cluster (reached, its store and inventory checked).
    #[error(transparent)]
    Kube(#[from] KubeError),
    /// The hub's listeners.
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// The admin server (`--metrics-listen`).
    #[error("cannot serve metrics on {addr}: {source}")]
    Admin {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// A running hub in Kubernetes mode.
pub struct KubeHub {
    pub hub: Hub,
    pub metrics: Arc<Metrics>,
    /// Whether this replica currently writes hub Gateway status.
    pub leader: watch::Receiver<bool>,
    /// Which hub Gateways this replica writes the status of now.
    pub writes: watch::Receiver<shards::Writes>,
    /// True once the stored reports and the hub Gateways are loaded.
    pub ready: watch::Receiver<bool>,
    /// Fleet DNS as this replica last decided it (empty while it is off or
    /// not leading).
    pub dns: watch::Receiver<Arc<crate::index::DnsView>>,
    shutdown: CancellationToken,
    tasks: JoinSet<()>,
}

impl KubeHub {
    /// The [`Builder`] of [`Builder::new`] with neither TLS nor fleet
    /// DNS: the in-process entry point for tests.
    pub async fn start(
        config: HubConfig,
        options: KubeOptions,
        client: Client,
    ) -> Result<KubeHub, HubError> {
        Self::start_with_dns(config, options, None, client).await
    }

    /// [`KubeHub::start`] with fleet DNS (`dns`).
    pub async fn start_with_dns(
        config: HubConfig,
        options: KubeOptions,
        dns: Option<DnsConfig>,
        client: Client,
    ) -> Result<KubeHub, HubError> {
        Builder::new(Connected::new(client, options).await?, config)
            .dns(dns)
            .start()
            .await
    }

    /// Stops writing (releasing the Lease), then shuts the hub down.
    pub async fn shutdown(mut self) -> Result<(), ServeError> {
        self.shutdown.cancel();
        let stop = async { while self.tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(Duration::from_secs(5), stop)
            .await
            .is_err()
        {
            self.tasks.shutdown().await;
        }
        self.hub.shutdown().await
    }

    /// Serves until `signal` resolves (then shuts down cleanly) or a server
    /// or task ends early (then shuts down and returns why, so the process
    /// exits non-zero and is restarted).
    pub async fn run_until(mut self, signal: impl Future<Output = ()>) -> Result<(), ServeError> {
        let ended = tokio::select! {
            _ = signal => None,
            e = self.hub.ended() => Some(e),
            Some(r) = self.tasks.join_next() => {
                Some(crate::serve::task_end("a Kubernetes task (watch, store, Lease or status writer)", r))
            }
        };
        match ended {
            None => {
                tracing::info!("shutting down: releasing the lease, draining streams");
                self.shutdown().await
            }
            Some(e) => {
                tracing::error!(error = %e, "shutting down");
                let _ = self.shutdown().await;
                Err(e)
            }
        }
    }
}
