//! The whole chain: the real `gwhub` and `gwhub-agent` binaries,
//! in Kubernetes mode, against real API servers — one management cluster and
//! two workload clusters, one of them reporting as `cluster_1` (not a valid
//! SectionName). The other actors are simulated with their own field
//! managers: an Istio-like Gateway controller and a load balancer controller
//! on each workload cluster, a DNS controller publishing the records.
//!
//! Phases: (a) the hub Gateway on the management cluster carries the
//! aggregate, accepted by the API server, with `cluster_1` reported as
//! invalid for listeners; (b) a change on a workload cluster reaches it;
//! (c) the hub is killed and restarted, and a watch on the hub Gateway sees
//! no wrong intermediate status; (d) the workload Gateways keep every field
//! the Istio-like writer wrote.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus};
use gwhub_hub_rules::report::ClusterReport;
use gwhub_model::status::same_applied_status as same_status;
use gwhub_test_kit::apiserver::{Fleet, require_assets};
use gwhub_test_kit::install::{AGENT_SA, HUB_SA, install_agent, install_hub};
use gwhub_test_kit::kube_objects::*;
use gwhub_test_kit::procs::{Process, agent_binary, free_port, gwhub_binary, scrape};
use gwhub_test_kit::recorder::Recorder;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;

/// The hub's own namespace: its ClusterReports and its Lease.
const HUB_NS: &str = "gwhub-system";
/// The Gateway's name on every cluster (the hub aggregates `NS/GW`).
const GW: &str = "gw";
const OWN: &str = "kuadrant.io/MultiClusterAggregated";
const EAST_IP: &str = "192.0.2.10";
const C1_IP: &str = "192.0.2.20";
/// Bound on every wait for the chain (agent -> hub -> API server) to react.
const CHAIN: Duration = Duration::from_secs(30);

/// `gwhub serve` in Kubernetes mode against the management cluster,
/// plaintext agents on `ingest`, leader election on (Lease `gwhub-hub` in
/// [`HUB_NS`], identity `gwhub-e2e_<pid>`).
fn start_hub(
    bin: &Path,
    fleet: &Fleet,
    (ingest, dashboard, metrics): (u16, u16, u16),
    log: &str,
) -> Process {
    let mut cmd = Command::new(bin);
    cmd.arg("serve")
        .args(["--listen", &format!("127.0.0.1:{ingest}")])
        .args(["--dashboard-listen", &format!("127.0.0.1:{dashboard}")])
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
        .args(["--insecure", "--namespace", HUB_NS])
        .args(["--gateway-namespace", NS])
        .arg("--kubeconfig")
        .arg(fleet.cluster("mgmt").kubeconfig_as(HUB_SA))
        .env("POD_NAME", "gwhub-e2e")
        .env("RUST_LOG", "info,gwhub=debug");
    Process(spawn(&mut cmd, &fleet.dir.join(log)))
}

/// `gwhub-agent run` in Kubernetes mode against API server `apiserver`,
/// reporting as `cluster`.
fn start_agent(bin: &Path, fleet: &Fleet, apiserver: &str, cluster: &str, ingest: u16) -> Process {
    let mut cmd = Command::new(bin);
    cmd.arg("run")
        .args(["--insecure", "--cluster", cluster])
        .args(["--hub", &format!("http://127.0.0.1:{ingest}")])
        .arg("--kubeconfig")
        .arg(fleet.cluster(apiserver).kubeconfig_as(AGENT_SA))
        .args(["--heartbeat", "1s"])
        .env("RUST_LOG", "info");
    Process(spawn(
        &mut cmd,
        &fleet.dir.join(format!("agent-{cluster}.log")),
    ))
}

fn spawn(cmd: &mut Command, log: &Path) -> std::process::Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("start {:?}: {e}", cmd.get_program()))
}

/// A workload cluster as OpenShift has it: our GatewayClass, DNS zone Z1,
/// Gateway `GW` with its LoadBalancer Service (no address
/// yet) and a managed DNSRecord the DNS controller has published.
async fn workload(client: &Client) {
    gateway_class(client, CLASS, CONTROLLER).await;
    dns_config(client, true).await;
    gateway(client, NS, GW, CLASS, None).await;
    service(client, GW).await;
    dns_record(client, GW, "Managed").await;
    publish(client, GW, "True", "").await;
}

fn typed(gw: &Gateway) -> GatewayStatus {
    gw.status.clone().unwrap_or_default()
}

fn addresses(gw: &Gateway) -> Vec<(String, String)> {
    typed(gw)
        .addresses
        .unwrap_or_default()
        .into_iter()
        .map(|a| (a.r#type.unwrap_or_default(), a.value))
        .collect()
}

fn listener_names(gw: &Gateway) -> Vec<String> {
    typed(gw)
        .listeners
        .unwrap_or_default()
        .into_iter()
        .map(|l| l.name)
        .collect()
}

fn has_address(gw: &Gateway, value: &str) -> bool {
    addresses(gw)
        .iter()
        .any(|(t, v)| t == "kuadrant.io/MultiClusterIPAddress" && v == value)
}

/// The summary conditions as `(type, status, reason, message)`, by type.
fn summary(s: &GatewayStatus) -> Vec<(String, String, String, String)> {
    let mut v: Vec<_> = s
        .conditions
        .iter()
        .flatten()
        .map(|c| {
            (
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone(),
                c.message.clone(),
            )
        })
        .collect();
    v.sort();
    v
}

fn attached_routes(gw: &Gateway, listener: &str) -> Option<i32> {
    typed(gw)
        .listeners
        .unwrap_or_default()
        .into_iter()
        .find(|l| l.name == listener)
        .map(|l| l.attached_routes)
}

#[tokio::test]
async fn fleet_end_to_end_with_the_real_binaries() {
    if !require_assets("fleet_end_to_end_with_the_real_binaries") {
        return;
    }
    // Build both binaries once, before any clock starts (`cargo build`
    // waits for the build lock, which other builds may hold for minutes).
    let (hub_bin, agent_bin) = (gwhub_binary(), agent_binary());
    let start = Instant::now();
    let phase = |what: &str| eprintln!("fleet_e2e: {what} after {:?}", start.elapsed());
    let fleet = Fleet::start(&["mgmt", "east", "cluster_1"])
        .await
        .expect("start the fleet");
    phase("fleet started");
    let mgmt = fleet.cluster("mgmt").client().await.unwrap();
    let east = fleet.cluster("east").client().await.unwrap();
    let c1 = fleet.cluster("cluster_1").client().await.unwrap();

    // Installed as the README says (`kubectl apply -k manifests/` and
    // `manifests/agent/`); the binaries run as their ServiceAccounts. The
    // hub Gateway's spec is the control plane's business, not ours.
    install_hub(fleet.cluster("mgmt")).await;
    for c in ["east", "cluster_1"] {
        install_agent(fleet.cluster(c)).await;
    }
    gateway(&mgmt, NS, GW, "kuadrant-multi-cluster", None).await;

    // Workload clusters: east's load balancer is there, cluster_1's pending;
    // Istio has written its status on both before the agents start.
    workload(&east).await;
    workload(&c1).await;
    provision(&east, &format!("{GW}-lb"), EAST_IP).await;
    let east_istio = istio_status_at(1, "istio programmed", Some(EAST_IP));
    istio_writes_status(&east, GW, east_istio.clone()).await;
    istio_writes_status(&c1, GW, istio_status_at(1, "Address pending", None)).await;

    let (ingest, dashboard, metrics) = (free_port(), free_port(), free_port());
    let mut hub = start_hub(
        &hub_bin,
        &fleet,
        (ingest, dashboard, metrics),
        "gwhub-1.log",
    );
    let _east_agent = start_agent(&agent_bin, &fleet, "east", "east", ingest);
    let _c1_agent = start_agent(&agent_bin, &fleet, "cluster_1", "cluster_1", ingest);

    // The agents write their conditions next to Istio's.
    wait_lb(&east, GW, "LoadBalancerProvisioned").await;
    wait_lb(&c1, GW, "LoadBalancerPending").await;
    for client in [&east, &c1] {
        wait_dns(client, GW, ("True", "NoFailedZones")).await;
    }

    phase("agents wrote their conditions");
    // (a) The aggregate on the hub Gateway, as the API server holds it.
    let hub_gw = wait_gw_within(
        &mgmt,
        NS,
        GW,
        "the aggregate of both clusters",
        CHAIN,
        |g| {
            // Both clusters' first reports are in: only cluster_1 is not ready.
            let only_c1 = |t: &str| {
                gw_cond(g, t).is_some_and(|c| {
                    c.0 == "False" && c.3.starts_with("cluster_1 ") && !c.3.contains("east")
                })
            };
            sr(&gw_cond(g, OWN)) == Some(("False", "ValidationFailed"))
                && only_c1("LoadBalancerReady")
                && only_c1("Programmed")
                && has_address(g, &format!("east/{EAST_IP}"))
                && listener_cond(g, "east.https", "DNSReady").is_some()
        },
    )
    .await;
    let own = gw_cond(&hub_gw, OWN).unwrap();
    assert!(
        own.3.contains("cluster_1") && own.3.contains("listener"),
        "{own:?}"
    );
    let lb = gw_cond(&hub_gw, "LoadBalancerReady").unwrap();
    assert_eq!(lb.1, "NotTrueInSomeClusters");
    assert!(
        lb.3.starts_with("cluster_1 ") && !lb.3.contains("east"),
        "only cluster_1's load balancer is pending: {lb:?}"
    );
    assert_eq!(
        sr(&gw_cond(&hub_gw, "Accepted")),
        Some(("True", "TrueInAllClusters"))
    );
    let programmed = gw_cond(&hub_gw, "Programmed").unwrap();
    assert_eq!(programmed.1, "NotTrueInSomeClusters");
    assert_eq!(programmed.3, "cluster_1 Address pending");
    assert_eq!(
        addresses(&hub_gw),
        [
            (
                "kuadrant.io/MultiClusterIPAddress".to_owned(),
                format!("east/{EAST_IP}")
            ),
            (
                "kuadrant.io/MultiClusterHostnameAddress".to_owned(),
                "east/lb.example.com".to_owned()
            ),
        ]
    );
    // cluster_1's listeners cannot be named `cluster_1.<listener>`: left out.
    assert_eq!(listener_names(&hub_gw), ["east.https", "east.plain"]);
    assert_eq!(
        sr(&listener_cond(&hub_gw, "east.https", "DNSReady")),
        Some(("True", "NoFailedZones"))
    );
    assert_eq!(listener_cond(&hub_gw, "east.https", "DNSManaged"), None);
    assert_eq!(
        sr(&listener_cond(&hub_gw, "east.https", "Accepted")),
        Some(("True", "Accepted"))
    );
    assert!(listener_cond(&hub_gw, "east.plain", "DNSReady").is_none());
    for t in [OWN, "Accepted", "Programmed", "LoadBalancerReady"] {
        assert_eq!(
            gw_cond(&hub_gw, t).unwrap().2,
            hub_gw.metadata.generation,
            "{t}: observedGeneration"
        );
    }
    // Written by the hub: field manager `gwhub` owns its conditions.
    let by_gwhub = hub_gw
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|m| m.manager.as_deref() == Some("gwhub"))
        .and_then(|m| serde_json::to_string(&m.fields_v1).ok())
        .unwrap_or_default();
    assert!(
        by_gwhub.contains("LoadBalancerReady") && by_gwhub.contains(OWN),
        "fields managed by gwhub: {by_gwhub}"
    );
    // Both clusters' reports reach the store (written on their own pace,
    // independently of the hub Gateway), under their own names.
    let reports: Api<ClusterReport> = Api::namespaced(mgmt.clone(), HUB_NS);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut stored: Vec<String> = reports
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|r| r.spec.cluster)
            .collect();
        stored.sort();
        if stored == ["cluster_1", "east"] {
            break;
        }
        assert!(Instant::now() < deadline, "stored reports: {stored:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    phase("(a) checked");
    // (b) cluster_1's load balancer is provisioned and Istio programs the
    // Gateway: the hub Gateway follows.
    provision(&c1, &format!("{GW}-lb"), C1_IP).await;
    let c1_istio = istio_status_at(2, "istio programmed", Some(C1_IP));
    istio_writes_status(&c1, GW, c1_istio.clone()).await;
    let hub_gw = wait_gw_within(&mgmt, NS, GW, "cluster_1 provisioned", CHAIN, |g| {
        sr(&gw_cond(g, "LoadBalancerReady")) == Some(("True", "TrueInAllClusters"))
            && sr(&gw_cond(g, "Programmed")) == Some(("True", "TrueInAllClusters"))
            && has_address(g, &format!("cluster_1/{C1_IP}"))
    })
    .await;
    assert_eq!(
        sr(&gw_cond(&hub_gw, OWN)),
        Some(("False", "ValidationFailed")),
        "cluster_1's listeners are still left out"
    );
    assert!(has_address(&hub_gw, &format!("east/{EAST_IP}")));
    assert_eq!(listener_names(&hub_gw), ["east.https", "east.plain"]);
    // Settled: a second later nothing has moved.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let gateways: Api<Gateway> = Api::namespaced(mgmt.clone(), NS);
    let settled = typed(&gateways.get(GW).await.unwrap());
    assert!(
        same_status(&settled, &typed(&hub_gw)),
        "the hub Gateway's status moved after it settled: {settled:#?}"
    );
    // The change travelled as a delta the agent stamped: the hub measures
    // its propagation to the write once the write is answered (waited for:
    // the GET above can see the write first).
    gwhub_test_kit::wait::until_named(
        "the hub never measured the stamped change's propagation",
        CHAIN,
        || scrape(metrics),
        |m| {
            m.get("gwhub_propagation_seconds_count")
                .is_some_and(|n| *n >= 1)
        },
    )
    .await;

    phase("(b) checked");
    // (c) Kill the hub (no clean shutdown: its Lease stays taken until it
    // expires) and start another; agents reconnect by themselves. A watch
    // records every status the hub Gateway goes through.
    let recorder = Recorder::start(gateways.clone(), GW);
    assert!(
        recorder.wait_first(CHAIN).await,
        "the recorder's watch never delivered the hub Gateway's status"
    );
    hub.kill();
    let mut hub = start_hub(
        &hub_bin,
        &fleet,
        (ingest, dashboard, metrics),
        "gwhub-2.log",
    );
    let identity = format!("gwhub-e2e_{}", hub.id());
    let leases: Api<Lease> = Api::namespaced(mgmt.clone(), HUB_NS);
    let deadline = Instant::now() + Duration::from_secs(45);
    loop {
        let holder = leases
            .get_opt("gwhub-hub")
            .await
            .unwrap()
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity);
        if holder.as_deref() == Some(identity.as_str()) {
            break;
        }
        assert!(
            hub.0.try_wait().unwrap().is_none(),
            "the restarted hub exited; see {}",
            fleet.dir.join("gwhub-2.log").display()
        );
        assert!(
            Instant::now() < deadline,
            "the restarted hub did not take the Lease (holder {holder:?})"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    phase("the restarted hub leads");
    // Leading, with the store imported and the agents back: let it work.
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Then a change on east proves the restarted hub and the agent are live.
    let east_istio = istio_status_at(3, "istio programmed again", Some(EAST_IP));
    istio_writes_status(&east, GW, east_istio.clone()).await;
    wait_gw_within(&mgmt, NS, GW, "east.https with 3 routes", CHAIN, |g| {
        attached_routes(g, "east.https") == Some(3)
    })
    .await;
    // The GET above can see the write before the recorder's watch does.
    let routed = |s: &GatewayStatus| {
        s.listeners
            .iter()
            .flatten()
            .any(|l| l.name == "east.https" && l.attached_routes == 3)
    };
    assert!(
        recorder.wait_until(Duration::from_secs(30), routed).await,
        "the watch never delivered the status with 3 routes"
    );
    let seen: Vec<GatewayStatus> = recorder.seen().into_iter().map(|s| s.status).collect();
    drop(recorder);
    let (after, before): (Vec<_>, Vec<_>) = seen.iter().partition(|s| routed(s));
    assert!(!before.is_empty() && !after.is_empty(), "{seen:#?}");
    for (i, s) in before.iter().enumerate() {
        assert_eq!(
            summary(s),
            summary(&settled),
            "status #{i} around the restart differs from the truth"
        );
        assert!(
            same_status(s, &settled),
            "status #{i} around the restart:\n{s:#?}\nsettled:\n{settled:#?}"
        );
    }
    // Only the listener changed; every summary condition stayed, with its
    // lastTransitionTime.
    let now = typed(&gateways.get(GW).await.unwrap());
    assert_eq!(summary(&now), summary(&settled));
    let ltt = |s: &GatewayStatus| {
        let mut v: Vec<_> = s
            .conditions
            .iter()
            .flatten()
            .map(|c| (c.type_.clone(), c.last_transition_time.clone()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(ltt(&now), ltt(&settled));

    phase("(c) checked");
    // (d) The workload Gateways keep every field Istio wrote, next to the
    // agent's conditions.
    for (client, what, want) in [(&east, "east", &east_istio), (&c1, "cluster_1", &c1_istio)] {
        let g = wait_gw(client, NS, GW, "Istio's last write and ours", |g| {
            status_of(g)["listeners"][0]["attachedRoutes"] == want["listeners"][0]["attachedRoutes"]
                && sr(&gw_cond(g, "LoadBalancerReady")) == Some(("True", "LoadBalancerProvisioned"))
        })
        .await;
        assert_istio_kept(what, &g, want);
        assert_eq!(
            sr(&listener_cond(&g, "https", "DNSReady")),
            Some(("True", "NoFailedZones"))
        );
    }

    // Every write the hubs made was accepted by the API server.
    hub.kill();
    for log in ["gwhub-1.log", "gwhub-2.log"] {
        let text = std::fs::read_to_string(fleet.dir.join(log)).unwrap();
        for refused in ["status apply failed", "cannot store the cluster's report"] {
            assert!(!text.contains(refused), "{log}: {refused}:\n{text}");
        }
    }
}

/// A fleet mixing the Gateway API CRDs OpenShift ships: the management
/// cluster on v1.3.0 (OpenShift 4.21), a workload cluster on v1.2.1 (4.19,
/// 4.20) and one on v1.5.1 (4.23) whose Istio-like writer omits
/// `supportedKinds` (optional there, required before v1.5). The agents'
/// writes are accepted on both workload versions and the hub Gateway
/// aggregates with zero refused writes: the hub writes `supportedKinds: []`
/// where a cluster reported none.
#[tokio::test]
async fn mixed_gateway_api_versions_aggregate_without_refused_writes() {
    if !require_assets("mixed_gateway_api_versions_aggregate_without_refused_writes") {
        return;
    }
    let (hub_bin, agent_bin) = (gwhub_binary(), agent_binary());
    let fleet = Fleet::start_versions(&[("mgmt", "v1.3.0"), ("old", "v1.2.1"), ("new", "v1.5.1")])
        .await
        .expect("start the mixed fleet");
    let mgmt = fleet.cluster("mgmt").client().await.unwrap();
    let old = fleet.cluster("old").client().await.unwrap();
    let new = fleet.cluster("new").client().await.unwrap();
    install_hub(fleet.cluster("mgmt")).await;
    for c in ["old", "new"] {
        install_agent(fleet.cluster(c)).await;
    }
    gateway(&mgmt, NS, GW, "kuadrant-multi-cluster", None).await;

    for (client, ip) in [(&old, EAST_IP), (&new, C1_IP)] {
        workload(client).await;
        provision(client, &format!("{GW}-lb"), ip).await;
    }
    istio_writes_status(
        &old,
        GW,
        istio_status_at(1, "istio programmed", Some(EAST_IP)),
    )
    .await;
    let mut without_kinds = istio_status_at(2, "istio programmed", Some(C1_IP));
    for l in without_kinds["listeners"].as_array_mut().unwrap() {
        l.as_object_mut().unwrap().remove("supportedKinds");
    }
    istio_writes_status(&new, GW, without_kinds).await;
    let live_new = Api::<Gateway>::namespaced(new.clone(), NS)
        .get(GW)
        .await
        .unwrap();
    assert!(
        typed(&live_new)
            .listeners
            .unwrap()
            .iter()
            .all(|l| l.supported_kinds.is_none()),
        "the v1.5.1 writer left supportedKinds out"
    );

    let (ingest, dashboard, metrics) = (free_port(), free_port(), free_port());
    let mut cmd = Command::new(&hub_bin);
    cmd.arg("serve")
        .args(["--listen", &format!("127.0.0.1:{ingest}")])
        .args(["--dashboard-listen", &format!("127.0.0.1:{dashboard}")])
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
        .args(["--insecure", "--namespace", HUB_NS])
        .args(["--gateway-namespace", NS])
        .arg("--kubeconfig")
        .arg(fleet.cluster("mgmt").kubeconfig_as(HUB_SA))
        .env("POD_NAME", "gwhub-mixed")
        .env("RUST_LOG", "info,gwhub=debug");
    let mut hub = Process(spawn(&mut cmd, &fleet.dir.join("gwhub-mixed.log")));
    let _old_agent = start_agent(&agent_bin, &fleet, "old", "old", ingest);
    let _new_agent = start_agent(&agent_bin, &fleet, "new", "new", ingest);

    // The agents' writes are accepted on v1.2.1 and v1.5.1 (they only add
    // conditions to the entries Istio wrote, never create one).
    for client in [&old, &new] {
        wait_dns(client, GW, ("True", "NoFailedZones")).await;
        wait_lb(client, GW, "LoadBalancerProvisioned").await;
    }

    // The hub Gateway on v1.3.0 carries every listener, each with
    // supportedKinds (an empty list for the v1.5.1 cluster's).
    let hub_gw = wait_gw_within(&mgmt, NS, GW, "both clusters aggregated", CHAIN, |g| {
        let names = listener_names(g);
        ["old.https", "old.plain", "new.https", "new.plain"]
            .iter()
            .all(|n| names.iter().any(|x| x == n))
            && has_address(g, &format!("old/{EAST_IP}"))
            && has_address(g, &format!("new/{C1_IP}"))
            && sr(&listener_cond(g, "new.https", "DNSReady")) == Some(("True", "NoFailedZones"))
    })
    .await;
    for l in typed(&hub_gw).listeners.unwrap() {
        let kinds = l
            .supported_kinds
            .as_ref()
            .unwrap_or_else(|| panic!("{}: no supportedKinds", l.name));
        if l.name.starts_with("new.") {
            assert!(kinds.is_empty(), "{}: {kinds:?}", l.name);
        } else {
            assert_eq!(kinds.len(), 1, "{}", l.name);
        }
    }
    assert_eq!(sr(&gw_cond(&hub_gw, OWN)), Some(("True", "Aggregated")));

    // Its watches synced (it wrote): ready and live on the probes.
    for path in ["/readyz", "/healthz"] {
        assert_eq!(
            gwhub_test_kit::procs::http_status(metrics, path).await,
            200,
            "{path}"
        );
    }
    // Zero refused writes: by the hub's metric and its log. The status is
    // in the API server before the hub counts its write: wait for the count.
    let m = gwhub_test_kit::wait::until_named(
        "the hub never counted its status write",
        CHAIN,
        || scrape(metrics),
        |m| m.get("gwhub_status_writes_total").is_some_and(|n| *n >= 1),
    )
    .await;
    assert_eq!(m["gwhub_status_write_errors_total"], 0, "{m:?}");
    hub.kill();
    let text = std::fs::read_to_string(fleet.dir.join("gwhub-mixed.log")).unwrap();
    // (Not a bare "422": timestamps and resourceVersions contain it.)
    for refused in ["status apply failed", "Required value", "code: 422"] {
        assert!(!text.contains(refused), "hub log: {refused}:\n{text}");
    }
}
