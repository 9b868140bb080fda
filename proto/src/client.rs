//! Opening an agent's `Report` stream, shared by the agent and the raw test
//! agents so the opening (Hello first, then whatever the caller sends) is
//! written once.

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;
use tonic::transport::Channel;

use crate::v1::{self, AgentMessage, HubMessage, agent_message, ingest_client::IngestClient};

/// The agent's side of an open `Report` stream.
#[derive(Debug)]
pub struct ReportStream {
    /// Messages to the hub, after the Hello.
    pub tx: mpsc::Sender<AgentMessage>,
    /// The hub's messages, starting with its Hello.
    pub rx: Streaming<HubMessage>,
}

/// Opens a `Report` stream that starts with `hello`; `buffer` messages may
/// wait in the sender.
pub async fn open_report(
    client: &mut IngestClient<Channel>,
    hello: v1::Hello,
    buffer: usize,
) -> Result<ReportStream, tonic::Status> {
    let (tx, rx) = mpsc::channel(buffer.max(1));
    let first = AgentMessage {
        message: Some(agent_message::Message::Hello(hello)),
    };
    // Cannot fail: the receiver is alive and the channel is empty.
    let _ = tx.try_send(first);
    let response = client.report(ReceiverStream::new(rx)).await?;
    Ok(ReportStream {
        tx,
        rx: response.into_inner(),
    })
}
