//! The Gateway CRD generated from the Rust types (what a clone without
//! `../shared` runs its API-server tests against) validates status exactly
//! as upstream Gateway API v1.5.1 does: the same fields, types, limits,
//! patterns, enums, defaults, list markers, list-map keys and required
//! fields, at every level of `status` (CEL rules and descriptions aside:
//! API server 1.20 runs no CEL). Compared where `../shared` holds the
//! upstream CRD; skipped (and said so) elsewhere, except under `CI=true`.

use std::path::PathBuf;

use serde_json::Value;

/// The keywords that make validation; everything else (descriptions, CEL)
/// is left out of the comparison.
const KEYWORDS: &[&str] = &[
    "type",
    "format",
    "maxItems",
    "minItems",
    "maxLength",
    "minLength",
    "minimum",
    "maximum",
    "pattern",
    "enum",
    "default",
    "required",
    "nullable",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "oneOf",
    "anyOf",
    "not",
];

fn upstream_gateway_crd() -> Option<Value> {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/crds/gateway-api-v1.5.1/gateway.networking.k8s.io_gateways.yaml"
    ));
    if !path.exists() {
        return None;
    }
    let objs = gwhub_spoke_rules::manifest::read_paths(&[path]).expect("the upstream CRD parses");
    objs.into_iter()
        .find(|o| o.kind == "CustomResourceDefinition")
        .map(|o| o.value)
}

fn status_schema(crd: &Value) -> Value {
    let versions = crd["spec"]["versions"].as_array().expect("versions");
    let v1 = versions
        .iter()
        .find(|v| v["name"] == "v1")
        .expect("a v1 version");
    v1["schema"]["openAPIV3Schema"]["properties"]["status"].clone()
}

/// Every difference in the validating keywords between `want` and `have`,
/// as `path: keyword: want != have`.
fn differences(path: &str, want: &Value, have: &Value, out: &mut Vec<String>) {
    for k in KEYWORDS {
        let (w, h) = (&want[*k], &have[*k]);
        let same = match (*k, w, h) {
            // Order does not matter in these.
            ("required" | "enum", Value::Array(w), Value::Array(h)) => {
                let mut w: Vec<String> = w.iter().map(Value::to_string).collect();
                let mut h: Vec<String> = h.iter().map(Value::to_string).collect();
                w.sort();
                h.sort();
                w == h
            }
            _ => w == h,
        };
        if !same {
            out.push(format!("{path}: {k}: upstream {w} != generated {h}"));
        }
    }
    let props = |v: &Value| {
        v["properties"]
            .as_object()
            .map(|m| m.keys().cloned().collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let (wp, hp) = (props(want), props(have));
    for name in wp.iter().chain(hp.iter().filter(|n| !wp.contains(n))) {
        differences(
            &format!("{path}.{name}"),
            &want["properties"][name],
            &have["properties"][name],
            out,
        );
    }
    if want.get("items").is_some() || have.get("items").is_some() {
        differences(&format!("{path}[]"), &want["items"], &have["items"], out);
    }
}

#[test]
fn generated_gateway_status_schema_is_upstream_v1_5_1() {
    let Some(upstream) = upstream_gateway_crd() else {
        let strict = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(
            !strict,
            "../shared/crds/gateway-api-v1.5.1 is missing: the generated CRD cannot be checked"
        );
        eprintln!(
            "SKIPPED generated_gateway_status_schema_is_upstream_v1_5_1: no ../shared/crds/gateway-api-v1.5.1"
        );
        return;
    };
    let mut want = status_schema(&upstream);
    gwhub_test_kit::crds::sanitize(&mut want);
    let generated = gwhub_test_kit::crds::generated();
    let gateway = generated
        .iter()
        .find(|c| c["spec"]["names"]["kind"] == "Gateway")
        .expect("a generated Gateway CRD");
    let mut have = status_schema(gateway);
    gwhub_test_kit::crds::sanitize(&mut have);
    let mut diff = Vec::new();
    differences("status", &want, &have, &mut diff);
    assert!(
        diff.is_empty(),
        "the generated Gateway status schema differs from upstream v1.5.1:\n{}",
        diff.join("\n")
    );
}

/// An upstream cluster-inventory-api CRD (`multicluster.x-k8s.io_<plural>.yaml`),
/// if `../shared` holds it.
fn upstream_inventory_crd(plural: &str) -> Option<Value> {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/crds/cluster-inventory-api"
    ))
    .join(format!("multicluster.x-k8s.io_{plural}.yaml"));
    if !path.exists() {
        return None;
    }
    let objs = gwhub_spoke_rules::manifest::read_paths(&[path]).expect("the upstream CRD parses");
    objs.into_iter()
        .find(|o| o.kind == "CustomResourceDefinition")
        .map(|o| o.value)
}

fn v1alpha1_schema(crd: &Value) -> Value {
    let versions = crd["spec"]["versions"].as_array().expect("versions");
    let v = versions
        .iter()
        .find(|v| v["name"] == "v1alpha1")
        .expect("a v1alpha1 version");
    v["schema"]["openAPIV3Schema"].clone()
}

/// The ClusterProfile CRD generated from `gwhub_hub_rules::inventory`
/// (what a clone without `../shared` and `manifests/inventory/` install)
/// is upstream's where the hub and its tests use it: the names, scope and
/// status subresource; the whole `spec` (every validating keyword); and
/// `status.conditions`, the one status field the type carries. Upstream's
/// other status fields are the cluster manager's, unread by the hub.
#[test]
fn generated_cluster_profile_crd_is_upstream_where_used() {
    let Some(mut upstream) = upstream_inventory_crd("clusterprofiles") else {
        let strict = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(
            !strict,
            "../shared/crds/cluster-inventory-api is missing: the generated CRD cannot be checked"
        );
        eprintln!(
            "SKIPPED generated_cluster_profile_crd_is_upstream_where_used: no ../shared/crds/cluster-inventory-api"
        );
        return;
    };
    gwhub_test_kit::crds::sanitize(&mut upstream);
    let mut generated = gwhub_test_kit::crds::generated_inventory()
        .into_iter()
        .find(|c| c["spec"]["names"]["kind"] == "ClusterProfile")
        .expect("a generated ClusterProfile CRD");
    gwhub_test_kit::crds::sanitize(&mut generated);
    for field in ["/metadata/name", "/spec/group", "/spec/scope"] {
        assert_eq!(upstream.pointer(field), generated.pointer(field), "{field}");
    }
    // (listKind: the API server defaults it to ClusterProfileList.)
    for name in ["kind", "plural", "singular"] {
        assert_eq!(
            upstream["spec"]["names"][name], generated["spec"]["names"][name],
            "names.{name}"
        );
    }
    assert_eq!(
        upstream["spec"]["versions"][0]["subresources"],
        generated["spec"]["versions"][0]["subresources"]
    );
    let (want, have) = (v1alpha1_schema(&upstream), v1alpha1_schema(&generated));
    let mut diff = Vec::new();
    differences(
        "spec",
        &want["properties"]["spec"],
        &have["properties"]["spec"],
        &mut diff,
    );
    let conditions = "/properties/status/properties/conditions";
    differences(
        "status.conditions",
        want.pointer(conditions)
            .expect("upstream status.conditions"),
        have.pointer(conditions)
            .expect("generated status.conditions"),
        &mut diff,
    );
    assert_eq!(want["required"], have["required"], "required at the top");
    assert!(
        diff.is_empty(),
        "the generated ClusterProfile CRD differs from upstream:\n{}",
        diff.join("\n")
    );
}

/// The PlacementDecision CRD the type carries is upstream's, every
/// validating keyword of the whole schema (descriptions aside).
#[test]
fn placement_decision_crd_is_upstream() {
    let Some(mut upstream) = upstream_inventory_crd("placementdecisions") else {
        let strict = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(
            !strict,
            "../shared/crds/cluster-inventory-api is missing: the PlacementDecision CRD cannot be checked"
        );
        eprintln!(
            "SKIPPED placement_decision_crd_is_upstream: no ../shared/crds/cluster-inventory-api"
        );
        return;
    };
    gwhub_test_kit::crds::sanitize(&mut upstream);
    let generated = gwhub_hub_rules::inventory::PlacementDecision::crd();
    for field in [
        "/metadata/name",
        "/spec/group",
        "/spec/scope",
        "/spec/names/kind",
        "/spec/names/plural",
        "/spec/names/singular",
    ] {
        assert_eq!(upstream.pointer(field), generated.pointer(field), "{field}");
    }
    let mut diff = Vec::new();
    differences(
        "",
        &v1alpha1_schema(&upstream),
        &v1alpha1_schema(&generated),
        &mut diff,
    );
    assert!(
        diff.is_empty(),
        "the PlacementDecision CRD differs from upstream:\n{}",
        diff.join("\n")
    );
}

/// `manifests/inventory/` ships the generated ClusterProfile and
/// PlacementDecision CRDs, for a fleet without a cluster manager; run with `GWHUB_BLESS=1` to rewrite it.
#[test]
fn shipped_inventory_crd_is_the_generated_one() {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../manifests/inventory/crds.yaml"
    ));
    let crds = gwhub_test_kit::crds::generated_inventory();
    let body: Vec<String> = crds
        .iter()
        .map(|c| serde_norway::to_string(c).expect("YAML"))
        .collect();
    let want = format!(
        "# Generated from gwhub_hub_rules::inventory (the SIG-Multicluster\n\
         # ClusterProfile and PlacementDecision, KEP-4322); do not edit. For a\n\
         # fleet without a cluster manager; tests/tests/crd_pin.rs pins them to\n\
         # upstream.\n\
         # Regenerate: GWHUB_BLESS=1 cargo test -p gwhub-tests --test suites crd_pin::\n{}",
        body.join("---\n")
    );
    if std::env::var("GWHUB_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is out of date: GWHUB_BLESS=1 cargo test -p gwhub-tests --test suites crd_pin::",
        path.display()
    );
}

/// The DNSEndpoint CRD generated from `gwhub_hub_rules::dnsendpoint`
/// (what a clone without `../shared` installs for fleet DNS) is upstream
/// external-dns's: names, scope, status subresource, and every validating
/// keyword of the whole schema.
#[test]
fn generated_dnsendpoint_crd_is_upstream() {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/crds/external-dns/dnsendpoints.externaldns.k8s.io.yaml"
    ));
    if !path.exists() {
        let strict = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(
            !strict,
            "../shared/crds/external-dns is missing: the DNSEndpoint CRD cannot be checked"
        );
        eprintln!("SKIPPED generated_dnsendpoint_crd_is_upstream: no ../shared/crds/external-dns");
        return;
    }
    let upstream = gwhub_spoke_rules::manifest::read_paths(&[path])
        .expect("the upstream CRD parses")
        .into_iter()
        .find(|o| o.kind == "CustomResourceDefinition")
        .map(|o| o.value)
        .expect("a CRD");
    let generated = gwhub_hub_rules::dnsendpoint::generated_crd();
    for field in [
        "/metadata/name",
        "/spec/group",
        "/spec/scope",
        "/spec/names/kind",
        "/spec/names/plural",
        "/spec/names/singular",
        "/spec/versions/0/name",
        "/spec/versions/0/subresources",
    ] {
        assert_eq!(upstream.pointer(field), generated.pointer(field), "{field}");
    }
    let mut diff = Vec::new();
    differences(
        "",
        &v1alpha1_schema(&upstream),
        &v1alpha1_schema(&generated),
        &mut diff,
    );
    assert!(
        diff.is_empty(),
        "the generated DNSEndpoint CRD differs from upstream:\n{}",
        diff.join("\n")
    );
}
