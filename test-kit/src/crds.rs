//! The CRDs the tests run against: the upstream files in `../shared/crds`
//! when they are there (Gateway API `GATEWAY_API_VERSION`, default v1.5.1,
//! one of the versions OpenShift ships; OpenShift's own), made loadable by
//! API server 1.20 (no CEL, no empty-string defaults); otherwise CRDs
//! generated from the Rust types with the upstream limits added in code.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, CustomResourceExt};
use serde_json::Value;

use crate::error::FleetError;

/// `GWHUB_CRDS_DIR`, else `../shared/crds` beside the project.
pub(crate) fn upstream_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("GWHUB_CRDS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/crds"))
        });
    dir.is_dir().then_some(dir)
}

/// The Gateway API versions OpenShift ships: v1.2.1 (4.19, 4.20), v1.3.0
/// (4.21), v1.4.1 (4.22), v1.5.1 (4.23); and upstream v1.6.1, which no
/// OpenShift release ships yet but a management cluster on upstream Gateway
/// API may run (the hub's writes are tested against it).
pub(crate) const GATEWAY_API_VERSIONS: [&str; 5] =
    ["v1.2.1", "v1.3.0", "v1.4.1", "v1.5.1", "v1.6.1"];
/// The version when `GATEWAY_API_VERSION` is unset.
pub(crate) const DEFAULT_GATEWAY_API_VERSION: &str = "v1.5.1";

/// `GATEWAY_API_VERSION` (one of [`GATEWAY_API_VERSIONS`]), else
/// [`DEFAULT_GATEWAY_API_VERSION`]: the Gateway API CRDs of the whole test
/// run (a test may still give clusters their own, see
/// [`crate::apiserver::Fleet::start_versions`]).
pub(crate) fn gateway_api_version() -> Result<String, FleetError> {
    match std::env::var("GATEWAY_API_VERSION") {
        Err(_) => Ok(DEFAULT_GATEWAY_API_VERSION.to_owned()),
        Ok(v) if v.is_empty() => Ok(DEFAULT_GATEWAY_API_VERSION.to_owned()),
        Ok(v) => check_version(&v).map(|()| v),
    }
}

fn check_version(v: &str) -> Result<(), FleetError> {
    if GATEWAY_API_VERSIONS.contains(&v) {
        Ok(())
    } else {
        Err(FleetError::Start(format!(
            "GATEWAY_API_VERSION={v:?} is not one of {}",
            GATEWAY_API_VERSIONS.join(", ")
        )))
    }
}

/// Every CRD the tests need, ready for API server 1.20, with the run's
/// Gateway API version (`gateway_api_version`).
pub fn load() -> Result<Vec<Value>, FleetError> {
    load_version(&gateway_api_version()?)
}

/// [`load`] with Gateway API `version` (one of [`GATEWAY_API_VERSIONS`]).
/// Without the upstream files the generated CRDs stand in whatever the version.
pub(crate) fn load_version(version: &str) -> Result<Vec<Value>, FleetError> {
    check_version(version)?;
    let mut crds = match upstream_dir() {
        Some(dir) => {
            let gateway_api = dir.join(format!("gateway-api-{version}"));
            if !gateway_api.is_dir() {
                return Err(FleetError::Start(format!(
                    "{} is missing (Gateway API {version} CRDs)",
                    gateway_api.display()
                )));
            }
            let objs =
                gwhub_spoke_rules::manifest::read_paths(&[gateway_api, dir.join("openshift")])
                    .map_err(|e| FleetError::Start(e.to_string()))?;
            objs.into_iter()
                .filter(|o| o.kind == "CustomResourceDefinition")
                .map(|o| o.value)
                .collect()
        }
        None => generated(),
    };
    for crd in &mut crds {
        sanitize(crd);
    }
    Ok(crds)
}

/// Removes what API server 1.20 cannot load: CEL rules and `default: ""`.
pub fn sanitize(node: &mut Value) {
    match node {
        Value::Object(map) => {
            map.remove("x-kubernetes-validations");
            if map.get("default") == Some(&Value::String(String::new())) {
                map.remove("default");
            }
            map.values_mut().for_each(sanitize);
        }
        Value::Array(items) => items.iter_mut().for_each(sanitize),
        _ => {}
    }
}

/// CRDs from the Rust types, for a clone without `../shared`. The crate's
/// schema lacks the upstream limits and list markers, so they are added here.
pub fn generated() -> Vec<Value> {
    use gateway_api::apis::standard::{gatewayclasses::GatewayClass, gateways::Gateway};
    let mut gateway = serde_json::to_value(Gateway::crd()).unwrap_or_default();
    if let Some(status) =
        gateway.pointer_mut("/spec/versions/0/schema/openAPIV3Schema/properties/status")
    {
        pin_status_defaults(status);
    }
    if let Some(status) =
        gateway.pointer_mut("/spec/versions/0/schema/openAPIV3Schema/properties/status/properties")
    {
        set_list(status, "addresses", 16, None);
        set_list(status, "conditions", 8, Some("type"));
        set_list(status, "listeners", 64, Some("name"));
        limit_conditions(status.pointer_mut("/conditions/items/properties"));
        if let Some(value) = status
            .pointer_mut("/addresses/items/properties/value")
            .and_then(Value::as_object_mut)
        {
            value.insert("minLength".into(), 1.into());
            value.insert("maxLength".into(), 253.into());
        }
        extend(
            status.pointer_mut("/addresses/items/properties/type"),
            serde_json::json!({"minLength": 1, "maxLength": 253, "default": "IPAddress",
                "pattern": r"^Hostname|IPAddress|NamedAddress|[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9\/\-._~%!$&'()*+,;=:]+$"}),
        );
        // An IPAddress address must be an IPv4 or IPv6 address.
        extend(
            status.pointer_mut("/addresses/items"),
            serde_json::json!({"oneOf": [
                {"properties": {"type": {"enum": ["IPAddress"]},
                                "value": {"anyOf": [{"format": "ipv4"}, {"format": "ipv6"}]}}},
                {"properties": {"type": {"not": {"enum": ["IPAddress"]}}}}
            ]}),
        );
        if let Some(items) = status.pointer_mut("/listeners/items/properties") {
            set_list(items, "conditions", 8, Some("type"));
            limit_conditions(items.pointer_mut("/conditions/items/properties"));
            set_list(items, "supportedKinds", 8, None);
            extend(
                items.pointer_mut("/supportedKinds/items/properties/group"),
                serde_json::json!({"maxLength": 253, "default": "gateway.networking.k8s.io",
                    "pattern": r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"}),
            );
            extend(
                items.pointer_mut("/supportedKinds/items/properties/kind"),
                serde_json::json!({"minLength": 1, "maxLength": 63,
                    "pattern": "^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$"}),
            );
            if let Some(name) = items.get_mut("name").and_then(Value::as_object_mut) {
                name.insert("minLength".into(), 1.into());
                name.insert("maxLength".into(), 253.into());
                name.insert(
                    "pattern".into(),
                    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$".into(),
                );
            }
        }
    }
    let mut class = serde_json::to_value(GatewayClass::crd()).unwrap_or_default();
    use gwhub_spoke_rules::openshift::{DNS, DNSRecord};
    let mut openshift: Vec<Value> = [DNSRecord::crd(), DNS::crd()]
        .into_iter()
        .map(|c| serde_json::to_value(c).unwrap_or_default())
        .collect();
    for crd in openshift.iter_mut() {
        drop_null_enum_values(crd);
        // openshift.io groups also require the approval annotation.
        crd["metadata"]["annotations"] = serde_json::json!({
            "api-approved.openshift.io": "https://github.com/openshift/api/pull/1"
        });
    }
    for crd in [&mut gateway, &mut class] {
        drop_null_enum_values(crd);
        // Groups under k8s.io must carry the approval annotation upstream uses.
        crd["metadata"]["annotations"] = serde_json::json!({
            "api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/gateway-api/pull/3328"
        });
    }
    let mut all = vec![gateway, class];
    all.extend(openshift);
    all
}

/// What upstream's Gateway status has beyond the Rust types: no `null` is
/// a valid value anywhere in it (schemars marks every `Option` nullable),
/// and a new Gateway's status defaults to Accepted and Programmed Unknown
/// (`Pending`), so other writers find two conditions already there.
fn pin_status_defaults(status: &mut Value) {
    fn drop_nullable(node: &mut Value) {
        match node {
            Value::Object(map) => {
                map.remove("nullable");
                map.values_mut().for_each(drop_nullable);
            }
            Value::Array(items) => items.iter_mut().for_each(drop_nullable),
            _ => {}
        }
    }
    drop_nullable(status);
    let pending = |t: &str| {
        serde_json::json!({"type": t, "status": "Unknown", "reason": "Pending",
            "message": "Waiting for controller", "lastTransitionTime": "1970-01-01T00:00:00Z"})
    };
    let conditions = serde_json::json!([pending("Accepted"), pending("Programmed")]);
    extend(
        Some(&mut *status),
        serde_json::json!({"default": {"conditions": conditions.clone()}}),
    );
    extend(
        status.pointer_mut("/properties/conditions"),
        serde_json::json!({ "default": conditions }),
    );
}

/// Adds the keywords of `rules` (an object) to the schema `target`.
fn extend(target: Option<&mut Value>, rules: Value) {
    if let (Some(Value::Object(target)), Value::Object(rules)) = (target, rules) {
        target.extend(rules);
    }
}

/// schemars lists `null` among the values of an optional enum; structural
/// schemas express that with `nullable` instead, and API servers reject `null`.
fn drop_null_enum_values(node: &mut Value) {
    match node {
        Value::Object(map) => {
            if let Some(Value::Array(values)) = map.get_mut("enum")
                && values.iter().any(Value::is_null)
            {
                values.retain(|v| !v.is_null());
                map.insert("nullable".into(), true.into());
            }
            map.values_mut().for_each(drop_null_enum_values);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_null_enum_values),
        _ => {}
    }
}

/// metav1.Condition's validation, as every upstream CRD carries it.
fn limit_conditions(props: Option<&mut Value>) {
    let Some(props) = props else { return };
    let mut set = |field: &str, rules: Value| {
        if let (Some(target), Value::Object(rules)) =
            (props.get_mut(field).and_then(Value::as_object_mut), rules)
        {
            target.extend(rules);
        }
    };
    set("message", serde_json::json!({"maxLength": 32768}));
    set(
        "reason",
        serde_json::json!({"minLength": 1, "maxLength": 1024,
            "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"}),
    );
    set(
        "type",
        serde_json::json!({"maxLength": 316,
            "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"}),
    );
    set(
        "status",
        serde_json::json!({"enum": ["True", "False", "Unknown"]}),
    );
    set("observedGeneration", serde_json::json!({"minimum": 0}));
}

fn set_list(props: &mut Value, field: &str, max: u64, key: Option<&str>) {
    let Some(list) = props.get_mut(field).and_then(Value::as_object_mut) else {
        return;
    };
    list.insert("maxItems".into(), max.into());
    match key {
        Some(k) => {
            list.insert("x-kubernetes-list-type".into(), "map".into());
            list.insert("x-kubernetes-list-map-keys".into(), vec![k].into());
        }
        None => {
            list.insert("x-kubernetes-list-type".into(), "atomic".into());
        }
    }
}

/// Applies the CRDs (the run's Gateway API version) and waits until each is
/// established and served.
pub async fn install(client: &Client) -> Result<(), FleetError> {
    install_version(client, &gateway_api_version()?).await
}

/// [`install`] with Gateway API `version`.
pub(crate) async fn install_version(client: &Client, version: &str) -> Result<(), FleetError> {
    apply_and_wait(client, load_version(version)?).await
}

/// The fleet inventory's CRDs (`multicluster.x-k8s.io`: ClusterProfile,
/// PlacementDecision):
/// upstream's `cluster-inventory-api` when `../shared/crds` holds it, else
/// generated from the Rust types ([`generated_inventory`]); either way
/// loadable by API server 1.20.
pub fn inventory() -> Result<Vec<Value>, FleetError> {
    let upstream = upstream_dir()
        .map(|d| d.join("cluster-inventory-api"))
        .filter(|d| d.is_dir());
    let mut crds = match upstream {
        Some(dir) => gwhub_spoke_rules::manifest::read_paths(&[dir])
            .map_err(|e| FleetError::Start(e.to_string()))?
            .into_iter()
            .filter(|o| o.kind == "CustomResourceDefinition")
            .map(|o| o.value)
            .collect(),
        None => generated_inventory(),
    };
    for crd in &mut crds {
        sanitize(crd);
    }
    Ok(crds)
}

/// The ClusterProfile CRD from the Rust type, with what upstream has beyond
/// it where the hub's use depends on it (no `null` values, conditions a
/// list keyed by type), and the PlacementDecision CRD the type carries;
/// `tests/tests/crd_pin.rs` compares them with upstream.
pub fn generated_inventory() -> Vec<Value> {
    use gwhub_hub_rules::inventory::ClusterProfile;
    let mut crd = serde_json::to_value(ClusterProfile::crd()).unwrap_or_default();
    fn drop_nullable(node: &mut Value) {
        match node {
            Value::Object(map) => {
                map.remove("nullable");
                map.values_mut().for_each(drop_nullable);
            }
            Value::Array(items) => items.iter_mut().for_each(drop_nullable),
            _ => {}
        }
    }
    if let Some(schema) = crd.pointer_mut("/spec/versions/0/schema/openAPIV3Schema") {
        drop_nullable(schema);
        if let Some(status) = schema.pointer_mut("/properties/status/properties") {
            set_list(status, "conditions", u64::MAX, Some("type"));
            if let Some(list) = status.get_mut("conditions").and_then(Value::as_object_mut) {
                list.remove("maxItems");
            }
            limit_conditions(status.pointer_mut("/conditions/items/properties"));
        }
    }
    drop_null_enum_values(&mut crd);
    vec![crd, gwhub_hub_rules::inventory::PlacementDecision::crd()]
}

/// Installs the fleet inventory's CRDs ([`inventory`]) and waits until
/// each is established.
pub async fn install_inventory(client: &Client) -> Result<(), FleetError> {
    apply_and_wait(client, inventory()?).await
}

/// The external-dns `DNSEndpoint` CRD (fleet DNS's `dnsendpoint` output):
/// upstream's from `../shared/crds/external-dns` when there, else
/// generated from `gwhub_hub_rules::dnsendpoint` (pinned to upstream by
/// `tests/tests/crd_pin.rs`).
pub fn dnsendpoint() -> Result<Value, FleetError> {
    let upstream = upstream_dir()
        .map(|d| d.join("external-dns"))
        .filter(|d| d.is_dir());
    let mut crd = match upstream {
        Some(dir) => gwhub_spoke_rules::manifest::read_paths(&[dir])
            .map_err(|e| FleetError::Start(e.to_string()))?
            .into_iter()
            .find(|o| o.kind == "CustomResourceDefinition")
            .map(|o| o.value)
            .ok_or_else(|| FleetError::Start("no CRD in ../shared/crds/external-dns".into()))?,
        None => gwhub_hub_rules::dnsendpoint::generated_crd(),
    };
    sanitize(&mut crd);
    Ok(crd)
}

/// Installs the `DNSEndpoint` CRD ([`dnsendpoint`]) and waits until it is
/// established.
pub async fn install_dnsendpoint(client: &Client) -> Result<(), FleetError> {
    apply_and_wait(client, vec![dnsendpoint()?]).await
}

/// Applies `crds` and waits until each is established and served.
async fn apply_and_wait(client: &Client, crds: Vec<Value>) -> Result<(), FleetError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PatchParams::apply("gwhub-tests").force();
    let mut names = Vec::new();
    for crd in crds {
        let name = crd["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        api.patch(&name, &pp, &Patch::Apply(&crd)).await?;
        names.push(name);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for name in names {
        loop {
            let crd = api.get(&name).await?;
            let established = crd
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                });
            if established {
                break;
            }
            if Instant::now() > deadline {
                return Err(FleetError::Start(format!(
                    "CRD {name} not established after 60s"
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(())
}
