//! The shipped alerts against a real Prometheus (Debian's `prometheus`):
//! a `gwhub serve --no-kube` hub with two `gwhub-agent run --from-dir`
//! agents, Prometheus scraping the hub every second and evaluating the
//! rules of manifests/monitoring/prometheusrule.yaml (taken from it as
//! scripts/check-monitoring.sh does) every second. Stopping one agent fires
//! `GwhubClusterStale` naming that cluster, and only it.
//!
//! Needs scripts/prometheus.sh ([`gwhub_test_kit::prometheus`]). Where
//! `prometheus` is missing the test says it was skipped, except under
//! `GWHUB_REQUIRE_PROMETHEUS=1` (scripts/test.sh), where that is a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use gwhub_test_kit::procs::{Process, free_addr, http_status, scrape, temp_dir};
use gwhub_test_kit::prometheus::{Prometheus, Target, available};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
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
    if !available("stopping_an_agent_fires_the_stale_cluster_alert_naming_it") {
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

    let prometheus = Prometheus::start(
        &dir.join("prometheus"),
        &[Target {
            job: "gwhub",
            pod: "gwhub-test",
            addr: metrics.to_string(),
        }],
    );
    // Scraping the hub with the rules loaded: both clusters fresh, no alert.
    gwhub_test_kit::wait::until(
        Duration::from_secs(60),
        || prometheus.query("gwhub_cluster_stale"),
        |r| r.len() == 2,
    )
    .await;
    let before = prometheus.alerts().await;
    assert!(
        !before.iter().any(|(name, ..)| name == "GwhubClusterStale"),
        "{before:?}"
    );

    // East's agent stops: stale after 2s, firing after the rule's `for`
    // (1m), naming east and not west.
    east.kill();
    let firing = gwhub_test_kit::wait::until(
        Duration::from_secs(150),
        || prometheus.alerts(),
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
    for generator in kustomization[0].value["configMapGenerator"]
        .as_array()
        .unwrap()
    {
        for f in generator["files"].as_array().unwrap() {
            let p = repo()
                .join("manifests/monitoring")
                .join(f.as_str().unwrap());
            let text = std::fs::read_to_string(&p).unwrap();
            serde_json::from_str::<serde_json::Value>(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        }
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
