//! Fleet DNS (spec section 8) in the field: a real management
//! API server with the hub in process (Kubernetes mode, acting as its
//! installed ServiceAccount, so the RBAC is the manifests'), raw agents
//! reporting a Gateway `default/web` whose listener `http` has hostname
//! `app.fleet.test`, LoadBalancerReady True, one attached route and an
//! address 192.0.2.x per cluster; the hub Gateway `default/web` on the
//! management cluster has the same listener.
//!
//! - dnsendpoint: the `DNSEndpoint` holds exactly the eligible clusters'
//!   addresses; a cluster whose LoadBalancerReady goes False leaves; a
//!   listener with no attached route is not published; one that comes
//!   back returns after the rise (`--dns-rise 1s`); the hub Gateway says
//!   `gwhub.io/DNSPublished` True.
//! - rfc2136 (a real BIND with a TSIG key; skipped without one unless
//!   `GWHUB_REQUIRE_DNS=1`): see `rfc2136_*` below.
//!
//! Waits are bounded (`wait::until`); no fixed sleep before a positive
//! assert. The tests against DNS servers run `dig` and `nsupdate` as
//! blocking child processes, so they run on two worker threads: the hub
//! keeps renewing its Lease and writing while the test waits for a
//! child, as it would in its own process, and no assert there relies on
//! the hub standing still.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use gateway_api::apis::standard::gateways::Gateway;
use gwhub_dns::DnsFlags;
use gwhub_hub::kube_hub::KubeHub;
use gwhub_hub_rules::dnsendpoint::DNSEndpoint;
use gwhub_proto::v1;
use gwhub_test_kit::apiserver::Fleet;
use gwhub_test_kit::install::SYSTEM_NS;
use gwhub_test_kit::raw_agent::Agent;
use gwhub_test_kit::wait::{WAIT, until};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support::kube_hub::{kube_hub, lease_held_elsewhere, lease_released};

const NS: &str = "default";
const HOST: &str = "app.fleet.test";

fn cond(type_: &str, status: bool) -> v1::Condition {
    v1::Condition {
        r#type: type_.into(),
        status: if status {
            v1::ConditionStatus::True
        } else {
            v1::ConditionStatus::False
        } as i32,
        reason: "Test".into(),
        message: String::new(),
        observed_generation: Some(1),
        last_transition_time: 1_700_000_000,
    }
}

/// Cluster `i`'s report of `default/web`.
fn report(i: u8, lb_ready: bool, routes: i32) -> v1::GatewayReport {
    report_with(i, lb_ready, routes, &[("http", HOST)])
}

/// [`report`] with these `(listener, hostname)`s.
fn report_with(
    i: u8,
    lb_ready: bool,
    routes: i32,
    listeners: &[(&str, &str)],
) -> v1::GatewayReport {
    v1::GatewayReport {
        namespace: NS.into(),
        name: "web".into(),
        uid: format!("uid-{i}"),
        generation: 1,
        status: Some(v1::GatewayStatus {
            conditions: vec![
                cond("Accepted", true),
                cond("Programmed", true),
                cond("LoadBalancerReady", lb_ready),
            ],
            addresses: vec![v1::GatewayAddress {
                r#type: Some("IPAddress".into()),
                value: format!("192.0.2.{i}"),
            }],
            listeners: listeners
                .iter()
                .map(|(l, h)| v1::ListenerStatus {
                    name: (*l).into(),
                    attached_routes: routes,
                    supported_kinds: vec![],
                    conditions: vec![cond("Programmed", true)],
                    hostname: Some((*h).into()),
                })
                .collect(),
            attached_listener_sets: None,
        }),
    }
}

async fn create_hub_gateway(api: &Api<Gateway>) {
    create_hub_gateway_with(api, &[("http", HOST)]).await;
}

async fn create_hub_gateway_with(api: &Api<Gateway>, listeners: &[(&str, &str)]) {
    let listeners: Vec<serde_json::Value> = listeners
        .iter()
        .enumerate()
        .map(|(i, (l, h))| json!({"name": l, "port": 80 + i, "protocol": "HTTP", "hostname": h}))
        .collect();
    let gw: Gateway = serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {
            "gatewayClassName": "kuadrant-multi-cluster-gateway-instance-per-cluster",
            "listeners": listeners
        }
    }))
    .unwrap();
    api.create(&PostParams::default(), &gw).await.unwrap();
}

fn dns_flags(outputs: Vec<gwhub_dns::OutputKind>) -> DnsFlags {
    DnsFlags {
        zones: vec!["fleet.test".into()],
        outputs,
        ttl: Duration::from_secs(30),
        max_targets: 32,
        rise: Duration::from_secs(1),
        resync: Duration::from_secs(300),
        ..DnsFlags::default()
    }
}

async fn start_hub(client: &Client, flags: &DnsFlags) -> KubeHub {
    start_replica(client, flags, "dns-test").await
}

/// A hub replica with Lease identity `identity`.
async fn start_replica(client: &Client, flags: &DnsFlags, identity: &str) -> KubeHub {
    let stale_after = Duration::from_secs(60);
    let dns = flags.check(SYSTEM_NS, stale_after).expect("DNS flags");
    kube_hub(client)
        .identity(identity)
        .stale_after(stale_after)
        .dns(dns)
        .start()
        .await
}

/// The management API server with the hub installed and the DNSEndpoint
/// CRD: the admin's client and the hub's; `None` without the assets.
async fn management(test: &str) -> Option<(Fleet, Client, Client)> {
    let (fleet, admin, as_hub) = gwhub_test_kit::install::management(test).await?;
    gwhub_test_kit::crds::install_dnsendpoint(&admin)
        .await
        .expect("DNSEndpoint CRD");
    Some((fleet, admin, as_hub))
}

/// The A targets of every DNSEndpoint for HOST in NS (`None`: no object).
async fn a_targets(api: &Api<DNSEndpoint>) -> Option<BTreeSet<String>> {
    let list = api.list(&ListParams::default()).await.ok()?;
    let o = list.items.into_iter().next()?;
    Some(
        o.spec
            .endpoints
            .unwrap_or_default()
            .into_iter()
            .filter(|e| {
                e.record_type.as_deref() == Some("A") && e.dns_name.as_deref() == Some(HOST)
            })
            .flat_map(|e| e.targets.unwrap_or_default())
            .collect(),
    )
}

fn set(ips: &[u8]) -> Option<BTreeSet<String>> {
    Some(ips.iter().map(|i| format!("192.0.2.{i}")).collect())
}

async fn connect(addr: SocketAddr, i: u8, lb_ready: bool, routes: i32) -> Agent {
    let mut a = Agent::connect(addr, &format!("c{i}")).await;
    a.snapshot(1, 1, vec![report(i, lb_ready, routes)]).await;
    a
}

fn dns_condition(gw: &Gateway) -> Option<(String, String, String)> {
    gw.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == gwhub_dns_rules::CONDITION_TYPE)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// (a) dnsendpoint: exactly the eligible clusters, following them.
#[tokio::test]
async fn dnsendpoint_holds_exactly_the_eligible_clusters() {
    let Some((_fleet, admin, as_hub)) =
        management("dnsendpoint_holds_exactly_the_eligible_clusters").await
    else {
        return;
    };
    let gateways: Api<Gateway> = Api::namespaced(admin.clone(), NS);
    create_hub_gateway(&gateways).await;
    let hub = start_hub(
        &as_hub,
        &dns_flags(vec![gwhub_dns::OutputKind::Dnsendpoint]),
    )
    .await;
    let addr = hub.hub.ingest_addr;
    let mut c1 = connect(addr, 1, true, 1).await;
    let mut c2 = connect(addr, 2, true, 1).await;
    // c3's listener has no attached route: never published.
    let mut c3 = connect(addr, 3, true, 0).await;
    let endpoints: Api<DNSEndpoint> = Api::namespaced(admin.clone(), NS);
    until(WAIT, || a_targets(&endpoints), |t| *t == set(&[1, 2])).await;
    let list = endpoints.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let o = &list.items[0];
    assert_eq!(
        o.metadata
            .labels
            .as_ref()
            .unwrap()
            .get("gwhub.io/dns")
            .map(String::as_str),
        Some("managed")
    );
    let owner = &o.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Gateway", "web")
    );
    until(
        WAIT,
        || async { dns_condition(&gateways.get("web").await.unwrap()) },
        |c| {
            c.as_ref()
                .is_some_and(|(s, r, _)| s == "True" && r == "Published")
        },
    )
    .await;

    // c2's load balancer is no longer ready: it leaves at the next write.
    c2.upsert(2, report(2, false, 1)).await;
    c2.expect_ack(2).await;
    until(WAIT, || a_targets(&endpoints), |t| *t == set(&[1])).await;

    // c3 gets a route: it joins after the rise.
    c3.upsert(2, report(3, true, 1)).await;
    c3.expect_ack(2).await;
    until(WAIT, || a_targets(&endpoints), |t| *t == set(&[1, 3])).await;

    // c2 comes back: after the rise, it returns.
    c2.upsert(3, report(2, true, 1)).await;
    c2.expect_ack(3).await;
    until(WAIT, || a_targets(&endpoints), |t| *t == set(&[1, 2, 3])).await;

    // Nobody has a route any more: the last set is kept (--dns-when-none
    // keep) and the condition says NoneEligible.
    for (a, i, seq) in [(&mut c1, 1, 2), (&mut c2, 2, 4), (&mut c3, 3, 3)] {
        a.upsert(seq, report(i, true, 0)).await;
        a.expect_ack(seq).await;
    }
    until(
        WAIT,
        || async { dns_condition(&gateways.get("web").await.unwrap()) },
        |c| {
            c.as_ref()
                .is_some_and(|(s, r, _)| s == "False" && r == "NoneEligible")
        },
    )
    .await;
    assert_eq!(a_targets(&endpoints).await, set(&[1, 2, 3]));

    // The listener's hostname leaves the zone: the object is deleted and
    // the hub Gateway no longer carries the condition.
    let patch = json!({"spec": {"listeners": [
        {"name": "http", "port": 80, "protocol": "HTTP", "hostname": "app.elsewhere.test"}
    ]}});
    gateways
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    until(WAIT, || a_targets(&endpoints), Option::is_none).await;
    until(
        WAIT,
        || async { dns_condition(&gateways.get("web").await.unwrap()) },
        Option::is_none,
    )
    .await;
    hub.shutdown().await.unwrap();
}

/// A replica that leads again (its Lease taken over, then free) reads the
/// published set back, and a cluster streaming to it whose report says it
/// is not eligible leaves at once: its report is current, not one to wait
/// `--stale-after` for (spec section 8, "a fresh ineligible report").
#[tokio::test]
async fn a_replica_leading_again_removes_its_ineligible_cluster_at_once() {
    let Some((_fleet, admin, as_hub)) =
        management("a_replica_leading_again_removes_its_ineligible_cluster_at_once").await
    else {
        return;
    };
    let gateways: Api<Gateway> = Api::namespaced(admin.clone(), NS);
    create_hub_gateway(&gateways).await;
    let hub = start_hub(
        &as_hub,
        &dns_flags(vec![gwhub_dns::OutputKind::Dnsendpoint]),
    )
    .await;
    let addr = hub.hub.ingest_addr;
    let _c1 = connect(addr, 1, true, 1).await;
    let mut c2 = connect(addr, 2, true, 1).await;
    let endpoints: Api<DNSEndpoint> = Api::namespaced(admin.clone(), NS);
    until(WAIT, || a_targets(&endpoints), |t| *t == set(&[1, 2])).await;

    // Another replica takes the Lease (for an hour): the hub stops leading.
    lease_held_elsewhere(&admin).await;
    let mut leader = hub.leader.clone();
    tokio::time::timeout(WAIT, leader.wait_for(|l| !*l))
        .await
        .expect("the hub stops leading")
        .unwrap();

    // c2's load balancer is no longer ready while nobody writes.
    c2.upsert(2, report(2, false, 1)).await;
    c2.expect_ack(2).await;
    assert_eq!(a_targets(&endpoints).await, set(&[1, 2]));

    // The other replica ends and releases the Lease: the hub leads again,
    // reads {1, 2} back, and removes c2 at the first write, not after
    // --stale-after (60 s) of c2's silence.
    lease_released(&admin).await;
    tokio::time::timeout(WAIT, leader.wait_for(|l| *l))
        .await
        .expect("the hub leads again")
        .unwrap();
    until(WAIT, || a_targets(&endpoints), |t| *t == set(&[1])).await;
    hub.shutdown().await.unwrap();
}

/// The hub's Dashboard: one ListDnsNames answer.
async fn dns_names(hub: &KubeHub, namespace: &str) -> v1::ListDnsNamesResponse {
    let mut d = v1::dashboard_client::DashboardClient::connect(format!(
        "http://{}",
        hub.hub.dashboard_addr
    ))
    .await
    .unwrap();
    d.list_dns_names(v1::ListDnsNamesRequest {
        namespace: namespace.into(),
    })
    .await
    .unwrap()
    .into_inner()
}

/// HOST's entry in the answer, its published A targets and each
/// cluster's `(eligible, rule, reason)`.
type Shown = Option<(Vec<String>, Vec<(String, bool, u32, String)>)>;

fn shown(r: &v1::ListDnsNamesResponse) -> Shown {
    let n = r.names.iter().find(|n| n.hostname == HOST)?;
    let a = n
        .published
        .iter()
        .find(|s| s.r#type == "A")
        .map(|s| s.targets.clone())
        .unwrap_or_default();
    let clusters = n
        .clusters
        .iter()
        .map(|c| (c.cluster.clone(), c.eligible, c.rule, c.reason.clone()))
        .collect();
    Some((a, clusters))
}

/// `gwhubctl ARGS` against the hub's Dashboard: its output.
async fn gwhubctl(hub: &KubeHub, args: &[&str]) -> String {
    gwhub_test_kit::workspace_bin::gwhubctl(hub.hub.dashboard_addr, args).await
}

/// Every decision visible: the Dashboard's ListDnsNames shows, per
/// name, the published set, each cluster's eligibility with the rule it
/// fails and the last write; `gwhubctl get dns` and `dns plan` print
/// them; a replica that does not lead says so.
#[tokio::test]
async fn the_dashboard_and_gwhubctl_show_each_decision() {
    let Some((_fleet, admin, as_hub)) =
        management("the_dashboard_and_gwhubctl_show_each_decision").await
    else {
        return;
    };
    let gateways: Api<Gateway> = Api::namespaced(admin.clone(), NS);
    create_hub_gateway(&gateways).await;
    let flags = dns_flags(vec![gwhub_dns::OutputKind::Dnsendpoint]);
    let hub = start_hub(&as_hub, &flags).await;
    let addr = hub.hub.ingest_addr;
    let _c1 = connect(addr, 1, true, 1).await;
    let mut c2 = connect(addr, 2, true, 1).await;
    let _c3 = connect(addr, 3, true, 0).await;
    let ips = |v: &[u8]| v.iter().map(|i| format!("192.0.2.{i}")).collect::<Vec<_>>();
    let verdicts = |c2: (bool, u32, &str)| {
        vec![
            ("c1".to_owned(), true, 0, String::new()),
            ("c2".to_owned(), c2.0, c2.1, c2.2.to_owned()),
            ("c3".to_owned(), false, 3, "NoServingListener".to_owned()),
        ]
    };
    until(
        WAIT,
        || dns_names(&hub, ""),
        |r| shown(r) == Some((ips(&[1, 2]), verdicts((true, 0, "")))),
    )
    .await;
    let r = dns_names(&hub, "").await;
    assert!(r.enabled && r.leading && !r.dry_run, "{r:?}");
    assert_eq!(r.outputs, ["dnsendpoint"]);
    let n = &r.names[0];
    assert_eq!(n.zone, "fleet.test");
    assert_eq!(
        n.owner
            .as_ref()
            .map(|o| (o.namespace.as_str(), o.name.as_str())),
        Some((NS, "web"))
    );
    assert_eq!(n.state, "Published");
    assert_eq!(n.last_write.as_ref().map(|w| w.result.as_str()), Some("ok"));
    let c3 = &n.clusters[2];
    assert_eq!(
        c3.message,
        "no listener with hostname app.fleet.test has an attached route"
    );
    // Another namespace's names only: none.
    assert!(dns_names(&hub, "elsewhere").await.names.is_empty());

    // c2's load balancer goes: it leaves, and says why.
    c2.upsert(2, report(2, false, 1)).await;
    c2.expect_ack(2).await;
    until(
        WAIT,
        || dns_names(&hub, ""),
        |r| shown(r) == Some((ips(&[1]), verdicts((false, 2, "LoadBalancerNotReady")))),
    )
    .await;

    let table = gwhubctl(&hub, &["get", "dns"]).await;
    let row = table.lines().nth(1).unwrap_or_default();
    for want in [HOST, "default/web", "A=192.0.2.1", "1/3", "Published", "ok"] {
        assert!(row.contains(want), "{want} not in\n{table}");
    }
    let listed: serde_json::Value =
        serde_json::from_str(&gwhubctl(&hub, &["get", "dns", "-o", "json"]).await).unwrap();
    let item = &listed["items"][0];
    assert_eq!(item["kind"], "DnsName");
    assert_eq!(item["published"]["A"], json!(["192.0.2.1"]));
    assert_eq!(item["clusters"][1]["reason"], "LoadBalancerNotReady");
    assert_eq!(item["clusters"][1]["message"], "LoadBalancerReady is False");
    let plan = gwhubctl(&hub, &["dns", "plan"]).await;
    for want in [
        "app.fleet.test (hub Gateway default/web, zone fleet.test): Published",
        "published: A=192.0.2.1",
        "would write: nothing",
        "rule 2: LoadBalancerNotReady",
        "rule 3: NoServingListener",
    ] {
        assert!(plan.contains(want), "{want} not in\n{plan}");
    }

    // A second replica, not leading: it says so rather than guess.
    let follower = start_replica(&as_hub, &flags, "dns-test-follower").await;
    until(
        WAIT,
        || dns_names(&follower, ""),
        |r| r.enabled && !r.leading && r.names.is_empty() && r.message.contains("does not lead"),
    )
    .await;
    follower.shutdown().await.unwrap();
    hub.shutdown().await.unwrap();
}

/// (b) rfc2136 against a real BIND (and Knot) with a TSIG key: `dig` shows exactly
/// the eligible set; a name whose ownership TXT is another owner's (made
/// with nsupdate) is never touched and the condition says Conflict; a
/// hand-deleted record is repaired at the resync (2s); a name's A and
/// AAAA changing together are one UPDATE; a hub restart neither removes
/// nor delays a published cluster (the read-back seeds the publishers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc2136_publishes_to_bind_and_never_overwrites() {
    rfc2136_field(
        gwhub_test_kit::dns_server::Kind::Bind,
        "rfc2136_publishes_to_bind_and_never_overwrites",
    )
    .await;
}

/// (b) against Knot DNS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc2136_publishes_to_knot_and_never_overwrites() {
    rfc2136_field(
        gwhub_test_kit::dns_server::Kind::Knot,
        "rfc2136_publishes_to_knot_and_never_overwrites",
    )
    .await;
}

async fn rfc2136_field(kind: gwhub_test_kit::dns_server::Kind, test: &str) {
    use gwhub_test_kit::dns_server::{Key, Keys, Server, available};
    if !available(test) {
        return;
    }
    let Some((fleet, admin, as_hub)) = management(test).await else {
        return;
    };
    let key = Key::generate("gwhub", "hmac-sha256");
    let server = Server::start(kind, &Keys::updating(&[&key]));
    // Someone else's name, made by hand with its own ownership record.
    server.nsupdate(
        &key,
        &[
            "add taken.fleet.test 300 A 198.51.100.7",
            "add _gwhub-a.taken.fleet.test 300 TXT \"heritage=gwhub,owner=someone-else,gateway=x/y\"",
        ],
    );
    let secret = fleet.dir.join("tsig.key");
    std::fs::write(&secret, &key.clause).unwrap();
    let mut flags = dns_flags(vec![gwhub_dns::OutputKind::Rfc2136]);
    flags.server = Some(server.addr().to_string());
    flags.tsig_key_name = Some("gwhub".into());
    flags.tsig_secret_file = Some(secret);
    flags.resync = Duration::from_secs(2);

    let listeners = [("http", HOST), ("taken", "taken.fleet.test")];
    let gateways: Api<Gateway> = Api::namespaced(admin.clone(), NS);
    create_hub_gateway_with(&gateways, &listeners).await;
    let hub = start_hub(&as_hub, &flags).await;
    let addr = hub.hub.ingest_addr;
    let agents = async |addr: SocketAddr, c2_ready: bool| {
        let mut c1 = Agent::connect(addr, "c1").await;
        c1.snapshot(1, 1, vec![report_with(1, true, 1, &listeners)])
            .await;
        let mut c2 = Agent::connect(addr, "c2").await;
        c2.snapshot(1, 1, vec![report_with(2, c2_ready, 1, &listeners)])
            .await;
        (c1, c2)
    };
    let (mut c1, mut c2) = agents(addr, true).await;
    let dig = |name: &'static str| {
        let server = &server;
        move || async move { server.dig(name, "A") }
    };
    let ips = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    until(WAIT, dig(HOST), |v| *v == ips(&["192.0.2.1", "192.0.2.2"])).await;
    assert_eq!(
        server.dig("_gwhub-a.app.fleet.test", "TXT"),
        ["heritage=gwhub,owner=gwhub-system,gateway=default/web"]
    );
    until(
        WAIT,
        || async { dns_condition(&gateways.get("web").await.unwrap()) },
        |c| {
            c.as_ref().is_some_and(|(s, r, m)| {
                s == "False" && r == "Conflict" && m.contains("taken.fleet.test")
            })
        },
    )
    .await;
    assert_eq!(server.dig("taken.fleet.test", "A"), ["198.51.100.7"]);

    // c2's load balancer goes: it leaves.
    c2.upsert(2, report_with(2, false, 1, &listeners)).await;
    c2.expect_ack(2).await;
    until(WAIT, dig(HOST), |v| *v == ips(&["192.0.2.1"])).await;

    // A hand-deleted record is repaired at the next resync. The hub runs
    // beside this test (its resync every 2 s may repair the record before
    // any read here), so the delete is seen as the zone's serial rising,
    // and the repair as one more UPDATE that brings the record back.
    let before = soa_serial(&server);
    server.nsupdate(&key, &["delete app.fleet.test A"]);
    assert!(
        soa_serial(&server) > before,
        "the hand delete was not applied"
    );
    until(
        WAIT,
        || async { (server.dig(HOST, "A"), soa_serial(&server)) },
        |(v, serial)| *v == ips(&["192.0.2.1"]) && *serial >= before + 2,
    )
    .await;

    // c2 is back (after the rise); c1 gets an IPv6 address too.
    c2.upsert(3, report_with(2, true, 1, &listeners)).await;
    c2.expect_ack(3).await;
    c1.upsert(
        2,
        with_addresses(1, &listeners, &["192.0.2.1", "2001:db8::1"]),
    )
    .await;
    c1.expect_ack(2).await;
    let both = || async { (server.dig(HOST, "A"), server.dig(HOST, "AAAA")) };
    until(WAIT, both, |v| {
        *v == (ips(&["192.0.2.1", "192.0.2.2"]), ips(&["2001:db8::1"]))
    })
    .await;
    // c1's addresses both change: the name's A and AAAA change in ONE
    // UPDATE (the zone's serial rises by one per applied UPDATE).
    let before = soa_serial(&server);
    c1.upsert(
        3,
        with_addresses(1, &listeners, &["192.0.2.11", "2001:db8::11"]),
    )
    .await;
    c1.expect_ack(3).await;
    until(WAIT, both, |v| {
        *v == (ips(&["192.0.2.11", "192.0.2.2"]), ips(&["2001:db8::11"]))
    })
    .await;
    assert_eq!(soa_serial(&server), before + 1, "one UPDATE for the name");

    // A leader change while c1's addresses change (the Lease held by
    // someone else meanwhile): the records read back still say c1 (the
    // addresses this replica wrote for it), so c1 stays without the rise:
    // one UPDATE, never a set without c1.
    hold_lease(&admin, "someone-else").await;
    until(WAIT, || dns_names(&hub, ""), |r| !r.leading).await;
    let before = soa_serial(&server);
    c1.upsert(
        4,
        with_addresses(1, &listeners, &["192.0.2.21", "2001:db8::21"]),
    )
    .await;
    c1.expect_ack(4).await;
    hold_lease(&admin, "").await;
    until(WAIT, both, |v| {
        *v == (ips(&["192.0.2.2", "192.0.2.21"]), ips(&["2001:db8::21"]))
    })
    .await;
    assert_eq!(
        soa_serial(&server),
        before + 1,
        "one UPDATE across the leader change (c1 left and came back?)"
    );
    c1.upsert(5, report_with(1, true, 1, &listeners)).await;
    c1.expect_ack(5).await;
    until(WAIT, both, |v| {
        *v == (ips(&["192.0.2.1", "192.0.2.2"]), Vec::new())
    })
    .await;

    // A restart neither removes nor delays a published cluster: the
    // records answer all along, and the new hub (with a rise far longer
    // than this test waits) takes c1 and c2 as published from the
    // read-back, so c2 leaving is written at once, not after a rise.
    hub.shutdown().await.unwrap();
    let mut slow = flags.clone();
    slow.rise = Duration::from_secs(120);
    let hub = start_hub(&as_hub, &slow).await;
    let (_c1, mut c2) = agents(hub.hub.ingest_addr, true).await;
    let t = std::time::Instant::now();
    while t.elapsed() < Duration::from_secs(4) {
        assert_eq!(
            server.dig(HOST, "A"),
            ips(&["192.0.2.1", "192.0.2.2"]),
            "after the restart"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    c2.upsert(2, report_with(2, false, 1, &listeners)).await;
    c2.expect_ack(2).await;
    until(WAIT, dig(HOST), |v| *v == ips(&["192.0.2.1"])).await;
    assert_eq!(server.dig("taken.fleet.test", "A"), ["198.51.100.7"]);
    hub.shutdown().await.unwrap();
}

/// The hub's Lease held by `holder` for an hour (`""`: released, free
/// to take), as another replica or an operator would write it.
async fn hold_lease(admin: &Client, holder: &str) {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(admin.clone(), SYSTEM_NS);
    let patch = json!({"spec": {
        "holderIdentity": holder,
        "leaseDurationSeconds": 3600,
        "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(jiff::Timestamp::now()),
    }});
    leases
        .patch("gwhub-hub", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch the hub's Lease");
}

/// `report_with` with these addresses.
fn with_addresses(i: u8, listeners: &[(&str, &str)], addresses: &[&str]) -> v1::GatewayReport {
    let mut r = report_with(i, true, 1, listeners);
    if let Some(s) = r.status.as_mut() {
        s.addresses = addresses
            .iter()
            .map(|a| v1::GatewayAddress {
                r#type: Some("IPAddress".into()),
                value: (*a).into(),
            })
            .collect();
    }
    r
}

/// The zone's SOA serial (each applied UPDATE raises it by one).
fn soa_serial(server: &gwhub_test_kit::dns_server::Server) -> u64 {
    let soa = server.dig("fleet.test", "SOA");
    soa.first()
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no SOA serial in {soa:?}"))
}

/// The DNS writes a replica made, whatever their result.
fn dns_writes(hub: &KubeHub) -> u64 {
    ["ok", "conflict", "error"]
        .into_iter()
        .map(|result| {
            hub.metrics
                .dns_writes
                .get_or_create(&vec![
                    ("output".to_owned(), "rfc2136".to_owned()),
                    ("result".to_owned(), result.to_owned()),
                ])
                .get()
        })
        .sum()
}

/// (c) Two replicas against BIND do not fight: only the leader writes;
/// when it stops, the other takes over, removes nothing (the answer never
/// goes empty nor loses a cluster), and, seeded from the read-back,
/// writes a removal at once though its rise is far longer than the test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_do_not_fight_over_bind() {
    use gwhub_test_kit::dns_server::{Key, Keys, Kind, Server, available};
    const TEST: &str = "two_replicas_do_not_fight_over_bind";
    if !available(TEST) {
        return;
    }
    let Some((fleet, admin, as_hub)) = management(TEST).await else {
        return;
    };
    let key = Key::generate("gwhub", "hmac-sha256");
    let server = Server::start(Kind::Bind, &Keys::updating(&[&key]));
    let secret = fleet.dir.join("tsig.key");
    std::fs::write(&secret, &key.clause).unwrap();
    let mut flags = dns_flags(vec![gwhub_dns::OutputKind::Rfc2136]);
    flags.server = Some(server.addr().to_string());
    flags.tsig_key_name = Some("gwhub".into());
    flags.tsig_secret_file = Some(secret);
    let gateways: Api<Gateway> = Api::namespaced(admin.clone(), NS);
    create_hub_gateway(&gateways).await;

    let first = start_replica(&as_hub, &flags, "dns-1").await;
    until(WAIT, || async { *first.leader.borrow() }, |l| *l).await;
    let mut slow = flags.clone();
    slow.rise = Duration::from_secs(120);
    let second = start_replica(&as_hub, &slow, "dns-2").await;
    let _c1 = connect(first.hub.ingest_addr, 1, true, 1).await;
    let _c2 = connect(first.hub.ingest_addr, 2, true, 1).await;
    let ips = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let both = ips(&["192.0.2.1", "192.0.2.2"]);
    until(WAIT, || async { server.dig(HOST, "A") }, |v| *v == both).await;
    // The second replica has the clusters (from the store) and writes
    // nothing.
    until(
        WAIT,
        || async { second.hub.index.clusters().len() },
        |n| *n == 2,
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !*second.leader.borrow(),
        "the second replica took the lease"
    );
    assert_eq!(dns_writes(&second), 0, "the passive replica wrote DNS");
    assert!(!second.dns.borrow().writing);
    assert!(dns_writes(&first) >= 1);

    // The leader stops; its agents come back to the other replica. The
    // answer holds both clusters all along.
    let watch = {
        let addr = server.addr();
        let stop = tokio_util::sync::CancellationToken::new();
        let s = stop.clone();
        let both = both.clone();
        let task = tokio::task::spawn_blocking(move || {
            let mut seen = 0u32;
            while !s.is_cancelled() {
                let out = std::process::Command::new("dig")
                    .args(["@127.0.0.1", "-p", &addr.port().to_string()])
                    .args([HOST, "A", "+short", "+time=2", "+tries=2"])
                    .output()
                    .expect("run dig");
                let mut got: Vec<String> = String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .map(|l| l.trim().to_owned())
                    .filter(|l| !l.is_empty())
                    .collect();
                got.sort();
                assert_eq!(got, both, "during the takeover");
                seen += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            seen
        });
        (stop, task)
    };
    first.shutdown().await.unwrap();
    until(WAIT, || async { *second.leader.borrow() }, |l| *l).await;
    let _c1 = connect(second.hub.ingest_addr, 1, true, 1).await;
    let mut c2 = connect(second.hub.ingest_addr, 2, true, 1).await;
    until(WAIT, || async { second.dns.borrow().writing }, |w| *w).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (stop, task) = watch;
    stop.cancel();
    let seen = task.await.expect("the answer held both clusters");
    assert!(seen > 0);
    assert_eq!(server.dig(HOST, "A"), both);

    // The new leader took both as published (its rise is 120 s): c2
    // leaving is written at once.
    c2.upsert(2, report(2, false, 1)).await;
    c2.expect_ack(2).await;
    until(
        WAIT,
        || async { server.dig(HOST, "A") },
        |v| *v == ips(&["192.0.2.1"]),
    )
    .await;
    second.shutdown().await.unwrap();
}
