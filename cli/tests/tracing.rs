//! `--otlp-endpoint` end to end: a `gwhub serve --no-kube` hub and a
//! `gwhub-agent run --from-dir` agent export their spans to an in-process
//! OTLP receiver (the generated `TraceService` server). One change to the
//! agent's directory is followed as one trace: the agent's reconcile, its
//! report, the hub's delta apply and aggregation, linked parent to child
//! through the report stream, each naming its cluster / Gateway.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use gwhub_test_kit::otlp::{Receiver, Span};
use gwhub_test_kit::procs::{Process, free_addr, temp_dir};

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

fn spawn(bin: &str, args: &[&str], otlp: &str) -> Process {
    Process(
        Command::new(bin)
            .args(args)
            .args(["--otlp-endpoint", otlp])
            // Export batches quickly: the test waits for them.
            .env("OTEL_BSP_SCHEDULE_DELAY", "100")
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_change_is_one_trace_from_agent_reconcile_to_hub_aggregation() {
    let (receiver, otlp) = Receiver::start().await;

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
        &otlp,
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
        &otlp,
    );

    // The hub has the first snapshot once it aggregated the Gateway; the
    // initial read goes as a snapshot (untraced), so wait for its reconcile
    // span before changing anything.
    gwhub_test_kit::wait::until(
        Duration::from_secs(30),
        || async { receiver.spans() },
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

    // Two processes export in their own batches: wait for every span of
    // the change, not only the last one made.
    let mut spans = Vec::new();
    for name in ["reconcile", "report", "apply_delta", "aggregate"] {
        spans = receiver.wait_for(name, key, Duration::from_secs(30)).await;
    }
    let find = |service: &str, name: &str| -> &Span {
        spans
            .iter()
            .find(|s| s.service == service && s.name == name && s.attribute("gateway") == Some(key))
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
        assert_eq!(s.attribute("cluster"), Some("east"), "{s:?}");
    }
}
