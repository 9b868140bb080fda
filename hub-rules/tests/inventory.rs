//! Table tests of the fleet inventory's rules: label selectors in their
//! string form (parsed and matched as Kubernetes does), who may stream, and
//! which clusters a selector selects.

use std::collections::BTreeMap;

use gwhub_hub_rules::inventory::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn selectors_match_as_kubernetes_does() {
    let prod_eu = labels(&[("env", "prod"), ("region", "eu"), ("gpu", "")]);
    let dev_us = labels(&[("env", "dev"), ("region", "us")]);
    let none = labels(&[]);
    // selector, matches (prod_eu, dev_us, none)
    let cases: &[(&str, [bool; 3])] = &[
        ("", [true, true, true]),
        ("   ", [true, true, true]),
        ("env=prod", [true, false, false]),
        ("env==prod", [true, false, false]),
        ("env = prod", [true, false, false]),
        ("env!=prod", [false, true, true]),
        ("env", [true, true, false]),
        ("!env", [false, false, true]),
        ("! gpu", [false, true, true]),
        ("gpu", [true, false, false]),
        ("gpu=", [true, false, false]),
        ("region in (eu,us)", [true, true, false]),
        ("region in ( eu , ap )", [true, false, false]),
        ("region in(us)", [false, true, false]),
        ("region notin (eu)", [false, true, true]),
        ("env=prod,region=eu", [true, false, false]),
        ("env=prod,region=us", [false, false, false]),
        ("env in (prod,dev),!gpu", [false, true, false]),
        ("a=b,c!=d,region in (eu,us),!f,env", [false, false, false]),
        ("c!=d,region in (eu,us),!f,env", [true, true, false]),
        ("example.com/tier=gold", [false, false, false]),
    ];
    for (selector, want) in cases {
        let s = Selector::parse(selector).unwrap_or_else(|e| panic!("{selector:?}: {e}"));
        let have = [s.matches(&prod_eu), s.matches(&dev_us), s.matches(&none)];
        assert_eq!(&have, want, "selector {selector:?}");
    }
}

#[test]
fn bad_selectors_name_the_requirement_and_the_problem() {
    let cases: &[(&str, &str, &str)] = &[
        ("env=prod,", "", "empty requirement"),
        ("env=prod,,x", "", "empty requirement"),
        ("region in eu", "region in eu", "parenthesised list"),
        ("region in ()", "region in ()", "empty"),
        ("region exists", "region exists", "expected one of"),
        ("env=pr od", "env=pr od", "not a label value"),
        ("env=-x", "env=-x", "not a label value"),
        ("=x", "=x", "empty name"),
        ("Bad_Prefix/x=y", "Bad_Prefix/x=y", "invalid prefix"),
        ("env>3", "env>3", "not a label key"),
    ];
    for (selector, requirement, problem) in cases {
        let e = Selector::parse(selector).expect_err(selector);
        if !requirement.is_empty() {
            assert_eq!(e.requirement, *requirement, "{selector:?}");
        }
        assert!(
            e.problem.to_string().contains(problem),
            "{selector:?}: {}",
            e.problem
        );
        assert!(e.to_string().contains(&format!("{selector:?}")), "{e}");
    }
    let long = format!("k={}", "a".repeat(64));
    let e = Selector::parse(&long).unwrap_err();
    assert!(e.problem.to_string().contains("longer than 63"), "{e}");
    assert!(Selector::parse(&format!("k={}", "a".repeat(63))).is_ok());
}

fn inventory(mode: Mode, synced: bool) -> Inventory {
    let mut inv = Inventory::new("fleet", mode);
    inv.synced = synced;
    inv.clusters
        .insert("east".into(), labels(&[("region", "us")]));
    inv.clusters
        .insert("north".into(), labels(&[("region", "eu")]));
    inv.clusters
        .insert("west".into(), labels(&[("region", "us")]));
    inv
}

#[test]
fn admission_follows_the_inventory_and_its_mode() {
    let enforce = inventory(Mode::Enforce, true);
    assert_eq!(enforce.admit("east"), Ok(Admitted::Member));
    let refused = enforce.admit("rogue").unwrap_err();
    assert_eq!(
        refused.to_string(),
        "cluster \"rogue\" is not in the fleet inventory: no ClusterProfile \"rogue\" in namespace \"fleet\""
    );
    let observe = inventory(Mode::Observe, true);
    assert_eq!(observe.admit("rogue"), Ok(Admitted::Outside));
    assert_eq!(observe.admit("west"), Ok(Admitted::Member));
    // Before the first list nobody is turned away for good.
    for mode in [Mode::Enforce, Mode::Observe] {
        let e = inventory(mode, false).admit("east").unwrap_err();
        assert!(matches!(e, Refusal::NotLoaded { .. }), "{e}");
        assert!(e.to_string().contains("\"fleet\""), "{e}");
    }
}

#[test]
fn selectors_pick_inventory_clusters_in_name_order() {
    let inv = inventory(Mode::Enforce, true);
    let cases: &[(&str, &[&str])] = &[
        ("", &["east", "north", "west"]),
        ("region=us", &["east", "west"]),
        ("region notin (us)", &["north"]),
        ("tier", &[]),
    ];
    for (selector, want) in cases {
        let s = Selector::parse(selector).unwrap();
        assert_eq!(inv.select(&s), *want, "{selector:?}");
    }
}

#[test]
fn modes_parse_and_print() {
    for mode in [Mode::Enforce, Mode::Observe] {
        assert_eq!(mode.to_string().parse::<Mode>(), Ok(mode));
    }
    assert!(
        "strict"
            .parse::<Mode>()
            .unwrap_err()
            .to_string()
            .contains("\"strict\"")
    );
}

fn placement(ns: &str, name: &str, key: Option<&str>, clusters: &[&str]) -> Placement {
    let d: PlacementDecision = serde_json::from_value(serde_json::json!({
        "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "PlacementDecision",
        "metadata": {"name": name, "namespace": ns,
                     "labels": key.map(|k| serde_json::json!({DECISION_KEY_LABEL: k}))
                                  .unwrap_or_else(|| serde_json::json!({}))},
        "decisions": clusters.iter()
            .map(|c| serde_json::json!({"clusterProfileRef": {"name": c}, "reason": "fits"}))
            .collect::<Vec<_>>(),
        "schedulerName": "test"
    }))
    .unwrap();
    Placement::of(&d)
}

/// `gwhub.io/placement` names a PlacementDecision in the hub Gateway's
/// namespace by name, or every slice of a decision by its decision key.
#[test]
fn placements_resolve_by_name_or_decision_key_in_the_namespace() {
    let all = [
        placement("apps", "web-0", Some("web"), &["east", "west"]),
        placement("apps", "web-1", Some("web"), &["north"]),
        placement("apps", "api", None, &["east"]),
        placement("other", "web", None, &["south"]),
        placement("apps", "empty", None, &[]),
    ];
    let cases: &[(&str, &str, Option<&[&str]>)] = &[
        ("apps", "web", Some(&["east", "north", "west"])),
        ("apps", "web-1", Some(&["north"])),
        ("apps", "api", Some(&["east"])),
        ("other", "web", Some(&["south"])),
        ("apps", "empty", Some(&[])),
        ("apps", "nope", None),
        ("third", "web", None),
    ];
    for (ns, reference, want) in cases {
        let have = placed_clusters(&all, ns, reference);
        let want = want.map(|w| w.iter().map(|c| (*c).to_owned()).collect());
        assert_eq!(have, want, "{ns}/{reference}");
    }
}
