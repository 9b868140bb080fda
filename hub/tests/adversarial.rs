//! The hub under hostile clients (issue 17): every bound the hub keeps as a
//! whole, each with a test, over real loopback TCP. Budgets are set small
//! through the same config the flags fill, so each test is fast and small;
//! waits are generous bounds, never timing assertions.

use std::net::SocketAddr;
use std::time::Duration;

use gwhub::serve::{Hub, HubConfig};
use gwhub_proto::client::{ReportStream, open_report};
use gwhub_proto::v1::{
    self, agent_message, dashboard_client::DashboardClient, hub_message,
    ingest_client::IngestClient,
};
use tokio_stream::StreamExt;
use tonic::transport::Channel;

/// Generous bound for anything the hub does "at once".
const WAIT: Duration = Duration::from_secs(10);

// ---- a raw agent ----------------------------------------------------------

struct Agent {
    stream: ReportStream,
}

fn msg(m: agent_message::Message) -> v1::AgentMessage {
    v1::AgentMessage { message: Some(m) }
}

fn hello(cluster: &str) -> v1::Hello {
    v1::Hello {
        agent_version: "adversary".into(),
        capabilities: vec![],
        cluster: cluster.into(),
    }
}

impl Agent {
    /// Connects and reads the hub's Hello and NEW_CONNECTION resync.
    async fn connect(addr: SocketAddr, cluster: &str) -> Agent {
        let mut agent = Agent::open(addr, cluster).await.unwrap();
        match agent.recv().await.unwrap() {
            hub_message::Message::Hello(h) => assert_eq!(h.cluster, cluster),
            other => panic!("expected HubHello, got {other:?}"),
        }
        match agent.recv().await.unwrap() {
            hub_message::Message::Resync(_) => {}
            other => panic!("expected a resync request, got {other:?}"),
        }
        agent
    }

    async fn open(addr: SocketAddr, cluster: &str) -> Result<Agent, tonic::Status> {
        let mut client = IngestClient::connect(format!("http://{addr}"))
            .await
            .unwrap()
            .max_encoding_message_size(64 * 1024 * 1024);
        let stream = open_report(&mut client, hello(cluster), 64).await?;
        Ok(Agent { stream })
    }

    /// Sends, ignoring a stream the hub already ended.
    async fn send(&self, m: agent_message::Message) {
        let _ = self.stream.tx.send(msg(m)).await;
    }

    /// The next hub message other than a heartbeat, or how the stream ended.
    async fn recv(&mut self) -> Result<hub_message::Message, tonic::Status> {
        loop {
            let m = tokio::time::timeout(WAIT, self.stream.rx.next())
                .await
                .expect("the hub answered in time")
                .expect("stream still open")?;
            match m.message {
                Some(hub_message::Message::Heartbeat(_)) => continue,
                Some(m) => return Ok(m),
                None => panic!("empty hub message"),
            }
        }
    }

    /// The status the hub ended the stream with (acks and resyncs skipped).
    async fn ended(&mut self) -> tonic::Status {
        loop {
            match self.recv().await {
                Ok(hub_message::Message::Ack(_) | hub_message::Message::Resync(_)) => continue,
                Ok(other) => panic!("expected the stream to end, got {other:?}"),
                Err(status) => return status,
            }
        }
    }

    async fn snapshot(&mut self, seq: u64, gateways: Vec<v1::GatewayReport>) {
        self.send(agent_message::Message::Snapshot(v1::SnapshotChunk {
            snapshot_id: seq + 1,
            chunk: 0,
            r#final: true,
            seq,
            gateways,
        }))
        .await;
        match self.recv().await {
            Ok(hub_message::Message::Ack(a)) => assert_eq!(a.seq, seq),
            other => panic!("expected ack {seq}, got {other:?}"),
        }
    }

    async fn heartbeat(&self) {
        self.send(agent_message::Message::Heartbeat(v1::Heartbeat {
            sent_unix_millis: 0,
        }))
        .await;
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

/// Polls until `check` holds, for at most `within`.
async fn until<T: std::fmt::Debug, F: Future<Output = T>>(
    within: Duration,
    mut probe: impl FnMut() -> F,
    check: impl Fn(&T) -> bool,
) -> T {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let v = probe().await;
        if check(&v) {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never held within {within:?}; last {v:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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
