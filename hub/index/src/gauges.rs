//! The index's gauges, read from it at each scrape: per cluster (connected,
//! stale, Gateways, report bytes, last seen and last report), the count of
//! aggregated hub Gateways, and per reported hub Gateway whether it is
//! ready. They live here because they read only the index; the runtime
//! registers them on `/metrics` beside the other parts' counters.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::{MetricType, TypedMetric};

use gwhub_hub_rules::aggregate::GatewayKey;

use crate::{ClusterSummary, Index};

/// The `cluster` label of the per-cluster gauges.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterLabel {
    cluster: String,
}

/// What the per-cluster gauges read at a scrape: the clusters and the count
/// of hub Gateways with an aggregated status.
type Summaries = dyn Fn() -> (Vec<ClusterSummary>, usize) + Send + Sync;

/// The gauges derived from the index at each scrape, each declared once
/// with its name, help and value.
pub struct ClusterGauges(Box<Summaries>);

impl std::fmt::Debug for ClusterGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterGauges")
    }
}

type Field = fn(&ClusterSummary) -> u64;

/// Whole seconds of a Unix time in milliseconds (0 for never).
fn seconds(millis: i64) -> u64 {
    u64::try_from(millis / 1000).unwrap_or(0)
}

/// The per-cluster gauges: name, help, value.
const PER_CLUSTER: [(&str, &str, Field); 6] = [
    (
        "gwhub_cluster_connected",
        "1 while the cluster's agent has a stream open.",
        |c| u64::from(c.connected),
    ),
    (
        "gwhub_cluster_stale",
        "1 while the cluster has sent no report or heartbeat within --stale-after.",
        |c| u64::from(c.stale),
    ),
    (
        "gwhub_cluster_gateways",
        "Gateways the cluster reports.",
        |c| c.gateway_count as u64,
    ),
    (
        "gwhub_cluster_report_bytes",
        "Encoded bytes of the cluster's report (budget: --max-cluster-report-bytes).",
        |c| c.report_bytes,
    ),
    (
        "gwhub_cluster_last_seen_timestamp_seconds",
        "Unix time of the cluster's last report or heartbeat (0: never).",
        |c| seconds(c.last_seen_millis),
    ),
    (
        "gwhub_cluster_last_report_timestamp_seconds",
        "Unix time of the cluster's last report (0: connected but never reported).",
        |c| seconds(c.last_report_millis),
    ),
];

/// The labels of `gwhub_hub_gateway_ready`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GatewayLabels {
    namespace: String,
    name: String,
}

/// What the per-hub-Gateway gauge reads at a scrape: each reported hub
/// Gateway's key and whether every aggregated condition is True.
type Readiness = dyn Fn() -> Vec<(GatewayKey, bool)> + Send + Sync;

/// `gwhub_hub_gateway_ready`, read from the index's views at each scrape.
pub struct HubGatewayGauges(Box<Readiness>);

impl std::fmt::Debug for HubGatewayGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HubGatewayGauges")
    }
}

impl Collector for HubGatewayGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let gateways = (self.0)();
        let mut family = encoder.encode_descriptor(
            "gwhub_hub_gateway_ready",
            "Per reported hub Gateway: 1 while every aggregated condition is True, 0 otherwise.",
            None,
            MetricType::Gauge,
        )?;
        for (key, ready) in gateways {
            let labels = GatewayLabels {
                namespace: key.namespace,
                name: key.name,
            };
            ConstGauge::new(u64::from(ready)).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// Each reported hub Gateway of `index` and whether it is ready, copied out
/// of the views (no lock held while encoding).
fn readiness(index: &Index) -> Vec<(GatewayKey, bool)> {
    index
        .subscribe()
        .borrow()
        .gateways
        .iter()
        .map(|(k, v)| (k.clone(), !v.not_ready))
        .collect()
}

impl Collector for ClusterGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (clusters, hub_gateways) = (self.0)();
        for (name, help, field) in PER_CLUSTER {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for c in &clusters {
                let labels = ClusterLabel {
                    cluster: c.name.clone(),
                };
                ConstGauge::new(field(c)).encode(family.encode_family(&labels)?)?;
            }
        }
        let gauge = ConstGauge::new(hub_gateways as u64);
        gauge.encode(encoder.encode_descriptor(
            "gwhub_hub_gateways",
            "Hub Gateways with an aggregated status.",
            None,
            ConstGauge::<u64>::TYPE,
        )?)
    }
}

impl ClusterGauges {
    /// The gauges of whatever `summaries` returns at each scrape.
    pub fn new(summaries: Box<Summaries>) -> Self {
        ClusterGauges(summaries)
    }

    /// The gauges of `index` as it is at each scrape.
    pub fn of(index: Index) -> Self {
        ClusterGauges(Box::new(move || {
            let hub_gateways = index.subscribe().borrow().gateways.len();
            (index.clusters(), hub_gateways)
        }))
    }
}

impl HubGatewayGauges {
    /// `gwhub_hub_gateway_ready` of whatever `gateways` returns at each
    /// scrape.
    pub fn new(gateways: Box<Readiness>) -> Self {
        HubGatewayGauges(gateways)
    }

    /// `gwhub_hub_gateway_ready` of `index`'s views at each scrape.
    pub fn of(index: Index) -> Self {
        HubGatewayGauges(Box::new(move || readiness(&index)))
    }
}
