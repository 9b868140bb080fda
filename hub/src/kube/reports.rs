//! The hub's store: one `ClusterReport` object per cluster on the management
//! cluster, holding everything the cluster last reported and when it was
//! last heard from.
//!
//! Namespaced, in the hub's own namespace: the hub then needs only a Role
//! (not cluster-wide rights) for its store, and `kubectl -n gwhub-system get
//! clusterreports` lists the fleet. One object per cluster (not per Gateway)
//! because a cluster's snapshot replaces all its Gateways at once and its
//! liveness is per cluster; the cost is the object size limit (about 1.5 MiB,
//! several hundred Gateways per cluster).
//!
//! Every replica writes the reports of the agents streaming to it and
//! imports the others' from a watch, so a restarted hub, or the replica that
//! becomes leader, starts from the fleet's last known state instead of
//! "no clusters". Deleting an object deregisters its cluster (unless the
//! cluster is streaming to this replica, which writes it back).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_common::watch_events::{Change, changes};
use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::FIELD_MANAGER;
use super::metrics::Metrics;
use crate::aggregate::GatewayKey;
use crate::index::{ClusterRecord, Index};

pub use gwhub_hub_rules::report::{ClusterReport, ClusterReportSpec, ReportedGateway};
pub use gwhub_model::cluster::object_name;

fn rfc3339(millis: i64) -> Option<String> {
    (millis > 0)
        .then(|| Timestamp::from_millisecond(millis).ok())
        .flatten()
        .map(|t| t.to_string())
}

fn millis(s: Option<&str>) -> i64 {
    s.and_then(|s| s.parse::<Timestamp>().ok())
        .map(Timestamp::as_millisecond)
        .unwrap_or(0)
}

/// The spec for a cluster's record.
pub(crate) fn spec_of(record: &ClusterRecord) -> ClusterReportSpec {
    ClusterReportSpec {
        cluster: record.cluster.clone(),
        gateway_count: u32::try_from(record.gateways.len()).unwrap_or(u32::MAX),
        last_report_time: rfc3339(record.last_report_millis),
        last_seen_time: rfc3339(record.last_seen_millis),
        gateways: record
            .gateways
            .iter()
            .map(|(k, status)| ReportedGateway {
                namespace: k.namespace.clone(),
                name: k.name.clone(),
                status: status.clone(),
            })
            .collect(),
    }
}

/// A stored report back into what the index takes.
pub(crate) fn gateways_of(spec: &ClusterReportSpec) -> BTreeMap<GatewayKey, GatewayStatus> {
    spec.gateways
        .iter()
        .map(|g| {
            (
                GatewayKey::new(g.namespace.clone(), g.name.clone()),
                g.status.clone(),
            )
        })
        .collect()
}

/// What was last written for a cluster.
struct Written {
    report_rev: u64,
    gateways: Vec<ReportedGateway>,
    last_seen_millis: i64,
}

/// Writes the reports of the clusters streaming to this replica.
pub struct ReportWriter {
    pub api: Api<ClusterReport>,
    pub index: Index,
    pub metrics: Arc<Metrics>,
    /// How often a live cluster's `lastSeenTime` is refreshed.
    pub refresh: Duration,
    /// Wait after a change so a burst becomes one write.
    pub debounce: Duration,
}

impl ReportWriter {
    /// Writes changed reports until `shutdown`; `forget` names clusters
    /// whose object was deleted while they stream here (written again).
    pub async fn run(
        self,
        mut forget: tokio::sync::mpsc::Receiver<String>,
        shutdown: CancellationToken,
    ) {
        let mut reports = self.index.subscribe_reports();
        let mut pruned = self.index.subscribe_pruned();
        let mut written: BTreeMap<String, Written> = BTreeMap::new();
        let mut tick = tokio::time::interval(self.refresh.min(Duration::from_secs(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                r = reports.changed() => {
                    if r.is_err() {
                        return;
                    }
                    tokio::time::sleep(self.debounce).await;
                }
                Some(cluster) = forget.recv() => {
                    written.remove(&cluster);
                }
                r = pruned.recv() => match r {
                    Ok(cluster) => {
                        written.remove(&cluster);
                        self.forget_pruned(&cluster).await;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "pruned clusters' reports not deleted (too many at once); a relist brings them back stale, to be pruned again");
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                },
                _ = tick.tick() => {}
            }
            reports.mark_unchanged();
            self.pass(&mut written).await;
        }
    }

    async fn pass(&self, written: &mut BTreeMap<String, Written>) {
        let now = Timestamp::now().as_millisecond();
        let refresh = i64::try_from(self.refresh.as_millis()).unwrap_or(i64::MAX);
        let clusters = self.index.clusters();
        // Deregistered clusters need no bookkeeping.
        written.retain(|name, _| clusters.iter().any(|c| &c.name == name));
        for summary in clusters {
            // A cluster that left keeps its last report: written if it
            // changed before the stream ended (within the debounce), never
            // refreshed (it is silent). Clusters never streamed here are
            // another replica's to write.
            if !summary.connected && !written.contains_key(&summary.name) {
                continue;
            }
            let Some(record) = self.index.cluster_record(&summary.name) else {
                continue;
            };
            // Only what this replica heard from the cluster itself.
            if record.report_rev == 0 {
                continue;
            }
            let spec = spec_of(&record);
            let due = match written.get(&record.cluster) {
                None => true,
                Some(w) if w.report_rev != record.report_rev && w.gateways != spec.gateways => true,
                Some(_) if !summary.connected => false,
                // Refresh lastSeenTime only when there is news of the
                // cluster (a silent connected one would be rewritten on
                // every tick with the same time).
                Some(w) => {
                    record.last_seen_millis > w.last_seen_millis
                        && now.saturating_sub(w.last_seen_millis) >= refresh
                }
            };
            if !due {
                Metrics::bump(&self.metrics.report_writes_skipped);
                if let Some(w) = written.get_mut(&record.cluster) {
                    w.report_rev = record.report_rev;
                }
                continue;
            }
            if self.write(&spec).await {
                written.insert(
                    record.cluster.clone(),
                    Written {
                        report_rev: record.report_rev,
                        gateways: spec.gateways,
                        last_seen_millis: record.last_seen_millis,
                    },
                );
            }
        }
    }

    /// Deletes the stored report of a cluster `--insecure-prune-after`
    /// forgot: kept, it would be imported again on a relist or restart.
    async fn forget_pruned(&self, cluster: &str) {
        match delete(&self.api, cluster).await {
            Ok(()) => tracing::debug!(cluster, "pruned cluster's stored report deleted"),
            Err(e) => {
                tracing::warn!(cluster, error = %e, "cannot delete a pruned cluster's stored report")
            }
        }
    }

    async fn write(&self, spec: &ClusterReportSpec) -> bool {
        let name = object_name(&spec.cluster);
        let body = serde_json::json!({
            "apiVersion": "gwhub.io/v1alpha1",
            "kind": "ClusterReport",
            "metadata": {"name": name},
            "spec": spec,
        });
        match self
            .api
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await
        {
            Ok(_) => {
                Metrics::bump(&self.metrics.report_writes);
                tracing::debug!(cluster = %spec.cluster, object = %name, "report stored");
                true
            }
            Err(e) => {
                Metrics::bump(&self.metrics.report_write_errors);
                tracing::warn!(cluster = %spec.cluster, object = %name, error = %e, "cannot store the cluster's report; retrying");
                false
            }
        }
    }
}

/// Imports other writers' reports (a previous hub, another replica) into
/// the index. `restored` turns true once the first full list is in.
pub(crate) async fn run_importer(
    api: Api<ClusterReport>,
    index: Index,
    restored: watch::Sender<bool>,
    forget: tokio::sync::mpsc::Sender<String>,
    shutdown: CancellationToken,
) {
    let events = watcher::watcher(api, watcher::Config::default()).default_backoff();
    let mut changes = std::pin::pin!(changes(events, shutdown));
    while let Some(change) = changes.next().await {
        match change {
            Change::Listed(reports) => {
                let mut listed: BTreeSet<String> = BTreeSet::new();
                for cr in &reports {
                    listed.insert(cr.spec.cluster.clone());
                    import(&index, cr);
                }
                // Objects deleted while the watch was down: deregister.
                let gone: Vec<String> = index
                    .clusters()
                    .into_iter()
                    .map(|c| c.name)
                    .filter(|n| !listed.contains(n))
                    .collect();
                for cluster in gone {
                    deleted(&index, &forget, &cluster).await;
                }
                if !*restored.borrow() {
                    tracing::info!(
                        clusters = listed.len(),
                        "restored cluster reports from the store"
                    );
                }
                restored.send_replace(true);
            }
            Change::Applied(cr) => import(&index, &cr),
            Change::Deleted(cr) => deleted(&index, &forget, &cr.spec.cluster).await,
            Change::Failed(e) => {
                tracing::warn!(error = %e, "watching ClusterReports failed; retrying")
            }
        }
    }
}

fn import(index: &Index, cr: &ClusterReport) {
    let spec = &cr.spec;
    if object_name(&spec.cluster) != cr.name_any() {
        tracing::warn!(object = %cr.name_any(), cluster = %spec.cluster, "ClusterReport name does not match its cluster; ignored");
        return;
    }
    let taken = index.import_cluster(
        &spec.cluster,
        gateways_of(spec),
        millis(spec.last_report_time.as_deref()),
        millis(spec.last_seen_time.as_deref()),
    );
    if taken {
        tracing::debug!(cluster = %spec.cluster, gateways = spec.gateways.len(), "imported stored report");
    }
}

async fn deleted(index: &Index, forget: &tokio::sync::mpsc::Sender<String>, cluster: &str) {
    if !index.deregister(cluster) {
        // Streaming here: written back on the next pass.
        let _ = forget.send(cluster.to_owned()).await;
    }
}

/// Deletes a cluster's stored report (e.g. `gwhubctl` deregistration).
pub async fn delete(api: &Api<ClusterReport>, cluster: &str) -> kube::Result<()> {
    match api
        .delete(&object_name(cluster), &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_round_trips_a_record() {
        let mut gateways = BTreeMap::new();
        gateways.insert(GatewayKey::new("ns", "gw"), GatewayStatus::default());
        let record = ClusterRecord {
            cluster: "cluster_1".into(),
            gateways: gateways.clone(),
            last_report_millis: 1_700_000_000_123,
            last_seen_millis: 1_700_000_005_000,
            connected: true,
            report_rev: 3,
        };
        let spec = spec_of(&record);
        assert_eq!(spec.gateway_count, 1);
        let back: ClusterReportSpec =
            serde_json::from_value(serde_json::to_value(&spec).unwrap()).unwrap();
        assert_eq!(gateways_of(&back), gateways);
        assert_eq!(millis(back.last_report_time.as_deref()), 1_700_000_000_123);
        assert_eq!(millis(back.last_seen_time.as_deref()), 1_700_000_005_000);
    }
}
