//! The agent in Kubernetes mode: `gwhub-agent` against real API
//! servers. The other actors are simulated with their own field managers: an
//! Istio-like Gateway controller, a load balancer controller patching the
//! Service status, a DNS controller patching DNSRecord status, and the
//! service-controller's `SyncLoadBalancerFailed` Events.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gateway_api::apis::standard::gateways::Gateway;
use gwhub_agent::controller::{self, Metrics, Settings};
use gwhub_agent::runtime::{GatewayKey, GatewayStore};
use gwhub_spoke_rules::ownership::{GatewayMode, WriteMode};
use gwhub_spoke_rules::scope::Options;
use gwhub_test_kit::apiserver::{Fleet, require_assets};
use gwhub_test_kit::install::{AGENT_SA, install_agent};
use gwhub_test_kit::kube_objects::*;
use gwhub_test_kit::procs::{Process, agent_binary, free_port, scrape};
use gwhub_test_kit::wait::WAIT;
use k8s_openapi::api::core::v1::{Event, Service};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------- agents

/// The controller in-process, feeding a store as the hub client would read it.
struct Agent {
    store: Arc<GatewayStore>,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Agent {
    fn start(client: &Client, write: WriteMode) -> Self {
        let mut settings = Settings::new(Options::default());
        settings.write_local_status = write;
        let (store, metrics, stop) = (
            Arc::new(GatewayStore::default()),
            Arc::new(Metrics::default()),
            CancellationToken::new(),
        );
        let task = tokio::spawn(controller::run(
            client.clone(),
            settings,
            store.clone(),
            metrics.clone(),
            stop.clone(),
        ));
        Agent {
            store,
            metrics,
            stop,
            task,
        }
    }

    async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("controller stops on shutdown")
            .unwrap();
    }
}

/// A cluster with the agent installed as the README says (`kubectl apply -k
/// manifests/agent/`): the admin's client, for the simulated actors, and
/// one acting as the agent's ServiceAccount, for the agent.
async fn cluster(name: &str) -> (Fleet, Client, Client) {
    let fleet = Fleet::start(&[name]).await.expect("start fleet");
    let as_agent = install_agent(fleet.cluster(name)).await;
    let client = fleet.cluster(name).client().await.unwrap();
    (fleet, client, as_agent)
}

/// A cluster with our GatewayClass and a DNS config with zone Z1 (no
/// Infrastructure object: the agent does not read it).
async fn aws_cluster(name: &str) -> (Fleet, Client, Client) {
    let (fleet, client, as_agent) = cluster(name).await;
    gateway_class(&client, CLASS, CONTROLLER).await;
    dns_config(&client, true).await;
    (fleet, client, as_agent)
}

// ---------------------------------------------------------------- tests

/// Every LoadBalancerReady and DNS reason, driven by the simulated
/// controllers, reaches the Gateway on a real API server.
#[tokio::test]
async fn every_reason_end_to_end() {
    if !require_assets("every_reason_end_to_end") {
        return;
    }
    let (_fleet, client, as_agent) = aws_cluster("reasons").await;
    gateway(&client, NS, "gw", CLASS, None).await;
    // Istio writes the listener entries (the agent never creates one); an
    // earlier agent (same field manager) left a DNSManaged behind.
    istio_writes_status(&client, "gw", istio_status_at(1, "pending", None)).await;
    apply_status(
        &Api::<Gateway>::namespaced(client.clone(), NS),
        "gwhub-agent",
        "gw",
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": "gw"},
               "status": {"listeners": [{"name": "https", "attachedRoutes": 1, "conditions": [
                   {"type": "DNSManaged", "status": "True", "reason": "Normal", "message": "old agent",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]}}),
    )
    .await;
    assert!(
        listener_cond(
            &Api::<Gateway>::namespaced(client.clone(), NS)
                .get("gw")
                .await
                .unwrap(),
            "https",
            "DNSManaged"
        )
        .is_some()
    );
    let agent = Agent::start(&as_agent, WriteMode::Auto);

    let g = wait_lb(&client, "gw", "ServiceNotFound").await;
    let g2 = wait_dns(&client, "gw", ("False", "RecordNotFound")).await;
    assert!(
        listener_cond(&g2, "plain", "DNSReady").is_none(),
        "no hostname, no DNS conditions"
    );
    assert_eq!(gw_cond(&g, "LoadBalancerReady").unwrap().2, Some(1));

    let svc = service(&client, "gw").await;
    wait_lb(&client, "gw", "LoadBalancerPending").await;
    sync_failed_event(&client, &svc, "quota exceeded").await;
    let g = wait_lb(&client, "gw", "SyncLoadBalancerFailed").await;
    let msg = gw_cond(&g, "LoadBalancerReady").unwrap().3;
    assert!(
        msg.contains("quota exceeded") && msg.contains("cloud-controller-manager"),
        "{msg}"
    );
    provision(&client, "gw-lb", "192.0.2.10").await;
    let g = wait_lb(&client, "gw", "LoadBalancerProvisioned").await;
    assert_eq!(
        sr(&gw_cond(&g, "LoadBalancerReady")),
        Some(("True", "LoadBalancerProvisioned"))
    );

    dns_record(&client, "gw", "Managed").await;
    wait_dns(&client, "gw", ("False", "NoZones")).await;
    publish(&client, "gw", "Unknown", "").await;
    let g = wait_dns(&client, "gw", ("False", "UnknownZones")).await;
    assert_eq!(
        listener_cond(&g, "https", "DNSReady").unwrap().3,
        "Provisioning of the record is in an unknown state in some zones: [{Z1 map[]}]"
    );
    publish(&client, "gw", "False", "throttled by provider").await;
    let g = wait_dns(&client, "gw", ("False", "FailedZones")).await;
    assert_eq!(
        listener_cond(&g, "https", "DNSReady").unwrap().3,
        "The record failed to provision in some zones: [{Z1 map[]}]"
    );
    assert_eq!(
        gw_cond(&g, "DNSReady").unwrap().3,
        "One or more listeners have DNS provisioning issues"
    );
    publish(&client, "gw", "True", "").await;
    let g = wait_dns(&client, "gw", ("True", "NoFailedZones")).await;
    assert_eq!(
        gw_cond(&g, "DNSReady").unwrap().3,
        "All the listeners have DNS ready"
    );
    dns_record(&client, "gw", "Unmanaged").await;
    wait_dns(&client, "gw", ("Unknown", "UnmanagedDNS")).await;

    dns_config(&client, false).await;
    wait_dns(&client, "gw", ("False", "NoDNSZones")).await;

    // The store the hub client streams holds the status as written.
    let live = Api::<Gateway>::namespaced(client.clone(), NS)
        .get("gw")
        .await
        .unwrap();
    let streamed = agent
        .store
        .get(&GatewayKey::new(NS, "gw"))
        .expect("streamed");
    assert!(agent.store.is_ready());
    assert_eq!(
        sr(&listener_cond(&streamed, "https", "DNSReady")),
        sr(&listener_cond(&live, "https", "DNSReady"))
    );
    assert!(Metrics::get(&agent.metrics.writes) >= 8);
    agent.stop().await;
}

/// An Istio-like writer (manager `istio`) and the agent write the same
/// Gateways, in both orders and then concurrently; afterwards every Istio
/// field is as Istio last wrote it and our conditions are there.
#[tokio::test]
async fn istio_writer_and_agent_keep_each_others_fields() {
    if !require_assets("istio_writer_and_agent_keep_each_others_fields") {
        return;
    }
    let (_fleet, client, as_agent) = aws_cluster("coexist").await;
    for gw in ["istio-first", "agent-first"] {
        service(&client, gw).await;
        provision(&client, &format!("{gw}-lb"), "192.0.2.10").await;
        dns_record(&client, gw, "Managed").await;
        publish(&client, gw, "True", "").await;
    }
    // Order 1: Istio has written before the agent starts.
    gateway(&client, NS, "istio-first", CLASS, None).await;
    istio_writes(&client, "istio-first", 1, "istio programmed").await;
    let agent = Agent::start(&as_agent, WriteMode::Auto);
    wait_dns(&client, "istio-first", ("True", "NoFailedZones")).await;
    // Order 2: the agent writes first (its Gateway-level conditions: the
    // listener entries are Istio's to create), Istio after.
    gateway(&client, NS, "agent-first", CLASS, None).await;
    wait_lb(&client, "agent-first", "LoadBalancerProvisioned").await;
    istio_writes(&client, "agent-first", 1, "istio programmed").await;
    wait_dns(&client, "agent-first", ("True", "NoFailedZones")).await;

    // Concurrently: Istio keeps rewriting (routes and message change) while
    // the DNS controller flips the record, so the agent keeps writing too.
    let istio = {
        let client = client.clone();
        tokio::spawn(async move {
            for i in 0..15 {
                for gw in ["istio-first", "agent-first"] {
                    istio_writes(&client, gw, 2 + i % 3, &format!("istio round {i}")).await;
                }
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
            for gw in ["istio-first", "agent-first"] {
                istio_writes(&client, gw, 7, "istio final").await;
            }
        })
    };
    for i in 0..10 {
        for gw in ["istio-first", "agent-first"] {
            let status = if i % 2 == 0 { "False" } else { "True" };
            publish(&client, gw, status, &format!("round {i}")).await;
        }
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    istio.await.unwrap();
    for gw in ["istio-first", "agent-first"] {
        publish(&client, gw, "True", "").await;
    }

    let want = istio_status(7, "istio final");
    for gw in ["istio-first", "agent-first"] {
        wait_dns(&client, gw, ("True", "NoFailedZones")).await;
        let g = wait_gw(&client, NS, gw, "LoadBalancerReady", |g| {
            sr(&gw_cond(g, "LoadBalancerReady")) == Some(("True", "LoadBalancerProvisioned"))
        })
        .await;
        assert_istio_kept(gw, &g, &want);
        assert!(listener_cond(&g, "plain", "DNSReady").is_none());
    }
    agent.stop().await;
}

/// With `--write-local-status=false` the agent computes and streams but
/// never writes; with too many conditions already there it skips and says so.
#[tokio::test]
async fn read_only_mode_and_condition_limit() {
    if !require_assets("read_only_mode_and_condition_limit") {
        return;
    }
    let (_fleet, client, as_agent) = aws_cluster("readonly").await;
    gateway(&client, NS, "gw", CLASS, None).await;
    let agent = Agent::start(&as_agent, WriteMode::Never);
    let key = GatewayKey::new(NS, "gw");
    let deadline = Instant::now() + WAIT;
    while agent
        .store
        .get(&key)
        .is_none_or(|g| gw_cond(&g, "LoadBalancerReady").is_none())
    {
        assert!(Instant::now() < deadline, "nothing streamed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let streamed = agent.store.get(&key).unwrap();
    assert_eq!(
        sr(&gw_cond(&streamed, "LoadBalancerReady")),
        Some(("False", "ServiceNotFound"))
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let live = Api::<Gateway>::namespaced(client.clone(), NS)
        .get("gw")
        .await
        .unwrap();
    assert!(none_of_ours(&live), "read-only mode wrote the Gateway");
    assert_eq!(
        Metrics::get(&agent.metrics.writes),
        0,
        "read-only mode counted a status write"
    );
    agent.stop().await;

    // Eight conditions of other writers (the CRD defaults Accepted and
    // Programmed on create, plus six): ours has no room.
    gateway(&client, NS, "full", CLASS, None).await;
    let conds: Vec<Value> = (0..6)
        .map(|i| {
            json!({"type": format!("Vendor{i}"), "status": "True", "reason": "R", "message": "",
                   "lastTransitionTime": "2026-01-01T00:00:00Z"})
        })
        .collect();
    apply_status(
        &Api::<Gateway>::namespaced(client.clone(), NS),
        "istio",
        "full",
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": "full"}, "status": {"conditions": conds}}),
    )
    .await;
    // Istio's listener entries (another manager, so the conditions above stay).
    apply_status(
        &Api::<Gateway>::namespaced(client.clone(), NS),
        "istio-listeners",
        "full",
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": "full"}, "status": {"listeners": istio_status(0, "")["listeners"]}}),
    )
    .await;
    let agent = Agent::start(&as_agent, WriteMode::Auto);
    // Its listeners still get DNSReady; the Gateway list has no room.
    let g = wait_gw(
        &client,
        NS,
        "full",
        "listener DNSReady RecordNotFound",
        |g| sr(&listener_cond(g, "https", "DNSReady")) == Some(("False", "RecordNotFound")),
    )
    .await;
    assert!(gw_cond(&g, "LoadBalancerReady").is_none());
    assert!(gw_cond(&g, "DNSReady").is_none());
    let events = wait_event(&client, "full", "ConditionLimitReached").await;
    assert!(events.contains("LoadBalancerReady"), "{events}");
    assert!(Metrics::get(&agent.metrics.condition_limit) >= 1);
    agent.stop().await;
}

/// Messages of the Events (either API) about Gateway `name` with `reason`,
/// waited for up to [`WAIT`].
async fn wait_event(client: &Client, name: &str, reason: &str) -> String {
    let api = Api::<Event>::namespaced(client.clone(), NS);
    let lp = ListParams::default().fields(&format!("involvedObject.name={name},reason={reason}"));
    let deadline = Instant::now() + WAIT;
    loop {
        let items = api.list(&lp).await.unwrap().items;
        if let Some(e) = items.iter().find(|e| {
            e.reporting_component.as_deref() == Some("gwhub-agent")
                && e.involved_object.kind.as_deref() == Some("Gateway")
        }) {
            return e.message.clone().unwrap_or_default();
        }
        assert!(Instant::now() < deadline, "no {reason} Event on {name}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

// ---------------------------------------------------------------- binary

/// The real binary against a real API server: the missing DNS config is an
/// error (Event, no DNS condition) until it appears; only in-scope Gateways
/// are written; observedGeneration follows the spec; a quiet cluster (or a
/// change that changes nothing) gets no write.
#[tokio::test]
async fn binary_scope_generation_quiet_and_missing_config() {
    if !require_assets("binary_scope_generation_quiet_and_missing_config") {
        return;
    }
    let bin = agent_binary();
    let (fleet, client, _as_agent) = cluster("bin").await;
    gateway_class(&client, CLASS, CONTROLLER).await;
    gateway_class(&client, "other", "example.com/other-controller").await;
    gateway(&client, NS, "in", CLASS, None).await;
    istio_writes(&client, "in", 1, "istio programmed").await;
    gateway(&client, NS, "other-class", "other", None).await;
    gateway(&client, "default", "elsewhere", CLASS, None).await;
    service(&client, "in").await;
    provision(&client, "in-lb", "192.0.2.10").await;

    let metrics_port = free_port();
    let _agent = Process(
        std::process::Command::new(&bin)
            .args([
                "run",
                "--insecure",
                "--cluster",
                "bin",
                "--hub",
                "http://127.0.0.1:1",
            ])
            .arg("--kubeconfig")
            .arg(fleet.cluster("bin").kubeconfig_as(AGENT_SA))
            .args(["--metrics-listen", &format!("127.0.0.1:{metrics_port}")])
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(fleet.dir.join("gwhub-agent.log")).unwrap())
            .spawn()
            .expect("start gwhub-agent"),
    );

    // No DNS config: an Event says so and nothing is written.
    let note = wait_event(&client, "in", "ClusterConfigMissing").await;
    assert!(note.contains("dnses.config.openshift.io/cluster"), "{note}");
    let gws = Api::<Gateway>::namespaced(client.clone(), NS);
    assert!(none_of_ours(&gws.get("in").await.unwrap()));
    assert!(scrape(metrics_port).await["gwhub_agent_cluster_config_errors_total"] >= 1);

    // The config appears: conditions follow.
    dns_config(&client, true).await;
    wait_lb(&client, "in", "LoadBalancerProvisioned").await;
    // Its caches synced: ready and live, although the hub is unreachable.
    for path in ["/readyz", "/healthz"] {
        assert_eq!(
            gwhub_test_kit::procs::http_status(metrics_port, path).await,
            200,
            "{path}"
        );
    }
    let g = wait_dns(&client, "in", ("False", "RecordNotFound")).await;
    assert_eq!(g.metadata.generation, Some(1));

    // Generation bump: every condition of ours follows.
    gateway(&client, NS, "in", CLASS, Some(9090)).await;
    let g = wait_gw(&client, NS, "in", "observedGeneration 2", |g| {
        gw_cond(g, "LoadBalancerReady").is_some_and(|c| c.2 == Some(2))
            && listener_cond(g, "https", "DNSReady").is_some_and(|c| c.2 == Some(2))
            && gw_cond(g, "DNSReady").is_some_and(|c| c.2 == Some(2))
    })
    .await;
    assert_eq!(g.metadata.generation, Some(2));
    assert!(listener_cond(&g, "extra", "DNSReady").is_none());

    // Quiet: nothing changes for a while, and a change that does not change
    // our result (an annotation on the Service) writes nothing either.
    // (Counted from when the writes of the bump have landed.)
    let (rv, _) = gwhub_test_kit::wait::settled(
        "in's status and the agent's status writes",
        Duration::from_secs(1),
        Duration::from_secs(30),
        || async {
            (
                gws.get("in").await.unwrap().metadata.resource_version,
                scrape(metrics_port).await["gwhub_agent_status_writes_total"],
            )
        },
    )
    .await;
    let before = scrape(metrics_port).await;
    Api::<Service>::namespaced(client.clone(), NS)
        .patch(
            "in-lb",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"touched": "yes"}}})),
        )
        .await
        .unwrap();
    // The agent evaluates the change in its own time: waited for (its write
    // skipped), after a quiet window in which nothing may be written.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = gwhub_test_kit::wait::until_named(
        "the Service change was never evaluated with its write skipped",
        Duration::from_secs(30),
        || scrape(metrics_port),
        |after| {
            after["gwhub_agent_reconciles_total"] > before["gwhub_agent_reconciles_total"]
                && after["gwhub_agent_status_writes_skipped_total"]
                    > before["gwhub_agent_status_writes_skipped_total"]
        },
    )
    .await;
    assert_eq!(
        gws.get("in").await.unwrap().metadata.resource_version,
        rv,
        "a no-op was written"
    );
    assert_eq!(
        before["gwhub_agent_status_writes_total"], after["gwhub_agent_status_writes_total"],
        "a no-op counted a status write"
    );

    // Out of scope: other controller, other namespace.
    assert!(none_of_ours(&gws.get("other-class").await.unwrap()));
    let elsewhere = Api::<Gateway>::namespaced(client.clone(), "default")
        .get("elsewhere")
        .await
        .unwrap();
    assert!(none_of_ours(&elsewhere));
}

// ------------------------------------------------- --write-local-status

/// What the OpenShift 4.22 ingress operator does: a JSON merge patch of the
/// whole condition lists on the status subresource (field manager
/// `ingress-operator`), setting LoadBalancerReady and both DNSReadys to
/// `values` (status, reason, message) with its own transition time.
async fn operator_writes(
    client: &Client,
    gw: &str,
    lb: (&str, &str, &str),
    dns: (&str, &str, &str),
    time: &str,
) {
    let api = Api::<Gateway>::namespaced(client.clone(), NS);
    let live = status_of(&api.get(gw).await.unwrap());
    let c = |t: &str, v: (&str, &str, &str)| {
        json!({"type": t, "status": v.0, "reason": v.1, "message": v.2,
               "observedGeneration": 1, "lastTransitionTime": time})
    };
    let mut conds: Vec<Value> = live["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|x| x["type"] != "LoadBalancerReady" && x["type"] != "DNSReady")
        .collect();
    conds.push(c("LoadBalancerReady", lb));
    let gw_dns = if dns.0 == "True" {
        (
            "True",
            "AllListenersReady",
            "All the listeners have DNS ready",
        )
    } else {
        (
            "False",
            "SomeListenersNotReady",
            "One or more listeners have DNS provisioning issues",
        )
    };
    conds.push(c("DNSReady", gw_dns));
    let listeners: Vec<Value> = live["listeners"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|mut l| {
            if l["name"] == "https" {
                let mut lc: Vec<Value> = l["conditions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|x| x["type"] != "DNSReady")
                    .collect();
                lc.push(c("DNSReady", dns));
                l["conditions"] = json!(lc);
            }
            l
        })
        .collect();
    let pp = PatchParams {
        field_manager: Some("ingress-operator".into()),
        ..PatchParams::default()
    };
    api.patch_status(
        gw,
        &pp,
        &Patch::Merge(json!({"status": {"conditions": conds, "listeners": listeners}})),
    )
    .await
    .unwrap();
}

/// Resource versions of `gw` seen while polling for `window`.
async fn versions_during(client: &Client, gw: &str, window: Duration) -> Vec<String> {
    let api = Api::<Gateway>::namespaced(client.clone(), NS);
    let end = Instant::now() + window;
    let mut seen: Vec<String> = Vec::new();
    while Instant::now() < end {
        let rv = api
            .get(gw)
            .await
            .unwrap()
            .metadata
            .resource_version
            .unwrap_or_default();
        if seen.last() != Some(&rv) {
            seen.push(rv);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    seen
}

/// `auto` on a Gateway where the 4.22 ingress operator writes our condition
/// types: the agent stops writing them once the operator's managedFields say
/// so, never reverts the operator's values (no flapping: the resourceVersion
/// moves only with the operator's own writes), keeps streaming (what the
/// operator wrote), reports the Gateway's mode in the metric; `true` writes
/// anyway.
#[tokio::test]
async fn auto_mode_yields_to_the_ingress_operator() {
    if !require_assets("auto_mode_yields_to_the_ingress_operator") {
        return;
    }
    let (_fleet, client, as_agent) = aws_cluster("auto").await;
    gateway(&client, NS, "gw", CLASS, None).await;
    istio_writes(&client, "gw", 1, "istio programmed").await;
    service(&client, "gw").await;
    provision(&client, "gw-lb", "192.0.2.10").await;
    dns_record(&client, "gw", "Managed").await;
    publish(&client, "gw", "True", "").await;

    // Before 4.22: nobody else writes them, the agent does.
    let agent = Agent::start(&as_agent, WriteMode::Auto);
    wait_dns(&client, "gw", ("True", "NoFailedZones")).await;
    wait_lb(&client, "gw", "LoadBalancerProvisioned").await;
    let key = GatewayKey::new(NS, "gw");
    let gw_key = key.to_string();
    assert_eq!(agent.metrics.mode(&gw_key), Some(GatewayMode::Write));
    assert!(agent.metrics.render().contains(
        "gwhub_agent_gateway_write_mode{namespace=\"openshift-ingress\",name=\"gw\",mode=\"write\"} 1"
    ));

    // The operator arrives (upgrade to 4.22) and writes all three types, with
    // its own transition time.
    operator_writes(
        &client,
        "gw",
        (
            "True",
            "LoadBalancerProvisioned",
            "The LoadBalancer service is provisioned",
        ),
        (
            "True",
            "NoFailedZones",
            "The record is provisioned in all reported zones.",
        ),
        "2026-02-02T02:02:02Z",
    )
    .await;
    let deadline = Instant::now() + WAIT;
    while agent.metrics.mode(&gw_key) != Some(GatewayMode::Stream) {
        assert!(
            Instant::now() < deadline,
            "the agent did not yield: {:?}",
            agent.metrics.mode(&gw_key)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let writes = Metrics::get(&agent.metrics.writes);

    // Our inputs change: the agent's result differs from what the operator
    // wrote, but the agent does not write; the operator then writes the new
    // result and the agent leaves it alone.
    publish(&client, "gw", "False", "throttled").await;
    let rvs = versions_during(&client, "gw", Duration::from_secs(2)).await;
    assert_eq!(
        rvs.len(),
        1,
        "the Gateway changed without the operator: {rvs:?}"
    );
    let live = Api::<Gateway>::namespaced(client.clone(), NS)
        .get("gw")
        .await
        .unwrap();
    assert_eq!(
        sr(&listener_cond(&live, "https", "DNSReady")),
        Some(("True", "NoFailedZones"))
    );
    operator_writes(
        &client,
        "gw",
        (
            "True",
            "LoadBalancerProvisioned",
            "The LoadBalancer service is provisioned",
        ),
        (
            "False",
            "FailedZones",
            "The record failed to provision in some zones: [{Z1 map[]}]",
        ),
        "2026-02-02T02:03:03Z",
    )
    .await;
    let rvs = versions_during(&client, "gw", Duration::from_secs(2)).await;
    assert_eq!(
        rvs.len(),
        1,
        "someone rewrote the operator's status: {rvs:?}"
    );
    assert_eq!(
        Metrics::get(&agent.metrics.writes),
        writes,
        "the agent wrote while the operator owns the types"
    );
    // The hub is sent what the operator wrote.
    let deadline = Instant::now() + WAIT;
    loop {
        let streamed = agent.store.get(&key).expect("streamed");
        let dns = listener_cond(&streamed, "https", "DNSReady");
        if sr(&dns) == Some(("False", "FailedZones")) {
            assert_eq!(
                dns.unwrap().3,
                "The record failed to provision in some zones: [{Z1 map[]}]"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "stream does not follow the operator: {dns:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let live = Api::<Gateway>::namespaced(client.clone(), NS)
        .get("gw")
        .await
        .unwrap();
    assert_eq!(
        gw_cond(&live, "LoadBalancerReady").map(|c| c.3),
        Some("The LoadBalancer service is provisioned".to_owned())
    );
    assert!(
        serde_json::to_string(&live.metadata.managed_fields)
            .unwrap()
            .contains("ingress-operator"),
        "the operator's ownership is kept"
    );
    agent.stop().await;

    // `true`: the agent writes anyway (its own transition time replaces the
    // operator's; the DNS record is published again first).
    publish(&client, "gw", "True", "").await;
    let agent = Agent::start(&as_agent, WriteMode::Always);
    wait_dns(&client, "gw", ("True", "NoFailedZones")).await;
    let g = wait_gw(
        &client,
        NS,
        "gw",
        "the agent's own LoadBalancerReady",
        |g| gw_cond(g, "DNSReady").is_some_and(|c| c.0 == "True"),
    )
    .await;
    assert!(Metrics::get(&agent.metrics.writes) >= 1);
    assert_eq!(agent.metrics.mode(&gw_key), Some(GatewayMode::Write));
    assert_eq!(
        sr(&gw_cond(&g, "LoadBalancerReady")),
        Some(("True", "LoadBalancerProvisioned"))
    );
    agent.stop().await;

    // `false`: never writes, whatever changes.
    let agent = Agent::start(&as_agent, WriteMode::Never);
    publish(&client, "gw", "Unknown", "").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        Metrics::get(&agent.metrics.writes),
        0,
        "write mode `false` wrote a status"
    );
    let live = Api::<Gateway>::namespaced(client.clone(), NS)
        .get("gw")
        .await
        .unwrap();
    assert_eq!(
        sr(&listener_cond(&live, "https", "DNSReady")),
        Some(("True", "NoFailedZones"))
    );
    agent.stop().await;
}
