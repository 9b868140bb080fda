//! End to end over real processes and loopback TCP: two `gwhub-agent run
//! --from-dir` agents (different clusters, same Gateway) feed one
//! `gwhub serve --no-kube --insecure`, and the Dashboard API shows their
//! aggregate, following a file change and surviving a hub crash.
//!
//! The hub binary is built on demand (`cargo build -p gwhub --bin gwhub`,
//! a no-op when fresh), since a test can only name its own package's binaries.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gwhub_proto::v1::{
    self, AggregatedGateway, ConditionStatus, dashboard_client::DashboardClient,
};
use gwhub_test_kit::procs::{Process, agent_binary, free_addr, gwhub_binary, temp_dir};

/// A child process with quiet logs, killed on drop, so a failed test leaves
/// nothing behind.
fn spawn(cmd: &mut Command) -> Process {
    Process(
        cmd.env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// Writes via a rename, as editors do.
fn write(dir: &Path, file: &str, text: &str) {
    let tmp = dir.join(format!(".{file}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(file)).unwrap();
}

fn copy_example(name: &str, to: &Path) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name);
    for entry in std::fs::read_dir(from).unwrap() {
        let p = entry.unwrap().path();
        if p.is_file() {
            let file = p.file_name().unwrap().to_str().unwrap();
            write(to, file, &std::fs::read_to_string(&p).unwrap());
        }
    }
}

const LB_HOSTNAME_LINE: &str =
    "    ingress:\n    - hostname: a1b2c3d4e5f6-1234567890.us-east-1.elb.amazonaws.com\n";

fn condition<'a>(gw: &'a AggregatedGateway, type_: &str) -> Option<&'a v1::Condition> {
    gw.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.r#type == type_)
}

async fn gateways(dashboard: SocketAddr) -> Vec<AggregatedGateway> {
    let Ok(mut client) = DashboardClient::connect(format!("http://{dashboard}")).await else {
        return Vec::new();
    };
    match client
        .list_gateways(v1::ListGatewaysRequest::default())
        .await
    {
        Ok(r) => r.into_inner().gateways,
        Err(_) => Vec::new(),
    }
}

/// Polls the Dashboard until `pred` holds (bounded); returns the Gateways.
async fn wait_dashboard(
    dashboard: SocketAddr,
    what: &str,
    timeout: Duration,
    pred: impl Fn(&[AggregatedGateway]) -> bool,
) -> Vec<AggregatedGateway> {
    let deadline = Instant::now() + timeout;
    loop {
        let gws = gateways(dashboard).await;
        if pred(&gws) {
            return gws;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; dashboard shows {gws:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn lb_ready(gws: &[AggregatedGateway]) -> Option<(i32, String)> {
    let gw = gws.iter().find(|g| g.name == "default-gateway")?;
    if gw.clusters != ["east", "west"] {
        return None;
    }
    condition(gw, "LoadBalancerReady").map(|c| (c.status, c.message.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_feed_one_hub_and_the_dashboard_follows_file_changes() {
    let hub_bin = gwhub_binary();
    let (ingest, dashboard) = (free_addr(), free_addr());
    let mut hub = spawn(
        Command::new(&hub_bin)
            .args(["serve", "--no-kube", "--insecure"])
            .args(["--listen", &ingest.to_string()])
            .args(["--dashboard-listen", &dashboard.to_string()]),
    );

    let east = temp_dir("east");
    let west = temp_dir("west");
    copy_example("aws-healthy", &east);
    copy_example("aws-healthy", &west);
    // West's load balancer has no address yet.
    let service = std::fs::read_to_string(west.join("service.yaml")).unwrap();
    let pending = service.replace(LB_HOSTNAME_LINE, "    ingress: []\n");
    assert_ne!(service, pending, "example changed; update this test");
    write(&west, "service.yaml", &pending);

    let agent = |cluster: &str, dir: &Path| {
        spawn(
            Command::new(agent_binary())
                .args(["run", "--insecure", "--cluster", cluster])
                .args(["--hub", &format!("http://{ingest}")])
                .arg("--from-dir")
                .arg(dir),
        )
    };
    let mut agents = [agent("east", &east), agent("west", &west)];

    // The aggregate: not ready, because of west only.
    let gws = wait_dashboard(
        dashboard,
        "both clusters aggregated",
        Duration::from_secs(20),
        |g| lb_ready(g).is_some(),
    )
    .await;
    let (status, message) = lb_ready(&gws).unwrap();
    assert_eq!(status, ConditionStatus::False as i32, "{gws:#?}");
    assert!(message.starts_with("west "), "{message}");
    assert!(!message.contains("east"), "{message}");

    // West's load balancer gets its address: the aggregate turns True
    // shortly after the file changes.
    let edited = Instant::now();
    write(&west, "service.yaml", &service);
    wait_dashboard(
        dashboard,
        "LoadBalancerReady True in all clusters",
        Duration::from_secs(10),
        |g| lb_ready(g).is_some_and(|(s, _)| s == ConditionStatus::True as i32),
    )
    .await;
    let took = edited.elapsed();
    eprintln!("file change to dashboard: {took:?}");
    assert!(took < Duration::from_secs(2), "took {took:?}");

    // Both agents are connected clusters of the hub.
    let mut client = DashboardClient::connect(format!("http://{dashboard}"))
        .await
        .unwrap();
    let clusters = client
        .list_clusters(v1::ListClustersRequest {})
        .await
        .unwrap()
        .into_inner()
        .clusters;
    let names: Vec<_> = clusters
        .iter()
        .map(|c| (c.name.as_str(), c.connected, c.gateway_count))
        .collect();
    assert_eq!(names, [("east", true, 1), ("west", true, 1)]);

    // The hub crashes (SIGKILL) and comes back on the same addresses: both
    // agents reconnect and resend snapshots, and the aggregate returns.
    hub.0.kill().unwrap();
    hub.0.wait().unwrap();
    hub = spawn(
        Command::new(&hub_bin)
            .args(["serve", "--no-kube", "--insecure"])
            .args(["--listen", &ingest.to_string()])
            .args(["--dashboard-listen", &dashboard.to_string()]),
    );
    wait_dashboard(
        dashboard,
        "the aggregate after a hub restart",
        Duration::from_secs(20),
        |g| lb_ready(g).is_some_and(|(s, _)| s == ConditionStatus::True as i32),
    )
    .await;

    for a in &mut agents {
        assert!(a.terminate().success());
    }
    assert!(hub.terminate().success());
    let _ = std::fs::remove_dir_all(&east);
    let _ = std::fs::remove_dir_all(&west);
}
