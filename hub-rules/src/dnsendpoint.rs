//! The external-dns `DNSEndpoint` type (`externaldns.k8s.io/v1alpha1`,
//! kubernetes-sigs/external-dns `config/crd/standard`), which fleet DNS's
//! `dnsendpoint` output writes (spec section 8): one object per (hub
//! Gateway, hostname) for the external-dns a platform already runs
//! (`--source=crd --label-filter=gwhub.io/dns=managed`). The hub never
//! writes its status.
//!
//! Here so tests and tools can name the type and generate its CRD (a clone
//! without `../shared` installs the generated one; `tests/tests/crd_pin.rs`
//! pins it to upstream).

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The label every object the hub writes carries (external-dns'
/// `--label-filter`).
pub const MANAGED_LABEL: (&str, &str) = ("gwhub.io/dns", "managed");

/// The annotation holding the clusters published in each record type, as
/// JSON `{"A": ["east", "west"], ...}`: what a new leader seeds its
/// publishers with.
pub const PUBLISHED_ANNOTATION: &str = "gwhub.io/dns-published-clusters";

/// The annotation holding the hostname the object is for.
pub const HOSTNAME_ANNOTATION: &str = "gwhub.io/dns-hostname";

/// DNSEndpointSpec defines the desired state of DNSEndpoint.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "externaldns.k8s.io",
    version = "v1alpha1",
    kind = "DNSEndpoint",
    plural = "dnsendpoints",
    namespaced,
    status = "DNSEndpointStatus",
    doc = "DNSEndpoint is a contract that a user-specified CRD must implement to be used as a source for external-dns. The user-specified CRD should also have the status sub-resource."
)]
#[serde(rename_all = "camelCase")]
pub struct DNSEndpointSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<Vec<Endpoint>>,
}

/// Endpoint is a high-level way of a connection between a service and an IP.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// The hostname of the DNS record
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_name: Option<String>,
    /// Labels stores labels defined for the Endpoint
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// ProviderSpecific stores provider specific config
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_specific: Option<Vec<ProviderSpecificProperty>>,
    /// TTL for the record
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "recordTTL")]
    pub record_ttl: Option<i64>,
    /// RecordType type of record, e.g. CNAME, A, AAAA, SRV, TXT etc
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_type: Option<String>,
    /// Identifier to distinguish multiple records with the same name and type
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_identifier: Option<String>,
    /// The targets the DNS record points to
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<String>>,
}

/// ProviderSpecificProperty holds the name and value of a configuration
/// which is specific to individual DNS providers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ProviderSpecificProperty {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// DNSEndpointStatus defines the observed state of DNSEndpoint.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DNSEndpointStatus {
    /// The generation observed by the external-dns controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The CRD generated from these types, as a clone without the upstream
/// file installs it: no `nullable` (upstream has none), the approval
/// annotation `k8s.io` groups need.
pub fn generated_crd() -> serde_json::Value {
    use kube::CustomResourceExt;
    let mut crd = serde_json::to_value(DNSEndpoint::crd()).unwrap_or_default();
    drop_nullable(&mut crd);
    // As upstream's controller-gen writes it: the object's own fields typed,
    // and `spec` not required (the derive requires it and leaves them out).
    if let Some(schema) = crd
        .pointer_mut("/spec/versions/0/schema/openAPIV3Schema")
        .and_then(serde_json::Value::as_object_mut)
    {
        schema.remove("required");
        if let Some(props) = schema
            .get_mut("properties")
            .and_then(serde_json::Value::as_object_mut)
        {
            props.insert("apiVersion".into(), serde_json::json!({"type": "string"}));
            props.insert("kind".into(), serde_json::json!({"type": "string"}));
            props.insert("metadata".into(), serde_json::json!({"type": "object"}));
        }
    }
    crd["metadata"]["annotations"] = serde_json::json!({
        "api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/external-dns/pull/2007"
    });
    crd
}

fn drop_nullable(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.remove("nullable");
            m.values_mut().for_each(drop_nullable);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(drop_nullable),
        _ => {}
    }
}
