//! The `ClusterReport` custom resource: the hub's store, one or more
//! objects per cluster (see [`crate::layout`]) holding everything the cluster last reported (the hub's
//! `kube::store` reads and writes them). Only the type and its CRD live
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
    /// The Gateways of this part, in namespace/name order, packed: the
    /// JSON array of `{namespace, name, status}` gzip-compressed and
    /// base64-encoded. One opaque string costs the API server
    /// a fraction of a deep object to decode, validate and track in
    /// managedFields (measured in docs/benchmarks.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateways_packed: Option<String>,
    /// The Gateways as objects written before `gatewaysPacked` existed
    /// (read, never written: a rewrite by the hub's field manager drops it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<ReportedGateway>,
}

impl ClusterReportSpec {
    /// This object's Gateways: unpacked from `gatewaysPacked`, or the list
    /// of an object written in the earlier format.
    pub fn reported_gateways(&self) -> Result<Vec<ReportedGateway>, UnpackError> {
        match &self.gateways_packed {
            Some(packed) => unpack(packed),
            None => Ok(self.gateways.clone()),
        }
    }
}

/// Most bytes a packed part may unpack to (a part is written for at most
/// [`crate::layout::PART_BUDGET_BYTES`] packed; this bounds a hostile or
/// corrupt object's cost, a zip bomb included).
pub const MAX_UNPACKED_BYTES: u64 = 64 * 1024 * 1024;

/// Why a stored `gatewaysPacked` cannot be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum UnpackError {
    #[error("gatewaysPacked is not base64: {0}")]
    Base64(String),
    #[error("gatewaysPacked is not gzip: {0}")]
    Gzip(String),
    #[error("gatewaysPacked unpacks to more than {MAX_UNPACKED_BYTES} bytes")]
    TooLarge,
    #[error("gatewaysPacked does not hold a list of Gateways: {0}")]
    Json(String),
}

/// The packed form of `json` (a JSON array of [`ReportedGateway`]s):
/// gzip, then standard base64.
pub fn pack(json: &[u8]) -> String {
    use base64::Engine;
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing into a Vec cannot fail.
    let _ = gz.write_all(json);
    let bytes = gz.finish().unwrap_or_default();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The length of [`pack`]ing `json`, without the base64 string.
pub fn packed_len(json: &[u8]) -> usize {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let _ = gz.write_all(json);
    let n = gz.finish().map(|b| b.len()).unwrap_or(json.len());
    n.div_ceil(3) * 4
}

/// The Gateways [`pack`] packed.
pub fn unpack(packed: &str) -> Result<Vec<ReportedGateway>, UnpackError> {
    use base64::Engine;
    use std::io::Read;
    let gz = base64::engine::general_purpose::STANDARD
        .decode(packed.trim())
        .map_err(|e| UnpackError::Base64(e.to_string()))?;
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(gz.as_slice())
        .take(MAX_UNPACKED_BYTES + 1)
        .read_to_end(&mut json)
        .map_err(|e| UnpackError::Gzip(e.to_string()))?;
    if json.len() as u64 > MAX_UNPACKED_BYTES {
        return Err(UnpackError::TooLarge);
    }
    serde_json::from_slice(&json).map_err(|e| UnpackError::Json(e.to_string()))
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

    fn gateway(name: &str) -> ReportedGateway {
        serde_json::from_value(serde_json::json!({
            "namespace": "openshift-ingress", "name": name,
            "status": {"conditions": [{"type": "Programmed", "status": "True",
                "reason": "Programmed", "message": "ok", "lastTransitionTime": "2026-11-23T10:00:00Z"}]}
        }))
        .unwrap()
    }

    #[test]
    fn packed_gateways_round_trip_and_bad_ones_are_named() {
        let list = vec![gateway("a"), gateway("b")];
        let json = serde_json::to_vec(&list).unwrap();
        let packed = pack(&json);
        assert_eq!(packed.len(), packed_len(&json));
        assert_eq!(unpack(&packed).unwrap(), list);
        assert_eq!(unpack(&pack(b"[]")).unwrap(), vec![]);
        // What cannot be read says why.
        use base64::Engine;
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        type Case = (String, fn(&UnpackError) -> bool);
        let cases: &[Case] = &[
            ("not base64!".into(), |e| {
                matches!(e, UnpackError::Base64(_))
            }),
            (b64(b"plain text"), |e| matches!(e, UnpackError::Gzip(_))),
            (pack(b"{\"not\": \"a list\"}"), |e| {
                matches!(e, UnpackError::Json(_))
            }),
            (pack(&vec![b' '; MAX_UNPACKED_BYTES as usize + 1]), |e| {
                *e == UnpackError::TooLarge
            }),
        ];
        for (i, (packed, want)) in cases.iter().enumerate() {
            let e = unpack(packed).unwrap_err();
            assert!(want(&e), "case {i}: {e}");
        }
    }

    /// Objects written before `gatewaysPacked` (a deep `gateways` list) still
    /// read; new ones carry only the packed string.
    #[test]
    fn objects_of_either_format_read() {
        let old: ClusterReportSpec = serde_json::from_value(serde_json::json!({
            "cluster": "east", "gatewayCount": 1,
            "gateways": [serde_json::to_value(gateway("a")).unwrap()]
        }))
        .unwrap();
        assert_eq!(old.reported_gateways().unwrap(), vec![gateway("a")]);
        let new = ClusterReportSpec {
            gateways_packed: Some(pack(&serde_json::to_vec(&[gateway("b")]).unwrap())),
            gateways: Vec::new(),
            ..old.clone()
        };
        let json = serde_json::to_value(&new).unwrap();
        assert!(json.get("gateways").is_none(), "{json}");
        let back: ClusterReportSpec = serde_json::from_value(json).unwrap();
        assert_eq!(back.reported_gateways().unwrap(), vec![gateway("b")]);
        let bad = ClusterReportSpec {
            gateways_packed: Some("%%%".into()),
            ..old
        };
        assert!(bad.reported_gateways().is_err());
    }

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
