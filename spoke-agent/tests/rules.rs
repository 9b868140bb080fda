//! Table tests: every rule of spec §2, in order, and the edge cases the
//! OpenShift design's test plan names.

mod support;

use gwhub_agent::conditions::load_balancer::load_balancer_ready;
use gwhub_agent::engine::{EngineError, evaluate};
use gwhub_agent::snapshot::from_events_v1;
use gwhub_agent::{Options, Snapshot};
use serde_json::json;
use support::*;

const HOST: &str = "*.apps.example.com";

/// `(status, reason, message)` of a condition, if present.
type Srm = Option<(String, String, String)>;

fn ready(status: &str, reason: &str, message: &str) -> Srm {
    Some((status.into(), reason.into(), message.into()))
}

/// DNSReady of a one-listener Gateway on `platform` with `dns` and `records`.
fn dns_ready_for(
    platform: &str,
    dns_cfg: gwhub_agent::openshift::DNS,
    records: Vec<gwhub_agent::openshift::DNSRecord>,
) -> (Srm, Srm) {
    let mut snap = snapshot(gateway(&[("l", Some(HOST))], 1, json!({})));
    snap.infrastructure = Some(infra(platform));
    snap.dns = Some(dns_cfg);
    snap.dns_records = records;
    let e = eval_one(&snap);
    let conds = listener_conds(&e.status, "l");
    (srm(find(conds, "DNSManaged")), srm(find(conds, "DNSReady")))
}

fn both() -> gwhub_agent::openshift::DNS {
    dns(Some(public()), Some(private()))
}

fn ok_record(dns_name: &str) -> gwhub_agent::openshift::DNSRecord {
    record(
        "r",
        dns_name,
        "Managed",
        vec![zone(public(), Some(("True", "ok")))],
    )
}

#[test]
fn dns_rules_in_order() {
    let managed_ok = ready(
        "True",
        "Normal",
        "DNS management is supported and zones are specified in the cluster DNS config.",
    );
    let no_zones_cfg = ready(
        "False",
        "NoDNSZones",
        "No DNS zones are defined in the cluster dns config.",
    );
    type Case = (
        &'static str,
        &'static str,
        gwhub_agent::openshift::DNS,
        Vec<gwhub_agent::openshift::DNSRecord>,
        Srm,
        Srm,
    );
    let cases: Vec<Case> = vec![
        (
            "1 platform without DNS management beats everything",
            "BareMetal",
            dns(None, None),
            vec![],
            ready(
                "False",
                "UnsupportedPlatform",
                "DNS management is not supported on this platform: BareMetal.",
            ),
            ready(
                "False",
                "UnsupportedPlatform",
                "DNS records cannot be managed on this platform: BareMetal.",
            ),
        ),
        (
            "1 None platform",
            "None",
            both(),
            vec![ok_record(HOST)],
            ready(
                "False",
                "UnsupportedPlatform",
                "DNS management is not supported on this platform: None.",
            ),
            ready(
                "False",
                "UnsupportedPlatform",
                "DNS records cannot be managed on this platform: None.",
            ),
        ),
        (
            "2 no zones in the DNS config",
            "AWS",
            dns(None, None),
            vec![ok_record(HOST)],
            no_zones_cfg.clone(),
            no_zones_cfg.clone(),
        ),
        (
            "3 no record",
            "GCP",
            both(),
            vec![record("r", "other.example.com", "Managed", vec![])],
            managed_ok.clone(),
            ready(
                "False",
                "RecordNotFound",
                "The wildcard record resource was not found.",
            ),
        ),
        (
            "4 unmanaged record beats failed zones",
            "Azure",
            both(),
            vec![record(
                "r",
                HOST,
                "Unmanaged",
                vec![zone(public(), Some(("False", "boom")))],
            )],
            managed_ok.clone(),
            ready(
                "Unknown",
                "UnmanagedDNS",
                "The DNS management policy is set to Unmanaged.",
            ),
        ),
        (
            "5 record without zones",
            "AWS",
            both(),
            vec![record("r", HOST, "Managed", vec![])],
            managed_ok.clone(),
            ready("False", "NoZones", "The record isn't present in any zones."),
        ),
        (
            "5 only zones the config does not name (by id)",
            "AWS",
            both(),
            vec![record(
                "r",
                HOST,
                "Managed",
                vec![zone(json!({"id": "Z0OLD"}), Some(("False", "gone")))],
            )],
            managed_ok.clone(),
            ready("False", "NoZones", "The record isn't present in any zones."),
        ),
        (
            "5 only zones the config does not name (tags differ)",
            "AWS",
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
            managed_ok.clone(),
            ready("False", "NoZones", "The record isn't present in any zones."),
        ),
        (
            "6 failed beats unknown; message names zones by id or tags with the provider message",
            "AWS",
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
            managed_ok.clone(),
            ready(
                "False",
                "FailedZones",
                "The record failed to provision in some zones: [Z0PUBLIC: quota exceeded]",
            ),
        ),
        (
            "6 failed zone known by tags",
            "AWS",
            both(),
            vec![record(
                "r",
                HOST,
                "Managed",
                vec![zone(private(), Some(("False", "denied")))],
            )],
            managed_ok.clone(),
            ready(
                "False",
                "FailedZones",
                "The record failed to provision in some zones: [map[Name:c-int kubernetes.io/cluster/c:owned]: denied]",
            ),
        ),
        (
            "7 unknown and missing Published both count as unknown",
            "IBMCloud",
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
            managed_ok.clone(),
            ready(
                "False",
                "UnknownZones",
                "Provisioning of the record is in an unknown state in some zones: [Z0PUBLIC: pending, map[Name:c-int kubernetes.io/cluster/c:owned]: no Published condition reported]",
            ),
        ),
        (
            "8 all counted zones published",
            "PowerVS",
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
            managed_ok.clone(),
            ready(
                "True",
                "NoFailedZones",
                "The record is provisioned in all reported zones.",
            ),
        ),
    ];
    for (name, platform, cfg, records, managed, readiness) in cases {
        let (m, r) = dns_ready_for(platform, cfg, records);
        assert_eq!(m, managed, "{name}: DNSManaged");
        assert_eq!(r, readiness, "{name}: DNSReady");
    }
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
    assert_eq!(listener_conds(&e.status, "http").len(), 2);
    // No hostname, no status entry needed: none is created.
    let names: Vec<_> = e
        .status
        .listeners
        .as_ref()
        .unwrap()
        .iter()
        .map(|l| l.name.as_str())
        .collect();
    assert_eq!(names, ["http", "https"]);
}

#[test]
fn duplicate_records_for_a_hostname_are_reported_and_the_first_by_name_wins() {
    let mut snap = snapshot(gateway(&[("l", Some(HOST))], 1, json!({})));
    snap.dns_records = vec![
        record(
            "b",
            HOST,
            "Managed",
            vec![zone(public(), Some(("False", "x")))],
        ),
        record(
            "a",
            HOST,
            "Managed",
            vec![zone(public(), Some(("True", "ok")))],
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
        "several DNSRecords for hostname *.apps.example.com: using a, ignoring b"
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

    // 3. reportingComponent counts like source.component; events.k8s.io events
    // (eventTime, series) are read too and compared by their newest time.
    let mut reporting = fail("e4", "via reportingComponent", "2026-01-12T09:40:00Z");
    reporting.source = None;
    reporting.reporting_component = Some("service-controller".into());
    let new_style: k8s_openapi::api::events::v1::Event = from(json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e5", "namespace": NS},
        "regarding": {"kind": "Service", "name": svc_name, "namespace": NS},
        "reportingController": "service-controller", "reportingInstance": "ccm-1",
        "reason": "SyncLoadBalancerFailed", "note": "new style", "action": "Sync",
        "eventTime": "2026-01-12T09:00:00.000000Z",
        "series": {"count": 3, "lastObservedTime": "2026-01-12T09:50:00.000000Z"}
    }));
    snap.events.push(reporting);
    snap.events.push(from_events_v1(new_style));
    assert_eq!(
        lb(&snap).unwrap().2,
        format!("{FAIL_PREFIX}new style{FAIL_SUFFIX}")
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

#[test]
fn service_choice_prefers_load_balancer_then_name() {
    let mut snap = snapshot(gateway(&[("l", None)], 1, json!({})));
    snap.services = vec![
        service("a-clusterip", "ClusterIP", json!([{"ip": "10.0.0.1"}])),
        service("z-lb", "LoadBalancer", json!([])),
        service("b-lb", "LoadBalancer", json!([{"ip": "1.2.3.4"}])),
    ];
    assert_eq!(lb(&snap).unwrap().1, "LoadBalancerProvisioned");
    snap.services.remove(2);
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
fn missing_cluster_config_is_an_error_not_a_guess() {
    let mut snap = snapshot(gateway(&[("l", Some(HOST))], 1, json!({})));
    snap.dns = None;
    snap.infrastructure = None;
    let err = evaluate(&snap, &Options::default(), now()).unwrap_err();
    assert_eq!(
        err,
        EngineError::MissingClusterConfig(vec![
            "dnses.config.openshift.io/cluster",
            "infrastructures.config.openshift.io/cluster"
        ])
    );
    assert!(err.to_string().starts_with(
        "missing dnses.config.openshift.io/cluster and infrastructures.config.openshift.io/cluster"
    ));
    snap.dns = Some(both());
    let err = evaluate(&snap, &Options::default(), now()).unwrap_err();
    assert_eq!(
        err,
        EngineError::MissingClusterConfig(vec!["infrastructures.config.openshift.io/cluster"])
    );
    // An Infrastructure without any platform is an error too.
    let mut infra_none = infra("AWS");
    infra_none.status = None;
    snap.infrastructure = Some(infra_none);
    assert_eq!(
        evaluate(&snap, &Options::default(), now()).unwrap_err(),
        EngineError::NoPlatform
    );
    // Nothing in scope: nothing to compute, nothing missing.
    snap.gateways.clear();
    snap.dns = None;
    assert!(
        evaluate(&snap, &Options::default(), now())
            .unwrap()
            .is_empty()
    );
}
