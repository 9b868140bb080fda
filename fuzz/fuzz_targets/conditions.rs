//! A structured cluster (Gateways with Istio's status, their Services,
//! Events, DNSRecords, the DNS config) through the spoke
//! agent's snapshot path and condition engine, and its merge into the
//! status Istio keeps. Checks what the merge's property tests check: other
//! writers' conditions, listener entries and addresses are kept as they
//! were, no list grows past 8 conditions / 64 listeners, and a second merge
//! changes nothing.
#![no_main]

mod common;

use arbitrary::Arbitrary;
use common::*;
use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_spoke_rules::conditions::{GATEWAY_TYPES, LISTENER_TYPES};
use gwhub_spoke_rules::engine::{desired_for, evaluate};
use gwhub_spoke_rules::scope::Options;
use gwhub_spoke_rules::snapshot::Snapshot;
use gwhub_spoke_rules::status::{merge, needs_write};
use gwhub_model::Condition;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

const NS: &str = "openshift-ingress";
const GATEWAYS: &[&str] = &["shop", "internal", "default-gateway"];
const ZONES: &[&str] = &["Z1", "Z2", "ZOLD", ""];
const HOSTS: &[&str] = &[
    "*.apps.example.com",
    "api.example.com",
    "api.example.com.",
    "*.apps.example.com.",
    "",
];
const LISTENERS: &[&str] = &["http", "https", "api", "wildcard"];
const IPS: &[&str] = &["203.0.113.10", "", "lb.example.com"];
const EVENT_REASONS: &[&str] = &["SyncLoadBalancerFailed", "EnsuringLoadBalancer", ""];
const POLICIES: &[&str] = &["Managed", "Unmanaged", ""];

#[derive(Arbitrary, Debug)]
struct Cond {
    type_: Text,
    status: Text,
    reason: Text,
    generation: Option<u8>,
    time: u32,
}

impl Cond {
    fn json(&self) -> Value {
        let time = jiff::Timestamp::from_second(i64::from(self.time)).unwrap();
        let mut c = json!({
            "type": self.type_.pick(CONDITION_TYPES),
            "status": self.status.pick(&STATUSES[..3]),
            "reason": self.reason.pick(&REASONS[..3]),
            "message": "",
            "lastTransitionTime": time.to_string(),
        });
        if let Some(g) = self.generation {
            c["observedGeneration"] = json!(g);
        }
        c
    }
}

/// Up to `max` conditions with distinct types (the API server guarantees
/// unique types; `max` of 8 is the CRD's limit, more tests a status that
/// already broke it).
fn conditions(list: &[Cond], max: usize) -> Vec<Value> {
    let mut seen = std::collections::BTreeSet::new();
    list.iter()
        .map(Cond::json)
        .filter(|c| seen.insert(c["type"].as_str().unwrap_or_default().to_owned()))
        .take(max)
        .collect()
}

#[derive(Arbitrary, Debug)]
struct Gateway {
    name: Text,
    class: bool,
    generation: Option<u8>,
    listeners: Vec<(Text, Option<Text>)>,
    conditions: Option<Vec<Cond>>,
    status_listeners: Option<Vec<(Text, i8, Vec<Cond>)>>,
    addresses: Option<Vec<Text>>,
    over_limit: bool,
}

#[derive(Arbitrary, Debug)]
struct Record {
    name: u8,
    gateway: Text,
    dns_name: Text,
    policy: Text,
    zones: Vec<(Text, bool, Vec<(Text, Text)>)>,
}

#[derive(Arbitrary, Debug)]
struct Service {
    name: u8,
    gateway: Text,
    load_balancer: bool,
    ingress: Option<Vec<(Option<Text>, Option<Text>)>>,
}

#[derive(Arbitrary, Debug)]
struct Event {
    name: u8,
    service: u8,
    reason: Text,
    time: u32,
    core: bool,
}

#[derive(Arbitrary, Debug)]
struct Input {
    dns: Option<(Option<Text>, bool)>,
    gateways: Vec<Gateway>,
    records: Vec<Record>,
    services: Vec<Service>,
    events: Vec<Event>,
    later: u32,
}

fn objects(input: &Input) -> Vec<Value> {
    let mut out = vec![
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
               "metadata": {"name": "openshift-default"},
               "spec": {"controllerName": "openshift.io/gateway-controller/v1"}}),
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
               "metadata": {"name": "other"},
               "spec": {"controllerName": "example.com/other"}}),
    ];
    if let Some((public, private)) = &input.dns {
        let mut spec = json!({"baseDomain": "example.com"});
        if let Some(z) = public {
            spec["publicZone"] = json!({"id": z.pick(ZONES)});
        }
        if *private {
            spec["privateZone"] = json!({"tags": {"Name": "int"}});
        }
        out.push(
            json!({"apiVersion": "config.openshift.io/v1", "kind": "DNS",
            "metadata": {"name": "cluster"}, "spec": spec}),
        );
    }
    let mut names = std::collections::BTreeSet::new();
    for g in input.gateways.iter().take(4) {
        let name = g.name.pick(GATEWAYS);
        if name.is_empty() || !names.insert(name.clone()) {
            continue;
        }
        let max = if g.over_limit { 12 } else { 8 };
        let mut listener_names = std::collections::BTreeSet::new();
        let listeners: Vec<Value> = g
            .listeners
            .iter()
            .take(70)
            .filter(|(n, _)| listener_names.insert(n.pick(LISTENERS)))
            .map(|(n, h)| {
                let mut l = json!({"name": n.pick(LISTENERS), "port": 443, "protocol": "HTTPS"});
                if let Some(h) = h {
                    l["hostname"] = json!(h.pick(HOSTS));
                }
                l
            })
            .collect();
        let mut status = json!({});
        if let Some(c) = &g.conditions {
            status["conditions"] = json!(conditions(c, max));
        }
        if let Some(ls) = &g.status_listeners {
            let mut seen = std::collections::BTreeSet::new();
            let ls: Vec<Value> = ls
                .iter()
                .take(if g.over_limit { 70 } else { 64 })
                .filter(|(n, _, _)| seen.insert(n.pick(LISTENERS)))
                .map(|(n, routes, c)| {
                    json!({"name": n.pick(LISTENERS), "attachedRoutes": routes,
                           "conditions": conditions(c, max)})
                })
                .collect();
            status["listeners"] = json!(ls);
        }
        if let Some(a) = &g.addresses {
            status["addresses"] = json!(
                a.iter()
                    .take(16)
                    .map(|v| json!({"type": "IPAddress", "value": v.pick(IPS)}))
                    .collect::<Vec<_>>()
            );
        }
        let mut metadata = json!({"name": name, "namespace": NS, "uid": format!("uid-{name}")});
        if let Some(gen_) = g.generation {
            metadata["generation"] = json!(gen_);
        }
        out.push(
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": metadata,
            "spec": {"gatewayClassName": if g.class { "openshift-default" } else { "other" },
                     "listeners": listeners},
            "status": status}),
        );
    }
    let label = |g: &Text| json!({"gateway.networking.k8s.io/gateway-name": g.pick(GATEWAYS)});
    let mut seen = std::collections::BTreeSet::new();
    for s in input
        .services
        .iter()
        .take(4)
        .filter(|s| seen.insert(s.name))
    {
        let mut svc = json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": format!("svc-{}", s.name), "namespace": NS, "labels": label(&s.gateway)},
            "spec": {"type": if s.load_balancer { "LoadBalancer" } else { "ClusterIP" }}});
        if let Some(ingress) = &s.ingress {
            let ingress: Vec<Value> = ingress
                .iter()
                .take(4)
                .map(|(ip, host)| {
                    let mut i = json!({});
                    if let Some(ip) = ip {
                        i["ip"] = json!(ip.pick(IPS));
                    }
                    if let Some(h) = host {
                        i["hostname"] = json!(h.pick(IPS));
                    }
                    i
                })
                .collect();
            svc["status"] = json!({"loadBalancer": {"ingress": ingress}});
        }
        out.push(svc);
    }
    let mut seen = std::collections::BTreeSet::new();
    for e in input.events.iter().take(6).filter(|e| seen.insert(e.name)) {
        let time = jiff::Timestamp::from_second(i64::from(e.time))
            .unwrap()
            .to_string();
        let service = format!("svc-{}", e.service % 4);
        out.push(if e.core {
            json!({"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": format!("ev-{}", e.name), "namespace": NS},
                "involvedObject": {"kind": "Service", "name": service, "namespace": NS},
                "reason": e.reason.pick(EVENT_REASONS), "message": "failed", "type": "Warning",
                "source": {"component": "service-controller"}, "lastTimestamp": time})
        } else {
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": format!("ev-{}", e.name), "namespace": NS},
                "regarding": {"kind": "Service", "name": service, "namespace": NS},
                "reason": e.reason.pick(EVENT_REASONS), "note": "failed", "type": "Warning",
                "reportingController": "service-controller", "reportingInstance": "x",
                "eventTime": time})
        });
    }
    let mut seen = std::collections::BTreeSet::new();
    for r in input.records.iter().take(8).filter(|r| seen.insert(r.name)) {
        let zones: Vec<Value> = r
            .zones
            .iter()
            .take(4)
            .map(|(id, tags, conds)| {
                let zone = if *tags {
                    json!({"tags": {"Name": "int"}})
                } else {
                    json!({"id": id.pick(ZONES)})
                };
                let conds: Vec<Value> = conds
                    .iter()
                    .take(3)
                    .map(|(s, reason)| {
                        json!({"type": "Published", "status": s.pick(&STATUSES[..3]),
                        "reason": reason.pick(REASONS), "message": "provider says so"})
                    })
                    .collect();
                json!({"dnsZone": zone, "conditions": conds})
            })
            .collect();
        out.push(json!({"apiVersion": "ingress.operator.openshift.io/v1", "kind": "DNSRecord",
            "metadata": {"name": format!("rec-{}", r.name), "namespace": NS, "labels": label(&r.gateway)},
            "spec": {"dnsName": r.dns_name.pick(HOSTS), "dnsManagementPolicy": r.policy.pick(POLICIES),
                     "recordType": "CNAME", "recordTTL": 30, "targets": ["lb.example.com"]},
            "status": {"zones": zones}}));
    }
    out
}

fn foreign(list: &[Condition], ours: &[&str]) -> Vec<Condition> {
    list.iter()
        .filter(|c| !ours.contains(&c.type_.as_str()))
        .cloned()
        .collect()
}

fn check_kept(before: &GatewayStatus, after: &GatewayStatus) {
    let b = before.conditions.as_deref().unwrap_or_default();
    let a = after.conditions.as_deref().unwrap_or_default();
    assert_eq!(
        foreign(b, GATEWAY_TYPES),
        foreign(a, GATEWAY_TYPES),
        "a foreign Gateway condition changed"
    );
    assert!(a.len() <= b.len().max(8), "{} Gateway conditions", a.len());
    assert_eq!(before.addresses, after.addresses);
    let bl = before.listeners.as_deref().unwrap_or_default();
    let al = after.listeners.as_deref().unwrap_or_default();
    assert!(
        al.len() >= bl.len() && al.len() <= bl.len().max(64),
        "{} listeners",
        al.len()
    );
    for (b, a) in bl.iter().zip(al) {
        assert_eq!(b.name, a.name);
        assert_eq!(b.attached_routes, a.attached_routes);
        assert_eq!(b.supported_kinds, a.supported_kinds);
        assert_eq!(
            foreign(&b.conditions, LISTENER_TYPES),
            foreign(&a.conditions, LISTENER_TYPES)
        );
        assert!(a.conditions.len() <= b.conditions.len().max(8));
    }
    for a in &al[bl.len()..] {
        assert!(a.conditions.len() <= 8);
    }
}

fuzz_target!(|input: Input| {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects(&input)});
    let objects = gwhub_spoke_rules::manifest::parse_str("fuzz.json", &list.to_string())
        .expect("the generated List parses");
    let Ok(snapshot) = Snapshot::from_objects(&objects) else {
        return;
    };
    let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
    let later = jiff::Timestamp::from_second(1_800_000_000 + i64::from(input.later)).unwrap();
    let Ok(evaluations) = evaluate(&snapshot, &Options::default(), now) else {
        return;
    };
    if evaluations.is_empty() {
        // No in-scope Gateway: no cluster config needed, nothing to check.
        return;
    }
    let dns = snapshot.dns.as_ref().expect("evaluated, so configured");
    for e in &evaluations {
        let before = e.gateway.status.clone().unwrap_or_default();
        check_kept(&before, &e.status);
        let _ = e.apply_patch();
        // A second merge, later, with the same desired conditions: no write.
        let (desired, _) = desired_for(&e.gateway, &snapshot, dns);
        let (once, _) = merge(e.gateway.status.as_ref(), &desired, &e.plan, now);
        assert_eq!(once, e.status);
        let (twice, _) = merge(Some(&once), &desired, &e.plan, later);
        assert!(!needs_write(&once, &twice), "second merge needs a write");
        assert_eq!(once, twice, "second merge changed the status");
    }
});
