//! `gwhub serve`: the ingest and Dashboard listeners, the aggregator and the
//! staleness sweep, with graceful shutdown that ends every stream with
//! UNAVAILABLE (agents reconnect elsewhere) before the servers drain.

use std::net::SocketAddr;
use std::time::Duration;

use gwhub_proto::v1;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::{CancellationToken, DropGuard};
use tonic::transport::Server;

pub use crate::conn::MAX_COUNT_FLAG;
use crate::grpc::dashboard::DashboardService;
use crate::grpc::ingest::DEFAULT_MAX_CLUSTER_REPORT_BYTES;
use crate::grpc::ingest::{DEFAULT_MAX_MESSAGES_PER_SECOND, IngestConfig, IngestService};
use crate::index::DEFAULT_MAX_CLUSTERS;
use crate::index::{DnsView, Index, IndexConfig};
use crate::metrics::HubMetrics;
use crate::read::ReaderLimits;
pub use crate::reader_pool::{DEFAULT_PER_ADDRESS, per_address};
use crate::tls::HubTls;
use crate::tls_reload::TlsRuntime;
use listening::Listening;

mod listening;
use gwhub_hub_rules::aggregate::Options;

/// How long shutdown waits for connections to close.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything `gwhub serve` needs (flags already checked).
#[derive(Clone, Debug)]
pub struct HubConfig {
    pub listen: SocketAddr,
    pub dashboard_listen: SocketAddr,
    pub insecure: bool,
    pub stale_after: Duration,
    pub options: Options,
    /// Per ingest stream; 0 means unlimited (see [`IngestConfig`]).
    pub max_messages_per_second: u32,
    /// What bounds the hub as a whole (see `crate::budget`).
    pub budgets: Budgets,
    /// `--web-listen`: the web status page (see [`crate::web`]); off if `None`.
    pub web_listen: Option<SocketAddr>,
    /// `--web-host`: names the web page answers to besides loopback names
    /// and IP literals (see [`crate::web`]).
    pub web_hosts: gwhub_hub_rules::web_host::WebHosts,
    /// `--gateway-history`: transitions kept per hub Gateway.
    pub gateway_history: usize,
}

impl HubConfig {
    /// Both listeners on loopback ports the OS picks; for tests and demos.
    pub fn loopback(stale_after: Duration) -> Self {
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        HubConfig {
            listen: any,
            dashboard_listen: any,
            insecure: true,
            stale_after,
            options: Options::default(),
            max_messages_per_second: DEFAULT_MAX_MESSAGES_PER_SECOND,
            budgets: Budgets::default(),
            web_listen: None,
            web_hosts: Default::default(),
            gateway_history: gwhub_hub_rules::history::DEFAULT_CAPACITY,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("gRPC server failed: {}", gwhub_model::error_chain(.0))]
    Server(#[from] tonic::transport::Error),
    /// TLS material that does not load (names the file).
    #[error("TLS: {0}")]
    Tls(#[from] crate::tls::TlsError),
    #[error("connections did not drain within {0:?}")]
    DrainTimeout(Duration),
    /// A task that runs until shutdown ended: the hub would go on serving
    /// without it (stale views, no status writes), so it exits instead and
    /// its supervisor restarts it.
    #[error("{0} stopped unexpectedly; exiting so the hub is restarted")]
    TaskEnded(String),
}

/// What a task's end says, for [`ServeError::TaskEnded`].
pub(crate) fn task_end(what: &str, joined: Result<(), tokio::task::JoinError>) -> ServeError {
    ServeError::TaskEnded(match joined {
        Ok(()) => what.to_owned(),
        Err(e) => format!("{what} ({e})"),
    })
}

/// HTTP/2 streams one ingest connection may have open (an agent uses one,
/// plus a health check).
pub const INGEST_STREAMS_PER_CONNECTION: u32 = 8;
/// HTTP/2 streams beyond `--max-dashboard-calls-per-connection` a Dashboard
/// connection may have open (health checks, reflection).
pub const EXTRA_DASHBOARD_STREAMS: u32 = 4;

/// The budgets the hub runs with (the command line fills them from
/// `gwhub serve`'s flags, whose defaults are [`Default`]'s).
#[derive(Clone, Debug)]
pub struct Budgets {
    /// Bytes of reported status one cluster may hold (the encoded size of
    /// its Gateways): `--max-cluster-report-bytes`.
    pub max_cluster_report_bytes: u64,
    /// Clusters the hub keeps (connected or remembered): `--max-clusters`.
    pub max_clusters: usize,
    /// Dashboard calls (watches included) open at once:
    /// `--max-dashboard-calls`.
    pub max_dashboard_calls: usize,
    /// Dashboard calls and web page event streams open at once from one
    /// client address; 0: an eighth of `max_dashboard_calls`
    /// (`--max-dashboard-calls-per-address`).
    pub max_dashboard_calls_per_address: usize,
    /// Dashboard calls open at once on one connection
    /// (`--max-dashboard-calls-per-connection`).
    pub max_dashboard_calls_per_connection: usize,
    /// A watcher that takes no message for this long is dropped
    /// (`--watch-send-timeout`).
    pub watch_send_timeout: Duration,
    /// Open connections on the ingest listener (`--max-connections`).
    pub max_connections: usize,
    /// Open connections on the Dashboard listener
    /// (`--max-dashboard-connections`).
    pub max_dashboard_connections: usize,
    /// Open connections from one client address on each reader listener;
    /// 0: an eighth of `max_dashboard_connections`
    /// (`--max-dashboard-connections-per-address`).
    pub max_dashboard_connections_per_address: usize,
    /// A TLS handshake not finished within this is dropped
    /// (`--tls-handshake-timeout`).
    pub tls_handshake_timeout: Duration,
    /// A connection with no open call for this long is closed
    /// (`--idle-connection-timeout`).
    pub idle_connection_timeout: Duration,
    /// With `--insecure`, a disconnected cluster silent for this long is
    /// forgotten (`--insecure-prune-after`).
    pub insecure_prune_after: Duration,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            max_cluster_report_bytes: DEFAULT_MAX_CLUSTER_REPORT_BYTES,
            max_clusters: DEFAULT_MAX_CLUSTERS,
            max_dashboard_calls: crate::reader_pool::DEFAULT_MAX_DASHBOARD_CALLS,
            max_dashboard_calls_per_connection: crate::read::DEFAULT_MAX_CALLS_PER_CONNECTION,
            max_dashboard_calls_per_address: DEFAULT_PER_ADDRESS,
            watch_send_timeout: crate::read::DEFAULT_WATCH_SEND_TIMEOUT,
            max_connections: DEFAULT_MAX_CLUSTERS,
            max_dashboard_connections: 64,
            max_dashboard_connections_per_address: DEFAULT_PER_ADDRESS,
            tls_handshake_timeout: Duration::from_secs(10),
            idle_connection_timeout: Duration::from_secs(30),
            insecure_prune_after: Duration::from_secs(600),
        }
    }
}

/// A running hub.
pub struct Hub {
    pub ingest_addr: SocketAddr,
    pub dashboard_addr: SocketAddr,
    /// The web page's address (`--web-listen`), if served.
    pub web_addr: Option<SocketAddr>,
    pub index: Index,
    /// The parts' counters, as `/metrics` serves them.
    pub metrics: HubMetrics,
    /// Fleet DNS as this replica's controller last decided it: the
    /// Kubernetes side's controller sends on it, the Dashboard and the web
    /// page read it (the default, `enabled` false, while DNS is off).
    pub dns_view: watch::Sender<Arc<DnsView>>,
    /// Cancelled by [`Hub::shutdown`]: every stream and server sees it.
    shutdown: CancellationToken,
    /// Cancels `shutdown` when the hub is dropped without a shutdown.
    _cancel_on_drop: DropGuard,
    /// Stops the admin server ([`Hub::serve_admin`]) once the hub is gone:
    /// after [`Hub::shutdown`] has drained the streams, so `/metrics` and
    /// the probes answer through the drain.
    admin_stop: DropGuard,
    servers: JoinSet<Result<(), tonic::transport::Error>>,
    background: JoinSet<()>,
}

/// Reflection over gwhub's services and health, for clients speaking
/// either version of the protocol.
fn reflection_builder() -> tonic_reflection::server::Builder<'static> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(v1::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
}

/// `grpc.reflection.v1` (grpcurl, newer clients).
fn reflection() -> tonic_reflection::server::v1::ServerReflectionServer<
    impl tonic_reflection::server::v1::ServerReflection,
> {
    reflection_builder()
        .build_v1()
        .expect("the embedded descriptor sets are valid")
}

/// `grpc.reflection.v1alpha` (Python's grpcio-reflection, Postman, older
/// grpcurl).
fn reflection_v1alpha() -> tonic_reflection::server::v1alpha::ServerReflectionServer<
    impl tonic_reflection::server::v1alpha::ServerReflection,
> {
    reflection_builder()
        .build_v1alpha()
        .expect("the embedded descriptor sets are valid")
}

/// The TLS material, followed on disk (by a task on `background`) while
/// the hub runs; `None` without TLS.
fn follow_tls(
    tls: Option<&HubTls>,
    metrics: &HubMetrics,
    background: &mut JoinSet<()>,
) -> Result<Option<Arc<TlsRuntime>>, ServeError> {
    let Some(tls) = tls else {
        return Ok(None);
    };
    let (runtime, follow) =
        TlsRuntime::start(tls.sources().clone(), metrics.tls.clone()).map_err(ServeError::Tls)?;
    if let Some(follow) = follow {
        background.spawn(follow);
    }
    Ok(Some(runtime))
}

/// The agents' `Ingest` service over `index`, counting into `metrics`,
/// serving Join and Renew when the hub has an `issuer`.
fn ingest_service(
    config: &HubConfig,
    index: &Index,
    metrics: &HubMetrics,
    issuer: Option<Arc<gwhub_k8s::join::Joiner>>,
    shutdown: CancellationToken,
) -> IngestService {
    IngestService::new(
        index.ingest_port(),
        IngestConfig {
            max_messages_per_second: config.max_messages_per_second,
            max_cluster_report_bytes: config.budgets.max_cluster_report_bytes,
            ..IngestConfig::for_stale_after(config.insecure, config.stale_after)
        },
        shutdown,
    )
    .count_in(metrics.ingest.clone())
    .with_issuer(
        issuer
            .inspect(|j| {
                j.count_refusals_into(metrics.joins.joins_refused.clone());
                j.count_outside_renewals_into(metrics.joins.renewals_outside_inventory.clone());
            })
            .map(|j| j as Arc<dyn crate::issuer::Issuer>),
    )
}

/// Who may read the Dashboard and the web page: the token or client CA
/// of `tls`, and with `readers` whom Kubernetes RBAC allows.
fn dashboard_auth(
    tls: Option<&HubTls>,
    readers: Option<Arc<crate::authz::KubeReaders>>,
    metrics: &HubMetrics,
) -> crate::tls::DashboardAuth {
    let auth = tls.map(HubTls::dashboard_auth).unwrap_or_default();
    match readers {
        Some(readers) => {
            readers.count_in(metrics.reviews.clone());
            auth.with_kubernetes(readers)
        }
        None => auth,
    }
}

async fn bind(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), ServeError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| ServeError::Bind { addr, source })?;
    Ok((listener, local))
}

fn builder() -> Server {
    Server::builder()
        .tcp_nodelay(true)
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
}

/// What a hub on Kubernetes adds to [`Hub::start_with_tls`]: each part
/// is in force before the first call is served.
#[derive(Default)]
pub struct KubeExtras {
    /// The fleet inventory (`--inventory-namespace` and its mode).
    pub inventory: Option<(String, gwhub_hub_rules::inventory::Mode)>,
    /// Dashboard and page readers authorized by Kubernetes RBAC
    /// (`--dashboard-auth=kubernetes`).
    pub readers: Option<std::sync::Arc<crate::authz::KubeReaders>>,
    /// Issues agent certificates on Join and Renew (the hub's Secrets:
    /// [`gwhub_k8s::SecretsIdentity::issuer`]); `None`: joining is off.
    pub issuer: Option<std::sync::Arc<gwhub_k8s::join::Joiner>>,
}

impl Hub {
    /// Binds both listeners and starts serving (plaintext).
    pub async fn start(config: HubConfig) -> Result<Hub, ServeError> {
        Self::start_with_tls(config, None).await
    }

    /// Binds both listeners and starts serving; with `tls`, agents must
    /// present client certificates and are identified by them.
    pub async fn start_with_tls(config: HubConfig, tls: Option<HubTls>) -> Result<Hub, ServeError> {
        Self::start_with(config, tls, KubeExtras::default()).await
    }

    /// Binds the listeners and starts serving, with what the Kubernetes
    /// side adds ([`KubeExtras`]): the index and its background tasks, the
    /// services, then each listener (`serve/listening.rs`).
    pub async fn start_with(
        config: HubConfig,
        tls: Option<HubTls>,
        extras: KubeExtras,
    ) -> Result<Hub, ServeError> {
        let (ingest_listener, ingest_addr) = bind(config.listen).await?;
        let (dashboard_listener, dashboard_addr) = bind(config.dashboard_listen).await?;
        let web_listener = match config.web_listen {
            Some(addr) => Some(bind(addr).await?),
            None => None,
        };
        let web_addr = web_listener.as_ref().map(|(_, a)| *a);
        let KubeExtras {
            inventory,
            readers,
            issuer,
        } = extras;
        let budgets = &config.budgets;
        let index = Index::new(IndexConfig {
            options: config.options.clone(),
            stale_after: config.stale_after,
            max_clusters: budgets.max_clusters,
            prune_after: config.insecure.then_some(budgets.insecure_prune_after),
            history_capacity: config.gateway_history,
            inventory,
        });
        let shutdown = CancellationToken::new();
        let (dns_view, _) = watch::channel(Arc::<DnsView>::default());
        let metrics = HubMetrics::default();

        let mut background = JoinSet::new();
        let tls_runtime = follow_tls(tls.as_ref(), &metrics, &mut background)?;
        background.spawn(index.clone().run_aggregator());
        background.spawn(index.clone().run_staleness());

        let ingest = ingest_service(&config, &index, &metrics, issuer, shutdown.clone());
        // One pool of --max-dashboard-calls for the gRPC Dashboard and the
        // web page's event streams.
        let dashboard_calls = crate::reader_pool::DashboardCalls::new(
            budgets.max_dashboard_calls,
            budgets.max_dashboard_calls_per_address,
            metrics.calls.clone(),
        );
        let auth = dashboard_auth(tls.as_ref(), readers, &metrics);
        let reader = ReaderLimits {
            max_calls_per_connection: budgets.max_dashboard_calls_per_connection,
            watch_send_timeout: budgets.watch_send_timeout,
        };
        let dashboard = DashboardService::with_limits(
            index.read_port(),
            shutdown.clone(),
            reader,
            dashboard_calls.clone(),
        )
        .with_auth(auth.clone())
        .with_dns(dns_view.subscribe());

        let mut listening = Listening {
            budgets: config.budgets.clone(),
            tls: tls_runtime,
            metrics: metrics.clone(),
            shutdown: shutdown.clone(),
            servers: JoinSet::new(),
        };
        listening.serve_ingest(ingest_listener, ingest).await?;
        listening
            .serve_dashboard(dashboard_listener, dashboard, auth.clone())
            .await?;
        if let Some((web_listener, _)) = web_listener {
            let web = crate::web::WebService::new(
                index.read_port(),
                auth,
                reader,
                dashboard_calls,
                shutdown.clone(),
                crate::web::WebAccess {
                    hosts: config.web_hosts.clone(),
                    tls: tls.is_some(),
                },
            )
            .with_dns(dns_view.subscribe());
            listening.serve_web(web_listener, web)?;
        }
        tracing::info!(%ingest_addr, %dashboard_addr, web_addr = ?web_addr, insecure = config.insecure, mtls = tls.is_some(), stale_after = ?config.stale_after, "hub serving");
        Ok(Hub {
            ingest_addr,
            dashboard_addr,
            web_addr,
            index,
            metrics,
            dns_view,
            shutdown: shutdown.clone(),
            _cancel_on_drop: shutdown.drop_guard(),
            admin_stop: CancellationToken::new().drop_guard(),
            servers: listening.servers,
            background,
        })
    }

    /// Serves the admin endpoints on `addr` (`--metrics-listen`):
    /// `/metrics` (the parts' counters and gauges, and the Kubernetes
    /// side's `kube` metrics when given), `/healthz`, and `/readyz`
    /// (ready once `kube`'s readiness holds; at once without one), until
    /// the hub is gone. Returns the bound address.
    pub async fn serve_admin(
        &self,
        addr: SocketAddr,
        kube: Option<(Arc<gwhub_k8s::metrics::Metrics>, watch::Receiver<bool>)>,
    ) -> std::io::Result<SocketAddr> {
        let stop = self.admin_stop.token().clone();
        let (kube, ready) = kube.unzip();
        let probes = crate::metrics::probes(self.index.clone(), ready, stop.clone());
        crate::metrics::serve(
            addr,
            self.index.clone(),
            self.metrics.clone(),
            kube,
            probes,
            stop,
        )
        .await
    }

    /// Runs fleet DNS without Kubernetes, a dry run from the clusters'
    /// reports ([`gwhub_dns::run_without_kube`]), until the hub stops.
    pub fn start_dns_without_kube(&mut self, config: gwhub_dns::DnsConfig) {
        self.background.spawn(gwhub_dns::run_without_kube(
            config,
            self.index.dns_port(),
            self.dns_view.clone(),
            self.shutdown.clone(),
        ));
    }

    /// Ends every stream, waits for the servers to drain, stops the tasks.
    pub async fn shutdown(mut self) -> Result<(), ServeError> {
        self.shutdown.cancel();
        let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
            while let Some(r) = self.servers.join_next().await {
                if let Ok(Err(e)) = r {
                    return Err(ServeError::Server(e));
                }
            }
            Ok(())
        })
        .await;
        self.background.shutdown().await;
        match drained {
            Ok(r) => r,
            Err(_) => {
                self.servers.shutdown().await;
                Err(ServeError::DrainTimeout(DRAIN_TIMEOUT))
            }
        }
    }

    /// Resolves when a server or a background task (aggregator, staleness
    /// sweep) ended; none does before shutdown unless something failed.
    pub async fn ended(&mut self) -> ServeError {
        tokio::select! {
            Some(r) = self.servers.join_next() => match r {
                Ok(Err(e)) => ServeError::Server(e),
                Ok(Ok(())) => task_end("a gRPC server", Ok(())),
                Err(e) => task_end("a gRPC server", Err(e)),
            },
            Some(r) = self.background.join_next() => {
                task_end("the aggregator or the staleness sweep", r)
            }
            else => std::future::pending().await,
        }
    }

    /// Serves until `signal` resolves (then shuts down cleanly) or a server
    /// or background task ends (then shuts down and returns why).
    pub async fn run_until(mut self, signal: impl Future<Output = ()>) -> Result<(), ServeError> {
        tokio::select! {
            _ = signal => {
                tracing::info!("shutting down: draining streams");
                self.shutdown().await
            }
            e = self.ended() => {
                tracing::error!(error = %e, "shutting down");
                let _ = self.shutdown().await;
                Err(e)
            }
        }
    }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
