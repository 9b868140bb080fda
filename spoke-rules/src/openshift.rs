//! The OpenShift resources the agent reads, typed after the upstream CRDs
//! (`dnsrecords.ingress.operator.openshift.io`, `dnses.config.openshift.io`). Field names and casing follow the
//! upstream schemas so these types can also generate CRDs for test clusters
//! where the upstream files are absent. Parsing is lenient: optional fields
//! default, unknown fields are ignored, so real `oc get -o yaml` output parses.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Label that ties a Service or DNSRecord to the Gateway it was made for.
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";

/// The name of the cluster-scoped DNS config the agent reads (`dns/cluster`).
pub const CLUSTER_CONFIG_NAME: &str = "cluster";

/// A DNS zone as the cluster DNS config and DNSRecord status name it: by
/// provider id, or by tags where the provider finds zones by tag (AWS private zones).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct DNSZone {
    /// Provider identifier of the hosted zone.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Tags to look the hosted zone up by.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

/// Whether the ingress operator manages the record at the provider.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DNSManagementPolicy {
    #[default]
    Managed,
    Unmanaged,
}

/// `DNSRecord` (`ingress.operator.openshift.io/v1`): one per unique Gateway
/// listener hostname, created by the ingress operator.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "ingress.operator.openshift.io",
    version = "v1",
    kind = "DNSRecord",
    plural = "dnsrecords",
    namespaced,
    status = "DNSRecordStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct DNSRecordSpec {
    /// The hostname of the record (may end in a dot).
    pub dns_name: String,
    /// Defaults to `Managed`, as the CRD does.
    #[serde(default)]
    pub dns_management_policy: DNSManagementPolicy,
    /// Record targets.
    #[serde(default)]
    pub targets: Vec<String>,
    /// `CNAME` or `A`.
    #[serde(default)]
    pub record_type: String,
    /// TTL in seconds.
    #[serde(default, rename = "recordTTL")]
    pub record_ttl: i64,
}

/// What the DNS controller observed, per zone.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DNSRecordStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub zones: Vec<DNSZoneStatus>,
}

/// The record's state in one zone.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DNSZoneStatus {
    #[serde(default)]
    pub dns_zone: DNSZone,
    #[serde(default)]
    pub conditions: Vec<DNSZoneCondition>,
}

/// A zone condition; `Published` is the one that matters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DNSZoneCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// `DNS` (`config.openshift.io/v1`, cluster-scoped; the agent reads `cluster`):
/// which zones the cluster manages records in.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "config.openshift.io",
    version = "v1",
    kind = "DNS",
    plural = "dnses"
)]
#[serde(rename_all = "camelCase")]
pub struct DNSSpec {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub base_domain: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_zone: Option<DNSZone>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_zone: Option<DNSZone>,
}

impl DNS {
    /// The configured zones (public first), as DNSRecord zones are compared with.
    pub fn zones(&self) -> Vec<&DNSZone> {
        [&self.spec.public_zone, &self.spec.private_zone]
            .into_iter()
            .flatten()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;

    #[test]
    fn names_match_upstream() {
        assert_eq!(
            DNSRecord::api_version(&()),
            "ingress.operator.openshift.io/v1"
        );
        assert_eq!(DNSRecord::plural(&()), "dnsrecords");
        assert_eq!(DNS::api_version(&()), "config.openshift.io/v1");
        assert_eq!(DNS::plural(&()), "dnses");
    }

    #[test]
    fn lenient_real_output_parses() {
        let rec: DNSRecord = serde_json::from_value(serde_json::json!({
            "apiVersion": "ingress.operator.openshift.io/v1", "kind": "DNSRecord",
            "metadata": {"name": "r", "namespace": "openshift-ingress"},
            "spec": {"dnsName": "*.apps.example.com.", "recordTTL": 30, "recordType": "CNAME",
                     "targets": ["a.elb.amazonaws.com"], "somethingNew": true},
            "status": {"observedGeneration": 1, "zones": [{"dnsZone": {"id": "Z1"},
                "conditions": [{"type": "Published", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"}]}]}
        }))
        .unwrap();
        assert_eq!(rec.spec.dns_management_policy, DNSManagementPolicy::Managed);
        assert_eq!(rec.status.unwrap().zones[0].dns_zone.id, "Z1");
    }
}
