//! The one HTTP endpoint gwhub has: `GET /metrics` answering the
//! OpenMetrics text of a [`prometheus_client`] [`Registry`], shared by the
//! agent's and the hub's `--metrics-listen`. A deliberately tiny HTTP/1
//! responder (read the request head, answer, close) so neither binary needs
//! an HTTP server stack for one read-only page.
//!
//! Both runtimes declare each metric once, next to its name and help
//! ([`register`]), and build one [`Registry`] at start.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Metric;
pub use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// A gauge of a count (never negative).
pub type CountGauge = Gauge<u64, AtomicU64>;

/// Produces the exposition for one scrape.
type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// The content type of the answer: the OpenMetrics text `prometheus_client`
/// encodes (counters' samples end in `_total`, the text in `# EOF`), which
/// Prometheus negotiates and parses.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Longest request head read; the body is never needed.
const MAX_HEAD: usize = 4096;
/// How long a client may take to send its whole request head (one deadline,
/// not per read: a client trickling a byte at a time cannot hold a slot).
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client may take to read the whole answer: one that sends a
/// request and never reads cannot hold a slot either.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Scrapes answered at once; a scraper needs one.
const MAX_CONNECTIONS: usize = 16;
/// Pause after a failed accept.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Binds `addr` and serves `GET /metrics` with the text of `registry` until
/// `shutdown` is cancelled. Returns the bound address (useful with port 0)
/// once listening; a bind failure is returned, later errors end only their
/// connection.
pub async fn serve(
    addr: SocketAddr,
    registry: Arc<Registry>,
    shutdown: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let render: Render = Arc::new(move || encode(&registry));
    serve_with(addr, render, shutdown, READ_TIMEOUT, WRITE_TIMEOUT).await
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

async fn serve_with(
    addr: SocketAddr,
    render: Render,
    shutdown: CancellationToken,
    read_timeout: Duration,
    write_timeout: Duration,
) -> std::io::Result<SocketAddr> {
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
            // At most MAX_CONNECTIONS scrapes at a time; others wait.
            let Ok(permit) = slots.clone().acquire_owned().await else {
                return;
            };
            let render = render.clone();
            tokio::spawn(async move {
                answer(sock, render, read_timeout, write_timeout).await;
                drop(permit);
            });
        }
    });
    Ok(local)
}

/// Reads up to the end of the request head (or `buf` full, or EOF).
async fn read_head(sock: &mut TcpStream, buf: &mut [u8]) -> usize {
    let mut len = 0;
    while len < buf.len() {
        match sock.read(&mut buf[len..]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => len += n,
        }
        if buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    len
}

/// Answers one request; the head read and the write each have a deadline,
/// so every answer ends within `read_timeout + write_timeout`.
async fn answer(
    mut sock: TcpStream,
    render: Render,
    read_timeout: Duration,
    write_timeout: Duration,
) {
    let mut buf = vec![0u8; MAX_HEAD];
    let Ok(len) = tokio::time::timeout(read_timeout, read_head(&mut sock, &mut buf)).await else {
        // Too slow: close without an answer, freeing the slot.
        return;
    };
    let head = String::from_utf8_lossy(&buf[..len]);
    let (status, body) = if head.starts_with("GET /metrics ") {
        ("200 OK", render())
    } else {
        ("404 Not Found", "not found; try /metrics\n".to_owned())
    };
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {CONTENT_TYPE}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    drop(body);
    let write = async {
        let _ = sock.write_all(response.as_bytes()).await;
        let _ = sock.shutdown().await;
    };
    // Too slow a reader: the socket is dropped (closed) with the rest.
    let _ = tokio::time::timeout(write_timeout, write).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A registry with one counter `x` (exposed as `x_total`) at 1.
    fn registry() -> Arc<Registry> {
        let mut registry = Registry::default();
        let x = register(&mut registry, "x", "Things.", Counter::default());
        x.inc();
        assert_eq!(x.value(), 1);
        Arc::new(registry)
    }

    async fn get(addr: SocketAddr, path: &str) -> String {
        let mut sock = TcpStream::connect(addr).await.unwrap();
        sock.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut out = String::new();
        sock.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn clients_trickling_their_head_do_not_block_scrapes() {
        let shutdown = CancellationToken::new();
        let addr = serve(([127, 0, 0, 1], 0).into(), registry(), shutdown.clone())
            .await
            .unwrap();
        // Every slot taken by a client sending a byte a second, forever.
        let mut tricklers = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            let mut sock = TcpStream::connect(addr).await.unwrap();
            tricklers.push(tokio::spawn(async move {
                while sock.write_all(b"G").await.is_ok() {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }));
        }
        // Generous: each trickler is cut off after READ_TIMEOUT.
        let ok = tokio::time::timeout(READ_TIMEOUT * 4, get(addr, "/metrics"))
            .await
            .expect("a scrape is answered while tricklers hold every slot");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        for t in tricklers {
            t.abort();
        }
        shutdown.cancel();
    }

    #[tokio::test]
    async fn clients_that_never_read_the_answer_do_not_block_scrapes() {
        let shutdown = CancellationToken::new();
        // Far more than the socket buffers of a client that reads nothing.
        let big = Arc::new("x".repeat(8 << 20));
        let render: Render = Arc::new(move || (*big).clone());
        let write_timeout = Duration::from_millis(300);
        let addr = serve_with(
            ([127, 0, 0, 1], 0).into(),
            render,
            shutdown.clone(),
            READ_TIMEOUT,
            write_timeout,
        )
        .await
        .unwrap();
        // Every slot taken by a client that asks and never reads.
        let mut silent = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.set_recv_buffer_size(4096).unwrap();
            let mut sock = socket.connect(addr).await.unwrap();
            sock.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n")
                .await
                .unwrap();
            silent.push(sock);
        }
        // Generous: each silent client is cut off after `write_timeout`.
        let ok = tokio::time::timeout(Duration::from_secs(30), get(addr, "/metrics"))
            .await
            .expect("a scrape is answered while silent clients hold every slot");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{}", &ok[..64]);
        drop(silent);
        shutdown.cancel();
    }

    #[tokio::test]
    async fn serves_metrics_and_404_elsewhere_until_shutdown() {
        let shutdown = CancellationToken::new();
        let addr = serve(([127, 0, 0, 1], 0).into(), registry(), shutdown.clone())
            .await
            .unwrap();
        let ok = get(addr, "/metrics").await;
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        let page = "# HELP x Things.\n# TYPE x counter\nx_total 1\n# EOF\n";
        assert!(
            ok.contains(&format!("content-length: {}\r\n", page.len())),
            "{ok}"
        );
        assert!(
            ok.contains(&format!("content-type: {CONTENT_TYPE}\r\n")),
            "{ok}"
        );
        assert!(ok.ends_with(&format!("\r\n\r\n{page}")), "{ok}");
        let missing = get(addr, "/other").await;
        assert!(missing.starts_with("HTTP/1.1 404 "), "{missing}");
        shutdown.cancel();
        // The listener closes once the accept loop sees the cancellation.
        let mut refused = false;
        for _ in 0..100 {
            if TcpStream::connect(addr).await.is_err() {
                refused = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(refused, "listener still open after shutdown");
    }
}
