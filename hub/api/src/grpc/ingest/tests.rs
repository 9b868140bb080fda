//! Unit tests of `ingest`, in their own file so the module itself reads in
//! one sitting.

use super::*;
use crate::index::{Index, IndexConfig};
use gwhub_hub_rules::aggregate::Options;

/// A stream whose agent never reads, with its queue full and more to
/// send, plus what keeps it from ending on its own.
fn stuck(
    index: &Index,
) -> (
    AgentStream,
    mpsc::Receiver<Result<v1::HubMessage, Status>>,
    CancellationToken,
) {
    let (tx, rx) = mpsc::channel(1);
    let shutdown = CancellationToken::new();
    let shutdown_tx = shutdown.clone();
    let config = IngestConfig::for_stale_after(true, Duration::from_secs(60));
    let mut stream = AgentStream::new(index.ingest_port(), config, tx, shutdown);
    stream.session = Some(index.connect("east", "test").unwrap());
    for _ in 0..4 {
        stream
            .pending
            .push(hub_msg(hub_message::Message::Heartbeat(v1::Heartbeat {
                sent_unix_millis: 0,
            })));
    }
    (stream, rx, shutdown_tx)
}

#[tokio::test]
async fn a_superseded_stream_whose_agent_stopped_reading_ends() {
    let index = Index::new(IndexConfig::new(
        Options::default(),
        Duration::from_secs(60),
    ));
    let (mut stream, _rx, _shutdown) = stuck(&index);
    let flushing = tokio::spawn(async move { stream.flush().await });
    let _newer = index.connect("east", "test").unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(10), flushing)
        .await
        .expect("the flush gave way to the newer stream")
        .unwrap();
    assert_eq!(ended.unwrap_err().code(), tonic::Code::Aborted);
}

#[tokio::test]
async fn shutdown_ends_a_stream_whose_agent_stopped_reading() {
    let index = Index::new(IndexConfig::new(
        Options::default(),
        Duration::from_secs(60),
    ));
    let (mut stream, _rx, shutdown) = stuck(&index);
    let flushing = tokio::spawn(async move { stream.flush().await });
    shutdown.cancel();
    let ended = tokio::time::timeout(Duration::from_secs(10), flushing)
        .await
        .expect("the flush gave way to shutdown")
        .unwrap();
    assert_eq!(ended.unwrap_err().code(), tonic::Code::Unavailable);
}
