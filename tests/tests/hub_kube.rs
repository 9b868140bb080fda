//! The hub in Kubernetes mode: `gwhub serve` against a real
//! kube-apiserver. A tiny test agent streams reports over loopback gRPC; the
//! tests check what the API server holds: the hub Gateways' status (accepted,
//! aggregated, other writers' conditions kept), the `ClusterReport` store, a
//! restart that restores from the store without a wrong intermediate status,
//! and a second replica that stays passive.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures::StreamExt;
use gateway_api::apis::standard::gateways::{
    Gateway, GatewayStatus, GatewayStatusAddresses, GatewayStatusListeners,
    GatewayStatusListenersSupportedKinds,
};
use gwhub_hub::kube::KubeOptions;
use gwhub_hub::kube::leader::LeaseConfig;
use gwhub_hub::kube::metrics::Metrics;
use gwhub_hub::kube_hub::KubeHub;
use gwhub_hub::serve::HubConfig;
use gwhub_hub_rules::report::ClusterReport;
use gwhub_model::cluster::object_name;
use gwhub_model::conditions::{Condition, new};
use gwhub_model::status::same_applied_status as same_status;
use gwhub_proto::convert::status_to_proto;
use gwhub_proto::v1::{self, agent_message, hub_message};
use gwhub_test_kit::apiserver::{Fleet, require_assets};
use gwhub_test_kit::install::{HUB_SA, SYSTEM_NS, apply_k, install_hub};
use gwhub_test_kit::kube_objects::manifests;
use gwhub_test_kit::procs::gwhub_binary;
use gwhub_test_kit::raw_agent::{Agent as RawAgent, msg};
use gwhub_test_kit::recorder::Recorder;
use gwhub_test_kit::wait::{settled, until, until_named};
use jiff::Timestamp;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};
use serde_json::json;

const NS: &str = "default";
/// The hub's own namespace (its ClusterReports, Lease and Events), where
/// `manifests/` installs it.
const HUB_NS: &str = SYSTEM_NS;
const OWN: &str = "kuadrant.io/MultiClusterAggregated";
const WAIT: Duration = Duration::from_secs(30);

// ---- a tiny agent ---------------------------------------------------------

/// The test kit's raw agent, with this suite's typed snapshots and deltas,
/// numbered in order and each waiting for its ack (up to [`WAIT`]: acks of
/// a hub in Kubernetes mode can wait on a loaded API server).
struct Agent {
    raw: RawAgent,
    seq: u64,
}

impl Agent {
    /// Connects and reads the hub's Hello and NEW_CONNECTION resync.
    async fn connect(addr: SocketAddr, cluster: &str) -> Agent {
        Agent {
            raw: RawAgent::connect(addr, cluster).await,
            seq: 0,
        }
    }

    async fn recv(&mut self) -> hub_message::Message {
        self.raw.recv_within(WAIT).await
    }

    /// A full snapshot of `(namespace, name, status)`; waits for the ack.
    async fn snapshot(&mut self, gateways: &[(&str, &str, GatewayStatus)]) {
        self.snapshot_chunked(gateways, usize::MAX).await;
    }

    /// [`Agent::snapshot`] in chunks of `per_chunk` Gateways (the ingest
    /// limits a message to 4 MiB).
    async fn snapshot_chunked(
        &mut self,
        gateways: &[(&str, &str, GatewayStatus)],
        per_chunk: usize,
    ) {
        self.seq += 1;
        let gateways: Vec<v1::GatewayReport> = gateways
            .iter()
            .map(|(ns, name, status)| v1::GatewayReport {
                namespace: (*ns).into(),
                name: (*name).into(),
                uid: format!("uid-{name}"),
                generation: 1,
                status: Some(status_to_proto(status).unwrap()),
            })
            .collect();
        let chunks: Vec<Vec<v1::GatewayReport>> = if gateways.is_empty() {
            vec![vec![]]
        } else {
            gateways
                .chunks(per_chunk.max(1))
                .map(<[_]>::to_vec)
                .collect()
        };
        let last = chunks.len() - 1;
        for (i, gateways) in chunks.into_iter().enumerate() {
            self.raw
                .send(agent_message::Message::Snapshot(v1::SnapshotChunk {
                    snapshot_id: self.seq,
                    chunk: i as u32,
                    r#final: i == last,
                    seq: self.seq,
                    gateways,
                }))
                .await;
        }
        loop {
            if let hub_message::Message::Ack(a) = self.recv().await
                && a.seq == self.seq
            {
                return;
            }
        }
    }

    /// One upsert as a delta stamped `observed_unix_millis`; waits for the ack.
    async fn delta(&mut self, ns: &str, name: &str, status: &GatewayStatus, observed: i64) {
        self.traced_delta(ns, name, status, observed, "").await
    }

    /// [`Agent::delta`] continuing the trace of `traceparent`.
    async fn traced_delta(
        &mut self,
        ns: &str,
        name: &str,
        status: &GatewayStatus,
        observed: i64,
        traceparent: &str,
    ) {
        self.seq += 1;
        let report = v1::GatewayReport {
            namespace: ns.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            generation: 1,
            status: Some(status_to_proto(status).unwrap()),
        };
        self.raw
            .send(agent_message::Message::Delta(v1::Delta {
                seq: self.seq,
                changes: vec![v1::Change {
                    change: Some(v1::change::Change::Upsert(report)),
                }],
                observed_unix_millis: observed,
                traceparent: traceparent.into(),
            }))
            .await;
        loop {
            if let hub_message::Message::Ack(a) = self.recv().await
                && a.seq == self.seq
            {
                return;
            }
        }
    }
}

// ---- fixtures -------------------------------------------------------------

fn t0() -> Timestamp {
    "2026-11-23T10:00:00Z".parse().unwrap()
}

fn cond(t: &str, status: &str, reason: &str, message: &str) -> Condition {
    new(t, status, reason, message, Some(1), t0())
}

fn cluster_status(ips: &[&str], programmed: bool) -> GatewayStatus {
    GatewayStatus {
        addresses: Some(
            ips.iter()
                .map(|ip| GatewayStatusAddresses {
                    r#type: Some("IPAddress".into()),
                    value: (*ip).into(),
                })
                .collect(),
        ),
        conditions: Some(vec![
            cond("Accepted", "True", "Accepted", ""),
            if programmed {
                cond("Programmed", "True", "Programmed", "")
            } else {
                cond(
                    "Programmed",
                    "False",
                    "AddressNotAssigned",
                    "Address pending",
                )
            },
        ]),
        listeners: Some(vec![GatewayStatusListeners {
            name: "http".into(),
            attached_routes: 1,
            supported_kinds: Some(vec![GatewayStatusListenersSupportedKinds {
                group: Some("gateway.networking.k8s.io".into()),
                kind: "HTTPRoute".into(),
            }]),
            conditions: vec![cond("Accepted", "True", "Accepted", "")],
        }]),
        attached_listener_sets: None,
    }
}

async fn create_hub_gateway(api: &Api<Gateway>, name: &str) {
    let gw: Gateway = serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "gatewayClassName": "kuadrant-multi-cluster-gateway-instance-per-cluster",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]
        }
    }))
    .unwrap();
    api.create(&PostParams::default(), &gw).await.unwrap();
}

fn options(identity: &str) -> KubeOptions {
    let mut o = KubeOptions::new(HUB_NS);
    o.lease = Some(LeaseConfig {
        name: "gwhub-hub".into(),
        identity: identity.into(),
        lease_duration: Duration::from_secs(4),
        renew_every: Duration::from_millis(500),
    });
    o
}

async fn start_hub(client: &Client, identity: &str) -> KubeHub {
    KubeHub::start(
        HubConfig::loopback(Duration::from_secs(60)),
        options(identity),
        client.clone(),
    )
    .await
    .expect("hub starts in Kubernetes mode")
}

/// One management API server with the hub installed as the README says
/// (`kubectl apply -k manifests/`): the admin's client and one acting as the
/// hub's ServiceAccount; `None` (the test is skipped) where the
/// kube-apiserver assets are missing.
async fn management(test: &str) -> Option<(Fleet, Client, Client)> {
    if !require_assets(test) {
        return None;
    }
    let fleet = Fleet::start(&["mgmt"]).await.expect("start API server");
    let as_hub = install_hub(fleet.cluster("mgmt")).await;
    let client = fleet.cluster("mgmt").client().await.unwrap();
    Some((fleet, client, as_hub))
}

fn own(status: &GatewayStatus) -> Option<&Condition> {
    status.conditions.iter().flatten().find(|c| c.type_ == OWN)
}

fn find<'a>(status: &'a GatewayStatus, type_: &str) -> Option<&'a Condition> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
}

/// Polls `name` until `pred` holds on its status; returns it.
async fn wait_status(
    api: &Api<Gateway>,
    name: &str,
    what: &str,
    pred: impl Fn(&GatewayStatus) -> bool,
) -> Gateway {
    let deadline = Instant::now() + WAIT;
    loop {
        let gw = api.get(name).await.unwrap();
        if pred(gw.status.as_ref().unwrap_or(&GatewayStatus::default())) {
            return gw;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: {what}; last status: {:#?}",
            gw.status
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `hub` has seen the stream of `cluster`, whose agent was
/// dropped, end (in its own time): it is registered but not connected.
async fn away(hub: &KubeHub, cluster: &str) {
    let index = &hub.hub.index;
    until_named(
        &format!("the hub never saw {cluster}'s stream end"),
        WAIT,
        || async { index.clusters().into_iter().find(|c| c.name == cluster) },
        |c| c.as_ref().is_some_and(|c| !c.connected),
    )
    .await;
}

fn aggregated(n: usize) -> impl Fn(&GatewayStatus) -> bool {
    move |s| {
        own(s).is_some_and(|c| {
            c.status == "True" && c.message == format!("Aggregated the status of {n} clusters")
        })
    }
}

// ---- tests ----------------------------------------------------------------

/// Every manifest parses with the project's own reader, every kustomization
/// names files that exist, and the API server takes them all.
#[tokio::test]
async fn manifests_parse_and_the_api_server_takes_them() {
    let dirs = [
        manifests(),
        manifests().join("hub"),
        manifests().join("agent"),
    ];
    let mut all = Vec::new();
    for dir in &dirs {
        let objs = gwhub_spoke_rules::manifest::read_paths(std::slice::from_ref(dir))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for o in &objs {
            if o.kind == "Kustomization" {
                for r in o.value["resources"].as_array().unwrap() {
                    let p = dir.join(r.as_str().unwrap());
                    assert!(p.exists(), "{}: {} missing", dir.display(), p.display());
                }
            }
        }
        all.extend(objs.into_iter().filter(|o| o.kind != "Kustomization"));
    }
    // `manifests/` lists the hub's files one by one (older kustomize takes
    // no directories): the same files as `manifests/hub/`.
    let listed = |dir: &std::path::Path, prefix: &str| -> BTreeSet<String> {
        let k = gwhub_spoke_rules::manifest::read_paths(&[dir.join("kustomization.yaml")]).unwrap();
        k[0].value["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r.as_str()?.strip_prefix(prefix).map(str::to_owned))
            .collect()
    };
    assert_eq!(
        listed(&manifests(), "hub/"),
        listed(&manifests().join("hub"), ""),
        "manifests/kustomization.yaml and manifests/hub/ list different hub files"
    );
    let kinds: BTreeSet<&str> = all.iter().map(|o| o.kind.as_str()).collect();
    for k in [
        "CustomResourceDefinition",
        "ClusterRole",
        "Role",
        "Deployment",
        "Service",
        "ServiceAccount",
    ] {
        assert!(kinds.contains(k), "no {k} in manifests/");
    }

    // `management` installed the hub with `kubectl apply -k manifests/`;
    // the agent's kustomization goes in as well (its Role lives in
    // openshift-ingress), exactly as the README says.
    let Some((fleet, client, _as_hub)) =
        management("manifests_parse_and_the_api_server_takes_them").await
    else {
        return;
    };
    apply_k(
        &fleet.cluster("mgmt").kubeconfig,
        &manifests().join("agent"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for o in &all {
        let gvk = GroupVersionKind::try_from(&kube::core::TypeMeta {
            api_version: o.api_version.clone(),
            kind: o.kind.clone(),
        })
        .unwrap();
        let (ar, caps) = kube::discovery::pinned_kind(&client, &gvk)
            .await
            .unwrap_or_else(|e| panic!("{} {}: {e}", o.kind, o.name()));
        let ns = o.value["metadata"]["namespace"].as_str();
        let api: Api<DynamicObject> = match (caps.scope, ns) {
            (kube::discovery::Scope::Namespaced, Some(ns)) => {
                Api::namespaced_with(client.clone(), ns, &ar)
            }
            _ => Api::all_with(client.clone(), &ar),
        };
        let name = o.value["metadata"]["name"].as_str().unwrap();
        api.get(name)
            .await
            .unwrap_or_else(|e| panic!("{} {} not installed: {e}", o.kind, o.name()));
    }

    // The real binary in Kubernetes mode, as its ServiceAccount, in the
    // namespace just installed: it takes the Lease and marks a Gateway no cluster reports NoClusters.
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NS);
    create_hub_gateway(&gateways, "bin").await;
    let mut child = std::process::Command::new(gwhub_binary())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--dashboard-listen",
            "127.0.0.1:0",
        ])
        .args(["--insecure", "--namespace", HUB_NS, "--kubeconfig"])
        .arg(fleet.cluster("mgmt").kubeconfig_as(HUB_SA))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start gwhub");
    wait_status(&gateways, "bin", "NoClusters from the binary", |s| {
        own(s).is_some_and(|c| c.reason == "NoClusters")
    })
    .await;
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "gwhub-system");
    let lease = leases.get("gwhub-hub").await.unwrap();
    assert!(lease.spec.unwrap().holder_identity.is_some());
    let _ = child.kill();
    let _ = child.wait();
}

/// The aggregate lands on the hub Gateways: accepted by the API server,
/// with other writers' conditions kept, invalid names and more than 16
/// addresses left out and reported, Gateways no cluster reports marked
/// NoClusters; reports stored as ClusterReports; unchanged input writes
/// nothing; a generation bump is observed.
#[tokio::test]
async fn hub_writes_the_aggregate_onto_hub_gateways() {
    let Some((_fleet, client, as_hub)) =
        management("hub_writes_the_aggregate_onto_hub_gateways").await
    else {
        return;
    };
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NS);
    for name in ["web", "many", "lonely"] {
        create_hub_gateway(&gateways, name).await;
    }
    // Another writer's condition, there before the hub starts.
    let foreign = json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "status": {"conditions": [{
            "type": "example.com/PolicyAffected", "status": "True", "reason": "Attached",
            "message": "a policy targets this Gateway", "observedGeneration": 1,
            "lastTransitionTime": "2026-11-23T09:00:00Z"
        }]}
    });
    gateways
        .patch_status(
            "web",
            &PatchParams::apply("policy-controller"),
            &Patch::Apply(&foreign),
        )
        .await
        .unwrap();

    // lonely may be a real Gateway: its controller's addresses and listener.
    let real = json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "status": {
            "addresses": [{"type": "IPAddress", "value": "192.0.2.7"}],
            "listeners": [{"name": "http", "attachedRoutes": 0, "supportedKinds": [], "conditions": []}],
        }
    });
    gateways
        .patch_status("lonely", &PatchParams::apply("istio"), &Patch::Apply(&real))
        .await
        .unwrap();

    let hub = start_hub(&as_hub, "hub-1").await;
    let addr = hub.hub.ingest_addr;
    let mut a = Agent::connect(addr, "cluster-a").await;
    let mut b = Agent::connect(addr, "cluster_1").await;
    let many_ips: Vec<Vec<String>> = (0..3)
        .map(|c| (0..6).map(|i| format!("10.{c}.0.{i}")).collect())
        .collect();
    let ips = |c: usize| many_ips[c].iter().map(String::as_str).collect::<Vec<_>>();
    a.snapshot(&[
        (NS, "web", cluster_status(&["10.0.0.1"], true)),
        (NS, "many", cluster_status(&ips(0), true)),
    ])
    .await;
    b.snapshot(&[
        (NS, "web", cluster_status(&["10.0.1.1"], true)),
        (NS, "many", cluster_status(&ips(1), true)),
    ])
    .await;
    let mut c = Agent::connect(addr, "cluster-c").await;
    c.snapshot(&[(NS, "many", cluster_status(&ips(2), true))])
        .await;

    // web: cluster_1's listener cannot be written -> ValidationFailed, yet
    // the status is accepted and Accepted/Programmed are aggregated.
    let web = wait_status(&gateways, "web", "ValidationFailed naming cluster_1", |s| {
        own(s).is_some_and(|c| c.reason == "ValidationFailed" && c.message.contains("cluster_1"))
            && find(s, "Accepted").is_some_and(|c| c.reason == "TrueInAllClusters")
    })
    .await;
    let st = web.status.clone().unwrap();
    let values: Vec<&str> = st
        .addresses
        .iter()
        .flatten()
        .map(|a| a.value.as_str())
        .collect();
    assert_eq!(values, ["cluster-a/10.0.0.1", "cluster_1/10.0.1.1"]);
    let listeners: Vec<&str> = st
        .listeners
        .iter()
        .flatten()
        .map(|l| l.name.as_str())
        .collect();
    assert_eq!(listeners, ["cluster-a.http"]);
    let policy = find(&st, "example.com/PolicyAffected").expect("foreign condition kept");
    assert_eq!(policy.message, "a policy targets this Gateway");
    assert_eq!(find(&st, "Programmed").unwrap().status, "True");
    for cond in st
        .conditions
        .iter()
        .flatten()
        .filter(|c| c.type_ != "example.com/PolicyAffected")
    {
        assert_eq!(
            cond.observed_generation, web.metadata.generation,
            "{cond:?}"
        );
    }
    // The foreign condition still belongs to its writer.
    let owners: Vec<String> = web
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.fields_v1
                .as_ref()
                .is_some_and(|f| f.0.to_string().contains("example.com/PolicyAffected"))
        })
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(owners, ["policy-controller"]);

    // many: 18 addresses reported, 16 written, round-robin over clusters.
    let many = wait_status(
        &gateways,
        "many",
        "16 addresses and ValidationFailed",
        |s| {
            own(s).is_some_and(|c| c.reason == "ValidationFailed")
                && s.addresses.as_ref().is_some_and(|a| a.len() == 16)
        },
    )
    .await;
    let st = many.status.unwrap();
    let per_cluster = |p: &str| {
        st.addresses
            .iter()
            .flatten()
            .filter(|a| a.value.starts_with(p))
            .count()
    };
    assert!(per_cluster("cluster-a/") >= 5 && per_cluster("cluster-c/") >= 5);
    assert!(own(&st).unwrap().message.contains("16"), "{:?}", own(&st));

    // lonely: no cluster reports it. The hub says so and leaves its
    // controller's addresses and listeners alone.
    let lonely = wait_status(&gateways, "lonely", "NoClusters", |s| {
        own(s).is_some_and(|c| c.reason == "NoClusters" && c.status == "False")
    })
    .await
    .status
    .unwrap_or_default();
    let values: Vec<&str> = lonely
        .addresses
        .iter()
        .flatten()
        .map(|a| a.value.as_str())
        .collect();
    assert_eq!(values, ["192.0.2.7"], "{lonely:?}");
    let names: Vec<&str> = lonely
        .listeners
        .iter()
        .flatten()
        .map(|l| l.name.as_str())
        .collect();
    assert_eq!(names, ["http"], "{lonely:?}");

    // The store: one ClusterReport per cluster, object names valid.
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    let stored = until(
        WAIT,
        || async { reports.list(&Default::default()).await.unwrap().items },
        |items| items.len() == 3,
    )
    .await;
    let mut clusters: Vec<(String, String, u32)> = stored
        .iter()
        .map(|r| (r.name_any(), r.spec.cluster.clone(), r.spec.gateway_count))
        .collect();
    clusters.sort();
    assert_eq!(
        clusters[0],
        (object_name("cluster_1"), "cluster_1".to_owned(), 2)
    );
    assert!(clusters[0].0.starts_with("cluster-1-"), "{clusters:?}");
    assert_eq!(
        clusters[1],
        ("cluster-a".to_owned(), "cluster-a".to_owned(), 2)
    );
    assert_eq!(
        clusters[2],
        ("cluster-c".to_owned(), "cluster-c".to_owned(), 1)
    );
    assert!(stored.iter().all(|r| r.spec.last_report_time.is_some()));

    // Same input again: no write to the Gateway, no write to the store
    // (counted from when the writes of the input before have landed).
    let (rv, writes, report_writes) = settled(
        "web's status and the hub's write counters",
        Duration::from_secs(1),
        WAIT,
        || async {
            (
                gateways.get("web").await.unwrap().resource_version(),
                Metrics::get(&hub.metrics.status_writes),
                Metrics::get(&hub.metrics.report_writes),
            )
        },
    )
    .await;
    a.snapshot(&[
        (NS, "web", cluster_status(&["10.0.0.1"], true)),
        (NS, "many", cluster_status(&ips(0), true)),
    ])
    .await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        gateways.get("web").await.unwrap().resource_version(),
        rv,
        "the same snapshot again wrote the hub Gateway"
    );
    assert_eq!(
        Metrics::get(&hub.metrics.status_writes),
        writes,
        "the same snapshot again counted a status write"
    );
    assert_eq!(
        Metrics::get(&hub.metrics.report_writes),
        report_writes,
        "the same snapshot again wrote the store"
    );

    // A change on a cluster reaches the hub Gateway.
    a.snapshot(&[
        (NS, "web", cluster_status(&["10.0.0.1"], false)),
        (NS, "many", cluster_status(&ips(0), true)),
    ])
    .await;
    wait_status(&gateways, "web", "Programmed False naming cluster-a", |s| {
        find(s, "Programmed")
            .is_some_and(|c| c.status == "False" && c.message.contains("cluster-a Address pending"))
    })
    .await;

    // A spec change bumps the generation; the hub observes it.
    gateways
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"listeners": [{"name": "http", "port": 8080, "protocol": "HTTP"}]}})),
        )
        .await
        .unwrap();
    let web = wait_status(&gateways, "web", "observedGeneration 2", |s| {
        own(s).is_some_and(|c| c.observed_generation == Some(2))
    })
    .await;
    assert!(find(web.status.as_ref().unwrap(), "example.com/PolicyAffected").is_some());
    assert_eq!(Metrics::get(&hub.metrics.status_write_errors), 0);
    hub.shutdown().await.unwrap();
}

/// A second replica imports the store but never writes; a restarted hub
/// restores from the store and the hub Gateway never shows a wrong status
/// on the way, though the agents come back only later.
#[tokio::test]
async fn restart_restores_without_flapping_and_a_second_replica_stays_passive() {
    let Some((_fleet, client, as_hub)) =
        management("restart_restores_without_flapping_and_a_second_replica_stays_passive").await
    else {
        return;
    };
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NS);
    create_hub_gateway(&gateways, "web").await;

    let first = start_hub(&as_hub, "hub-1").await;
    let addr = first.hub.ingest_addr;
    let mut a = Agent::connect(addr, "cluster-a").await;
    let mut b = Agent::connect(addr, "cluster-b").await;
    a.snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    b.snapshot(&[(NS, "web", cluster_status(&["10.0.1.1"], true))])
        .await;
    let settled = wait_status(
        &gateways,
        "web",
        "aggregated over 2 clusters",
        aggregated(2),
    )
    .await;
    let settled = settled.status.unwrap();
    assert!(*first.leader.borrow());

    // A second replica: imports both clusters from the store, writes nothing.
    let second = start_hub(&as_hub, "hub-2").await;
    let deadline = Instant::now() + WAIT;
    while second.hub.index.clusters().len() < 2 || !*second.ready.borrow() {
        assert!(
            Instant::now() < deadline,
            "second replica did not import the store"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    b.snapshot(&[(NS, "web", cluster_status(&["10.0.1.1"], false))])
        .await;
    wait_status(&gateways, "web", "Programmed False", |s| {
        find(s, "Programmed").is_some_and(|c| c.status == "False")
    })
    .await;
    b.snapshot(&[(NS, "web", cluster_status(&["10.0.1.1"], true))])
        .await;
    wait_status(&gateways, "web", "Programmed True again", |s| {
        find(s, "Programmed").is_some_and(|c| c.status == "True")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!*second.leader.borrow(), "second replica took the lease");
    assert_eq!(
        Metrics::get(&second.metrics.status_writes),
        0,
        "passive replica wrote"
    );
    assert_eq!(
        Metrics::get(&second.metrics.report_writes),
        0,
        "passive replica stored"
    );
    assert!(
        Metrics::get(&first.metrics.status_writes) >= 3,
        "the leader did not count the status writes seen above"
    );
    second.shutdown().await.unwrap();

    // Restart: the hub goes away with its agents; a new process starts with
    // nothing in memory and the agents return a while later.
    let recorder = Recorder::start(gateways.clone(), "web");
    assert!(
        recorder.wait_first(WAIT).await,
        "the recorder's watch never delivered web's status"
    );
    drop((a, b));
    first.shutdown().await.unwrap();
    let restarted = start_hub(&as_hub, "hub-3").await;
    let deadline = Instant::now() + WAIT;
    while !*restarted.leader.borrow() || !*restarted.ready.borrow() {
        assert!(Instant::now() < deadline, "restarted hub did not lead");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        restarted.hub.index.clusters().len(),
        2,
        "restored from the store"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let addr = restarted.hub.ingest_addr;
    let mut a = Agent::connect(addr, "cluster-a").await;
    let mut b = Agent::connect(addr, "cluster-b").await;
    a.snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    b.snapshot(&[(NS, "web", cluster_status(&["10.0.1.1"], true))])
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen: Vec<GatewayStatus> = recorder.seen().into_iter().map(|s| s.status).collect();
    drop(recorder);
    assert!(!seen.is_empty(), "the recorder saw no status of web");
    for (i, s) in seen.iter().enumerate() {
        assert!(
            same_status(s, &settled),
            "status #{i} during the restart differs from the settled one:\n{s:#?}\nsettled:\n{settled:#?}"
        );
        let own = own(s).unwrap();
        assert_ne!(own.reason, "NoClusters");
        assert!(!own.message.contains("stale"));
    }
    // lastTransitionTime survived the restart too.
    let now = gateways.get("web").await.unwrap().status.unwrap();
    assert_eq!(
        own(&now).unwrap().last_transition_time,
        own(&settled).unwrap().last_transition_time
    );

    // Deleting a cluster's stored report while it is away deregisters it.
    drop(b);
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    away(&restarted, "cluster-b").await;
    reports
        .delete("cluster-b", &Default::default())
        .await
        .unwrap();
    wait_status(&gateways, "web", "aggregated over 1 cluster", |s| {
        own(s).is_some_and(|c| c.message == "Aggregated the status of 1 cluster")
    })
    .await;
    drop(a);
    restarted.shutdown().await.unwrap();
}

/// A cluster that goes silent gets a `ClusterStale` Warning Event on its
/// `ClusterReport` (with the report's uid, so `kubectl describe
/// clusterreport` lists it), and a `ClusterFresh` Event when it reports
/// again; one Event per transition, not one per sweep.
#[tokio::test]
async fn stale_and_fresh_clusters_get_events_on_their_cluster_report() {
    let Some((_fleet, client, as_hub)) =
        management("stale_and_fresh_clusters_get_events_on_their_cluster_report").await
    else {
        return;
    };
    create_hub_gateway(&Api::namespaced(client.clone(), NS), "web").await;
    let stale_after = Duration::from_secs(2);
    let hub = KubeHub::start(
        HubConfig::loopback(stale_after),
        options("hub-1"),
        as_hub.clone(),
    )
    .await
    .expect("hub starts in Kubernetes mode");
    let mut east = Agent::connect(hub.hub.ingest_addr, "east").await;
    east.snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    let uid = until(
        WAIT,
        || async { reports.get_opt(&object_name("east")).await.unwrap() },
        Option::is_some,
    )
    .await
    .and_then(|r| r.uid())
    .expect("a stored object has a uid");

    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), HUB_NS);
    let about_east = |reason: &'static str| {
        let events = events.clone();
        let uid = uid.clone();
        async move {
            let list = events.list(&Default::default()).await.unwrap();
            list.items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some(reason))
                .filter(|e| {
                    e.regarding.as_ref().is_some_and(|r| {
                        r.kind.as_deref() == Some("ClusterReport")
                            && r.name.as_deref() == Some("east")
                            && r.uid.as_deref() == Some(uid.as_str())
                    })
                })
                .collect::<Vec<_>>()
        }
    };
    let wait_for = |reason: &'static str| async move {
        until(WAIT, || about_east(reason), |found| !found.is_empty()).await
    };

    // Silent (the stream closes; no heartbeats): stale after 2 s.
    drop(east);
    let stale = wait_for("ClusterStale").await;
    let note = stale[0].note.clone().unwrap_or_default();
    assert!(
        note.starts_with("cluster east sent nothing since "),
        "{note}"
    );
    assert!(note.contains("(--stale-after 2s)"), "{note}");
    assert_eq!(stale[0].type_.as_deref(), Some("Warning"));
    assert!(about_east("ClusterFresh").await.is_empty());
    // Many sweeps later, still one Event for the one transition.
    tokio::time::sleep(stale_after).await;
    let stale = about_east("ClusterStale").await;
    assert_eq!(
        stale.len(),
        1,
        "a later sweep published another ClusterStale Event: {stale:?}"
    );
    assert_eq!(stale[0].deprecated_count.unwrap_or(1), 1, "{stale:?}");

    let _east = Agent::connect(hub.hub.ingest_addr, "east").await;
    let fresh = wait_for("ClusterFresh").await;
    assert_eq!(fresh[0].type_.as_deref(), Some("Normal"));
    // The Event is on the API server before the hub has its answer and
    // counts it.
    // gwhub_events_published_total
    until(
        WAIT,
        || async { Metrics::get(&hub.metrics.events_published) },
        |n| *n >= 2,
    )
    .await;
    hub.shutdown().await.unwrap();
}

/// A report that changes just before its agent disconnects (within the
/// store's debounce) is still stored, so a restarted hub resumes from it,
/// not from the one before.
#[tokio::test]
async fn the_last_report_before_a_disconnect_is_stored() {
    let Some((_fleet, client, as_hub)) =
        management("the_last_report_before_a_disconnect_is_stored").await
    else {
        return;
    };
    let hub = start_hub(&as_hub, "hub-1").await;
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    let stored_with = |gateways: usize| {
        let reports = reports.clone();
        async move {
            until(
                WAIT,
                || async { reports.get_opt(&object_name("east")).await.unwrap() },
                |r| {
                    r.as_ref()
                        .is_some_and(|r| r.spec.reported_gateways().unwrap().len() == gateways)
                },
            )
            .await;
        }
    };
    let mut east = Agent::connect(hub.hub.ingest_addr, "east").await;
    east.snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    stored_with(1).await;
    // A second Gateway, acked, then the stream ends at once.
    east.snapshot(&[
        (NS, "web", cluster_status(&["10.0.0.1"], true)),
        (NS, "api", cluster_status(&["10.0.0.2"], true)),
    ])
    .await;
    drop(east);
    stored_with(2).await;
    hub.shutdown().await.unwrap();
}

/// Under --insecure, a cluster pruned for silence loses its stored report
/// too (as the hub's ServiceAccount), so a relist or restart does not
/// bring the made-up name back; a cluster stored in parts loses them all
/// (those its writer and its importer know of: no list).
#[tokio::test]
async fn a_pruned_clusters_stored_report_is_deleted() {
    let Some((fleet, client, as_hub)) =
        management("a_pruned_clusters_stored_report_is_deleted").await
    else {
        return;
    };
    let mut config = HubConfig::loopback(Duration::from_secs(60));
    config.budgets.insecure_prune_after = Duration::from_secs(1);
    let hub = KubeHub::start(config, options("hub-1"), as_hub.clone())
        .await
        .expect("hub starts in Kubernetes mode");
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    let stored = |present: bool| {
        let reports = reports.clone();
        async move {
            until(
                WAIT,
                || async { reports.get_opt(&object_name("rogue")).await.unwrap() },
                |r| r.is_some() == present,
            )
            .await;
        }
    };
    let mut rogue = Agent::connect(hub.hub.ingest_addr, "rogue").await;
    rogue
        .snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    stored(true).await;
    drop(rogue);
    stored(false).await;

    let names: Vec<String> = (0..500).map(|i| format!("gw-{i:03}")).collect();
    let big: Vec<(&str, &str, GatewayStatus)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (NS, n.as_str(), large_status(i, 16)))
        .collect();
    let mut agent = Agent::connect(hub.hub.ingest_addr, "rogue-big").await;
    agent.snapshot_chunked(&big, 25).await;
    let names: Vec<String> = stored_report(&reports, "rogue-big", 500)
        .await
        .iter()
        .map(|r| r.name_any())
        .collect();
    assert!(names.len() > 1, "one object for 500 x 16");
    let (seen, watching) = watched_reports(reports.clone()).await;
    let before = clusterreport_lists(&fleet).await;
    drop(agent);
    until_gone(&seen, &names).await;
    watching.abort();
    // The hub knew every part: it listed none.
    assert_eq!(
        clusterreport_lists(&fleet).await - before,
        0,
        "ClusterReport LISTs"
    );
    hub.shutdown().await.unwrap();
}

/// The store's importer keeps importing while the writer waits for the API
/// budget: here a pruned cluster's delete waits (one write per 100 s, the
/// one token spent on its report) while 70 objects are deleted behind the
/// hub's back (70 entries for the writer) and another replica stores a
/// new cluster, which this hub still imports. The delete used to run
/// inline in the writer, and the importer handed entries over on a
/// 64-slot channel: the 65th blocked its watch.
#[tokio::test]
async fn the_importer_keeps_importing_while_the_writer_waits_for_the_budget() {
    let Some((_fleet, client, as_hub)) =
        management("the_importer_keeps_importing_while_the_writer_waits_for_the_budget").await
    else {
        return;
    };
    let mut config = HubConfig::loopback(Duration::from_secs(60));
    config.budgets.insecure_prune_after = Duration::from_secs(1);
    let mut opts = options("hub-1");
    opts.api_qps = 0.01;
    opts.api_burst = 1;
    let hub = KubeHub::start(config, opts, as_hub.clone())
        .await
        .expect("hub starts in Kubernetes mode");
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    let mut rogue = Agent::connect(hub.hub.ingest_addr, "rogue").await;
    rogue
        .snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    // Its report takes the one token.
    until(
        WAIT,
        || async { reports.get_opt(&object_name("rogue")).await.unwrap() },
        Option::is_some,
    )
    .await;
    drop(rogue);
    // Pruned.
    until(
        WAIT,
        || async { hub.hub.index.cluster_record("rogue") },
        Option::is_none,
    )
    .await;
    // Heard from in an hour: not pruned while the test looks (a head
    // without a lastSeenTime would be silent since 1970).
    let last_seen = Timestamp::now()
        .checked_add(jiff::SignedDuration::from_hours(1))
        .unwrap()
        .to_string();
    let object = |cluster: &str, part: u32| -> ClusterReport {
        serde_json::from_value(json!({
            "apiVersion": "gwhub.io/v1alpha1", "kind": "ClusterReport",
            "metadata": {
                "name": gwhub_hub_rules::layout::part_name(cluster, part),
                "labels": {"gwhub.io/cluster": cluster, "gwhub.io/part": part.to_string()},
            },
            "spec": {"cluster": cluster, "part": part, "parts": 2, "gatewayCount": 0,
                "gateways": [], "lastReportTime": Timestamp::now().to_string(),
                "lastSeenTime": last_seen},
        }))
        .unwrap()
    };
    for part in 1..=70 {
        let o = object("ghost", part);
        reports.create(&PostParams::default(), &o).await.unwrap();
        reports
            .delete(&o.name_any(), &Default::default())
            .await
            .unwrap();
    }
    reports
        .create(&PostParams::default(), &object("other", 0))
        .await
        .unwrap();
    // Another replica's report, imported.
    until(
        WAIT,
        || async { hub.hub.index.cluster_record("other") },
        Option::is_some,
    )
    .await;
    hub.shutdown().await.unwrap();
}

/// ClusterReport LISTs the API server has answered so far (its
/// `apiserver_request_total`, read with kubectl; awaited, so the hub in
/// this process keeps running meanwhile).
async fn clusterreport_lists(fleet: &Fleet) -> u64 {
    let out = tokio::process::Command::new(gwhub_test_kit::install::kubectl())
        .arg("--kubeconfig")
        .arg(&fleet.cluster("mgmt").kubeconfig)
        .args(["get", "--raw", "/metrics"])
        .output()
        .await
        .expect("kubectl runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_request_total{")
                && l.contains("resource=\"clusterreports\"")
                && l.contains("verb=\"LIST\"")
                // Not a GET of a missing object (the server counts it as a
                // LIST answered 404).
                && l.contains("code=\"200\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// The ClusterReports as a watch sees them: listed once (before this
/// returns), then watched, so waiting on it asks the API server nothing
/// (this API server counts a GET of a ClusterReport as a LIST).
async fn watched_reports(
    api: Api<ClusterReport>,
) -> (
    kube::runtime::reflector::Store<ClusterReport>,
    tokio::task::JoinHandle<()>,
) {
    use kube::runtime::{reflector, watcher};
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher::watcher(api, watcher::Config::default()));
    let task = tokio::spawn(stream.for_each(|_| async {}));
    reader.wait_until_ready().await.unwrap();
    (reader, task)
}

/// Waits until none of `names` is stored, as `seen` watches them.
async fn until_gone(seen: &kube::runtime::reflector::Store<ClusterReport>, names: &[String]) {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = seen
            .state()
            .iter()
            .filter(|r| names.contains(&r.name_any()))
            .count();
        if left == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{left} of {} objects left",
            names.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An admin deleting many clusters' heads at once (a mass
/// deregistration): the hub deletes every part of theirs as its importer
/// last saw it, without a LIST per cluster (it used to list each
/// cluster's objects by label, on every replica).
#[tokio::test]
async fn a_mass_deregistration_deletes_every_part_without_listing() {
    let Some((fleet, client, as_hub)) =
        management("a_mass_deregistration_deletes_every_part_without_listing").await
    else {
        return;
    };
    let hub = start_hub(&as_hub, "hub-1").await;
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    let part_name = gwhub_hub_rules::layout::part_name;
    let object = |cluster: &str, part: u32| -> ClusterReport {
        serde_json::from_value(json!({
            "apiVersion": "gwhub.io/v1alpha1", "kind": "ClusterReport",
            "metadata": {
                "name": part_name(cluster, part),
                "labels": {"gwhub.io/cluster": cluster, "gwhub.io/part": part.to_string()},
            },
            "spec": {"cluster": cluster, "part": part, "parts": 3, "gatewayCount": 0,
                "gateways": [], "lastReportTime": Timestamp::now().to_string(),
                // Not silent: not pruned (--insecure-prune-after 10m).
                "lastSeenTime": Timestamp::now().to_string()},
        }))
        .unwrap()
    };
    let clusters: Vec<String> = (0..10).map(|i| format!("gone-{i}")).collect();
    for c in &clusters {
        for part in [1, 2, 0] {
            reports
                .create(&PostParams::default(), &object(c, part))
                .await
                .unwrap();
        }
    }
    // Every cluster imported: none left to wait for.
    until(
        WAIT,
        || async {
            clusters
                .iter()
                .filter(|c| hub.hub.index.cluster_record(c).is_none())
                .cloned()
                .collect::<Vec<_>>()
        },
        Vec::is_empty,
    )
    .await;
    let parts: Vec<String> = clusters
        .iter()
        .flat_map(|c| [part_name(c, 1), part_name(c, 2)])
        .collect();
    let (seen, watching) = watched_reports(reports.clone()).await;
    let before = clusterreport_lists(&fleet).await;
    for c in &clusters {
        reports.delete(c, &Default::default()).await.unwrap();
    }
    until_gone(&seen, &parts).await;
    assert!(
        clusters
            .iter()
            .all(|c| hub.hub.index.cluster_record(c).is_none()),
        "deregistered"
    );
    // One at most (the importer's watch may relist).
    let lists = clusterreport_lists(&fleet).await - before;
    watching.abort();
    assert!(
        lists <= 1,
        "{lists} ClusterReport LISTs for {} deregistered clusters",
        clusters.len()
    );
    hub.shutdown().await.unwrap();
}

/// When its clusters withdraw every address and listener (the conditions
/// staying the same), or stop reporting the Gateway, the hub Gateway drops
/// what the hub wrote, and no write is refused on the way (an empty
/// listener list left by server-side apply is null, which the CRD refuses).
#[tokio::test]
async fn withdrawn_addresses_and_listeners_leave_the_hub_gateway() {
    let Some((_fleet, client, as_hub)) =
        management("withdrawn_addresses_and_listeners_leave_the_hub_gateway").await
    else {
        return;
    };
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NS);
    create_hub_gateway(&gateways, "web").await;
    let hub = start_hub(&as_hub, "hub-1").await;
    let mut east = Agent::connect(hub.hub.ingest_addr, "east").await;
    east.snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    wait_status(&gateways, "web", "east's address and listener", |s| {
        s.addresses.as_ref().is_some_and(|a| a.len() == 1)
            && s.listeners.as_ref().is_some_and(|l| l.len() == 1)
    })
    .await;

    let mut bare = cluster_status(&[], true);
    bare.listeners = None;
    east.snapshot(&[(NS, "web", bare)]).await;
    let web = wait_status(&gateways, "web", "no addresses or listeners", |s| {
        s.addresses.as_deref().unwrap_or_default().is_empty()
            && s.listeners.as_deref().unwrap_or_default().is_empty()
    })
    .await;
    assert!(own(web.status.as_ref().unwrap()).is_some_and(|c| c.reason == "Aggregated"));

    // Reported again, then no longer at all: NoClusters, nothing of east's left.
    east.snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    wait_status(&gateways, "web", "east's listener again", |s| {
        s.listeners.as_ref().is_some_and(|l| l.len() == 1)
    })
    .await;
    east.snapshot(&[]).await;
    wait_status(&gateways, "web", "NoClusters without listeners", |s| {
        own(s).is_some_and(|c| c.reason == "NoClusters")
            && s.addresses.as_deref().unwrap_or_default().is_empty()
            && s.listeners.as_deref().unwrap_or_default().is_empty()
    })
    .await;
    assert_eq!(Metrics::get(&hub.metrics.status_write_errors), 0);
    hub.shutdown().await.unwrap();
}

/// `gwhub_propagation_seconds`: a delta stamped 3 s ago (the agent's
/// clock) is observed once, when the status write carrying it is accepted;
/// snapshots and unstamped deltas are not.
#[tokio::test]
async fn propagation_is_measured_from_the_agents_stamp_to_the_write() {
    let Some((_fleet, client, as_hub)) =
        management("propagation_is_measured_from_the_agents_stamp_to_the_write").await
    else {
        return;
    };
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NS);
    create_hub_gateway(&gateways, "web").await;
    let hub = start_hub(&as_hub, "hub-1").await;
    let propagation = |hub: &KubeHub| {
        let text = gwhub_hub::metrics::render(&[], 0, Some(hub.metrics.as_ref()));
        let samples = gwhub_common::metrics_http::samples(&text);
        (
            samples["gwhub_propagation_seconds_count"],
            samples["gwhub_propagation_seconds_sum"],
        )
    };
    let mut east = Agent::connect(hub.hub.ingest_addr, "east").await;
    east.snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    wait_status(&gateways, "web", "east's address", |s| {
        s.addresses.as_ref().is_some_and(|a| a.len() == 1)
    })
    .await;
    east.delta(NS, "web", &cluster_status(&["10.0.0.2"], true), 0)
        .await;
    wait_status(&gateways, "web", "an unstamped change", |s| {
        s.addresses
            .as_ref()
            .is_some_and(|a| a.iter().any(|a| a.value == "east/10.0.0.2"))
    })
    .await;
    assert_eq!(propagation(&hub).0, 0.0, "snapshots and unstamped deltas");

    // The stamped change, sent at once: the last write's echo (its answer,
    // the watch) may still be in flight, and the stamp outlives it (see
    // the index's `a_stamp_given_back_while_its_delta_lands_is_kept`).
    let observed = Timestamp::now().as_millisecond() - 3_000;
    east.delta(NS, "web", &cluster_status(&["10.0.0.3"], true), observed)
        .await;
    wait_status(&gateways, "web", "the stamped change", |s| {
        s.addresses
            .as_ref()
            .is_some_and(|a| a.iter().any(|a| a.value == "east/10.0.0.3"))
    })
    .await;
    let (count, sum) = until_named(
        "the stamped change's propagation was never observed",
        Duration::from_secs(10),
        || async { propagation(&hub) },
        |(count, _)| *count >= 1.0,
    )
    .await;
    assert_eq!(count, 1.0, "the stamped change was observed more than once");
    assert!((3.0..60.0).contains(&sum), "{sum}");
    hub.shutdown().await.unwrap();
}

/// `--otlp-endpoint` in Kubernetes mode: a delta carrying a W3C
/// `traceparent` is applied, aggregated and written to the hub Gateway in
/// spans of that trace, each the child of the one before, naming the
/// Gateway (the export is this test process's: the hub runs in it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_delta_is_followed_to_the_status_write() {
    let Some((_fleet, client, as_hub)) =
        management("a_traced_delta_is_followed_to_the_status_write").await
    else {
        return;
    };
    let (receiver, otlp) = gwhub_test_kit::otlp::Receiver::start().await;
    // The default batch delay (5 s) is well within the wait below.
    let _export = gwhub_common::logging::init_with_otlp("info", "gwhub", Some(&otlp)).unwrap();
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NS);
    create_hub_gateway(&gateways, "traced").await;
    let hub = start_hub(&as_hub, "hub-1").await;
    let mut east = Agent::connect(hub.hub.ingest_addr, "east").await;
    east.snapshot(&[(NS, "traced", cluster_status(&["10.0.0.1"], true))])
        .await;
    wait_status(&gateways, "traced", "east's address", |s| {
        s.addresses.as_ref().is_some_and(|a| a.len() == 1)
    })
    .await;

    let (trace, parent) = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
    east.traced_delta(
        NS,
        "traced",
        &cluster_status(&["10.0.0.2"], true),
        0,
        &format!("00-{trace}-{parent}-01"),
    )
    .await;
    let key = format!("{NS}/traced");
    let spans = receiver
        .wait_for_in_trace(trace, "status_write", &key, Duration::from_secs(30))
        .await;
    let hex = |b: &[u8]| b.iter().map(|b| format!("{b:02x}")).collect::<String>();
    // Every write has a status_write span; this change's are in its trace.
    let find = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name && s.attribute("gateway") == Some(&key) && s.trace() == trace)
            .unwrap_or_else(|| panic!("no span {name} for {key} in trace {trace}: {spans:#?}"))
    };
    let (apply, aggregate, write) = (find("apply_delta"), find("aggregate"), find("status_write"));
    for s in [apply, aggregate, write] {
        assert_eq!(s.service, "gwhub", "{s:?}");
    }
    assert_eq!(hex(&apply.parent_span_id), parent);
    assert_eq!(apply.attribute("cluster"), Some("east"));
    assert_eq!(aggregate.parent_span_id, apply.span_id);
    assert_eq!(write.parent_span_id, aggregate.span_id);
    hub.shutdown().await.unwrap();
}

// ---- the Dashboard shows what the hub wrote ---------------------------------

/// A status with lists in a canonical order (conditions by type,
/// listeners by name), so two statuses compare whatever order the API
/// server merged the lists in.
fn canonical(mut s: GatewayStatus) -> GatewayStatus {
    if let Some(c) = s.conditions.as_mut() {
        c.sort_by(|a, b| a.type_.cmp(&b.type_));
    }
    if let Some(l) = s.listeners.as_mut() {
        l.sort_by(|a, b| a.name.cmp(&b.name));
        for l in l.iter_mut() {
            l.conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
        }
    }
    s
}

/// Polls until `GetGateway` for `name` and the hub Gateway's status are
/// equal (conditions with their times, listeners, addresses,
/// observedGeneration) and `pred` holds on them; returns the Dashboard's
/// Gateway.
async fn wait_dashboard_equals_written(
    dashboard: &mut v1::dashboard_client::DashboardClient<tonic::transport::Channel>,
    api: &Api<Gateway>,
    name: &str,
    pred: impl Fn(&GatewayStatus) -> bool,
) -> v1::AggregatedGateway {
    let deadline = Instant::now() + WAIT;
    loop {
        let written = canonical(api.get(name).await.unwrap().status.unwrap_or_default());
        let got = dashboard
            .get_gateway(v1::GetGatewayRequest {
                namespace: NS.into(),
                name: name.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .gateway
            .unwrap();
        let shown = canonical(
            gwhub_proto::convert::status_from_proto(got.status.clone().unwrap_or_default())
                .unwrap(),
        );
        if pred(&written) && shown == written {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: the Dashboard never showed the written status\nwritten: {written:#?}\nDashboard: {shown:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Other writers' conditions, applied by field manager `policy-controller`
/// on the status subresource (so they are its, not the hub's).
async fn apply_foreign_conditions(api: &Api<Gateway>, name: &str, types: &[String]) {
    let conditions: Vec<serde_json::Value> = types
        .iter()
        .map(|t| {
            json!({
                "type": t, "status": "True", "reason": "Attached",
                "message": format!("{t} from the policy controller"), "observedGeneration": 1,
                "lastTransitionTime": "2026-11-23T09:00:00Z"
            })
        })
        .collect();
    let patch = json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "status": {"conditions": conditions},
    });
    api.patch_status(
        name,
        &PatchParams::apply("policy-controller").force(),
        &Patch::Apply(&patch),
    )
    .await
    .unwrap();
}

/// One aggregation per hub Gateway. `GetGateway` shows exactly
/// the status the hub wrote onto the hub Gateway (conditions with their
/// times, listeners, addresses, observedGeneration 2 after a spec change),
/// also where six other writers' conditions take slots of the 8: the
/// aggregated types pushed out are named in the Dashboard's omissions and
/// in the hub's own condition; when the other writer withdraws some, they
/// come back on both.
#[tokio::test]
async fn the_dashboard_shows_what_the_hub_wrote() {
    let Some((_fleet, client, as_hub)) = management("the_dashboard_shows_what_the_hub_wrote").await
    else {
        return;
    };
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NS);
    for name in ["web", "crowded"] {
        create_hub_gateway(&gateways, name).await;
        // A spec change: generation 2, which the Dashboard must show too.
        gateways
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"listeners": [{"name": "http", "port": 8080, "protocol": "HTTP"}]}})),
            )
            .await
            .unwrap();
    }
    let foreign: Vec<String> = (0..6).map(|i| format!("example.com/Policy{i}")).collect();
    apply_foreign_conditions(&gateways, "crowded", &foreign).await;

    let hub = start_hub(&as_hub, "hub-1").await;
    let mut dashboard = v1::dashboard_client::DashboardClient::connect(format!(
        "http://{}",
        hub.hub.dashboard_addr
    ))
    .await
    .unwrap();
    let reported = |ip: &str| {
        let mut s = cluster_status(&[ip], true);
        let conditions = s.conditions.as_mut().unwrap();
        conditions.push(cond("DNSReady", "True", "AllListenersReady", ""));
        conditions.push(cond(
            "LoadBalancerReady",
            "True",
            "LoadBalancerProvisioned",
            "",
        ));
        s
    };
    let mut east = Agent::connect(hub.hub.ingest_addr, "east").await;
    let mut west = Agent::connect(hub.hub.ingest_addr, "west").await;
    east.snapshot(&[
        (NS, "web", reported("10.0.0.1")),
        (NS, "crowded", reported("10.0.0.2")),
    ])
    .await;
    west.snapshot(&[
        (NS, "web", reported("10.0.1.1")),
        (NS, "crowded", reported("10.0.1.2")),
    ])
    .await;

    // web: every aggregated type, observedGeneration 2.
    let web = wait_dashboard_equals_written(&mut dashboard, &gateways, "web", |s| {
        aggregated(2)(s) && own(s).is_some_and(|c| c.observed_generation == Some(2))
    })
    .await;
    assert!(web.omissions.is_empty(), "{:?}", web.omissions);
    assert_eq!(web.clusters, ["east", "west"]);

    // crowded: own + 6 foreign + Accepted fill the 8; the rest is named.
    let crowded = wait_dashboard_equals_written(&mut dashboard, &gateways, "crowded", |s| {
        own(s).is_some_and(|c| c.reason == "ValidationFailed" && c.observed_generation == Some(2))
            && s.conditions.as_ref().is_some_and(|c| c.len() == 8)
    })
    .await;
    let status = canonical(
        gwhub_proto::convert::status_from_proto(crowded.status.clone().unwrap()).unwrap(),
    );
    let types: BTreeSet<&str> = status
        .conditions
        .iter()
        .flatten()
        .map(|c| c.type_.as_str())
        .collect();
    let mut want: BTreeSet<&str> = foreign.iter().map(String::as_str).collect();
    want.extend([OWN, "Accepted"]);
    assert_eq!(types, want);
    for t in &foreign {
        let c = find(&status, t).unwrap();
        assert_eq!(c.message, format!("{t} from the policy controller"));
        assert_eq!(
            c.observed_generation,
            Some(1),
            "another writer's, kept as it is"
        );
    }
    let left_out: BTreeSet<&str> = crowded
        .omissions
        .iter()
        .filter(|o| o.item == "condition" && o.rule == "too_many")
        .flat_map(|o| o.names.iter().map(String::as_str))
        .collect();
    assert_eq!(
        left_out,
        BTreeSet::from(["DNSReady", "LoadBalancerReady", "Programmed"]),
        "{:?}",
        crowded.omissions
    );
    let message = &own(&status).unwrap().message;
    for t in &left_out {
        assert!(message.contains(t), "{message}");
    }
    // ListGateways serves the same aggregation.
    let listed = dashboard
        .list_gateways(v1::ListGatewaysRequest::default())
        .await
        .unwrap()
        .into_inner()
        .gateways;
    let listed_crowded = listed.iter().find(|g| g.name == "crowded").unwrap();
    assert_eq!(listed_crowded.status, crowded.status);
    assert_eq!(listed_crowded.omissions, crowded.omissions);

    // The other writer withdraws three of its conditions: the pushed-out
    // types come back, on the hub Gateway and on the Dashboard alike.
    apply_foreign_conditions(&gateways, "crowded", &foreign[..3]).await;
    let crowded = wait_dashboard_equals_written(&mut dashboard, &gateways, "crowded", |s| {
        aggregated(2)(s) && find(s, "LoadBalancerReady").is_some()
    })
    .await;
    assert!(crowded.omissions.is_empty(), "{:?}", crowded.omissions);
    assert_eq!(
        crowded.status.unwrap().conditions.len(),
        3 + 5,
        "3 foreign, own, Accepted, Programmed, DNSReady, LoadBalancerReady"
    );
    assert_eq!(Metrics::get(&hub.metrics.status_write_errors), 0);
    hub.shutdown().await.unwrap();
}

/// A Gateway of `listeners` listeners as OpenShift's agent reports it: four
/// conditions on the Gateway, four per listener, two addresses.
fn large_status(i: usize, listeners: usize) -> GatewayStatus {
    let c = |t: &str, reason: &str, message: &str| cond(t, "True", reason, message);
    GatewayStatus {
        addresses: Some(vec![
            GatewayStatusAddresses {
                r#type: Some("IPAddress".into()),
                value: format!("10.{}.{}.1", i / 256, i % 256),
            },
            GatewayStatusAddresses {
                r#type: Some("Hostname".into()),
                value: format!("a{i}-1234567890.us-east-1.elb.amazonaws.com"),
            },
        ]),
        conditions: Some(vec![
            c("Accepted", "Accepted", "Resource accepted"),
            c(
                "Programmed",
                "Programmed",
                "Resource programmed, assigned to service(s)",
            ),
            c(
                "LoadBalancerReady",
                "LoadBalancerProvisioned",
                "The LoadBalancer service is provisioned",
            ),
            c(
                "DNSReady",
                "AllListenersReady",
                "All the listeners have DNS ready",
            ),
        ]),
        listeners: Some(
            (0..listeners)
                .map(|l| GatewayStatusListeners {
                    name: format!("https-{l}"),
                    attached_routes: 3,
                    supported_kinds: Some(vec![GatewayStatusListenersSupportedKinds {
                        group: Some("gateway.networking.k8s.io".into()),
                        kind: "HTTPRoute".into(),
                    }]),
                    conditions: vec![
                        c("Accepted", "Accepted", "No errors found"),
                        c("Programmed", "Programmed", "No errors found"),
                        c("ResolvedRefs", "ResolvedRefs", "No errors found"),
                        c(
                            "DNSReady",
                            "NoFailedZones",
                            "The record is provisioned in all reported zones.",
                        ),
                    ],
                })
                .collect(),
        ),
        attached_listener_sets: None,
    }
}

/// The stored objects of `cluster` once they hold `gateways` Gateways in
/// as many objects as the head names.
async fn stored_report(
    reports: &Api<ClusterReport>,
    cluster: &str,
    gateways: usize,
) -> Vec<ClusterReport> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let mine: Vec<ClusterReport> = reports
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|r| r.spec.cluster == cluster)
            .collect();
        let total: usize = mine
            .iter()
            .map(|r| r.spec.reported_gateways().unwrap().len())
            .sum();
        let head = mine.iter().find(|r| r.spec.part == 0);
        if total == gateways && head.is_some_and(|h| h.spec.parts as usize == mine.len()) {
            return mine;
        }
        assert!(
            Instant::now() < deadline,
            "{cluster}: {} objects holding {total} Gateways, head {:?}",
            mine.len(),
            head.map(|h| h.spec.parts)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A cluster of 500 Gateways x 16 listeners (far over one
/// object's ~1.5 MiB) is stored over several ClusterReports, each within
/// the limit; a part lost while the cluster was away is written again when
/// it reconnects; a new hub reassembles it exactly; when the cluster
/// shrinks, the parts no longer needed are deleted.
#[tokio::test]
async fn a_cluster_of_500_gateways_x_16_listeners_is_stored_in_parts() {
    let Some((_fleet, client, as_hub)) =
        management("a_cluster_of_500_gateways_x_16_listeners_is_stored_in_parts").await
    else {
        return;
    };
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    let first = start_hub(&as_hub, "hub-1").await;
    let names: Vec<String> = (0..500).map(|i| format!("gw-{i:03}")).collect();
    let big: Vec<(&str, &str, GatewayStatus)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (NS, n.as_str(), large_status(i, 16)))
        .collect();
    let mut agent = Agent::connect(first.hub.ingest_addr, "big").await;
    agent.snapshot_chunked(&big, 25).await;
    let stored = stored_report(&reports, "big", 500).await;
    assert!(stored.len() > 1, "one object for 500 x 16");
    let mut bytes = 0;
    for r in &stored {
        let n = serde_json::to_vec(r).unwrap().len();
        assert!(n < 1024 * 1024, "{}: {n} bytes", r.name_any());
        assert_eq!(
            r.name_any(),
            gwhub_hub_rules::layout::part_name("big", r.spec.part)
        );
        assert_eq!(
            r.labels().get("gwhub.io/cluster").map(String::as_str),
            Some("big")
        );
        bytes += n;
    }
    println!(
        "500 x 16 listeners: {} objects, {bytes} bytes, {} bytes per (cluster, Gateway)",
        stored.len(),
        bytes / 500
    );
    let want = first.hub.index.cluster_record("big").unwrap().gateways;
    assert_eq!(want.len(), 500);
    assert_eq!(Metrics::get(&first.metrics.report_write_errors), 0);

    // A part deleted behind the hub's back (or rewritten by another replica
    // the cluster streamed to meanwhile) is written again once the cluster
    // streams here anew: a new stream trusts nothing written for the old.
    drop(agent);
    let delete_part_1 = || {
        let reports = reports.clone();
        async move {
            reports
                .delete(
                    &gwhub_hub_rules::layout::part_name("big", 1),
                    &Default::default(),
                )
                .await
                .unwrap();
        }
    };
    delete_part_1().await;
    let mut agent = Agent::connect(first.hub.ingest_addr, "big").await;
    agent.snapshot_chunked(&big, 25).await;
    let stored = stored_report(&reports, "big", 500).await;
    assert!(
        stored.iter().any(|r| r.spec.part == 1),
        "part 1 never written again"
    );
    drop(agent);
    first.shutdown().await.unwrap();

    // A new hub reassembles the cluster from the parts.
    let second = start_hub(&as_hub, "hub-2").await;
    let deadline = Instant::now() + WAIT;
    while !*second.ready.borrow() {
        assert!(Instant::now() < deadline, "second hub never ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let restored = second.hub.index.cluster_record("big").expect("restored");
    assert!(restored.gateways == want, "restored report differs");

    // A part deleted while the cluster streams here is written again
    // (the importer sees the Delete), without a change or a reconnect.
    let mut agent = Agent::connect(second.hub.ingest_addr, "big").await;
    agent.snapshot_chunked(&big, 25).await;
    let stored = stored_report(&reports, "big", 500).await;
    let parts = stored.len();
    delete_part_1().await;
    let stored = stored_report(&reports, "big", 500).await;
    assert_eq!(stored.len(), parts);

    // The cluster shrinks: one object again, the other parts deleted.
    agent.snapshot(&big[..3]).await;
    let stored = stored_report(&reports, "big", 3).await;
    assert_eq!(stored.len(), 1, "stale parts left");
    assert_eq!(stored[0].spec.parts, 1);

    // Grown again, then away: deleting the head deregisters the cluster
    // and the hub deletes its other parts (through its API budget).
    agent.snapshot_chunked(&big, 25).await;
    stored_report(&reports, "big", 500).await;
    drop(agent);
    away(&second, "big").await;
    reports.delete("big", &Default::default()).await.unwrap();
    let deadline = Instant::now() + WAIT;
    loop {
        let left = reports
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|r| r.spec.cluster == "big")
            .count();
        if left == 0 && second.hub.index.cluster_record("big").is_none() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{left} objects of a deregistered cluster left"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    second.shutdown().await.unwrap();
}

/// `--kube-api-qps`: with a budget of one write a second (shared by the
/// status writer and the store), a burst of 20 changes is written as a few
/// writes that carry the latest state; nothing is lost.
#[tokio::test]
async fn a_write_budget_coalesces_writes_to_the_latest_state() {
    let Some((_fleet, client, as_hub)) =
        management("a_write_budget_coalesces_writes_to_the_latest_state").await
    else {
        return;
    };
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NS);
    create_hub_gateway(&gateways, "web").await;
    let mut o = options("hub-1");
    o.api_qps = 1.0;
    o.api_burst = 1;
    let hub = KubeHub::start(HubConfig::loopback(Duration::from_secs(60)), o, as_hub)
        .await
        .expect("hub starts in Kubernetes mode");
    let mut a = Agent::connect(hub.hub.ingest_addr, "cluster-a").await;
    a.snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    wait_status(&gateways, "web", "aggregated over 1 cluster", |s| {
        own(s).is_some_and(|c| c.message == "Aggregated the status of 1 cluster")
    })
    .await;
    let before = Metrics::get(&hub.metrics.status_writes);
    let ips: Vec<String> = (0..20).map(|i| format!("10.0.1.{i}")).collect();
    for (i, ip) in ips.iter().enumerate() {
        a.snapshot(&[(NS, "web", cluster_status(&[ip.as_str()], i % 2 == 0))])
            .await;
    }
    // The last change: address 10.0.1.19, Programmed False.
    wait_status(&gateways, "web", "the last change", |s| {
        s.addresses
            .iter()
            .flatten()
            .any(|a| a.value == "cluster-a/10.0.1.19")
            && find(s, "Programmed").is_some_and(|c| c.status == "False")
    })
    .await;
    let writes = Metrics::get(&hub.metrics.status_writes) - before;
    assert!(writes < 20, "{writes} status writes for 20 changes");
    assert!(Metrics::get(&hub.metrics.api_throttled_waits) > 0);
    assert_eq!(Metrics::get(&hub.metrics.status_write_errors), 0);
    // The store holds the last report too.
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    let deadline = Instant::now() + WAIT;
    loop {
        let r = reports.get(&object_name("cluster-a")).await.unwrap();
        let stored = r
            .spec
            .reported_gateways()
            .unwrap()
            .first()
            .and_then(|g| g.status.addresses.clone());
        if stored.is_some_and(|a| a.iter().any(|a| a.value == "10.0.1.19")) {
            break;
        }
        assert!(Instant::now() < deadline, "the last report never stored");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(a);
    hub.shutdown().await.unwrap();
}

/// The store packs each part's Gateways into one string. A hub
/// upgraded over a store written in the earlier format (a deep `gateways`
/// list, by the same field manager) imports it, and its first write of the
/// cluster replaces the list with the packed form; an object whose packed
/// string does not unpack is skipped with an error naming it (counted),
/// and the rest of the store still imports.
#[tokio::test]
async fn an_old_format_store_is_imported_and_a_bad_object_is_skipped() {
    let Some((_fleet, client, as_hub)) =
        management("an_old_format_store_is_imported_and_a_bad_object_is_skipped").await
    else {
        return;
    };
    let reports: Api<ClusterReport> = Api::namespaced(as_hub.clone(), HUB_NS);
    let apply = |name: &str, spec: serde_json::Value| {
        let reports = reports.clone();
        let body = json!({
            "apiVersion": "gwhub.io/v1alpha1", "kind": "ClusterReport",
            "metadata": {"name": name, "labels": {"gwhub.io/cluster": name, "gwhub.io/part": "0"}},
            "spec": spec,
        });
        let name = name.to_owned();
        async move {
            reports
                .patch(
                    &name,
                    &PatchParams::apply(gwhub_hub::kube::FIELD_MANAGER).force(),
                    &Patch::Apply(&body),
                )
                .await
                .unwrap();
        }
    };
    let old_status = cluster_status(&["10.0.0.1"], true);
    // Seen just now: a cluster silent for longer than
    // --insecure-prune-after (10m; this hub is --insecure) is forgotten at
    // the staleness sweep after its import, within a second of ready, and
    // its stored report deleted.
    let now = Timestamp::now().to_string();
    apply(
        "old",
        json!({"cluster": "old", "gatewayCount": 1, "lastReportTime": now,
            "lastSeenTime": now,
            "gateways": [{"namespace": NS, "name": "web", "status": old_status}]}),
    )
    .await;
    apply(
        "broken",
        json!({"cluster": "broken", "gatewayCount": 1, "lastReportTime": now,
            "lastSeenTime": now, "gatewaysPacked": "not base64 %%%"}),
    )
    .await;

    let hub = start_hub(&as_hub, "hub-1").await;
    let deadline = Instant::now() + WAIT;
    while !*hub.ready.borrow() {
        assert!(Instant::now() < deadline, "hub never ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Imported by the time the hub is ready.
    let old = hub
        .hub
        .index
        .cluster_record("old")
        .expect("old imported at ready");
    let web = gwhub_model::GatewayKey::new(NS, "web");
    assert!(
        old.gateways
            .get(&web)
            .is_some_and(|s| same_status(s, &old_status)),
        "old-format Gateway not imported: {:?}",
        old.gateways
    );
    let broken = hub
        .hub
        .index
        .cluster_record("broken")
        .expect("an unreadable object keeps its cluster registered");
    assert!(broken.gateways.is_empty());
    assert_eq!(Metrics::get(&hub.metrics.report_unreadable), 1);

    // The cluster reports: written packed, the old list gone.
    let mut agent = Agent::connect(hub.hub.ingest_addr, "old").await;
    let new_status = cluster_status(&["10.0.0.9"], true);
    agent.snapshot(&[(NS, "web", new_status.clone())]).await;
    let deadline = Instant::now() + WAIT;
    loop {
        let r = client_reports(&client).get("old").await.unwrap();
        if r.spec.gateways_packed.is_some() {
            assert!(r.spec.gateways.is_empty(), "old list kept: {:?}", r.spec);
            let got = r.spec.reported_gateways().unwrap();
            assert_eq!(got.len(), 1);
            assert!(same_status(&got[0].status, &new_status));
            break;
        }
        assert!(Instant::now() < deadline, "old never rewritten packed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(agent);
    hub.shutdown().await.unwrap();
}

fn client_reports(client: &Client) -> Api<ClusterReport> {
    Api::namespaced(client.clone(), HUB_NS)
}

/// A hub newer than the management cluster's ClusterReport CRD (the CRD
/// not applied before the hub on an upgrade) does not count a report the
/// API server stripped of `gatewaysPacked` as stored: it fails the write,
/// names the CRD, and stores the report once the CRD is applied.
#[tokio::test]
async fn an_older_clusterreport_crd_fails_writes_instead_of_storing_nothing() {
    let Some((_fleet, client, as_hub)) =
        management("an_older_clusterreport_crd_fails_writes_instead_of_storing_nothing").await
    else {
        return;
    };
    let gvk = GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition");
    let ar = kube::discovery::ApiResource::from_gvk_with_plural(&gvk, "customresourcedefinitions");
    let crds: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let name = "clusterreports.gwhub.io";
    let current = crds.get(name).await.unwrap();
    let mut older = current.clone();
    let removed = older.data["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
        ["spec"]["properties"]
        .as_object_mut()
        .and_then(|p| p.remove("gatewaysPacked"));
    assert!(removed.is_some(), "the CRD has no gatewaysPacked to remove");
    crds.replace(name, &PostParams::default(), &older)
        .await
        .unwrap();
    // The API server serves the new schema in its own time: until it no
    // longer takes gatewaysPacked in a (dry-run) apply of a ClusterReport,
    // refusing the field or pruning it, a write would still store it.
    let probes: Api<ClusterReport> = Api::namespaced(client.clone(), NS);
    let probe = json!({
        "apiVersion": "gwhub.io/v1alpha1", "kind": "ClusterReport",
        "metadata": {"name": "schema-probe"},
        "spec": {"cluster": "schema-probe", "gatewayCount": 0,
            "lastReportTime": Timestamp::now().to_string(),
            "lastSeenTime": Timestamp::now().to_string(), "gatewaysPacked": ""},
    });
    let _pruned = until_named(
        "the API server never served the CRD without gatewaysPacked",
        WAIT,
        || async {
            probes
                .patch(
                    "schema-probe",
                    &PatchParams::apply("hub-kube-test").dry_run(),
                    &Patch::Apply(&probe),
                )
                .await
                .map(|r| r.spec.gateways_packed)
                .map_err(|e| e.to_string())
        },
        |packed| match packed {
            Ok(packed) => packed.is_none(),
            Err(e) => e.contains("gatewaysPacked: field not declared in schema"),
        },
    )
    .await;

    let hub = start_hub(&as_hub, "hub-1").await;
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    let mut east = Agent::connect(hub.hub.ingest_addr, "east").await;
    east.snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    // A write failed on the old CRD.
    until(
        WAIT,
        || async { Metrics::get(&hub.metrics.report_write_errors) },
        |n| *n > 0,
    )
    .await;
    assert_eq!(
        Metrics::get(&hub.metrics.report_writes),
        0,
        "a report stripped of gatewaysPacked counted as stored"
    );

    // The current CRD back: the next attempt stores the Gateway.
    let mut fixed = crds.get(name).await.unwrap();
    fixed.data["spec"] = current.data["spec"].clone();
    crds.replace(name, &PostParams::default(), &fixed)
        .await
        .unwrap();
    until(
        WAIT,
        || async { reports.get_opt(&object_name("east")).await.unwrap() },
        |r| {
            r.as_ref()
                .and_then(|r| r.spec.reported_gateways().ok())
                .is_some_and(|g| g.len() == 1)
        },
    )
    .await;
    hub.shutdown().await.unwrap();
}

// ---- status shards (issue 26) ---------------------------------------------

const SHARDS: u32 = 8;
/// The Lease duration [`options`] gives the replicas.
const LEASE: Duration = Duration::from_secs(4);

async fn start_sharded(client: &Client, identity: &str) -> KubeHub {
    let mut o = options(identity);
    o.status_shards = SHARDS;
    KubeHub::start(
        HubConfig::loopback(Duration::from_secs(60)),
        o,
        client.clone(),
    )
    .await
    .expect("hub starts in Kubernetes mode")
}

/// Each shard Lease's holder (empty: none).
async fn shard_holders(client: &Client) -> Vec<String> {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), HUB_NS);
    let mut out = Vec::new();
    for s in 0..SHARDS {
        let holder = leases
            .get_opt(&format!("gwhub-shard-{s}"))
            .await
            .unwrap()
            .and_then(|l| l.spec?.holder_identity)
            .unwrap_or_default();
        out.push(holder);
    }
    out
}

/// The shards each replica writes, once they are spread: every shard
/// written by exactly one replica, which holds its Lease, and every
/// replica holding between floor and ceil of shards / replicas.
async fn spread(client: &Client, replicas: &[(&str, &KubeHub)]) -> Vec<BTreeSet<u32>> {
    let n = replicas.len() as u32;
    let (floor, ceil) = (SHARDS / n, SHARDS.div_ceil(n));
    let deadline = Instant::now() + WAIT;
    loop {
        let held: Vec<BTreeSet<u32>> = replicas
            .iter()
            .map(|(_, hub)| match &*hub.writes.borrow() {
                gwhub_hub::kube::shards::Writes::Shards { held, .. } => (**held).clone(),
                // Before its first round.
                gwhub_hub::kube::shards::Writes::Nothing => BTreeSet::new(),
                gwhub_hub::kube::shards::Writes::All => panic!("not sharded"),
            })
            .collect();
        let holders = shard_holders(client).await;
        let disjoint = held.iter().map(BTreeSet::len).sum::<usize>()
            == held.iter().flatten().collect::<BTreeSet<_>>().len();
        let all = held.iter().flatten().count() == SHARDS as usize;
        let fair = held
            .iter()
            .all(|h| (floor..=ceil).contains(&(h.len() as u32)));
        let leases_agree = replicas
            .iter()
            .zip(&held)
            .all(|((id, _), h)| h.iter().all(|s| holders[*s as usize] == *id));
        // Written shards are a subset of the held Leases at all times.
        assert!(disjoint, "a shard written by two replicas: {held:?}");
        if all && fair && leases_agree {
            return held;
        }
        assert!(
            Instant::now() < deadline,
            "shards not spread: written {held:?}, Lease holders {holders:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// With `--status-shards`, two and then three replicas share the hub
/// Gateways' status writing: every shard Lease has one holder, each
/// replica writes a fair share, every hub Gateway is written (by the
/// replica holding its shard: each replica writes some), and a replica
/// killed without releasing has its shards taken over and its hub
/// Gateways written within a Lease duration plus slack.
#[tokio::test]
async fn status_writing_is_sharded_over_replicas_and_survives_a_kill() {
    let Some((_fleet, client, as_hub)) =
        management("status_writing_is_sharded_over_replicas_and_survives_a_kill").await
    else {
        return;
    };
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NS);
    // Names covering every shard, so every replica has hub Gateways.
    let mut names: Vec<String> = Vec::new();
    let mut covered = BTreeSet::new();
    for i in 0.. {
        let name = format!("gw-{i}");
        if covered.insert(gwhub_hub_rules::shards::shard_of(NS, &name, SHARDS)) {
            names.push(name);
        }
        if covered.len() == SHARDS as usize {
            break;
        }
    }
    for name in &names {
        create_hub_gateway(&gateways, name).await;
    }
    let shard = |name: &str| gwhub_hub_rules::shards::shard_of(NS, name, SHARDS);
    let report = |programmed: bool| -> Vec<(&str, &str, GatewayStatus)> {
        names
            .iter()
            .map(|n| (NS, n.as_str(), cluster_status(&["10.0.0.1"], programmed)))
            .collect()
    };
    let all_programmed = |want: &'static str| {
        let (gateways, names) = (gateways.clone(), names.clone());
        async move {
            for name in &names {
                wait_status(&gateways, name, want, |s| {
                    find(s, "Programmed").is_some_and(|c| c.status == want)
                })
                .await;
            }
        }
    };

    // Two replicas: 4 shards each.
    let a = start_sharded(&as_hub, "a").await;
    let mut agent = Agent::connect(a.hub.ingest_addr, "cluster-a").await;
    agent.snapshot(&report(true)).await;
    let b = start_sharded(&as_hub, "b").await;
    let held = spread(&client, &[("a", &a), ("b", &b)]).await;
    eprintln!("two replicas write shards {held:?}");
    all_programmed("True").await;
    let before = [&a, &b].map(|h| Metrics::get(&h.metrics.status_writes));
    agent.snapshot(&report(false)).await;
    all_programmed("False").await;
    for (i, hub) in [&a, &b].iter().enumerate() {
        assert!(
            Metrics::get(&hub.metrics.status_writes) > before[i],
            "replica {i} wrote none of its hub Gateways"
        );
        // The gauge follows the shards the replica writes now: on a loaded
        // machine a Lease renewed late is let go and taken again, so the
        // set `spread` saw may have moved since.
        let held_now = || match &*hub.writes.borrow() {
            gwhub_hub::kube::shards::Writes::Shards { held, .. } => held.len() as u64,
            _ => 0,
        };
        until_named(
            &format!("replica {i}'s gwhub_status_shards_held never matched its shards"),
            WAIT,
            || async { (hub.metrics.status_shards_held.get(), held_now()) },
            |(gauge, held)| gauge == held && *held > 0,
        )
        .await;
    }

    // A third replica: the others give shards up to it.
    let c = start_sharded(&as_hub, "c").await;
    let held = spread(&client, &[("a", &a), ("b", &b), ("c", &c)]).await;
    eprintln!("three replicas write shards {held:?}");
    assert!(!held[2].is_empty());
    let before = Metrics::get(&c.metrics.status_writes);
    agent.snapshot(&report(true)).await;
    all_programmed("True").await;
    assert!(
        Metrics::get(&c.metrics.status_writes) > before,
        "the third replica wrote none of its hub Gateways"
    );
    assert_eq!(Metrics::get(&c.metrics.status_write_errors), 0);

    // Killed (its tasks aborted, nothing released): its shards' hub
    // Gateways are written by the others once its Leases expire.
    let orphans: Vec<&String> = names
        .iter()
        .filter(|n| held[2].contains(&shard(n)))
        .collect();
    assert!(!orphans.is_empty());
    drop(c);
    let killed = Instant::now();
    agent.snapshot(&report(false)).await;
    for name in &orphans {
        wait_status(&gateways, name, "written after the kill", |s| {
            find(s, "Programmed").is_some_and(|c| c.status == "False")
        })
        .await;
    }
    let took = killed.elapsed();
    eprintln!(
        "status shards: a killed replica's hub Gateways written {took:?} after the kill (Lease {LEASE:?})"
    );
    assert!(
        took < LEASE + Duration::from_secs(5),
        "takeover took {took:?} with a {LEASE:?} Lease"
    );
    let held = spread(&client, &[("a", &a), ("b", &b)]).await;
    eprintln!("after the kill: {held:?}");
    all_programmed("False").await;
    drop(agent);
    let leaving = Instant::now();
    b.shutdown().await.unwrap();
    // Released on the way out, and b's heartbeat marked ended: the last
    // replica takes every shard at once, not a Lease later.
    let held = spread(&client, &[("a", &a)]).await;
    assert_eq!(held[0].len(), SHARDS as usize);
    let took = leaving.elapsed();
    eprintln!("status shards: a graceful leave handed over in {took:?} (Lease {LEASE:?})");
    assert!(
        took < LEASE,
        "a graceful leave handed over in {took:?}, not before a {LEASE:?} Lease"
    );
    a.shutdown().await.unwrap();
}

/// Sends the agent's heartbeats every 200 ms until aborted, as a live
/// agent does when it has nothing to report.
fn keep_alive(agent: &Agent) -> tokio::task::JoinHandle<()> {
    let tx = agent.raw.tx.clone();
    tokio::spawn(async move {
        loop {
            let beat = msg(agent_message::Message::Heartbeat(v1::Heartbeat {
                sent_unix_millis: 0,
            }));
            if tx.send(beat).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// Whether the index of `hub` holds `cluster` as stale (`None`: unknown).
fn stale_in(hub: &KubeHub, cluster: &str) -> Option<bool> {
    hub.hub
        .index
        .clusters()
        .into_iter()
        .find(|c| c.name == cluster)
        .map(|c| c.stale)
}

/// Liveness lives in one record per replica, not in the ClusterReports: a
/// connected cluster's report is not rewritten while nothing changes (its
/// resourceVersion stays over several --stale-after periods), the
/// replica's record lists it and its heartbeat Lease is renewed, and
/// another replica keeps it fresh from them. Once its stream ends, its
/// report gets its last-seen (once) and it goes stale on both replicas.
/// A restart keeps the right freshness: a cluster the ended process served
/// until just now is fresh (its report alone is older than --stale-after),
/// one silent for longer is stale, and the first goes stale in time. An
/// ended replica's record is deleted once nothing depends on it.
#[tokio::test]
async fn liveness_lives_in_one_record_per_replica_not_in_the_reports() {
    use gwhub_hub_rules::liveness::{self, CLUSTERS_KEY, LABEL, REPLICA_KEY};
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ListParams;
    let Some((_fleet, client, as_hub)) =
        management("liveness_lives_in_one_record_per_replica_not_in_the_reports").await
    else {
        return;
    };
    create_hub_gateway(&Api::namespaced(client.clone(), NS), "web").await;
    let stale_after = Duration::from_secs(3);
    let start = |identity: &'static str| {
        let as_hub = as_hub.clone();
        async move {
            KubeHub::start(HubConfig::loopback(stale_after), options(identity), as_hub)
                .await
                .expect("hub starts in Kubernetes mode")
        }
    };
    let a = start("hub-a").await;
    let mut east = Agent::connect(a.hub.ingest_addr, "east").await;
    let mut west = Agent::connect(a.hub.ingest_addr, "west").await;
    east.snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    west.snapshot(&[(NS, "web", cluster_status(&["10.0.1.1"], true))])
        .await;
    let east_alive = keep_alive(&east);
    let west_alive = keep_alive(&west);
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    let stored = |name: &'static str| {
        let reports = reports.clone();
        async move {
            until(
                WAIT,
                || async { reports.get_opt(&object_name(name)).await.unwrap() },
                Option::is_some,
            )
            .await
            .expect("stored")
        }
    };
    stored("east").await;
    stored("west").await;
    // The writes of the connect settle (debounce, rewrite interval).
    tokio::time::sleep(Duration::from_secs(4)).await;
    let before = stored("east").await;

    // A second replica imports both and keeps them fresh from hub-a's
    // heartbeat and record, though their reports stay as written.
    let b = start("hub-b").await;
    until(WAIT, || async { *b.ready.borrow() }, |r| *r).await;
    for _ in 0..3 {
        tokio::time::sleep(stale_after).await;
        assert_eq!(stale_in(&b, "east"), Some(false), "east stale on hub-b");
        assert_eq!(stale_in(&b, "west"), Some(false), "west stale on hub-b");
    }
    let after = stored("east").await;
    assert_eq!(
        after.resource_version(),
        before.resource_version(),
        "a connected cluster's report was rewritten though nothing changed"
    );

    // hub-a's record lists both (one per process: its identity and start
    // time); its heartbeat Lease is renewed.
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), HUB_NS);
    let labelled = ListParams::default().labels(&format!("{LABEL}=replica"));
    let records = configmaps.list(&labelled).await.unwrap().items;
    assert_eq!(records.len(), 2, "one record per replica");
    let record = records
        .into_iter()
        .find(|r| r.data.as_ref().unwrap()[REPLICA_KEY].starts_with("hub-a@"))
        .expect("hub-a's liveness record");
    let holder = record.data.as_ref().unwrap()[REPLICA_KEY].clone();
    assert_eq!(record.name_any(), liveness::object_name(&holder, 0));
    let (served, bad) = liveness::decode(&record.data.unwrap()[CLUSTERS_KEY]);
    assert_eq!(bad, 0);
    assert_eq!(
        served.keys().cloned().collect::<Vec<_>>(),
        vec!["east".to_string(), "west".to_string()]
    );
    let leases: Api<Lease> = Api::namespaced(client.clone(), HUB_NS);
    let lease = leases
        .get(&liveness::object_name(&holder, 0))
        .await
        .expect("hub-a's heartbeat");
    assert!(lease.labels().contains_key(LABEL));
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(holder.as_str()));
    let renewed = spec.renew_time.unwrap().0;
    assert!(
        Timestamp::now().duration_since(renewed).as_secs_f64() < stale_after.as_secs_f64(),
        "hub-a's heartbeat is old: {renewed}"
    );

    // east's stream ends: its report gets its last-seen, once; it goes
    // stale on both replicas.
    let seen_before = before.spec.last_seen_time.clone();
    east_alive.abort();
    drop(east);
    let farewell = until(
        WAIT,
        || async { reports.get_opt(&object_name("east")).await.unwrap() },
        |r| {
            r.as_ref()
                .is_some_and(|r| r.spec.last_seen_time != seen_before)
        },
    )
    .await
    .expect("east's last-seen stored at its disconnect");
    until(
        WAIT,
        || async { stale_in(&a, "east") },
        |s| *s == Some(true),
    )
    .await;
    until(
        WAIT,
        || async { stale_in(&b, "east") },
        |s| *s == Some(true),
    )
    .await;
    tokio::time::sleep(stale_after).await;
    assert_eq!(
        stored("east").await.resource_version(),
        farewell.resource_version(),
        "east's report was rewritten after its last-seen"
    );
    assert_eq!(
        stale_in(&b, "west"),
        Some(false),
        "west, still served by hub-a, went stale on hub-b"
    );

    // Restart: both replicas end (west's agent with them); a new process
    // starts at once. west was served until just now (hub-a's last
    // heartbeat), east has been silent for longer than --stale-after.
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
    west_alive.abort();
    drop(west);
    let c = start("hub-c").await;
    until(WAIT, || async { *c.ready.borrow() }, |r| *r).await;
    assert_eq!(stale_in(&c, "east"), Some(true), "east fresh after restart");
    assert_eq!(
        stale_in(&c, "west"),
        Some(false),
        "west stale after restart"
    );
    // Nobody serves west any more: stale in time.
    until(
        WAIT,
        || async { stale_in(&c, "west") },
        |s| *s == Some(true),
    )
    .await;

    // Ended replicas' records go once nothing depends on them: hub-b's
    // (it served nobody) soon; hub-a's only once west is seen later
    // elsewhere (it is the only word on west's last-seen until then).
    let holders = || async {
        let list = configmaps.list(&labelled).await.unwrap().items;
        let mut ids: Vec<String> = list
            .into_iter()
            .map(|r| r.data.unwrap()[REPLICA_KEY].clone())
            .map(|id| id.split('@').next().unwrap().to_owned())
            .collect();
        ids.sort();
        ids
    };
    let kept = until(WAIT, holders, |ids| !ids.contains(&"hub-b".to_string())).await;
    assert_eq!(kept, vec!["hub-a".to_string(), "hub-c".to_string()]);
    let west = Agent::connect(c.hub.ingest_addr, "west").await;
    let _west_alive = keep_alive(&west);
    until(
        WAIT,
        || async { stale_in(&c, "west") },
        |s| *s == Some(false),
    )
    .await;
    let kept = until(WAIT, holders, |ids| ids == &["hub-c".to_string()]).await;
    assert_eq!(kept, vec!["hub-c".to_string()]);
    let lease_holders: Vec<String> = leases
        .list(&labelled)
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|l| l.spec?.holder_identity)
        .collect();
    assert_eq!(lease_holders.len(), 1, "{lease_holders:?}");
    assert!(lease_holders[0].starts_with("hub-c@"));
    c.shutdown().await.unwrap();
}

/// Waits until a liveness record of a process of `replica` lists exactly
/// `clusters` (records are rewritten at most every 2 s).
async fn wait_listed(client: &Client, replica: &str, clusters: &[&str]) {
    use gwhub_hub_rules::liveness::{self, CLUSTERS_KEY, LABEL, REPLICA_KEY};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ListParams;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), HUB_NS);
    let labelled = ListParams::default().labels(&format!("{LABEL}=replica"));
    let want: Vec<String> = clusters.iter().map(|c| c.to_string()).collect();
    let prefix = format!("{replica}@");
    until(
        WAIT,
        || async { configmaps.list(&labelled).await.unwrap().items },
        |records| {
            records.iter().any(|r| {
                let data = r.data.clone().unwrap_or_default();
                data.get(REPLICA_KEY)
                    .is_some_and(|id| id.starts_with(&prefix))
                    && data.get(CLUSTERS_KEY).is_some_and(|text| {
                        liveness::decode(text).0.into_keys().collect::<Vec<_>>() == want
                    })
            })
        },
    )
    .await;
}

/// A restarted hub whose store lags what the ended process had heard
/// (west streamed to it, but its report is not in the store) writes no
/// hub Gateway status until every cluster the ended process served is
/// back: no status shows a shape the fleet never had (here: east alone),
/// while the probe is ready and ingest serves. A cluster that never
/// comes back lets it write once its last-seen is --stale-after old,
/// showing it stale.
#[tokio::test]
async fn a_restarted_hub_writes_no_status_from_a_store_that_lags() {
    let Some((_fleet, client, as_hub)) =
        management("a_restarted_hub_writes_no_status_from_a_store_that_lags").await
    else {
        return;
    };
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NS);
    create_hub_gateway(&gateways, "web").await;
    // Long enough for the steps below before the gate's bound, short
    // enough to wait out in the second part.
    let stale_after = Duration::from_secs(20);
    let start = |identity: &'static str| {
        let as_hub = as_hub.clone();
        async move {
            KubeHub::start(HubConfig::loopback(stale_after), options(identity), as_hub)
                .await
                .expect("hub starts in Kubernetes mode")
        }
    };
    let report = |agent: &'static str| async move {
        let ip = if agent == "east" {
            "10.0.0.1"
        } else {
            "10.0.1.1"
        };
        (NS, "web", cluster_status(&[ip], true))
    };
    let connect = |hub: &KubeHub, name: &'static str| {
        let addr = hub.hub.ingest_addr;
        async move {
            let mut agent = Agent::connect(addr, name).await;
            agent.snapshot(&[report(name).await]).await;
            let beating = keep_alive(&agent);
            (agent, beating)
        }
    };
    let awaited = |hub: &KubeHub| hub.metrics.restart_awaited_clusters.get();
    let wait_awaited = |hub: &KubeHub, n: u64| {
        let metrics = hub.metrics.clone();
        async move {
            until(
                WAIT,
                || async { metrics.restart_awaited_clusters.get() },
                |a| *a == n,
            )
            .await;
        }
    };

    let first = start("hub-1").await;
    let east = connect(&first, "east").await;
    let west = connect(&first, "west").await;
    let settled = wait_status(&gateways, "web", "aggregated over 2", aggregated(2))
        .await
        .status
        .unwrap();
    wait_listed(&client, "hub-1", &["east", "west"]).await;

    // hub-1 ends with both streaming; west's report is lost from the
    // store (as if its first write had not happened yet).
    let recorder = Recorder::start(gateways.clone(), "web");
    assert!(recorder.wait_first(WAIT).await);
    first.shutdown().await.unwrap();
    for (agent, beating) in [east, west] {
        beating.abort();
        drop(agent);
    }
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), HUB_NS);
    reports
        .delete(&object_name("west"), &Default::default())
        .await
        .unwrap();

    let second = start("hub-2").await;
    // Ready (the probe) at once: agents come back through the Service.
    until(WAIT, || async { *second.ready.borrow() }, |r| *r).await;
    wait_awaited(&second, 2).await;
    assert_eq!(
        second.hub.index.clusters().len(),
        1,
        "only east restored from the store"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let east = connect(&second, "east").await;
    wait_awaited(&second, 1).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        Metrics::get(&second.metrics.status_writes),
        0,
        "wrote status while west, served by the ended process, was not back"
    );
    let west = connect(&second, "west").await;
    wait_awaited(&second, 0).await;
    wait_status(&gateways, "web", "aggregated over 2", aggregated(2)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    for (i, s) in recorder.seen().iter().enumerate() {
        assert!(
            same_status(&s.status, &settled),
            "status #{i} during the restart differs from the settled one:\n{:#?}\nsettled:\n{settled:#?}",
            s.status
        );
    }
    drop(recorder);

    // Again, and west never comes back: the gate opens once west's
    // last-seen (hub-2's last heartbeat) is --stale-after old, and the
    // status shows it stale.
    wait_listed(&client, "hub-2", &["east", "west"]).await;
    second.shutdown().await.unwrap();
    for (agent, beating) in [east, west] {
        beating.abort();
        drop(agent);
    }
    let third = start("hub-3").await;
    let _east = connect(&third, "east").await;
    wait_awaited(&third, 1).await;
    assert_eq!(Metrics::get(&third.metrics.status_writes), 0);
    wait_awaited(&third, 0).await;
    let west_stale = |s: &GatewayStatus| {
        s.conditions
            .iter()
            .flatten()
            .any(|c| c.message.contains("west status is stale"))
    };
    wait_status(&gateways, "web", "west stale", west_stale).await;
    assert_eq!(awaited(&third), 0);
    third.shutdown().await.unwrap();
}
