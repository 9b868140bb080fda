//! The status merge: only our condition types change, transition times
//! follow status changes, lists stay within the CRD limits, and a second
//! merge is a no-op. Table tests first, then property tests.

use crate::support;

use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_spoke_rules::conditions::Verdict;
use gwhub_spoke_rules::ownership::{Ownership, Plan};
use gwhub_spoke_rules::status::{Desired, Problem, apply_patch, merge, needs_write};
use proptest::prelude::*;
use serde_json::json;
use support::*;

const HOST: &str = "*.apps.example.com";

fn healthy_record() -> gwhub_spoke_rules::openshift::DNSRecord {
    record(
        "r",
        HOST,
        "Managed",
        vec![zone(public(), Some(("True", "ok")))],
    )
}

#[test]
fn generation_bump_updates_observed_generation_and_keeps_transition_time() {
    let status = json!({
        "conditions": [cond("LoadBalancerReady", "True", "LoadBalancerProvisioned", 1, "2026-01-01T00:00:00Z")],
        "listeners": [{"name": "l", "attachedRoutes": 1, "conditions": [
            cond("DNSReady", "True", "NoFailedZones", 1, "2026-01-01T00:00:00Z")]}]
    });
    let mut snap = snapshot(gateway(&[("l", Some(HOST))], 2, status));
    snap.dns_records = vec![healthy_record()];
    let e = eval_one(&snap);
    let lb = find(e.status.conditions.as_deref().unwrap(), "LoadBalancerReady").unwrap();
    assert_eq!(lb.observed_generation, Some(2));
    assert_eq!(lb.last_transition_time.0, t("2026-01-01T00:00:00Z"));
    assert_eq!(lb.message, "The LoadBalancer service is provisioned");
    let conds = listener_conds(&e.status, "l");
    let ready = find(conds, "DNSReady").unwrap();
    assert_eq!(ready.observed_generation, Some(2));
    assert_eq!(ready.last_transition_time.0, t("2026-01-01T00:00:00Z"));
    assert!(find(conds, "DNSManaged").is_none());
    // The Gateway-level DNSReady is new: it transitions now.
    assert_eq!(
        find(e.status.conditions.as_deref().unwrap(), "DNSReady")
            .unwrap()
            .last_transition_time
            .0,
        now()
    );
    assert!(e.needs_write());
}

#[test]
fn status_change_moves_transition_time() {
    let status = json!({
        "conditions": [cond("LoadBalancerReady", "True", "LoadBalancerProvisioned", 1, "2026-01-01T00:00:00Z")],
    });
    let mut snap = snapshot(gateway(&[("l", None)], 1, status));
    snap.services[0].status = None;
    let e = eval_one(&snap);
    let lb = find(e.status.conditions.as_deref().unwrap(), "LoadBalancerReady").unwrap();
    assert_eq!(lb.status, "False");
    assert_eq!(lb.last_transition_time.0, now());
}

#[test]
fn hostname_removed_removes_dns_ready_and_keeps_the_rest() {
    let status = json!({
        "listeners": [{"name": "l", "attachedRoutes": 4,
            "supportedKinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}],
            "conditions": [
                cond("Accepted", "True", "Accepted", 1, "2026-01-01T00:00:00Z"),
                cond("DNSReady", "True", "NoFailedZones", 1, "2026-01-01T00:00:00Z")]}]
    });
    let snap = snapshot(gateway(&[("l", None)], 2, status));
    let e = eval_one(&snap);
    let l = &e.status.listeners.as_ref().unwrap()[0];
    assert_eq!(l.attached_routes, 4);
    assert_eq!(l.supported_kinds.as_ref().unwrap().len(), 1);
    let types: Vec<_> = l.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, ["Accepted"]);
}

#[test]
fn listener_without_status_entry_gets_none() {
    // Before Gateway API v1.5 an entry needs supportedKinds, which only the
    // Gateway's controller knows: the agent never creates one.
    let status = json!({"listeners": [{"name": "old", "attachedRoutes": 2, "conditions": []}]});
    let mut snap = snapshot(gateway(&[("old", None), ("new", Some(HOST))], 1, status));
    snap.dns_records = vec![healthy_record()];
    let e = eval_one(&snap);
    let ls = e.status.listeners.as_ref().unwrap();
    assert_eq!(ls.len(), 1);
    assert_eq!(ls[0].name, "old");
    assert!(ls[0].conditions.is_empty());
    let conds = e.status.conditions.as_deref().unwrap();
    assert!(find(conds, "DNSReady").is_none(), "no listener carries one");
}

#[test]
fn dns_managed_the_agent_wrote_is_removed_anyone_elses_kept() {
    let dns_managed = || cond("DNSManaged", "True", "Normal", 1, "2026-01-01T00:00:00Z");
    let status = json!({"listeners": [
        {"name": "ours", "attachedRoutes": 0, "supportedKinds": [], "conditions": [dns_managed()]},
        {"name": "theirs", "attachedRoutes": 0, "supportedKinds": [], "conditions": [dns_managed()]}]});
    let mut gw = gateway(&[("ours", Some(HOST)), ("theirs", Some(HOST))], 1, status);
    let fields = |listener: &str| {
        json!({"f:status": {"f:listeners": {format!("k:{{\"name\":\"{listener}\"}}"): {
            "f:conditions": {"k:{\"type\":\"DNSManaged\"}": {".": {}, "f:status": {}}}}}}})
    };
    gw.metadata.managed_fields = Some(from(json!([
        {"manager": "gwhub-agent", "operation": "Apply", "subresource": "status",
         "fieldsType": "FieldsV1", "fieldsV1": fields("ours")},
        {"manager": "someone", "operation": "Update",
         "fieldsType": "FieldsV1", "fieldsV1": fields("theirs")}
    ])));
    let mut snap = snapshot(gw);
    snap.dns_records = vec![healthy_record()];
    let e = eval_one(&snap);
    let types = |l: &str| -> Vec<String> {
        listener_conds(&e.status, l)
            .iter()
            .map(|c| c.type_.clone())
            .collect()
    };
    assert_eq!(types("ours"), ["DNSReady"]);
    assert_eq!(types("theirs"), ["DNSManaged", "DNSReady"]);
    assert!(e.needs_write());
    let patch = e.apply_patch();
    assert!(!patch.to_string().contains("DNSManaged"), "{patch}");
}

#[test]
fn our_conditions_leave_listeners_that_left_the_spec() {
    let status = json!({"listeners": [{"name": "gone", "attachedRoutes": 0, "conditions": [
        cond("DNSReady", "True", "NoFailedZones", 1, "2026-01-01T00:00:00Z"),
        cond("Accepted", "True", "Accepted", 1, "2026-01-01T00:00:00Z")]}]});
    let snap = snapshot(gateway(&[("l", None)], 1, status));
    let e = eval_one(&snap);
    let ls = e.status.listeners.as_ref().unwrap();
    assert_eq!(ls.len(), 1);
    assert_eq!(ls[0].conditions.len(), 1);
    assert_eq!(ls[0].conditions[0].type_, "Accepted");
}

#[test]
fn condition_limit_with_istio_conditions_present() {
    let istio: Vec<_> = (0..8)
        .map(|i| {
            cond(
                &format!("Istio{i}"),
                "True",
                "Ok",
                1,
                "2026-01-01T00:00:00Z",
            )
        })
        .collect();
    let seven: Vec<_> = istio[..7].to_vec();
    let status = json!({
        "conditions": istio,
        "listeners": [
            {"name": "full", "attachedRoutes": 0, "conditions": istio},
            {"name": "seven", "attachedRoutes": 0, "conditions": seven}]
    });
    let mut snap = snapshot(gateway(
        &[("full", Some(HOST)), ("seven", Some(HOST))],
        1,
        status,
    ));
    snap.dns_records = vec![healthy_record()];
    let e = eval_one(&snap);
    assert_eq!(e.status.conditions.as_ref().unwrap().len(), 8);
    assert!(find(e.status.conditions.as_deref().unwrap(), "LoadBalancerReady").is_none());
    assert_eq!(listener_conds(&e.status, "full").len(), 8);
    let seven = listener_conds(&e.status, "seven");
    assert_eq!(seven.len(), 8);
    assert_eq!(seven[7].type_, "DNSReady");
    assert_eq!(
        e.problems,
        vec![
            Problem::NoRoomForCondition {
                listener: None,
                condition_type: "LoadBalancerReady".into()
            },
            Problem::NoRoomForCondition {
                listener: None,
                condition_type: "DNSReady".into()
            },
            Problem::NoRoomForCondition {
                listener: Some("full".into()),
                condition_type: "DNSReady".into()
            },
        ]
    );
    assert_eq!(
        e.problems[0].to_string(),
        "no room for condition LoadBalancerReady in status.conditions: the list already has 8 conditions (the CRD's limit)"
    );
    // An existing condition of ours is still updated in a full list.
    let mut with_ours = istio_with_ours();
    with_ours.dns_records = vec![healthy_record()];
    let e = eval_one(&with_ours);
    assert!(e.problems.is_empty());
    assert_eq!(
        find(e.status.conditions.as_deref().unwrap(), "LoadBalancerReady")
            .unwrap()
            .status,
        "True"
    );
}

/// Eight foreign conditions: a list with no room left.
fn eight_foreign() -> Vec<serde_json::Value> {
    (0..8)
        .map(|i| {
            cond(
                &format!("Istio{i}"),
                "True",
                "Ok",
                1,
                "2026-01-01T00:00:00Z",
            )
        })
        .collect()
}

#[test]
fn gateway_dns_ready_counts_only_listener_dns_readys_written() {
    // "full" has no room: its DNSReady (RecordNotFound, False) is skipped;
    // "ok" gets NoFailedZones. The Gateway has room, and its DNSReady sums
    // up what the listeners carry: only "ok", so AllListenersReady.
    let status = json!({
        "listeners": [
            {"name": "full", "attachedRoutes": 0, "conditions": eight_foreign()},
            {"name": "ok", "attachedRoutes": 0, "conditions": []}]
    });
    let mut snap = snapshot(gateway(
        &[("full", Some("missing.example.com")), ("ok", Some(HOST))],
        1,
        status,
    ));
    snap.dns_records = vec![healthy_record()];
    let e = eval_one(&snap);
    assert!(find(listener_conds(&e.status, "full"), "DNSReady").is_none());
    assert_eq!(
        find(listener_conds(&e.status, "ok"), "DNSReady")
            .unwrap()
            .reason,
        "NoFailedZones"
    );
    let gw = find(e.status.conditions.as_deref().unwrap(), "DNSReady").unwrap();
    assert_eq!(
        (gw.status.as_str(), gw.reason.as_str()),
        ("True", "AllListenersReady")
    );
    assert_eq!(
        e.problems,
        vec![Problem::NoRoomForCondition {
            listener: Some("full".into()),
            condition_type: "DNSReady".into()
        }]
    );

    // The only listener with a hostname has no room: no listener carries
    // DNSReady, so the Gateway gets none (and a stale one is removed).
    let status = json!({
        "conditions": [cond("DNSReady", "False", "SomeListenersNotReady", 1, "2026-01-01T00:00:00Z")],
        "listeners": [
            {"name": "full", "attachedRoutes": 0, "conditions": eight_foreign()},
            {"name": "plain", "attachedRoutes": 0, "conditions": []}]
    });
    let mut snap = snapshot(gateway(&[("full", Some(HOST)), ("plain", None)], 1, status));
    snap.dns_records = vec![healthy_record()];
    let e = eval_one(&snap);
    let conds = e.status.conditions.as_deref().unwrap();
    assert!(find(conds, "DNSReady").is_none(), "{conds:?}");
    assert!(find(conds, "LoadBalancerReady").is_some());
}

#[test]
fn merge_derives_gateway_dns_ready_from_the_merged_listeners() {
    // Straight through `merge`: listener "a" (False) has no room, "b" (True)
    // is written; a Gateway-level DNSReady given in `desired` is ignored.
    let current: GatewayStatus = from(json!({
        "listeners": [
            {"name": "a", "attachedRoutes": 0, "conditions": eight_foreign()},
            {"name": "b", "attachedRoutes": 0, "conditions": []}]
    }));
    let desired = Desired {
        generation: Some(3),
        gateway: vec![verdict("LoadBalancerReady", 0), verdict("DNSReady", 1)],
        listeners: vec![
            ("a".into(), vec![verdict("DNSReady", 1)]),
            ("b".into(), vec![verdict("DNSReady", 0)]),
        ],
    };
    let (merged, problems) = merge(Some(&current), &desired, &everything(), now());
    let gw = find(merged.conditions.as_deref().unwrap(), "DNSReady").unwrap();
    assert_eq!(
        (
            gw.status.as_str(),
            gw.reason.as_str(),
            gw.observed_generation
        ),
        ("True", "AllListenersReady", Some(3))
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
}

fn istio_with_ours() -> gwhub_spoke_rules::Snapshot {
    let mut conds: Vec<_> = (0..7)
        .map(|i| {
            cond(
                &format!("Istio{i}"),
                "True",
                "Ok",
                1,
                "2026-01-01T00:00:00Z",
            )
        })
        .collect();
    conds.push(cond(
        "LoadBalancerReady",
        "False",
        "LoadBalancerPending",
        1,
        "2026-01-01T00:00:00Z",
    ));
    snapshot(gateway(&[("l", None)], 1, json!({"conditions": conds})))
}

#[test]
fn second_merge_needs_no_write_and_apply_patch_holds_only_ours() {
    let status = json!({
        "addresses": [{"type": "Hostname", "value": "lb.example.com"}],
        "conditions": [cond("Accepted", "True", "Accepted", 1, "2026-01-01T00:00:00Z")],
        "listeners": [{"name": "http", "attachedRoutes": 3,
            "supportedKinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}],
            "conditions": [cond("Accepted", "True", "Accepted", 1, "2026-01-01T00:00:00Z")]}]
    });
    let mut snap = snapshot(gateway(&[("http", Some(HOST)), ("plain", None)], 1, status));
    snap.dns_records = vec![healthy_record()];
    let first = eval_one(&snap);
    assert!(first.needs_write());
    snap.gateways[0].status = Some(first.status.clone());
    let later = gwhub_spoke_rules::evaluate(
        &snap,
        &gwhub_spoke_rules::Options::default(),
        t("2026-03-01T00:00:00Z"),
    )
    .unwrap()
    .remove(0);
    assert!(!later.needs_write());
    assert_eq!(later.status, first.status, "times kept too");

    let patch = first.apply_patch();
    assert_eq!(patch["apiVersion"], "gateway.networking.k8s.io/v1");
    assert_eq!(patch["kind"], "Gateway");
    assert_eq!(patch["metadata"], json!({"name": "gw", "namespace": NS}));
    let status = patch["status"].as_object().unwrap();
    assert_eq!(
        status.keys().collect::<Vec<_>>(),
        ["conditions", "listeners"]
    );
    assert_eq!(status["conditions"].as_array().unwrap().len(), 2);
    assert_eq!(status["conditions"][0]["type"], "LoadBalancerReady");
    assert_eq!(status["conditions"][1]["type"], "DNSReady");
    assert_eq!(
        status["conditions"][0]["lastTransitionTime"],
        "2026-01-12T10:00:00Z"
    );
    let listeners = status["listeners"].as_array().unwrap();
    assert_eq!(listeners.len(), 1, "plain has no conditions of ours");
    assert_eq!(listeners[0]["name"], "http");
    assert_eq!(listeners[0]["attachedRoutes"], 3);
    assert!(listeners[0].get("supportedKinds").is_none());
    let types: Vec<_> = listeners[0]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["DNSReady"]);
}

#[test]
fn needs_write_ignores_only_time() {
    let a: GatewayStatus =
        from(json!({"conditions": [cond("A", "True", "R", 1, "2026-01-01T00:00:00Z")]}));
    let b: GatewayStatus =
        from(json!({"conditions": [cond("A", "True", "R", 1, "2026-02-01T00:00:00Z")]}));
    let c: GatewayStatus =
        from(json!({"conditions": [cond("A", "True", "R", 2, "2026-01-01T00:00:00Z")]}));
    let d: GatewayStatus = from(
        json!({"conditions": [cond("A", "True", "R", 1, "2026-01-01T00:00:00Z")],
        "addresses": [{"value": "1.2.3.4"}]}),
    );
    assert!(!needs_write(&a, &b));
    assert!(needs_write(&a, &c));
    assert!(needs_write(&a, &d));
}

// ---- property tests ----

const OUR_TYPES: [&str; 3] = ["LoadBalancerReady", "DNSManaged", "DNSReady"];

fn arb_condition(ours: bool) -> impl Strategy<Value = serde_json::Value> {
    let types: Vec<&'static str> = if ours {
        OUR_TYPES.to_vec()
    } else {
        vec![
            "Accepted",
            "Programmed",
            "ResolvedRefs",
            "Conflicted",
            "Istio1",
            "Istio2",
            "Istio3",
            "Istio4",
            "Istio5",
        ]
    };
    (
        proptest::sample::select(types),
        proptest::sample::select(vec!["True", "False", "Unknown"]),
        1i64..4,
        0i64..1_000_000,
    )
        .prop_map(|(ty, st, generation, secs)| {
            let time = jiff::Timestamp::from_second(1_700_000_000 + secs)
                .unwrap()
                .to_string();
            cond(ty, st, "Reason", generation, &time)
        })
}

/// Up to 8 conditions with unique types, mixing ours and others'.
fn arb_conditions() -> impl Strategy<Value = Vec<serde_json::Value>> {
    proptest::collection::vec(
        prop_oneof![3 => arb_condition(false), 1 => arb_condition(true)],
        0..10,
    )
    .prop_map(|mut v| {
        let mut seen = std::collections::HashSet::new();
        v.retain(|c| seen.insert(c["type"].as_str().unwrap().to_owned()));
        v.truncate(8);
        v
    })
}

const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

fn arb_status() -> impl Strategy<Value = GatewayStatus> {
    (
        proptest::option::of(arb_conditions()),
        proptest::option::of(proptest::collection::vec(
            (proptest::sample::select(NAMES.to_vec()), 0i32..5, arb_conditions(), any::<bool>()),
            0..6,
        )),
        proptest::option::of(proptest::collection::vec("[a-z0-9.]{1,12}", 0..3)),
    )
        .prop_map(|(conds, listeners, addresses)| {
            let mut status = json!({});
            if let Some(c) = conds {
                status["conditions"] = json!(c);
            }
            if let Some(ls) = listeners {
                let mut seen = std::collections::HashSet::new();
                let ls: Vec<_> = ls
                    .into_iter()
                    .filter(|(n, ..)| seen.insert(*n))
                    .map(|(n, routes, conds, kinds)| {
                        let mut l = json!({"name": n, "attachedRoutes": routes, "conditions": conds});
                        if kinds {
                            l["supportedKinds"] = json!([{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}]);
                        }
                        l
                    })
                    .collect();
                status["listeners"] = json!(ls);
            }
            if let Some(a) = addresses {
                status["addresses"] = json!(a.iter().map(|v| json!({"type": "Hostname", "value": v})).collect::<Vec<_>>());
            }
            from(status)
        })
}

fn verdict(type_: &'static str, i: usize) -> Verdict {
    let (status, reason) = [("True", "Ok"), ("False", "Bad"), ("Unknown", "Hmm")][i % 3];
    Verdict {
        type_,
        status,
        reason,
        message: format!("{type_} {reason}"),
    }
}

fn arb_desired() -> impl Strategy<Value = Desired> {
    (
        1i64..4,
        0usize..3,
        proptest::sample::subsequence(NAMES.to_vec(), 0..=NAMES.len()),
        proptest::collection::vec((any::<bool>(), 0usize..3, 0usize..3), NAMES.len()),
    )
        .prop_map(|(generation, lb, names, shape)| Desired {
            generation: Some(generation),
            gateway: vec![verdict("LoadBalancerReady", lb)],
            listeners: names
                .into_iter()
                .zip(shape)
                .map(|(n, (host, _, r))| {
                    let vs = if host {
                        vec![verdict("DNSReady", r)]
                    } else {
                        vec![]
                    };
                    (n.to_owned(), vs)
                })
                .collect(),
        })
}

const GATEWAY_OURS: [&str; 2] = ["LoadBalancerReady", "DNSReady"];
const LISTENER_OURS: [&str; 1] = ["DNSReady"];

fn everything() -> Plan {
    Plan::everything(&Ownership::default())
}

/// The conditions of other writers: every type but ours at that level (a
/// `DNSManaged` of unknown origin, no managedFields saying the agent wrote
/// it, is someone else's).
fn foreign(list: &[gwhub_model::Condition], ours: &[&str]) -> Vec<gwhub_model::Condition> {
    list.iter()
        .filter(|c| !ours.contains(&c.type_.as_str()))
        .cloned()
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn merge_never_touches_other_writers(current in arb_status(), desired in arb_desired()) {
        let (merged, _) = merge(Some(&current), &desired, &everything(), now());
        // Gateway-level foreign conditions: all kept, unchanged, in order.
        prop_assert_eq!(
            foreign(current.conditions.as_deref().unwrap_or_default(), &GATEWAY_OURS),
            foreign(merged.conditions.as_deref().unwrap_or_default(), &GATEWAY_OURS)
        );
        prop_assert_eq!(&current.addresses, &merged.addresses);
        prop_assert_eq!(current.attached_listener_sets, merged.attached_listener_sets);
        // Every listener entry kept, in order, with its fields and foreign conditions.
        let before = current.listeners.clone().unwrap_or_default();
        let after = merged.listeners.clone().unwrap_or_default();
        prop_assert_eq!(after.len(), before.len(), "no entry created");
        for (b, a) in before.iter().zip(&after) {
            prop_assert_eq!(&b.name, &a.name);
            prop_assert_eq!(b.attached_routes, a.attached_routes);
            prop_assert_eq!(&b.supported_kinds, &a.supported_kinds);
            prop_assert_eq!(foreign(&b.conditions, &LISTENER_OURS), foreign(&a.conditions, &LISTENER_OURS));
        }
        // Limits.
        prop_assert!(merged.conditions.as_ref().is_none_or(|c| c.len() <= 8));
        prop_assert!(after.len() <= 64);
        for l in &after {
            prop_assert!(l.conditions.len() <= 8);
            // Ours only on spec listeners with a hostname.
            let wanted = desired.listeners.iter().any(|(n, v)| n == &l.name && !v.is_empty());
            if !wanted {
                prop_assert!(l.conditions.iter().all(|c| !LISTENER_OURS.contains(&c.type_.as_str())));
            }
        }
    }

    #[test]
    fn merging_twice_is_idempotent(current in arb_status(), desired in arb_desired(), later in 1i64..10_000_000) {
        let (once, problems_once) = merge(Some(&current), &desired, &everything(), now());
        let t2 = jiff::Timestamp::from_second(now().as_second() + later).unwrap();
        let (twice, problems_twice) = merge(Some(&once), &desired, &everything(), t2);
        prop_assert!(!needs_write(&once, &twice));
        prop_assert_eq!(&once, &twice);
        prop_assert_eq!(problems_once, problems_twice);
    }

    #[test]
    fn apply_patch_never_includes_foreign_fields(current in arb_status(), desired in arb_desired()) {
        let (merged, _) = merge(Some(&current), &desired, &everything(), now());
        let gw = gateway(&[], 1, json!({}));
        let patch = apply_patch(&gw, &merged, &everything());
        let status = &patch["status"];
        prop_assert!(status.get("addresses").is_none());
        for c in status["conditions"].as_array().into_iter().flatten() {
            let ty = c["type"].as_str().unwrap();
            prop_assert!(ty == "LoadBalancerReady" || ty == "DNSReady");
        }
        for l in status["listeners"].as_array().into_iter().flatten() {
            prop_assert!(l.get("supportedKinds").is_none());
            for c in l["conditions"].as_array().unwrap() {
                let ty = c["type"].as_str().unwrap();
                prop_assert_eq!(ty, "DNSReady");
            }
        }
    }
}

#[test]
fn auto_leaves_types_another_manager_writes_and_carries_our_share() {
    // The operator (Update) owns the Gateway-level DNSReady, where the agent
    // also still owns fields from before: in auto the agent keeps the live
    // condition (what the operator wrote) and applies it unchanged; it still
    // computes and writes LoadBalancerReady and the listener DNSReady.
    let status = json!({
        "conditions": [cond("DNSReady", "False", "SomeListenersNotReady", 1, "2026-01-01T00:00:00Z")],
    });
    let mut gw = gateway(&[("l", Some(HOST))], 1, status);
    let dns_ready = json!({"f:status": {"f:conditions": {"k:{\"type\":\"DNSReady\"}": {".": {}, "f:message": {}}}}});
    gw.metadata.managed_fields = Some(from(json!([
        {"manager": "gwhub-agent", "operation": "Apply", "subresource": "status",
         "fieldsType": "FieldsV1", "fieldsV1": dns_ready},
        {"manager": "ingress-operator", "operation": "Update",
         "fieldsType": "FieldsV1", "fieldsV1": dns_ready}
    ])));
    let mut snap = snapshot(gw);
    snap.dns_records = vec![healthy_record()];
    let e = gwhub_spoke_rules::engine::evaluate_with(
        &snap,
        &gwhub_spoke_rules::Options::default(),
        gwhub_spoke_rules::ownership::WriteMode::Auto,
        now(),
    )
    .unwrap()
    .remove(0);
    assert_eq!(
        e.plan.mode(),
        gwhub_spoke_rules::ownership::GatewayMode::Partial
    );
    let conds = e.status.conditions.as_deref().unwrap();
    assert_eq!(
        find(conds, "DNSReady").unwrap().reason,
        "SomeListenersNotReady",
        "live kept"
    );
    assert_eq!(
        find(conds, "LoadBalancerReady").unwrap().reason,
        "LoadBalancerProvisioned"
    );
    assert_eq!(
        find(listener_conds(&e.status, "l"), "DNSReady")
            .unwrap()
            .reason,
        "NoFailedZones"
    );
    let patch = e.apply_patch();
    let applied: Vec<(&str, &str)> = patch["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["type"].as_str().unwrap(), c["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        applied,
        [
            ("DNSReady", "SomeListenersNotReady"),
            ("LoadBalancerReady", "LoadBalancerProvisioned")
        ]
    );
    // Under `true` (as `evaluate` and `compute` do) every type is computed.
    let all = gwhub_spoke_rules::evaluate(&snap, &gwhub_spoke_rules::Options::default(), now())
        .unwrap()
        .remove(0);
    assert_eq!(
        find(all.status.conditions.as_deref().unwrap(), "DNSReady")
            .unwrap()
            .reason,
        "AllListenersReady"
    );
}
