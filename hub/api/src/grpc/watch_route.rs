//! `WatchGateways` and `ListGateways` served below tonic's codec (issue
//! 25): tonic encodes every message into a buffer of its own, so each
//! watcher of a large view (or unread list answer) would hold a copy of it. Here the response body hands the
//! HTTP/2 layer the views' shared encodings (`crate::grpc::view::Page`)
//! as they are, so what a watcher holds of its own is its framing and its
//! stream's HTTP/2 send buffer, whatever the view weighs. Every other
//! Dashboard method goes to the generated server.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use gwhub_proto::v1;
use http_body_util::BodyExt;
use prost::Message;
use tokio::sync::mpsc;
use tonic::body::Body;
use tonic::codegen::{Bytes, Service, http};
use tonic::{Request, Status};

use crate::grpc::dashboard::DashboardService;
use crate::grpc::view::Page;

/// The methods served here.
pub(crate) const WATCH_PATH: &str = "/gwhub.v1.Dashboard/WatchGateways";
pub(crate) const LIST_PATH: &str = "/gwhub.v1.Dashboard/ListGateways";

/// Largest `WatchGatewaysRequest` taken (a filter of three short strings).
const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// The Dashboard's server with `WatchGateways` and `ListGateways` taken
/// out (see the module).
#[derive(Clone)]
pub struct WatchRoute<S> {
    inner: S,
    dashboard: Arc<DashboardService>,
}

/// The Dashboard `service` to serve: `WatchGateways` and `ListGateways`
/// as frames of the views' shared encodings, every other method by the
/// generated server.
pub fn server(
    service: DashboardService,
) -> WatchRoute<v1::dashboard_server::DashboardServer<DashboardService>> {
    let dashboard = Arc::new(service);
    WatchRoute {
        inner: v1::dashboard_server::DashboardServer::from_arc(dashboard.clone()),
        dashboard,
    }
}

impl<S: tonic::server::NamedService> tonic::server::NamedService for WatchRoute<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B> Service<http::Request<B>> for WatchRoute<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let list = match request.uri().path() {
            WATCH_PATH => false,
            LIST_PATH => true,
            _ => return Box::pin(self.inner.call(request)),
        };
        let dashboard = self.dashboard.clone();
        Box::pin(async move {
            let answer = match list {
                true => list_gateways(&dashboard, request).await,
                false => watch(&dashboard, request).await,
            };
            Ok(answer.unwrap_or_else(Status::into_http))
        })
    }
}

/// The request's one message, as a tonic request (metadata and the
/// connection's extensions kept).
async fn read_request<B, M>(request: http::Request<B>) -> Result<Request<M>, Status>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    M: Message + Default,
{
    let (parts, body) = request.into_parts();
    let bytes = http_body_util::Limited::new(body, MAX_REQUEST_BYTES)
        .collect()
        .await
        .map_err(|e| {
            Status::invalid_argument(format!(
                "request unreadable or over {MAX_REQUEST_BYTES} bytes: {e}"
            ))
        })?
        .to_bytes();
    let message = decode_request::<M>(&bytes)?;
    Ok(Request::from_http(http::Request::from_parts(
        parts, message,
    )))
}

/// A gRPC response whose body is `rx`'s pages, then the status.
fn response(rx: mpsc::Receiver<Result<Page, Status>>) -> http::Response<Body> {
    let mut response = http::Response::new(Body::new(WatchBody {
        rx,
        page: None,
        done: false,
    }));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    response
}

/// Reads the request's one message and starts the watch.
async fn watch<B>(
    dashboard: &DashboardService,
    request: http::Request<B>,
) -> Result<http::Response<Body>, Status>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let request = read_request::<_, v1::WatchGatewaysRequest>(request).await?;
    Ok(response(dashboard.watch(request).await?))
}

/// One page of the list, its call slot held until the answer is sent
/// (see [`crate::conn::Hold`]).
async fn list_gateways<B>(
    dashboard: &DashboardService,
    request: http::Request<B>,
) -> Result<http::Response<Body>, Status>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let request = read_request::<_, v1::ListGatewaysRequest>(request).await?;
    let (page, permit) = dashboard.list(request).await?;
    let (tx, rx) = mpsc::channel(1);
    // Room for one: never waits.
    let _ = tx.try_send(Ok(page));
    let mut answer = response(rx);
    if let Some(hold) = dashboard.hold(permit) {
        answer.extensions_mut().insert(hold);
    }
    Ok(answer)
}

/// The one gRPC message of a request body (uncompressed).
fn decode_request<M: Message + Default>(bytes: &[u8]) -> Result<M, Status> {
    let Some((head, message)) = bytes.split_at_checked(5) else {
        return Err(Status::invalid_argument("no request message"));
    };
    if head[0] != 0 {
        return Err(Status::unimplemented(
            "compressed requests are not supported",
        ));
    }
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
    if usize::try_from(len).ok() != Some(message.len()) {
        return Err(Status::invalid_argument(
            "the request is not exactly one message",
        ));
    }
    M::decode(message)
        .map_err(|e| Status::invalid_argument(format!("the request does not decode: {e}")))
}

/// The response: each page's pieces as data frames (a page is dropped,
/// telling its watcher it was taken, with its last piece), then the
/// status as trailers.
struct WatchBody {
    rx: mpsc::Receiver<Result<Page, Status>>,
    page: Option<Page>,
    done: bool,
}

fn trailers(status: Option<&Status>) -> http::HeaderMap {
    let mut map = http::HeaderMap::new();
    let added = match status {
        Some(s) => s.add_header(&mut map).is_ok(),
        None => false,
    };
    if !added {
        map.insert("grpc-status", http::HeaderValue::from_static("0"));
    }
    map
}

impl http_body::Body for WatchBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            if let Some(page) = &mut self.page {
                let next = page.chunks.pop_front();
                if page.chunks.is_empty() {
                    self.page = None;
                }
                match next {
                    Some(chunk) if !chunk.is_empty() => {
                        return Poll::Ready(Some(Ok(http_body::Frame::data(chunk))));
                    }
                    _ => continue,
                }
            }
            let next = std::task::ready!(self.rx.poll_recv(cx));
            match next {
                Some(Ok(page)) => self.page = Some(page),
                Some(Err(status)) => {
                    self.done = true;
                    let t = trailers(Some(&status));
                    return Poll::Ready(Some(Ok(http_body::Frame::trailers(t))));
                }
                None => {
                    self.done = true;
                    let t = trailers(None);
                    return Poll::Ready(Some(Ok(http_body::Frame::trailers(t))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_exactly_one_uncompressed_message() {
        let m = v1::WatchGatewaysRequest {
            omit_unchanged_omissions: true,
            ..Default::default()
        };
        let body = m.encode_to_vec();
        let mut framed = vec![0];
        framed.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes());
        framed.extend_from_slice(&body);
        assert_eq!(
            decode_request::<v1::WatchGatewaysRequest>(&framed).unwrap(),
            m
        );
        let mut compressed = framed.clone();
        compressed[0] = 1;
        assert_eq!(
            decode_request::<v1::WatchGatewaysRequest>(&compressed)
                .unwrap_err()
                .code(),
            tonic::Code::Unimplemented
        );
        let mut extra = framed.clone();
        extra.push(0);
        assert_eq!(
            decode_request::<v1::WatchGatewaysRequest>(&extra)
                .unwrap_err()
                .code(),
            tonic::Code::InvalidArgument
        );
        assert!(decode_request::<v1::WatchGatewaysRequest>(&[0, 0]).is_err());
    }
}
