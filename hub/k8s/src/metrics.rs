//! Counters of the hub's Kubernetes mode, each declared once with its name
//! and help; readable by tests and logs, served on `/metrics`
//! (`gwhub_hub::metrics`).

use gwhub_common::metrics_http::{CountGauge, PropagationSeconds, Seconds, Value};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

gwhub_common::metrics! {
    #[derive(Debug, Default)]
    pub struct Metrics {
        /// Hub Gateway status applies the API server accepted.
        pub status_writes: Counter => "gwhub_status_writes",
            "Hub Gateway status applies accepted by the API server.",
        /// Status applies skipped because the live status already matched
        /// (ignoring times).
        pub status_writes_skipped: Counter => "gwhub_status_writes_skipped",
            "Status applies skipped because the live status already matched.",
        pub status_write_errors: Counter =>
            "gwhub_status_write_errors", "Hub Gateway status applies that failed.",
        pub report_writes: Counter =>
            "gwhub_report_writes", "ClusterReport writes accepted by the API server.",
        pub report_writes_skipped: Counter => "gwhub_report_writes_skipped",
            "ClusterReport writes skipped because nothing changed.",
        pub report_write_errors: Counter =>
            "gwhub_report_write_errors", "ClusterReport writes that failed.",
        /// Bytes of Gateway status in the ClusterReport writes accepted.
        pub report_write_bytes: Counter => "gwhub_report_write_bytes",
            "Bytes of Gateway status in the ClusterReport writes accepted.",
        /// Gateways left out of the store: too large for any object.
        pub report_gateways_unstored: Counter => "gwhub_report_gateways_unstored",
            "Gateways left out of a ClusterReport write: larger than any object may be.",
        /// Stored ClusterReports whose Gateways could not be read (skipped).
        pub report_unreadable: Counter => "gwhub_report_unreadable",
            "Stored ClusterReports whose packed Gateways could not be read; skipped.",
        /// API writes that waited for the `--kube-api-qps` budget.
        pub api_throttled_waits: Counter => "gwhub_api_throttled_waits",
            "API writes that waited for the --kube-api-qps budget.",
        /// Microseconds API writes waited for the budget, summed.
        pub api_throttled_micros: Counter => "gwhub_api_throttled_microseconds",
            "Microseconds API writes waited for the --kube-api-qps budget, summed.",
        /// Of those, the microseconds hub Gateway status writes waited.
        pub api_throttled_status_micros: Counter => "gwhub_api_throttled_status_microseconds",
            "Microseconds hub Gateway status writes waited for the API budget, summed.",
        /// Of those, the microseconds ClusterReport writes waited.
        pub api_throttled_report_micros: Counter => "gwhub_api_throttled_report_microseconds",
            "Microseconds ClusterReport writes and deletions waited for the API budget, summed.",
        /// Microseconds hub Gateway status applies spent in the API call
        /// (request to answer), summed.
        pub status_api_micros: Counter => "gwhub_status_api_microseconds",
            "Microseconds hub Gateway status applies spent in the API call, summed.",
        /// Microseconds spent aggregating and planning hub Gateway status
        /// writes, summed.
        pub status_prepare_micros: Counter => "gwhub_status_prepare_microseconds",
            "Microseconds spent aggregating and planning hub Gateway status writes, summed.",
        /// Times this replica became leader.
        pub leader_transitions: Counter =>
            "gwhub_leader_transitions", "Times this replica became leader.",
        /// 1 while this replica writes hub Gateway status (see `kube::leader`).
        pub leader: CountGauge => "gwhub_leader",
            "1 while this replica holds the leader Lease and writes hub Gateway status.",
        /// Status shards whose hub Gateways this replica writes (see
        /// `kube::shards`; 0 without `--status-shards`).
        pub status_shards_held: CountGauge => "gwhub_status_shards_held",
            "Status shard Leases this replica holds and writes the hub Gateways of (--status-shards).",
        /// Clusters a restarted hub still waits for before it writes hub
        /// Gateway status (see `kube::liveness::Gate`; 0 once caught up).
        pub restart_awaited_clusters: CountGauge => "gwhub_restart_awaited_clusters",
            "Clusters of replicas no longer alive that a restarted hub waits for before writing hub Gateway status.",
        /// Cluster stale/fresh Events published (see `kube::events`).
        pub events_published: Counter =>
            "gwhub_events_published", "Cluster stale/fresh Events published.",
        pub event_publish_errors: Counter => "gwhub_event_publish_errors",
            "Cluster stale/fresh Events the API server refused.",
        // Latency histograms (p99 in Prometheus), beside the summed
        // counters above, which the scale bench reads.
        /// Hub Gateway status applies: request to answer.
        pub status_write_api_seconds: Seconds => "gwhub_status_write_api_duration_seconds",
            "Hub Gateway status applies: time in the API call, request to answer.",
        /// Aggregating and planning one hub Gateway status write.
        pub status_aggregation_seconds: Seconds => "gwhub_status_aggregation_duration_seconds",
            "Aggregating and planning one hub Gateway status write.",
        /// ClusterReport writes: request to answer.
        pub store_write_seconds: Seconds => "gwhub_store_write_duration_seconds",
            "ClusterReport writes: time in the API call, request to answer.",
        /// An agent's change (its delta's `observed_unix_millis`) to the
        /// hub Gateway status write that carries it.
        pub propagation_seconds: PropagationSeconds => "gwhub_propagation_seconds",
            "From an agent's changed evaluation (its clock) to the hub Gateway status write carrying it.",
        // Fleet DNS (spec section 8; `gwhub_dns`).
        /// DNS writes by output (dnsendpoint, rfc2136) and result (ok,
        /// conflict, error).
        pub dns_writes: Family<Vec<(String, String)>, Counter> => "gwhub_dns_writes",
            "Fleet DNS writes (one per changed name) by output and result (ok, conflict, error).",
        /// One DNS write: request to answer.
        pub dns_write_seconds: Seconds => "gwhub_dns_write_seconds",
            "Fleet DNS writes: time in the output's call, request to answer.",
        /// Records per published name (all its record types).
        pub dns_records_per_name: RecordCounts => "gwhub_dns_records_per_name",
            "Records per fleet DNS name written (all its record types).",
        /// From a published cluster's first ineligible sight to the write
        /// of its name's set without it.
        pub dns_removal_seconds: PropagationSeconds => "gwhub_dns_removal_seconds",
            "From a published cluster seen ineligible to the written record set without it.",
    }
}

/// A histogram of record counts (1 to 256, doubling).
#[derive(Clone, Debug)]
pub struct RecordCounts(Histogram);

impl Default for RecordCounts {
    fn default() -> Self {
        RecordCounts(Histogram::new([
            1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0,
        ]))
    }
}

impl RecordCounts {
    pub fn observe(&self, n: usize) {
        self.0.observe(n as f64);
    }
}

impl prometheus_client::encoding::EncodeMetric for RecordCounts {
    fn encode(
        &self,
        encoder: prometheus_client::encoding::MetricEncoder,
    ) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> prometheus_client::metrics::MetricType {
        prometheus_client::metrics::MetricType::Histogram
    }
}

impl Metrics {
    pub fn bump(counter: &Counter) {
        counter.inc();
    }

    pub fn add(counter: &Counter, n: u64) {
        counter.inc_by(n);
    }

    pub fn get(counter: &Counter) -> u64 {
        counter.value()
    }
}
