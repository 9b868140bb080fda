//! Arbitrary bytes as the agent -> hub wire messages, through the hub's
//! ingest checks (the same code as a live stream) into the index, then one
//! aggregation pass: nothing may panic and every published hub Gateway must
//! pass the CRD checker.
#![no_main]

mod common;

use std::time::Duration;

use gwhub_hub_rules::aggregate::Options;
use gwhub_api::grpc::ingest::replay;
use gwhub_index::{Index, IndexConfig};
use gwhub_proto::v1::{self, agent_message};
use libfuzzer_sys::fuzz_target;
use prost::Message;

fn hello(cluster: &str) -> v1::AgentMessage {
    v1::AgentMessage {
        message: Some(agent_message::Message::Hello(v1::Hello {
            agent_version: "fuzz".into(),
            capabilities: vec![],
            cluster: cluster.into(),
        })),
    }
}

fuzz_target!(|data: &[u8]| {
    let index = Index::new(IndexConfig::new(Options::default(), Duration::from_secs(60)));
    // The whole input as one message: as the first message of a stream
    // (Hello's checks) and after a Hello.
    if let Ok(m) = v1::AgentMessage::decode(data) {
        let _ = replay(&index, [m.clone()]);
        let _ = replay(&index, [hello("one"), m]);
    }
    // The input as a stream of length-delimited messages, with and without
    // a Hello of our own in front.
    let mut buf = data;
    let mut messages = Vec::new();
    while !buf.is_empty() && messages.len() < 64 {
        match v1::AgentMessage::decode_length_delimited(&mut buf) {
            Ok(m) => messages.push(m),
            Err(_) => break,
        }
    }
    if !messages.is_empty() {
        let _ = replay(&index, messages.clone());
        let _ = replay(&index, std::iter::once(hello("stream")).chain(messages));
    }

    index.aggregate_dirty();
    let views = index.subscribe();
    let views = views.borrow();
    for (key, view) in &views.gateways {
        if let Err(e) = common::crd::check_status(&view.aggregation.status) {
            panic!("hub Gateway {key} breaks the CRD: {e}");
        }
        let _ = index.cluster_reports(key);
    }
    let _ = index.clusters();
});
