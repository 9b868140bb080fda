//! The JSON shapes of the page's answers that gwhubctl prints too
//! (`-o json|yaml`): one definition for both, so the page and the CLI
//! show the same fields under the same names.

use gateway_api::apis::standard::gateways::GatewayStatus;
use serde::Serialize;
use serde_json::Value;

use gwhub_proto::{convert, v1};

use crate::index::{GatewayView, ListedCluster};

fn status_name(s: i32) -> &'static str {
    convert::status_word(s).unwrap_or("")
}

/// One condition transition, for the web page and for `gwhubctl history
/// -o json|yaml`: the time is the caller's (the page takes milliseconds,
/// the CLI RFC 3339), under its own key; a status that is none (a
/// condition appearing or going) is "".
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TransitionView<'a, T: Serialize> {
    pub cluster: &'a str,
    #[serde(rename = "type")]
    pub condition_type: &'a str,
    pub status: &'static str,
    pub reason: &'a str,
    pub message: &'a str,
    pub previous_status: &'static str,
    pub previous_reason: &'a str,
    /// The time's fields (one), beside the others.
    #[serde(flatten)]
    pub time: T,
}

impl<'a, T: Serialize> TransitionView<'a, T> {
    pub fn new(t: &'a v1::GatewayTransition, time: T) -> Self {
        TransitionView {
            cluster: &t.cluster,
            condition_type: &t.condition_type,
            status: status_name(t.status),
            reason: &t.reason,
            message: &t.message,
            previous_status: status_name(t.previous_status),
            previous_reason: &t.previous_reason,
            time,
        }
    }
}

/// [`TransitionView`] as JSON, its time `time` under `time_key`.
pub fn transition_json(t: &v1::GatewayTransition, time_key: &str, time: Value) -> Value {
    let time: std::collections::BTreeMap<&str, Value> = [(time_key, time)].into();
    serde_json::to_value(TransitionView::new(t, time)).unwrap_or(Value::Null)
}

/// A cluster as the page shows it (the fleet inventory's silent ones as
/// never connected, strangers to it flagged).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterView {
    pub name: String,
    pub connected: bool,
    pub stale: bool,
    pub gateway_count: usize,
    pub last_seen_millis: i64,
    pub never_connected: bool,
    pub outside_inventory: bool,
}

/// The clusters as the page shows them.
pub fn clusters_view(clusters: &[ListedCluster]) -> Vec<ClusterView> {
    clusters
        .iter()
        .map(|l| {
            let c = &l.summary;
            ClusterView {
                name: c.name.clone(),
                connected: c.connected,
                stale: c.stale,
                gateway_count: c.gateway_count,
                last_seen_millis: c.last_seen_millis,
                never_connected: l.never_connected,
                outside_inventory: l.outside_inventory,
            }
        })
        .collect()
}

/// One hub Gateway as the overview shows it: a cell per reporting cluster
/// and whether some aggregated condition is not True. Small on purpose
/// (the details come from `/api/gateway`): at 100 clusters x 100 Gateways
/// the whole status of every Gateway would be ~5 MB per snapshot.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayRow<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub revision: u64,
    pub not_ready: bool,
    pub cells: Vec<CellView<'a>>,
    /// The expected clusters that do not report the Gateway (a cell state
    /// of their own on the page).
    pub missing: Vec<MissingView<'a>>,
}

impl<'a> GatewayRow<'a> {
    pub fn of(v: &'a GatewayView) -> Self {
        GatewayRow {
            namespace: &v.key.namespace,
            name: &v.key.name,
            revision: v.revision(),
            not_ready: v.not_ready,
            cells: v
                .cells
                .iter()
                .map(|c| CellView {
                    cluster: &c.cluster,
                    health: c.health.as_str(),
                    stale: c.stale,
                })
                .collect(),
            missing: v
                .lean
                .missing_clusters
                .iter()
                .map(MissingView::of)
                .collect(),
        }
    }
}

/// One cluster's cell of a row.
#[derive(Serialize)]
pub struct CellView<'a> {
    pub cluster: &'a str,
    pub health: &'static str,
    pub stale: bool,
}

/// An expected cluster that does not report a Gateway (the page's and
/// `gwhubctl -o json|yaml`'s).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MissingView<'a> {
    pub cluster: &'a str,
    pub never_reported: bool,
}

impl<'a> MissingView<'a> {
    pub fn of(m: &'a v1::MissingCluster) -> Self {
        MissingView {
            cluster: &m.cluster,
            never_reported: m.never_reported,
        }
    }
}

/// One hub Gateway as its details show it: [`GatewayRow`] plus the
/// aggregated status (Gateway API JSON) and what was left out.
#[derive(Serialize)]
pub struct GatewayDetails<'a> {
    #[serde(flatten)]
    pub row: GatewayRow<'a>,
    pub clusters: &'a [String],
    pub status: &'a GatewayStatus,
    pub omissions: Vec<OmissionView<'a>>,
}

/// What the aggregation left out of a hub Gateway, and why (the page's
/// and `gwhubctl -o json|yaml`'s).
#[derive(Serialize)]
pub struct OmissionView<'a> {
    pub cluster: &'a str,
    pub item: &'a str,
    pub names: &'a [String],
    pub rule: &'a str,
    pub message: &'a str,
}

impl<'a> OmissionView<'a> {
    pub fn of(o: &'a v1::Omission) -> Self {
        OmissionView {
            cluster: &o.cluster,
            item: &o.item,
            names: &o.names,
            rule: &o.rule,
            message: &o.message,
        }
    }
}

impl<'a> GatewayDetails<'a> {
    pub fn of(v: &'a GatewayView) -> Self {
        GatewayDetails {
            row: GatewayRow::of(v),
            clusters: &v.clusters,
            status: &v.aggregation.status,
            omissions: v.omissions.iter().map(OmissionView::of).collect(),
        }
    }
}
