//! The `ClusterReport` custom resource: the hub's store, one or more
//! objects per cluster (see [`crate::layout`]) holding everything the cluster last reported (the hub's
//! `kube::reports` reads and writes them). Only the type and its CRD live
//! here, so tests and tools can name it without the hub runtime.

use gateway_api::apis::standard::gateways::GatewayStatus;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Everything one cluster last reported, or one part of it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "gwhub.io",
    version = "v1alpha1",
    kind = "ClusterReport",
    plural = "clusterreports",
    namespaced,
    shortname = "gwcr",
    category = "gwhub",
    doc = "The last report of one workload cluster's Gateway status (or one part of it), persisted by the gwhub hub so a restarted hub resumes without flapping. Written by the hub; delete a cluster's head (part 0, named after the cluster) to deregister it.",
    printcolumn = r#"{"name": "Cluster", "type": "string", "jsonPath": ".spec.cluster"}"#,
    printcolumn = r#"{"name": "Part", "type": "integer", "jsonPath": ".spec.part"}"#,
    printcolumn = r#"{"name": "Parts", "type": "integer", "jsonPath": ".spec.parts"}"#,
    printcolumn = r#"{"name": "Gateways", "type": "integer", "jsonPath": ".spec.gatewayCount"}"#,
    printcolumn = r#"{"name": "Last Report", "type": "date", "jsonPath": ".spec.lastReportTime"}"#,
    printcolumn = r#"{"name": "Last Seen", "type": "date", "jsonPath": ".spec.lastSeenTime"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterReportSpec {
    /// The cluster's name as its agent says it (object names cannot hold
    /// every cluster name, e.g. `cluster_1`).
    pub cluster: String,
    /// Which part of the cluster's report this object holds; 0 is the head
    /// (named after the cluster, holding `lastSeenTime`).
    #[serde(default)]
    pub part: u32,
    /// How many objects hold the cluster's report (the head's count is the
    /// one that counts; a part written for another count is ignored).
    #[serde(default = "one")]
    pub parts: u32,
    /// Number of Gateways in this object; for `kubectl get`.
    pub gateway_count: u32,
    /// RFC 3339 time of the last snapshot or delta this object was written
    /// from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_report_time: Option<String>,
    /// RFC 3339 time of the last message of any kind (heartbeats included),
    /// refreshed at most every half `--stale-after`; staleness continues
    /// from it after a restart. On the head only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen_time: Option<String>,
    /// The Gateways of this part, in namespace/name order.
    #[serde(default)]
    pub gateways: Vec<ReportedGateway>,
}

fn one() -> u32 {
    1
}

/// One Gateway's status as the cluster reported it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct ReportedGateway {
    pub namespace: String,
    pub name: String,
    /// The Gateway's status, as the agent reported it (Gateway API
    /// `GatewayStatus`; validated by the hub on ingest, so kept opaque here).
    #[schemars(schema_with = "opaque_object")]
    pub status: GatewayStatus,
}

fn opaque_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// The CRD as `manifests/crd-clusterreports.yaml` holds it.
pub fn crd_yaml() -> String {
    let crd = ClusterReport::crd();
    let body = serde_norway::to_string(&crd).unwrap_or_default();
    format!(
        "# Generated from gwhub_hub_rules::report::ClusterReport; do not edit.\n\
         # Regenerate: GWHUB_BLESS=1 cargo test -p gwhub-hub-rules --lib report\n{body}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMITTED: &str = include_str!("../../manifests/crd-clusterreports.yaml");

    /// The committed CRD is the one the Rust type generates; run with
    /// `GWHUB_BLESS=1` to rewrite it after changing the type.
    #[test]
    fn committed_crd_matches_the_type() {
        let generated = crd_yaml();
        if std::env::var("GWHUB_BLESS").is_ok_and(|v| v == "1") {
            let path = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../manifests/crd-clusterreports.yaml"
            );
            std::fs::write(path, &generated).unwrap();
            return;
        }
        assert_eq!(
            COMMITTED, generated,
            "manifests/crd-clusterreports.yaml is out of date: GWHUB_BLESS=1 cargo test -p gwhub-hub-rules --lib report"
        );
    }
}
