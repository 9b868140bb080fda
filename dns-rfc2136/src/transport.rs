//! One request, one answer, over a fresh TCP connection (hickory-net's
//! `TcpClientStream` does the connecting and the length framing).
//!
//! TCP always, never UDP: an UPDATE must not be sent twice on a guess (a
//! UDP retransmission of a create that did land comes back as a failed
//! prerequisite, a false conflict), TCP has no truncation to fall back
//! from, a stopped server is seen at once (connection refused) instead of
//! after the timeout, and RFC 7766 requires authoritative servers to serve
//! TCP. The hub sends a few messages per change of a name, so a connection
//! each costs nothing that matters. The raw answer is handed back as bytes:
//! its TSIG is checked against these exact bytes by the caller.

use std::net::SocketAddr;
use std::time::Duration;

use futures::StreamExt as _;
use hickory_net::NetError;
use hickory_net::runtime::TokioRuntimeProvider;
use hickory_net::tcp::TcpClientStream;
use hickory_net::xfer::DnsStreamHandle as _;
use hickory_proto::op::SerialMessage;

use crate::error::Error;

/// Sends `request` to `server` and returns the first answer's bytes, all
/// within `timeout`.
pub(crate) async fn exchange(
    server: SocketAddr,
    timeout: Duration,
    request: Vec<u8>,
) -> Result<Vec<u8>, Error> {
    let exchange = async {
        let (connect, mut handle) =
            TcpClientStream::new(server, None, Some(timeout), TokioRuntimeProvider::new());
        let mut stream = connect.await.map_err(|e| net_error(server, timeout, e))?;
        handle
            .send(SerialMessage::new(request, server))
            .map_err(|e| net_error(server, timeout, e))?;
        match stream.next().await {
            Some(Ok(answer)) => Ok(answer.into_parts().0),
            Some(Err(e)) => Err(net_error(server, timeout, e)),
            None => Err(Error::BadAnswer {
                server,
                reason: "the server closed the connection without answering".to_owned(),
            }),
        }
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .unwrap_or(Err(Error::Timeout { server, timeout }))
}

fn net_error(server: SocketAddr, timeout: Duration, e: NetError) -> Error {
    match e {
        NetError::Timeout => Error::Timeout { server, timeout },
        NetError::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => {
            Error::Timeout { server, timeout }
        }
        NetError::Io(io) => Error::Unreachable {
            server,
            reason: io.to_string(),
        },
        other => Error::Unreachable {
            server,
            reason: other.to_string(),
        },
    }
}
