//! Least privilege, checked from both sides. The other real-API-server
//! suites run the agent and the hub as the ServiceAccounts of `manifests/`,
//! so a verb the code needs and the Roles lack fails them. Here the other
//! side: every verb the agent's and the hub's Roles and ClusterRoles grant
//! is used. With any one removed (a copy of the rule without it, applied
//! over the installed one), the real `gwhub-agent run` / `gwhub serve`,
//! driven through every path that talks to the API server, is refused that
//! verb (the API server's `cannot <verb> resource "<resource>"` appears in
//! its log); with the shipped rules it is never refused anything.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_hub_rules::inventory::ClusterProfile;
use gwhub_hub_rules::report::ClusterReport;
use gwhub_model::cluster::object_name;
use gwhub_proto::client::{ReportStream, open_report};
use gwhub_proto::convert::status_to_proto;
use gwhub_proto::v1::{
    self, agent_message, dashboard_client::DashboardClient, ingest_client::IngestClient,
};
use gwhub_spoke_rules::openshift::DNS;
use gwhub_test_kit::apiserver::{Cluster, Fleet, require_assets, static_token};
use gwhub_test_kit::install::{
    AGENT_SA, HUB_SA, SYSTEM_NS, apply_k, install_agent, install_hub, kubectl, manifests_dir,
    service_account_user,
};
use gwhub_test_kit::kube_objects::*;
use gwhub_test_kit::procs::{Process, agent_binary, free_port, gwhub_binary};
use gwhub_test_kit::raw_agent::hello;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event as EventV1;
use kube::Client;
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};

/// The fleet inventory's namespace the hub is started with.
const INVENTORY_NS: &str = "fleet";

/// Bound on each drive: a run returns as soon as its condition holds (the
/// refusal, or in the controls every path seen), so this is only how long a
/// failing run takes to say so, generous for a loaded 2-core machine.
const REFUSED_WITHIN: Duration = Duration::from_secs(180);

/// The agent's Role and ClusterRole as shipped.
fn agent_roles() -> Vec<Value> {
    roles_in("agent/rbac.yaml")
}

/// The Roles and ClusterRoles of `manifests/<file>`.
fn roles_in(file: &str) -> Vec<Value> {
    let objs = gwhub_spoke_rules::manifest::read_paths(&[manifests_dir().join(file)])
        .unwrap_or_else(|e| panic!("manifests/{file}: {e}"));
    objs.into_iter()
        .filter(|o| o.kind == "Role" || o.kind == "ClusterRole")
        .map(|o| o.value)
        .collect()
}

/// `role` without `verb` in rule `rule` (the rule goes when it was its
/// only verb).
fn without(role: &Value, rule: usize, verb: &str) -> Value {
    let mut role = role.clone();
    let rules = role["rules"].as_array_mut().expect("rules");
    let verbs = rules[rule]["verbs"].as_array_mut().expect("verbs");
    verbs.retain(|v| v != verb);
    if verbs.is_empty() {
        rules.remove(rule);
    }
    role
}

fn kubectl_apply_json(cluster: &Cluster, objects: &[Value]) {
    let file = cluster.kubeconfig.with_file_name("rbac-under-test.json");
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    std::fs::write(&file, list.to_string()).unwrap();
    let out = Command::new(kubectl())
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(["apply", "-f"])
        .arg(&file)
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `kubectl auth can-i <verb> <resource>` as the agent: RBAC changes reach
/// the authorizer through a watch, so each run starts once it answers.
fn can_i(cluster: &Cluster, sa: &str, verb: &str, probe: &[String], ns: Option<&str>) -> bool {
    let mut cmd = Command::new(kubectl());
    cmd.arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(["auth", "can-i", verb])
        .args(probe)
        .args(["--as", &service_account_user(sa)]);
    if let Some(ns) = ns {
        cmd.args(["-n", ns]);
    }
    let out = cmd.output().expect("run kubectl auth can-i");
    String::from_utf8_lossy(&out.stdout).trim() == "yes"
}

async fn wait_refused(cluster: &Cluster, sa: &str, verb: &str, probe: &[String], ns: Option<&str>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while can_i(cluster, sa, verb, probe, ns) {
        assert!(
            Instant::now() < deadline,
            "RBAC still allows {verb} {probe:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the API server's authorizer refuses the hub `verb` on the
/// signer `rule` names (RBAC follows the applied roles in its own time).
async fn wait_signer_refused(client: &Client, rule: &Value, verb: &str) {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    let name = rule["resourceNames"][0].as_str().map(str::to_owned);
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(service_account_user(HUB_SA)),
            groups: Some(vec!["system:serviceaccounts".into()]),
            resource_attributes: Some(ResourceAttributes {
                group: Some(rule["apiGroups"][0].as_str().unwrap().to_owned()),
                resource: Some("signers".into()),
                name,
                verb: Some(verb.to_owned()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let reviews: Api<SubjectAccessReview> = Api::all(client.clone());
    let _refused = gwhub_test_kit::wait::until(
        Duration::from_secs(20),
        || async {
            reviews
                .create(&Default::default(), &review)
                .await
                .map(|r| r.status.map(|s| s.allowed))
                .map_err(|e| e.to_string())
        },
        |allowed| matches!(allowed, Ok(Some(false))),
    )
    .await;
}

fn start_agent(bin: &Path, cluster: &Cluster, log: &Path) -> Process {
    Process(
        Command::new(bin)
            .args(["run", "--insecure", "--cluster", "rbac"])
            .args(["--hub", "http://127.0.0.1:1"])
            .arg("--kubeconfig")
            .arg(cluster.kubeconfig_as(AGENT_SA))
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("start gwhub-agent"),
    )
}

/// Drives every path of the agent that talks to the API server until
/// `done` holds on its log (or the bound passes): the initial lists and
/// watches, a status write, a fresh list of a pending Service's Events, and
/// a ClusterConfigMissing Event published again and again (create, then
/// patch of the series) as the DNS config goes and comes back.
async fn drive(client: &Client, log: &Path, done: impl AsyncFn(&str) -> bool) -> String {
    let dns: Api<DNS> = Api::all(client.clone());
    let deadline = Instant::now() + REFUSED_WITHIN;
    let mut present = true;
    loop {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if done(&text).await || Instant::now() > deadline {
            if !present {
                dns_config(client, true).await;
            }
            return text;
        }
        if present {
            dns.delete("cluster", &DeleteParams::default())
                .await
                .unwrap();
        } else {
            dns_config(client, true).await;
        }
        present = !present;
    }
}

/// `kubectl auth can-i`'s spelling of `rule`'s first resource:
/// resource.group[/name], a subresource in a flag.
fn can_i_probe(rule: &Value, _verb: &str) -> Vec<String> {
    let group = rule["apiGroups"][0].as_str().unwrap();
    let first = rule["resources"][0].as_str().unwrap();
    let (resource, sub) = first
        .split_once('/')
        .map_or((first, None), |(r, s)| (r, Some(s)));
    let mut probe = vec![
        format!("{resource}.{group}")
            .trim_end_matches('.')
            .to_owned(),
    ];
    if let Some(n) = rule["resourceNames"][0].as_str() {
        probe[0] = format!("{}/{n}", probe[0]);
    }
    if let Some(sub) = sub {
        probe.push(format!("--subresource={sub}"));
    }
    probe
}

/// The API server's refusal, as the agent logs it (quotes unescaped).
fn refusal(verb: &str, resource: &str, group: &str) -> String {
    format!("cannot {verb} resource \"{resource}\" in API group \"{group}\"")
}

/// Whether `log` shows the API server refusing `verb` on `resource`. A
/// server-side apply that would create the object is authorized for
/// `create` too, and refused with no reason given (`"<name>" is forbidden:
/// : Forbidden`).
fn refused(log: &str, verb: &str, resource: &str, group: &str) -> bool {
    let log = plain(log);
    let qualified = format!("{resource}.{group} \"");
    log.contains(&refusal(verb, resource, group))
        || (verb == "create"
            && log
                .lines()
                .any(|l| l.contains(&qualified) && l.contains("is forbidden: : Forbidden")))
}

/// Whether `verb` of `rule` is driven by the join and removal test
/// (every_secret_and_join_verb_the_hub_is_granted_is_needed): the TLS
/// Secrets, the removed clusters' ConfigMap and the liveness records, the
/// CSRs, and the ClusterProfile a join creates. Deleting an ended replica's
/// liveness record is the hub drive's (each run plants one to delete).
fn on_the_join_path(rule: &Value, verb: &str) -> bool {
    let group = rule["apiGroups"][0].as_str().unwrap();
    let resource = rule["resources"][0].as_str().unwrap();
    resource == "secrets"
        || (resource == "configmaps" && verb != "delete")
        || group == "certificates.k8s.io"
        || (resource == "clusterprofiles" && verb == "create")
        || resource == "clusterprofiles/status"
}

/// `log` without escaping backslashes.
fn plain(log: &str) -> String {
    log.replace('\\', "")
}

#[tokio::test]
async fn every_verb_the_agent_is_granted_is_needed() {
    if !require_assets("every_verb_the_agent_is_granted_is_needed") {
        return;
    }
    let bin = agent_binary();
    let fleet = Fleet::start(&["rbac"]).await.expect("start API server");
    let cluster = fleet.cluster("rbac");
    install_agent(cluster).await;
    let client = cluster.client().await.unwrap();
    gateway_class(&client, CLASS, CONTROLLER).await;
    dns_config(&client, true).await;
    gateway(&client, NS, "gw", CLASS, None).await;
    // Its load balancer stays pending: the agent lists its Events fresh.
    service(&client, "gw").await;

    // The control: as shipped, every path runs and nothing is refused.
    let log = fleet.dir.join("agent-shipped.log");
    let agent = start_agent(&bin, cluster, &log);
    let events: Api<EventV1> = Api::namespaced(client.clone(), NS);
    let repeated = || async {
        events.list(&Default::default()).await.is_ok_and(|l| {
            l.items.iter().any(|e| {
                e.reason.as_deref() == Some("ClusterConfigMissing")
                    && e.series.as_ref().is_some_and(|s| s.count >= 2)
            })
        })
    };
    // Every path seen: the Event published again (its series patched).
    let text = drive(&client, &log, async |_: &str| repeated().await).await;
    drop(agent);
    assert!(
        !text.contains("forbidden"),
        "the shipped RBAC refused the agent something:\n{text}"
    );
    assert!(
        repeated().await,
        "the drive never repeated an Event (the patch path):\n{text}"
    );
    wait_lb(&client, "gw", "LoadBalancerPending").await;

    let roles = agent_roles();
    let mut checked: i32 = 0;
    for (i, role) in roles.iter().enumerate() {
        let ns = role["metadata"]["namespace"].as_str();
        for (r, rule) in role["rules"].as_array().unwrap().iter().enumerate() {
            let group = rule["apiGroups"][0].as_str().unwrap();
            if rule["resources"][0] == "secrets" {
                // Its identity Secret, used only when joining: the join
                // test (hub_tls_secrets.rs) runs the agent as its
                // ServiceAccount.
                continue;
            }
            let resources: Vec<&str> = rule["resources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            for verb in rule["verbs"].as_array().unwrap() {
                let verb = verb.as_str().unwrap();
                let what = format!("{verb} {resources:?} ({group})");
                let mut reduced = roles.clone();
                reduced[i] = without(role, r, verb);
                kubectl_apply_json(cluster, &reduced);
                wait_refused(cluster, AGENT_SA, verb, &can_i_probe(rule, verb), ns).await;

                // A new generation: the agent has a status to write.
                gateway(&client, NS, "gw", CLASS, Some(9000 + checked)).await;
                let log = fleet.dir.join(format!("agent-without-{checked}.log"));
                let agent = start_agent(&bin, cluster, &log);
                // Every resource of the rule: one the agent no longer reads
                // would be granted for nothing.
                let all_refused =
                    |t: &str| resources.iter().all(|res| refused(t, verb, res, group));
                let text = drive(&client, &log, async |t: &str| all_refused(t)).await;
                drop(agent);
                let unused: Vec<&&str> = resources
                    .iter()
                    .filter(|res| !refused(&text, verb, res, group))
                    .collect();
                assert!(
                    unused.is_empty(),
                    "without {what} the agent was never refused it on {unused:?}: the verb \
                     is granted but not needed (or the drive misses its path):\n{text}"
                );
                eprintln!("rbac: without {what}: refused, as it should be");
                checked += 1;
            }
        }
    }
    assert!(checked >= 10, "only {checked} verbs checked");
    // Back to the shipped rules, as installed.
    apply_k(&cluster.kubeconfig, &manifests_dir().join("agent")).unwrap();
}

// ---------------------------------------------------------------- the hub

/// A tiny agent for the hub: one Report stream for cluster `east`.
struct TinyAgent {
    tx: tokio::sync::mpsc::Sender<v1::AgentMessage>,
    seq: u64,
    _drain: tokio::task::JoinHandle<()>,
}

impl TinyAgent {
    async fn connect(port: u16) -> Option<TinyAgent> {
        let mut client = IngestClient::connect(format!("http://127.0.0.1:{port}"))
            .await
            .ok()?;
        let ReportStream { tx, mut rx } = open_report(&mut client, hello("east"), 16).await.ok()?;
        // Acks and heartbeats are read and dropped.
        let drain = tokio::spawn(async move { while let Some(Ok(_)) = rx.next().await {} });
        Some(TinyAgent {
            tx,
            seq: 0,
            _drain: drain,
        })
    }

    /// A full snapshot of hub Gateway `default/gw`, with a listener or none.
    async fn snapshot(&mut self, listener: bool) {
        self.seq += 1;
        let status: GatewayStatus = serde_json::from_value(json!({
            "conditions": [
                {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1},
                {"type": "Programmed", "status": "True", "reason": "Programmed", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1},
                // Fleet DNS: eligible for the hub Gateway's `https`
                // hostname while the listener is reported.
                {"type": "LoadBalancerReady", "status": "True", "reason": "Ready", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}],
            "addresses": [{"type": "IPAddress", "value": "192.0.2.10"}],
            "listeners": if listener {
                json!([{"name": "https", "attachedRoutes": 1, "supportedKinds": [],
                        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                                        "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}])
            } else {
                json!([])
            },
        }))
        .unwrap();
        let report = v1::GatewayReport {
            namespace: "default".into(),
            name: "gw".into(),
            uid: "uid-gw".into(),
            generation: 1,
            status: Some(status_to_proto(&status).unwrap()),
        };
        let chunk = v1::SnapshotChunk {
            snapshot_id: self.seq,
            chunk: 0,
            r#final: true,
            seq: self.seq,
            gateways: vec![report],
        };
        let _ = self
            .tx
            .send(v1::AgentMessage {
                message: Some(agent_message::Message::Snapshot(chunk)),
            })
            .await;
    }
}

/// The hub's ingest and Dashboard ports.
#[derive(Clone, Copy)]
struct Ports {
    ingest: u16,
    dashboard: u16,
}

fn ports() -> Ports {
    Ports {
        ingest: free_port(),
        dashboard: free_port(),
    }
}

fn start_hub(bin: &Path, cluster: &Cluster, ports: Ports, log: &Path) -> Process {
    let port = ports.ingest;
    Process(
        Command::new(bin)
            .args(["serve", "--insecure"])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args([
                "--dashboard-listen",
                &format!("127.0.0.1:{}", ports.dashboard),
            ])
            // As shipped: readers reviewed with TokenReview and
            // SubjectAccessReview.
            .args(["--dashboard-auth", "kubernetes"])
            .args(["--namespace", SYSTEM_NS, "--stale-after", "2s"])
            .args(["--insecure-prune-after", "1s"])
            .args(["--lease-duration", "3s"])
            // The fleet inventory: its ClusterProfiles listed and watched
            // (one names `east`, the tiny agent's cluster).
            .args(["--inventory-namespace", INVENTORY_NS])
            // Fleet DNS's dnsendpoint output: the objects listed at the
            // start, created (applied) while the listener is reported and
            // deleted (--dns-when-none=remove) while it is not or the
            // cluster is stale.
            .args(["--dns-zone", "example.com", "--dns-output", "dnsendpoint"])
            .args(["--dns-rise", "1s", "--dns-when-none", "remove"])
            .arg("--kubeconfig")
            .arg(cluster.kubeconfig_as(HUB_SA))
            .env("POD_NAME", "rbac")
            // Some refusals (the read before clearing, the uid of an
            // Event's object) are logged at debug only.
            .env("RUST_LOG", "info,gwhub=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("start gwhub"),
    )
}

/// Drives every path of the hub that talks to the API server until `done`
/// holds on its log (or the bound passes): the initial lists and watches,
/// the Lease (taken, renewed), the cluster's report stored (created, then
/// patched) and written onto the hub Gateway, the hub's listeners cleared
/// (a fresh read first) when the cluster withdraws them, and ClusterStale /
/// ClusterFresh Events (created, then patched as they repeat) as the
/// cluster goes silent and reports again, (every fourth round) the
/// cluster's stored report deleted when it disconnects and stays silent
/// past `--insecure-prune-after`, a Dashboard reader's token reviewed
/// and their access asked for, and the liveness Leases and records of the
/// hubs of earlier runs deleted (nothing depends on them once `east`
/// streams to this one).
async fn drive_hub(ports: Ports, log: &Path, done: impl AsyncFn(&str) -> bool) -> String {
    let port = ports.ingest;
    let deadline = Instant::now() + REFUSED_WITHIN;
    let mut agent = None;
    let mut listener = true;
    let mut round = 0u32;
    loop {
        round += 1;
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if done(&text).await || Instant::now() > deadline {
            return text;
        }
        if round.is_multiple_of(4) {
            // Disconnected and silent: pruned, its report deleted.
            agent = None;
        } else {
            if agent.is_none() {
                agent = TinyAgent::connect(port).await;
            }
            if let Some(a) = agent.as_mut() {
                a.snapshot(listener).await;
                listener = !listener;
            }
        }
        read_dashboard(ports.dashboard).await;
        // Silent for longer than --stale-after: the cluster goes stale.
        tokio::time::sleep(Duration::from_millis(3000)).await;
    }
}

/// What the hub logs when it deletes an ended replica's liveness record.
const COLLECTED: &str = "deleting an ended replica's liveness record";

/// An ended replica's liveness record (its heartbeat Lease, marked ended and
/// last renewed an hour ago, and a record listing no cluster), which any hub
/// deletes as soon as it has restored its store
/// ([`gwhub_hub_rules::liveness::collectable`]): the delete path is
/// provoked, not waited for.
async fn plant_ended_replica(leases: &Api<Lease>, configmaps: &Api<ConfigMap>, identity: &str) {
    use gwhub_hub_rules::liveness::{
        CHUNK_KEY, CHUNKS_KEY, CLUSTERS_KEY, ENDED_ANNOTATION, LABEL, LABEL_VALUE, REPLICA_KEY,
        object_name,
    };
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    let name = object_name(identity, 0);
    let labels = std::collections::BTreeMap::from([(LABEL.to_owned(), LABEL_VALUE.to_owned())]);
    let hour_ago = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(3600);
    let lease = Lease {
        metadata: kube::api::ObjectMeta {
            name: Some(name.clone()),
            labels: Some(labels.clone()),
            annotations: Some([(ENDED_ANNOTATION.to_owned(), "true".to_owned())].into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(identity.to_owned()),
            renew_time: Some(MicroTime(hour_ago)),
            ..Default::default()
        }),
    };
    leases
        .create(&Default::default(), &lease)
        .await
        .expect("plant an ended replica's heartbeat");
    let record = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name),
            labels: Some(labels),
            ..Default::default()
        },
        data: Some(
            [
                (REPLICA_KEY.to_owned(), identity.to_owned()),
                (CHUNK_KEY.to_owned(), "0".to_owned()),
                (CHUNKS_KEY.to_owned(), "1".to_owned()),
                (CLUSTERS_KEY.to_owned(), String::new()),
            ]
            .into(),
        ),
        ..Default::default()
    };
    configmaps
        .create(&Default::default(), &record)
        .await
        .expect("plant an ended replica's liveness record");
}

/// One ListGateways as a reader the API server knows (its answer does not
/// matter: the hub asks about the reader either way).
async fn read_dashboard(port: u16) {
    let Ok(channel) = tonic::transport::Channel::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .connect()
        .await
    else {
        return;
    };
    let token: tonic::metadata::MetadataValue<_> =
        format!("Bearer {}", static_token("reader-none"))
            .parse()
            .unwrap();
    let mut client =
        DashboardClient::with_interceptor(channel, move |mut req: tonic::Request<()>| {
            req.metadata_mut().insert("authorization", token.clone());
            Ok(req)
        });
    let _ = client
        .list_gateways(v1::ListGatewaysRequest::default())
        .await;
}

#[tokio::test]
async fn every_verb_the_hub_is_granted_is_needed() {
    if !require_assets("every_verb_the_hub_is_granted_is_needed") {
        return;
    }
    let bin = gwhub_binary();
    let fleet = Fleet::start(&["hubrbac"]).await.expect("start API server");
    let cluster = fleet.cluster("hubrbac");
    install_hub(cluster).await;
    let client = cluster.client().await.unwrap();
    gateway(&client, "default", "gw", "kuadrant-multi-cluster", None).await;
    gwhub_test_kit::crds::install_inventory(&client)
        .await
        .expect("install the ClusterProfile CRD");
    gwhub_test_kit::crds::install_dnsendpoint(&client)
        .await
        .expect("install the DNSEndpoint CRD");
    gwhub_test_kit::apiserver::create_namespaces(&client, &[INVENTORY_NS])
        .await
        .unwrap();
    let profiles: Api<ClusterProfile> = Api::namespaced(client.clone(), INVENTORY_NS);
    apply(
        &profiles,
        "east",
        json!({"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
               "metadata": {"name": "east", "namespace": INVENTORY_NS},
               "spec": {"clusterManager": {"name": "rbac-test"}}}),
    )
    .await;
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), SYSTEM_NS);
    let leases: Api<Lease> = Api::namespaced(client.clone(), SYSTEM_NS);
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), SYSTEM_NS);
    // Each run starts without the report and the Lease: they are created.
    // And with an ended replica's liveness record that nothing depends on,
    // which the hub deletes (Lease and ConfigMap) once it has restored.
    let mut run = 0u32;
    let mut fresh_start = async || {
        let _ = reports
            .delete(&object_name("east"), &DeleteParams::default())
            .await;
        let _ = leases.delete("gwhub-hub", &DeleteParams::default()).await;
        run += 1;
        plant_ended_replica(&leases, &configmaps, &format!("rbac-ended-{run}")).await;
    };
    fresh_start().await;

    // The control: as shipped, every path runs and nothing is refused.
    let port = ports();
    let log = fleet.dir.join("hub-shipped.log");
    let hub = start_hub(&bin, cluster, port, &log);
    let events: Api<EventV1> = Api::namespaced(client.clone(), SYSTEM_NS);
    let repeated = || async {
        events.list(&Default::default()).await.is_ok_and(|l| {
            l.items.iter().any(|e| {
                e.reason.as_deref() == Some("ClusterStale")
                    && e.series.as_ref().is_some_and(|s| s.count >= 2)
            })
        })
    };
    // Every path seen: a status write, the planted record collected, an
    // Event published again (its series patched).
    let all_paths = async |t: &str| {
        t.contains("hub Gateway status applied") && t.contains(COLLECTED) && repeated().await
    };
    let text = drive_hub(port, &log, all_paths).await;
    drop(hub);
    assert!(
        !text.contains("forbidden"),
        "the shipped RBAC refused the hub something:\n{text}"
    );
    assert!(
        repeated().await,
        "the drive never repeated an Event (the patch path):\n{text}"
    );
    assert!(
        text.contains("hub Gateway status applied"),
        "no status write:\n{text}"
    );

    let roles = roles_in("hub/rbac.yaml");
    let mut checked = 0;
    for (i, role) in roles.iter().enumerate() {
        let ns = role["metadata"]["namespace"].as_str();
        for (r, rule) in role["rules"].as_array().unwrap().iter().enumerate() {
            let group = rule["apiGroups"][0].as_str().unwrap();
            let resource = rule["resources"][0].as_str().unwrap();
            for verb in rule["verbs"].as_array().unwrap() {
                let verb = verb.as_str().unwrap();
                if on_the_join_path(rule, verb) {
                    // every_secret_and_join_verb_the_hub_is_granted_is_needed.
                    continue;
                }
                let what = format!("{verb} {resource} ({group})");
                let mut reduced = roles.clone();
                reduced[i] = without(role, r, verb);
                kubectl_apply_json(cluster, &reduced);
                wait_refused(cluster, HUB_SA, verb, &can_i_probe(rule, verb), ns).await;
                fresh_start().await;

                let port = ports();
                let log = fleet.dir.join(format!("hub-without-{checked}.log"));
                let hub = start_hub(&bin, cluster, port, &log);
                let refused = |t: &str| refused(t, verb, resource, group);
                let text = drive_hub(port, &log, async |t: &str| refused(t)).await;
                drop(hub);
                assert!(
                    refused(&text),
                    "without {what} the hub was never refused it: the verb is granted \
                     but not needed (or the drive misses its path):\n{text}"
                );
                eprintln!("rbac: without {what}: refused, as it should be");
                checked += 1;
            }
        }
    }
    assert!(checked >= 10, "only {checked} verbs checked");
    apply_k(&cluster.kubeconfig, &manifests_dir()).unwrap();
}

/// The hub with its TLS from Secrets gwhub-ca and gwhub-serving (no
/// `--insecure`), renewing a 10 s serving certificate every few seconds,
/// with the fleet inventory.
fn start_secrets_hub(bin: &Path, cluster: &Cluster, port: u16, log: &Path) -> Process {
    Process(
        Command::new(bin)
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--dashboard-listen", "127.0.0.1:0"])
            .args(["--namespace", SYSTEM_NS, "--lease-duration", "3s"])
            .args(["--serving-cert-lifetime", "10s", "--hub-san", "localhost"])
            // A join publishes its ClusterProfile here; a deleted one is
            // recorded as a removal.
            .args(["--inventory-namespace", INVENTORY_NS])
            .arg("--kubeconfig")
            .arg(cluster.kubeconfig_as(HUB_SA))
            .env("POD_NAME", "rbac-secrets")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("start gwhub"),
    )
}

/// One Join for cluster `east` with a fresh token, and `tokenless` one
/// without a token (errors ignored: the log tells what the hub was
/// refused).
async fn try_join(client: &Client, port: u16, tokenless: bool) {
    use k8s_openapi::api::core::v1::Secret;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), SYSTEM_NS);
    let Ok(Some(ca)) = secrets.get_opt("gwhub-ca").await else {
        return;
    };
    let ca = ca.data.unwrap()["tls.crt"].0.clone();
    let token = gwhub_common::join::JoinToken::generate().unwrap();
    let expires = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(600);
    let _ = secrets
        .create(
            &Default::default(),
            &gwhub_k8s::join::token_secret(&token, "east", expires),
        )
        .await;
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::default();
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.subject_alt_names = vec![rcgen::SanType::URI(
        "spiffe://gwhub/cluster/east".try_into().unwrap(),
    )];
    let csr = p.serialize_request(&key).unwrap().pem().unwrap();
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(ca))
        .domain_name("localhost");
    let Ok(channel) = tonic::transport::Endpoint::from_shared(format!("https://127.0.0.1:{port}"))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
    else {
        return;
    };
    let mut ingest = IngestClient::new(channel);
    let _ = ingest
        .join(v1::JoinRequest {
            cluster: "east".into(),
            token: token.reveal(),
            csr_pem: csr,
        })
        .await;
    if !tokenless {
        return;
    }
    // Without a token, a fresh key: the request is looked up by name, the
    // pending ones listed (a request for a cluster without an identity waits).
    let key = rcgen::KeyPair::generate().unwrap();
    p.subject_alt_names = vec![rcgen::SanType::URI(
        format!("spiffe://gwhub/cluster/{TOKENLESS}")
            .try_into()
            .unwrap(),
    )];
    let csr = p.serialize_request(&key).unwrap().pem().unwrap();
    let _ = ingest
        .join(v1::JoinRequest {
            cluster: TOKENLESS.into(),
            token: String::new(),
            csr_pem: csr,
        })
        .await;
}

/// The cluster the drive's tokenless joins name: in the inventory, never
/// joined with a token, so its requests wait for approval.
const TOKENLESS: &str = "north";

/// Whether `log` shows the hub refused `verb`: for `signers`, the API
/// server's own words for a signer it may not approve or sign for.
fn refused_secret_or_join(log: &str, verb: &str, resource: &str, group: &str) -> bool {
    if resource == "signers" {
        return plain(log).contains(&format!("not permitted to {verb} requests with signerName"));
    }
    let (resource, sub) = resource.split_once('/').unwrap_or((resource, ""));
    if sub.is_empty() {
        return refused(log, verb, resource, group);
    }
    plain(log).contains(&format!(
        "cannot {verb} resource \"{resource}/{sub}\" in API group \"{group}\""
    ))
}

/// The hub's Secrets, removed-clusters and Join rules: each verb is
/// needed. Every run starts with neither Secret (created, read back) nor
/// the ConfigMap of removed clusters nor a ClusterProfile, reads and
/// follows the ConfigMap, follows both Secrets (list, watch), renews a
/// short-lived serving certificate (update), and joins cluster east again
/// and again (a token read and deleted, its ClusterProfile created, a
/// CertificateSigningRequest created, approved and signed, a tokenless
/// one looked up and the pending ones listed, its
/// gwhub.io/Reporting condition applied); each time its ClusterProfile is
/// deleted, the removal is recorded (the ConfigMap created, then updated).
/// Every run also writes its liveness record (a ConfigMap, applied) and
/// follows the replicas' (list, watch).
#[tokio::test]
async fn every_secret_and_join_verb_the_hub_is_granted_is_needed() {
    if !require_assets("every_secret_and_join_verb_the_hub_is_granted_is_needed") {
        return;
    }
    let bin = gwhub_binary();
    let fleet = Fleet::start(&["hubsecrets"])
        .await
        .expect("start API server");
    let cluster = fleet.cluster("hubsecrets");
    install_hub(cluster).await;
    let client = cluster.client().await.unwrap();
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(client.clone(), SYSTEM_NS);
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), SYSTEM_NS);
    gwhub_test_kit::crds::install_inventory(&client)
        .await
        .expect("install the ClusterProfile CRD");
    gwhub_test_kit::apiserver::create_namespaces(&client, &[INVENTORY_NS])
        .await
        .unwrap();
    let profiles: Api<ClusterProfile> = Api::namespaced(client.clone(), INVENTORY_NS);
    let csrs: Api<k8s_openapi::api::certificates::v1::CertificateSigningRequest> =
        Api::all(client.clone());
    // The tokenless joins name a cluster of the inventory that never gets an
    // identity (one of east, which a token joins, is refused ALREADY_EXISTS).
    apply(
        &profiles,
        TOKENLESS,
        json!({"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
               "metadata": {"name": TOKENLESS, "namespace": INVENTORY_NS},
               "spec": {"clusterManager": {"name": "rbac-test"}}}),
    )
    .await;
    let fresh_start = || async {
        for name in ["gwhub-ca", "gwhub-serving"] {
            let _ = secrets.delete(name, &DeleteParams::default()).await;
        }
        for name in ["gwhub-revoked", "gwhub-issued"] {
            let _ = configmaps.delete(name, &DeleteParams::default()).await;
        }
        let _ = profiles.delete("east", &DeleteParams::default()).await;
        // Earlier runs' waiting requests would fill this address's share
        // of the pending pool (4).
        let _ = csrs
            .delete_collection(
                &DeleteParams::default(),
                &kube::api::ListParams::default()
                    .labels(&format!("{}=manual", gwhub_k8s::join_csr::MANUAL_LABEL)),
            )
            .await;
    };
    let drive = |port: u16, log: std::path::PathBuf, done: Box<dyn Fn(&str) -> bool>| {
        let client = client.clone();
        async move {
            let deadline = Instant::now() + REFUSED_WITHIN;
            let profiles: Api<ClusterProfile> = Api::namespaced(client.clone(), INVENTORY_NS);
            let mut round = 0u32;
            loop {
                round += 1;
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                if done(&text) || Instant::now() > deadline {
                    return text;
                }
                // Tokenless only until the hub has recorded one request
                // (its log says so; the first rounds may find no CA yet):
                // joins share a per-address limit (10 a minute) and the
                // removals need the token joins.
                try_join(&client, port, !text.contains("waits for approval")).await;
                if round.is_multiple_of(3) {
                    // East leaves (its ClusterProfile lived for a few
                    // seconds, long enough for its condition): its removal
                    // is recorded.
                    let _ = profiles.delete("east", &DeleteParams::default()).await;
                }
                tokio::time::sleep(Duration::from_millis(1000)).await;
            }
        }
    };
    let all_paths = |t: &str| {
        t.contains("renewed the hub's serving certificate")
            && t.contains("cluster joined")
            && t.contains("waits for approval")
            && t.contains("published the joined cluster's ClusterProfile")
            && t.contains("ClusterProfile gwhub.io/Reporting applied")
            // Created, then updated.
            && t.matches("the cluster's identity is revoked").count() >= 2
    };

    // The control: as shipped, it makes, follows and renews them, and joins.
    fresh_start().await;
    let port = free_port();
    let log = fleet.dir.join("hub-secrets-shipped.log");
    let hub = start_secrets_hub(&bin, cluster, port, &log);
    let text = drive(port, log, Box::new(all_paths)).await;
    drop(hub);
    assert!(
        !text.contains("forbidden") && !text.contains("not permitted"),
        "the shipped RBAC refused the hub something:\n{text}"
    );
    assert!(all_paths(&text), "no renewal or no join:\n{text}");

    let roles = roles_in("hub/rbac.yaml");
    let mut checked = 0;
    for (i, role) in roles.iter().enumerate() {
        let ns = role["metadata"]["namespace"].as_str();
        for (r, rule) in role["rules"].as_array().unwrap().iter().enumerate() {
            let group = rule["apiGroups"][0].as_str().unwrap();
            let resource = rule["resources"][0].as_str().unwrap();
            for verb in rule["verbs"].as_array().unwrap() {
                let verb = verb.as_str().unwrap();
                if !on_the_join_path(rule, verb) {
                    continue;
                }
                let mut reduced = roles.clone();
                reduced[i] = without(role, r, verb);
                kubectl_apply_json(cluster, &reduced);
                if resource == "signers" {
                    // `kubectl auth can-i` cannot spell a signer's name:
                    // asked with a SubjectAccessReview instead.
                    wait_signer_refused(&client, rule, verb).await;
                } else {
                    wait_refused(cluster, HUB_SA, verb, &can_i_probe(rule, verb), ns).await;
                }
                fresh_start().await;
                let port = free_port();
                let log = fleet.dir.join(format!("hub-secrets-without-{checked}.log"));
                let hub = start_secrets_hub(&bin, cluster, port, &log);
                let resource = resource.to_owned();
                let group = group.to_owned();
                let is_refused = {
                    let (resource, group) = (resource.clone(), group.clone());
                    move |t: &str| refused_secret_or_join(t, verb, &resource, &group)
                };
                let text = drive(port, log, Box::new(is_refused.clone())).await;
                drop(hub);
                assert!(
                    is_refused(&text),
                    "without {verb} {resource} the hub was never refused it:\n{text}"
                );
                eprintln!("rbac: without {verb} {resource}: refused, as it should be");
                checked += 1;
            }
        }
    }
    assert_eq!(
        checked, 22,
        "6 on secrets (the hub's own followed with the tokens), 6 on ConfigMaps (the removed and issued \
         clusters' ones and the replicas' liveness records), 8 on CSRs and the signer \
         (requests deleted once done), 2 on ClusterProfiles (create, status patch)"
    );
    apply_k(&cluster.kubeconfig, &manifests_dir()).unwrap();
}
