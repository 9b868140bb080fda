//! The OpenShift ingress operator's own test tables, replayed through the
//! agent's engine: the same objects the operator's tests hand its code, as
//! cluster objects (a `v1` List parsed as `gwhub-agent compute` parses
//! files, then [`gwhub_spoke_rules::evaluate`]), with every condition the
//! operator test asserts checked for type, status, reason, message and
//! observedGeneration (the generations the operator's tests use;
//! status_test.go asserts no generation, so its cases compare none).
//!
//! Source: github.com/openshift/cluster-ingress-operator at commit
//! acca9642a81370bc1a587155f7e1e7998b7c5489:
//! - `pkg/operator/controller/gateway-status/controller_test.go`
//!   (`Test_Reconcile`, `TestReconcileTransition`)
//! - `pkg/resources/status/gatewayapi_test.go`
//!   (`TestComputeGatewayAPIListenerDNSStatus`,
//!   `TestComputeGatewayAPILoadBalancerStatus`)
//! - `pkg/resources/status/status_test.go` (the Gateway-relevant cases of
//!   `Test_computeLoadBalancerStatus` and `Test_computeDNSStatus`: the
//!   `DNSReady` and `LoadBalancerReady` results; `DNSManaged`,
//!   `LoadBalancerManaged` and the IngressController-only cases do not exist
//!   for Gateways)
//!
//! Facts carried over, not code. Differences in how a case is set up are
//! said next to it: the operator's unit tests call functions with Go values
//! (nil maps, nameless objects) that have no cluster-object form, and its
//! Gateways need no GatewayClass (its watch predicate checks that), while
//! the agent's scope does, so every case adds our GatewayClass.

use gwhub_spoke_rules::manifest::parse_str;
use gwhub_spoke_rules::{Options, Snapshot, evaluate};
use jiff::Timestamp;
use serde_json::{Value, json};

const NS: &str = "openshift-ingress";
const GW: &str = "example-gateway";
const CONTROLLER_TEST: &str = "pkg/operator/controller/gateway-status/controller_test.go";
const GATEWAYAPI_TEST: &str = "pkg/resources/status/gatewayapi_test.go";
const STATUS_TEST: &str = "pkg/resources/status/status_test.go";

// ------------------------------------------------------------ objects

fn class() -> Value {
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
           "metadata": {"name": "openshift-default"},
           "spec": {"controllerName": "openshift.io/gateway-controller/v1"}})
}

/// A condition as the operator tests write foreign ones (no message).
fn foreign(t: &str, reason: &str) -> Value {
    json!({"type": t, "status": "True", "reason": reason, "message": "",
           "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

/// `exampleConditions` of controller_test.go (Istio's).
fn example_conditions() -> Vec<Value> {
    vec![
        json!({"type": "Accepted", "status": "True", "reason": "Accepted",
               "message": "Resource accepted", "lastTransitionTime": "2026-01-01T00:00:00Z"}),
        json!({"type": "Programmed", "status": "True", "reason": "Programmed",
               "message": "Resource programmed, service created",
               "lastTransitionTime": "2026-01-01T00:00:00Z"}),
    ]
}

/// A listener status entry with `conditions`.
fn entry(name: &str, conditions: Vec<Value>) -> Value {
    json!({"name": name, "attachedRoutes": 0, "supportedKinds": [], "conditions": conditions})
}

/// controller_test.go's `gwFn`: spec listeners `(name, hostname)`, one
/// status entry per listener (name only), `conditions` at the Gateway level.
fn gw_fn(listeners: &[(&str, Option<&str>)], generation: i64, conditions: Vec<Value>) -> Value {
    let entries = listeners.iter().map(|(n, _)| entry(n, vec![])).collect();
    gateway(listeners, generation, conditions, entries)
}

fn gateway(
    listeners: &[(&str, Option<&str>)],
    generation: i64,
    conditions: Vec<Value>,
    entries: Vec<Value>,
) -> Value {
    let spec: Vec<Value> = listeners
        .iter()
        .map(|(n, h)| {
            let mut l = json!({"name": n, "port": 80, "protocol": "HTTP"});
            if let Some(h) = h {
                l["hostname"] = json!(h);
            }
            l
        })
        .collect();
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
           "metadata": {"name": GW, "namespace": NS, "generation": generation},
           "spec": {"gatewayClassName": "openshift-default", "listeners": spec},
           "status": {"conditions": conditions, "listeners": entries}})
}

/// The cluster DNS config with the given zones (`None`: field absent).
fn dns(public: Option<Value>, private: Option<Value>) -> Value {
    let mut spec = json!({"baseDomain": "example.tld"});
    if let Some(z) = public {
        spec["publicZone"] = z;
    }
    if let Some(z) = private {
        spec["privateZone"] = z;
    }
    json!({"apiVersion": "config.openshift.io/v1", "kind": "DNS",
           "metadata": {"name": "cluster"}, "spec": spec})
}

/// controller_test.go's `dnsConfigFn`.
fn dns_config_fn(add_zone: bool) -> Value {
    dns(
        add_zone.then(|| json!({"id": "somezone.on.some.provider"})),
        None,
    )
}

/// A Service labelled for the Gateway with uid `uid` and `ingress`.
fn svc(name: &str, uid: &str, ingress: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": name, "namespace": NS, "uid": uid,
                        "labels": {"gateway.istio.io/managed": "openshift.io-gateway-controller",
                                   "gateway.networking.k8s.io/gateway-name": GW}},
           "spec": {"type": "LoadBalancer"},
           "status": {"loadBalancer": {"ingress": ingress}}})
}

/// An Event about `kind` `name` (uid `uid`) from `component`; `n` keeps
/// names unique.
#[allow(clippy::too_many_arguments)]
fn event(
    n: u32,
    kind: &str,
    api_version: &str,
    name: &str,
    uid: &str,
    component: &str,
    message: &str,
    reason: &str,
) -> Value {
    json!({"apiVersion": "v1", "kind": "Event",
           "metadata": {"name": format!("event-{n}"), "namespace": NS},
           "involvedObject": {"kind": kind, "apiVersion": api_version, "namespace": NS,
                              "name": name, "uid": uid},
           "source": {"component": component}, "reason": reason, "message": message})
}

/// A DNSRecord labelled for the Gateway.
fn record(name: &str, dns_name: &str, policy: &str, zones: Option<Value>) -> Value {
    let mut r = json!({"apiVersion": "ingress.operator.openshift.io/v1", "kind": "DNSRecord",
           "metadata": {"name": name, "namespace": NS,
                        "labels": {"gateway.networking.k8s.io/gateway-name": GW}},
           "spec": {"dnsName": dns_name, "recordType": "CNAME", "recordTTL": 30,
                    "targets": ["lb.example.tld"], "dnsManagementPolicy": policy}});
    if let Some(z) = zones {
        r["status"] = json!({"zones": z});
    }
    r
}

/// One zone of a record's status with `(type, status)` conditions.
fn zone(dns_zone: Value, conditions: &[(&str, &str)]) -> Value {
    let conds: Vec<Value> = conditions
        .iter()
        .map(|(t, s)| json!({"type": t, "status": s}))
        .collect();
    json!({"dnsZone": dns_zone, "conditions": conds})
}

// ------------------------------------------------------------ expectations

/// `(type, status, reason, message, observedGeneration)`. An absent
/// observedGeneration reads as 0 (Go's zero value, which the operator's
/// tests expect on the foreign conditions they leave alone). In an
/// expectation, `None` is "the case's generation" ([`Case::observed`]), or
/// not compared when the case has none (status_test.go).
type Cond = (String, String, String, String, Option<i64>);

/// One of ours: observedGeneration from [`Case::observed`].
fn c(t: &str, status: &str, reason: &str, message: &str) -> Cond {
    (t.into(), status.into(), reason.into(), message.into(), None)
}

/// Another writer's condition as the operator's tests give it: no
/// observedGeneration, left as it is.
fn foreign_c(t: &str, status: &str, reason: &str, message: &str) -> Cond {
    (
        t.into(),
        status.into(),
        reason.into(),
        message.into(),
        Some(0),
    )
}

/// A condition of the agent's output as a [`Cond`].
fn read_cond(c: &Value) -> Cond {
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
    (
        s("type"),
        s("status"),
        s("reason"),
        s("message"),
        Some(c["observedGeneration"].as_i64().unwrap_or(0)),
    )
}

/// Whether `have` is `want`; a `None` generation in `want` is not compared.
fn cond_matches(have: &Cond, want: &Cond) -> bool {
    (&have.0, &have.1, &have.2, &have.3) == (&want.0, &want.1, &want.2, &want.3)
        && (want.4.is_none() || have.4 == want.4)
}

const NO_DNS_ZONES: (&str, &str, &str) = (
    "False",
    "NoDNSZones",
    "No DNS zones are defined in the cluster dns config.",
);
const RECORD_NOT_FOUND: (&str, &str, &str) = (
    "False",
    "RecordNotFound",
    "The wildcard record resource was not found.",
);
const UNMANAGED: (&str, &str, &str) = (
    "Unknown",
    "UnmanagedDNS",
    "The DNS management policy is set to Unmanaged.",
);
const NO_ZONES: (&str, &str, &str) = ("False", "NoZones", "The record isn't present in any zones.");
const NO_FAILED: (&str, &str, &str) = (
    "True",
    "NoFailedZones",
    "The record is provisioned in all reported zones.",
);

fn dns_ready(v: (&str, &str, &str)) -> Cond {
    c("DNSReady", v.0, v.1, v.2)
}

fn failed_zones(zones: &str) -> Cond {
    c(
        "DNSReady",
        "False",
        "FailedZones",
        &format!("The record failed to provision in some zones: {zones}"),
    )
}

fn unknown_zones(zones: &str) -> Cond {
    c(
        "DNSReady",
        "False",
        "UnknownZones",
        &format!("Provisioning of the record is in an unknown state in some zones: {zones}"),
    )
}

fn all_ready() -> Cond {
    c(
        "DNSReady",
        "True",
        "AllListenersReady",
        "All the listeners have DNS ready",
    )
}

fn some_not_ready() -> Cond {
    c(
        "DNSReady",
        "False",
        "SomeListenersNotReady",
        "One or more listeners have DNS provisioning issues",
    )
}

fn lb_missing() -> Cond {
    c(
        "LoadBalancerReady",
        "False",
        "ServiceNotFound",
        "The LoadBalancer service resource is missing",
    )
}

fn lb_provisioned() -> Cond {
    c(
        "LoadBalancerReady",
        "True",
        "LoadBalancerProvisioned",
        "The LoadBalancer service is provisioned",
    )
}

fn lb_pending() -> Cond {
    c(
        "LoadBalancerReady",
        "False",
        "LoadBalancerPending",
        "The LoadBalancer service is pending",
    )
}

fn lb_sync_failed(message: &str) -> Cond {
    c(
        "LoadBalancerReady",
        "False",
        "SyncLoadBalancerFailed",
        &format!(
            "The service-controller component is reporting SyncLoadBalancerFailed events like: {message}\nThe cloud-controller-manager logs may contain more details."
        ),
    )
}

fn accepted() -> Cond {
    foreign_c("Accepted", "True", "Accepted", "Resource accepted")
}

fn programmed() -> Cond {
    foreign_c(
        "Programmed",
        "True",
        "Programmed",
        "Resource programmed, service created",
    )
}

/// One replayed case.
struct Case {
    source: &'static str,
    name: &'static str,
    objects: Vec<Value>,
    /// Gateway-level conditions that must be there, as given.
    gateway: Vec<Cond>,
    /// Gateway-level condition types that must be absent.
    gateway_absent: Vec<&'static str>,
    /// Per listener, its complete condition list (any order).
    listeners: Vec<(&'static str, Vec<Cond>)>,
    /// The evaluation fails with an error containing this.
    error: Option<&'static str>,
    /// The observedGeneration the operator's test expects on ours.
    generation: Option<i64>,
}

impl Case {
    fn new(source: &'static str, name: &'static str, objects: Vec<Value>) -> Self {
        let mut all = vec![class()];
        all.extend(objects);
        Self {
            source,
            name,
            objects: all,
            gateway: vec![],
            gateway_absent: vec![],
            listeners: vec![],
            error: None,
            generation: None,
        }
    }

    /// The observedGeneration the operator's test expects on the conditions
    /// it computes.
    fn observed(mut self, generation: i64) -> Self {
        self.generation = Some(generation);
        self
    }

    /// `conds` with our conditions' generation filled in.
    fn expected(&self, conds: &[Cond]) -> Vec<Cond> {
        conds
            .iter()
            .map(|c| {
                (
                    c.0.clone(),
                    c.1.clone(),
                    c.2.clone(),
                    c.3.clone(),
                    c.4.or(self.generation),
                )
            })
            .collect()
    }

    fn gateway(mut self, conds: Vec<Cond>) -> Self {
        self.gateway = conds;
        self
    }

    fn absent(mut self, types: &[&'static str]) -> Self {
        self.gateway_absent = types.to_vec();
        self
    }

    fn listener(mut self, name: &'static str, conds: Vec<Cond>) -> Self {
        self.listeners.push((name, conds));
        self
    }

    fn error(mut self, e: &'static str) -> Self {
        self.error = Some(e);
        self
    }

    /// Runs the case; returns what did not hold.
    fn check(&self) -> Vec<String> {
        let label = format!("{} / {}", self.source, self.name);
        let list = json!({"apiVersion": "v1", "kind": "List", "items": self.objects});
        let objects = parse_str(&label, &list.to_string())
            .unwrap_or_else(|e| panic!("{label}: objects do not parse: {e}"));
        let snapshot =
            Snapshot::from_objects(&objects).unwrap_or_else(|e| panic!("{label}: snapshot: {e}"));
        let now: Timestamp = "2026-01-12T10:00:00Z".parse().unwrap();
        let result = evaluate(&snapshot, &Options::default(), now);
        let mut failures = Vec::new();
        let evaluations = match (result, self.error) {
            (Err(e), Some(want)) => {
                if !e.to_string().contains(want) {
                    failures.push(format!("{label}: error {e:?} lacks {want:?}"));
                }
                return failures;
            }
            (Err(e), None) => return vec![format!("{label}: unexpected error {e}")],
            (Ok(_), Some(want)) => return vec![format!("{label}: no error, wanted {want:?}")],
            (Ok(e), None) => e,
        };
        if self.gateway.is_empty() && self.listeners.is_empty() && self.gateway_absent.is_empty() {
            return failures;
        }
        let expects_ours = self
            .gateway
            .iter()
            .chain(self.listeners.iter().flat_map(|(_, l)| l))
            .any(|c| c.4.is_none());
        if self.source != STATUS_TEST && expects_ours && self.generation.is_none() {
            failures.push(format!(
                "{label}: the operator's test asserts observedGeneration; give it with .observed()"
            ));
        }
        let Some(e) = evaluations.first() else {
            return vec![format!("{label}: the Gateway was not evaluated")];
        };
        let status = serde_json::to_value(&e.status).unwrap();
        let conds = |v: &Value| -> Vec<Cond> {
            v.as_array().into_iter().flatten().map(read_cond).collect()
        };
        let gw_conds = conds(&status["conditions"]);
        for want in &self.expected(&self.gateway) {
            match gw_conds.iter().find(|have| have.0 == want.0) {
                Some(have) if cond_matches(have, want) => {}
                Some(have) => {
                    failures.push(format!("{label}: {} is {have:?}, want {want:?}", want.0))
                }
                None => failures.push(format!("{label}: {} missing, want {want:?}", want.0)),
            }
        }
        for t in &self.gateway_absent {
            if let Some(have) = gw_conds.iter().find(|have| have.0 == *t) {
                failures.push(format!("{label}: {t} should be absent, is {have:?}"));
            }
        }
        for (name, want) in &self.listeners {
            let entry = status["listeners"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|l| l["name"] == *name);
            let Some(entry) = entry else {
                failures.push(format!("{label}: no status entry for listener {name}"));
                continue;
            };
            let mut have = conds(&entry["conditions"]);
            let mut want = self.expected(want);
            have.sort();
            want.sort();
            if have.len() != want.len() || !have.iter().zip(&want).all(|(h, w)| cond_matches(h, w))
            {
                failures.push(format!(
                    "{label}: listener {name} conditions\n  have {have:?}\n  want {want:?}"
                ));
            }
        }
        if status.to_string().contains("DNSManaged") {
            failures.push(format!("{label}: DNSManaged written"));
        }
        failures
    }
}

fn run(cases: Vec<Case>) {
    let n = cases.len();
    let failures: Vec<String> = cases.iter().flat_map(Case::check).collect();
    assert!(
        failures.is_empty(),
        "{} of {n} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ------------------------------------------------------ controller_test.go

fn gwapi_listener(name: &'static str) -> (&'static str, Option<&'static str>) {
    (name, Some("gwapi.example.tld"))
}

fn provisioned_svc() -> Value {
    svc(
        "openshift-ingress-lb",
        "10",
        json!([{"hostname": "something.somewhere.somehow"}]),
    )
}

fn common_zone() -> Value {
    json!({"id": "somezone.on.some.provider"})
}

/// The record `openshift-ingress-dns` for gwapi.example.tld with `zones`.
fn gwapi_record(policy: &str, zones: Option<Value>) -> Value {
    record("openshift-ingress-dns", "gwapi.example.tld", policy, zones)
}

/// Zones of the "valid state" cases: ours Published True (and a Failed
/// False beside it), plus a zone the cluster does not manage.
fn valid_zones() -> Value {
    json!([
        zone(common_zone(), &[("Published", "True"), ("Failed", "False")]),
        zone(
            json!({"id": "not.one.that.we.manage"}),
            &[("Published", "True")]
        ),
    ])
}

fn controller_cases() -> Vec<Case> {
    let t = CONTROLLER_TEST;
    vec![
        // The operator reconciles a request for a Gateway that is gone and
        // returns no error; the agent evaluates an empty cluster: nothing, no error.
        Case::new(t, "gateway not found, should not return any error", vec![]),
        // The operator returns the error and leaves the conditions as they
        // were; the agent's evaluation fails the same way (nothing written).
        Case::new(
            t,
            "missing dns config",
            vec![
                gw_fn(&[], 1, example_conditions()),
                svc("example-gateway", "10", json!([{"hostname": "gwapi.example.tld"}])),
            ],
        )
        .error("dnses.config.openshift.io/cluster"),
        Case::new(
            t,
            "missing loadbalancer and dnsrecord should add the right condition about missing both resources",
            vec![
                dns_config_fn(true),
                gw_fn(&[("listener1", Some("norecord.example.tld"))], 3, example_conditions()),
            ],
        )
        .observed(3)
        .gateway(vec![lb_missing(), some_not_ready()])
        .listener("listener1", vec![dns_ready(RECORD_NOT_FOUND)]),
        Case::new(
            t,
            "missing dnsconfig zone should add the right condition",
            vec![
                dns_config_fn(false),
                gw_fn(&[("listener1", Some("noconfig.example.tld"))], 4, vec![]),
                svc("openshift-ingress-lb", "10", json!([{"ip": "10.10.10.10"}])),
            ],
        )
        .observed(4)
        .gateway(vec![lb_provisioned(), some_not_ready()])
        .listener("listener1", vec![dns_ready(NO_DNS_ZONES)]),
        Case::new(
            t,
            "load balancer with missing ingress status should be reflected on gateway condition",
            vec![
                dns_config_fn(true),
                gw_fn(&[("listener1", Some("noconfig.example.tld"))], 5, example_conditions()),
                svc("openshift-ingress-lb", "10", json!([])),
            ],
        )
        .observed(5)
        .gateway(vec![lb_pending(), some_not_ready()])
        .listener("listener1", vec![dns_ready(RECORD_NOT_FOUND)]),
        Case::new(
            t,
            "load balancer with missing ingress status and extra event should be reflected on gateway condition",
            vec![
                dns_config_fn(true),
                gw_fn(&[], 6, example_conditions()),
                svc("openshift-ingress-lb", "10", json!([])),
                event(1, "Service", "v1", "openshift-ingress-lb", "10", "service-controller", "unavailable", "SyncLoadBalancerFailed"),
            ],
        )
        .observed(6)
        .gateway(vec![accepted(), programmed(), lb_sync_failed("unavailable")]),
        Case::new(
            t,
            "load balancer with valid ingress status should be reflected on gateway condition",
            vec![
                dns_config_fn(true),
                gw_fn(&[], 7, example_conditions()),
                svc("openshift-ingress-lb", "10", json!([{"hostname": "gwapi.example.tld"}])),
            ],
        )
        .observed(7)
        .gateway(vec![accepted(), programmed(), lb_provisioned()]),
        Case::new(
            t,
            "load balancer valid, dns unmanaged should be properly reflected on conditions",
            vec![
                dns_config_fn(true),
                gw_fn(&[gwapi_listener("listener1")], 8, example_conditions()),
                provisioned_svc(),
                gwapi_record("Unmanaged", None),
            ],
        )
        .observed(8)
        .gateway(vec![accepted(), programmed(), lb_provisioned(), some_not_ready()])
        .listener("listener1", vec![dns_ready(UNMANAGED)]),
        Case::new(
            t,
            "load balancer valid, dns managed but no zones should reflect on conditions",
            vec![
                dns_config_fn(true),
                gw_fn(&[gwapi_listener("listener1")], 9, example_conditions()),
                provisioned_svc(),
                gwapi_record("Managed", Some(json!([]))),
            ],
        )
        .observed(9)
        .gateway(vec![accepted(), programmed(), lb_provisioned(), some_not_ready()])
        .listener("listener1", vec![dns_ready(NO_ZONES)]),
        Case::new(
            t,
            "load balancer valid, dns managed with one failed zone should reflect on conditions",
            vec![
                dns_config_fn(true),
                gw_fn(&[gwapi_listener("listener1")], 10, example_conditions()),
                provisioned_svc(),
                gwapi_record("Managed", Some(json!([zone(common_zone(), &[("Published", "False")])]))),
            ],
        )
        .observed(10)
        .gateway(vec![accepted(), programmed(), lb_provisioned(), some_not_ready()])
        .listener("listener1", vec![failed_zones("[{somezone.on.some.provider map[]}]")]),
        Case::new(
            t,
            "load balancer valid, dns managed with one zone in unknown state should reflect on conditions",
            vec![
                dns_config_fn(true),
                gw_fn(&[gwapi_listener("listener1")], 11, example_conditions()),
                provisioned_svc(),
                gwapi_record("Managed", Some(json!([zone(common_zone(), &[("Published", "Unknown")])]))),
            ],
        )
        .observed(11)
        .gateway(vec![lb_provisioned(), some_not_ready()])
        .listener("listener1", vec![unknown_zones("[{somezone.on.some.provider map[]}]")]),
        Case::new(
            t,
            "load balancer valid, dns managed with one zone in valid state should reflect on conditions",
            vec![
                dns_config_fn(true),
                gw_fn(&[gwapi_listener("listener1")], 12, example_conditions()),
                provisioned_svc(),
                gwapi_record("Managed", Some(valid_zones())),
            ],
        )
        .observed(12)
        .gateway(vec![lb_provisioned(), all_ready()])
        .listener("listener1", vec![dns_ready(NO_FAILED)]),
        Case::new(
            t,
            "load balancer valid, dns managed with two listeners, one dns record is valid in valid state and the other not should reflect the right condition",
            vec![
                dns_config_fn(true),
                gw_fn(
                    &[gwapi_listener("listener1"), ("listener2", Some("gwapifailed.example.tld"))],
                    13,
                    example_conditions(),
                ),
                provisioned_svc(),
                gwapi_record("Managed", Some(valid_zones())),
            ],
        )
        .observed(13)
        .gateway(vec![lb_provisioned(), some_not_ready()])
        .listener("listener1", vec![dns_ready(NO_FAILED)])
        .listener("listener2", vec![dns_ready(RECORD_NOT_FOUND)]),
        Case::new(
            t,
            "load balancer valid, dns managed with two listeners with 'root' dot suffix and listeners with and without root suffix must set the right conditions",
            vec![
                dns_config_fn(true),
                gw_fn(
                    &[gwapi_listener("listener1"), ("listener2", Some("gwapi2.example.tld."))],
                    14,
                    example_conditions(),
                ),
                provisioned_svc(),
                record(
                    "openshift-ingress-dns",
                    "gwapi.example.tld.",
                    "Managed",
                    Some(json!([
                        zone(common_zone(), &[("Published", "True"), ("Failed", "False")]),
                        zone(common_zone(), &[("Published", "True"), ("Failed", "False")]),
                    ])),
                ),
                record(
                    "openshift-ingress-dns-2",
                    "gwapi2.example.tld",
                    "Managed",
                    Some(json!([
                        zone(common_zone(), &[("Published", "True"), ("Failed", "False")]),
                        zone(common_zone(), &[("Published", "True"), ("Failed", "False")]),
                    ])),
                ),
            ],
        )
        .observed(14)
        .gateway(vec![lb_provisioned(), all_ready()])
        .listener("listener1", vec![dns_ready(NO_FAILED)])
        .listener("listener2", vec![dns_ready(NO_FAILED)]),
    ]
}

#[test]
fn controller_test_reconcile() {
    run(controller_cases());
}

/// TestReconcileTransition: the transition time is set on the first
/// evaluation, kept by a second one that changes nothing, and moved when the
/// load balancer is provisioned.
#[test]
fn controller_test_reconcile_transition() {
    let objects = |svc_ingress: Value, status: Option<Value>| {
        let mut gw = gw_fn(
            &[("listener1", Some("test.example.tld"))],
            15,
            example_conditions(),
        );
        if let Some(s) = status {
            gw["status"] = s;
        }
        let list = json!({"apiVersion": "v1", "kind": "List", "items": [
            class(), dns_config_fn(true), gw, svc("openshift-ingress-lb", "10", svc_ingress)]});
        let objs = parse_str("transition", &list.to_string()).unwrap();
        Snapshot::from_objects(&objs).unwrap()
    };
    let lb = |status: &gateway_api::apis::standard::gateways::GatewayStatus| {
        status
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == "LoadBalancerReady")
            .cloned()
            .unwrap()
    };
    let t1: Timestamp = "2026-01-12T10:00:00Z".parse().unwrap();
    let t2: Timestamp = "2026-01-12T10:00:05Z".parse().unwrap();
    let t3: Timestamp = "2026-01-12T10:00:10Z".parse().unwrap();

    // "initial reconciliation should add conditions with timestamps"
    let first = evaluate(&objects(json!([]), None), &Options::default(), t1)
        .unwrap()
        .remove(0);
    let c1 = lb(&first.status);
    assert_eq!(
        (c1.status.as_str(), c1.reason.as_str(), c1.message.as_str()),
        (
            "False",
            "LoadBalancerPending",
            "The LoadBalancer service is pending"
        )
    );
    assert_eq!(c1.observed_generation, Some(15));
    assert_eq!(c1.last_transition_time.0, t1);
    let written = serde_json::to_value(&first.status).unwrap();

    // "calling the reconciliation again should not change the transition time"
    let second = evaluate(
        &objects(json!([]), Some(written.clone())),
        &Options::default(),
        t2,
    )
    .unwrap()
    .remove(0);
    assert_eq!(lb(&second.status), c1);
    assert!(!second.needs_write());

    // "changing the loadbalancer correctly and calling the reconciliation
    // should change the condition and transition time"
    let third = evaluate(
        &objects(
            json!([{"hostname": "something.somewhere.somehow"}]),
            Some(written),
        ),
        &Options::default(),
        t3,
    )
    .unwrap()
    .remove(0);
    let c3 = lb(&third.status);
    assert_eq!(
        (c3.status.as_str(), c3.reason.as_str(), c3.message.as_str()),
        (
            "True",
            "LoadBalancerProvisioned",
            "The LoadBalancer service is provisioned"
        )
    );
    assert_eq!(c3.observed_generation, Some(15));
    assert!(c3.last_transition_time.0 > c1.last_transition_time.0);
}

// ------------------------------------------------------ gatewayapi_test.go

/// `listenerToHostname` of gatewayapi_test.go, as the Gateway's spec.
const LISTENERS: &[(&str, Option<&str>)] = &[
    ("wildcard", Some("*.example.com")),
    ("unexistent", Some("unexistent.example.com")),
    ("unmanaged", Some("unmanaged.example.com")),
    ("nozones", Some("nozones.example.com")),
    ("noname", Some("noname.example.com")),
    ("failedzone", Some("failedzone.example.com")),
    ("unknownzone", Some("unknownzone.example.com")),
];

/// `hostnameToDNSRecord` of gatewayapi_test.go as DNSRecords. The
/// `noname.example.com` entry is a record without a name, which the
/// operator treats as none; an object without a name cannot exist, so there
/// is no record for that hostname (the same result: RecordNotFound).
fn gwapi_records() -> Vec<Value> {
    let zone_xxxx = |status: &str| json!([zone(json!({"id": "xxxx"}), &[("Published", status)])]);
    vec![
        record(
            "wildcard",
            "*.example.com",
            "Managed",
            Some(zone_xxxx("True")),
        ),
        record("unmanaged", "unmanaged.example.com", "Unmanaged", None),
        record("nozones", "nozones.example.com", "Managed", Some(json!([]))),
        record(
            "failedzone",
            "failedzone.example.com",
            "Managed",
            Some(zone_xxxx("False")),
        ),
        record(
            "unknownzone",
            "unknownzone.example.com",
            "Managed",
            Some(zone_xxxx("Unknown")),
        ),
    ]
}

/// `defaultDNSConfig`: public zone `xxxx`.
fn default_dns() -> Value {
    dns(Some(json!({"id": "xxxx"})), None)
}

/// A gatewayapi_test.go DNS case: the spec listeners of [`LISTENERS`], the
/// given status entries and Gateway conditions, the records, and `dns`.
fn dns_case(
    name: &'static str,
    generation: i64,
    dns_cfg: Option<Value>,
    gw_conds: Vec<Value>,
    entries: Vec<Value>,
) -> Case {
    let mut objects = vec![
        gateway(LISTENERS, generation, gw_conds, entries),
        svc("gw-lb", "1", json!([{"hostname": "lb.example.com"}])),
    ];
    objects.extend(gwapi_records());
    objects.extend(dns_cfg);
    Case::new(GATEWAYAPI_TEST, name, objects).observed(generation)
}

fn gatewayapi_dns_cases() -> Vec<Case> {
    let some = |n: u32| foreign(&format!("somecond{n}"), &format!("somereason{n}"));
    let some_c = |n: u32| {
        foreign_c(
            &format!("somecond{n}"),
            "True",
            &format!("somereason{n}"),
            "",
        )
    };
    let somecond = || foreign("somecond", "somereason");
    let somecond_c = || foreign_c("somecond", "True", "somereason", "");
    vec![
        // A nil listenerToHostname map: no cluster-object form (every
        // Gateway has a spec). The nearest: a Gateway whose listeners have no
        // hostname, whose listener status is then left alone.
        Case::new(
            GATEWAYAPI_TEST,
            "a null listenerToHostname map should not mutate the listeners status nor Gateway status",
            vec![
                default_dns(),
                gateway(&[("wildcard", None)], 1, vec![], vec![entry("wildcard", vec![somecond()])]),
            ],
        )
        .observed(1)
        .absent(&["DNSReady"])
        .listener("wildcard", vec![somecond_c()]),
        // A nil DNS config is the operator's "not found" in this function;
        // the agent refuses a missing one (spec: an error, not a guess), so
        // the object form is a DNS config without zones, which the operator
        // treats the same way (NoDNSZones).
        dns_case(
            "a null DNSConfig should return DNSReady=False and NoDNSZones",
            2,
            Some(dns(None, None)),
            vec![],
            vec![entry("wildcard", vec![somecond()])],
        )
        .gateway(vec![some_not_ready()])
        .listener("wildcard", vec![somecond_c(), dns_ready(NO_DNS_ZONES)]),
        dns_case(
            "a null DNSRecord (unexistent) should return DNSReady=False",
            3,
            Some(default_dns()),
            vec![],
            vec![entry("unexistent", vec![some(2)])],
        )
        .gateway(vec![some_not_ready()])
        .listener("unexistent", vec![some_c(2), dns_ready(RECORD_NOT_FOUND)]),
        dns_case(
            "a null DNSRecord (no name) should return DNSReady=False",
            4,
            Some(default_dns()),
            vec![],
            vec![entry("noname", vec![some(3)])],
        )
        .gateway(vec![some_not_ready()])
        .listener("noname", vec![some_c(3), dns_ready(RECORD_NOT_FOUND)]),
        dns_case(
            "an unmanaged dnsrecord should return DNSReady=False with Reason=UnmanagedDNS",
            5,
            Some(default_dns()),
            vec![],
            vec![entry("unmanaged", vec![some(3)])],
        )
        .gateway(vec![some_not_ready()])
        .listener("unmanaged", vec![some_c(3), dns_ready(UNMANAGED)]),
        dns_case(
            "a dnsrecord without zones should return DNSReady=False with Reason=NoZones",
            5,
            Some(default_dns()),
            vec![],
            vec![entry("unmanaged", vec![some(3)]), entry("nozones", vec![some(4)])],
        )
        .gateway(vec![some_not_ready()])
        .listener("unmanaged", vec![some_c(3), dns_ready(UNMANAGED)])
        .listener("nozones", vec![some_c(4), dns_ready(NO_ZONES)]),
        dns_case(
            "a non-matching listener hostname should not mutate the listener status or gateway status",
            1,
            Some(default_dns()),
            vec![],
            vec![entry("noideawhatthisis", vec![somecond()])],
        )
        .absent(&["DNSReady"])
        .listener("noideawhatthisis", vec![somecond_c()]),
        dns_case(
            "no DNSReady condition on listener level must remove the DNSReady from the gateway level",
            1,
            Some(default_dns()),
            vec![json!({"type": "DNSReady", "status": "True", "reason": "NotReady", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"})],
            vec![entry("noideawhatisthis", vec![somecond()])],
        )
        .absent(&["DNSReady"])
        .listener("noideawhatisthis", vec![somecond_c()]),
        dns_case(
            "a dnsrecord with failed zones should return DNSReady=False with Reason=FailedZones",
            6,
            Some(default_dns()),
            vec![],
            vec![entry("nozones", vec![some(6)]), entry("failedzone", vec![some(6)])],
        )
        .gateway(vec![some_not_ready()])
        .listener("nozones", vec![some_c(6), dns_ready(NO_ZONES)])
        .listener("failedzone", vec![some_c(6), failed_zones("[{xxxx map[]}]")]),
        dns_case(
            "a dnsrecord with unknown zones should return DNSReady=False with Reason=UnknownZones",
            7,
            Some(default_dns()),
            vec![],
            vec![entry("unknownzone", vec![some(7)])],
        )
        .gateway(vec![some_not_ready()])
        .listener("unknownzone", vec![some_c(7), unknown_zones("[{xxxx map[]}]")]),
        dns_case(
            "a dnsrecord with valid zones should return DNSReady=True with Reason=NoFailedZones",
            8,
            Some(default_dns()),
            vec![],
            vec![entry("unknownzone", vec![some(8)]), entry("wildcard", vec![some(8)])],
        )
        .gateway(vec![some_not_ready()])
        .listener("unknownzone", vec![some_c(8), unknown_zones("[{xxxx map[]}]")])
        .listener("wildcard", vec![some_c(8), dns_ready(NO_FAILED)]),
        dns_case(
            "a dnsrecord that has DNS status should have the condition removed in case listener does not have DNSRecord anymore",
            9,
            Some(default_dns()),
            vec![],
            vec![
                entry(
                    "goawaycondition",
                    vec![
                        some(9),
                        json!({"type": "DNSReady", "status": "True", "reason": "NoFailedZones",
                               "message": "The record is provisioned in all reported zones.",
                               "observedGeneration": 9, "lastTransitionTime": "2026-01-01T00:00:00Z"}),
                    ],
                ),
                entry("wildcard", vec![some(9)]),
            ],
        )
        .gateway(vec![all_ready()])
        .listener("goawaycondition", vec![some_c(9)])
        .listener("wildcard", vec![some_c(9), dns_ready(NO_FAILED)]),
    ]
}

#[test]
fn gatewayapi_test_listener_dns_status() {
    run(gatewayapi_dns_cases());
}

/// A Gateway without listeners for the load balancer cases.
fn lb_case(source: &'static str, name: &'static str, extra: Vec<Value>) -> Case {
    let mut objects = vec![default_dns(), gw_fn(&[], 1, vec![])];
    objects.extend(extra);
    Case::new(source, name, objects)
}

fn gatewayapi_lb_cases() -> Vec<Case> {
    let t = GATEWAYAPI_TEST;
    vec![
        lb_case(t, "null service should return LoadBalancerReady=False with reason=ServiceNotFound", vec![])
            .observed(1)
            .gateway(vec![lb_missing()]),
        // A Service without a name cannot exist; the operator treats one as
        // no Service, which is the case above.
        lb_case(t, "nameless service should return LoadBalancerReady=False with reason=ServiceNotFound", vec![])
            .observed(1)
            .gateway(vec![lb_missing()]),
        lb_case(
            t,
            "service provisioned and with status should return LoadBalancerReady=True with reason=LoadBalancerProvisioned",
            vec![svc("somesvc", "1", json!([{"hostname": "xpto.tld"}]))],
        )
        .observed(1)
        .gateway(vec![lb_provisioned()]),
        lb_case(
            t,
            "service with missing status and missing events should return LoadBalancerReady=False with reason=LoadBalancerPending",
            vec![svc("somesvc", "1", json!([]))],
        )
        .observed(1)
        .gateway(vec![lb_pending()]),
        // The operator's Service is in namespace `somens`; here it is the
        // Gateway's namespace (the agent looks there, as the controller does).
        // The operator test's event has no involvedObject.apiVersion (its
        // controller lists events by apiVersion v1); real events carry it.
        lb_case(
            t,
            "service with missing status and related events should return LoadBalancerReady=False with reason=SyncLoadBalancerFailed",
            vec![
                svc("someservice", "2", json!([])),
                event(1, "Service", "v1", "someservice", "2", "service-controller", "failed", "SyncLoadBalancerFailed"),
            ],
        )
        .observed(1)
        .gateway(vec![lb_sync_failed("failed")]),
    ]
}

#[test]
fn gatewayapi_test_load_balancer_status() {
    run(gatewayapi_lb_cases());
}

// ------------------------------------------------------ status_test.go

const TOO_MANY: &str = "failed to ensure load balancer for service openshift-ingress/router-default: TooManyLoadBalancers: Exceeded quota of account";

fn status_lb_cases() -> Vec<Case> {
    let t = STATUS_TEST;
    let scheduler = json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "scheduled", "namespace": NS},
        "involvedObject": {"kind": "Pod", "name": "router-default-1", "namespace": NS},
        "source": {"component": "default-scheduler"}, "reason": "Scheduled", "type": "Normal"});
    // status_test.go compares reasons only (messages ignored); the messages
    // asserted here are the Gateway API ones of gatewayapi_test.go.
    vec![
        lb_case(
            t,
            "lb provisioned",
            vec![svc(
                "default",
                "1",
                json!([{"hostname": "lb.cloudprovider.example.com"}]),
            )],
        )
        .gateway(vec![lb_provisioned()]),
        lb_case(
            t,
            "no events for current lb",
            vec![
                svc("default", "1", json!([])),
                scheduler.clone(),
                event(
                    2,
                    "Service",
                    "v1",
                    "secondary",
                    "2",
                    "service-controller",
                    TOO_MANY,
                    "SyncLoadBalancerFailed",
                ),
                event(
                    3,
                    "Service",
                    "v1",
                    "default",
                    "3",
                    "service-controller",
                    TOO_MANY,
                    "SyncLoadBalancerFailed",
                ),
            ],
        )
        .gateway(vec![lb_pending()]),
        lb_case(
            t,
            "lb pending, create failed events",
            vec![
                svc("default", "1", json!([])),
                scheduler,
                event(
                    2,
                    "Service",
                    "v1",
                    "secondary",
                    "3",
                    "service-controller",
                    TOO_MANY,
                    "SyncLoadBalancerFailed",
                ),
                event(
                    3,
                    "Service",
                    "v1",
                    "default",
                    "1",
                    "service-controller",
                    TOO_MANY,
                    "SyncLoadBalancerFailed",
                ),
            ],
        )
        .gateway(vec![lb_sync_failed(TOO_MANY)]),
        // "unmanaged" (an IngressController with HostNetwork publishing):
        // IngressController only, no Gateway form.
        lb_case(t, "lb service missing", vec![]).gateway(vec![lb_missing()]),
    ]
}

#[test]
fn status_test_load_balancer_status() {
    run(status_lb_cases());
}

/// A one-listener Gateway for the status_test.go DNS cases: `record` (if any)
/// for its hostname and the DNS config with `public`/`private` zones.
fn status_dns_case(
    name: &'static str,
    zones: (Option<Value>, Option<Value>),
    rec: Option<Value>,
    want: Cond,
) -> Case {
    let host = "apps.basedomain.com";
    let mut objects = vec![
        dns(zones.0, zones.1),
        gw_fn(&[("l", Some(host))], 1, vec![]),
        svc("lb", "1", json!([{"hostname": "lb.example.com"}])),
    ];
    objects.extend(rec);
    let gateway_level = if want.1 == "True" {
        all_ready()
    } else {
        some_not_ready()
    };
    Case::new(STATUS_TEST, name, objects)
        .gateway(vec![gateway_level])
        .listener("l", vec![want])
}

fn status_record(policy: &str, zones: Option<Value>) -> Value {
    record("r", "apps.basedomain.com", policy, zones)
}

fn status_dns_cases() -> Vec<Case> {
    let empty_and_zone1 = || (Some(json!({})), Some(json!({"id": "zone1"})));
    let both_empty = || (Some(json!({})), Some(json!({})));
    let zone1 = |conds: &[(&str, &str)]| Some(json!([zone(json!({"id": "zone1"}), conds)]));
    // Messages are ignored by status_test.go; the ones asserted here are the
    // operator's strings for these reasons (see gatewayapi_test.go).
    vec![
        // DNSManaged is not written on Gateways; for a Gateway the same
        // config gives DNSReady NoDNSZones (gatewayAPI branch of ComputeDNSStatus).
        status_dns_case(
            "DNSManaged false due to NoDNSZones",
            (None, None),
            None,
            dns_ready(NO_DNS_ZONES),
        ),
        // "DNSManaged false due to UnsupportedEndpointPublishingStrategy":
        // IngressController only, no Gateway form.
        // "DNSManaged false due to UnmanagedLoadBalancerDNS": the
        // IngressController part has no Gateway form; its record part (an
        // Unmanaged record) gives DNSReady Unknown/UnmanagedDNS:
        status_dns_case(
            "DNSManaged false due to UnmanagedLoadBalancerDNS (record part)",
            both_empty(),
            Some(status_record("Unmanaged", None)),
            dns_ready(UNMANAGED),
        ),
        status_dns_case(
            "DNSManaged true due to dnsManagementPolicy=Managed, and DNSReady is true due to NoFailedZones",
            empty_and_zone1(),
            Some(status_record("Managed", zone1(&[("Published", "True")]))),
            dns_ready(NO_FAILED),
        ),
        status_dns_case(
            "DNSManaged true due to nil status.endpointPublishingStrategy.loadBalancer, and DNSReady is true due to NoFailedZones",
            both_empty(),
            Some(status_record("Managed", zone1(&[("Published", "True")]))),
            dns_ready(NO_FAILED),
        ),
        status_dns_case(
            "DNSManaged true but DNSReady is false due to RecordNotFound",
            both_empty(),
            None,
            dns_ready(RECORD_NOT_FOUND),
        ),
        status_dns_case(
            "DNSManaged true but DNSReady is false due to NoZones",
            both_empty(),
            Some(status_record("Managed", Some(json!([])))),
            dns_ready(NO_ZONES),
        ),
        status_dns_case(
            "DNSManaged true but DNSReady is Unknown due to UnmanagedDNS",
            both_empty(),
            Some(status_record("Unmanaged", None)),
            dns_ready(UNMANAGED),
        ),
        status_dns_case(
            "DNSManaged true and DNSReady is false due to FailedZones",
            empty_and_zone1(),
            Some(status_record("Managed", zone1(&[("Published", "False")]))),
            failed_zones("[{zone1 map[]}]"),
        ),
        status_dns_case(
            "DNSManaged true and DNSReady is true with even with previously FailedZones",
            empty_and_zone1(),
            Some(status_record(
                "Managed",
                zone1(&[("Failed", "True"), ("Published", "True")]),
            )),
            dns_ready(NO_FAILED),
        ),
        status_dns_case(
            "DNSManaged true and DNSReady is false due to unknown condition",
            empty_and_zone1(),
            Some(status_record("Managed", zone1(&[("Published", "Unknown")]))),
            unknown_zones("[{zone1 map[]}]"),
        ),
        status_dns_case(
            "DNSManaged true and DNSReady is false due to failed and unknown conditions",
            empty_and_zone1(),
            Some(status_record(
                "Managed",
                zone1(&[("Published", "Unknown"), ("Published", "False")]),
            )),
            failed_zones("[{zone1 map[]}]"),
        ),
    ]
}

#[test]
fn status_test_dns_status() {
    run(status_dns_cases());
}

// ------------------------------------------------------ the real binary

/// A few cases through `gwhub-agent compute` itself, as users run it: the
/// objects written to a file, the output parsed back.
#[test]
fn cases_through_gwhub_agent_compute() {
    let dir = std::env::temp_dir().join(format!("gwhub-operator-reference-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cases = controller_cases();
    cases.retain(|c| {
        c.name
            .starts_with("load balancer valid, dns managed with one failed zone")
            || c.name
                .starts_with("load balancer with missing ingress status and extra event")
            || c.name
                .starts_with("load balancer valid, dns managed with two listeners with 'root' dot")
    });
    cases.extend(
        gatewayapi_dns_cases()
            .into_iter()
            .filter(|c| c.name.starts_with("a dnsrecord that has DNS status")),
    );
    assert_eq!(cases.len(), 4);
    for (i, case) in cases.iter().enumerate() {
        let file = dir.join(format!("case-{i}.json"));
        std::fs::write(
            &file,
            serde_json::to_string_pretty(
                &json!({"apiVersion": "v1", "kind": "List", "items": case.objects}),
            )
            .unwrap(),
        )
        .unwrap();
        let out = std::process::Command::new(gwhub_test_kit::workspace_bin::workspace_binary(
            "gwhub",
            "gwhub-agent",
            "GWHUB_AGENT_BIN",
        ))
        .args([
            "compute",
            "-o",
            "json",
            "--now",
            "2026-01-12T10:00:00Z",
            "-f",
        ])
        .arg(&file)
        .output()
        .unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            case.name,
            String::from_utf8_lossy(&out.stderr)
        );
        let list: Value = serde_json::from_slice(&out.stdout).unwrap();
        let status = &list["items"][0]["status"];
        let find = |conds: &Value, t: &str| -> Option<Cond> {
            conds
                .as_array()?
                .iter()
                .find(|c| c["type"] == t)
                .map(read_cond)
        };
        for want in &case.expected(&case.gateway) {
            assert_eq!(
                find(&status["conditions"], &want.0).as_ref(),
                Some(want),
                "{}",
                case.name
            );
        }
        for (name, want) in &case.listeners {
            let entry = status["listeners"]
                .as_array()
                .unwrap()
                .iter()
                .find(|l| l["name"] == *name)
                .unwrap();
            for w in &case.expected(want) {
                assert_eq!(
                    find(&entry["conditions"], &w.0).as_ref(),
                    Some(w),
                    "{} {name}",
                    case.name
                );
            }
        }
        assert!(!String::from_utf8_lossy(&out.stdout).contains("DNSManaged"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
