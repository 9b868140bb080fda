//! The index's own counters: streams refused for `--max-clusters` and
//! clusters forgotten by `--insecure-prune-after`. They live here because
//! only the index bumps them; the runtime registers them on `/metrics`.

use prometheus_client::metrics::counter::Counter;

gwhub_common::metrics! {
    /// What the index refused or forgot, served on `/metrics`.
    #[derive(Debug, Default)]
    pub struct IndexCounters {
        /// Streams refused for `--max-clusters`.
        pub refused_clusters: Counter => "gwhub_budget_refused_clusters",
            "Agent streams refused for --max-clusters.",
        /// Clusters forgotten by `--insecure-prune-after`.
        pub clusters_pruned: Counter => "gwhub_clusters_pruned",
            "Silent disconnected clusters forgotten (--insecure-prune-after).",
    }
}
