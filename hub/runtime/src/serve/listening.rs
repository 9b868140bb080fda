//! Serving the hub's three listeners (ingest, Dashboard, web page): each
//! one's connection budget, its TLS acceptor and handshake timeout, its
//! services with health and reflection, shut down by the hub's one token.
//!
//! It exists so that [`super::Hub::start_with`] reads as the order of
//! start-up (the index, the services, then the listeners) and what every
//! listener shares (budgets, TLS, connection metrics) is said once here.

use std::sync::Arc;

use gwhub_proto::v1;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tonic::service::interceptor::InterceptedService;

use super::{
    Budgets, EXTRA_DASHBOARD_STREAMS, INGEST_STREAMS_PER_CONNECTION, ServeError, builder,
    reflection, reflection_v1alpha,
};
use crate::conn::{ConnLimits, Tracked, incoming, with_tls};
use crate::grpc::dashboard::DashboardService;
use crate::grpc::ingest::IngestService;
use crate::metrics::HubMetrics;
use crate::tls::DashboardAuth;
use crate::tls_reload::{ListenerKind, TlsRuntime};

/// A listener's accepted connections, through its TLS handshake if any.
type Connections = std::pin::Pin<
    Box<dyn futures::Stream<Item = Result<crate::conn::HubIo, std::io::Error>> + Send>,
>;

/// What every listener shares, and the servers spawned so far.
pub(super) struct Listening {
    pub(super) budgets: Budgets,
    /// The TLS material followed while the hub runs; `None`: plaintext.
    pub(super) tls: Option<Arc<TlsRuntime>>,
    pub(super) metrics: HubMetrics,
    pub(super) shutdown: CancellationToken,
    pub(super) servers: JoinSet<Result<(), tonic::transport::Error>>,
}

impl Listening {
    /// Agents' connections: no cap per client address (a fleet may reach
    /// the hub through one NAT).
    fn agent_limits(&self) -> ConnLimits {
        ConnLimits {
            max_connections: self.budgets.max_connections,
            idle_timeout: self.budgets.idle_connection_timeout,
            max_per_address: None,
        }
    }

    /// Readers' connections (Dashboard, web page): capped per client
    /// address too.
    fn reader_limits(&self) -> ConnLimits {
        let max_connections = self.budgets.max_dashboard_connections;
        ConnLimits {
            max_connections,
            idle_timeout: self.budgets.idle_connection_timeout,
            max_per_address: Some(super::per_address(
                self.budgets.max_dashboard_connections_per_address,
                max_connections,
            )),
        }
    }

    /// Streams a reader's connection may open: its calls, and a few for
    /// health and reflection.
    fn reader_streams(&self) -> u32 {
        u32::try_from(self.budgets.max_dashboard_calls_per_connection)
            .unwrap_or(u32::MAX)
            .saturating_add(EXTRA_DASHBOARD_STREAMS)
    }

    /// `listener`'s connections as a `kind` listener: its connection
    /// budget and metrics, through its TLS handshake when the hub serves
    /// TLS.
    fn connections(
        &self,
        listener: TcpListener,
        kind: ListenerKind,
    ) -> Result<Connections, ServeError> {
        let listeners = &self.metrics.listeners;
        let (limits, counters, name) = match kind {
            ListenerKind::Ingest => (self.agent_limits(), &listeners.ingest, "ingest"),
            ListenerKind::Dashboard => (self.reader_limits(), &listeners.dashboard, "dashboard"),
            ListenerKind::Web => (self.reader_limits(), &listeners.web, "web"),
        };
        let acceptor = self
            .tls
            .as_ref()
            .map(|r| r.acceptor(kind))
            .transpose()
            .map_err(ServeError::Tls)?;
        Ok(with_tls(
            incoming(listener, limits, counters.clone(), name),
            acceptor,
            self.budgets.tls_handshake_timeout,
            name,
        ))
    }

    fn stop(&self) -> impl Future<Output = ()> + use<> {
        self.shutdown.clone().cancelled_owned()
    }

    /// The agents' listener: `Ingest`, health and reflection.
    pub(super) async fn serve_ingest(
        &mut self,
        listener: TcpListener,
        ingest: IngestService,
    ) -> Result<(), ServeError> {
        let router = grpc_router::<v1::ingest_server::IngestServer<IngestService>>(
            INGEST_STREAMS_PER_CONNECTION,
        )
        .await;
        let connections = self.connections(listener, ListenerKind::Ingest)?;
        let stop = self.stop();
        self.servers.spawn(
            router
                .add_service(Tracked::new(ingest.into_server()))
                .serve_with_incoming_shutdown(connections, stop),
        );
        Ok(())
    }

    /// The Dashboard's listener: the read API behind `auth`, health and
    /// reflection.
    pub(super) async fn serve_dashboard(
        &mut self,
        listener: TcpListener,
        dashboard: DashboardService,
        auth: DashboardAuth,
    ) -> Result<(), ServeError> {
        let router = grpc_router::<v1::dashboard_server::DashboardServer<DashboardService>>(
            self.reader_streams(),
        )
        .await;
        let connections = self.connections(listener, ListenerKind::Dashboard)?;
        let stop = self.stop();
        self.servers.spawn(
            router
                // Inside the token check: a refused call is no use of the
                // connection.
                .add_service(InterceptedService::new(
                    Tracked::new(crate::grpc::watch_route::server(dashboard)),
                    auth,
                ))
                .serve_with_incoming_shutdown(connections, stop),
        );
        Ok(())
    }

    /// The web page's listener: the Dashboard's TLS, token and connection
    /// budgets (see `crate::web`); HTTP/1.1 too, for browsers on
    /// plaintext.
    pub(super) fn serve_web(
        &mut self,
        listener: TcpListener,
        web: crate::web::WebService,
    ) -> Result<(), ServeError> {
        let connections = self.connections(listener, ListenerKind::Web)?;
        let stop = self.stop();
        self.servers.spawn(
            builder()
                .accept_http1(true)
                .max_concurrent_streams(self.reader_streams())
                .add_routes(web.into_routes())
                .serve_with_incoming_shutdown(connections, stop),
        );
        Ok(())
    }
}

/// A gRPC listener's router: `streams` per connection, health (serving
/// `S`) and reflection in both versions. Every service counts its open
/// calls, so only connections with none for `--idle-connection-timeout`
/// are closed.
async fn grpc_router<S: tonic::server::NamedService>(
    streams: u32,
) -> tonic::transport::server::Router {
    let (health, health_svc) = tonic_health::server::health_reporter();
    health.set_serving::<S>().await;
    builder()
        .max_concurrent_streams(streams)
        .add_service(Tracked::new(health_svc))
        .add_service(Tracked::new(reflection()))
        .add_service(Tracked::new(reflection_v1alpha()))
}
