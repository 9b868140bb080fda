//! Hostile readers of the Dashboard and the web page: the
//! TokenReview budget of `--dashboard-auth=kubernetes` against a stand-in
//! API server that counts what reaches it, and floods of connections and
//! calls from several loopback source addresses (127.0.0.2, 127.0.0.3,
//! ...) while an honest reader from 127.0.0.1 is served. Loops are
//! bounded; waits are generous bounds, never timing assertions.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use gwhub_common::metrics_http::Value;
use gwhub_hub::serve::Budgets;
use gwhub_hub::serve::{Hub, HubConfig, KubeExtras};
use gwhub_identity::authz::{KubeReaders, TOKEN_REVIEW_BURST, TOKEN_REVIEWS_PER_SECOND};
use gwhub_k8s::reviews::ApiServerReviews;
use gwhub_proto::v1::{self, dashboard_client::DashboardClient};
use gwhub_test_kit::loopback;
use gwhub_test_kit::raw_agent::{self, Agent as RawAgent};
use gwhub_test_kit::wait::until;
use http_body_util::BodyExt;
use tonic::Code;
use tonic::codegen::{Bytes, http};
use tonic::transport::{Channel, Endpoint};

/// The one token the stand-in API server authenticates.
const GOOD: &str = "good-reader-token";

/// What reached the stand-in API server.
#[derive(Default)]
struct Seen {
    token_reviews: AtomicUsize,
    access_reviews: AtomicUsize,
}

/// A `kube::Client` whose API server is a function: a TokenReview
/// authenticates [`GOOD`] only, a SubjectAccessReview allows everything;
/// each answer after a few milliseconds, as a real one.
fn stand_in_api_server(seen: Arc<Seen>) -> kube::Client {
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let seen = seen.clone();
        async move {
            let path = request.uri().path().to_owned();
            let body = request.into_body().collect().await?.to_bytes();
            let body: serde_json::Value = serde_json::from_slice(&body)?;
            tokio::time::sleep(Duration::from_millis(5)).await;
            let answer = if path.ends_with("/tokenreviews") {
                seen.token_reviews.fetch_add(1, Ordering::SeqCst);
                let good = body["spec"]["token"] == GOOD;
                serde_json::json!({
                    "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                    "spec": {},
                    "status": if good {
                        serde_json::json!({"authenticated": true, "user": {"username": "alice"}})
                    } else {
                        serde_json::json!({"authenticated": false})
                    },
                })
            } else {
                seen.access_reviews.fetch_add(1, Ordering::SeqCst);
                serde_json::json!({
                    "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                    "spec": {}, "status": {"allowed": true},
                })
            };
            let bytes = Bytes::from(serde_json::to_vec(&answer)?);
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(
                http::Response::builder()
                    .header("content-type", "application/json")
                    .body(http_body_util::Full::new(bytes))?,
            )
        }
    });
    kube::Client::new(service, "default")
}

/// A hub with readers authorized by the stand-in API server.
async fn hub_with_readers(seen: Arc<Seen>) -> Hub {
    let readers = Arc::new(KubeReaders::new(Arc::new(ApiServerReviews::new(
        stand_in_api_server(seen),
    ))));
    let extras = KubeExtras {
        readers: Some(readers),
        ..KubeExtras::default()
    };
    Hub::start_with(HubConfig::loopback(Duration::from_secs(60)), None, extras)
        .await
        .unwrap()
}

/// `ListGateways` with `token` on `channel`.
async fn list_with(channel: Channel, token: &str) -> Result<(), tonic::Status> {
    let mut request = tonic::Request::new(v1::ListGatewaysRequest::default());
    let bearer = format!("Bearer {token}").parse().unwrap();
    request.metadata_mut().insert("authorization", bearer);
    DashboardClient::new(channel)
        .list_gateways(request)
        .await
        .map(drop)
}

/// 2,000 distinct made-up tokens, sent over ~12 s (longer than a
/// reader's cached review): at most `50 + 10·(T + 1)` TokenReviews reach
/// the API server, counted there and by the hub's metric; every caller
/// over the limit is refused with RESOURCE_EXHAUSTED naming it within
/// about a second; a reader reviewed before keeps answering throughout,
/// its token re-reviewed ahead of the flood.
#[tokio::test]
async fn made_up_tokens_cost_a_bounded_number_of_token_reviews() {
    let seen = Arc::new(Seen::default());
    let hub = hub_with_readers(seen.clone()).await;
    let counters = hub.metrics.clone();
    let url = format!("http://{}", hub.dashboard_addr);
    let channel = || async {
        Channel::from_shared(url.clone())
            .unwrap()
            .connect()
            .await
            .unwrap()
    };
    let reader = channel().await;
    list_with(reader.clone(), GOOD).await.unwrap();
    assert_eq!(seen.token_reviews.load(Ordering::SeqCst), 1);

    let start = Instant::now();
    const TOKENS: usize = 2_000;
    const SPREAD: Duration = Duration::from_secs(12);
    let mut flood = Vec::new();
    for task in 0..4 {
        let channel = channel().await;
        flood.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            let per_task = TOKENS / 4;
            let tokens = futures::stream::iter(0..per_task).map(|i| {
                let channel = channel.clone();
                async move {
                    // Spread evenly over SPREAD.
                    let at = SPREAD.mul_f64(i as f64 / per_task as f64);
                    tokio::time::sleep_until((start + at).into()).await;
                    let asked = Instant::now();
                    let r = list_with(channel, &format!("made-up-{task}-{i}")).await;
                    (r.err(), asked.elapsed())
                }
            });
            let mut tokens = tokens.buffer_unordered(8);
            while let Some(o) = tokens.next().await {
                outcomes.push(o);
            }
            outcomes
        }));
    }
    // The reader keeps answering, every 250 ms, past its cached review,
    // until the last made-up token has its answer. Every call is answered
    // (the 60 s bound only says how long a failing run takes to say so).
    let flood = futures::future::join_all(flood);
    tokio::pin!(flood);
    let mut answered = 0;
    let outcomes = loop {
        let r =
            tokio::time::timeout(Duration::from_secs(60), list_with(reader.clone(), GOOD)).await;
        assert!(
            matches!(r, Ok(Ok(()))),
            "the reader was refused at {:?}: {r:?}",
            start.elapsed()
        );
        answered += 1;
        tokio::select! {
            done = &mut flood => break done,
            () = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
    };
    let outcomes: Vec<_> = outcomes.into_iter().flat_map(|r| r.unwrap()).collect();
    let elapsed = start.elapsed().as_secs_f64();
    assert_eq!(outcomes.len(), TOKENS);
    let reviews = seen.token_reviews.load(Ordering::SeqCst);
    let bound = f64::from(TOKEN_REVIEW_BURST) + TOKEN_REVIEWS_PER_SECOND * (elapsed + 1.0) + 1.0;
    assert!(
        (reviews as f64) <= bound,
        "{reviews} TokenReviews in {elapsed:.1} s (bound {bound:.0})"
    );
    eprintln!("the reader answered {answered} times during the flood");
    // Every made-up token is refused: UNAUTHENTICATED when reviewed,
    // RESOURCE_EXHAUSTED naming the limit when not. (How long a refused
    // caller waits is a figure for docs/benchmarks.md, not an assert.)
    let (mut refused, mut rejected) = (0, 0);
    let slowest = outcomes.iter().map(|(_, took)| *took).max();
    eprintln!("the slowest refusal took {slowest:?}");
    for (status, _) in &outcomes {
        let status = status.as_ref().expect("a made-up token was served");
        match status.code() {
            Code::Unauthenticated => rejected += 1,
            Code::ResourceExhausted => {
                refused += 1;
                assert!(status.message().contains("TokenReviews"), "{status:?}");
            }
            other => panic!("{other:?}: {status:?}"),
        }
    }
    assert_eq!(refused + rejected, TOKENS);
    // The hub's metrics say the same.
    let good = counters.reviews.token_reviews("authenticated") as usize;
    assert!(
        good >= 2,
        "the reader's token was re-reviewed past its cache"
    );
    assert_eq!(
        counters.reviews.token_reviews("unauthenticated") as usize,
        rejected
    );
    assert_eq!(good + rejected, reviews);
    assert_eq!(counters.reviews.token_reviews("error"), 0);
    let metric_refused = counters.reviews.token_reviews_refused("rate")
        + counters.reviews.token_reviews_refused("in_flight");
    assert_eq!(metric_refused as usize, refused);
    hub.shutdown().await.unwrap();
}

/// A made-up token is reviewed once a minute at most, however often it
/// is presented.
#[tokio::test]
async fn a_rejected_token_is_remembered() {
    let seen = Arc::new(Seen::default());
    let hub = hub_with_readers(seen.clone()).await;
    let channel = Channel::from_shared(format!("http://{}", hub.dashboard_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    for _ in 0..20 {
        let e = list_with(channel.clone(), "made-up").await.unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    }
    assert_eq!(seen.token_reviews.load(Ordering::SeqCst), 1);
    hub.shutdown().await.unwrap();
}

// ---- few addresses cannot hold every slot ---------------------------------

/// How long an honest reader may wait and still count as served: far
/// below how long a denial lasts (a stalled watcher is held until the
/// hub's send timeout, 60 s by default, or longer in these tests), and
/// far above a loaded machine's slowest answer, so no run fails by the
/// machine's speed.
const PROMPT: Duration = Duration::from_secs(20);

/// A hub with `budgets`, cluster east reporting 1,500 Gateways of ~2 KB
/// (~3 MB, far beyond a 1 KiB stream window: a watcher granting no more
/// window stalls on its snapshot).
async fn hub_with_a_large_view(budgets: Budgets) -> (Hub, RawAgent) {
    let hub = Hub::start(HubConfig {
        budgets,
        ..HubConfig::loopback(Duration::from_secs(60))
    })
    .await
    .unwrap();
    let mut east = RawAgent::connect_with(hub.ingest_addr, raw_agent::hello("east")).await;
    let reports = (0..1500)
        .map(|i| v1::GatewayReport {
            namespace: "ns".into(),
            name: format!("gw-{i:04}"),
            uid: format!("uid-{i}"),
            generation: 1,
            status: Some(v1::GatewayStatus {
                conditions: vec![v1::Condition {
                    r#type: "Programmed".into(),
                    status: v1::ConditionStatus::True as i32,
                    reason: "Ok".into(),
                    message: "x".repeat(2000),
                    observed_generation: Some(1),
                    last_transition_time: 1_700_000_000,
                }],
                ..Default::default()
            }),
        })
        .collect();
    east.snapshot(1, 0, reports).await;
    let index = hub.index.clone();
    until(
        Duration::from_secs(60),
        || async { index.subscribe().borrow().gateways.len() },
        |n| *n == 1500,
    )
    .await;
    (hub, east)
}

/// A gRPC channel to `to` over a TCP connection bound to `from` (a
/// loopback address), granting each stream a 1 KiB window.
async fn channel_from(from: &'static str, to: SocketAddr) -> Option<Channel> {
    let endpoint = Endpoint::from_shared(format!("http://{to}"))
        .unwrap()
        .initial_stream_window_size(Some(1024));
    loopback::channel_from(from.parse().unwrap(), to, endpoint)
        .await
        .ok()
}

/// Stalled watchers from `from`: up to `connections` connections of up to
/// `per_connection` watches each, as many as the hub takes; the watches
/// (to keep) and their count.
async fn stalled_watchers(
    from: &'static str,
    to: SocketAddr,
    connections: usize,
    per_connection: usize,
) -> Vec<tonic::Streaming<v1::WatchGatewaysResponse>> {
    let mut held = Vec::new();
    for _ in 0..connections {
        let Some(channel) = channel_from(from, to).await else {
            break;
        };
        let mut opened = 0;
        for _ in 0..per_connection {
            let mut d = DashboardClient::new(channel.clone());
            match tokio::time::timeout(
                PROMPT,
                d.watch_gateways(v1::WatchGatewaysRequest::default()),
            )
            .await
            {
                Ok(Ok(w)) => {
                    held.push(w.into_inner());
                    opened += 1;
                }
                _ => break,
            }
        }
        if opened == 0 {
            break;
        }
    }
    held
}

/// An honest gwhubctl-style `ListGateways` from 127.0.0.1 on a fresh
/// connection answers within [`PROMPT`].
async fn honest_list(hub: &Hub) {
    let answered = tokio::time::timeout(PROMPT, async {
        let channel = Channel::from_shared(format!("http://{}", hub.dashboard_addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
        DashboardClient::new(channel)
            .list_gateways(v1::ListGatewaysRequest {
                page_size: 10,
                ..Default::default()
            })
            .await
    })
    .await;
    assert!(
        matches!(answered, Ok(Ok(_))),
        "an honest ListGateways: {answered:?}"
    );
}

/// At the default budgets: three addresses open stalled
/// watchers up to what the hub takes; each holds at most an eighth of the
/// Dashboard's connections (8 of 64) and calls (32 of 256), and an honest
/// ListGateways from a fourth answers at once.
#[tokio::test]
async fn stalled_watchers_from_three_addresses_leave_room_for_a_reader() {
    let (hub, _east) = hub_with_a_large_view(Budgets::default()).await;
    let counters = hub.metrics.clone();
    let mut held = Vec::new();
    for from in ["127.0.0.2", "127.0.0.3", "127.0.0.4"] {
        let watches = stalled_watchers(from, hub.dashboard_addr, 16, 16).await;
        assert!(
            (1..=32).contains(&watches.len()),
            "{from} holds {} watches",
            watches.len()
        );
        held.push(watches);
    }
    let total: usize = held.iter().map(Vec::len).sum();
    assert_eq!(total, 3 * 32, "each address got exactly its eighth");
    assert!(Value::value(&counters.listeners.dashboard.open) <= 3 * 8 + 1);
    honest_list(&hub).await;
    drop(held);
    hub.shutdown().await.unwrap();
}

/// Nine addresses (more than eight shares) fill a small pool of
/// connections (16, 2 per address) and calls (32, 4 per address, 2 per
/// connection) with stalled watchers: the ninth, and an honest reader from
/// a tenth address, hold less than their fair share, so a connection of
/// theirs closes the oldest of an address holding the most (with its
/// calls), and the reader's ListGateways answers at once.
#[tokio::test]
async fn a_full_pool_makes_room_for_an_address_below_its_fair_share() {
    let (hub, _east) = hub_with_a_large_view(Budgets {
        max_dashboard_connections: 16,
        max_dashboard_calls: 32,
        max_dashboard_calls_per_connection: 2,
        ..Budgets::default()
    })
    .await;
    let counters = hub.metrics.clone();
    let mut held = Vec::new();
    for i in 2..=10 {
        let from: &'static str = Box::leak(format!("127.0.0.{i}").into_boxed_str());
        held.push(stalled_watchers(from, hub.dashboard_addr, 4, 2).await);
    }
    assert!(Value::value(&counters.listeners.dashboard.open) <= 16);
    for _ in 0..3 {
        honest_list(&hub).await;
    }
    assert!(
        Value::value(&counters.listeners.dashboard.evicted_fair) >= 1,
        "no connection was evicted for a fair share"
    );

    drop(held);
    hub.shutdown().await.unwrap();
}

/// The call pool full of one address's stalled watchers (4 calls, the
/// address allowed all 4), connections to spare: an honest call from
/// another address, below its fair share (4 / 2), closes the connection of
/// the oldest call, and is served at once.
#[tokio::test]
async fn a_full_call_pool_makes_room_for_an_address_below_its_fair_share() {
    let (hub, _east) = hub_with_a_large_view(Budgets {
        max_dashboard_calls: 4,
        max_dashboard_calls_per_address: 4,
        ..Budgets::default()
    })
    .await;
    let counters = hub.metrics.clone();
    let held = stalled_watchers("127.0.0.2", hub.dashboard_addr, 1, 8).await;
    assert_eq!(held.len(), 4);
    honest_list(&hub).await;
    assert_eq!(Value::value(&counters.calls.dashboard_calls_evicted), 1);
    drop(held);
    hub.shutdown().await.unwrap();
}

/// Stalled watchers are dropped long before `--watch-send-timeout` once
/// other callers are refused for a full pool: two addresses fill 4 call
/// slots (2 each, their fair share), a third call from one of them is
/// refused (its address holds its fair share, not its 3 per address), and
/// within seconds the watchers are dropped and it is served.
#[tokio::test]
async fn stalled_watchers_are_dropped_early_when_others_wait() {
    let (hub, _east) = hub_with_a_large_view(Budgets {
        max_dashboard_calls: 4,
        max_dashboard_calls_per_address: 3,
        watch_send_timeout: Duration::from_secs(600),
        ..Budgets::default()
    })
    .await;
    let counters = hub.metrics.clone();
    let a = stalled_watchers("127.0.0.2", hub.dashboard_addr, 1, 2).await;
    let b = stalled_watchers("127.0.0.3", hub.dashboard_addr, 1, 2).await;
    assert_eq!((a.len(), b.len()), (2, 2));
    let start = Instant::now();
    let ask = || async {
        let channel = channel_from("127.0.0.2", hub.dashboard_addr).await?;
        DashboardClient::new(channel)
            .list_clusters(v1::ListClustersRequest {})
            .await
            .ok()
    };
    // Refused while the pool is full: the watchers' clock runs faster.
    assert!(ask().await.is_none());
    let mut served = false;
    while start.elapsed() < Duration::from_secs(60) && !served {
        tokio::time::sleep(Duration::from_millis(500)).await;
        served = ask().await.is_some();
    }
    assert!(served, "still refused after {:?}", start.elapsed());
    assert!(Value::value(&counters.calls.watchers_dropped) >= 1);
    drop((a, b));
    hub.shutdown().await.unwrap();
}

/// `GET path` over HTTP/1.1 from `from` to `to`: the connection and the
/// answer's status, `None` when the hub closed it unanswered.
async fn http_get_from(
    from: &'static str,
    to: SocketAddr,
    path: &str,
) -> (tokio::net::TcpStream, Option<u16>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = loopback::connect_from(from.parse().unwrap(), to)
        .await
        .unwrap();
    let ask = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n");
    if s.write_all(ask.as_bytes()).await.is_err() {
        return (s, None);
    }
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&head).contains("\r\n\r\n") {
        match tokio::time::timeout(PROMPT, s.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
            _ => return (s, None),
        }
    }
    let status = String::from_utf8_lossy(&head)
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok());
    (s, status)
}

/// On the web page: unread event streams (HTTP/1.1, a
/// connection each) from three addresses, as many as the hub takes: each
/// address holds at most an eighth of the page's connections (8 of 64),
/// and a fresh page's `/api/fleet` from a fourth is answered at once.
#[tokio::test]
async fn unread_event_streams_from_three_addresses_leave_room_for_a_page() {
    let hub = Hub::start(HubConfig {
        web_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..HubConfig::loopback(Duration::from_secs(60))
    })
    .await
    .unwrap();
    let web = hub.web_addr.unwrap();
    let counters = hub.metrics.clone();
    let mut held = Vec::new();
    for from in ["127.0.0.2", "127.0.0.3", "127.0.0.4"] {
        let mut served = 0;
        for _ in 0..16 {
            let (s, status) = http_get_from(from, web, "/api/events").await;
            if status == Some(200) {
                served += 1;
                held.push(s);
            }
        }
        assert_eq!(served, 8, "{from}: an eighth of 64 connections");
    }
    until(
        Duration::from_secs(60),
        || async { Value::value(&counters.calls.dashboard_calls) },
        |n| *n == 24,
    )
    .await;
    let (_page, status) = http_get_from("127.0.0.1", web, "/api/fleet").await;
    assert_eq!(status, Some(200));
    drop(held);
    hub.shutdown().await.unwrap();
}
