use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

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

/// Clients that connect and send nothing are cut off by the head's
/// deadline too.
#[tokio::test]
async fn silent_clients_do_not_block_scrapes() {
    let shutdown = CancellationToken::new();
    let addr = serve(([127, 0, 0, 1], 0).into(), registry(), shutdown.clone())
        .await
        .unwrap();
    let mut silent = Vec::new();
    for _ in 0..MAX_CONNECTIONS {
        silent.push(TcpStream::connect(addr).await.unwrap());
    }
    let ok = tokio::time::timeout(READ_TIMEOUT * 4, get(addr, "/metrics"))
        .await
        .expect("a scrape is answered while silent clients hold every slot");
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    // Each silent client was closed without an answer.
    let mut first = silent.remove(0);
    let mut rest = String::new();
    assert_eq!(
        first.read_to_string(&mut rest).await.unwrap_or(0),
        0,
        "{rest}"
    );
    drop(silent);
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
        Pages {
            render,
            probes: Probes::always(),
        },
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

/// `/healthz` follows the heartbeat: 200 while the check keeps
/// finishing, 503 once it is stuck (a wedged lock) for longer than the
/// window, 200 again when it is released. `/readyz` is the caller's
/// answer, and 503 while not live.
#[tokio::test]
// Holding the check's lock across the probes is how it is wedged.
#[allow(clippy::await_holding_lock)]
async fn probes_answer_liveness_and_readiness() {
    let shutdown = CancellationToken::new();
    let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let wedged = Arc::new(std::sync::Mutex::new(()));
    let probes = {
        let ready = ready.clone();
        let wedged = wedged.clone();
        Probes::with_heartbeat(
            Arc::new(move || ready.load(Ordering::SeqCst)),
            Arc::new(move || drop(wedged.lock().unwrap())),
            Duration::from_millis(20),
            Duration::from_millis(300),
            shutdown.clone(),
        )
    };
    let addr = serve_probes(
        ([127, 0, 0, 1], 0).into(),
        registry(),
        probes,
        shutdown.clone(),
    )
    .await
    .unwrap();
    let status = |page: String| page.lines().next().unwrap_or_default().to_owned();
    assert_eq!(status(get(addr, "/healthz").await), "HTTP/1.1 200 OK");
    let not_ready = get(addr, "/readyz").await;
    assert!(not_ready.starts_with("HTTP/1.1 503 "), "{not_ready}");
    assert!(
        not_ready.ends_with("not ready: caches not synced yet\n"),
        "{not_ready}"
    );
    ready.store(true, Ordering::SeqCst);
    let ok = get(addr, "/readyz?verbose").await;
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    assert!(ok.ends_with("\r\n\r\nok\n"), "{ok}");
    assert!(
        ok.contains("content-type: text/plain; charset=utf-8\r\n"),
        "{ok}"
    );

    // Wedged: the heartbeat's check cannot take the lock.
    let guard = wedged.lock().unwrap();
    let mut dead = String::new();
    for _ in 0..200 {
        dead = get(addr, "/healthz").await;
        if dead.starts_with("HTTP/1.1 503 ") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        dead.contains("not live: no heartbeat for over 300ms"),
        "{dead}"
    );
    let readyz = get(addr, "/readyz").await;
    assert!(
        readyz.ends_with("not ready: not live (see /healthz)\n"),
        "{readyz}"
    );
    // Metrics are still served: a scrape tells what is wedged.
    assert_eq!(status(get(addr, "/metrics").await), "HTTP/1.1 200 OK");

    drop(guard);
    let mut alive = String::new();
    for _ in 0..200 {
        alive = get(addr, "/healthz").await;
        if alive.starts_with("HTTP/1.1 200 ") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(alive.starts_with("HTTP/1.1 200 OK\r\n"), "{alive}");
    assert!(get(addr, "/healthzx").await.starts_with("HTTP/1.1 404 "));
    shutdown.cancel();
}

/// A query never changes the page: `/metrics?x` is the metrics.
#[tokio::test]
async fn metrics_with_a_query_are_the_metrics() {
    let shutdown = CancellationToken::new();
    let addr = serve(([127, 0, 0, 1], 0).into(), registry(), shutdown.clone())
        .await
        .unwrap();
    let ok = get(addr, "/metrics?x").await;
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    assert!(
        ok.ends_with("\r\n\r\n# HELP x Things.\n# TYPE x counter\nx_total 1\n# EOF\n"),
        "{ok}"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn without_probes_both_answer_200() {
    let shutdown = CancellationToken::new();
    let addr = serve(([127, 0, 0, 1], 0).into(), registry(), shutdown.clone())
        .await
        .unwrap();
    for path in ["/healthz", "/readyz"] {
        let ok = get(addr, path).await;
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{path}: {ok}");
    }
    shutdown.cancel();
}

#[test]
fn seconds_histograms_bucket_durations() {
    let mut registry = Registry::default();
    let h = register(&mut registry, "x_seconds", "Durations.", Seconds::default());
    h.observe(Duration::from_micros(50));
    h.observe(Duration::from_millis(3));
    h.observe(Duration::from_secs(60));
    let text = encode(&registry);
    let samples = samples(&text);
    assert!((samples["x_seconds_sum"] - 60.00305).abs() < 1e-9, "{text}");
    assert!(text.contains("# TYPE x_seconds histogram\n"), "{text}");
    assert_eq!(samples["x_seconds_count"], 3.0, "{text}");
    assert_eq!(samples["x_seconds_bucket{le=\"0.0001\"}"], 1.0, "{text}");
    assert_eq!(samples["x_seconds_bucket{le=\"0.001\"}"], 1.0, "{text}");
    assert_eq!(samples["x_seconds_bucket{le=\"0.005\"}"], 2.0, "{text}");
    assert_eq!(samples["x_seconds_bucket{le=\"30.0\"}"], 2.0, "{text}");
    assert_eq!(samples["x_seconds_bucket{le=\"+Inf\"}"], 3.0, "{text}");
}

#[test]
fn process_memory_is_the_resident_set() {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(ProcessMemory));
    let text = encode(&registry);
    let rss = samples(&text)["process_resident_memory_bytes"];
    // A test binary's resident set: more than a MiB, less than a TiB.
    assert!((1e6..1e12).contains(&rss), "{text}");
}
