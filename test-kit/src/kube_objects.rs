//! The Kubernetes objects of the end-to-end tests and the actors that write
//! them, each with its own field manager as on a real cluster: the tests
//! (`gwhub-tests`, specs), an Istio-like Gateway controller (`istio`), a load
//! balancer controller (`lb-controller`), a DNS controller
//! (`dns-controller`), the installer (`installer`) and the
//! service-controller's Events. Plus readers of Gateway status, bounded
//! waits, and the project's own CRD from `manifests/`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gwhub_hub_rules::report::ClusterReport;
use gwhub_spoke_rules::openshift::{DNS, DNSRecord};
use k8s_openapi::api::core::v1::{Event, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The namespace OpenShift's Gateways live in (the agent's default scope).
pub const NS: &str = "openshift-ingress";
pub const CONTROLLER: &str = "openshift.io/gateway-controller/v1";
pub const CLASS: &str = "openshift-default";
pub const HOST: &str = "*.apps.example.com";
use crate::wait::WAIT;

// ---------------------------------------------------------------- actors

pub(crate) fn tests_manager() -> PatchParams {
    PatchParams::apply("gwhub-tests").force()
}

/// A server-side apply by the tests (field manager `gwhub-tests`).
pub(crate) async fn try_apply<K>(api: &Api<K>, name: &str, body: Value) -> kube::Result<()>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &tests_manager(), &Patch::Apply(&body))
        .await
        .map(|_| ())
}

pub async fn apply<K>(api: &Api<K>, name: &str, body: Value)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    try_apply(api, name, body)
        .await
        .unwrap_or_else(|e| panic!("apply {name}: {e}"));
}

/// A status apply by another controller (its own field manager, forced as a
/// controller owning those fields would).
pub(crate) async fn try_apply_status<K>(
    api: &Api<K>,
    manager: &str,
    name: &str,
    body: Value,
) -> kube::Result<()>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.patch_status(
        name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(&body),
    )
    .await
    .map(|_| ())
}

pub async fn apply_status<K>(api: &Api<K>, manager: &str, name: &str, body: Value)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    try_apply_status(api, manager, name, body)
        .await
        .unwrap_or_else(|e| panic!("{manager} status apply {name}: {e}"));
}

pub async fn gateway_class(client: &Client, name: &str, controller_name: &str) {
    apply(
        &Api::<GatewayClass>::all(client.clone()),
        name,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
               "metadata": {"name": name}, "spec": {"controllerName": controller_name}}),
    )
    .await;
}

pub async fn gateway(client: &Client, ns: &str, name: &str, class: &str, extra_port: Option<i32>) {
    let mut listeners = vec![
        json!({"name": "https", "hostname": HOST, "port": 443, "protocol": "HTTP"}),
        json!({"name": "plain", "port": 8080, "protocol": "HTTP"}),
    ];
    if let Some(p) = extra_port {
        listeners.push(json!({"name": "extra", "port": p, "protocol": "HTTP"}));
    }
    apply(
        &Api::<Gateway>::namespaced(client.clone(), ns),
        name,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": name, "namespace": ns},
               "spec": {"gatewayClassName": class, "listeners": listeners}}),
    )
    .await;
}

pub async fn dns_config(client: &Client, zones: bool) {
    let api = Api::<DNS>::all(client.clone());
    if zones {
        apply(
            &api,
            "cluster",
            json!({"apiVersion": "config.openshift.io/v1", "kind": "DNS",
                   "metadata": {"name": "cluster"},
                   "spec": {"baseDomain": "example.com", "publicZone": {"id": "Z1"}}}),
        )
        .await;
    } else {
        // API server 1.20 turns a field dropped from an apply into a null
        // this CRD rejects; a merge patch removes it.
        api.patch(
            "cluster",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"publicZone": null, "privateZone": null}})),
        )
        .await
        .unwrap();
    }
}

pub async fn service(client: &Client, gw: &str) -> Service {
    let api = Api::<Service>::namespaced(client.clone(), NS);
    let name = format!("{gw}-lb");
    apply(
        &api,
        &name,
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": name, "namespace": NS,
                            "labels": {"gateway.networking.k8s.io/gateway-name": gw}},
               "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}}),
    )
    .await;
    api.get(&name).await.unwrap()
}

/// The load balancer controller provisions the Service's address `ip`.
pub async fn provision(client: &Client, svc: &str, ip: &str) {
    apply_status(
        &Api::<Service>::namespaced(client.clone(), NS),
        "lb-controller",
        svc,
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": svc},
               "status": {"loadBalancer": {"ingress": [{"ip": ip}]}}}),
    )
    .await;
}

/// The service-controller reports a provisioning failure.
pub async fn sync_failed_event(client: &Client, svc: &Service, message: &str) {
    let name = svc.metadata.name.clone().unwrap();
    let ev: Event = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}.sync-failed"), "namespace": NS},
        "involvedObject": {"kind": "Service", "apiVersion": "v1", "namespace": NS,
                           "name": name, "uid": svc.metadata.uid},
        "reason": "SyncLoadBalancerFailed", "message": message, "type": "Warning",
        "source": {"component": "service-controller"},
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z",
        "count": 1
    }))
    .unwrap();
    Api::<Event>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &ev)
        .await
        .unwrap();
}

pub async fn dns_record(client: &Client, gw: &str, policy: &str) {
    let name = format!("{gw}-wildcard");
    apply(
        &Api::<DNSRecord>::namespaced(client.clone(), NS),
        &name,
        json!({"apiVersion": "ingress.operator.openshift.io/v1", "kind": "DNSRecord",
               "metadata": {"name": name, "namespace": NS,
                            "labels": {"gateway.networking.k8s.io/gateway-name": gw}},
               "spec": {"dnsName": format!("{HOST}."), "recordType": "CNAME", "recordTTL": 30,
                        "targets": ["lb.example.com"], "dnsManagementPolicy": policy}}),
    )
    .await;
}

/// The DNS controller reports the record's state in zone Z1.
pub async fn publish(client: &Client, gw: &str, status: &str, message: &str) {
    let name = format!("{gw}-wildcard");
    apply_status(
        &Api::<DNSRecord>::namespaced(client.clone(), NS),
        "dns-controller",
        &name,
        json!({"apiVersion": "ingress.operator.openshift.io/v1", "kind": "DNSRecord",
               "metadata": {"name": name},
               "status": {"zones": [{"dnsZone": {"id": "Z1"}, "conditions": [
                   {"type": "Published", "status": status, "reason": "ProviderSaid",
                    "message": message, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]}}),
    )
    .await;
}

/// What the Istio-like controller writes (manager `istio`): Accepted and
/// Programmed, every listener with attachedRoutes, supportedKinds and its
/// own conditions, and the addresses.
pub fn istio_status(routes: i32, programmed_message: &str) -> Value {
    istio_status_at(routes, programmed_message, Some("192.0.2.10"))
}

/// [`istio_status`] for a load balancer at `ip` (and `lb.example.com`), or,
/// while it has no address, no addresses and Programmed False
/// `AddressNotAssigned`.
pub fn istio_status_at(routes: i32, programmed_message: &str, ip: Option<&str>) -> Value {
    let c = |t: &str, status: &str, reason: &str, msg: &str| {
        json!({"type": t, "status": status, "reason": reason, "message": msg,
               "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"})
    };
    let ok = |t: &str, msg: &str| c(t, "True", t, msg);
    let listener = |name: &str| {
        json!({"name": name, "attachedRoutes": routes,
               "supportedKinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}],
               "conditions": [ok("Accepted", ""), ok("Programmed", ""), ok("ResolvedRefs", "")]})
    };
    let (programmed, addresses) = match ip {
        Some(ip) => (
            ok("Programmed", programmed_message),
            json!([{"type": "IPAddress", "value": ip},
                   {"type": "Hostname", "value": "lb.example.com"}]),
        ),
        None => (
            c(
                "Programmed",
                "False",
                "AddressNotAssigned",
                programmed_message,
            ),
            json!([]),
        ),
    };
    json!({"conditions": [ok("Accepted", "istio accepted"), programmed],
           "listeners": [listener("https"), listener("plain")],
           "addresses": addresses})
}

/// The Istio-like controller applies `status` to Gateway `gw` (manager `istio`).
pub async fn istio_writes_status(client: &Client, gw: &str, status: Value) {
    apply_status(
        &Api::<Gateway>::namespaced(client.clone(), NS),
        "istio",
        gw,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": gw}, "status": status}),
    )
    .await;
}

pub async fn istio_writes(client: &Client, gw: &str, routes: i32, programmed_message: &str) {
    istio_writes_status(client, gw, istio_status(routes, programmed_message)).await;
}

// ---------------------------------------------------------------- reading

/// `(status, reason, observedGeneration, message)` of a condition.
pub type Seen = (String, String, Option<i64>, String);

pub fn find(list: &[Value], t: &str) -> Option<Seen> {
    list.iter().find(|c| c["type"] == t).map(|c| {
        (
            c["status"].as_str().unwrap_or_default().to_owned(),
            c["reason"].as_str().unwrap_or_default().to_owned(),
            c["observedGeneration"].as_i64(),
            c["message"].as_str().unwrap_or_default().to_owned(),
        )
    })
}

pub fn status_of(gw: &Gateway) -> Value {
    serde_json::to_value(gw.status.clone().unwrap_or_default()).unwrap()
}

pub fn gw_cond(gw: &Gateway, t: &str) -> Option<Seen> {
    find(status_of(gw)["conditions"].as_array()?, t)
}

pub fn listener_cond(gw: &Gateway, listener: &str, t: &str) -> Option<Seen> {
    let status = status_of(gw);
    let l = status["listeners"]
        .as_array()?
        .iter()
        .find(|l| l["name"] == listener)?
        .clone();
    find(l["conditions"].as_array()?, t)
}

pub fn sr(seen: &Option<Seen>) -> Option<(&str, &str)> {
    seen.as_ref().map(|(s, r, _, _)| (s.as_str(), r.as_str()))
}

/// Polls the Gateway until `ok` holds, for at most [`WAIT`].
pub async fn wait_gw(
    client: &Client,
    ns: &str,
    name: &str,
    what: &str,
    ok: impl Fn(&Gateway) -> bool,
) -> Gateway {
    wait_gw_within(client, ns, name, what, WAIT, ok).await
}

/// Polls the Gateway until `ok` holds, for at most `within`.
pub async fn wait_gw_within(
    client: &Client,
    ns: &str,
    name: &str,
    what: &str,
    within: Duration,
    ok: impl Fn(&Gateway) -> bool,
) -> Gateway {
    let api = Api::<Gateway>::namespaced(client.clone(), ns);
    let deadline = Instant::now() + within;
    loop {
        let gw = api.get(name).await.unwrap();
        if ok(&gw) {
            return gw;
        }
        assert!(
            Instant::now() < deadline,
            "{ns}/{name}: timed out waiting for {what}; status:\n{}",
            serde_json::to_string_pretty(&status_of(&gw)).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn wait_lb(client: &Client, gw: &str, reason: &str) -> Gateway {
    wait_gw(
        client,
        NS,
        gw,
        &format!("LoadBalancerReady {reason}"),
        |g| sr(&gw_cond(g, "LoadBalancerReady")).is_some_and(|(_, r)| r == reason),
    )
    .await
}

/// Waits until listener `https` has DNSReady `ready` (status, reason), the
/// Gateway-level DNSReady agrees (AllListenersReady only when True), and no
/// DNSManaged is anywhere.
pub async fn wait_dns(client: &Client, gw: &str, ready: (&str, &str)) -> Gateway {
    let gateway_level = if ready.0 == "True" {
        ("True", "AllListenersReady")
    } else {
        ("False", "SomeListenersNotReady")
    };
    wait_gw(
        client,
        NS,
        gw,
        &format!("DNSReady {ready:?} (Gateway {gateway_level:?}), no DNSManaged"),
        |g| {
            sr(&listener_cond(g, "https", "DNSReady")) == Some(ready)
                && sr(&gw_cond(g, "DNSReady")) == Some(gateway_level)
                && !serde_json::to_string(&status_of(g))
                    .unwrap()
                    .contains("DNSManaged")
        },
    )
    .await
}

/// The agent's three condition types nowhere in the Gateway's status.
pub fn none_of_ours(gw: &Gateway) -> bool {
    let text = serde_json::to_string(&status_of(gw)).unwrap();
    !["LoadBalancerReady", "DNSManaged", "DNSReady"]
        .iter()
        .any(|t| text.contains(t))
}

/// Every field of `want` (an [`istio_status_at`]) is on `g` as the
/// Istio-like writer wrote it, and none of them belongs to the agent's field
/// manager.
pub fn assert_istio_kept(what: &str, g: &Gateway, want: &Value) {
    let have = status_of(g);
    assert_eq!(have["addresses"], want["addresses"], "{what}: addresses");
    for t in ["Accepted", "Programmed"] {
        assert_eq!(
            find(have["conditions"].as_array().unwrap(), t),
            find(want["conditions"].as_array().unwrap(), t),
            "{what}: {t}"
        );
    }
    for (l, wl) in ["https", "plain"]
        .iter()
        .zip(want["listeners"].as_array().unwrap())
    {
        let hl = have["listeners"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == *l)
            .unwrap_or_else(|| panic!("{what}: listener {l} gone"));
        assert_eq!(
            hl["attachedRoutes"], wl["attachedRoutes"],
            "{what}/{l}: attachedRoutes"
        );
        assert_eq!(
            hl["supportedKinds"], wl["supportedKinds"],
            "{what}/{l}: supportedKinds"
        );
        for t in ["Accepted", "Programmed", "ResolvedRefs"] {
            assert_eq!(
                find(hl["conditions"].as_array().unwrap(), t),
                find(wl["conditions"].as_array().unwrap(), t),
                "{what}/{l}: {t}"
            );
        }
    }
    // Istio's fields stayed Istio's: our manager owns none of them.
    let managed = g.metadata.managed_fields.clone().unwrap_or_default();
    let ours = managed
        .iter()
        .find(|m| m.manager.as_deref() == Some("gwhub-agent"))
        .expect("gwhub-agent manages some fields");
    let owned = serde_json::to_string(&ours.fields_v1).unwrap();
    assert!(
        !owned.contains("addresses") && !owned.contains("supportedKinds"),
        "{owned}"
    );
    assert!(
        !owned.contains("Programmed") && !owned.contains("Accepted"),
        "{owned}"
    );
}

// ---------------------------------------------------------------- the hub's store

/// The repository's `manifests/` directory.
pub fn manifests() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests"))
}

/// Installs the project's CRD (`manifests/crd-clusterreports.yaml`) as
/// `kubectl apply` would and waits until `ClusterReport`s are served in `ns`.
pub async fn install_project_crd(client: &Client, ns: &str) {
    let objs =
        gwhub_spoke_rules::manifest::read_paths(&[manifests().join("crd-clusterreports.yaml")])
            .unwrap();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for o in objs {
        api.patch(&o.name(), &tests_manager(), &Patch::Apply(&o.value))
            .await
            .expect("the API server takes the project's CRD");
    }
    wait_project_crd(client, ns).await;
}

/// Waits until the project's CRD is established and `ClusterReport`s are
/// served in `ns`.
pub(crate) async fn wait_project_crd(client: &Client, ns: &str) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let crd = api.get("clusterreports.gwhub.io").await.unwrap();
        let established = crd.status.and_then(|s| s.conditions).is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        });
        if established {
            break;
        }
        assert!(Instant::now() < deadline, "CRD not established");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Established can precede discovery by a moment.
    let reports: Api<ClusterReport> = Api::namespaced(client.clone(), ns);
    while reports.list(&Default::default()).await.is_err() {
        assert!(Instant::now() < deadline, "ClusterReports not served");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
