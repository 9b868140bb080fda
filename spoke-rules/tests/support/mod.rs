//! Builders for the engine tests: small, readable objects from JSON.
#![allow(dead_code)]

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus};
use gwhub_model::Condition;
use gwhub_spoke_rules::engine::Evaluation;
use gwhub_spoke_rules::openshift::{DNS, DNSRecord};
use gwhub_spoke_rules::{Options, Snapshot, evaluate};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, Service};
use serde_json::{Value, json};

pub const NS: &str = "openshift-ingress";
pub const PUBLIC_ID: &str = "Z0PUBLIC";

pub fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

pub fn now() -> Timestamp {
    t("2026-01-12T10:00:00Z")
}

pub fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

pub fn class() -> GatewayClass {
    from(
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": "openshift-default"},
        "spec": {"controllerName": "openshift.io/gateway-controller/v1"}}),
    )
}

/// A Gateway `gw` with `(name, hostname)` listeners and the given status;
/// where `status` has no `listeners`, every spec listener gets the status
/// entry its Gateway controller (Istio) writes, since the agent only adds
/// conditions to existing entries.
pub fn gateway(listeners: &[(&str, Option<&str>)], generation: i64, mut status: Value) -> Gateway {
    if let Value::Object(m) = &mut status
        && !m.contains_key("listeners")
        && !listeners.is_empty()
    {
        let entries: Vec<Value> = listeners
            .iter()
            .map(|(n, _)| {
                json!({"name": n, "attachedRoutes": 0,
                "supportedKinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}],
                "conditions": []})
            })
            .collect();
        m.insert("listeners".into(), Value::Array(entries));
    }
    let ls: Vec<Value> = listeners
        .iter()
        .map(|(n, h)| match h {
            Some(h) => json!({"name": n, "hostname": h, "port": 80, "protocol": "HTTP"}),
            None => json!({"name": n, "port": 80, "protocol": "HTTP"}),
        })
        .collect();
    from(
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": NS, "generation": generation},
        "spec": {"gatewayClassName": "openshift-default", "listeners": ls},
        "status": status}),
    )
}

pub fn service(name: &str, type_: &str, ingress: Value) -> Service {
    from(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"),
                     "labels": {"gateway.networking.k8s.io/gateway-name": "gw"}},
        "spec": {"type": type_},
        "status": {"loadBalancer": {"ingress": ingress}}}))
}

pub fn event(
    name: &str,
    service: &str,
    component: &str,
    reason: &str,
    message: &str,
    last: &str,
) -> Event {
    from(json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": NS},
        "involvedObject": {"kind": "Service", "apiVersion": "v1", "name": service, "namespace": NS, "uid": format!("uid-{service}")},
        "source": {"component": component},
        "reason": reason, "message": message, "lastTimestamp": last}))
}

/// A zone entry of a DNSRecord status; `published` is `(status, message)`.
pub fn zone(dns_zone: Value, published: Option<(&str, &str)>) -> Value {
    let conditions: Vec<Value> = published
        .map(|(s, m)| json!({"type": "Published", "status": s, "message": m}))
        .into_iter()
        .collect();
    json!({"dnsZone": dns_zone, "conditions": conditions})
}

pub fn record(name: &str, dns_name: &str, policy: &str, zones: Vec<Value>) -> DNSRecord {
    from(
        json!({"apiVersion": "ingress.operator.openshift.io/v1", "kind": "DNSRecord",
        "metadata": {"name": name, "namespace": NS, "labels": {"gateway.networking.k8s.io/gateway-name": "gw"}},
        "spec": {"dnsName": dns_name, "dnsManagementPolicy": policy, "targets": ["lb.example.com"],
                 "recordType": "CNAME", "recordTTL": 30},
        "status": {"zones": zones}}),
    )
}

pub fn public() -> Value {
    json!({"id": PUBLIC_ID})
}

pub fn private() -> Value {
    json!({"tags": {"Name": "c-int", "kubernetes.io/cluster/c": "owned"}})
}

pub fn dns(public: Option<Value>, private: Option<Value>) -> DNS {
    let mut spec = json!({"baseDomain": "example.com"});
    if let Some(p) = public {
        spec["publicZone"] = p;
    }
    if let Some(p) = private {
        spec["privateZone"] = p;
    }
    from(
        json!({"apiVersion": "config.openshift.io/v1", "kind": "DNS",
        "metadata": {"name": "cluster"}, "spec": spec}),
    )
}

/// A healthy cluster around `gateway`.
pub fn snapshot(gateway: Gateway) -> Snapshot {
    Snapshot {
        gateways: vec![gateway],
        gateway_classes: vec![class()],
        services: vec![service(
            "gw-openshift-default",
            "LoadBalancer",
            json!([{"hostname": "lb.example.com"}]),
        )],
        dns_records: vec![],
        events: vec![],
        dns: Some(dns(Some(public()), Some(private()))),
    }
}

pub fn eval_one(snap: &Snapshot) -> Evaluation {
    let mut out = evaluate(snap, &Options::default(), now()).unwrap();
    assert_eq!(out.len(), 1);
    out.remove(0)
}

pub fn listener_conds<'a>(status: &'a GatewayStatus, listener: &str) -> &'a [Condition] {
    &status
        .listeners
        .as_ref()
        .unwrap()
        .iter()
        .find(|l| l.name == listener)
        .unwrap_or_else(|| panic!("no status entry for listener {listener}"))
        .conditions
}

pub fn find<'a>(list: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    list.iter().find(|c| c.type_ == type_)
}

/// `(status, reason, message)` of a condition, for table assertions.
pub fn srm(c: Option<&Condition>) -> Option<(String, String, String)> {
    c.map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

pub fn cond(type_: &str, status: &str, reason: &str, generation: i64, time: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": format!("{type_} says {reason}"),
           "observedGeneration": generation, "lastTransitionTime": time})
}
