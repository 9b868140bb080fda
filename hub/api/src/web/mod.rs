//! `gwhub serve --web-listen ADDR`: a read-only status page of the fleet.
//!
//! The page (HTML, CSS and JavaScript written by hand, no framework, no
//! CDN) is embedded in the binary and served next to a small JSON API:
//!
//! | path | answer |
//! | --- | --- |
//! | `/`, `/app.js`, `/style.css` | the page (no data; no token needed) |
//! | `/api/fleet?namespace=&cluster=&not_ready=1` | one JSON snapshot: clusters and the matching hub Gateways (a cell per cluster each) |
//! | `/api/events?...` (same filter) | Server-Sent Events: a `snapshot` event, then a `change` event per change |
//! | `/api/gateway?namespace=NS&name=NAME` | one hub Gateway, each cluster's own report and its history |
//! | `/api/causes?namespace=&cluster=` | what is not ready across the fleet, grouped by cause ([`gwhub_hub_rules::causes`]) |
//! | `/api/dns?namespace=` | fleet DNS per hostname, as `ListDnsNames` answers it ([`dns`]) |
//!
//! The paths are the routes of one axum `Router` (`routes`): a middleware
//! (`checks`) refuses a request before its route, tower-http layers add
//! the page's headers to every answer, API answers are axum's `Json` and
//! the event stream axum's `Sse`.
//!
//! Live updates are Server-Sent Events fed by the index's `watch` channel,
//! through the same `crate::read::diff` and filter as
//! `WatchGateways`: a browser cannot speak gRPC (it needs HTTP/2 trailers),
//! and grpc-web would need a proxy or a JavaScript library; `EventSource`
//! is built into every browser, reconnects by itself and sends the
//! page's cookies. Changes coalesce in the watch channel while a page is
//! slow, exactly as for a gRPC watcher, and a page that takes no event for
//! `--watch-send-timeout` loses its connection.
//!
//! Transport and budgets are the Dashboard's: the page is served by tonic's
//! HTTP server (hyper 1, HTTP/1.1 and HTTP/2) over [`crate::conn::incoming`]
//! with `--max-dashboard-connections` and `--idle-connection-timeout`, the
//! Dashboard's TLS (server certificate, `--dashboard-client-ca`) and
//! `--tls-handshake-timeout`; event streams are Dashboard calls: slots of
//! `--max-dashboard-calls` from the same pool as gRPC Dashboard calls,
//! within `--max-dashboard-calls-per-address` and
//! `--max-dashboard-calls-per-connection`, counted in `gwhub_dashboard_calls`.
//! With `--dashboard-token-file` every `/api/` request needs the token, as
//! `Authorization: Bearer <token>` or as the cookie `gwhub_token=<token>`;
//! the page asks for the token when the API refuses it and keeps it in
//! that cookie (`SameSite=Strict`, `Secure`),
//! or takes it from the address's fragment (`https://hub:7445/#token=...`;
//! a fragment is never sent to the server or logged).
//! With `--dashboard-auth=kubernetes` that token is the reader's
//! Kubernetes token, and every API answer and event holds only what
//! [`crate::authz`] lets them see, decided as for the gRPC Dashboard
//! (the fleet's cluster list only for cluster-wide readers; 403 for a
//! namespace they may not read).
//!
//! Every answer checks the request's `Host` against the page's names
//! ([`gwhub_hub_rules::web_host`]: loopback names, IP literals,
//! `--web-host`), refusing others with 421, so a DNS-rebinding page cannot
//! read a token-less hub as its own origin; over TLS every answer carries
//! `Strict-Transport-Security`. Hub strings reach the page raw in the JSON
//! and are shown through the page's `printable`, the same rule as
//! gwhubctl's ([`gwhub_model::text::printable`]).

pub mod dns;
mod events;
mod views;

pub use views::{
    CellView, ClusterView, GatewayDetails, GatewayRow, MissingView, OmissionView, TransitionView,
    clusters_view, transition_json,
};

use std::borrow::Cow;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{FromRequestParts, Request, State as Shared};
use axum::http::request::Parts;
use axum::http::{HeaderName, HeaderValue, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_model::text::quote_client_input;
use gwhub_proto::convert;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::body::Body;
use tonic::codegen::http;
use tower_http::set_header::SetResponseHeaderLayer;

use gwhub_hub_rules::causes::{self, Causes, ClusterFacts, Liveness};
use gwhub_hub_rules::web_host::WebHosts;

use crate::authz::{ReadError, Reader};
use crate::index::{GatewayView, ReadPort};
use crate::read::{ReaderLimits, authorize_listing, authorized_dns_names, transition_to_proto};
use crate::reader_pool::DashboardCalls;
use crate::tls::DashboardAuth;
use gwhub_hub_rules::aggregate::GatewayKey;
use gwhub_hub_rules::listing::Filter;
use gwhub_hub_rules::read_access::Visibility;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const STYLE_CSS: &str = include_str!("assets/style.css");

/// Only the page's own files; no inline script, no other origin.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// `Strict-Transport-Security` over TLS: a year, this host only (the
/// hub does not speak for its domain's other names).
const HSTS: &str = "max-age=31536000";

/// The cookie the page keeps the bearer token in.
pub const TOKEN_COOKIE: &str = "gwhub_token";

/// What the web listener serves; cheap to clone.
#[derive(Clone)]
pub struct WebService {
    state: Arc<State>,
}

struct State {
    index: ReadPort,
    auth: DashboardAuth,
    /// Event streams open at once: slots of `--max-dashboard-calls`,
    /// shared with the gRPC Dashboard.
    streams: DashboardCalls,
    /// `--max-dashboard-calls-per-connection`, for event streams too.
    max_streams_per_connection: usize,
    send_timeout: Duration,
    shutdown: CancellationToken,
    /// The names the page answers to (`--web-host`, besides loopback
    /// names and IP literals).
    hosts: WebHosts,
    /// Served over TLS: answers carry `Strict-Transport-Security`.
    tls: bool,
    /// Fleet DNS as this replica last decided it.
    dns: watch::Receiver<Arc<crate::index::DnsView>>,
}

/// How the web listener is reached: its names and whether it speaks TLS.
#[derive(Clone, Debug, Default)]
pub struct WebAccess {
    pub hosts: WebHosts,
    pub tls: bool,
}

impl WebService {
    /// `/api/dns` from `dns` (the hub's [`crate::index::DnsView`] channel).
    pub fn with_dns(mut self, dns: watch::Receiver<Arc<crate::index::DnsView>>) -> Self {
        if let Some(state) = Arc::get_mut(&mut self.state) {
            state.dns = dns;
        }
        self
    }

    pub fn new(
        index: ReadPort,
        auth: DashboardAuth,
        limits: ReaderLimits,
        streams: DashboardCalls,
        shutdown: CancellationToken,
        access: WebAccess,
    ) -> Self {
        WebService {
            state: Arc::new(State {
                index,
                auth,
                streams,
                max_streams_per_connection: limits.max_calls_per_connection,
                send_timeout: limits.watch_send_timeout,
                shutdown,
                hosts: access.hosts,
                tls: access.tls,
                dns: watch::channel(Arc::default()).1,
            }),
        }
    }

    /// The tonic routes serving it (HTTP/1.1 needs `accept_http1`): the
    /// page's router (`routes`), each call keeping its connection busy
    /// ([`crate::conn::Tracked`]).
    pub fn into_routes(self) -> tonic::service::Routes {
        let router =
            tower::ServiceExt::<Request>::map_response(routes(self.state), |r: Response| {
                r.map(Body::new)
            });
        let tracked = crate::conn::Tracked::new(router);
        tonic::service::Routes::from(axum::Router::new().fallback_service(tracked))
    }
}

/// Binds `addr` for the web page; the caller serves it.
pub async fn bind(addr: SocketAddr) -> std::io::Result<(TcpListener, SocketAddr)> {
    let l = TcpListener::bind(addr).await?;
    let local = l.local_addr()?;
    Ok((l, local))
}

type Answer = Response;

/// The page's routes: its files, the JSON API and the event stream, behind
/// [`checks`] (Host, method, token), every answer with the page's security
/// headers (and HSTS over TLS).
fn routes(state: Arc<State>) -> axum::Router {
    const HTML: &str = "text/html; charset=utf-8";
    let file = |content_type: &'static str, body: &'static str| {
        move || async move { ([(header::CONTENT_TYPE, content_type)], body) }
    };
    let tls = state.tls;
    let header = |name: HeaderName, value: &'static str| {
        SetResponseHeaderLayer::overriding(name, HeaderValue::from_static(value))
    };
    let router = axum::Router::new()
        .route("/", get(file(HTML, INDEX_HTML)))
        .route("/index.html", get(file(HTML, INDEX_HTML)))
        .route(
            "/app.js",
            get(file("text/javascript; charset=utf-8", APP_JS)),
        )
        .route(
            "/style.css",
            get(file("text/css; charset=utf-8", STYLE_CSS)),
        )
        .route("/api/fleet", get(fleet))
        .route("/api/causes", get(causes_of))
        .route("/api/gateway", get(gateway))
        .route("/api/dns", get(dns_names))
        .route("/api/events", get(events))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), checks))
        .layer(header(header::CACHE_CONTROL, "no-store"))
        .layer(header(header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .layer(header(header::REFERRER_POLICY, "no-referrer"))
        .layer(header(header::X_FRAME_OPTIONS, "DENY"))
        .layer(header(header::CONTENT_SECURITY_POLICY, CSP))
        .with_state(state);
    match tls {
        true => router.layer(header(header::STRICT_TRANSPORT_SECURITY, HSTS)),
        false => router,
    }
}

/// What every error answer holds.
#[derive(serde::Serialize)]
struct ErrorBody {
    error: String,
}

fn error(status: StatusCode, message: impl Into<String>) -> Answer {
    let body = ErrorBody {
        error: message.into(),
    };
    (status, Json(body)).into_response()
}

/// The query's `key=value` pairs, percent-decoded.
fn query(uri: &http::Uri) -> HashMap<String, String> {
    form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// The filter a page asked for (`namespace`, `cluster`, `not_ready=1`).
fn filter_of(q: &HashMap<String, String>) -> Filter {
    let get = |k: &str| q.get(k).map(String::as_str).unwrap_or_default();
    Filter::new(
        get("namespace"),
        get("cluster"),
        matches!(get("not_ready"), "1" | "true"),
    )
}

/// The bearer token a request carries: the `Authorization` header, else
/// the page's cookie (which the page writes percent-encoded, so a token
/// with `+`, `/` or `=` survives the cookie syntax).
fn token_of(headers: &http::HeaderMap) -> Option<Cow<'_, str>> {
    if let Some(t) = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        return Some(Cow::Borrowed(t));
    }
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == TOKEN_COOKIE)
        .and_then(|(_, v)| percent_encoding::percent_decode_str(v).decode_utf8().ok())
}

/// The checks every request passes before its route: its `Host` is one of
/// the page's names (421), it only reads (405), and an `/api/` request
/// carries the token the hub requires, if any (401).
async fn checks(Shared(state): Shared<Arc<State>>, request: Request, next: Next) -> Answer {
    match state.refusal(&request) {
        Some(refused) => refused,
        None => next.run(request).await,
    }
}

/// The host a request names: HTTP/2's `:authority` (in the URI), else
/// the `Host` header; `None` if neither (or not text).
fn host_of<B>(request: &http::Request<B>) -> Option<Result<&str, ()>> {
    if let Some(a) = request.uri().authority() {
        return Some(Ok(a.as_str().rsplit('@').next().unwrap_or_default()));
    }
    request
        .headers()
        .get(http::header::HOST)
        .map(|v| v.to_str().map_err(|_| ()))
}

/// The reader of an `/api/` request (see [`crate::authz`]): its token
/// was accepted by [`checks`]; a reader who may not read is answered here.
struct ApiReader(Reader);

impl FromRequestParts<Arc<State>> for ApiReader {
    type Rejection = Answer;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<State>) -> Result<Self, Answer> {
        let token = token_of(&parts.headers).map(Cow::into_owned);
        match state.auth.reader(token.as_deref()).await {
            Ok(r) => Ok(ApiReader(r)),
            Err(e) => Err(read_error(e)),
        }
    }
}

/// The filter a listing's query asks for, once `reader` may list what it
/// keeps (see [`authorize_listing`]); the refusal to answer otherwise.
async fn authorized_filter(
    reader: &mut Reader,
    state: &State,
    uri: &Uri,
) -> Result<Filter, Answer> {
    let filter = filter_of(&query(uri));
    authorize_listing(reader, &state.index, &filter)
        .await
        .map_err(read_error)?;
    Ok(filter)
}

/// `/api/fleet`: one snapshot of the clusters and matching hub Gateways.
async fn fleet(
    Shared(state): Shared<Arc<State>>,
    ApiReader(mut reader): ApiReader,
    uri: Uri,
) -> Answer {
    match authorized_filter(&mut reader, &state, &uri).await {
        Ok(filter) => state.fleet(&filter, reader.visibility()),
        Err(refused) => refused,
    }
}

/// `/api/causes`: what is not ready, by cause.
async fn causes_of(
    Shared(state): Shared<Arc<State>>,
    ApiReader(mut reader): ApiReader,
    uri: Uri,
) -> Answer {
    match authorized_filter(&mut reader, &state, &uri).await {
        Ok(filter) => Json(state.causes(&filter, reader.visibility())).into_response(),
        Err(refused) => refused,
    }
}

/// `/api/gateway`: one hub Gateway with its clusters' reports and history.
async fn gateway(
    Shared(state): Shared<Arc<State>>,
    ApiReader(mut reader): ApiReader,
    uri: Uri,
) -> Answer {
    let q = query(&uri);
    if let Some(ns) = q.get("namespace")
        && let Err(e) = reader.check(ns).await
    {
        return read_error(e);
    }
    state.gateway(&q)
}

/// `/api/dns`: fleet DNS per hostname (see [`dns`]).
async fn dns_names(
    Shared(state): Shared<Arc<State>>,
    ApiReader(mut reader): ApiReader,
    uri: Uri,
) -> Answer {
    let namespace = query(&uri).remove("namespace").unwrap_or_default();
    let view = state.dns.borrow().clone();
    match authorized_dns_names(&mut reader, &view, &namespace).await {
        Ok(r) => Json(dns::answer_json(&r)).into_response(),
        Err(e) => read_error(e),
    }
}

/// `/api/events`: the Server-Sent Events of the matching hub Gateways.
async fn events(
    Shared(state): Shared<Arc<State>>,
    ApiReader(mut reader): ApiReader,
    uri: Uri,
    extensions: http::Extensions,
) -> Answer {
    let filter = filter_of(&query(&uri));
    if let Some(ns) = &filter.namespace
        && let Err(e) = reader.check(ns).await
    {
        return read_error(e);
    }
    let conn = crate::conn::conn_in(&extensions).cloned();
    state.events(conn, filter, reader)
}

/// Any other path: 404, after the reader's authorization under `/api/`.
async fn not_found(Shared(state): Shared<Arc<State>>, request: Request) -> Answer {
    let path = request.uri().path();
    if !path.starts_with("/api/") {
        return error(
            StatusCode::NOT_FOUND,
            format!("no page {}", quote_client_input(path)),
        );
    }
    let (mut parts, _) = request.into_parts();
    if let Err(refused) = ApiReader::from_request_parts(&mut parts, &state).await {
        return refused;
    }
    error(
        StatusCode::NOT_FOUND,
        format!("no API {}", quote_client_input(parts.uri.path())),
    )
}

impl State {
    /// Why `request` is refused before its route, if it is (see [`checks`]).
    fn refusal<B>(&self, request: &http::Request<B>) -> Option<Answer> {
        use http::StatusCode as S;
        let host = host_of(request);
        let allowed = match host {
            None => self.hosts.allows(None),
            Some(Ok(h)) => self.hosts.allows(Some(h)),
            Some(Err(())) => false,
        };
        if !allowed {
            let named = match host {
                Some(Ok(h)) => quote_client_input(h),
                _ => "that is not text".to_owned(),
            };
            return Some(error(
                S::MISDIRECTED_REQUEST,
                format!(
                    "this hub's page does not answer to Host {named}: open it by a loopback name, an IP address or a name given with --web-host"
                ),
            ));
        }
        if request.method() != http::Method::GET && request.method() != http::Method::HEAD {
            return Some(error(
                S::METHOD_NOT_ALLOWED,
                "the page is read-only: GET only",
            ));
        }
        if !request.uri().path().starts_with("/api/") {
            return None;
        }
        let token = token_of(request.headers());
        if !self.auth.accepts(token.as_deref()) {
            return Some(error(
                S::UNAUTHORIZED,
                format!(
                    "the hub requires its Dashboard token: send `Authorization: Bearer <token>` or the cookie {TOKEN_COOKIE}"
                ),
            ));
        }
        None
    }

    /// Every cluster (for a cluster-wide reader) and every hub Gateway
    /// matching `filter` that the reader may see.
    fn fleet(&self, filter: &Filter, visibility: &Visibility) -> Answer {
        let views: Vec<Arc<GatewayView>> = self
            .index
            .subscribe()
            .borrow()
            .gateways
            .values()
            .filter(|v| filter.matches(v.facts()) && visibility.sees(&v.key.namespace))
            .cloned()
            .collect();
        Json(Fleet {
            clusters: visible_clusters(&self.index, visibility),
            gateways: views.iter().map(|v| GatewayRow::of(v)).collect(),
            stale_after_millis: self.stale_after_millis(),
        })
        .into_response()
    }

    /// How old a cluster's last report may be before the page shows it
    /// stale.
    fn stale_after_millis(&self) -> u64 {
        u64::try_from(self.index.stale_after().as_millis()).unwrap_or(u64::MAX)
    }

    /// What is not ready in the clusters and hub Gateways `filter` keeps
    /// (its namespace and cluster; `not_ready` changes nothing) and the
    /// reader may see, by cause. A reader who is not cluster-wide sees the
    /// liveness only of the clusters reporting Gateways they may read.
    fn causes(&self, filter: &Filter, visibility: &Visibility) -> Causes {
        let cluster_ok = |c: &str| filter.cluster.as_deref().is_none_or(|f| f == c);
        let reports = self.index.all_reports(|k| {
            filter.namespace.as_deref().is_none_or(|n| n == k.namespace)
                && visibility.sees(&k.namespace)
        });
        let input: Vec<_> = reports
            .iter()
            .filter(|(_, r)| cluster_ok(&r.cluster))
            .map(|(k, r)| (k, r.as_report()))
            .collect();
        let reporting: std::collections::BTreeSet<&str> =
            input.iter().map(|(_, r)| r.cluster).collect();
        let listed = self.index.listed_clusters();
        let facts: Vec<ClusterFacts<'_>> = listed
            .iter()
            .map(|l| &l.summary)
            .filter(|c| cluster_ok(&c.name))
            .filter(|c| visibility.is_cluster_wide() || reporting.contains(c.name.as_str()))
            .map(|c| ClusterFacts {
                name: &c.name,
                liveness: if c.stale {
                    Liveness::Stale
                } else if c.last_report_millis == 0 && c.gateway_count == 0 {
                    Liveness::NeverReported
                } else {
                    Liveness::Fresh
                },
            })
            .collect();
        // The hub's own problems, unless the page looks at one cluster.
        let views: Vec<Arc<GatewayView>> = match filter.cluster {
            Some(_) => Vec::new(),
            None => self
                .index
                .subscribe()
                .borrow()
                .gateways
                .values()
                .filter(|v| {
                    filter
                        .namespace
                        .as_deref()
                        .is_none_or(|n| n == v.key.namespace)
                        && visibility.sees(&v.key.namespace)
                })
                .cloned()
                .collect(),
        };
        let aggregated: Vec<_> = views
            .iter()
            .map(|v| (&v.key, &v.aggregation.status))
            .collect();
        causes::group(&facts, &input, &aggregated, causes::Limits::default())
    }

    fn gateway(&self, q: &HashMap<String, String>) -> Answer {
        use http::StatusCode as S;
        let (Some(ns), Some(name)) = (q.get("namespace"), q.get("name")) else {
            return error(S::BAD_REQUEST, "namespace and name are required");
        };
        let key = GatewayKey::new(ns.as_str(), name.as_str());
        let Some(view) = self.index.subscribe().borrow().gateways.get(&key).cloned() else {
            return error(
                S::NOT_FOUND,
                format!(
                    "no cluster reports Gateway {}",
                    quote_client_input(&key.to_string())
                ),
            );
        };
        let reports: Vec<ReportView> = self
            .index
            .cluster_reports(&key)
            .into_iter()
            .map(|c| ReportView {
                status: convert::status_from_proto(c.status).unwrap_or_default(),
                cluster: c.cluster,
                stale: c.stale,
                last_seen_millis: c.last_seen_millis,
            })
            .collect();
        let history: Vec<Value> = self
            .index
            .history(&key, 0)
            .unwrap_or_default()
            .into_iter()
            .rev()
            .map(|t| {
                let t = transition_to_proto(t);
                transition_json(&t, "timeMillis", json!(t.time_millis))
            })
            .collect();
        Json(GatewayAnswer {
            gateway: GatewayDetails::of(&view),
            reports,
            history,
        })
        .into_response()
    }
}

/// The page's answer to a reader who may not read.
fn read_error(e: ReadError) -> Answer {
    use http::StatusCode as S;
    let status = match e {
        ReadError::Unauthenticated(_) => S::UNAUTHORIZED,
        ReadError::Forbidden(_) => S::FORBIDDEN,
        ReadError::Unavailable(_) => S::SERVICE_UNAVAILABLE,
        ReadError::Limited(_) => S::TOO_MANY_REQUESTS,
    };
    error(status, e.to_string())
}

/// The fleet's clusters for a reader who reads cluster-wide; none for
/// others (they see their Gateways' cells, not the fleet).
fn visible_clusters(index: &ReadPort, visibility: &Visibility) -> Vec<ClusterView> {
    match visibility.is_cluster_wide() {
        true => clusters_view(&index.listed_clusters()),
        false => Vec::new(),
    }
}

/// `/api/fleet`, and the event stream's `snapshot` event.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Fleet<'a, C: Serialize> {
    clusters: C,
    gateways: Vec<GatewayRow<'a>>,
    stale_after_millis: u64,
}

/// The event stream's `change` event.
#[derive(Serialize)]
struct Change<'a> {
    clusters: &'a [ClusterView],
    upserted: Vec<GatewayRow<'a>>,
    deleted: Vec<GatewayName<'a>>,
}

/// A hub Gateway gone from the page's view.
#[derive(Serialize)]
struct GatewayName<'a> {
    namespace: &'a str,
    name: &'a str,
}

/// `/api/gateway`.
#[derive(Serialize)]
struct GatewayAnswer<'a> {
    gateway: GatewayDetails<'a>,
    reports: Vec<ReportView>,
    history: Vec<Value>,
}

/// One cluster's own report of a hub Gateway.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReportView {
    cluster: String,
    stale: bool,
    last_seen_millis: i64,
    status: GatewayStatus,
}

#[cfg(test)]
mod tests;
