//! `--otlp-endpoint` end to end: a `gwhub serve --no-kube` hub and a
//! `gwhub-agent run --from-dir` agent export their spans to an in-process
//! OTLP receiver (the generated `TraceService` server). One change to the
//! agent's directory is followed as one trace: the agent's reconcile, its
//! report, the hub's delta apply and aggregation, linked parent to child
//! through the report stream, each naming its cluster / Gateway.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gwhub_test_kit::procs::{Process, free_addr, temp_dir};
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
struct Span {
    service: String,
    name: String,
    trace_id: Vec<u8>,
    span_id: Vec<u8>,
    parent_span_id: Vec<u8>,
    attributes: BTreeMap<String, String>,
}

#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Vec<Span>>>);

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

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn copy_example(to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for f in std::fs::read_dir(repo().join("spoke-agent/examples/aws-healthy")).unwrap() {
        let p = f.unwrap().path();
        if p.is_file() {
            std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
        }
    }
}

fn spawn(bin: &str, args: &[&str], otlp: SocketAddr) -> Process {
    Process(
        Command::new(bin)
            .args(args)
            .args(["--otlp-endpoint", &format!("http://{otlp}")])
            // Export batches quickly: the test waits for them.
            .env("OTEL_BSP_SCHEDULE_DELAY", "100")
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_change_is_one_trace_from_agent_reconcile_to_hub_aggregation() {
    let receiver = Receiver::default();
    let otlp = free_addr();
    let listener = tokio::net::TcpListener::bind(otlp).await.unwrap();
    let server = tonic::transport::Server::builder()
        .add_service(TraceServiceServer::new(receiver.clone()))
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener));
    tokio::spawn(server);

    let dir = temp_dir("tracing");
    let east = dir.join("east");
    copy_example(&east);
    let (ingest, dashboard) = (free_addr(), free_addr());
    let _hub = spawn(
        env!("CARGO_BIN_EXE_gwhub"),
        &[
            "serve",
            "--no-kube",
            "--insecure",
            "--listen",
            &ingest.to_string(),
            "--dashboard-listen",
            &dashboard.to_string(),
        ],
        otlp,
    );
    let _agent = spawn(
        env!("CARGO_BIN_EXE_gwhub-agent"),
        &[
            "run",
            "--insecure",
            "--cluster",
            "east",
            "--hub",
            &format!("http://{ingest}"),
            "--from-dir",
            east.to_str().unwrap(),
            "--poll-interval",
            "100ms",
        ],
        otlp,
    );

    // The hub has the first snapshot once it aggregated the Gateway; the
    // initial read goes as a snapshot (untraced), so wait for its reconcile
    // span before changing anything.
    let spans = receiver.clone();
    gwhub_test_kit::wait::until(
        Duration::from_secs(30),
        || async { spans.0.lock().unwrap().clone() },
        |s| s.iter().any(|s| s.name == "reconcile"),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    // One change: a second Gateway appears in the directory.
    let gateway = std::fs::read_to_string(east.join("gateway.yaml")).unwrap();
    let second = gateway
        .replace("name: default-gateway", "name: second-gateway")
        .replace("5b0e8f0a-6c2d", "5b0e8f0a-6c2e");
    std::fs::write(east.join("second.yaml"), second).unwrap();
    let key = "openshift-ingress/second-gateway";

    let spans = gwhub_test_kit::wait::until(
        Duration::from_secs(30),
        || async { spans.0.lock().unwrap().clone() },
        |s| {
            s.iter().any(|s| {
                s.name == "aggregate"
                    && s.attributes.get("gateway").map(String::as_str) == Some(key)
            })
        },
    )
    .await;
    let find = |service: &str, name: &str| -> &Span {
        spans
            .iter()
            .find(|s| {
                s.service == service
                    && s.name == name
                    && s.attributes.get("gateway").map(String::as_str) == Some(key)
            })
            .unwrap_or_else(|| panic!("no {service} span {name} for {key} in {spans:#?}"))
    };
    let reconcile = find("gwhub-agent", "reconcile");
    let report = find("gwhub-agent", "report");
    let apply = find("gwhub", "apply_delta");
    let aggregate = find("gwhub", "aggregate");

    // One trace, linked parent to child through the report stream.
    assert!(reconcile.parent_span_id.is_empty(), "{reconcile:?}");
    for s in [report, apply, aggregate] {
        assert_eq!(s.trace_id, reconcile.trace_id, "{s:?} vs {reconcile:?}");
    }
    assert_eq!(report.parent_span_id, reconcile.span_id);
    assert_eq!(apply.parent_span_id, report.span_id);
    assert_eq!(aggregate.parent_span_id, apply.span_id);
    // Cluster attributes on both sides.
    for s in [reconcile, report, apply] {
        assert_eq!(
            s.attributes.get("cluster").map(String::as_str),
            Some("east"),
            "{s:?}"
        );
    }
}
