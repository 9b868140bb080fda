//! Hostile readers of the Dashboard and the web page (issue 35): the
//! TokenReview budget of `--dashboard-auth=kubernetes` against a stand-in
//! API server that counts what reaches it, and floods of connections and
//! calls from several loopback source addresses (127.0.0.2, 127.0.0.3,
//! ...) while an honest reader from 127.0.0.1 is served. Loops are
//! bounded; waits are generous bounds, never timing assertions.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use gwhub_hub::authz::{KubeReaders, TOKEN_REVIEW_BURST, TOKEN_REVIEWS_PER_SECOND};
use gwhub_hub::serve::{Hub, HubConfig, KubeExtras};
use gwhub_proto::v1::{self, dashboard_client::DashboardClient};
use http_body_util::BodyExt;
use tonic::Code;
use tonic::codegen::{Bytes, http};
use tonic::transport::Channel;

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
    let readers = Arc::new(KubeReaders::new(stand_in_api_server(seen)));
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
    let counters = hub.index.counters().clone();
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
    // The reader keeps answering, every 250 ms, past its cached review.
    let mut answered = 0;
    while start.elapsed() < SPREAD + Duration::from_secs(1) {
        let r = tokio::time::timeout(Duration::from_secs(2), list_with(reader.clone(), GOOD)).await;
        assert!(
            matches!(r, Ok(Ok(()))),
            "the reader was refused at {:?}: {r:?}",
            start.elapsed()
        );
        answered += 1;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let mut outcomes = Vec::new();
    for task in flood {
        outcomes.extend(task.await.unwrap());
    }
    let elapsed = start.elapsed().as_secs_f64();
    assert_eq!(outcomes.len(), TOKENS);
    let reviews = seen.token_reviews.load(Ordering::SeqCst);
    let bound = f64::from(TOKEN_REVIEW_BURST) + TOKEN_REVIEWS_PER_SECOND * (elapsed + 1.0) + 1.0;
    assert!(
        (reviews as f64) <= bound,
        "{reviews} TokenReviews in {elapsed:.1} s (bound {bound:.0})"
    );
    assert!(answered >= 40, "the reader answered {answered} times");
    // Every made-up token is refused: UNAUTHENTICATED when reviewed,
    // RESOURCE_EXHAUSTED naming the limit when not, never after waiting
    // much longer than a second.
    let (mut refused, mut rejected) = (0, 0);
    for (status, took) in &outcomes {
        let status = status.as_ref().expect("a made-up token was served");
        match status.code() {
            Code::Unauthenticated => rejected += 1,
            Code::ResourceExhausted => {
                refused += 1;
                assert!(status.message().contains("TokenReviews"), "{status:?}");
            }
            other => panic!("{other:?}: {status:?}"),
        }
        assert!(*took < Duration::from_secs(3), "a caller waited {took:?}");
    }
    assert_eq!(refused + rejected, TOKENS);
    // The hub's metrics say the same.
    let good = counters.token_reviews("authenticated") as usize;
    assert!(
        good >= 2,
        "the reader's token was re-reviewed past its cache"
    );
    assert_eq!(counters.token_reviews("unauthenticated") as usize, rejected);
    assert_eq!(good + rejected, reviews);
    assert_eq!(counters.token_reviews("error"), 0);
    let metric_refused =
        counters.token_reviews_refused("rate") + counters.token_reviews_refused("in_flight");
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
