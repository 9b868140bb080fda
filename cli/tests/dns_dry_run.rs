//! `gwhub serve --no-kube --dns-dry-run` with the real binaries: two
//! agents (`gwhub-agent run --from-dir`, reading the demo's manifests)
//! report, the hub computes fleet DNS from their reports and sends
//! nothing, and `gwhubctl get dns` / `dns plan` show the records it would
//! publish; east's load balancer going takes east out of them, with the
//! rule it fails. Waits are bounded (`wait::until_named`).

use std::process::{Command, Stdio};

use gwhub::SimCluster;
use gwhub_test_kit::procs::{Process, free_addr, temp_dir};
use gwhub_test_kit::wait::{WAIT, until_named};
use serde_json::Value;

const HOST: &str = "*.gwapi.apps.demo.example.com";

/// `gwhubctl --server URL ARGS`: its stdout, or its stderr as the error.
async fn gwhubctl(server: &str, args: &[&str]) -> Result<String, String> {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_gwhubctl"))
        .arg("--server")
        .arg(server)
        .args(args)
        .output()
        .await
        .map_err(|e| e.to_string())?;
    match out.status.success() {
        true => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}

/// HOST's published A targets and each cluster's `(cluster, reason)` as
/// `get dns -o json` prints them (`None`: not listed yet).
async fn shown(server: &str) -> Option<(Value, Vec<(String, String)>)> {
    let text = gwhubctl(server, &["get", "dns", "-o", "json"]).await.ok()?;
    let list: Value = serde_json::from_str(&text).ok()?;
    let item = list["items"]
        .as_array()?
        .iter()
        .find(|i| i["hostname"] == HOST)?
        .clone();
    let clusters = item["clusters"]
        .as_array()?
        .iter()
        .map(|c| {
            let cluster = c["cluster"].as_str().unwrap_or_default().to_owned();
            let reason = c["reason"].as_str().unwrap_or("eligible").to_owned();
            (cluster, reason)
        })
        .collect();
    Some((item["published"]["A"].clone(), clusters))
}

/// The hub Gateway's `gwhub.io/DNSPublished` `(status, reason)` as
/// `describe gateway -o json` prints it (`None`: not there yet).
async fn dns_published(server: &str) -> Option<(String, String)> {
    let text = gwhubctl(
        server,
        &[
            "describe",
            "gateway",
            "openshift-ingress/default-gateway",
            "-o",
            "json",
        ],
    )
    .await
    .ok()?;
    let gw: Value = serde_json::from_str(&text).ok()?;
    find_condition(&gw, "gwhub.io/DNSPublished")
}

/// The first object with `"type": type_` anywhere in `v`, as `(status, reason)`.
fn find_condition(v: &Value, type_: &str) -> Option<(String, String)> {
    match v {
        Value::Object(m) if m.get("type").and_then(Value::as_str) == Some(type_) => Some((
            m.get("status")?.as_str()?.to_owned(),
            m.get("reason")?.as_str()?.to_owned(),
        )),
        Value::Object(m) => m.values().find_map(|x| find_condition(x, type_)),
        Value::Array(a) => a.iter().find_map(|x| find_condition(x, type_)),
        _ => None,
    }
}

#[tokio::test]
async fn a_hub_without_kubernetes_shows_the_dns_it_would_publish() {
    let dir = temp_dir("dns-dry-run");
    let mut clusters: Vec<SimCluster> = (0..2).map(|i| SimCluster::new(i, &dir)).collect();
    for c in &clusters {
        c.write().unwrap();
    }
    let (ingest, dashboard) = (free_addr(), free_addr());
    let _hub = Process(
        Command::new(env!("CARGO_BIN_EXE_gwhub"))
            .args(["serve", "--no-kube", "--insecure", "--listen"])
            .arg(ingest.to_string())
            .arg("--dashboard-listen")
            .arg(dashboard.to_string())
            .args(["--dns-zone", "apps.demo.example.com", "--dns-dry-run"])
            .args(["--dns-rise", "1s"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let _agents: Vec<Process> = clusters
        .iter()
        .map(|c| {
            Process(
                Command::new(env!("CARGO_BIN_EXE_gwhub-agent"))
                    .args(["run", "--insecure", "--cluster", &c.name, "--hub"])
                    .arg(format!("http://{ingest}"))
                    .arg("--from-dir")
                    .arg(c.dir())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();
    let server = format!("http://{dashboard}");
    let eligible = |c: &str| (c.to_owned(), "eligible".to_owned());
    until_named(
        "both clusters published",
        WAIT,
        || shown(&server),
        |s| {
            *s == Some((
                serde_json::json!(["203.0.113.10", "203.0.113.11"]),
                vec![eligible("east"), eligible("west")],
            ))
        },
    )
    .await;
    // The hub Gateway's condition says the dry run's decision.
    until_named(
        "DNSPublished True on the hub Gateway",
        WAIT,
        || dns_published(&server),
        |c| {
            c.as_ref()
                .is_some_and(|(status, reason)| status == "True" && reason == "Published")
        },
    )
    .await;
    let table = gwhubctl(&server, &["get", "dns"]).await.unwrap();
    assert!(
        table.contains("A=203.0.113.10,203.0.113.11") && table.contains("2/2"),
        "{table}"
    );

    // east's load balancer goes: it leaves the records, saying why.
    clusters[0].toggle();
    clusters[0].write().unwrap();
    until_named(
        "east left out",
        WAIT,
        || shown(&server),
        |s| {
            *s == Some((
                serde_json::json!(["203.0.113.11"]),
                vec![
                    ("east".to_owned(), "LoadBalancerNotReady".to_owned()),
                    eligible("west"),
                ],
            ))
        },
    )
    .await;
    let plan = gwhubctl(&server, &["dns", "plan"]).await.unwrap();
    for want in [
        "*.gwapi.apps.demo.example.com (hub Gateway openshift-ingress/default-gateway, zone apps.demo.example.com): Published",
        "published: A=203.0.113.11",
        "rule 2: LoadBalancerNotReady",
    ] {
        assert!(plan.contains(want), "{want} not in\n{plan}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
