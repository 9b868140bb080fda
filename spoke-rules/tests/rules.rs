//! Table tests: every rule of spec §2, in order, and the edge cases the
//! OpenShift design's test plan names.

use crate::support;

use gwhub_spoke_rules::conditions::load_balancer::load_balancer_ready;
use gwhub_spoke_rules::engine::{EngineError, evaluate};
use gwhub_spoke_rules::snapshot::from_events_v1;
use gwhub_spoke_rules::{Options, Snapshot};
use serde_json::json;
use support::*;

const HOST: &str = "*.apps.example.com";

/// `(status, reason, message)` of a condition, if present.
type Srm = Option<(String, String, String)>;

fn ready(status: &str, reason: &str, message: &str) -> Srm {
    Some((status.into(), reason.into(), message.into()))
}

/// `(Gateway DNSReady, listener DNSReady)` of a one-listener Gateway with
/// `dns` and `records`.
fn dns_ready_for(
    dns_cfg: gwhub_spoke_rules::openshift::DNS,
    records: Vec<gwhub_spoke_rules::openshift::DNSRecord>,
) -> (Srm, Srm) {
    let mut snap = snapshot(gateway(&[("l", Some(HOST))], 1, json!({})));
    snap.dns = Some(dns_cfg);
    snap.dns_records = records;
    let e = eval_one(&snap);
    let conds = listener_conds(&e.status, "l");
    assert!(find(conds, "DNSManaged").is_none());
    (
        srm(find(
            e.status.conditions.as_deref().unwrap_or_default(),
            "DNSReady",
        )),
        srm(find(conds, "DNSReady")),
    )
}

fn both() -> gwhub_spoke_rules::openshift::DNS {
    dns(Some(public()), Some(private()))
}

fn ok_record(dns_name: &str) -> gwhub_spoke_rules::openshift::DNSRecord {
    record(
        "r",
        dns_name,
        "Managed",
        vec![zone(public(), Some(("True", "ok")))],
    )
}

#[test]
fn dns_rules_in_order() {
    let all_ready = ready(
        "True",
        "AllListenersReady",
        "All the listeners have DNS ready",
    );
    let not_ready = ready(
        "False",
        "SomeListenersNotReady",
        "One or more listeners have DNS provisioning issues",
    );
    let no_zones_cfg = ready(
        "False",
        "NoDNSZones",
        "No DNS zones are defined in the cluster dns config.",
    );
    type Case = (
        &'static str,
        gwhub_spoke_rules::openshift::DNS,
        Vec<gwhub_spoke_rules::openshift::DNSRecord>,
        Srm,
        Srm,
    );
    let cases: Vec<Case> = vec![
        (
            "1 no zones in the DNS config beats everything",
            dns(None, None),
            vec![ok_record(HOST)],
            not_ready.clone(),
            no_zones_cfg.clone(),
        ),
        (
            "2 no record",
            both(),
            vec![record("r", "other.example.com", "Managed", vec![])],
            not_ready.clone(),
            ready(
                "False",
                "RecordNotFound",
                "The wildcard record resource was not found.",
            ),
        ),
        (
            "3 unmanaged record beats failed zones",
            both(),
            vec![record(
                "r",
                HOST,
                "Unmanaged",
                vec![zone(public(), Some(("False", "boom")))],
            )],
            not_ready.clone(),
            ready(
                "Unknown",
                "UnmanagedDNS",
                "The DNS management policy is set to Unmanaged.",
            ),
        ),
        (
            "4 record without zones",
            both(),
            vec![record("r", HOST, "Managed", vec![])],
            not_ready.clone(),
            ready("False", "NoZones", "The record isn't present in any zones."),
        ),
        (
            "5 only zones the config does not name: nothing counted, ready",
            both(),
            vec![record(
                "r",
                HOST,
                "Managed",
                vec![zone(json!({"id": "Z0OLD"}), Some(("False", "gone")))],
            )],
            all_ready.clone(),
            ready(
                "True",
                "NoFailedZones",
                "The record is provisioned in all reported zones.",
            ),
        ),
        (
            "5 a zone matched by its Name tag alone counts",
            both(),
            vec![record(
                "r",
                HOST,
                "Managed",
                vec![zone(
                    json!({"tags": {"Name": "c-int"}}),
                    Some(("False", "x")),
                )],
            )],
            not_ready.clone(),
            ready(
                "False",
                "FailedZones",
                "The record failed to provision in some zones: [{ map[Name:c-int]}]",
            ),
        ),
        (
            "5 failed beats unknown; zones as Go prints them, unconfigured ones ignored",
            both(),
            vec![record(
                "r",
                HOST,
                "Managed",
                vec![
                    zone(private(), Some(("Unknown", "unreachable"))),
                    zone(public(), Some(("False", "quota exceeded"))),
                    zone(json!({"id": "Z0OLD"}), Some(("False", "ignored"))),
                ],
            )],
            not_ready.clone(),
            ready(
                "False",
                "FailedZones",
                "The record failed to provision in some zones: [{Z0PUBLIC map[]}]",
            ),
        ),
        (
            "5 unknown; a zone without Published is ignored",
            both(),
            vec![record(
                "r",
                HOST,
                "Managed",
                vec![
                    zone(public(), Some(("Unknown", "pending"))),
                    zone(private(), None),
                ],
            )],
            not_ready.clone(),
            ready(
                "False",
                "UnknownZones",
                "Provisioning of the record is in an unknown state in some zones: [{Z0PUBLIC map[]}]",
            ),
        ),
        (
            "5 tags print sorted by key",
            both(),
            vec![record(
                "r",
                HOST,
                "Managed",
                vec![zone(private(), Some(("False", "denied")))],
            )],
            not_ready.clone(),
            ready(
                "False",
                "FailedZones",
                "The record failed to provision in some zones: [{ map[Name:c-int kubernetes.io/cluster/c:owned]}]",
            ),
        ),
        (
            "5 all counted zones published",
            dns(Some(public()), None),
            vec![record(
                "r",
                HOST,
                "Managed",
                vec![
                    zone(public(), Some(("True", "ok"))),
                    zone(private(), Some(("False", "not configured, not counted"))),
                ],
            )],
            all_ready.clone(),
            ready(
                "True",
                "NoFailedZones",
                "The record is provisioned in all reported zones.",
            ),
        ),
    ];
    for (name, cfg, records, gateway_level, readiness) in cases {
        let (g, r) = dns_ready_for(cfg, records);
        assert_eq!(r, readiness, "{name}: listener DNSReady");
        assert_eq!(g, gateway_level, "{name}: Gateway DNSReady");
    }
}

#[test]
fn every_published_condition_of_a_zone_counts_and_failed_beats_unknown() {
    // Unknown then False in one zone: FailedZones (earlier agents said
    // UnknownZones); each counted condition is one entry in the list.
    let mut r = record("r", HOST, "Managed", vec![]);
    r.status = Some(from(json!({"zones": [
        {"dnsZone": {"id": PUBLIC_ID}, "conditions": [
            {"type": "Published", "status": "Unknown"},
            {"type": "Published", "status": "False"},
            {"type": "Published", "status": "False"}]}]})));
    let (_, l) = dns_ready_for(both(), vec![r]);
    assert_eq!(
        l,
        ready(
            "False",
            "FailedZones",
            "The record failed to provision in some zones: [{Z0PUBLIC map[]} {Z0PUBLIC map[]}]"
        )
    );
}

#[test]
fn listener_dns_ready_only_on_existing_entries_with_a_hostname() {
    // Spec listeners a (hostname, entry), b (hostname, no entry), c (no
    // hostname, entry carrying an old DNSReady), and an entry for a listener
    // gone from the spec.
    let mut snap = snapshot(gateway(
        &[("a", Some(HOST)), ("b", Some(HOST)), ("c", None)],
        2,
        json!({"listeners": [
            {"name": "a", "attachedRoutes": 0, "supportedKinds": [], "conditions": []},
            {"name": "c", "attachedRoutes": 0, "supportedKinds": [],
             "conditions": [cond("DNSReady", "True", "NoFailedZones", 1, "2026-01-01T00:00:00Z")]},
            {"name": "gone", "attachedRoutes": 0, "supportedKinds": [],
             "conditions": [cond("DNSReady", "True", "NoFailedZones", 1, "2026-01-01T00:00:00Z")]}
        ]}),
    ));
    snap.dns_records = vec![ok_record(HOST)];
    let e = eval_one(&snap);
    let names: Vec<_> = e
        .status
        .listeners
        .as_ref()
        .unwrap()
        .iter()
        .map(|l| l.name.as_str())
        .collect();
    assert_eq!(names, ["a", "c", "gone"], "no entry is created");
    assert_eq!(
        find(listener_conds(&e.status, "a"), "DNSReady")
            .unwrap()
            .reason,
        "NoFailedZones"
    );
    assert!(listener_conds(&e.status, "c").is_empty());
    assert!(listener_conds(&e.status, "gone").is_empty());
    assert_eq!(
        find(e.status.conditions.as_deref().unwrap(), "DNSReady")
            .unwrap()
            .reason,
        "AllListenersReady"
    );
}

#[test]
fn gateway_dns_ready_is_removed_when_no_listener_carries_one() {
    let mut snap = snapshot(gateway(
        &[("plain", None)],
        2,
        json!({"conditions": [cond("DNSReady", "True", "AllListenersReady", 1, "2026-01-01T00:00:00Z")]}),
    ));
    snap.dns_records = vec![ok_record(HOST)];
    let e = eval_one(&snap);
    let conds = e.status.conditions.as_deref().unwrap();
    assert!(find(conds, "DNSReady").is_none(), "{conds:?}");
    assert!(find(conds, "LoadBalancerReady").is_some());
}

#[test]
fn trailing_dots_are_trimmed_on_both_sides() {
    for (listener, record_name) in [
        ("a.example.com.", "a.example.com"),
        ("a.example.com", "a.example.com."),
        ("a.example.com.", "a.example.com."),
    ] {
        let mut snap = snapshot(gateway(&[("l", Some(listener))], 1, json!({})));
        snap.dns_records = vec![ok_record(record_name)];
        let e = eval_one(&snap);
        assert_eq!(
            find(listener_conds(&e.status, "l"), "DNSReady")
                .unwrap()
                .reason,
            "NoFailedZones",
            "{listener} vs {record_name}"
        );
    }
}

#[test]
fn listeners_sharing_a_hostname_get_identical_conditions() {
    let mut snap = snapshot(gateway(
        &[("http", Some(HOST)), ("https", Some(HOST)), ("plain", None)],
        3,
        json!({}),
    ));
    snap.dns_records = vec![record(
        "r",
        "*.apps.example.com.",
        "Managed",
        vec![zone(public(), Some(("False", "quota")))],
    )];
    let e = eval_one(&snap);
    assert_eq!(
        listener_conds(&e.status, "http"),
        listener_conds(&e.status, "https")
    );
    assert_eq!(listener_conds(&e.status, "http").len(), 1);
    // No hostname: none of ours on its entry.
    assert!(listener_conds(&e.status, "plain").is_empty());
}

#[test]
fn duplicate_records_for_a_hostname_are_reported_and_the_last_by_name_wins() {
    let mut snap = snapshot(gateway(&[("l", Some(HOST))], 1, json!({})));
    snap.dns_records = vec![
        record(
            "b",
            HOST,
            "Managed",
            vec![zone(public(), Some(("True", "ok")))],
        ),
        record(
            "a",
            HOST,
            "Managed",
            vec![zone(public(), Some(("False", "x")))],
        ),
    ];
    let e = eval_one(&snap);
    assert_eq!(
        find(listener_conds(&e.status, "l"), "DNSReady")
            .unwrap()
            .reason,
        "NoFailedZones"
    );
    assert_eq!(e.problems.len(), 1);
    assert_eq!(
        e.problems[0].to_string(),
        "several DNSRecords for hostname *.apps.example.com: using b, ignoring a"
    );
}

#[test]
fn records_of_other_gateways_or_namespaces_do_not_count() {
    let mut snap = snapshot(gateway(&[("l", Some(HOST))], 1, json!({})));
    let mut other_gw = ok_record(HOST);
    other_gw.metadata.labels.as_mut().unwrap().insert(
        "gateway.networking.k8s.io/gateway-name".into(),
        "other".into(),
    );
    let mut other_ns = ok_record(HOST);
    other_ns.metadata.namespace = Some("elsewhere".into());
    snap.dns_records = vec![other_gw, other_ns];
    let e = eval_one(&snap);
    assert_eq!(
        find(listener_conds(&e.status, "l"), "DNSReady")
            .unwrap()
            .reason,
        "RecordNotFound"
    );
}

fn lb(snap: &Snapshot) -> Srm {
    let e = eval_one(snap);
    srm(find(
        e.status.conditions.as_deref().unwrap(),
        "LoadBalancerReady",
    ))
}

#[test]
fn load_balancer_rules_in_order() {
    const FAIL_PREFIX: &str =
        "The service-controller component is reporting SyncLoadBalancerFailed events like: ";
    const FAIL_SUFFIX: &str = "\nThe cloud-controller-manager logs may contain more details.";
    let svc_name = "gw-openshift-default";
    let pending_svc = || service(svc_name, "LoadBalancer", json!([]));
    let fail = |name: &str, msg: &str, last: &str| {
        event(
            name,
            svc_name,
            "service-controller",
            "SyncLoadBalancerFailed",
            msg,
            last,
        )
    };

    // 1. no Service
    let mut snap = snapshot(gateway(&[("l", None)], 1, json!({})));
    snap.services.clear();
    assert_eq!(
        lb(&snap),
        ready(
            "False",
            "ServiceNotFound",
            "The LoadBalancer service resource is missing"
        )
    );
    // 1. a Service with an empty name counts as none
    let mut unnamed = pending_svc();
    unnamed.metadata.name = Some(String::new());
    assert_eq!(
        load_balancer_ready(Some(&unnamed), &[]).reason,
        "ServiceNotFound"
    );

    // 2. provisioned (ip or hostname) beats failure events
    for ingress in [json!([{"ip": "10.0.0.1"}]), json!([{"hostname": "x.elb"}])] {
        let mut snap = snapshot(gateway(&[("l", None)], 1, json!({})));
        snap.services = vec![service(svc_name, "LoadBalancer", ingress)];
        snap.events = vec![fail("e", "old", "2026-01-01T00:00:00Z")];
        assert_eq!(
            lb(&snap),
            ready(
                "True",
                "LoadBalancerProvisioned",
                "The LoadBalancer service is provisioned"
            )
        );
    }
    // 2. an ingress entry with neither ip nor hostname is not provisioned
    let mut snap = snapshot(gateway(&[("l", None)], 1, json!({})));
    snap.services = vec![service(svc_name, "LoadBalancer", json!([{"ip": ""}]))];
    assert_eq!(lb(&snap).unwrap().1, "LoadBalancerPending");

    // 3. the newest matching event, whatever the order
    let mut snap = snapshot(gateway(&[("l", None)], 1, json!({})));
    snap.services = vec![pending_svc()];
    snap.events = vec![
        fail("e1", "older", "2026-01-12T09:00:00Z"),
        fail("e2", "newest", "2026-01-12T09:30:00Z"),
        fail("e3", "middle", "2026-01-12T09:10:00Z"),
    ];
    assert_eq!(
        lb(&snap),
        ready(
            "False",
            "SyncLoadBalancerFailed",
            &format!("{FAIL_PREFIX}newest{FAIL_SUFFIX}")
        )
    );

    // 3. as the operator matches: source.component only (an event with just
    // reportingComponent, or an events.k8s.io event without deprecatedSource,
    // is not the service controller's for it), and an event newer than all
    // of those above does not change the quoted one.
    let mut reporting = fail("e4", "via reportingComponent", "2026-01-12T09:40:00Z");
    reporting.source = None;
    reporting.reporting_component = Some("service-controller".into());
    let new_style: k8s_openapi::api::events::v1::Event = from(json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e5", "namespace": NS},
        "regarding": {"kind": "Service", "apiVersion": "v1", "name": svc_name, "namespace": NS, "uid": format!("uid-{svc_name}")},
        "reportingController": "service-controller", "reportingInstance": "ccm-1",
        "reason": "SyncLoadBalancerFailed", "note": "new style", "action": "Sync",
        "eventTime": "2026-01-12T09:00:00.000000Z",
        "series": {"count": 3, "lastObservedTime": "2026-01-12T09:50:00.000000Z"}
    }));
    snap.events.push(reporting);
    snap.events.push(from_events_v1(new_style));
    assert_eq!(
        lb(&snap).unwrap().2,
        format!("{FAIL_PREFIX}newest{FAIL_SUFFIX}")
    );

    // 4. events that do not match: other component, reason, Service, namespace, uid, kind
    let mut snap = snapshot(gateway(&[("l", None)], 1, json!({})));
    snap.services = vec![pending_svc()];
    let mut wrong_ns = fail("n", "x", "2026-01-12T09:00:00Z");
    wrong_ns.involved_object.namespace = Some("default".into());
    let mut wrong_uid = fail("u", "x", "2026-01-12T09:00:00Z");
    wrong_uid.involved_object.uid = Some("uid-of-a-deleted-service".into());
    let mut wrong_kind = fail("k", "x", "2026-01-12T09:00:00Z");
    wrong_kind.involved_object.kind = Some("Pod".into());
    let mut wrong_version = fail("v", "x", "2026-01-12T09:00:00Z");
    wrong_version.involved_object.api_version = Some("v2".into());
    let mut no_uid = fail("nu", "x", "2026-01-12T09:00:00Z");
    no_uid.involved_object.uid = None;
    snap.events = vec![
        event(
            "c",
            svc_name,
            "kubelet",
            "SyncLoadBalancerFailed",
            "x",
            "2026-01-12T09:00:00Z",
        ),
        event(
            "r",
            svc_name,
            "service-controller",
            "EnsuringLoadBalancer",
            "x",
            "2026-01-12T09:00:00Z",
        ),
        event(
            "s",
            "other-svc",
            "service-controller",
            "SyncLoadBalancerFailed",
            "x",
            "2026-01-12T09:00:00Z",
        ),
        wrong_ns,
        wrong_uid,
        wrong_kind,
        wrong_version,
        no_uid,
    ];
    assert_eq!(
        lb(&snap),
        ready(
            "False",
            "LoadBalancerPending",
            "The LoadBalancer service is pending"
        )
    );
}

/// Which SyncLoadBalancerFailed event is quoted, row by row. A row that
/// must not match is listed alone (the load balancer stays pending) and
/// after an older matching event, whose message must still be quoted (a
/// newer event that does not match never wins). Two matching events: the
/// newest is quoted whether it is listed last or not (spec §2, deliberate
/// differences: the operator quotes the first it lists).
#[test]
fn sync_failure_event_rows() {
    const SVC: &str = "gw-openshift-default";
    const PREFIX: &str =
        "The service-controller component is reporting SyncLoadBalancerFailed events like: ";
    const SUFFIX: &str = "\nThe cloud-controller-manager logs may contain more details.";
    let fail = |name: &str, msg: &str, last: &str| {
        event(
            name,
            SVC,
            "service-controller",
            "SyncLoadBalancerFailed",
            msg,
            last,
        )
    };
    let quoted = |events: Vec<k8s_openapi::api::core::v1::Event>| -> Srm {
        let mut snap = snapshot(gateway(&[("l", None)], 1, json!({})));
        snap.services = vec![service(SVC, "LoadBalancer", json!([]))];
        snap.events = events;
        lb(&snap)
    };
    let failed = |msg: &str| {
        ready(
            "False",
            "SyncLoadBalancerFailed",
            &format!("{PREFIX}{msg}{SUFFIX}"),
        )
    };
    let pending = ready(
        "False",
        "LoadBalancerPending",
        "The LoadBalancer service is pending",
    );

    type Edit = fn(&mut k8s_openapi::api::core::v1::Event);
    let not_matched: [(&str, Edit); 3] = [
        ("involvedObject.apiVersion is not v1", |e| {
            e.involved_object.api_version = Some("apps/v1".into())
        }),
        ("involvedObject in another namespace", |e| {
            e.involved_object.namespace = Some("openshift-ingress-operator".into())
        }),
        ("involvedObject with another uid", |e| {
            e.involved_object.uid = Some("uid-of-an-earlier-service".into())
        }),
    ];
    for (row, edit) in not_matched {
        let mut other = fail("other", "not about this Service", "2026-01-12T09:30:00Z");
        edit(&mut other);
        assert_eq!(quoted(vec![other.clone()]), pending, "{row}: alone");
        let matching = fail("matching", "about this Service", "2026-01-12T09:00:00Z");
        assert_eq!(
            quoted(vec![matching.clone(), other.clone()]),
            failed("about this Service"),
            "{row}: after a matching event"
        );
        assert_eq!(
            quoted(vec![other, matching]),
            failed("about this Service"),
            "{row}: before a matching event"
        );
    }

    // Two matching events, the newest listed first (the operator would
    // quote it too, being first; so also listed last, where it would not).
    let newest = fail("b-newer", "newest", "2026-01-12T09:30:00Z");
    let older = fail("a-older", "older", "2026-01-12T09:00:00Z");
    assert_eq!(
        quoted(vec![newest.clone(), older.clone()]),
        failed("newest"),
        "lastTimestamp, newest first"
    );
    assert_eq!(
        quoted(vec![older, newest]),
        failed("newest"),
        "lastTimestamp, newest last"
    );
    // The same with new-style times: eventTime only, no lastTimestamp.
    let at = |name: &str, msg: &str, time: &str| {
        let mut e = fail(name, msg, time);
        e.last_timestamp = None;
        e.event_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            time.parse().unwrap(),
        ));
        e
    };
    let (newest, older) = (
        at("b-newer", "newest", "2026-01-12T09:30:00Z"),
        at("a-older", "older", "2026-01-12T09:00:00Z"),
    );
    assert_eq!(
        quoted(vec![newest.clone(), older.clone()]),
        failed("newest"),
        "eventTime, newest first"
    );
    assert_eq!(
        quoted(vec![older, newest]),
        failed("newest"),
        "eventTime, newest last"
    );
}

#[test]
fn service_choice_is_the_first_by_name() {
    let mut snap = snapshot(gateway(&[("l", None)], 1, json!({})));
    snap.services = vec![
        service("z-lb", "LoadBalancer", json!([])),
        service("b-lb", "LoadBalancer", json!([{"ip": "1.2.3.4"}])),
        service("c-clusterip", "ClusterIP", json!([])),
    ];
    assert_eq!(lb(&snap).unwrap().1, "LoadBalancerProvisioned");
    snap.services.remove(1);
    assert_eq!(lb(&snap).unwrap().1, "LoadBalancerPending");
}

#[test]
fn a_service_without_uid_has_no_events() {
    let mut snap = snapshot(gateway(&[("l", None)], 1, json!({})));
    let mut svc = service("gw-openshift-default", "LoadBalancer", json!([]));
    svc.metadata.uid = None;
    snap.services = vec![svc];
    let mut e = event(
        "e",
        "gw-openshift-default",
        "service-controller",
        "SyncLoadBalancerFailed",
        "x",
        "2026-01-12T09:00:00Z",
    );
    e.involved_object.uid = None;
    snap.events = vec![e];
    assert_eq!(lb(&snap).unwrap().1, "LoadBalancerPending");
}

#[test]
fn scope_is_namespace_and_controller() {
    let mut snap = snapshot(gateway(&[("l", None)], 1, json!({})));
    let mut elsewhere = snap.gateways[0].clone();
    elsewhere.metadata.namespace = Some("apps".into());
    let mut foreign_class = snap.gateways[0].clone();
    foreign_class.metadata.name = Some("istio-gw".into());
    foreign_class.spec.gateway_class_name = "istio".into();
    let mut missing_class = snap.gateways[0].clone();
    missing_class.metadata.name = Some("orphan".into());
    missing_class.spec.gateway_class_name = "nope".into();
    let mut istio: gateway_api::apis::standard::gatewayclasses::GatewayClass = class();
    istio.metadata.name = Some("istio".into());
    istio.spec.controller_name = "istio.io/gateway-controller".into();
    snap.gateway_classes.push(istio);
    snap.gateways
        .extend([elsewhere, foreign_class, missing_class]);

    let names = |opts: &Options| -> Vec<String> {
        evaluate(&snap, opts, now())
            .unwrap()
            .iter()
            .map(|e| format!("{}/{}", e.namespace(), e.name()))
            .collect()
    };
    assert_eq!(names(&Options::default()), ["openshift-ingress/gw"]);
    let custom = Options {
        namespace: "openshift-ingress".into(),
        controller_name: "istio.io/gateway-controller".into(),
    };
    assert_eq!(names(&custom), ["openshift-ingress/istio-gw"]);
    let apps = Options {
        namespace: "apps".into(),
        ..Options::default()
    };
    assert_eq!(names(&apps), ["apps/gw"]);
}

#[test]
fn missing_dns_config_is_an_error_not_a_guess() {
    let mut snap = snapshot(gateway(&[("l", Some(HOST))], 1, json!({})));
    snap.dns = None;
    let err = evaluate(&snap, &Options::default(), now()).unwrap_err();
    assert_eq!(err, EngineError::MissingDnsConfig);
    assert!(
        err.to_string()
            .starts_with("missing dnses.config.openshift.io/cluster"),
        "{err}"
    );
    // Nothing in scope: nothing to compute, nothing missing.
    snap.gateways.clear();
    assert!(
        evaluate(&snap, &Options::default(), now())
            .unwrap()
            .is_empty()
    );
}
