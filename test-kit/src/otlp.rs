//! An in-process OpenTelemetry collector for the tracing tests: a tonic
//! server implementing OTLP's `TraceService` (the generated server code of
//! `opentelemetry-proto`) that keeps every span it is sent, simplified.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use tonic::{Request, Response, Status};

/// One received span, simplified.
#[derive(Clone, Debug)]
pub struct Span {
    pub service: String,
    pub name: String,
    pub trace_id: Vec<u8>,
    pub span_id: Vec<u8>,
    pub parent_span_id: Vec<u8>,
    pub attributes: BTreeMap<String, String>,
}

/// The receiver: every span exported to it, in arrival order.
#[derive(Clone, Default)]
pub struct Receiver(Arc<Mutex<Vec<Span>>>);

impl Receiver {
    /// Serves OTLP/gRPC on a free loopback port until the runtime ends;
    /// returns the receiver and its `http://` endpoint.
    pub async fn start() -> (Receiver, String) {
        let receiver = Receiver::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(receiver.clone()))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener));
        tokio::spawn(server);
        (receiver, format!("http://{addr}"))
    }

    /// The spans received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.0.lock().unwrap().clone()
    }

    /// Waits (at most `within`) until a span named `name` with attribute
    /// `gateway` = `gateway` arrived; returns every span received then.
    pub async fn wait_for(&self, name: &str, gateway: &str, within: Duration) -> Vec<Span> {
        crate::wait::until(
            within,
            || async { self.spans() },
            |s| {
                s.iter()
                    .any(|s| s.name == name && s.attribute("gateway") == Some(gateway))
            },
        )
        .await
    }

    /// Waits until a span `name` naming `gateway` in trace `trace` (32 hex
    /// digits) was exported (the same Gateway's untraced work is in other
    /// traces); every span exported so far.
    pub async fn wait_for_in_trace(
        &self,
        trace: &str,
        name: &str,
        gateway: &str,
        within: Duration,
    ) -> Vec<Span> {
        crate::wait::until(
            within,
            || async { self.spans() },
            |s| {
                s.iter().any(|s| {
                    s.name == name && s.attribute("gateway") == Some(gateway) && s.trace() == trace
                })
            },
        )
        .await
    }
}

impl Span {
    /// The trace id in hex, as a `traceparent` writes it.
    pub fn trace(&self) -> String {
        self.trace_id.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// A string form of attribute `key`.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let mut got = self.0.lock().unwrap();
        for rs in request.into_inner().resource_spans {
            let resource = rs.resource.map(|r| attributes(&r.attributes));
            let service = resource
                .and_then(|r| r.get("service.name").cloned())
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for s in ss.spans {
                    got.push(Span {
                        service: service.clone(),
                        name: s.name,
                        trace_id: s.trace_id,
                        span_id: s.span_id,
                        parent_span_id: s.parent_span_id,
                        attributes: attributes(&s.attributes),
                    });
                }
            }
        }
        Ok(Response::new(ExportTraceServiceResponse::default()))
    }
}

fn attributes(
    kvs: &[opentelemetry_proto::tonic::common::v1::KeyValue],
) -> BTreeMap<String, String> {
    kvs.iter()
        .filter_map(|kv| {
            let v = match kv.value.as_ref()?.value.as_ref()? {
                Value::StringValue(s) => s.clone(),
                Value::IntValue(i) => i.to_string(),
                Value::BoolValue(b) => b.to_string(),
                other => format!("{other:?}"),
            };
            Some((kv.key.clone(), v))
        })
        .collect()
}
