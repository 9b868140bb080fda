//! The shipped Grafana dashboard (manifests/monitoring/gwhub-dashboard.json)
//! against a real Prometheus scraping the real binaries: `gwhub serve` in
//! Kubernetes mode (a real API server, installed as the README says)
//! writing a hub Gateway, and two `gwhub-agent run --from-dir` agents, one
//! of which then changes. Every panel's query returns series.
//!
//! Needs the API server assets (scripts/kube-assets.sh) and Prometheus
//! (scripts/prometheus.sh); skipped without them unless
//! `GWHUB_REQUIRE_KUBE=1` / `GWHUB_REQUIRE_PROMETHEUS=1`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use gwhub_test_kit::apiserver::{Fleet, require_assets};
use gwhub_test_kit::install::{HUB_SA, install_hub};
use gwhub_test_kit::kube_objects::{NS, gateway};
use gwhub_test_kit::procs::{Process, agent_binary, free_port, gwhub_binary, http_status, scrape};
use gwhub_test_kit::prometheus::{Prometheus, Target, available};
use gwhub_test_kit::wait::{until, until_named};

const GW: &str = "default-gateway";

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn spawn(cmd: &mut Command, log: &Path) -> Process {
    Process(
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("start {:?}: {e}", cmd.get_program())),
    )
}

/// A `--from-dir` agent for `cluster` reading a copy of the aws-healthy
/// example (Gateway `openshift-ingress/default-gateway`) in `dir/cluster`.
fn agent(bin: &Path, dir: &Path, cluster: &str, ingest: u16, metrics: u16) -> Process {
    let own = dir.join(cluster);
    std::fs::create_dir_all(&own).unwrap();
    let example = repo().join("spoke-agent/examples/aws-healthy");
    for f in std::fs::read_dir(example).unwrap() {
        let p = f.unwrap().path();
        if p.is_file() {
            std::fs::copy(&p, own.join(p.file_name().unwrap())).unwrap();
        }
    }
    spawn(
        Command::new(bin)
            .args(["run", "--insecure", "--cluster", cluster])
            .args(["--hub", &format!("http://127.0.0.1:{ingest}")])
            .arg("--from-dir")
            .arg(&own)
            .args(["--heartbeat", "1s"])
            .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")]),
        &dir.join(format!("agent-{cluster}.log")),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_panel_query_returns_series() {
    let test = "every_dashboard_panel_query_returns_series";
    if !available(test) || !require_assets(test) {
        return;
    }
    let (hub_bin, agent_bin) = (gwhub_binary(), agent_binary());
    let fleet = Fleet::start(&["mgmt"]).await.expect("start the fleet");
    let mgmt = fleet.cluster("mgmt").client().await.unwrap();
    install_hub(fleet.cluster("mgmt")).await;
    gateway(&mgmt, NS, GW, "kuadrant-multi-cluster", None).await;

    let (ingest, dashboard, metrics) = (free_port(), free_port(), free_port());
    let _hub = spawn(
        Command::new(&hub_bin)
            .arg("serve")
            .args(["--listen", &format!("127.0.0.1:{ingest}")])
            .args(["--dashboard-listen", &format!("127.0.0.1:{dashboard}")])
            .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
            .args(["--insecure", "--namespace", "gwhub-system"])
            .args(["--gateway-namespace", NS])
            .arg("--kubeconfig")
            .arg(fleet.cluster("mgmt").kubeconfig_as(HUB_SA))
            .env("POD_NAME", "gwhub-monitoring")
            .env("RUST_LOG", "info"),
        &fleet.dir.join("gwhub.log"),
    );
    let (east_metrics, west_metrics) = (free_port(), free_port());
    let _east = agent(&agent_bin, &fleet.dir, "east", ingest, east_metrics);
    let _west = agent(&agent_bin, &fleet.dir, "west", ingest, west_metrics);
    // Ready (watches synced), and the hub Gateway written.
    until(
        Duration::from_secs(60),
        || async {
            if http_status(metrics, "/readyz").await != 200 {
                return Default::default();
            }
            scrape(metrics).await
        },
        |m| m.get("gwhub_status_writes_total").is_some_and(|w| *w >= 1),
    )
    .await;

    let prometheus = Prometheus::start(
        &fleet.dir.join("prometheus"),
        &[
            Target {
                job: "gwhub",
                pod: "gwhub-0",
                addr: format!("127.0.0.1:{metrics}"),
            },
            Target {
                job: "gwhub-agent",
                pod: "gwhub-agent-east",
                addr: format!("127.0.0.1:{east_metrics}"),
            },
            Target {
                job: "gwhub-agent",
                pod: "gwhub-agent-west",
                addr: format!("127.0.0.1:{west_metrics}"),
            },
        ],
    );
    until(
        Duration::from_secs(60),
        || prometheus.query("up == 1"),
        |up| up.len() == 3,
    )
    .await;

    // A change on east, after Prometheus started: its propagation to the
    // hub Gateway's write is in the rates.
    let service = fleet.dir.join("east/service.yaml");
    let text = std::fs::read_to_string(&service).unwrap();
    let lost = text.replace(
        "    ingress:\n    - hostname: a1b2c3d4e5f6-1234567890.us-east-1.elb.amazonaws.com\n",
        "    ingress: []\n",
    );
    assert_ne!(text, lost, "example changed; update this test");
    let tmp = fleet.dir.join("east/.service.yaml.tmp");
    std::fs::write(&tmp, lost).unwrap();
    std::fs::rename(&tmp, &service).unwrap();
    until(
        Duration::from_secs(60),
        || prometheus.query("gwhub_propagation_seconds_count > 0"),
        |r| !r.is_empty(),
    )
    .await;
    // Every rate needs samples on both sides of the change: the panels are
    // queried until each returns a series (Prometheus scrapes every second),
    // and the ones that never do are named.
    let board: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("manifests/monitoring/gwhub-dashboard.json")).unwrap(),
    )
    .unwrap();
    let panels = board["panels"].as_array().unwrap();
    assert!(panels.len() >= 10, "{} panels", panels.len());
    let mut queries = 0;
    let mut exprs = Vec::new();
    for panel in panels {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            queries += 1;
            exprs.push((panel["title"].to_string(), expr.to_owned()));
        }
    }
    let _none_empty = until_named(
        "panels whose query never returned a series",
        Duration::from_secs(60),
        || async {
            let mut empty = Vec::new();
            for (title, expr) in &exprs {
                if prometheus.query(expr).await.is_empty() {
                    empty.push(format!("{title}: {expr}"));
                }
            }
            empty
        },
        Vec::is_empty,
    )
    .await;
    assert!(queries >= panels.len(), "a panel without a query");
}
