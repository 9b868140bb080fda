//! The hub under hostile clients: every bound the hub keeps as a
//! whole, each with a test, over real loopback TCP. Budgets are set small
//! through the same config the flags fill, so each test is fast and small;
//! waits are generous bounds, never timing assertions.

use std::net::SocketAddr;
use std::time::Duration;

use gwhub_common::metrics_http::Value;
use gwhub_hub::serve::Budgets;
use gwhub_hub::serve::{Hub, HubConfig};
use gwhub_identity::tls::HubTls;
use gwhub_proto::v1::{self, agent_message, dashboard_client::DashboardClient, hub_message};
use gwhub_test_kit::loopback;
use gwhub_test_kit::procs::free_addr;
use gwhub_test_kit::raw_agent::{self, Agent as RawAgent};
use gwhub_test_kit::wait::{WAIT, until, until_named};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_stream::StreamExt;
use tonic::transport::Channel;

// ---- a raw agent ----------------------------------------------------------

/// The test kit's raw agent, with this suite's short forms of `snapshot`
/// (id = seq + 1) and `recv` (how the stream ended, too).
struct Agent(RawAgent);

impl std::ops::Deref for Agent {
    type Target = RawAgent;
    fn deref(&self) -> &RawAgent {
        &self.0
    }
}

impl std::ops::DerefMut for Agent {
    fn deref_mut(&mut self) -> &mut RawAgent {
        &mut self.0
    }
}

impl Agent {
    /// Connects and reads the hub's Hello and NEW_CONNECTION resync.
    async fn connect(addr: SocketAddr, cluster: &str) -> Agent {
        Agent(RawAgent::connect(addr, cluster).await)
    }

    async fn open(addr: SocketAddr, cluster: &str) -> Result<Agent, tonic::Status> {
        RawAgent::open(addr, raw_agent::hello(cluster))
            .await
            .map(Agent)
    }

    /// The next hub message other than a heartbeat, or how the stream ended.
    async fn recv(&mut self) -> Result<hub_message::Message, tonic::Status> {
        self.0.try_recv().await
    }

    async fn snapshot(&mut self, seq: u64, gateways: Vec<v1::GatewayReport>) {
        self.0.snapshot(seq.wrapping_add(1), seq, gateways).await;
    }
}

// ---- fixtures -------------------------------------------------------------

fn report(namespace: &str, name: &str, message: &str) -> v1::GatewayReport {
    v1::GatewayReport {
        namespace: namespace.into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        generation: 1,
        status: Some(v1::GatewayStatus {
            conditions: vec![v1::Condition {
                r#type: "Programmed".into(),
                status: v1::ConditionStatus::True as i32,
                reason: "Ok".into(),
                message: message.into(),
                observed_generation: Some(1),
                last_transition_time: 1_700_000_000,
            }],
            ..Default::default()
        }),
    }
}

async fn dashboard(hub: &Hub) -> DashboardClient<Channel> {
    DashboardClient::connect(format!("http://{}", hub.dashboard_addr))
        .await
        .unwrap()
}

async fn cluster(mut d: DashboardClient<Channel>, name: &str) -> Option<v1::ClusterInfo> {
    d.list_clusters(v1::ListClustersRequest {})
        .await
        .unwrap()
        .into_inner()
        .clusters
        .into_iter()
        .find(|c| c.name == name)
}

// ---- 1. supersession ------------------------------------------------------

#[tokio::test]
async fn an_older_stream_ends_with_aborted_as_soon_as_a_newer_one_is_accepted() {
    let hub = Hub::start(HubConfig::loopback(Duration::from_secs(60)))
        .await
        .unwrap();
    let mut old = Agent::connect(hub.ingest_addr, "east").await;
    old.snapshot(0, vec![report("ns", "gw", "old")]).await;
    let _new = Agent::connect(hub.ingest_addr, "east").await;
    // The old stream sends nothing: it must not wait for its next report.
    let status = old.ended().await;
    assert_eq!(status.code(), tonic::Code::Aborted, "{status:?}");
    assert!(status.message().contains("newer stream"), "{status:?}");
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_dead_newer_stream_leaves_no_report_fresh_past_stale_after() {
    // Rolling update: a new agent pod connects, sends a snapshot and dies;
    // the old pod's stream keeps heartbeating. Nothing stands for the new
    // pod's report, so the cluster must go stale within --stale-after.
    let stale_after = Duration::from_secs(1);
    let hub = Hub::start(HubConfig::loopback(stale_after)).await.unwrap();
    let d = dashboard(&hub).await;
    let mut old = Agent::connect(hub.ingest_addr, "east").await;
    old.snapshot(0, vec![report("ns", "gw", "old")]).await;
    let mut new = Agent::connect(hub.ingest_addr, "east").await;
    new.snapshot(0, vec![report("ns", "gw", "new pod")]).await;
    drop(new);
    let beating = tokio::spawn(async move {
        for _ in 0..30 {
            old.heartbeat().await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        old
    });
    let east = until(
        stale_after + WAIT,
        || cluster(d.clone(), "east"),
        |c| c.as_ref().is_some_and(|c| c.stale && !c.connected),
    )
    .await;
    assert!(east.is_some());
    let mut old = beating.await.unwrap();
    let status = old.ended().await;
    assert_eq!(status.code(), tonic::Code::Aborted, "{status:?}");
    hub.shutdown().await.unwrap();
}

// ---- 2. budgets -----------------------------------------------------------

async fn start_with(budgets: Budgets) -> Hub {
    Hub::start(HubConfig {
        budgets,
        ..HubConfig::loopback(Duration::from_secs(60))
    })
    .await
    .unwrap()
}

/// A Gateway report of about `bytes` encoded bytes.
fn sized(name: &str, bytes: usize) -> v1::GatewayReport {
    report("ns", name, &"x".repeat(bytes))
}

/// The hub Gateways' names, in order.
async fn names(hub: &Hub) -> Vec<String> {
    let mut d = dashboard(hub).await;
    let list = d
        .list_gateways(v1::ListGatewaysRequest::default())
        .await
        .unwrap()
        .into_inner()
        .gateways;
    list.into_iter().map(|g| g.name).collect()
}

#[tokio::test]
async fn a_cluster_over_its_report_budget_is_refused_and_keeps_its_last_good_report() {
    let hub = start_with(Budgets {
        max_cluster_report_bytes: 10_000,
        ..Budgets::default()
    })
    .await;
    let mut east = Agent::connect(hub.ingest_addr, "east").await;
    east.snapshot(0, vec![report("ns", "gw", "good")]).await;
    until(WAIT, || names(&hub), |n| n == &["gw"]).await;

    // A snapshot of Gateways each within every per-message limit, together
    // over the cluster's budget.
    east.send(agent_message::Message::Snapshot(v1::SnapshotChunk {
        snapshot_id: 9,
        chunk: 0,
        r#final: true,
        seq: 5,
        gateways: (0..4).map(|i| sized(&format!("big{i}"), 3_000)).collect(),
    }))
    .await;
    let status = east.ended().await;
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    for word in ["--max-cluster-report-bytes", "\"east\"", "10000"] {
        assert!(status.message().contains(word), "{word}: {status:?}");
    }
    assert_eq!(names(&hub).await, ["gw"]);

    // Deltas count too: the cluster grows one Gateway at a time.
    let mut east = Agent::connect(hub.ingest_addr, "east").await;
    east.snapshot(0, vec![report("ns", "gw", "good")]).await;
    for seq in 1..=4 {
        east.send(agent_message::Message::Delta(v1::Delta {
            seq,
            changes: vec![v1::Change {
                change: Some(v1::change::Change::Upsert(sized(&format!("d{seq}"), 3_000))),
            }],
            ..Default::default()
        }))
        .await;
    }
    let status = east.ended().await;
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("delta 4"), "{status:?}");
    let counters = &hub.metrics;
    assert_eq!(
        Value::value(&counters.ingest.refused_cluster_report_bytes),
        2
    );
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn clusters_past_the_budget_are_refused() {
    let hub = start_with(Budgets {
        max_clusters: 2,
        ..Budgets::default()
    })
    .await;
    let _a = Agent::connect(hub.ingest_addr, "a").await;
    let _b = Agent::connect(hub.ingest_addr, "b").await;
    let mut c = Agent::open(hub.ingest_addr, "c").await.unwrap();
    let status = c.recv().await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("--max-clusters"), "{status:?}");
    // A known cluster still reconnects.
    let _a2 = Agent::connect(hub.ingest_addr, "a").await;
    hub.shutdown().await.unwrap();
}

async fn watch(
    d: &mut DashboardClient<Channel>,
) -> Result<tonic::Streaming<v1::WatchGatewaysResponse>, tonic::Status> {
    d.watch_gateways(v1::WatchGatewaysRequest::default())
        .await
        .map(tonic::Response::into_inner)
}

/// A watch message holds at most a page of Gateways (or one larger one).
fn assert_paged(m: &v1::WatchGatewaysResponse) {
    use prost::Message;
    let largest = m.upserted.iter().map(|g| g.encoded_len()).max();
    let page = gwhub_api::grpc::view::WATCH_PAGE_BYTES;
    assert!(
        m.encoded_len() <= page + largest.unwrap_or(0) + 64,
        "a watch message of {} bytes",
        m.encoded_len()
    );
}

/// The watch's next message, `what` named when the hub does not send it
/// within [`WAIT`], ends the watch or refuses it.
async fn next_watched(
    s: &mut tonic::Streaming<v1::WatchGatewaysResponse>,
    what: &str,
) -> v1::WatchGatewaysResponse {
    tokio::time::timeout(WAIT, s.next())
        .await
        .unwrap_or_else(|_| panic!("{what}: not sent within {WAIT:?}"))
        .unwrap_or_else(|| panic!("{what}: the watch closed instead"))
        .unwrap_or_else(|status| panic!("{what}: the watch ended with {status:?}"))
}

/// The whole snapshot a watch starts with, however many messages carry it
/// (`snapshot_incomplete` on all but the last), each a bounded page.
async fn whole_snapshot(
    s: &mut tonic::Streaming<v1::WatchGatewaysResponse>,
) -> Vec<v1::AggregatedGateway> {
    let first = next_watched(s, "the watch's first message (its snapshot)").await;
    assert!(first.snapshot, "{first:?}");
    assert_paged(&first);
    let mut all = first.upserted;
    let mut more = first.snapshot_incomplete;
    let mut messages = 1;
    while more {
        let m = next_watched(s, "the rest of the watch's snapshot").await;
        assert!(!m.snapshot && m.deleted.is_empty());
        assert_paged(&m);
        all.extend(m.upserted);
        more = m.snapshot_incomplete;
        messages += 1;
    }
    let bytes: usize = all.iter().map(prost::Message::encoded_len).sum();
    if bytes > 2 * gwhub_api::grpc::view::WATCH_PAGE_BYTES {
        assert!(messages > 1, "{bytes} bytes in one message");
    }
    all
}

#[tokio::test]
async fn dashboard_calls_are_bounded_in_total_and_per_connection() {
    let hub = start_with(Budgets {
        max_dashboard_calls: 3,
        max_dashboard_calls_per_connection: 2,
        // Not an eighth: one address takes them all here.
        max_dashboard_calls_per_address: 3,
        ..Budgets::default()
    })
    .await;
    let mut one = dashboard(&hub).await;
    let _w1 = watch(&mut one).await.unwrap();
    let _w2 = watch(&mut one).await.unwrap();
    let refused = watch(&mut one).await.unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(
        refused
            .message()
            .contains("--max-dashboard-calls-per-connection"),
        "{refused:?}"
    );
    let mut two = dashboard(&hub).await;
    let _w3 = watch(&mut two).await.unwrap();
    let refused = watch(&mut two).await.unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(
        refused.message().contains("--max-dashboard-calls;"),
        "{refused:?}"
    );
    // A closed watch gives its slot back.
    drop(_w3);
    until(
        WAIT,
        || {
            let mut two = two.clone();
            async move { watch(&mut two).await.is_ok() }
        },
        |ok| *ok,
    )
    .await;
    hub.shutdown().await.unwrap();
}

/// A Gateway name of ~125 bytes: 1,500 of them make a view of ~300 KB,
/// beyond any default HTTP/2 window.
fn long(i: usize) -> String {
    format!("{i:04}{}", "g".repeat(120))
}

/// A hub dropping callers that take nothing within `send_timeout`, cluster
/// east reporting 1,500 [`long`] Gateways, and a Dashboard channel whose
/// stream window is far smaller than the view (a caller that never reads
/// cannot be handed an answer).
async fn big_view_and_a_small_window(send_timeout: Duration) -> (Hub, Agent, Channel) {
    let hub = start_with(Budgets {
        watch_send_timeout: send_timeout,
        ..Budgets::default()
    })
    .await;
    let mut east = Agent::connect(hub.ingest_addr, "east").await;
    east.snapshot(0, (0..1500).map(|i| report("ns", &long(i), "")).collect())
        .await;
    until(WAIT, || names(&hub), |n| n.len() == 1500).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", hub.dashboard_addr))
        .unwrap()
        .initial_stream_window_size(Some(1024))
        .connect()
        .await
        .unwrap();
    (hub, east, channel)
}

#[tokio::test]
async fn a_watcher_that_grants_no_window_is_dropped_not_buffered() {
    // A watcher that never reads: the hub cannot hand it the first message.
    let (hub, east, channel) = big_view_and_a_small_window(Duration::from_millis(500)).await;
    let mut slow = DashboardClient::new(channel);
    let stream = watch(&mut slow).await.unwrap();
    // The transport takes the first change's message and holds it until
    // the first message is written out, which the watcher never allows, so
    // the second change's message is never taken.
    for seq in 0..2u64 {
        east.send(agent_message::Message::Delta(v1::Delta {
            seq: seq + 1,
            changes: vec![v1::Change {
                change: Some(v1::change::Change::Delete(v1::GatewayRef {
                    namespace: "ns".into(),
                    name: long(100 + seq as usize),
                })),
            }],
            ..Default::default()
        }))
        .await;
    }
    let counters = hub.metrics.clone();
    until(
        WAIT,
        || async { Value::value(&counters.calls.watchers_dropped) },
        |n| *n == 1,
    )
    .await;
    // Its connection is closed: nothing stays buffered for it.
    until(
        WAIT,
        || async { Value::value(&counters.calls.dashboard_calls) },
        |n| *n == 0,
    )
    .await;
    drop(stream);
    // An honest watcher is served meanwhile, change after change, and not
    // dropped however short the timeout.
    let mut d = dashboard(&hub).await;
    let mut honest = watch(&mut d).await.unwrap();
    assert_eq!(whole_snapshot(&mut honest).await.len(), 1498);
    for seq in 3..7u64 {
        east.send(agent_message::Message::Delta(v1::Delta {
            seq,
            changes: vec![v1::Change {
                change: Some(v1::change::Change::Delete(v1::GatewayRef {
                    namespace: "ns".into(),
                    name: long(seq as usize),
                })),
            }],
            ..Default::default()
        }))
        .await;
        let next = tokio::time::timeout(WAIT, honest.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(next.deleted.len(), 1, "{next:?}");
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    assert_eq!(
        Value::value(&counters.calls.watchers_dropped),
        1,
        "the honest watcher was dropped too"
    );
    hub.shutdown().await.unwrap();
}

/// A watcher with window to spare takes a large view in one go, so nothing
/// more happens on its stream until the next change: it is not dropped
/// for that, however long the quiet lasts (the hub once counted the
/// transport's polls, which a message past tonic's 32 KiB batch and a
/// window that never ran out left one short).
#[tokio::test]
async fn a_watcher_that_took_a_large_view_at_once_is_not_dropped() {
    let (hub, east, _small) = big_view_and_a_small_window(Duration::from_millis(300)).await;
    let roomy = tonic::transport::Endpoint::from_shared(format!("http://{}", hub.dashboard_addr))
        .unwrap()
        .initial_stream_window_size(Some(16 << 20))
        .initial_connection_window_size(Some(16 << 20))
        .connect()
        .await
        .unwrap();
    // Several at once: whether the transport polls once more after the
    // view depends on a race inside HTTP/2.
    let mut watchers = Vec::new();
    for _ in 0..12 {
        let mut d = DashboardClient::new(roomy.clone());
        let mut watcher = watch(&mut d).await.unwrap();
        assert_eq!(whole_snapshot(&mut watcher).await.len(), 1500);
        watchers.push(watcher);
    }
    // Quiet for several times the timeout, then a change still arrives.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    east.send(agent_message::Message::Delta(v1::Delta {
        seq: 1,
        changes: vec![v1::Change {
            change: Some(v1::change::Change::Delete(v1::GatewayRef {
                namespace: "ns".into(),
                name: long(0),
            })),
        }],
        ..Default::default()
    }))
    .await;
    for watcher in &mut watchers {
        let next = tokio::time::timeout(WAIT, watcher.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(next.deleted.len(), 1, "{next:?}");
    }
    assert_eq!(Value::value(&hub.metrics.calls.watchers_dropped), 0);
    hub.shutdown().await.unwrap();
}

/// A unary answer the caller never reads keeps its call's slot of
/// `--max-dashboard-calls` (so such answers are bounded like watchers), and
/// after `--watch-send-timeout` its connection is closed.
#[tokio::test]
async fn an_unread_answer_holds_its_call_slot_then_its_connection_is_closed() {
    // ListGateways taking the headers and never reading the body.
    let (hub, _east, channel) = big_view_and_a_small_window(Duration::from_millis(800)).await;
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let unread = grpc
        .server_streaming(
            tonic::Request::new(v1::ListGatewaysRequest::default()),
            tonic::codegen::http::uri::PathAndQuery::from_static(
                "/gwhub.v1.Dashboard/ListGateways",
            ),
            tonic_prost::ProstCodec::<v1::ListGatewaysRequest, v1::ListGatewaysResponse>::default(),
        )
        .await
        .unwrap();
    let counters = hub.metrics.clone();
    assert_eq!(
        Value::value(&counters.calls.dashboard_calls),
        1,
        "the unread answer holds its call slot"
    );
    until(
        WAIT,
        || async { Value::value(&counters.calls.answers_dropped) },
        |n| *n == 1,
    )
    .await;
    until(
        WAIT,
        || async { Value::value(&counters.calls.dashboard_calls) },
        |n| *n == 0,
    )
    .await;
    drop(unread);
    // A caller that reads is answered in full and not dropped.
    let mut d = dashboard(&hub).await;
    let all = d
        .list_gateways(v1::ListGatewaysRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(all.gateways.len(), 1500);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        Value::value(&counters.calls.answers_dropped),
        1,
        "the caller that read its answer was dropped too"
    );
    assert_eq!(
        Value::value(&counters.calls.dashboard_calls),
        0,
        "the answered call still holds its slot"
    );
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn connections_per_listener_are_bounded_and_idle_ones_closed() {
    let hub = start_with(Budgets {
        max_connections: 2,
        idle_connection_timeout: Duration::from_millis(300),
        ..Budgets::default()
    })
    .await;
    let counters = hub.metrics.clone();
    // Two silent connections fill the listener; a third makes room for
    // itself by closing the one idle longest, the rest are closed idle.
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(
            tokio::net::TcpStream::connect(hub.ingest_addr)
                .await
                .unwrap(),
        );
    }
    for mut sock in idle {
        let mut buf = [0u8; 64];
        let closed = tokio::time::timeout(WAIT, async {
            loop {
                match sock.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => continue,
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "an idle connection stayed open");
    }
    assert!(Value::value(&counters.listeners.ingest.saturated) >= 1);
    assert_eq!(
        Value::value(&counters.listeners.ingest.idle_closed)
            + Value::value(&counters.listeners.ingest.evicted),
        3
    );
    assert!(Value::value(&counters.listeners.ingest.evicted) >= 1);
    until(
        WAIT,
        || async { Value::value(&counters.listeners.ingest.open) },
        |n| *n == 0,
    )
    .await;
    // An agent is served afterwards.
    let _east = Agent::connect(hub.ingest_addr, "east").await;
    hub.shutdown().await.unwrap();
}

/// `--max-dashboard-connections-per-address`: one address past its share
/// is closed at once while another address is served, and a slot it gives
/// back is its again.
#[tokio::test]
async fn one_address_cannot_take_every_reader_slot() {
    let hub = Hub::start(HubConfig {
        web_listen: Some("127.0.0.1:0".parse().unwrap()),
        budgets: Budgets {
            max_dashboard_connections: 8,
            max_dashboard_connections_per_address: 2,
            idle_connection_timeout: Duration::from_secs(120),
            ..Budgets::default()
        },
        ..HubConfig::loopback(Duration::from_secs(60))
    })
    .await
    .unwrap();
    let web = hub.web_addr.unwrap();
    let from = |ip: &'static str| async move {
        loopback::connect_from(ip.parse().unwrap(), web)
            .await
            .unwrap()
    };
    /// The status of `GET /` on `s`, or `None` when it is closed.
    async fn get(mut s: tokio::net::TcpStream) -> Option<u16> {
        let ask = b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
        s.write_all(ask).await.ok()?;
        let mut text = Vec::new();
        let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut text)).await;
        String::from_utf8_lossy(&text)
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
    }
    // Two idle connections from one address take its share...
    let first = from("127.0.0.1").await;
    let _second = from("127.0.0.1").await;
    let counters = hub.metrics.clone();
    until_named(
        "the hub never held both connections from 127.0.0.1",
        WAIT,
        || async { Value::value(&counters.listeners.web.open) },
        |n| *n == 2,
    )
    .await;
    // ...so a third from it is closed (long before the idle timeout).
    let mut third = from("127.0.0.1").await;
    let mut buf = [0u8; 16];
    let closed = tokio::time::timeout(WAIT, third.read(&mut buf)).await;
    assert!(
        matches!(closed, Ok(Ok(0) | Err(_))),
        "a third connection from one address stayed open: {closed:?}"
    );
    // Another address is served meanwhile.
    assert_eq!(get(from("127.0.0.2").await).await, Some(200));
    // A slot given back is the address's again.
    drop(first);
    until(
        WAIT,
        || async { get(from("127.0.0.1").await).await },
        |code| *code == Some(200),
    )
    .await;
}

/// The web page's listener has the Dashboard's bounds:
/// `--max-dashboard-connections` open connections, idle ones closed after
/// `--idle-connection-timeout`, an open event stream not idle, and event
/// streams taking slots of `--max-dashboard-calls` from the pool the gRPC
/// Dashboard's calls take theirs from.
#[tokio::test]
async fn the_web_listener_is_bounded_like_the_dashboard() {
    let hub = Hub::start(HubConfig {
        web_listen: Some("127.0.0.1:0".parse().unwrap()),
        budgets: Budgets {
            max_dashboard_connections: 2,
            max_dashboard_connections_per_address: 2,
            max_dashboard_calls: 1,
            idle_connection_timeout: Duration::from_millis(300),
            ..Budgets::default()
        },
        ..HubConfig::loopback(Duration::from_secs(60))
    })
    .await
    .unwrap();
    let web = hub.web_addr.unwrap();
    let counters = hub.metrics.clone();
    // Three silent connections: two fill the listener, all are closed idle.
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(tokio::net::TcpStream::connect(web).await.unwrap());
    }
    for mut sock in idle {
        let mut buf = [0u8; 64];
        let closed = tokio::time::timeout(WAIT, async {
            loop {
                match sock.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => continue,
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "an idle web connection stayed open");
    }
    assert!(Value::value(&counters.listeners.web.saturated) >= 1);
    assert_eq!(
        Value::value(&counters.listeners.web.idle_closed)
            + Value::value(&counters.listeners.web.evicted),
        3
    );

    // An event stream is an open call: its connection outlives many idle
    // timeouts, and it holds the one call slot.
    let get = |path: &'static str| async move {
        let mut s = tokio::net::TcpStream::connect(web).await.unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&head).contains("\r\n\r\n") {
            let n = tokio::time::timeout(WAIT, s.read(&mut buf))
                .await
                .expect("an answer")
                .unwrap();
            assert!(n > 0, "closed before answering");
            head.extend_from_slice(&buf[..n]);
        }
        (s, String::from_utf8_lossy(&head).into_owned())
    };
    let (mut stream, head) = get("/api/events").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (_refused_conn, refused) = get("/api/events").await;
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(refused.contains("--max-dashboard-calls"), "{refused}");
    // Many idle timeouts later, the refused connection is closed (in the
    // hub's own time: waited for) and the event stream's is not.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    until_named(
        "the refused connection was not closed, or the event stream's was too",
        WAIT,
        || async {
            Value::value(&counters.listeners.web.idle_closed)
                + Value::value(&counters.listeners.web.evicted)
        },
        |n| *n == 4,
    )
    .await;
    let mut buf = [0u8; 64];
    let still_open = tokio::time::timeout(Duration::from_millis(100), stream.read(&mut buf)).await;
    assert!(
        !matches!(still_open, Ok(Ok(0)) | Ok(Err(_))),
        "the event stream's connection was closed"
    );
    // One pool with the gRPC Dashboard: its calls are refused while the
    // page's stream holds the slot, and served once it is gone.
    let mut d = dashboard(&hub).await;
    let refused = d
        .list_clusters(v1::ListClustersRequest {})
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(
        refused.message().contains("--max-dashboard-calls"),
        "{refused:?}"
    );
    drop(stream);
    until(
        WAIT,
        || {
            let mut d = d.clone();
            async move { d.list_clusters(v1::ListClustersRequest {}).await.is_ok() }
        },
        |served| *served,
    )
    .await;
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_connection_is_closed_once_idle_after_its_calls_never_under_an_open_stream() {
    let hub = start_with(Budgets {
        idle_connection_timeout: Duration::from_millis(300),
        ..Budgets::default()
    })
    .await;
    let counters = hub.metrics.clone();
    let mut watcher = dashboard(&hub).await;
    let mut w = watch(&mut watcher).await.unwrap();
    let mut east = Agent::connect(hub.ingest_addr, "east").await;
    // One call, then silence: the connection must not hold its slot.
    let mut once = dashboard(&hub).await;
    once.list_clusters(v1::ListClustersRequest {})
        .await
        .unwrap();
    until(
        WAIT,
        || async { Value::value(&counters.listeners.dashboard.idle_closed) },
        |n| *n >= 1,
    )
    .await;
    // Many idle timeouts later the agent stream and the watch still work.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    east.snapshot(0, vec![report("ns", "gw", "x")]).await;
    loop {
        let m = tokio::time::timeout(WAIT, w.next())
            .await
            .expect("the watch is served")
            .expect("the watch is open")
            .unwrap();
        if m.upserted.iter().any(|g| g.name == "gw") {
            break;
        }
    }
    assert_eq!(Value::value(&counters.listeners.dashboard.idle_closed), 1);
    assert_eq!(Value::value(&counters.listeners.ingest.idle_closed), 0);
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_tls_handshake_that_never_finishes_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let layout = gwhub_test_kit::procs::dev_certs(dir.path(), &["east"], &["127.0.0.1"]);
    let read = |p: &std::path::Path| std::fs::read(p).unwrap();
    let tls = HubTls::from_pem(
        &read(&layout.hub_cert),
        &read(&layout.hub_key),
        &read(&layout.ca),
    );
    let hub = Hub::start_with_tls(
        HubConfig {
            insecure: false,
            budgets: Budgets {
                tls_handshake_timeout: Duration::from_millis(300),
                // Not what closes it here.
                idle_connection_timeout: Duration::from_secs(3600),
                ..Budgets::default()
            },
            ..HubConfig::loopback(Duration::from_secs(60))
        },
        Some(tls),
    )
    .await
    .unwrap();
    for addr in [hub.ingest_addr, hub.dashboard_addr] {
        let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
        // Half a ClientHello record header, then nothing.
        sock.write_all(&[0x16, 0x03]).await.unwrap();
        let mut buf = [0u8; 64];
        let closed = tokio::time::timeout(WAIT, async {
            loop {
                match sock.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => continue,
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "{addr}: the handshake was never cut off");
    }
    let counters = hub.metrics.clone();
    until(
        WAIT,
        || async {
            Value::value(&counters.listeners.ingest.open)
                + Value::value(&counters.listeners.dashboard.open)
        },
        |n| *n == 0,
    )
    .await;
    hub.shutdown().await.unwrap();
}

// ---- 3. names, identities, registry, protocol edges -------------------------

#[tokio::test]
async fn gateway_names_must_be_kubernetes_names() {
    let hub = Hub::start(HubConfig::loopback(Duration::from_secs(60)))
        .await
        .unwrap();
    for (namespace, name, rule) in [
        ("x/y", "gw", "DNS-1123 label"),
        ("ns", "Gw", "DNS-1123 subdomain"),
        ("ns", "gw\u{1b}[2J", "DNS-1123 subdomain"),
    ] {
        let mut east = Agent::connect(hub.ingest_addr, "east").await;
        east.send(agent_message::Message::Snapshot(v1::SnapshotChunk {
            snapshot_id: 1,
            chunk: 0,
            r#final: true,
            seq: 0,
            gateways: vec![report(namespace, name, "")],
        }))
        .await;
        let status = east.ended().await;
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        assert!(status.message().contains(rule), "{rule}: {status:?}");
    }
    assert!(names(&hub).await.is_empty());
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn gwhubctl_prints_a_rogue_clusters_text_escaped() {
    let hub = Hub::start(HubConfig::loopback(Duration::from_secs(60)))
        .await
        .unwrap();
    let mut rogue = Agent::connect(hub.ingest_addr, "rogue").await;
    let mut r = report(
        "ns",
        "gw",
        "\u{1b}[2J\u{7}\r\nns   gw   east   True   forged",
    );
    if let Some(s) = r.status.as_mut() {
        s.addresses.push(v1::GatewayAddress {
            r#type: Some("IPAddress\u{1b}]0;title\u{7}".into()),
            value: "10.0.0.1\nfake".into(),
        });
    }
    rogue.snapshot(0, vec![r]).await;
    until(WAIT, || names(&hub), |n| n == &["gw"]).await;
    for args in [
        &["describe", "gateway", "ns/gw"][..],
        &["get", "gateways"][..],
    ] {
        let out = tokio::process::Command::new(gwhub_test_kit::workspace_bin::workspace_binary(
            "gwhub",
            "gwhubctl",
            "GWHUB_CTL_BIN",
        ))
        .arg("--server")
        .arg(format!("http://{}", hub.dashboard_addr))
        .args(args)
        .output()
        .await
        .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            !text.contains(['\u{1b}', '\u{7}', '\r']),
            "{args:?}: raw control characters in {text:?}"
        );
        assert!(
            !text
                .lines()
                .any(|l| l.trim_start().starts_with("ns   gw   east") || l.starts_with("fake")),
            "{args:?}: a forged line in {text}"
        );
    }
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn insecure_clusters_that_leave_and_stay_silent_are_pruned() {
    let hub = start_with(Budgets {
        insecure_prune_after: Duration::from_millis(500),
        ..Budgets::default()
    })
    .await;
    let mut stays = Agent::connect(hub.ingest_addr, "stays").await;
    stays.snapshot(0, vec![report("ns", "kept", "")]).await;
    for i in 0..20 {
        let mut ghost = Agent::connect(hub.ingest_addr, &format!("ghost-{i}")).await;
        ghost.snapshot(0, vec![report("ns", "ghost", "")]).await;
    }
    let index = hub.index.clone();
    let heartbeats = tokio::spawn(async move {
        loop {
            stays.heartbeat().await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let left = until(WAIT, || async { index.clusters() }, |c| c.len() == 1).await;
    assert_eq!(left[0].name, "stays");
    until(WAIT, || names(&hub), |n| n == &["kept"]).await;
    let text = gwhub_hub::metrics::render(&index.clusters(), 1, None);
    assert!(!text.contains("ghost"), "{text}");
    assert_eq!(index.counters().clusters_pruned.get(), 20);
    heartbeats.abort();
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_first_snapshot_with_a_skipped_chunk_is_not_acked() {
    let hub = Hub::start(HubConfig::loopback(Duration::from_secs(60)))
        .await
        .unwrap();
    let mut east = Agent::connect(hub.ingest_addr, "east").await;
    let chunk = |n: u32, last: bool, name: &str| {
        agent_message::Message::Snapshot(v1::SnapshotChunk {
            snapshot_id: 7,
            chunk: n,
            r#final: last,
            seq: 3,
            gateways: vec![report("ns", name, "")],
        })
    };
    east.send(chunk(0, false, "a")).await;
    east.send(chunk(2, true, "c")).await;
    match east.recv().await {
        Ok(hub_message::Message::Resync(r)) => {
            assert_eq!(r.reason, v1::ResyncReason::BadChunkOrder as i32, "{r:?}");
        }
        other => panic!("expected a resync request, got {other:?}"),
    }
    // The whole snapshot again is applied.
    east.send(chunk(0, false, "a")).await;
    east.send(chunk(1, false, "b")).await;
    east.send(chunk(2, true, "c")).await;
    match east.recv().await {
        Ok(hub_message::Message::Ack(a)) => assert_eq!(a.seq, 3),
        other => panic!("expected ack 3, got {other:?}"),
    }
    until(WAIT, || names(&hub), |n| n == &["a", "b", "c"]).await;
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_delta_after_the_largest_sequence_number_is_explained() {
    let hub = Hub::start(HubConfig::loopback(Duration::from_secs(60)))
        .await
        .unwrap();
    let mut east = Agent::connect(hub.ingest_addr, "east").await;
    east.snapshot(u64::MAX, vec![report("ns", "gw", "")]).await;
    east.send(agent_message::Message::Delta(v1::Delta {
        seq: 0,
        changes: vec![],
        ..Default::default()
    }))
    .await;
    match east.recv().await {
        Ok(hub_message::Message::Resync(r)) => {
            assert!(!r.message.contains("expected seq 0"), "{r:?}");
            assert!(r.message.contains("largest sequence number"), "{r:?}");
        }
        other => panic!("expected a resync request, got {other:?}"),
    }
    hub.shutdown().await.unwrap();
}

// ---- 4. CLI input ---------------------------------------------------------

/// Runs `gwhub` with `args`, killed after a generous bound.
fn gwhub_cli(args: &[&str], stdin: &[u8]) -> std::process::Output {
    use std::io::Write as _;
    let mut child = std::process::Command::new(gwhub_test_kit::workspace_bin::workspace_binary(
        "gwhub",
        "gwhub",
        "GWHUB_BIN",
    ))
    .args(args)
    .stdin(std::process::Stdio::piped())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let id = child.id();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        if done_rx.recv_timeout(Duration::from_secs(60)).is_err() {
            let _ = std::process::Command::new("kill")
                .args(["-9", &id.to_string()])
                .status();
        }
    });
    let out = child.wait_with_output().unwrap();
    let _ = done_tx.send(());
    let _ = feeder.join();
    out
}

#[test]
fn cli_inputs_are_regular_files_or_stdin_and_bounded() {
    // A device never ends; it is refused before reading.
    let out = gwhub_cli(&["aggregate", "--cluster", "east=/dev/zero"], b"");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a regular file"), "{err}");

    // Deeply nested flow YAML on stdin is refused at once.
    let deep = format!("a: {}{}", "[".repeat(100_000), "]".repeat(100_000));
    let out = gwhub_cli(&["aggregate", "--cluster", "east=-"], deep.as_bytes());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nested more than"), "{err}");
}

// ---- 5. development certificates ------------------------------------------

/// Whether the certificate at `path` is still valid `days` from now
/// (`openssl x509 -checkend`).
fn valid_in(path: &std::path::Path, days: u64) -> bool {
    std::process::Command::new("openssl")
        .args([
            "x509",
            "-noout",
            "-checkend",
            &(days * 86_400).to_string(),
            "-in",
        ])
        .arg(path)
        .output()
        .expect("openssl runs")
        .status
        .success()
}

fn certs(out: &std::path::Path, extra: &[&str]) -> std::process::Output {
    std::process::Command::new(gwhub_test_kit::workspace_bin::workspace_binary(
        "gwhub",
        "gwhub",
        "GWHUB_BIN",
    ))
    .args(["certs", "--clusters", "east"])
    .args(extra)
    .arg("--out")
    .arg(out)
    .output()
    .unwrap()
}

#[test]
fn gwhub_certs_issues_bounded_validity() {
    let dir = tempfile::tempdir().unwrap();
    let out = certs(&dir.path().join("short"), &["--validity", "30d"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for file in ["ca.pem", "hub.pem", "east.pem"] {
        let path = dir.path().join("short").join(file);
        assert!(valid_in(&path, 27), "{file}");
        assert!(!valid_in(&path, 31), "{file}");
    }
    // The default is a year.
    let out = certs(&dir.path().join("default"), &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for file in ["ca.pem", "hub.pem", "east.pem"] {
        let path = dir.path().join("default").join(file);
        assert!(valid_in(&path, 360), "{file}");
        assert!(!valid_in(&path, 366), "{file}");
    }
    // Unbounded validity is refused.
    let out = certs(&dir.path().join("long"), &["--validity", "100years"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("3650d"));
}

// ---- 2. at the file descriptor limit ---------------------------------------

#[tokio::test]
async fn out_of_file_descriptors_the_hub_backs_off_logs_and_recovers() {
    use std::io::BufRead as _;
    let (ingest, dash) = (free_addr(), free_addr());
    // A hub with few file descriptors: connections beyond them fail to accept.
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n 64 && exec {} serve --no-kube --insecure --listen {ingest} --dashboard-listen {dash}",
            gwhub_test_kit::workspace_bin::workspace_binary("gwhub", "gwhub", "GWHUB_BIN").display()
        ))
        .env("RUST_LOG", "warn,gwhub=info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (lines_tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let ready = tokio::time::timeout(WAIT, async {
        while let Some(l) = lines.recv().await {
            if l.contains("hub serving") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(ready, Ok(true), "the hub did not start");

    let mut socks = Vec::new();
    for _ in 0..100 {
        if let Ok(s) = tokio::net::TcpStream::connect(ingest).await {
            socks.push(s);
        }
    }
    // Two seconds at the limit: a back-off of 200 ms logs about ten times;
    // a spinning accept loop would log thousands.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut complaints = 0;
    while let Ok(l) = lines.try_recv() {
        if l.contains("cannot accept a connection") {
            complaints += 1;
        }
    }
    assert!(complaints >= 1, "the hub never said it could not accept");
    assert!(
        complaints < 200,
        "{complaints} accept errors in 2 s: spinning"
    );

    // Once connections go away, the hub serves again.
    drop(socks);
    let mut served = false;
    for _ in 0..100 {
        if let Ok(mut d) = DashboardClient::connect(format!("http://{dash}")).await
            && d.list_clusters(v1::ListClustersRequest {}).await.is_ok()
        {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(served, "the hub did not recover after the flood");
}

// ---- 4. hostile readers ---------------------------------------------------

/// A plain HTTP/1.1 GET from `from` (a loopback address of the test's
/// choosing): the connection and the answer's head, nothing of the body
/// read beyond what came with it.
async fn http_get(from: &str, to: SocketAddr, path: &str) -> (tokio::net::TcpStream, String) {
    let mut s = loopback::connect_from(from.parse().unwrap(), to)
        .await
        .unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&head).contains("\r\n\r\n") {
        let n = tokio::time::timeout(WAIT, s.read(&mut buf))
            .await
            .expect("an answer")
            .unwrap();
        assert!(n > 0, "closed before answering");
        head.extend_from_slice(&buf[..n]);
    }
    (s, String::from_utf8_lossy(&head).into_owned())
}

/// An honest reader is served at once: a fresh Dashboard connection's
/// call and a fresh page's `/api/fleet`.
async fn honest_reader_is_served(hub: &Hub) {
    let served = tokio::time::timeout(WAIT, async {
        let mut d = dashboard(hub).await;
        d.list_clusters(v1::ListClustersRequest {}).await
    })
    .await
    .expect("a fresh Dashboard call answers");
    assert!(served.is_ok(), "{served:?}");
    if let Some(web) = hub.web_addr {
        let (_, head) = http_get("127.0.0.1", web, "/api/fleet").await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    }
}

/// Idle connections fill both reader listeners and are re-opened as they
/// close: each fresh reader still gets in, the connection idle longest
/// making room for it, long before any idle timeout.
#[tokio::test]
async fn an_idle_flood_does_not_keep_a_fresh_reader_out() {
    let hub = Hub::start(HubConfig {
        web_listen: Some("127.0.0.1:0".parse().unwrap()),
        budgets: Budgets {
            max_dashboard_connections: 8,
            max_dashboard_connections_per_address: 64,
            idle_connection_timeout: Duration::from_secs(600),
            ..Budgets::default()
        },
        ..HubConfig::loopback(Duration::from_secs(60))
    })
    .await
    .unwrap();
    let counters = hub.metrics.clone();
    let addrs = [hub.dashboard_addr, hub.web_addr.unwrap()];
    let mut flood = Vec::new();
    for addr in addrs {
        for _ in 0..8 {
            flood.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
    }
    until(
        WAIT,
        || async {
            (
                Value::value(&counters.listeners.dashboard.open),
                Value::value(&counters.listeners.web.open),
            )
        },
        |open| *open == (8, 8),
    )
    .await;
    for _ in 0..3 {
        honest_reader_is_served(&hub).await;
        // The flood comes back.
        for addr in addrs {
            for _ in 0..4 {
                flood.push(tokio::net::TcpStream::connect(addr).await.unwrap());
            }
        }
    }
    assert!(Value::value(&counters.listeners.dashboard.evicted) >= 3);
    assert!(Value::value(&counters.listeners.web.evicted) >= 3);
    assert!(Value::value(&counters.listeners.dashboard.open) <= 8);
    drop(flood);
    hub.shutdown().await.unwrap();
}

/// HTTP/1.1 event streams that never read, all from one address: at most
/// `--max-dashboard-calls-per-address` are served, each counted in
/// `gwhub_dashboard_calls`, and readers from elsewhere are served.
#[tokio::test]
async fn unread_http1_event_streams_are_bounded_per_address_and_counted() {
    let hub = Hub::start(HubConfig {
        web_listen: Some("127.0.0.1:0".parse().unwrap()),
        budgets: Budgets {
            max_dashboard_calls: 8,
            max_dashboard_calls_per_address: 4,
            ..Budgets::default()
        },
        ..HubConfig::loopback(Duration::from_secs(60))
    })
    .await
    .unwrap();
    let web = hub.web_addr.unwrap();
    let counters = hub.metrics.clone();
    let mut held = Vec::new();
    for i in 0..6 {
        let (s, head) = http_get("127.0.0.2", web, "/api/events").await;
        if i < 4 {
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        } else {
            assert!(head.starts_with("HTTP/1.1 503"), "{head}");
            assert!(head.contains("--max-dashboard-calls-per-address"), "{head}");
        }
        held.push(s);
    }
    until(
        WAIT,
        || async { Value::value(&counters.calls.dashboard_calls) },
        |n| *n == 4,
    )
    .await;
    honest_reader_is_served(&hub).await;
    let (_events, head) = http_get("127.0.0.1", web, "/api/events").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    drop(held);
    until(
        WAIT,
        || async { Value::value(&counters.calls.dashboard_calls) },
        |n| *n == 1,
    )
    .await;
    hub.shutdown().await.unwrap();
}

/// This process's resident memory.
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// Slow `WatchGateways` readers of a large view that grant no window hold
/// no copy of it: the hub grows by about the documented per-reader bound
/// (`2·P + W + F`, see "The memory bound" in docs/operating.md), not by readers x view (each
/// once held its own ~2 copies, over 200 MB here), honest readers are
/// served meanwhile, and in a quiet fleet the stalled readers are dropped
/// after `--watch-send-timeout`.
#[tokio::test]
async fn slow_watchers_of_a_large_view_hold_no_copy_of_it() {
    if !std::path::Path::new("/proc/self/statm").exists() {
        eprintln!("skipped: no /proc to read memory from");
        return;
    }
    let hub = start_with(Budgets {
        watch_send_timeout: Duration::from_secs(4),
        max_dashboard_connections_per_address: 64,
        max_dashboard_calls_per_address: 64,
        ..Budgets::default()
    })
    .await;
    // ~3 MB encoded, in one agent message.
    let mut east = Agent::connect(hub.ingest_addr, "east").await;
    east.snapshot(0, (0..1500).map(|i| sized(&long(i), 2000)).collect())
        .await;
    until(WAIT, || names(&hub), |n| n.len() == 1500).await;
    let before = rss_bytes();
    const WATCHERS: u64 = 32;
    let mut streams = Vec::new();
    for _ in 0..WATCHERS {
        let channel =
            tonic::transport::Endpoint::from_shared(format!("http://{}", hub.dashboard_addr))
                .unwrap()
                .initial_stream_window_size(Some(1024))
                .connect()
                .await
                .unwrap();
        let mut d = DashboardClient::new(channel);
        streams.push(watch(&mut d).await.unwrap());
    }
    let counters = hub.metrics.clone();
    until(
        WAIT,
        || async { Value::value(&counters.calls.dashboard_calls) },
        |n| *n == WATCHERS,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let grown = rss_bytes().saturating_sub(before);
    eprintln!("{WATCHERS} stalled watchers of a ~3 MB view: the hub grew {grown} bytes");
    // Per reader: a page (P = 256 KiB) and what it pins, HTTP/2's buffer
    // (400 KiB) and a frame; plus the views' shared encoding (~3 MB) and
    // room for the allocator and the other tests of this binary.
    let bound = WATCHERS * (2 * 256 + 400 + 16) * 1024 + 64 * 1024 * 1024;
    assert!(grown < bound, "grew {grown} bytes, bound {bound}");
    honest_reader_is_served(&hub).await;
    // Nothing changes; they are dropped all the same. Each is dropped
    // `--watch-send-timeout` (4 s) after its first page stalls, and each
    // first diffs and encodes the 3 MB view: on a loaded two-core machine
    // the 32 of them took over 30 s to get there, so the bound is a
    // failure's report time only (four times WAIT), not a target.
    until_named(
        "every stalled watcher dropped",
        4 * WAIT,
        || async { Value::value(&counters.calls.watchers_dropped) },
        |n| *n == WATCHERS,
    )
    .await;
    drop(streams);
    hub.shutdown().await.unwrap();
}

/// Web page event streams that never read, over HTTP/1.1 from two
/// addresses, of a large fleet: the hub grows by the documented per-reader
/// bound, not by readers x snapshot, and honest readers are served.
#[tokio::test]
async fn never_read_web_event_streams_hold_a_bounded_share() {
    if !std::path::Path::new("/proc/self/statm").exists() {
        eprintln!("skipped: no /proc to read memory from");
        return;
    }
    let hub = Hub::start(HubConfig {
        web_listen: Some("127.0.0.1:0".parse().unwrap()),
        // Not an eighth: two addresses take 24 each here.
        budgets: Budgets {
            max_dashboard_connections_per_address: 32,
            max_dashboard_calls_per_address: 32,
            ..Budgets::default()
        },
        ..HubConfig::loopback(Duration::from_secs(60))
    })
    .await
    .unwrap();
    let mut east = Agent::connect(hub.ingest_addr, "east").await;
    east.snapshot(0, (0..1500).map(|i| sized(&long(i), 2000)).collect())
        .await;
    until(WAIT, || names(&hub), |n| n.len() == 1500).await;
    let web = hub.web_addr.unwrap();
    let before = rss_bytes();
    const STREAMS: u64 = 48;
    let mut held = Vec::new();
    for i in 0..STREAMS {
        let from = if i % 2 == 0 { "127.0.0.2" } else { "127.0.0.3" };
        let (s, head) = http_get(from, web, "/api/events").await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        held.push(s);
    }
    let counters = hub.metrics.clone();
    until(
        WAIT,
        || async { Value::value(&counters.calls.dashboard_calls) },
        |n| *n == STREAMS,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let grown = rss_bytes().saturating_sub(before);
    eprintln!("{STREAMS} unread event streams of 1,500 Gateways: the hub grew {grown} bytes");
    let bound = STREAMS * (2 * 256 + 400 + 16) * 1024 + 64 * 1024 * 1024;
    assert!(grown < bound, "grew {grown} bytes, bound {bound}");
    honest_reader_is_served(&hub).await;
    drop(held);
    hub.shutdown().await.unwrap();
}

/// Web page event streams on one HTTP/2 connection are capped as gRPC
/// Dashboard calls are (`--max-dashboard-calls-per-connection`), so a few
/// connections cannot take every call slot, and are counted.
#[tokio::test]
async fn web_event_streams_are_capped_per_connection() {
    use tonic::codegen::Service;
    let hub = Hub::start(HubConfig {
        web_listen: Some("127.0.0.1:0".parse().unwrap()),
        budgets: Budgets {
            max_dashboard_calls_per_connection: 2,
            ..Budgets::default()
        },
        ..HubConfig::loopback(Duration::from_secs(60))
    })
    .await
    .unwrap();
    let web = hub.web_addr.unwrap();
    let mut h2 = tonic::transport::Endpoint::from_shared(format!("http://{web}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut responses = Vec::new();
    for _ in 0..3 {
        std::future::poll_fn(|cx| h2.poll_ready(cx)).await.unwrap();
        let request = tonic::codegen::http::Request::get(format!("http://{web}/api/events"))
            .body(tonic::body::Body::empty())
            .unwrap();
        responses.push(
            tokio::time::timeout(WAIT, h2.call(request))
                .await
                .unwrap()
                .unwrap(),
        );
    }
    let statuses: Vec<u16> = responses.iter().map(|r| r.status().as_u16()).collect();
    assert_eq!(statuses, [200, 200, 503]);
    let refused = responses.pop().unwrap().into_body();
    let text = http_body_util::BodyExt::collect(refused)
        .await
        .unwrap()
        .to_bytes();
    let text = String::from_utf8_lossy(&text);
    assert!(
        text.contains("--max-dashboard-calls-per-connection"),
        "{text}"
    );
    assert_eq!(Value::value(&hub.metrics.calls.dashboard_calls), 2);
    honest_reader_is_served(&hub).await;
    drop(responses);
    drop(h2);
    hub.shutdown().await.unwrap();
}
