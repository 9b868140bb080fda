//! The web status page in a real browser: Debian's chromium driven by
//! playwright-core (tests/browser/page.mjs) against a hub serving
//! `--web-listen`, fed by the demo's simulated clusters (real agents over
//! loopback gRPC, reading directories the test rewrites). The script asks
//! this test for a change on a cluster, or to stop a cluster's agent, on
//! its stdout; screenshots go to `<target>/browser-artifacts/`.
//!
//! Needs scripts/browser.sh (chromium, and playwright-core in
//! `GWHUB_BROWSER_DIR`, else `<target>/browser-node`). Where they are
//! missing the test says it was skipped, except under
//! `GWHUB_REQUIRE_BROWSER=1` (scripts/test.sh), where that is a failure.
//!
//! The hub runs fleet DNS as the demo does (a dry run from the reports):
//! the page's DNS section shows east leaving the record, and why, when its
//! load balancer goes.
//!
//! `the_page_groups_a_fleet_by_cause` fills the index directly with 120
//! clusters, 37 of them failing the same way, for the causes view and the
//! compact overview.
//!
//! `page_figures_at_scale` (ignored; run by hand) loads the page at
//! 100 clusters x 100 Gateways and 1,000 x 10 and prints load and update
//! times for docs/benchmarks.md.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub::SimCluster;
use gwhub_agent::runtime::dir_source::engine_evaluate;
use gwhub_agent::runtime::{DirSource, HubConfig as AgentConfig, run_dir_agent};
use gwhub_hub::serve::{Hub, HubConfig};
use gwhub_hub_rules::aggregate::GatewayKey;
use gwhub_index::Change;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")))
}

/// playwright-core's `node_modules`, or `None` (test skipped) when
/// scripts/browser.sh has not run.
fn node_modules(test: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("GWHUB_BROWSER_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("browser-node"));
    let modules = dir.join("node_modules");
    let ready = modules.join("playwright-core").is_dir()
        && Path::new("/usr/bin/chromium").exists()
        && std::process::Command::new("node")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    if ready {
        return Some(modules);
    }
    let strict = std::env::var("GWHUB_REQUIRE_BROWSER").is_ok_and(|v| v == "1");
    assert!(
        !strict,
        "no chromium + playwright-core (looked in {}): run scripts/browser.sh",
        dir.display()
    );
    eprintln!(
        "SKIPPED {test}: no chromium + playwright-core at {} (scripts/browser.sh installs them)",
        dir.display()
    );
    None
}

/// Runs page.mjs, answering its requests with `act`, until it exits
/// (bounded by `limit`); returns its output.
async fn run_script(
    modules: &Path,
    url: &str,
    args: &[&str],
    limit: Duration,
    mut act: impl FnMut(&str) -> String,
) -> String {
    let artifacts = target_dir().join("browser-artifacts");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/browser/page.mjs");
    let mut child = tokio::process::Command::new("node")
        .arg(script)
        .arg(url)
        .arg(&artifacts)
        .args(args)
        .env("GWHUB_NODE_MODULES", modules)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run node");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = child.stderr.take().unwrap();
    let mut log = String::new();
    let talk = async {
        while let Ok(Some(line)) = lines.next_line().await {
            log.push_str(&line);
            log.push('\n');
            if line.starts_with("CHANGE ") || line.starts_with("STOP ") {
                let answer = act(&line);
                stdin
                    .write_all(format!("{answer}\n").as_bytes())
                    .await
                    .unwrap();
            }
        }
    };
    let finished = tokio::time::timeout(limit, talk).await.is_ok();
    let status = match finished {
        true => tokio::time::timeout(Duration::from_secs(30), child.wait())
            .await
            .ok()
            .and_then(Result::ok),
        false => None,
    };
    let _ = child.kill().await;
    let mut err = String::new();
    let _ = stderr.read_to_string(&mut err).await;
    assert!(
        status.is_some_and(|s| s.success()) && log.contains("\nPASS\n"),
        "the browser script failed ({status:?}):\n{log}\n{err}"
    );
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_the_fleet_live_in_a_browser() {
    let Some(modules) = node_modules("the_page_shows_the_fleet_live_in_a_browser") else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    // Four: cluster-4 fails like east (its load balancer), one cause.
    let mut clusters: Vec<SimCluster> = (0..4).map(|i| SimCluster::new(i, root.path())).collect();
    for c in &clusters {
        c.write().unwrap();
    }
    // Stale after 2s, so a stopped agent is marked within the test.
    let stale_after = Duration::from_secs(2);
    let mut hub = Hub::start(HubConfig {
        web_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..HubConfig::loopback(stale_after)
    })
    .await
    .unwrap();
    // Fleet DNS as the demo runs it: a dry run from the reports.
    let dns = gwhub_dns::DnsFlags {
        zones: vec!["apps.demo.example.com".into()],
        ttl: Duration::from_secs(30),
        max_targets: 32,
        rise: Duration::from_secs(1),
        resync: Duration::from_secs(300),
        dry_run: true,
        no_kube: true,
        ..Default::default()
    };
    hub.start_dns_without_kube(dns.check("test", stale_after).unwrap().unwrap());
    let mut stops: HashMap<String, CancellationToken> = HashMap::new();
    for c in &clusters {
        let stop = CancellationToken::new();
        let source = DirSource::new(c.dir(), engine_evaluate(Default::default()))
            .unwrap()
            .poll_interval(Duration::from_millis(100));
        let agent = AgentConfig::new(format!("http://{}", hub.ingest_addr), &c.name);
        tokio::spawn(run_dir_agent(agent, source, stop.clone()));
        stops.insert(c.name.clone(), stop);
    }
    let url = format!("http://{}/", hub.web_addr.unwrap());
    let log = run_script(
        &modules,
        &url,
        &["test"],
        Duration::from_secs(150),
        |line| {
            let mut words = line.split_whitespace().skip(1);
            let name = words.next().unwrap_or_default();
            if line.starts_with("STOP ") {
                stops[name].cancel();
            } else {
                let c = clusters.iter_mut().find(|c| c.name == name).unwrap();
                c.toggle();
                c.write().unwrap();
            }
            "DONE".to_owned()
        },
    )
    .await;
    eprintln!("{log}");
    for s in stops.values() {
        s.cancel();
    }
    let _ = hub.shutdown().await;
}

/// A cluster's status of one Gateway: ready, or with Programmed False.
fn status(cluster: &str, ready: bool) -> GatewayStatus {
    let cond = |t: &str, ok: bool| {
        serde_json::json!({
            "type": t, "status": if ok { "True" } else { "False" },
            "reason": if ok { t } else { "Pending" },
            "message": if ok { "" } else { "waiting for the load balancer" },
            "lastTransitionTime": "2026-11-24T00:00:00Z", "observedGeneration": 1,
        })
    };
    serde_json::from_value(serde_json::json!({
        "conditions": [cond("Accepted", true), cond("Programmed", ready)],
        "addresses": [{"type": "IPAddress", "value": format!("10.0.0.{}", cluster.len())}],
        "listeners": [{"name": "http", "attachedRoutes": 1,
                       "supportedKinds": [{"kind": "HTTPRoute"}],
                       "conditions": [cond("Accepted", true)]}],
    }))
    .unwrap()
}

/// A cluster's status of one Gateway whose load balancer the cloud refuses:
/// the same quota failure everywhere, in the cluster's own words.
fn quota_status(cluster: &str, i: usize) -> GatewayStatus {
    serde_json::from_value(serde_json::json!({
        "conditions": [
            {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
             "lastTransitionTime": "2026-11-24T00:00:00Z", "observedGeneration": 1},
            {"type": "LoadBalancerReady", "status": "False", "reason": "SyncLoadBalancerFailed",
             "message": format!("Service openshift-ingress/gw-{cluster} ({}): Error 403: QUOTA_EXCEEDED - Quota 'IN_USE_ADDRESSES' exceeded. Limit: {}.0 in region us-east{}.", format_args!("10.{}.0.{}", i / 200, i % 200 + 1), 8 + i % 3, 1 + i % 4),
             "lastTransitionTime": "2026-11-24T00:00:00Z", "observedGeneration": 1},
        ],
    }))
    .unwrap()
}

/// The page at 120 clusters, 37 failing with the same quota message (each
/// in its own words): one cause of 37 clusters at the top, a summary bar
/// per hub Gateway instead of 120 columns, and a search that narrows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_groups_a_fleet_by_cause() {
    let Some(modules) = node_modules("the_page_groups_a_fleet_by_cause") else {
        return;
    };
    let hub = Hub::start(HubConfig {
        web_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..HubConfig::loopback(Duration::from_secs(3600))
    })
    .await
    .unwrap();
    let keys: Vec<GatewayKey> = (0..3)
        .map(|g| GatewayKey::new("openshift-ingress", format!("gw-{g}")))
        .collect();
    let mut sessions = Vec::new();
    for c in 0..120usize {
        let name = format!("c-{c:03}");
        let session = hub.index.connect(&name, "test").unwrap();
        let all: BTreeMap<GatewayKey, GatewayStatus> = keys
            .iter()
            .enumerate()
            .map(|(g, k)| {
                // Every third cluster up to 37 of them fails on gw-0.
                let failing = g == 0 && c % 3 == 0 && c / 3 < 37;
                let s = if failing {
                    quota_status(&name, c)
                } else {
                    status(&name, true)
                };
                (k.clone(), s)
            })
            .collect();
        hub.index.replace_snapshot(&session, all).unwrap();
        sessions.push(session);
    }
    let url = format!("http://{}/", hub.web_addr.unwrap());
    let log = run_script(&modules, &url, &["scale"], Duration::from_secs(150), |_| {
        "DONE".to_owned()
    })
    .await;
    eprintln!("{log}");
    let _ = hub.shutdown().await;
}

/// Figures for docs/benchmarks.md: the page at two fleet shapes. Reports
/// go into the index directly (the page's cost, not the agents').
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "figures, not a test: cargo test -p gwhub --test integration browser:: -- --ignored --nocapture"]
async fn page_figures_at_scale() {
    let Some(modules) = node_modules("page_figures_at_scale") else {
        return;
    };
    for (clusters, gateways) in [(100usize, 100usize), (1000, 10)] {
        let hub = Hub::start(HubConfig {
            web_listen: Some("127.0.0.1:0".parse().unwrap()),
            ..HubConfig::loopback(Duration::from_secs(3600))
        })
        .await
        .unwrap();
        let keys: Vec<GatewayKey> = (0..gateways)
            .map(|g| GatewayKey::new("openshift-ingress", format!("gw-{g:04}")))
            .collect();
        let mut sessions = Vec::new();
        for c in 0..clusters {
            let name = format!("c-{c:04}");
            let session = hub.index.connect(&name, "bench").unwrap();
            let all: BTreeMap<GatewayKey, GatewayStatus> = keys
                .iter()
                .map(|k| (k.clone(), status(&name, true)))
                .collect();
            hub.index.replace_snapshot(&session, all).unwrap();
            sessions.push((name, session));
        }
        // Wait until everything is aggregated.
        let mut views = hub.index.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(120), async {
            loop {
                let done = {
                    let v = views.borrow_and_update();
                    v.gateways.len() == gateways
                        && v.gateways.values().all(|g| g.clusters.len() == clusters)
                };
                if done {
                    break;
                }
                let _ = views.changed().await;
            }
        })
        .await;
        let url = format!("http://{}/", hub.web_addr.unwrap());
        let index = hub.index.clone();
        let log = run_script(
            &modules,
            &url,
            &["bench", &gateways.to_string()],
            Duration::from_secs(600),
            |line| {
                let i: usize = line
                    .split_whitespace()
                    .nth(1)
                    .and_then(|i| i.parse().ok())
                    .unwrap_or(0);
                let (name, session) = &sessions[(i * 37) % clusters];
                let key = &keys[i % gateways];
                // A distinct (cluster, Gateway) each time, ready until now.
                index
                    .apply(
                        session,
                        vec![Change::Upsert(key.clone(), status(name, false))],
                    )
                    .unwrap();
                format!("{key} {name} not-ready")
            },
        )
        .await;
        for l in log.lines().filter(|l| l.starts_with("FIGURE")) {
            println!("{clusters} clusters x {gateways} Gateways: {l}");
        }
        let _ = hub.shutdown().await;
    }
}
