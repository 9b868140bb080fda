//! `gwhub.v1.Dashboard`: read-only views of the index. Every read clones
//! pre-encoded Gateways out of the current `watch` value; nothing waits on
//! ingest.
//!
//! Each call's reader sees what [`crate::authz`] decides (with
//! `--dashboard-auth=kubernetes`, the namespaces RBAC lets them read); the
//! web page filters through the same `authorize_listing` and `diff`
//! ([`crate::read`]).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use gwhub_model::text::quote_client_input;
use gwhub_proto::v1;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::authz::Reader;
use crate::read::{
    Diff, ReaderLimits, Sent, authorize_listing, authorized_dns_names, diff, transition_to_proto,
    undecided,
};
use crate::reader_pool::{CallPermit, DEFAULT_MAX_DASHBOARD_CALLS, DashboardCalls};
use crate::tls::DashboardAuth;

use crate::grpc::view::{Page, WATCH_PAGE_BYTES};
use crate::index::{DnsView, ReadPort};
use gwhub_hub_rules::aggregate::GatewayKey;
use gwhub_hub_rules::listing::{self, Filter};

pub struct DashboardService {
    index: ReadPort,
    shutdown: CancellationToken,
    /// `--max-dashboard-calls`, shared with the web page.
    calls: DashboardCalls,
    max_calls_per_connection: usize,
    watch_send_timeout: Duration,
    /// Who may read what (see [`crate::authz`]); the shared token is
    /// checked before, by the interceptor.
    auth: DashboardAuth,
    /// Fleet DNS as this replica's controller last decided it.
    dns: watch::Receiver<Arc<DnsView>>,
}

impl DashboardService {
    /// `shutdown` being cancelled ends every watch.
    pub fn new(index: ReadPort, shutdown: CancellationToken) -> Self {
        let calls = DashboardCalls::new(
            DEFAULT_MAX_DASHBOARD_CALLS,
            crate::reader_pool::DEFAULT_PER_ADDRESS,
            Arc::default(),
        );
        Self::with_limits(index, shutdown, ReaderLimits::default(), calls)
    }

    /// With the per-connection call and watcher limits of `limits`; `calls`
    /// are the slots of `--max-dashboard-calls` (shared with the web page).
    pub fn with_limits(
        index: ReadPort,
        shutdown: CancellationToken,
        limits: ReaderLimits,
        calls: DashboardCalls,
    ) -> Self {
        DashboardService {
            index,
            shutdown,
            calls,
            max_calls_per_connection: limits.max_calls_per_connection,
            watch_send_timeout: limits.watch_send_timeout,
            auth: DashboardAuth::default(),
            dns: watch::channel(Arc::default()).1,
        }
    }

    /// Answers `ListDnsNames` from `dns` (the hub's [`DnsView`] channel).
    pub fn with_dns(mut self, dns: watch::Receiver<Arc<DnsView>>) -> Self {
        self.dns = dns;
        self
    }

    /// Readers authorized as `auth` says (Kubernetes RBAC or everyone).
    pub fn with_auth(mut self, auth: DashboardAuth) -> Self {
        self.auth = auth;
        self
    }

    /// The caller and what they may see: `UNAUTHENTICATED` without a valid
    /// token under `--dashboard-auth=kubernetes`.
    async fn reader<T>(&self, request: &Request<T>) -> Result<Reader, Status> {
        Ok(self.auth.reader(bearer(request)).await?)
    }

    /// Takes a slot of `--max-dashboard-calls` and of the connection's
    /// `--max-dashboard-calls-per-connection`, or refuses the call.
    fn admit<T>(&self, request: &Request<T>) -> Result<CallPermit, Status> {
        self.calls
            .admit(
                crate::conn::conn_of(request),
                self.auth.known(bearer(request)),
                self.max_calls_per_connection,
            )
            .map_err(|e| Status::resource_exhausted(e.to_string()))
    }

    /// A `ListGateways` answer as a [`Page`] of the views' shared
    /// encodings, and its call's slot (see [`Self::hold`]).
    pub(crate) async fn list(
        &self,
        request: Request<v1::ListGatewaysRequest>,
    ) -> Result<(Page, CallPermit), Status> {
        let permit = self.admit(&request)?;
        let mut reader = self.reader(&request).await?;
        let r = request.into_inner();
        let filter = filter_of(r.filter.as_ref());
        authorize_listing(&mut reader, &self.index, &filter).await?;
        let visibility = reader.visibility();
        let after = match r.page_token.as_str() {
            "" => None,
            t => Some(
                listing::decode_token(t).map_err(|e| Status::invalid_argument(e.to_string()))?,
            ),
        };
        // Encoded (once per view, shared) after letting go of the watch
        // channel's lock.
        let page = {
            let views = self.index.subscribe();
            let views = views.borrow();
            listing::page(
                views
                    .gateways
                    .iter()
                    .filter(|(_, v)| filter.matches(v.facts()) && visibility.sees(&v.key.namespace))
                    .map(|(k, v)| (k, v.clone())),
                after.as_ref(),
                listing::page_size(r.page_size),
            )
        };
        let answer = Page::list(
            &page.items,
            page.next.as_deref().unwrap_or_default(),
            u32::try_from(page.total).unwrap_or(u32::MAX),
        );
        Ok((answer, permit))
    }

    /// A unary answer that keeps its call's slot until the transport has
    /// sent it (see [`crate::conn::Hold`]): an answer the caller never reads
    /// stays within `--max-dashboard-calls`, and after
    /// `--watch-send-timeout` its connection is closed, dropping what was
    /// buffered for it.
    fn answer<T>(&self, message: T, permit: CallPermit) -> Response<T> {
        let mut response = Response::new(message);
        if let Some(hold) = self.hold(permit) {
            response.extensions_mut().insert(hold);
        }
        response
    }

    /// What keeps a unary answer's call slot (see [`Self::answer`]): to go
    /// into the response's extensions, for [`crate::conn::Tracked`].
    pub(crate) fn hold(&self, permit: CallPermit) -> Option<crate::conn::Hold> {
        let conn = permit.conn.clone()?;
        let (sent, unsent) = oneshot::channel::<()>();
        let counters = permit.counters.clone();
        let timeout = self.watch_send_timeout;
        let hold: Arc<(CallPermit, oneshot::Sender<()>)> = Arc::new((permit, sent));
        tokio::spawn(async move {
            // The sender goes with the answer's body: sent, or the call dropped.
            if tokio::time::timeout(timeout, unsent).await.is_err() {
                counters.answers_dropped.inc();
                tracing::warn!(
                    ?timeout,
                    "closing a Dashboard connection that takes no answer (--watch-send-timeout)"
                );
                conn.close();
            }
        });
        Some(crate::conn::Hold(hold))
    }

    /// A watch: its messages as [`Page`]s, each at most
    /// [`WATCH_PAGE_BYTES`] (but for one larger Gateway), made of the
    /// views' shared encodings. The next page is made only once the
    /// transport took all of this one (the page is dropped), from the
    /// views of then; a watcher that has not taken a page within
    /// `--watch-send-timeout` is dropped with its connection, whether or
    /// not the fleet changes meanwhile.
    pub(crate) async fn watch(
        &self,
        request: Request<v1::WatchGatewaysRequest>,
    ) -> Result<mpsc::Receiver<Result<Page, Status>>, Status> {
        let permit = self.admit(&request)?;
        let mut reader = self.reader(&request).await?;
        let conn = crate::conn::conn_of(&request).map(|c| c.state.clone());
        let r = request.into_inner();
        let lean = r.omit_unchanged_omissions;
        let filter = filter_of(r.filter.as_ref());
        if let Some(ns) = &filter.namespace {
            reader.check(ns).await?;
        }
        let mut views = self.index.subscribe();
        let shutdown = self.shutdown.clone();
        let send_timeout = self.watch_send_timeout;
        let calls = self.calls.clone();
        let (tx, rx) = mpsc::channel(1);
        tokio::spawn(async move {
            let permit = permit;
            let mut sent = HashMap::new();
            // The next message is the snapshot's first; the snapshot is
            // still being sent.
            let mut first = true;
            let mut in_snapshot = true;
            loop {
                // Namespaces appearing are decided before their Gateways
                // are sent; a reader refused meanwhile gets the refusal.
                let missing = undecided(&views.borrow_and_update(), &filter, reader.visibility());
                if let Err(e) = reader.decide(missing.iter().map(String::as_str)).await {
                    let _ = tx.try_send(Err(e.into()));
                    return;
                }
                let d = diff(
                    &views.borrow(),
                    &mut sent,
                    lean,
                    &filter,
                    reader.visibility(),
                );
                let mut more = false;
                if in_snapshot || !d.is_empty() {
                    let (page, taken, rest) = next_page(d, &mut sent, first, in_snapshot);
                    more = rest;
                    first = false;
                    in_snapshot &= more;
                    tokio::select! {
                        r = tx.send(Ok(page)) => if r.is_err() { return },
                        _ = shutdown.cancelled() => break,
                    }
                    // Taken: the transport handed all of it to HTTP/2,
                    // which needs the peer's flow-control window. A
                    // watcher that grants none is dropped, with its
                    // connection, rather than buffered for.
                    // Sooner while others are refused for a full pool.
                    let since = tokio::time::Instant::now();
                    let in_time = tokio::select! {
                        _ = taken => true,
                        () = calls.stalled(since, send_timeout) => false,
                        _ = shutdown.cancelled() => break,
                    };
                    if !in_time {
                        permit.counters.watchers_dropped.inc();
                        tracing::warn!(timeout = ?send_timeout, "dropping a Dashboard watcher that takes no messages (--watch-send-timeout, or 5 s while other readers are refused)");
                        if let Some(c) = &conn {
                            c.close();
                        }
                        return;
                    }
                }
                if more {
                    continue;
                }
                tokio::select! {
                    r = views.changed() => if r.is_err() { break },
                    // RBAC changes and revoked tokens reach a long watch.
                    _ = crate::authz::until(reader.recheck_at()) => {
                        if let Err(e) = reader.recheck().await {
                            let _ = tx.try_send(Err(e.into()));
                            return;
                        }
                    }
                    _ = tx.closed() => return,
                    _ = shutdown.cancelled() => break,
                }
            }
            // Not waited for: a watcher that takes nothing must not hold
            // the hub's shutdown up.
            let _ = tx.try_send(Err(Status::unavailable("the hub is shutting down")));
        });
        Ok(rx)
    }
}

/// The next page of a watch from diff `d`: at most [`WATCH_PAGE_BYTES`]
/// of views, encoded (once per view, shared) outside the lock; the
/// receiver fires once the transport took all of it; the last value says
/// whether views are left for the next page. The rest is diffed again
/// against the views of then: nothing superseded is kept for a slow
/// watcher.
fn next_page(
    mut d: Diff,
    sent: &mut Sent,
    first: bool,
    in_snapshot: bool,
) -> (Page, oneshot::Receiver<()>, bool) {
    let upserted = d.take_page(sent, WATCH_PAGE_BYTES, |v, lean| {
        v.encoded().framed_len(lean)
    });
    let more = !d.upserted.is_empty();
    let deleted = std::mem::take(&mut d.deleted);
    drop(d);
    let (done, taken) = oneshot::channel::<()>();
    let mut page = Page::new(first, in_snapshot && more, &upserted, &deleted);
    page.done = Some(done);
    drop(upserted);
    (page, taken, more)
}

/// The request's bearer token, if any.
fn bearer<T>(request: &Request<T>) -> Option<&str> {
    request
        .metadata()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

fn millis_to_secs(ms: i64) -> i64 {
    ms.div_euclid(1000)
}

#[tonic::async_trait]
impl v1::dashboard_server::Dashboard for DashboardService {
    async fn list_dns_names(
        &self,
        request: Request<v1::ListDnsNamesRequest>,
    ) -> Result<Response<v1::ListDnsNamesResponse>, Status> {
        let permit = self.admit(&request)?;
        let mut reader = self.reader(&request).await?;
        let namespace = request.into_inner().namespace;
        let view = self.dns.borrow().clone();
        let answer = authorized_dns_names(&mut reader, &view, &namespace).await?;
        Ok(self.answer(answer, permit))
    }

    async fn list_gateways(
        &self,
        request: Request<v1::ListGatewaysRequest>,
    ) -> Result<Response<v1::ListGatewaysResponse>, Status> {
        // Served as frames by the watch route (`watch_route.rs`); this path is
        // for callers of the service itself, which take messages.
        let (page, permit) = self.list(request).await?;
        let message = page
            .decode_as()
            .map_err(|e| Status::internal(format!("a list answer does not decode: {e}")))?;
        Ok(self.answer(message, permit))
    }

    async fn get_gateway(
        &self,
        request: Request<v1::GetGatewayRequest>,
    ) -> Result<Response<v1::GetGatewayResponse>, Status> {
        let permit = self.admit(&request)?;
        let mut reader = self.reader(&request).await?;
        let r = request.into_inner();
        // Before looking: a forbidden namespace's Gateways are not even
        // told apart from absent ones.
        reader.check(&r.namespace).await?;
        let key = GatewayKey::new(r.namespace, r.name);
        let view = self.index.subscribe().borrow().gateways.get(&key).cloned();
        let Some(view) = view else {
            return Err(Status::not_found(format!(
                "no cluster reports Gateway {}",
                quote_client_input(&key.to_string())
            )));
        };
        let clusters = self
            .index
            .cluster_reports(&key)
            .into_iter()
            .map(|c| v1::ClusterGatewayStatus {
                cluster: c.cluster,
                stale: c.stale,
                last_report_time: millis_to_secs(c.last_seen_millis),
                status: Some(c.status),
            })
            .collect();
        Ok(self.answer(
            v1::GetGatewayResponse {
                gateway: Some(view.full()),
                clusters,
            },
            permit,
        ))
    }

    type WatchGatewaysStream =
        Pin<Box<dyn Stream<Item = Result<v1::WatchGatewaysResponse, Status>> + Send + 'static>>;

    async fn watch_gateways(
        &self,
        request: Request<v1::WatchGatewaysRequest>,
    ) -> Result<Response<Self::WatchGatewaysStream>, Status> {
        // Served as frames by the watch route (`watch_route.rs`); this path is
        // for callers of the service itself, which take messages.
        let rx = self.watch(request).await?;
        let messages = ReceiverStream::new(rx).map(|page| {
            page.and_then(|p| {
                p.decode()
                    .map_err(|e| Status::internal(format!("a watch message does not decode: {e}")))
            })
        });
        Ok(Response::new(Box::pin(messages)))
    }

    async fn list_clusters(
        &self,
        request: Request<v1::ListClustersRequest>,
    ) -> Result<Response<v1::ListClustersResponse>, Status> {
        let permit = self.admit(&request)?;
        self.reader(&request)
            .await?
            .check_cluster_wide("ListClusters")?;
        let clusters = self
            .index
            .listed_clusters()
            .into_iter()
            .map(|l| {
                let c = l.summary;
                v1::ClusterInfo {
                    name: c.name,
                    connected: c.connected,
                    stale: c.stale,
                    last_report_time: millis_to_secs(c.last_report_millis),
                    gateway_count: u32::try_from(c.gateway_count).unwrap_or(u32::MAX),
                    last_seen_time: millis_to_secs(c.last_seen_millis),
                    agent_version: c.agent_version,
                    in_inventory: l.in_inventory,
                    never_connected: l.never_connected,
                    outside_inventory: l.outside_inventory,
                }
            })
            .collect();
        Ok(self.answer(v1::ListClustersResponse { clusters }, permit))
    }

    async fn get_gateway_history(
        &self,
        request: Request<v1::GetGatewayHistoryRequest>,
    ) -> Result<Response<v1::GetGatewayHistoryResponse>, Status> {
        let permit = self.admit(&request)?;
        let mut reader = self.reader(&request).await?;
        let r = request.into_inner();
        reader.check(&r.namespace).await?;
        let key = GatewayKey::new(r.namespace, r.name);
        let limit = usize::try_from(r.limit).unwrap_or(usize::MAX);
        let Some(list) = self.index.history(&key, limit) else {
            return Err(Status::not_found(format!(
                "the hub keeps no history for Gateway {} (no cluster reports it, or --gateway-history is 0)",
                quote_client_input(&key.to_string())
            )));
        };
        let transitions = list.into_iter().map(transition_to_proto).collect();
        Ok(self.answer(
            v1::GetGatewayHistoryResponse {
                transitions,
                capacity: u32::try_from(self.index.history_capacity()).unwrap_or(u32::MAX),
            },
            permit,
        ))
    }
}

/// The wire's filter as the listing rules take it.
pub fn filter_of(f: Option<&v1::GatewayFilter>) -> Filter {
    f.map(|f| Filter::new(&f.namespace, &f.cluster, f.not_ready))
        .unwrap_or_default()
}
