//! How `gwhubctl` prints what the Dashboard answers: kubectl-style tables
//! with the server's text escaped, and the hub Gateway as a Gateway API
//! object for `-o yaml|json`. Shared by every command (and `gwhub demo`), so
//! one Gateway looks the same wherever it is printed.

use gwhub_api::web::{MissingView, OmissionView};
use gwhub_common::OutputFormat;
use gwhub_proto::{convert, v1};
use serde_json::Value;

use super::Output;

/// Text from the server shown escaped (controls and bidi controls), the
/// one rule the web page follows too.
pub use gwhub_model::text::printable;

/// Renders rows as a kubectl-style table: left-aligned, three spaces apart.
/// Cells are [`printable`].
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| printable(c).into_owned()).collect())
        .collect();
    let rows = rows.as_slice();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            if i + 1 == widths.len() {
                l.push_str(cell);
            } else {
                l.push_str(&format!("{cell:<w$}   "));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&mut header.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

/// The aggregated condition of `type_`, if the hub wrote one.
pub fn condition<'a>(g: &'a v1::AggregatedGateway, type_: &str) -> Option<&'a v1::Condition> {
    g.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.r#type == type_)
}

/// `True`/`False`/`Unknown`, or `-` for a missing condition.
pub fn status_word(c: Option<&v1::Condition>) -> String {
    match c.map(|c| v1::ConditionStatus::try_from(c.status)) {
        Some(Ok(v1::ConditionStatus::True)) => "True".into(),
        Some(Ok(v1::ConditionStatus::False)) => "False".into(),
        Some(Ok(v1::ConditionStatus::Unknown)) => "Unknown".into(),
        _ => "-".into(),
    }
}

pub(super) const GATEWAY_HEADER: [&str; 6] = [
    "NAMESPACE",
    "NAME",
    "CLUSTERS",
    "ACCEPTED",
    "PROGRAMMED",
    "AGGREGATED",
];
pub(super) const GATEWAY_WIDE: [&str; 3] = ["ADDRESSES", "LISTENERS", "LEFT-OUT"];

pub(super) fn gateway_row(g: &v1::AggregatedGateway, wide: bool) -> Vec<String> {
    let own = condition(g, "kuadrant.io/MultiClusterAggregated");
    let aggregated = match own {
        Some(c) if c.status == v1::ConditionStatus::True as i32 => c.reason.clone(),
        Some(c) => format!("{} ({})", status_word(Some(c)), c.reason),
        None => "-".into(),
    };
    let mut row = vec![
        g.namespace.clone(),
        g.name.clone(),
        clusters_cell(g, wide),
        status_word(condition(g, "Accepted")),
        status_word(condition(g, "Programmed")),
        aggregated,
    ];
    if wide {
        let s = g.status.clone().unwrap_or_default();
        row.push(s.addresses.len().to_string());
        row.push(s.listeners.len().to_string());
        row.push(
            g.omissions
                .iter()
                .map(|o| o.names.len())
                .sum::<usize>()
                .to_string(),
        );
    }
    row
}

pub(super) fn rfc3339(secs: i64) -> String {
    if secs <= 0 {
        return "never".into();
    }
    jiff::Timestamp::from_second(secs)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| secs.to_string())
}

/// The hub Gateway as `-o yaml|json` prints it (shared with `gwhub demo --once`).
/// with `wide`), then the expected ones missing, marked.
fn clusters_cell(g: &v1::AggregatedGateway, wide: bool) -> String {
    let missing = &g.missing_clusters;
    match (wide, missing.is_empty()) {
        (false, true) => g.clusters.len().to_string(),
        (false, false) => format!("{} ({} missing)", g.clusters.len(), missing.len()),
        (true, _) => g
            .clusters
            .iter()
            .cloned()
            .chain(missing.iter().map(|m| format!("!{}", m.cluster)))
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// A hub Gateway as `get -o json|yaml` prints it: a Gateway API object,
/// the hub's own fields under `gwhub` (the omissions and missing clusters
/// in the web page's shapes).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct GatewayObject<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: ObjectName<'a>,
    status: gateway_api::apis::standard::gateways::GatewayStatus,
    gwhub: HubFields<'a>,
}

#[derive(serde::Serialize)]
struct ObjectName<'a> {
    namespace: &'a str,
    name: &'a str,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct HubFields<'a> {
    clusters: &'a [String],
    revision: u64,
    omissions: Vec<OmissionView<'a>>,
    /// Only where the hub Gateway expects clusters (the shape is
    /// otherwise unchanged).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    missing_clusters: Vec<MissingView<'a>>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    unexpected_clusters: &'a [String],
}
/// The hub Gateway as `-o yaml|json` prints it (shared with `gwhub demo --once`).
pub fn gateway_json(g: &v1::AggregatedGateway) -> Value {
    let status = g
        .status
        .clone()
        .and_then(|s| convert::status_from_proto(s).ok())
        .unwrap_or_default();
    let object = GatewayObject {
        api_version: "gateway.networking.k8s.io/v1",
        kind: "Gateway",
        metadata: ObjectName {
            namespace: &g.namespace,
            name: &g.name,
        },
        status,
        gwhub: HubFields {
            clusters: &g.clusters,
            revision: g.revision,
            omissions: g.omissions.iter().map(OmissionView::of).collect(),
            missing_clusters: g.missing_clusters.iter().map(MissingView::of).collect(),
            unexpected_clusters: &g.unexpected_clusters,
        },
    };
    serde_json::to_value(object).unwrap_or(Value::Null)
}

pub(super) fn format_of(output: Option<Output>) -> Option<OutputFormat> {
    match output {
        Some(Output::Yaml) => Some(OutputFormat::Yaml),
        Some(Output::Json) => Some(OutputFormat::Json),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `get -o json|yaml`'s object: the Gateway API shape, the hub's fields
    /// under `gwhub`, missing and unexpected clusters only when there are.
    #[test]
    fn a_gateway_object_has_the_hubs_fields_under_gwhub() {
        let mut g = v1::AggregatedGateway {
            namespace: "ns".into(),
            name: "gw".into(),
            clusters: vec!["east".into()],
            revision: 3,
            omissions: vec![v1::Omission {
                cluster: "east".into(),
                item: "listener".into(),
                names: vec!["a".into()],
                rule: "r".into(),
                message: "m".into(),
            }],
            ..Default::default()
        };
        let v = gateway_json(&g);
        assert_eq!(v["apiVersion"], "gateway.networking.k8s.io/v1");
        assert_eq!(v["kind"], "Gateway");
        assert_eq!(v["metadata"], json!({"namespace": "ns", "name": "gw"}));
        assert_eq!(
            v["gwhub"],
            json!({"clusters": ["east"], "revision": 3, "omissions": [
                {"cluster": "east", "item": "listener", "names": ["a"], "rule": "r", "message": "m"}
            ]})
        );
        g.missing_clusters = vec![v1::MissingCluster {
            cluster: "west".into(),
            never_reported: true,
        }];
        g.unexpected_clusters = vec!["north".into()];
        let v = gateway_json(&g);
        assert_eq!(
            v["gwhub"]["missingClusters"],
            json!([{"cluster": "west", "neverReported": true}])
        );
        assert_eq!(v["gwhub"]["unexpectedClusters"], json!(["north"]));
    }

    #[test]
    fn server_text_is_printed_with_control_characters_escaped() {
        assert_eq!(printable("east"), "east");
        assert_eq!(
            printable("a\u{1b}[2Jb\u{7}\r\nfake-row\u{202e}"),
            "a\\u{1b}[2Jb\\u{7}\\r\\nfake-row\\u{202e}"
        );
        let t = table(&["NAME"], &[vec!["gw\nwest   True".into()]]);
        assert_eq!(t.lines().count(), 2, "{t}");
        assert!(!t.contains('\u{1b}'));
    }
}
