//! The hub over real loopback TCP: a tiny test agent built on the generated
//! client streams to `Ingest`, and the results are read back through the
//! Dashboard API, health and reflection.

use std::net::SocketAddr;
use std::time::Duration;

use gwhub_hub::serve::{Hub, HubConfig};
use gwhub_proto::v1::{
    self, agent_message, change, dashboard_client::DashboardClient, ingest_client::IngestClient,
};
use gwhub_test_kit::procs::free_addr;
use gwhub_test_kit::raw_agent::{Agent, hello, msg};
use gwhub_test_kit::wait::WAIT;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

// ---- fixtures -------------------------------------------------------------

fn condition(type_: &str, ok: bool, message: &str) -> v1::Condition {
    v1::Condition {
        r#type: type_.into(),
        status: if ok {
            v1::ConditionStatus::True
        } else {
            v1::ConditionStatus::False
        } as i32,
        reason: if ok { "Ok" } else { "NotOk" }.into(),
        message: message.into(),
        observed_generation: Some(1),
        last_transition_time: 1_700_000_000,
    }
}

fn report(name: &str, programmed: bool, ip: &str) -> v1::GatewayReport {
    v1::GatewayReport {
        namespace: "openshift-ingress".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        generation: 1,
        status: Some(v1::GatewayStatus {
            conditions: vec![
                condition("Accepted", true, ""),
                condition(
                    "Programmed",
                    programmed,
                    if programmed { "" } else { "Address pending" },
                ),
            ],
            addresses: vec![v1::GatewayAddress {
                r#type: Some("IPAddress".into()),
                value: ip.into(),
            }],
            listeners: vec![v1::ListenerStatus {
                name: "http".into(),
                attached_routes: 1,
                supported_kinds: vec![v1::RouteGroupKind {
                    group: None,
                    kind: "HTTPRoute".into(),
                }],
                conditions: vec![condition("DNSReady", true, "")],
                hostname: None,
            }],
            attached_listener_sets: None,
        }),
    }
}

async fn start(stale_after: Duration) -> Hub {
    Hub::start(HubConfig::loopback(stale_after)).await.unwrap()
}

async fn dashboard(hub: &Hub) -> DashboardClient<Channel> {
    DashboardClient::connect(format!("http://{}", hub.dashboard_addr))
        .await
        .unwrap()
}

async fn list(d: &mut DashboardClient<Channel>) -> Vec<v1::AggregatedGateway> {
    d.list_gateways(v1::ListGatewaysRequest::default())
        .await
        .unwrap()
        .into_inner()
        .gateways
}

fn condition_of<'a>(g: &'a v1::AggregatedGateway, type_: &str) -> Option<&'a v1::Condition> {
    g.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.r#type == type_)
}

/// Polls the Dashboard until `check` holds for the Gateway `name`.
async fn eventually(
    d: &mut DashboardClient<Channel>,
    name: &str,
    check: impl Fn(&v1::AggregatedGateway) -> bool,
) -> v1::AggregatedGateway {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let gateways = list(d).await;
        if let Some(g) = gateways.iter().find(|g| g.name == name)
            && check(g)
        {
            return g.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition never held for {name}: {gateways:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn programmed(g: &v1::AggregatedGateway) -> Option<bool> {
    condition_of(g, "Programmed").map(|c| c.status == v1::ConditionStatus::True as i32)
}

// ---- tests ----------------------------------------------------------------

#[tokio::test]
async fn snapshot_is_aggregated_and_deltas_apply() {
    let hub = start(Duration::from_secs(60)).await;
    let mut d = dashboard(&hub).await;

    let mut east = Agent::connect(hub.ingest_addr, "east").await;
    east.snapshot(1, 10, vec![report("gw", true, "10.0.0.1")])
        .await;
    let g = eventually(&mut d, "gw", |g| g.clusters == ["east"]).await;
    assert_eq!(programmed(&g), Some(true));
    let addresses = &g.status.as_ref().unwrap().addresses;
    assert_eq!(addresses[0].value, "east/10.0.0.1");
    assert_eq!(
        addresses[0].r#type.as_deref(),
        Some("kuadrant.io/MultiClusterIPAddress")
    );

    let mut west = Agent::connect(hub.ingest_addr, "west").await;
    west.snapshot(1, 0, vec![report("gw", false, "10.0.1.1")])
        .await;
    let g = eventually(&mut d, "gw", |g| g.clusters == ["east", "west"]).await;
    let c = condition_of(&g, "Programmed").unwrap();
    assert_eq!(c.status, v1::ConditionStatus::False as i32);
    assert_eq!(c.reason, "NotTrueInSomeClusters");
    assert_eq!(c.message, "west Address pending");

    // Delta: west becomes programmed.
    west.upsert(1, report("gw", true, "10.0.1.1")).await;
    west.expect_ack(1).await;
    eventually(&mut d, "gw", |g| programmed(g) == Some(true)).await;

    // Delta: east deletes it.
    east.delete(11, "openshift-ingress", "gw").await;
    east.expect_ack(11).await;
    eventually(&mut d, "gw", |g| g.clusters == ["west"]).await;

    // Per-cluster breakdown.
    let got = d
        .get_gateway(v1::GetGatewayRequest {
            namespace: "openshift-ingress".into(),
            name: "gw".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.clusters.len(), 1);
    assert_eq!(got.clusters[0].cluster, "west");
    assert!(!got.clusters[0].stale);
    assert!(got.clusters[0].last_report_time > 0);
    let missing = d
        .get_gateway(v1::GetGatewayRequest {
            namespace: "openshift-ingress".into(),
            name: "nope".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound);
    // A requested name of any length, with control and bidi characters,
    // is echoed as a short, escaped prefix only.
    let hostile = "\u{1b}[2J\u{202e}evil\r\n".repeat(1000);
    for e in [
        d.get_gateway(v1::GetGatewayRequest {
            namespace: "openshift-ingress".into(),
            name: hostile.clone(),
        })
        .await
        .unwrap_err(),
        d.get_gateway_history(v1::GetGatewayHistoryRequest {
            namespace: hostile.clone(),
            name: "gw".into(),
            limit: 0,
        })
        .await
        .unwrap_err(),
    ] {
        assert_eq!(e.code(), tonic::Code::NotFound);
        let m = e.message();
        assert!(m.len() < 400, "{} bytes: {m}", m.len());
        assert!(!m.chars().any(gwhub_model::text::is_unsafe_char), "{m:?}");
        assert!(m.contains("\\u{1b}[2J\\u{202e}evil\\r\\n"), "{m}");
        assert!(m.contains("\"..."), "{m}");
    }

    let clusters = d
        .list_clusters(v1::ListClustersRequest {})
        .await
        .unwrap()
        .into_inner()
        .clusters;
    let names: Vec<_> = clusters
        .iter()
        .map(|c| (c.name.as_str(), c.connected, c.stale, c.gateway_count))
        .collect();
    assert_eq!(names, [("east", true, false, 0), ("west", true, false, 1)]);
    assert!(clusters.iter().all(|c| c.last_report_time > 0));

    // A new snapshot replaces everything the cluster reported.
    west.snapshot(2, 5, vec![report("other", true, "10.0.1.2")])
        .await;
    eventually(&mut d, "other", |g| g.clusters == ["west"]).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while list(&mut d).await.iter().any(|g| g.name == "gw") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "gw never dropped out"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn omissions_are_visible() {
    let hub = start(Duration::from_secs(60)).await;
    let mut d = dashboard(&hub).await;
    let mut bad = Agent::connect(hub.ingest_addr, "cluster_1").await;
    bad.snapshot(1, 0, vec![report("gw", true, "10.0.0.1")])
        .await;
    let g = eventually(&mut d, "gw", |g| !g.omissions.is_empty()).await;
    let o = &g.omissions[0];
    assert_eq!(o.cluster, "cluster_1");
    assert_eq!(o.item, "listener");
    assert_eq!(o.rule, "cluster_name_not_dns_label");
    assert!(o.message.contains("not a DNS label"), "{}", o.message);
    let own = condition_of(&g, "kuadrant.io/MultiClusterAggregated").unwrap();
    assert_eq!(own.reason, "ValidationFailed");
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn gaps_and_bad_chunk_order_trigger_resync() {
    let hub = start(Duration::from_secs(60)).await;
    let mut d = dashboard(&hub).await;
    let mut a = Agent::connect(hub.ingest_addr, "east").await;

    // Deltas before any snapshot are not applied (resync already asked).
    a.upsert(1, report("early", true, "10.0.0.9")).await;

    // A snapshot in two chunks applies when the final one arrives.
    a.send(agent_message::Message::Snapshot(v1::SnapshotChunk {
        snapshot_id: 7,
        chunk: 0,
        r#final: false,
        seq: 0,
        gateways: vec![report("a", true, "10.0.0.1")],
    }))
    .await;
    a.send(agent_message::Message::Snapshot(v1::SnapshotChunk {
        snapshot_id: 7,
        chunk: 1,
        r#final: true,
        seq: 5,
        gateways: vec![report("b", true, "10.0.0.2")],
    }))
    .await;
    a.expect_ack(5).await;
    eventually(&mut d, "b", |_| true).await;
    let names: Vec<_> = list(&mut d).await.into_iter().map(|g| g.name).collect();
    assert_eq!(names, ["a", "b"]);

    // Gap: 6 expected, 8 sent.
    a.upsert(8, report("a", false, "10.0.0.1")).await;
    let r = a.expect_resync().await;
    assert_eq!(r.reason, v1::ResyncReason::SequenceGap as i32);
    assert_eq!(r.message, "expected seq 6, got 8");
    // Further deltas are ignored until the next snapshot (no ack, no
    // second resync): the next message is the snapshot's ack.
    a.upsert(9, report("a", false, "10.0.0.1")).await;
    a.snapshot(8, 9, vec![report("a", true, "10.0.0.1")]).await;
    a.upsert(10, report("a", false, "10.0.0.1")).await;
    a.expect_ack(10).await;
    eventually(&mut d, "a", |g| programmed(g) == Some(false)).await;

    // Chunks out of order.
    a.send(agent_message::Message::Snapshot(v1::SnapshotChunk {
        snapshot_id: 9,
        chunk: 1,
        r#final: true,
        seq: 11,
        gateways: vec![],
    }))
    .await;
    let r = a.expect_resync().await;
    assert_eq!(r.reason, v1::ResyncReason::BadChunkOrder as i32);
    assert!(r.message.contains("expected chunk 0"), "{}", r.message);

    // A delta in the middle of a snapshot.
    a.send(agent_message::Message::Snapshot(v1::SnapshotChunk {
        snapshot_id: 10,
        chunk: 0,
        r#final: false,
        seq: 0,
        gateways: vec![],
    }))
    .await;
    a.upsert(12, report("a", true, "10.0.0.1")).await;
    let r = a.expect_resync().await;
    assert_eq!(r.reason, v1::ResyncReason::BadChunkOrder as i32);
    // The partial (empty) snapshot was never applied; snapshot 8 left "a".
    let names: Vec<_> = list(&mut d).await.into_iter().map(|g| g.name).collect();
    assert_eq!(names, ["a"]);
    // The rest of the abandoned snapshot asks for nothing more: the next
    // answer is the new snapshot's ack, not another resync request.
    a.send(agent_message::Message::Snapshot(v1::SnapshotChunk {
        snapshot_id: 10,
        chunk: 1,
        r#final: true,
        seq: 0,
        gateways: vec![],
    }))
    .await;
    a.snapshot(11, 13, vec![report("a", true, "10.0.0.1")])
        .await;
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn bad_messages_end_only_their_stream() {
    let hub = start(Duration::from_secs(60)).await;
    let mut d = dashboard(&hub).await;
    let mut good = Agent::connect(hub.ingest_addr, "good").await;
    good.snapshot(1, 0, vec![report("gw", true, "10.0.0.1")])
        .await;

    // Oversized: 5 MiB in one message.
    let mut big = Agent::connect(hub.ingest_addr, "big").await;
    let mut r = report("gw", true, "10.0.0.2");
    r.uid = "x".repeat(5 * 1024 * 1024);
    big.snapshot_no_ack(r).await;
    let status = big.expect_error().await;
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("too large"), "{status:?}");

    // Invalid: a condition message past the limit, named precisely.
    let mut bad = Agent::connect(hub.ingest_addr, "bad").await;
    let mut r = report("gw", true, "10.0.0.3");
    r.status.as_mut().unwrap().listeners[0].conditions[0].message = "m".repeat(40_000);
    bad.snapshot_no_ack(r).await;
    let status = bad.expect_error().await;
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(
        status.message(),
        "snapshot 1 chunk 0: gateways[0]: Gateway openshift-ingress/gw: status.listeners[0].conditions[0].message: 40000 characters long, the limit is 32768"
    );

    // Too many conditions.
    let mut many = Agent::connect(hub.ingest_addr, "many").await;
    let mut r = report("gw", true, "10.0.0.4");
    let c = r.status.as_ref().unwrap().conditions[0].clone();
    r.status.as_mut().unwrap().conditions = vec![c; 9];
    many.snapshot_no_ack(r).await;
    let status = many.expect_error().await;
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        status
            .message()
            .ends_with("status.conditions: 9 entries, the limit is 8"),
        "{status:?}"
    );

    // Hello first, once.
    let mut client = IngestClient::connect(format!("http://{}", hub.ingest_addr))
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel(4);
    tx.send(msg(agent_message::Message::Heartbeat(
        v1::Heartbeat::default(),
    )))
    .await
    .unwrap();
    let mut s = client
        .report(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let status = tokio::time::timeout(WAIT, s.next())
        .await
        .expect("the hub did not end a stream that starts without Hello in time")
        .expect("the hub closed a stream that starts without Hello without a status")
        .expect_err("the hub answered a stream that starts without Hello");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(status.message(), "the first message must be Hello");

    // The good stream never noticed.
    good.upsert(1, report("gw", false, "10.0.0.1")).await;
    good.expect_ack(1).await;
    let g = eventually(&mut d, "gw", |g| programmed(g) == Some(false)).await;
    assert_eq!(g.clusters, ["good"]);
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_newer_stream_supersedes_an_older_one() {
    let hub = start(Duration::from_secs(60)).await;
    let mut old = Agent::connect(hub.ingest_addr, "east").await;
    old.snapshot(1, 0, vec![report("gw", true, "10.0.0.1")])
        .await;
    let mut new = Agent::connect(hub.ingest_addr, "east").await;
    new.snapshot(1, 0, vec![report("gw", true, "10.0.0.1")])
        .await;
    // Ended as soon as the newer stream was accepted, not at its next report.
    let status = old.expect_error().await;
    assert_eq!(status.code(), tonic::Code::Aborted);
    assert!(status.message().contains("newer stream"), "{status:?}");
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_silent_cluster_goes_stale_and_recovers() {
    let hub = start(Duration::from_secs(1)).await;
    let mut d = dashboard(&hub).await;
    let mut east = Agent::connect(hub.ingest_addr, "east").await;
    // East's last message is sent after this instant.
    let started = tokio::time::Instant::now();
    east.snapshot(1, 0, vec![report("gw", true, "10.0.0.1")])
        .await;
    let mut west = Agent::connect(hub.ingest_addr, "west").await;
    west.snapshot(1, 0, vec![report("gw", true, "10.0.1.1")])
        .await;
    eventually(&mut d, "gw", |g| {
        g.clusters.len() == 2 && programmed(g) == Some(true)
    })
    .await;

    // West keeps heartbeating; east goes silent with its stream open.
    let beat = {
        let tx = west.tx.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                if tx
                    .send(msg(agent_message::Message::Heartbeat(
                        v1::Heartbeat::default(),
                    )))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        })
    };
    let g = eventually(&mut d, "gw", |g| programmed(g) == Some(false)).await;
    assert!(started.elapsed() >= Duration::from_secs(1));
    let c = condition_of(&g, "Programmed").unwrap();
    assert!(
        c.message
            .starts_with("east status is stale: no report since "),
        "{}",
        c.message
    );
    // Its addresses stay.
    assert_eq!(g.status.as_ref().unwrap().addresses.len(), 2);
    let clusters = d
        .list_clusters(v1::ListClustersRequest {})
        .await
        .unwrap()
        .into_inner()
        .clusters;
    let stale: Vec<_> = clusters
        .iter()
        .map(|c| (c.name.as_str(), c.stale))
        .collect();
    assert_eq!(stale, [("east", true), ("west", false)]);

    // A heartbeat makes it fresh again.
    east.heartbeat().await;
    eventually(&mut d, "gw", |g| programmed(g) == Some(true)).await;

    // A disconnected cluster goes stale too, and shows as not connected.
    drop(east);
    eventually(&mut d, "gw", |g| programmed(g) == Some(false)).await;
    let clusters = d
        .list_clusters(v1::ListClustersRequest {})
        .await
        .unwrap()
        .into_inner()
        .clusters;
    assert!(!clusters[0].connected && clusters[0].stale);
    beat.abort();
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_watch_sees_exactly_the_changes() {
    let hub = start(Duration::from_secs(60)).await;
    let mut d = dashboard(&hub).await;
    let mut a = Agent::connect(hub.ingest_addr, "east").await;
    a.snapshot(1, 0, vec![report("one", true, "10.0.0.1")])
        .await;
    eventually(&mut d, "one", |_| true).await;

    let mut watch = d
        .watch_gateways(v1::WatchGatewaysRequest::default())
        .await
        .unwrap()
        .into_inner();
    let mut next = async || {
        tokio::time::timeout(WAIT, watch.next())
            .await
            .expect("watch message in time")
            .unwrap()
            .unwrap()
    };
    let first = next().await;
    assert!(first.snapshot);
    assert_eq!(first.upserted.len(), 1);
    assert_eq!(first.upserted[0].name, "one");

    // No-op re-reports (same status in a delta and in a snapshot) change
    // nothing; then one real change.
    a.upsert(1, report("one", true, "10.0.0.1")).await;
    a.expect_ack(1).await;
    a.snapshot(2, 2, vec![report("one", true, "10.0.0.1")])
        .await;
    a.upsert(3, report("one", false, "10.0.0.1")).await;
    a.expect_ack(3).await;
    let m = next().await;
    assert!(!m.snapshot);
    assert_eq!(m.upserted.len(), 1);
    assert_eq!(programmed(&m.upserted[0]), Some(false));
    assert!(m.upserted[0].revision > first.upserted[0].revision);

    // A new Gateway, then a removal.
    a.upsert(4, report("two", true, "10.0.0.2")).await;
    a.expect_ack(4).await;
    let m = next().await;
    let names: Vec<_> = m.upserted.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["two"]);
    assert!(m.deleted.is_empty());
    a.delete(5, "openshift-ingress", "one").await;
    a.expect_ack(5).await;
    let m = next().await;
    assert!(m.upserted.is_empty());
    assert_eq!(m.deleted.len(), 1);
    assert_eq!(m.deleted[0].name, "one");

    // Nothing else is pending.
    a.heartbeat().await;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), watch.next())
            .await
            .is_err(),
        "unexpected watch message"
    );

    // Shutdown ends the watch with UNAVAILABLE.
    hub.shutdown().await.unwrap();
    let end = tokio::time::timeout(WAIT, watch.next()).await.unwrap();
    if let Some(Err(status)) = end {
        assert_eq!(status.code(), tonic::Code::Unavailable);
    }
}

#[tokio::test]
async fn shutdown_ends_agent_streams_with_unavailable() {
    let hub = start(Duration::from_secs(60)).await;
    let mut a = Agent::connect(hub.ingest_addr, "east").await;
    a.snapshot(1, 0, vec![]).await;
    let shutdown = tokio::spawn(hub.shutdown());
    let status = a.expect_error().await;
    assert_eq!(status.code(), tonic::Code::Unavailable);
    shutdown.await.unwrap().unwrap();
}

#[tokio::test]
async fn health_and_reflection_answer_on_both_listeners() {
    use tonic_health::pb::{
        HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
    };
    use tonic_reflection::pb::v1::{
        ServerReflectionRequest, ServerReflectionResponse,
        server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };
    /// The next reflection answer, `what` named when it does not come.
    async fn reflected(
        responses: &mut tonic::Streaming<ServerReflectionResponse>,
        what: &str,
    ) -> Option<MessageResponse> {
        tokio::time::timeout(WAIT, responses.next())
            .await
            .unwrap_or_else(|_| panic!("reflection: {what} not sent in time"))
            .unwrap_or_else(|| panic!("reflection: the stream closed before {what}"))
            .unwrap_or_else(|status| panic!("reflection: {what}: {status:?}"))
            .message_response
    }

    let hub = start(Duration::from_secs(60)).await;
    for (addr, service) in [
        (hub.ingest_addr, "gwhub.v1.Ingest"),
        (hub.dashboard_addr, "gwhub.v1.Dashboard"),
    ] {
        let url = format!("http://{addr}");
        let channel = tonic::transport::Endpoint::from_shared(url)
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut health = HealthClient::new(channel.clone());
        for name in ["", service] {
            let s = health
                .check(HealthCheckRequest {
                    service: name.into(),
                })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(
                s.status,
                ServingStatus::Serving as i32,
                "{name:?} on {addr}"
            );
        }

        let mut reflection = ServerReflectionClient::new(channel);
        let requests = tokio_stream::iter([
            ServerReflectionRequest {
                host: String::new(),
                message_request: Some(MessageRequest::ListServices(String::new())),
            },
            ServerReflectionRequest {
                host: String::new(),
                message_request: Some(MessageRequest::FileContainingSymbol(
                    "gwhub.v1.Dashboard".into(),
                )),
            },
        ]);
        let mut responses = reflection
            .server_reflection_info(requests)
            .await
            .unwrap()
            .into_inner();
        let Some(MessageResponse::ListServicesResponse(list)) =
            reflected(&mut responses, "the service list").await
        else {
            panic!("expected a service list");
        };
        let names: Vec<_> = list.service.iter().map(|s| s.name.as_str()).collect();
        assert!(names.contains(&service), "{names:?}");
        assert!(names.contains(&"grpc.health.v1.Health"), "{names:?}");
        let Some(MessageResponse::FileDescriptorResponse(files)) =
            reflected(&mut responses, "the file descriptors").await
        else {
            panic!("expected file descriptors");
        };
        assert!(!files.file_descriptor_proto.is_empty());
    }
    hub.shutdown().await.unwrap();
}

/// `gwhub serve` with the given flags after the listeners: it must fail,
/// and its stderr is returned.
fn serve_fails(flags: &[&str]) -> String {
    let out = std::process::Command::new(gwhub_test_kit::workspace_bin::workspace_binary(
        "gwhub",
        "gwhub",
        "GWHUB_BIN",
    ))
    .args(["serve", "--listen", "127.0.0.1:0"])
    .args(["--dashboard-listen", "127.0.0.1:0"])
    .args(flags)
    .output()
    .unwrap();
    assert!(!out.status.success(), "serve {flags:?} started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn serve_refuses_to_start_without_tls_or_insecure() {
    let err = serve_fails(&["--no-kube"]);
    assert!(err.contains("refusing to start: no TLS material"), "{err}");
    assert!(err.contains("--insecure"), "{err}");

    let err = serve_fails(&["--insecure", "--kubeconfig", "/nonexistent/kubeconfig"]);
    assert!(err.contains("/nonexistent/kubeconfig"), "{err}");

    let err = serve_fails(&["--no-kube", "--insecure", "--stale-after", "soon"]);
    assert!(err.contains("--stale-after"), "{err}");
    // Far too long would overflow the staleness timers.
    let err = serve_fails(&["--no-kube", "--insecure", "--stale-after", "300000000000y"]);
    assert!(err.contains("must be at most a year"), "{err}");

    let err = serve_fails(&["--insecure", "--lease-duration", "1500ms"]);
    assert!(err.contains("--lease-duration"), "{err}");
    assert!(err.contains("whole seconds, at least 3s"), "{err}");
    let err = serve_fails(&["--no-kube", "--insecure", "--lease-duration", "5s"]);
    assert!(err.contains("cannot be used with"), "{err}");

    // Status shards need the election's Leases, and a sane count.
    let err = serve_fails(&["--insecure", "--no-leader-election", "--status-shards", "8"]);
    assert!(err.contains("cannot be used with"), "{err}");
    let err = serve_fails(&["--insecure", "--status-shards", "5000"]);
    assert!(err.contains("--status-shards"), "{err}");
}

/// The stale-after of the hubs the `gwhubctl` tests start: their fake
/// agents do not heartbeat, and the first `gwhubctl` call may build the
/// binary (no `GWHUB_BIN_DIR`), which on a loaded machine took longer
/// than a minute and left every cluster stale; staleness is not what they
/// test.
const GWHUBCTL_STALE_AFTER: Duration = Duration::from_secs(3600);

async fn gwhubctl(hub: &Hub, args: &[&str]) -> String {
    gwhub_test_kit::workspace_bin::gwhubctl(hub.dashboard_addr, args).await
}

#[tokio::test]
async fn gwhubctl_reads_the_dashboard() {
    let hub = start(GWHUBCTL_STALE_AFTER).await;
    let mut d = dashboard(&hub).await;
    let mut east = Agent::connect(hub.ingest_addr, "east").await;
    east.snapshot(1, 0, vec![report("gw", true, "10.0.0.1")])
        .await;
    let mut west = Agent::connect(hub.ingest_addr, "west").await;
    west.snapshot(1, 0, vec![report("gw", false, "10.0.1.1")])
        .await;
    eventually(&mut d, "gw", |g| g.clusters.len() == 2).await;

    let table = gwhubctl(&hub, &["get", "gateways"]).await;
    let lines: Vec<_> = table.lines().collect();
    assert_eq!(
        lines[0],
        "NAMESPACE           NAME   CLUSTERS   ACCEPTED   PROGRAMMED   AGGREGATED"
    );
    assert_eq!(
        lines[1],
        "openshift-ingress   gw     2          True       False        Aggregated"
    );
    let wide = gwhubctl(&hub, &["get", "gateways", "-o", "wide"]).await;
    assert!(wide.contains("east,west"), "{wide}");

    let json = gwhubctl(&hub, &["get", "clusters", "-o", "json"]).await;
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["kind"], "List");
    assert_eq!(v["items"][0]["name"], "east");
    assert_eq!(v["items"][1]["gatewayCount"], 1);
    let yaml = gwhubctl(&hub, &["get", "gateways", "-o", "yaml"]).await;
    assert!(yaml.contains("value: east/10.0.0.1"), "{yaml}");

    let text = gwhubctl(&hub, &["describe", "gateway", "openshift-ingress/gw"]).await;
    assert!(text.contains("Clusters:   east, west"), "{text}");
    assert!(text.contains("  west (fresh, last report "), "{text}");
    assert!(text.contains("west Address pending"), "{text}");

    // -o json|yaml on every command, as kubectl has it.
    let args = ["describe", "gateway", "openshift-ingress/gw", "-o", "json"];
    let v: serde_json::Value = serde_json::from_str(&gwhubctl(&hub, &args).await).unwrap();
    assert_eq!(v["kind"], "Gateway");
    assert_eq!(v["metadata"]["name"], "gw");
    assert_eq!(v["gwhub"]["clusters"], serde_json::json!(["east", "west"]));
    assert_eq!(v["gwhub"]["reports"][1]["cluster"], "west");
    assert_eq!(v["gwhub"]["reports"][1]["stale"], false);
    let args = ["describe", "gateway", "openshift-ingress/gw", "-o", "yaml"];
    let yaml = gwhubctl(&hub, &args).await;
    assert!(
        yaml.contains("kind: Gateway") && yaml.contains("reports:"),
        "{yaml}"
    );
    let mut watch = std::process::Command::new(gwhub_test_kit::workspace_bin::workspace_binary(
        "gwhub",
        "gwhubctl",
        "GWHUB_CTL_BIN",
    ))
    .args(["--server", &format!("http://{}", hub.dashboard_addr)])
    .args(["watch", "-o", "json"])
    .stdout(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let stdout = watch.stdout.take().unwrap();
    let first = tokio::time::timeout(
        Duration::from_secs(20),
        tokio::task::spawn_blocking(move || {
            serde_json::Deserializer::from_reader(stdout)
                .into_iter::<serde_json::Value>()
                .next()
        }),
    )
    .await
    .expect("gwhubctl watch -o json printed an event")
    .unwrap()
    .expect("an event")
    .expect("valid JSON");
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(first["type"], "ADDED", "{first}");
    assert_eq!(first["object"]["metadata"]["name"], "gw", "{first}");
    hub.shutdown().await.unwrap();
}

/// An unreachable hub is named with the cause, not tonic's bare
/// "transport error".
#[test]
fn gwhubctl_names_why_the_hub_is_unreachable() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = std::process::Command::new(gwhub_test_kit::workspace_bin::workspace_binary(
        "gwhub",
        "gwhubctl",
        "GWHUB_CTL_BIN",
    ))
    .args([
        "--server",
        &format!("http://127.0.0.1:{port}"),
        "get",
        "gateways",
    ])
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot reach the hub at") && err.contains("Connection refused"),
        "{err}"
    );
}

/// A large fleet's Dashboard answers exceed gRPC's default 4 MiB message
/// limit (1,000 clusters x 100 Gateways: ~47 MB); gwhubctl must still read them.
#[tokio::test]
async fn gwhubctl_reads_answers_larger_than_4_mib() {
    let hub = start(GWHUBCTL_STALE_AFTER).await;
    let mut east = Agent::connect(hub.ingest_addr, "east").await;
    east.snapshot(1, 0, vec![]).await;
    let long = "x".repeat(30_000);
    let count = 160;
    for i in 0..count {
        let mut r = report(&format!("gw-{i:03}"), false, "10.0.0.1");
        let status = r.status.as_mut().unwrap();
        status.conditions[1].message = long.clone();
        east.upsert(i + 1, r).await;
        east.expect_ack(i + 1).await;
    }
    let mut big = dashboard(&hub).await.max_decoding_message_size(64 << 20);
    let deadline = tokio::time::Instant::now() + WAIT;
    while list(&mut big).await.len() < count as usize {
        assert!(tokio::time::Instant::now() < deadline, "not all aggregated");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The premise: a client with the default limit cannot read it.
    let err = dashboard(&hub)
        .await
        .list_gateways(v1::ListGatewaysRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::OutOfRange, "{err}");

    let table = gwhubctl(&hub, &["get", "gateways"]).await;
    assert_eq!(
        table.lines().count(),
        1 + count as usize,
        "{}",
        &table[..200]
    );
    let yaml = gwhubctl(&hub, &["get", "gateways", "-o", "yaml"]).await;
    assert!(yaml.len() > 4 << 20, "{}", yaml.len());
    hub.shutdown().await.unwrap();
}

// ---- per-report and per-stream limits -------------------------------------

/// Opens a stream whose Hello names `cluster` and returns how it ended.
async fn hello_refused(addr: SocketAddr, cluster: &str) -> tonic::Status {
    let mut client = IngestClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel(4);
    tx.send(msg(agent_message::Message::Hello(hello(cluster))))
        .await
        .unwrap();
    let mut s = client
        .report(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    tokio::time::timeout(WAIT, s.next())
        .await
        .expect("hub answered in time")
        .expect("a status")
        .expect_err("Hello refused")
}

fn small_report(i: usize) -> v1::GatewayReport {
    v1::GatewayReport {
        namespace: "ns".into(),
        name: format!("g{i}"),
        ..Default::default()
    }
}

#[tokio::test]
async fn bad_cluster_names_are_refused_with_the_rule() {
    let hub = start(Duration::from_secs(60)).await;
    let s = hello_refused(hub.ingest_addr, "").await;
    assert_eq!(s.code(), tonic::Code::InvalidArgument);
    assert_eq!(s.message(), "Hello.cluster: must not be empty");
    let s = hello_refused(hub.ingest_addr, &"c".repeat(254)).await;
    assert_eq!(s.code(), tonic::Code::InvalidArgument);
    assert_eq!(
        s.message(),
        "Hello.cluster: 254 characters long, the limit is 253"
    );
    let s = hello_refused(hub.ingest_addr, "east west").await;
    assert_eq!(s.code(), tonic::Code::InvalidArgument);
    assert_eq!(
        s.message(),
        "Hello.cluster: \"east west\" has characters other than lowercase letters, digits, '.', '_' and '-'"
    );
    // Two clusters never differ only by case; `.` and `..` name nothing.
    for (name, why) in [
        ("EAST", "\"EAST\" has uppercase letters"),
        ("..", "\"..\" is not a cluster name"),
        (".", "\".\" is not a cluster name"),
    ] {
        let s = hello_refused(hub.ingest_addr, name).await;
        assert_eq!(s.code(), tonic::Code::InvalidArgument);
        assert!(
            s.message().starts_with(&format!("Hello.cluster: {why}")),
            "{}",
            s.message()
        );
    }
    assert!(hub.index.clusters().is_empty());
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn gateways_per_cluster_are_limited_in_snapshots_and_deltas() {
    use gwhub_model::limits::MAX_GATEWAYS;
    let hub = start(Duration::from_secs(60)).await;

    // One snapshot past the limit.
    let mut over = Agent::connect(hub.ingest_addr, "over").await;
    over.send(agent_message::Message::Snapshot(v1::SnapshotChunk {
        snapshot_id: 1,
        chunk: 0,
        r#final: true,
        seq: 0,
        gateways: (0..=MAX_GATEWAYS).map(small_report).collect(),
    }))
    .await;
    let s = over.expect_error().await;
    assert_eq!(s.code(), tonic::Code::ResourceExhausted, "{s:?}");
    assert_eq!(
        s.message(),
        "snapshot 1: more than 10000 Gateways (got 10001 by chunk 0)"
    );

    // A full snapshot, then deltas: replacing and deleting is fine, growing
    // past the limit is not.
    let mut full = Agent::connect(hub.ingest_addr, "full").await;
    full.snapshot(1, 0, (0..MAX_GATEWAYS).map(small_report).collect())
        .await;
    full.upsert(1, small_report(7)).await;
    full.expect_ack(1).await;
    full.send(agent_message::Message::Delta(v1::Delta {
        seq: 2,
        changes: vec![
            v1::Change {
                change: Some(change::Change::Delete(v1::GatewayRef {
                    namespace: "ns".into(),
                    name: "g0".into(),
                })),
            },
            v1::Change {
                change: Some(change::Change::Upsert(small_report(MAX_GATEWAYS))),
            },
        ],
        ..Default::default()
    }))
    .await;
    full.expect_ack(2).await;
    full.upsert(3, small_report(MAX_GATEWAYS + 1)).await;
    let s = full.expect_error().await;
    assert_eq!(s.code(), tonic::Code::ResourceExhausted, "{s:?}");
    assert_eq!(
        s.message(),
        "delta 3: cluster \"full\" would report 10001 Gateways after this delta, more than the limit of 10000"
    );
    let summary = hub
        .index
        .clusters()
        .into_iter()
        .find(|c| c.name == "full")
        .unwrap();
    assert_eq!(summary.gateway_count, MAX_GATEWAYS);
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_stream_over_its_message_rate_is_ended() {
    let hub = Hub::start(HubConfig {
        max_messages_per_second: 5,
        ..HubConfig::loopback(Duration::from_secs(60))
    })
    .await
    .unwrap();
    let mut d = dashboard(&hub).await;
    let mut polite = Agent::connect(hub.ingest_addr, "polite").await;
    polite
        .snapshot(1, 0, vec![report("gw", true, "10.0.0.1")])
        .await;

    let mut flood = Agent::connect(hub.ingest_addr, "flood").await;
    for _ in 0..50 {
        flood.heartbeat().await;
    }
    let s = flood.expect_error().await;
    assert_eq!(s.code(), tonic::Code::ResourceExhausted, "{s:?}");
    assert_eq!(
        s.message(),
        "rate limit: more than 5 messages per second on this stream; slow down (the hub's --max-messages-per-second)"
    );

    // The stream under its rate never noticed.
    polite.upsert(1, report("gw", false, "10.0.0.1")).await;
    polite.expect_ack(1).await;
    let g = eventually(&mut d, "gw", |g| programmed(g) == Some(false)).await;
    assert_eq!(g.clusters, ["polite"]);
    hub.shutdown().await.unwrap();
}

/// `GET /metrics` over plain TCP; `None` until something answers.
async fn scrape(addr: SocketAddr) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut sock = tokio::net::TcpStream::connect(addr).await.ok()?;
    sock.write_all(b"GET /metrics HTTP/1.1\r\nhost: hub\r\n\r\n")
        .await
        .ok()?;
    let mut out = String::new();
    sock.read_to_string(&mut out).await.ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    Some(body.to_owned())
}

/// Every non-comment line is `name{labels} value` with a numeric value;
/// returns `(series, value)` pairs.
fn parse_exposition(text: &str) -> Vec<(String, f64)> {
    let series = regex::Regex::new(
        r#"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*\})? (\S+)$"#,
    )
    .unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let c = series
                .captures(l)
                .unwrap_or_else(|| panic!("not a sample line: {l:?}"));
            let value: f64 = c[3].parse().unwrap_or_else(|_| panic!("bad value: {l:?}"));
            let name = format!("{}{}", &c[1], c.get(2).map_or("", |m| m.as_str()));
            (name, value)
        })
        .collect()
}

/// Scrapes until `check` holds on the parsed samples.
async fn scrape_until(
    addr: SocketAddr,
    what: &str,
    check: impl Fn(&[(String, f64)]) -> bool,
) -> Vec<(String, f64)> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let text = scrape(addr).await;
        if let Some(text) = &text {
            let samples = parse_exposition(text);
            if check(&samples) {
                return samples;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} never held; last scrape:\n{}",
            text.unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn sample(samples: &[(String, f64)], series: &str) -> Option<f64> {
    samples.iter().find(|(s, _)| s == series).map(|(_, v)| *v)
}

#[tokio::test]
async fn serve_metrics_listen_exposes_cluster_gauges() {
    let (ingest, dashboard, metrics) = (free_addr(), free_addr(), free_addr());
    let mut child = tokio::process::Command::new(gwhub_test_kit::workspace_bin::workspace_binary(
        "gwhub",
        "gwhub",
        "GWHUB_BIN",
    ))
    .args(["serve", "--no-kube", "--insecure"])
    .args(["--listen", &ingest.to_string()])
    .args(["--dashboard-listen", &dashboard.to_string()])
    .args(["--metrics-listen", &metrics.to_string()])
    .stderr(std::process::Stdio::null())
    .kill_on_drop(true)
    .spawn()
    .unwrap();

    // Up, with no cluster yet: the families are declared, no kube counters
    // (the budgets' counters are there).
    let samples = scrape_until(metrics, "hub up", |s| {
        sample(s, "gwhub_hub_gateways") == Some(0.0)
    })
    .await;
    assert!(
        samples
            .iter()
            .all(|(s, _)| !s.contains("_write") && !s.starts_with("gwhub_leader")),
        "{samples:?}"
    );
    assert_eq!(
        sample(&samples, "gwhub_budget_refused_cluster_report_bytes_total"),
        Some(0.0)
    );
    assert!(sample(&samples, r#"gwhub_connections_open{listener="ingest"}"#).is_some());
    // --no-kube: ready as soon as it serves; live.
    for path in ["/healthz", "/readyz"] {
        assert_eq!(
            gwhub_test_kit::procs::http_status(metrics.port(), path).await,
            200,
            "{path}"
        );
    }

    let mut east = Agent::connect(ingest, "east").await;
    east.snapshot(
        1,
        1,
        vec![
            report("gw-a", true, "10.0.0.1"),
            report("gw-b", true, "10.0.0.2"),
        ],
    )
    .await;
    let mut west = Agent::connect(ingest, "west").await;
    west.snapshot(1, 1, vec![report("gw-a", false, "10.0.1.1")])
        .await;
    scrape_until(metrics, "both clusters reported", |s| {
        sample(s, r#"gwhub_cluster_connected{cluster="east"}"#) == Some(1.0)
            && sample(s, r#"gwhub_cluster_connected{cluster="west"}"#) == Some(1.0)
            && sample(s, r#"gwhub_cluster_stale{cluster="east"}"#) == Some(0.0)
            && sample(s, r#"gwhub_cluster_gateways{cluster="east"}"#) == Some(2.0)
            && sample(s, r#"gwhub_cluster_gateways{cluster="west"}"#) == Some(1.0)
            && sample(s, "gwhub_hub_gateways") == Some(2.0)
    })
    .await;

    // West's stream ends: it stays known but is no longer connected.
    drop(west);
    scrape_until(metrics, "west disconnected", |s| {
        sample(s, r#"gwhub_cluster_connected{cluster="west"}"#) == Some(0.0)
            && sample(s, r#"gwhub_cluster_connected{cluster="east"}"#) == Some(1.0)
    })
    .await;
    drop(east);
    child.kill().await.unwrap();
}

// ---- paging, filters, history ---------------------------------------------

fn in_namespace(namespace: &str, mut r: v1::GatewayReport) -> v1::GatewayReport {
    r.namespace = namespace.into();
    r
}

fn names(gateways: &[v1::AggregatedGateway]) -> Vec<String> {
    gateways
        .iter()
        .map(|g| format!("{}/{}", g.namespace, g.name))
        .collect()
}

async fn list_with(
    d: &mut DashboardClient<Channel>,
    page_size: u32,
    page_token: &str,
    filter: Option<v1::GatewayFilter>,
) -> Result<v1::ListGatewaysResponse, tonic::Status> {
    d.list_gateways(v1::ListGatewaysRequest {
        page_size,
        page_token: page_token.into(),
        filter,
    })
    .await
    .map(|r| r.into_inner())
}

fn filter(namespace: &str, cluster: &str, not_ready: bool) -> Option<v1::GatewayFilter> {
    Some(v1::GatewayFilter {
        namespace: namespace.into(),
        cluster: cluster.into(),
        not_ready,
    })
}

/// east: a (ready), b (not programmed), other/x; west: b, c.
async fn small_fleet(hub: &Hub) -> (Agent, Agent) {
    let mut east = Agent::connect(hub.ingest_addr, "east").await;
    east.snapshot(
        1,
        0,
        vec![
            report("a", true, "10.0.0.1"),
            report("b", false, "10.0.0.2"),
            in_namespace("other", report("x", true, "10.0.0.3")),
        ],
    )
    .await;
    let mut west = Agent::connect(hub.ingest_addr, "west").await;
    west.snapshot(
        1,
        0,
        vec![report("b", true, "10.1.0.2"), report("c", true, "10.1.0.3")],
    )
    .await;
    let mut d = dashboard(hub).await;
    eventually(&mut d, "c", |_| true).await;
    eventually(&mut d, "b", |g| g.clusters.len() == 2).await;
    (east, west)
}

#[tokio::test]
async fn list_gateways_pages_and_filters() {
    let hub = start(Duration::from_secs(60)).await;
    let _agents = small_fleet(&hub).await;
    let mut d = dashboard(&hub).await;
    let all = [
        "openshift-ingress/a",
        "openshift-ingress/b",
        "openshift-ingress/c",
        "other/x",
    ];
    // Without paging: everything in one answer, as before.
    let r = list_with(&mut d, 0, "", None).await.unwrap();
    assert_eq!(names(&r.gateways), all);
    assert_eq!(r.next_page_token, "");
    assert_eq!(r.total_size, 4);

    // Pages of 3, then 1; together the whole list in order.
    let p1 = list_with(&mut d, 3, "", None).await.unwrap();
    assert_eq!(names(&p1.gateways), all[..3]);
    assert!(!p1.next_page_token.is_empty());
    assert_eq!(p1.total_size, 4);
    let p2 = list_with(&mut d, 3, &p1.next_page_token, None)
        .await
        .unwrap();
    assert_eq!(names(&p2.gateways), all[3..]);
    assert_eq!(p2.next_page_token, "");
    // A page size above the maximum is lowered, not refused.
    let big = list_with(&mut d, 1_000_000, "", None).await.unwrap();
    assert_eq!(big.gateways.len(), 4);

    // A token the hub did not make is refused, naming it.
    let e = list_with(&mut d, 3, "not-a-token", None).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("\"not-a-token\""), "{}", e.message());
    assert!(e.message().contains("page_token"), "{}", e.message());

    // Filters, alone and together; paging applies to the filtered list.
    for (f, want) in [
        (filter("other", "", false), &["other/x"][..]),
        (
            filter("", "west", false),
            &["openshift-ingress/b", "openshift-ingress/c"][..],
        ),
        (filter("", "", true), &["openshift-ingress/b"][..]),
        (filter("openshift-ingress", "east", false), &all[..2]),
        (filter("other", "west", false), &[][..]),
        (filter("", "nowhere", false), &[][..]),
    ] {
        let r = list_with(&mut d, 0, "", f.clone()).await.unwrap();
        assert_eq!(names(&r.gateways), want, "{f:?}");
        assert_eq!(r.total_size as usize, want.len(), "{f:?}");
    }
    let p = list_with(&mut d, 1, "", filter("", "west", false))
        .await
        .unwrap();
    assert_eq!(names(&p.gateways), ["openshift-ingress/b"]);
    let p = list_with(&mut d, 1, &p.next_page_token, filter("", "west", false))
        .await
        .unwrap();
    assert_eq!(names(&p.gateways), ["openshift-ingress/c"]);
    assert_eq!(p.next_page_token, "");
}

#[tokio::test]
async fn a_filtered_watch_sees_gateways_enter_and_leave() {
    let hub = start(Duration::from_secs(60)).await;
    let (mut east, _west) = small_fleet(&hub).await;
    let mut d = dashboard(&hub).await;
    let mut watch = d
        .watch_gateways(v1::WatchGatewaysRequest {
            filter: filter("openshift-ingress", "", true),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut next = async || {
        tokio::time::timeout(WAIT, watch.next())
            .await
            .expect("watch message in time")
            .unwrap()
            .unwrap()
    };
    let first = next().await;
    assert!(first.snapshot);
    assert_eq!(names(&first.upserted), ["openshift-ingress/b"]);

    // a turns not ready: it enters the view.
    east.upsert(1, report("a", false, "10.0.0.1")).await;
    east.expect_ack(1).await;
    let m = next().await;
    assert_eq!(names(&m.upserted), ["openshift-ingress/a"]);
    assert!(m.deleted.is_empty());
    // b turns ready: it leaves the view.
    east.upsert(2, report("b", true, "10.0.0.2")).await;
    east.expect_ack(2).await;
    let m = next().await;
    assert!(m.upserted.is_empty(), "{:?}", names(&m.upserted));
    assert_eq!(m.deleted.len(), 1);
    assert_eq!(m.deleted[0].name, "b");
    // A change outside the filter (namespace other) sends nothing.
    east.upsert(3, in_namespace("other", report("x", false, "10.0.0.3")))
        .await;
    east.expect_ack(3).await;
    east.heartbeat().await;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), watch.next())
            .await
            .is_err(),
        "unexpected watch message"
    );
}

#[tokio::test]
async fn history_keeps_the_last_transitions() {
    let hub = start(Duration::from_secs(60)).await;
    let (mut east, _west) = small_fleet(&hub).await;
    let mut d = dashboard(&hub).await;
    // a: Programmed True -> False -> True on east.
    east.upsert(1, report("a", false, "10.0.0.1")).await;
    east.expect_ack(1).await;
    eventually(&mut d, "a", |g| programmed(g) == Some(false)).await;
    east.upsert(2, report("a", true, "10.0.0.1")).await;
    east.expect_ack(2).await;
    eventually(&mut d, "a", |g| programmed(g) == Some(true)).await;

    let history = |limit| v1::GetGatewayHistoryRequest {
        namespace: "openshift-ingress".into(),
        name: "a".into(),
        limit,
    };
    let r = d
        .get_gateway_history(history(0))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.capacity, 64);
    let (t, f, none) = (
        v1::ConditionStatus::True as i32,
        v1::ConditionStatus::False as i32,
        v1::ConditionStatus::Unspecified as i32,
    );
    let programmed_changes: Vec<(&str, i32, i32)> = r
        .transitions
        .iter()
        .filter(|x| x.condition_type == "Programmed")
        .map(|x| (x.cluster.as_str(), x.previous_status, x.status))
        .collect();
    assert_eq!(
        programmed_changes,
        [
            ("", none, t),
            ("east", none, t),
            ("", t, f),
            ("east", t, f),
            ("", f, t),
            ("east", f, t),
        ],
        "{:#?}",
        r.transitions
    );
    let down = r
        .transitions
        .iter()
        .find(|x| x.cluster == "east" && x.status == f)
        .unwrap();
    assert_eq!(down.reason, "NotOk");
    assert_eq!(down.previous_reason, "Ok");
    assert_eq!(down.message, "Address pending");
    assert!(down.time_millis > 1_700_000_000_000, "{}", down.time_millis);
    assert!(
        r.transitions
            .windows(2)
            .all(|w| w[0].time_millis <= w[1].time_millis)
    );

    let last = d
        .get_gateway_history(history(2))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(last.transitions, r.transitions[r.transitions.len() - 2..]);

    let e = d
        .get_gateway_history(v1::GetGatewayHistoryRequest {
            namespace: "openshift-ingress".into(),
            name: "nope".into(),
            limit: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);
    assert!(
        e.message().contains("openshift-ingress/nope"),
        "{}",
        e.message()
    );
}

#[tokio::test]
async fn gwhubctl_filters_pages_and_shows_history() {
    let hub = start(GWHUBCTL_STALE_AFTER).await;
    let _agents = small_fleet(&hub).await;
    let out = gwhubctl(&hub, &["get", "gateways", "--not-ready"]).await;
    let rows: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{out}");
    assert!(rows[0].starts_with("openshift-ingress   b "), "{out}");
    // Pages of one: every Gateway of west, nothing twice.
    let out = gwhubctl(
        &hub,
        &[
            "get",
            "gateways",
            "--cluster",
            "west",
            "--page-size",
            "1",
            "-o",
            "json",
        ],
    )
    .await;
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let got: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(got, ["b", "c"], "{out}");
    let out = gwhubctl(&hub, &["get", "gateways", "-n", "other"]).await;
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.contains("other "), "{out}");

    let out = gwhubctl(&hub, &["history", "openshift-ingress/b"]).await;
    let header = out.lines().next().unwrap();
    for col in [
        "TIME",
        "CLUSTER",
        "CONDITION",
        "STATUS",
        "REASON",
        "MESSAGE",
    ] {
        assert!(header.contains(col), "{out}");
    }
    assert!(
        out.lines()
            .any(|l| l.contains("east") && l.contains("Programmed") && l.contains("- -> False")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.contains("(hub)") && l.contains("Programmed")),
        "{out}"
    );
    let out = gwhubctl(
        &hub,
        &[
            "history",
            "openshift-ingress/b",
            "--limit",
            "1",
            "-o",
            "yaml",
        ],
    )
    .await;
    assert_eq!(out.matches("previousStatus:").count(), 1, "{out}");
}

// ---- the web page's HTTP API ----------------------------------------------

/// A plain HTTP/1.1 GET over loopback: the status code and the text read
/// until the connection closes or `until` shows up in it.
async fn http_get(addr: SocketAddr, path: &str, method: &str, until: &str) -> (u16, String) {
    http_get_as(addr, "Host: localhost\r\n", path, method, until).await
}

/// [`http_get`] with `host` as the request's Host header line(s) (or
/// none: "").
async fn http_get_as(
    addr: SocketAddr,
    host: &str,
    path: &str,
    method: &str,
    until: &str,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("{method} {path} HTTP/1.1\r\n{host}Connection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut text = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = tokio::time::timeout(WAIT, s.read(&mut buf))
            .await
            .expect("answer in time")
            .unwrap();
        if n == 0 {
            break;
        }
        text.extend_from_slice(&buf[..n]);
        if !until.is_empty() && String::from_utf8_lossy(&text).contains(until) {
            break;
        }
    }
    let text = String::from_utf8_lossy(&text).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text}"));
    (code, text)
}

fn body_json(text: &str) -> serde_json::Value {
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[tokio::test]
async fn the_web_listener_serves_the_page_and_the_fleet() {
    let hub = Hub::start(HubConfig {
        web_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..HubConfig::loopback(Duration::from_secs(60))
    })
    .await
    .unwrap();
    let web = hub.web_addr.expect("web listener");
    let _agents = small_fleet(&hub).await;

    let (code, page) = http_get(web, "/", "GET", "").await;
    assert_eq!(code, 200, "{page}");
    assert!(
        page.contains("text/html") && page.contains("<script src=\"app.js\""),
        "{page}"
    );
    assert!(
        page.contains("content-security-policy: default-src 'none'"),
        "{page}"
    );
    for asset in ["/app.js", "/style.css"] {
        let (code, text) = http_get(web, asset, "GET", "").await;
        assert_eq!(code, 200, "{asset}: {text}");
    }

    let (code, text) = http_get(web, "/api/fleet", "GET", "").await;
    assert_eq!(code, 200, "{text}");
    let fleet = body_json(&text);
    let clusters: Vec<&str> = fleet["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(clusters, ["east", "west"]);
    let b = fleet["gateways"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "b")
        .unwrap();
    assert_eq!(b["notReady"], true);
    assert_eq!(
        b["cells"],
        serde_json::json!([
            {"cluster": "east", "health": "not-ready", "stale": false},
            {"cluster": "west", "health": "ready", "stale": false},
        ])
    );

    // The same filter as the Dashboard API.
    let (_, text) = http_get(web, "/api/fleet?cluster=west&not_ready=1", "GET", "").await;
    let names: Vec<String> = body_json(&text)["gateways"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["b"]);

    // One Gateway with each cluster's own report and its history.
    let (code, text) = http_get(
        web,
        "/api/gateway?namespace=openshift-ingress&name=b",
        "GET",
        "",
    )
    .await;
    assert_eq!(code, 200, "{text}");
    let g = body_json(&text);
    let reports: Vec<&str> = g["reports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cluster"].as_str().unwrap())
        .collect();
    assert_eq!(reports, ["east", "west"]);
    assert!(!g["history"].as_array().unwrap().is_empty(), "{g}");
    let conditions = g["gateway"]["status"]["conditions"].as_array().unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c["type"] == "Programmed" && c["status"] == "False"),
        "{g}"
    );
    assert_eq!(g["gateway"]["cells"], b["cells"]);
    let (code, _) = http_get(
        web,
        "/api/gateway?namespace=openshift-ingress&name=nope",
        "GET",
        "",
    )
    .await;
    assert_eq!(code, 404);

    // Server-Sent Events: the snapshot first, filtered.
    let (code, text) = http_get(web, "/api/events?namespace=other", "GET", "\n\n").await;
    assert_eq!(code, 200, "{text}");
    assert!(text.contains("content-type: text/event-stream"), "{text}");
    let data = text
        .split("event: snapshot\ndata: ")
        .nth(1)
        .and_then(|d| d.split('\n').next())
        .unwrap_or_else(|| panic!("no snapshot event: {text}"));
    let snapshot: serde_json::Value = serde_json::from_str(data).unwrap();
    let names: Vec<&str> = snapshot["gateways"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["x"]);

    // Read-only, and nothing else is served.
    let (code, _) = http_get(web, "/api/fleet", "POST", "").await;
    assert_eq!(code, 405);
    let (code, _) = http_get(web, "/etc/passwd", "GET", "").await;
    assert_eq!(code, 404);
}

/// `/api/causes`: what is not ready, grouped by cause, filtered like
/// `/api/fleet`.
#[tokio::test]
async fn the_web_page_groups_problems_by_cause() {
    let hub = Hub::start(HubConfig {
        web_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..HubConfig::loopback(Duration::from_secs(60))
    })
    .await
    .unwrap();
    let web = hub.web_addr.expect("web listener");
    let (_east, mut west) = small_fleet(&hub).await;
    // west fails the same way on another Gateway: one cause, two clusters.
    west.snapshot(
        2,
        0,
        vec![
            report("b", true, "10.1.0.2"),
            report("c", false, "10.1.0.3"),
        ],
    )
    .await;
    let mut d = dashboard(&hub).await;
    eventually(&mut d, "c", |g| programmed(g) == Some(false)).await;

    // A cluster that connected and has not reported yet is a cause too.
    let _north = Agent::connect(hub.ingest_addr, "north").await;

    let (code, text) = http_get(web, "/api/causes", "GET", "").await;
    assert_eq!(code, 200, "{text}");
    let causes = body_json(&text);
    let groups = causes["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2, "{causes}");
    assert_eq!(groups[1]["kind"], "neverReported", "{causes}");
    assert_eq!(groups[1]["clusters"], serde_json::json!(["north"]));
    let g = &groups[0];
    assert_eq!(g["kind"], "condition");
    assert_eq!(g["type"], "Programmed");
    assert_eq!(g["message"], "Address pending");
    assert_eq!(g["clusterCount"], 2);
    assert_eq!(g["gatewayCount"], 2);
    assert_eq!(g["clusters"], serde_json::json!(["east", "west"]));
    assert_eq!(
        g["gateways"],
        serde_json::json!(["openshift-ingress/b", "openshift-ingress/c"])
    );
    assert_eq!(causes["clusterCount"], 3);
    assert_eq!(causes["affectedClusters"], 3);

    let (_, text) = http_get(web, "/api/causes?cluster=west", "GET", "").await;
    let west_only = body_json(&text);
    assert_eq!(
        west_only["groups"][0]["clusters"],
        serde_json::json!(["west"])
    );
    // Another namespace: its Gateways are fine; a cluster's own causes
    // (never reported, stale) stay, as the clusters do in /api/fleet.
    let (_, text) = http_get(web, "/api/causes?namespace=other", "GET", "").await;
    let kinds: Vec<String> = body_json(&text)["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds, ["neverReported"]);
}

/// DNS rebinding: the page answers only to loopback names, IP literals and
/// `--web-host` names; plaintext answers carry no HSTS; error answers echo
/// a short, escaped prefix of what was asked.
#[tokio::test]
async fn the_web_page_answers_only_to_its_names() {
    let hub = Hub::start(HubConfig {
        web_listen: Some("127.0.0.1:0".parse().unwrap()),
        web_hosts: gwhub_hub_rules::web_host::WebHosts::new(["hub.example.com"]).unwrap(),
        ..HubConfig::loopback(Duration::from_secs(60))
    })
    .await
    .unwrap();
    let web = hub.web_addr.expect("web listener");
    let _agents = small_fleet(&hub).await;

    for host in [
        "Host: localhost:7445\r\n",
        "Host: 127.0.0.1\r\n",
        "Host: [::1]:7445\r\n",
        "Host: hub.example.com\r\n",
        "Host: HUB.example.com:443\r\n",
    ] {
        let (code, text) = http_get_as(web, host, "/api/fleet", "GET", "").await;
        assert_eq!(code, 200, "{host}: {text}");
        assert!(
            !text
                .to_ascii_lowercase()
                .contains("strict-transport-security"),
            "no HSTS without TLS: {text}"
        );
    }
    for (host, named) in [
        ("Host: evil.example\r\n", "\"evil.example\""),
        ("Host: evil.example:7445\r\n", "\"evil.example:7445\""),
        ("Host: hub.example.com.evil.example\r\n", "evil.example"),
    ] {
        for path in ["/api/fleet", "/", "/api/events"] {
            let (code, text) = http_get_as(web, host, path, "GET", "").await;
            assert_eq!(code, 421, "{host} {path}: {text}");
            let e = body_json(&text)["error"].as_str().unwrap().to_owned();
            assert!(e.contains(named) && e.contains("--web-host"), "{e}");
        }
    }

    // Error answers echo a short, escaped prefix of the request.
    let hostile = "%1b%5b2J%e2%80%aeevil%0d%0a".repeat(500);
    let (code, text) = http_get(
        web,
        &format!("/api/gateway?namespace=openshift-ingress&name={hostile}"),
        "GET",
        "",
    )
    .await;
    assert_eq!(code, 404, "{text}");
    let e = body_json(&text)["error"].as_str().unwrap().to_owned();
    assert!(e.len() < 400, "{} bytes: {e}", e.len());
    assert!(!e.chars().any(gwhub_model::text::is_unsafe_char), "{e:?}");
    assert!(e.contains("\\u{1b}[2J\\u{202e}evil\\r\\n"), "{e}");
    let (code, text) = http_get(web, &format!("/api/{}", "x".repeat(10_000)), "GET", "").await;
    assert_eq!(code, 404);
    let e = body_json(&text)["error"].as_str().unwrap().to_owned();
    assert!(e.len() < 200, "{e}");
}
