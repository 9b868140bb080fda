//! The shipped alerts against a real Prometheus (Debian's `prometheus`):
//! a `gwhub serve --no-kube` hub with two `gwhub-agent run --from-dir`
//! agents, Prometheus scraping the hub every second and evaluating the
//! rules of manifests/monitoring/prometheusrule.yaml (taken from it as
//! scripts/check-monitoring.sh does) every second. Stopping one agent fires
//! `GwhubClusterStale` naming that cluster, and only it.
//!
//! Needs scripts/prometheus.sh. Where `prometheus` is missing the test says
//! it was skipped, except under `GWHUB_REQUIRE_PROMETHEUS=1`
//! (scripts/test.sh), where that is a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use gwhub_test_kit::procs::{Process, free_addr, http_status, scrape, temp_dir};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PROMETHEUS: &str = "/usr/bin/prometheus";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The PrometheusRule's `spec` as a Prometheus rule file: everything after
/// its last top-level key, `spec:`, two spaces less indented.
fn shipped_rules() -> String {
    let text =
        std::fs::read_to_string(repo().join("manifests/monitoring/prometheusrule.yaml")).unwrap();
    let (_, spec) = text.split_once("\nspec:\n").expect("a top-level spec:");
    spec.lines()
        .map(|l| l.strip_prefix("  ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `GET path` on Prometheus' API, the JSON body.
async fn api(port: u16, path: &str) -> Option<serde_json::Value> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nhost: x\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).await.ok()?;
    let (_, body) = text.split_once("\r\n\r\n")?;
    serde_json::from_str(body).ok()
}

/// Prometheus' alerts: (alert name, cluster label, state).
async fn alerts(port: u16) -> Vec<(String, String, String)> {
    let Some(v) = api(port, "/api/v1/alerts").await else {
        return Vec::new();
    };
    let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    v["data"]["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            (
                s(&a["labels"]["alertname"]),
                s(&a["labels"]["cluster"]),
                s(&a["state"]),
            )
        })
        .collect()
}

fn agent(cluster: &str, hub: std::net::SocketAddr, dir: &Path) -> Process {
    let examples = repo().join("spoke-agent/examples/aws-healthy");
    let own = dir.join(cluster);
    std::fs::create_dir_all(&own).unwrap();
    for f in std::fs::read_dir(examples).unwrap() {
        let p = f.unwrap().path();
        if p.is_file() {
            std::fs::copy(&p, own.join(p.file_name().unwrap())).unwrap();
        }
    }
    Process(
        Command::new(env!("CARGO_BIN_EXE_gwhub-agent"))
            .args(["run", "--insecure", "--cluster", cluster])
            .args(["--hub", &format!("http://{hub}")])
            .arg("--from-dir")
            .arg(&own)
            .args(["--heartbeat", "200ms"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_an_agent_fires_the_stale_cluster_alert_naming_it() {
    if !Path::new(PROMETHEUS).exists() {
        let strict = std::env::var("GWHUB_REQUIRE_PROMETHEUS").is_ok_and(|v| v == "1");
        assert!(!strict, "no {PROMETHEUS}: run scripts/prometheus.sh");
        eprintln!("SKIPPED: no {PROMETHEUS} (scripts/prometheus.sh installs it)");
        return;
    }
    let dir = temp_dir("prometheus");
    let (ingest, dashboard, metrics) = (free_addr(), free_addr(), free_addr());
    let _hub = Process(
        Command::new(env!("CARGO_BIN_EXE_gwhub"))
            .args(["serve", "--no-kube", "--insecure", "--stale-after", "2s"])
            .args(["--listen", &ingest.to_string()])
            .args(["--dashboard-listen", &dashboard.to_string()])
            .args(["--metrics-listen", &metrics.to_string()])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut east = agent("east", ingest, &dir);
    let _west = agent("west", ingest, &dir);
    gwhub_test_kit::wait::until(
        Duration::from_secs(30),
        || async {
            if http_status(metrics.port(), "/readyz").await != 200 {
                return Default::default();
            }
            scrape(metrics.port()).await
        },
        |m| {
            ["east", "west"].iter().all(|c| {
                m.get(&format!("gwhub_cluster_connected{{cluster=\"{c}\"}}")) == Some(&1)
                    && m.get(&format!("gwhub_cluster_stale{{cluster=\"{c}\"}}")) == Some(&0)
            })
        },
    )
    .await;

    std::fs::write(dir.join("rules.yaml"), shipped_rules()).unwrap();
    let prom_port = free_addr().port();
    let config = [
        "global:",
        "  scrape_interval: 1s",
        "  evaluation_interval: 1s",
        "rule_files:",
        "  - rules.yaml",
        "scrape_configs:",
        "  - job_name: gwhub",
        "    static_configs:",
        &format!("      - targets: ['{metrics}']"),
        "        labels:",
        "          namespace: gwhub-system",
        "          pod: gwhub-test",
    ];
    std::fs::write(dir.join("prometheus.yml"), config.join("\n") + "\n").unwrap();
    let _prometheus = Process(
        Command::new(PROMETHEUS)
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    // Scraping the hub with the rules loaded: both clusters fresh, no alert.
    gwhub_test_kit::wait::until(
        Duration::from_secs(60),
        || api(prom_port, "/api/v1/query?query=gwhub_cluster_stale"),
        |v| {
            v.as_ref()
                .and_then(|v| v["data"]["result"].as_array())
                .is_some_and(|r| r.len() == 2)
        },
    )
    .await;
    let before = alerts(prom_port).await;
    assert!(
        !before.iter().any(|(name, ..)| name == "GwhubClusterStale"),
        "{before:?}"
    );

    // East's agent stops: stale after 2s, firing after the rule's `for`
    // (1m), naming east and not west.
    east.kill();
    let firing = gwhub_test_kit::wait::until(
        Duration::from_secs(150),
        || alerts(prom_port),
        |a| {
            a.iter()
                .any(|(n, c, s)| n == "GwhubClusterStale" && c == "east" && s == "firing")
        },
    )
    .await;
    let stale: Vec<_> = firing
        .iter()
        .filter(|(n, ..)| n == "GwhubClusterStale")
        .collect();
    assert_eq!(stale.len(), 1, "{firing:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The PodMonitors scrape what the Deployments serve, and the probes ask
/// it: each selects its Deployment's pod labels and names the container
/// port `--metrics-listen` binds, where `/readyz` and `/healthz` are
/// probed; the kustomization lists files that exist.
#[test]
fn pod_monitors_and_probes_match_the_deployments() {
    let read = |p: &str| gwhub_spoke_rules::manifest::read_paths(&[repo().join(p)]).unwrap();
    let kustomization = read("manifests/monitoring/kustomization.yaml");
    for r in kustomization[0].value["resources"].as_array().unwrap() {
        let p = repo()
            .join("manifests/monitoring")
            .join(r.as_str().unwrap());
        assert!(p.exists(), "{} missing", p.display());
    }
    let monitors = read("manifests/monitoring/podmonitors.yaml");
    for (monitor, deployment) in [
        ("gwhub", "manifests/hub/deployment.yaml"),
        ("gwhub-agent", "manifests/agent/deployment.yaml"),
    ] {
        let m = monitors
            .iter()
            .find(|o| o.kind == "PodMonitor" && o.value["metadata"]["name"] == monitor)
            .unwrap_or_else(|| panic!("no PodMonitor {monitor}"));
        let d = &read(deployment)[0].value;
        let labels = &d["spec"]["template"]["metadata"]["labels"];
        let selector = m.value["spec"]["selector"]["matchLabels"]
            .as_object()
            .unwrap();
        assert!(!selector.is_empty());
        for (k, v) in selector {
            assert_eq!(&labels[k], v, "{monitor}: label {k}");
        }
        let endpoint = &m.value["spec"]["podMetricsEndpoints"][0];
        assert_eq!(endpoint["path"], "/metrics", "{monitor}");
        let port = endpoint["port"].as_str().unwrap();
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        let number = c["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == port)
            .unwrap_or_else(|| panic!("{deployment}: no port {port}"))["containerPort"]
            .as_u64()
            .unwrap();
        let listen = format!("--metrics-listen=0.0.0.0:{number}");
        assert!(
            c["args"].as_array().unwrap().iter().any(|a| a == &listen),
            "{deployment}: no {listen}"
        );
        for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
            assert_eq!(c[probe]["httpGet"]["port"], port, "{deployment}: {probe}");
            assert_eq!(c[probe]["httpGet"]["path"], path, "{deployment}: {probe}");
        }
    }
}
