//! An independent gRPC client reads the Dashboard: Python's grpcio with
//! nothing but server reflection (v1alpha, what grpcio-reflection speaks,
//! and v1) and the standard health client, against a running `gwhub demo`
//! (a hub with three real agents). The script is
//! tests/python/dashboard_client.py; its virtualenv comes from
//! scripts/python-client.sh (`GWHUB_PY_VENV`, else `target/py-grpc`). Where
//! the venv is missing the test says it was skipped, except under `CI=true`
//! or `GWHUB_REQUIRE_PYTHON=1` (scripts/test.sh), where that is a failure.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gwhub_test_kit::procs::free_port;

fn venv() -> PathBuf {
    std::env::var_os("GWHUB_PY_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target"))
                });
            target.join("py-grpc")
        })
}

#[test]
fn python_grpcio_reads_the_dashboard_by_reflection_alone() {
    let python = venv().join("bin/python");
    if !python.exists() {
        let strict = std::env::var("CI").is_ok_and(|v| v == "true")
            || std::env::var("GWHUB_REQUIRE_PYTHON").is_ok_and(|v| v == "1");
        assert!(
            !strict,
            "no Python gRPC venv at {}: run scripts/python-client.sh",
            venv().display()
        );
        eprintln!(
            "SKIPPED python_grpcio_reads_the_dashboard_by_reflection_alone: no venv at {} (scripts/python-client.sh makes it)",
            venv().display()
        );
        return;
    }
    let (ingest, dashboard) = (free_port(), free_port());
    let mut demo = Command::new(gwhub_test_kit::workspace_bin::workspace_binary(
        "gwhub",
        "gwhub",
        "GWHUB_BIN",
    ))
    .arg("demo")
    .args(["--listen", &format!("127.0.0.1:{ingest}")])
    .args(["--dashboard-listen", &format!("127.0.0.1:{dashboard}")])
    .args(["--web-listen", "127.0.0.1:0"])
    .args(["--interval", "1s", "--duration", "120s"])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("start gwhub demo");
    let script = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/python/dashboard_client.py"
    ));
    let started = Instant::now();
    let mut client = Command::new(&python)
        .arg(&script)
        .arg(format!("127.0.0.1:{dashboard}"))
        .args(["openshift-ingress/default-gateway", "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the Python client");
    // Bounded: a hung client is killed (the script's own calls time out sooner).
    let status = loop {
        if let Some(s) = client.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > Duration::from_secs(110) {
            let _ = client.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = client.wait_with_output().unwrap();
    let _ = demo.kill();
    let _ = demo.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        status.is_some_and(|s| s.success()),
        "the Python client failed ({status:?}):\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("reflection v1alpha and v1 list gwhub.v1.Dashboard"),
        "{stdout}"
    );
    assert!(stdout.trim_end().ends_with("OK"), "{stdout}");
    eprintln!("{stdout}");
}
