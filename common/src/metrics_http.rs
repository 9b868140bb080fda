//! The metrics and probe endpoint both binaries serve on `--metrics-listen`:
//! `GET /metrics` answering the OpenMetrics text of a [`prometheus_client`]
//! [`Registry`], with Kubernetes' probes beside it ([`Probes`]: `GET
//! /healthz`, `GET /readyz`).
//!
//! The routes are an axum [`Router`] ([`router`]), served by hyper's HTTP/1
//! connection with the bounds a scrape endpoint needs against slow or
//! hostile clients (`serve_router`): `MAX_CONNECTIONS` connections at
//! once (others wait in the accept queue), one deadline for the whole
//! request head (`READ_TIMEOUT`: a client trickling a byte at a time
//! cannot hold a slot), one for the whole exchange (a client that never
//! reads the answer cannot either), a bounded head and body, one request per
//! connection. Both binaries already link axum and hyper through tonic, so
//! this is the one HTTP stack of the tree rather than a hand-written one.
//!
//! Both runtimes declare each metric once, next to its name and help
//! ([`register`]), and build one [`Registry`] at start.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Metric;
pub use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

/// A gauge of a count (never negative).
pub type CountGauge = Gauge<u64, AtomicU64>;

/// Produces the exposition for one scrape.
type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// Whether the process can serve now (readiness), asked at each probe.
type Ready = Arc<dyn Fn() -> bool + Send + Sync>;

/// How often the heartbeat runs its check.
pub(crate) const HEARTBEAT_EVERY: Duration = Duration::from_secs(1);
/// How old the last heartbeat may be for `/healthz` to answer 200: ten
/// missed beats, far beyond a busy runtime's timer lag.
pub(crate) const LIVENESS_WINDOW: Duration = Duration::from_secs(10);

/// What `GET /healthz` (liveness) and `GET /readyz` (readiness) answer.
///
/// Liveness is a heartbeat: a task on the process's runtime runs a check
/// every `HEARTBEAT_EVERY` (the caller's: it takes the locks the serving
/// state lives behind) and records when it finished; `/healthz` fails once
/// the last beat is older than `LIVENESS_WINDOW`, i.e. when the runtime no
/// longer runs its timers or the serving state's locks are wedged. It does
/// not depend on any peer (API server, hub) being reachable.
///
/// Readiness is the caller's own answer (caches or watches synced), and
/// never true while not live.
#[derive(Clone)]
pub struct Probes {
    ready: Ready,
    /// `None`: no heartbeat; live whenever this answers.
    heart: Option<Arc<Heart>>,
}

impl std::fmt::Debug for Probes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probes")
            .field("live", &self.is_live())
            .field("ready", &self.is_ready())
            .finish()
    }
}

#[derive(Debug)]
struct Heart {
    start: Instant,
    /// Milliseconds from `start` to the end of the last good beat.
    last: AtomicU64,
    window: Duration,
}

impl Probes {
    /// Probes answering `ready()` for readiness, with a heartbeat running
    /// `check` on the current runtime until `shutdown` (see [`Probes`]).
    pub fn new(
        ready: impl Fn() -> bool + Send + Sync + 'static,
        check: impl Fn() + Send + Sync + 'static,
        shutdown: CancellationToken,
    ) -> Self {
        Self::with_heartbeat(
            Arc::new(ready),
            Arc::new(check),
            HEARTBEAT_EVERY,
            LIVENESS_WINDOW,
            shutdown,
        )
    }

    /// Live and ready whenever the listener answers (no heartbeat).
    pub fn always() -> Self {
        Probes {
            ready: Arc::new(|| true),
            heart: None,
        }
    }

    fn with_heartbeat(
        ready: Ready,
        check: Arc<dyn Fn() + Send + Sync>,
        every: Duration,
        window: Duration,
        shutdown: CancellationToken,
    ) -> Self {
        let heart = Arc::new(Heart {
            start: Instant::now(),
            last: AtomicU64::new(0),
            window,
        });
        let beat = heart.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tick.tick() => {}
                }
                // On the blocking pool: a check stuck on a wedged lock
                // stops the beats without taking a runtime worker with it.
                let check = check.clone();
                if tokio::task::spawn_blocking(move || check()).await.is_err() {
                    // The check panicked: no beat.
                    continue;
                }
                let ms = u64::try_from(beat.start.elapsed().as_millis()).unwrap_or(u64::MAX);
                beat.last.store(ms, Ordering::Relaxed);
            }
        });
        Probes {
            ready,
            heart: Some(heart),
        }
    }

    /// Whether the heartbeat is recent (always true without one).
    pub fn is_live(&self) -> bool {
        self.heart.as_ref().is_none_or(|h| {
            let last = Duration::from_millis(h.last.load(Ordering::Relaxed));
            h.start.elapsed().saturating_sub(last) <= h.window
        })
    }

    /// Whether the process is live and says it can serve.
    pub fn is_ready(&self) -> bool {
        self.is_live() && (self.ready)()
    }
}

/// The content type of the answer: the OpenMetrics text `prometheus_client`
/// encodes (counters' samples end in `_total`, the text in `# EOF`), which
/// Prometheus negotiates and parses.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Longest request head read (hyper's smallest read buffer); longer heads
/// are refused.
const MAX_HEAD: usize = 8192;
/// Longest request body accepted; no route needs one.
const MAX_BODY: usize = 4096;
/// How long a client may take to send its whole request head (one deadline,
/// not per read: a client trickling a byte at a time cannot hold a slot).
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client may take, after the head's deadline, to read the whole
/// answer: one that sends a request and never reads cannot hold a slot
/// either. Also the longest a route may take to answer.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once; a scraper needs one.
pub(crate) const MAX_CONNECTIONS: usize = 16;
/// Pause after a failed accept.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Binds `addr` and serves `GET /metrics` with the text of `registry` until
/// `shutdown` is cancelled; `/healthz` and `/readyz` always answer 200.
/// Returns the bound address (useful with port 0) once listening; a bind
/// failure is returned, later errors end only their connection.
pub async fn serve(
    addr: SocketAddr,
    registry: Arc<Registry>,
    shutdown: CancellationToken,
) -> std::io::Result<SocketAddr> {
    serve_probes(addr, registry, Probes::always(), shutdown).await
}

/// [`serve`], with `GET /healthz` and `GET /readyz` answering `probes`
/// (200 `ok`, or 503 saying which failed).
pub async fn serve_probes(
    addr: SocketAddr,
    registry: Arc<Registry>,
    probes: Probes,
    shutdown: CancellationToken,
) -> std::io::Result<SocketAddr> {
    serve_router(addr, router(registry, probes), shutdown).await
}

/// The routes of `--metrics-listen`: `GET /metrics` (any query) with the
/// text of `registry`, `GET /healthz` and `GET /readyz` answering `probes`
/// (any query, e.g. `?verbose`), 404 elsewhere. A process adding its own
/// routes merges them into this router and serves it with
/// `serve_router`.
pub fn router(registry: Arc<Registry>, probes: Probes) -> Router {
    let render: Render = Arc::new(move || encode(&registry));
    Pages { render, probes }.router()
}

/// What the listener answers.
#[derive(Clone)]
struct Pages {
    render: Render,
    probes: Probes,
}

/// The content type of the probes' and the 404's text.
const TEXT: &str = "text/plain; charset=utf-8";

/// A plain-text answer.
fn text(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, TEXT)], body).into_response()
}

impl Pages {
    fn router(self) -> Router {
        let metrics = self.clone();
        let healthz = self.clone();
        let readyz = self;
        Router::new()
            .route(
                "/metrics",
                get(move || async move {
                    ([(header::CONTENT_TYPE, CONTENT_TYPE)], (metrics.render)()).into_response()
                }),
            )
            .route("/healthz", get(move || async move { healthz.healthz() }))
            .route("/readyz", get(move || async move { readyz.readyz() }))
            .fallback(|| async {
                text(
                    StatusCode::NOT_FOUND,
                    "not found; try /metrics, /healthz or /readyz\n".to_owned(),
                )
            })
    }

    fn healthz(&self) -> Response {
        if self.probes.is_live() {
            return text(StatusCode::OK, "ok\n".to_owned());
        }
        let window = self
            .probes
            .heart
            .as_ref()
            .map_or(LIVENESS_WINDOW, |h| h.window);
        text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not live: no heartbeat for over {window:?}\n"),
        )
    }

    fn readyz(&self) -> Response {
        if self.probes.is_ready() {
            text(StatusCode::OK, "ok\n".to_owned())
        } else if !self.probes.is_live() {
            text(
                StatusCode::SERVICE_UNAVAILABLE,
                "not ready: not live (see /healthz)\n".to_owned(),
            )
        } else {
            text(
                StatusCode::SERVICE_UNAVAILABLE,
                "not ready: caches not synced yet\n".to_owned(),
            )
        }
    }
}

/// The OpenMetrics text of `registry`.
pub fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail; a metric's own encoder failing would
    // leave a truncated page, which the scraper reports.
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, registry) {
        tracing::warn!(error = %e, "cannot encode metrics");
    }
    out
}

/// The samples of an exposition by name and labels (`name{a="b"}`), with
/// their values; comments and unparsable lines are skipped.
pub fn samples(text: &str) -> std::collections::BTreeMap<&str, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (key, value) = l.rsplit_once(' ')?;
            Some((key, value.parse().ok()?))
        })
        .collect()
}

/// Declares a struct of metrics, each field with its metric name and help
/// next to it (`field: Type => "name", "help"`), and its
/// `register(&self, &mut Registry)` registering them in declaration order.
/// Fields without `=>` are plain fields. A counter is named without
/// `_total`; the encoder appends it to the sample.
#[macro_export]
macro_rules! metrics {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                $fvis:vis $field:ident : $ty:ty $(=> $metric:literal, $help:literal)?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $(#[$fmeta])* $fvis $field: $ty, )*
        }

        impl $name {
            /// Declares every metric, with its name and help, in `registry`.
            pub fn register(&self, registry: &mut $crate::metrics_http::Registry) {
                $($(
                    $crate::metrics_http::register(
                        registry,
                        $metric,
                        $help,
                        self.$field.clone(),
                    );
                )?)*
            }
        }
    };
}

/// Declares one metric: `metric` registered in `registry` under `name` with
/// `help`, returned for the code that updates it. A counter is named
/// without `_total`; the encoder appends it to the sample. The registry ends
/// every help with a period, so one ending `help` is not doubled.
pub fn register<M: Metric + Clone>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    metric: M,
) -> M {
    registry.register(name, help.strip_suffix('.').unwrap_or(help), metric.clone());
    metric
}

/// The upper bounds of [`Seconds`]' buckets: 100 µs to 30 s, about
/// 2.5x apart, so one set serves in-process work (an aggregation pass, an
/// evaluation) and API round trips alike.
pub(crate) const SECONDS_BUCKETS: [f64; 17] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0,
];

/// The upper bounds of [`PropagationSeconds`]' buckets: 50 ms to 10 min,
/// the range of a change crossing the fleet (an agent's evaluation, the
/// stream, the hub's aggregation and a paced, budgeted status write).
pub(crate) const PROPAGATION_BUCKETS: [f64; 14] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

/// Declares a histogram of durations in seconds with fixed buckets:
/// `Default`, so it sits in a [`metrics!`] struct (name it `*_seconds`).
macro_rules! seconds_histogram {
    ($(#[$meta:meta])* $name:ident, $buckets:expr) => {
        $(#[$meta])*
        #[derive(Clone, Debug)]
        pub struct $name(Histogram);

        impl Default for $name {
            fn default() -> Self {
                $name(Histogram::new($buckets))
            }
        }

        impl $name {
            /// Records one duration.
            pub fn observe(&self, d: Duration) {
                self.0.observe(d.as_secs_f64());
            }
        }

        impl EncodeMetric for $name {
            fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
                self.0.encode(encoder)
            }

            fn metric_type(&self) -> MetricType {
                MetricType::Histogram
            }
        }
    };
}

seconds_histogram!(
    /// A histogram of durations in seconds (`SECONDS_BUCKETS`): quantiles
    /// (p99) can be read from Prometheus, which a summed counter cannot give.
    Seconds,
    SECONDS_BUCKETS
);

seconds_histogram!(
    /// A histogram of end-to-end propagation times (`PROPAGATION_BUCKETS`).
    PropagationSeconds,
    PROPAGATION_BUCKETS
);

/// `process_resident_memory_bytes`, the process's resident set as the
/// Prometheus client libraries' process collectors name it, read from
/// `/proc/self/status` at each scrape (absent where there is no such file).
#[derive(Debug, Default)]
pub struct ProcessMemory;

impl Collector for ProcessMemory {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(bytes) = resident_bytes() else {
            return Ok(());
        };
        ConstGauge::new(bytes).encode(encoder.encode_descriptor(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            None,
            MetricType::Gauge,
        )?)
    }
}

/// `VmRSS` of `/proc/self/status`, in bytes.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    kib.checked_mul(1024)
}

/// A counter's or count gauge's current value (tests and logs read them).
pub trait Value {
    fn value(&self) -> u64;
}

impl Value for Counter {
    fn value(&self) -> u64 {
        self.get()
    }
}

impl Value for CountGauge {
    fn value(&self) -> u64 {
        self.get()
    }
}

/// Binds `addr` and serves `router` with the listener's bounds (see the
/// module doc) until `shutdown` is cancelled. Returns the bound address
/// (useful with port 0) once listening; a bind failure is returned, later
/// errors end only their connection.
pub(crate) async fn serve_router(
    addr: SocketAddr,
    router: Router,
    shutdown: CancellationToken,
) -> std::io::Result<SocketAddr> {
    listen(addr, router, shutdown, READ_TIMEOUT, WRITE_TIMEOUT).await
}

/// [`serve_router`] of `pages` with other deadlines (tests shorten them).
#[cfg(test)]
async fn serve_with(
    addr: SocketAddr,
    pages: Pages,
    shutdown: CancellationToken,
    read_timeout: Duration,
    write_timeout: Duration,
) -> std::io::Result<SocketAddr> {
    listen(addr, pages.router(), shutdown, read_timeout, write_timeout).await
}

async fn listen(
    addr: SocketAddr,
    router: Router,
    shutdown: CancellationToken,
    read_timeout: Duration,
    write_timeout: Duration,
) -> std::io::Result<SocketAddr> {
    let router =
        router
            .layer(RequestBodyLimitLayer::new(MAX_BODY))
            .layer(TimeoutLayer::with_status_code(
                StatusCode::SERVICE_UNAVAILABLE,
                write_timeout,
            ));
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = shutdown.cancelled() => return,
                a = listener.accept() => a,
            };
            let sock = match accepted {
                Ok((sock, _)) => sock,
                Err(e) => {
                    // E.g. out of file descriptors: back off instead of
                    // spinning on a core.
                    tracing::warn!(error = %e, "metrics listener cannot accept");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            };
            // At most MAX_CONNECTIONS connections at a time; others wait.
            let Ok(permit) = slots.clone().acquire_owned().await else {
                return;
            };
            let service = TowerToHyperService::new(router.clone());
            tokio::spawn(async move {
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    // One deadline for the whole head, from the accept.
                    .header_read_timeout(read_timeout)
                    .max_buf_size(MAX_HEAD)
                    // One request per connection: an idle one frees its
                    // slot at once.
                    .keep_alive(false)
                    .serve_connection(TokioIo::new(sock), service);
                // Every exchange ends within `read_timeout + write_timeout`:
                // a reader too slow for the answer is dropped (closed).
                let _ = tokio::time::timeout(read_timeout + write_timeout, connection).await;
                drop(permit);
            });
        }
    });
    Ok(local)
}

#[cfg(test)]
mod tests;
