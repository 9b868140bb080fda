//! The test agent of the hub's store and status-writer suites: the test
//! kit's raw agent with typed snapshots and deltas of `GatewayStatus`,
//! numbered in order, each waiting for its ack. It exists so those suites
//! drive the hub as an agent does without repeating the wire messages.

use std::net::SocketAddr;
use std::time::Duration;

use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_proto::convert::status_to_proto;
use gwhub_proto::v1::{self, agent_message, hub_message};
use gwhub_test_kit::raw_agent::{Agent as RawAgent, msg};

use gwhub_test_kit::wait::WAIT;

/// The test kit's raw agent, with this suite's typed snapshots and deltas,
/// numbered in order and each waiting for its ack (up to [`WAIT`]: acks of
/// a hub in Kubernetes mode can wait on a loaded API server).
pub(crate) struct Agent {
    pub(crate) raw: RawAgent,
    pub(crate) seq: u64,
}

impl Agent {
    /// Connects and reads the hub's Hello and NEW_CONNECTION resync.
    pub(crate) async fn connect(addr: SocketAddr, cluster: &str) -> Agent {
        Agent {
            raw: RawAgent::connect(addr, cluster).await,
            seq: 0,
        }
    }

    pub(crate) async fn recv(&mut self) -> hub_message::Message {
        self.raw.recv_within(WAIT).await
    }

    /// A full snapshot of `(namespace, name, status)`; waits for the ack.
    pub(crate) async fn snapshot(&mut self, gateways: &[(&str, &str, GatewayStatus)]) {
        self.snapshot_chunked(gateways, usize::MAX).await;
    }

    /// [`Agent::snapshot`] in chunks of `per_chunk` Gateways (the ingest
    /// limits a message to 4 MiB).
    pub(crate) async fn snapshot_chunked(
        &mut self,
        gateways: &[(&str, &str, GatewayStatus)],
        per_chunk: usize,
    ) {
        self.seq += 1;
        let gateways: Vec<v1::GatewayReport> = gateways
            .iter()
            .map(|(ns, name, status)| v1::GatewayReport {
                namespace: (*ns).into(),
                name: (*name).into(),
                uid: format!("uid-{name}"),
                generation: 1,
                status: Some(status_to_proto(status).unwrap()),
            })
            .collect();
        let chunks: Vec<Vec<v1::GatewayReport>> = if gateways.is_empty() {
            vec![vec![]]
        } else {
            gateways
                .chunks(per_chunk.max(1))
                .map(<[_]>::to_vec)
                .collect()
        };
        let last = chunks.len() - 1;
        for (i, gateways) in chunks.into_iter().enumerate() {
            self.raw
                .send(agent_message::Message::Snapshot(v1::SnapshotChunk {
                    snapshot_id: self.seq,
                    chunk: i as u32,
                    r#final: i == last,
                    seq: self.seq,
                    gateways,
                }))
                .await;
        }
        loop {
            if let hub_message::Message::Ack(a) = self.recv().await
                && a.seq == self.seq
            {
                return;
            }
        }
    }

    /// One upsert as a delta stamped `observed_unix_millis`; waits for the ack.
    pub(crate) async fn delta(
        &mut self,
        ns: &str,
        name: &str,
        status: &GatewayStatus,
        observed: i64,
    ) {
        self.traced_delta(ns, name, status, observed, "").await
    }

    /// [`Agent::delta`] continuing the trace of `traceparent`.
    pub(crate) async fn traced_delta(
        &mut self,
        ns: &str,
        name: &str,
        status: &GatewayStatus,
        observed: i64,
        traceparent: &str,
    ) {
        self.seq += 1;
        let report = v1::GatewayReport {
            namespace: ns.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            generation: 1,
            status: Some(status_to_proto(status).unwrap()),
        };
        self.raw
            .send(agent_message::Message::Delta(v1::Delta {
                seq: self.seq,
                changes: vec![v1::Change {
                    change: Some(v1::change::Change::Upsert(report)),
                }],
                observed_unix_millis: observed,
                traceparent: traceparent.into(),
            }))
            .await;
        loop {
            if let hub_message::Message::Ack(a) = self.recv().await
                && a.seq == self.seq
            {
                return;
            }
        }
    }
}

/// Sends the agent's heartbeats every 200 ms until aborted, as a live
/// agent does when it has nothing to report.
pub(crate) fn keep_alive(agent: &Agent) -> tokio::task::JoinHandle<()> {
    let tx = agent.raw.tx.clone();
    tokio::spawn(async move {
        loop {
            let beat = msg(agent_message::Message::Heartbeat(v1::Heartbeat {
                sent_unix_millis: 0,
            }));
            if tx.send(beat).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}
