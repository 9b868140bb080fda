//! Connections from a chosen loopback address. Every address in
//! 127.0.0.0/8 is loopback, so the attack suites bind their clients to
//! 127.0.0.2, .3, ... and the hub sees several callers, none of them the
//! honest client at 127.0.0.1. One helper for TCP and one for gRPC
//! channels, instead of a connector per suite.

use std::net::{IpAddr, SocketAddr};

use tokio::net::{TcpSocket, TcpStream};
use tonic::transport::{Channel, Endpoint};

/// A TCP connection to `to` from `from` (any free port).
pub async fn connect_from(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = if from.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.bind(SocketAddr::new(from, 0))?;
    socket.connect(to).await
}

/// `endpoint` (its scheme, TLS and HTTP/2 settings) connected to `to` over
/// a TCP connection from `from`.
pub async fn channel_from(
    from: IpAddr,
    to: SocketAddr,
    endpoint: Endpoint,
) -> Result<Channel, tonic::transport::Error> {
    let connector = tower::service_fn(move |_: http::Uri| async move {
        let stream = connect_from(from, to).await?;
        Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
    });
    endpoint.connect_with_connector(connector).await
}

/// `127.0.0.<n>`: the n-th loopback address, for a test's callers.
pub fn address(n: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, n])
}
