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
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::FIELD_MANAGER;
use super::metrics::Metrics;
use crate::aggregate::GatewayKey;
use crate::index::{ClusterRecord, Index};

/// Everything one cluster last reported.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "gwhub.io",
    version = "v1alpha1",
    kind = "ClusterReport",
    plural = "clusterreports",
    namespaced,
    shortname = "gwcr",
    category = "gwhub",
    doc = "The last report of one workload cluster's Gateway status, persisted by the gwhub hub so a restarted hub resumes without flapping. Written by the hub; delete one to deregister its cluster.",
    printcolumn = r#"{"name": "Cluster", "type": "string", "jsonPath": ".spec.cluster"}"#,
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
    /// Number of Gateways below; for `kubectl get`.
    pub gateway_count: u32,
    /// RFC 3339 time of the last snapshot or delta applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_report_time: Option<String>,
    /// RFC 3339 time of the last message of any kind (heartbeats included),
    /// refreshed at most every half `--stale-after`; staleness continues
    /// from it after a restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen_time: Option<String>,
    /// Each Gateway the cluster reports, in namespace/name order.
    #[serde(default)]
    pub gateways: Vec<ReportedGateway>,
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
        "# Generated from gwhub::kube::reports::ClusterReport; do not edit.\n\
         # Regenerate: GWHUB_BLESS=1 cargo test -p gwhub --lib kube::reports\n{body}"
    )
}

/// The object name for `cluster`: the name itself when it is a valid
/// object name, else a sanitised form plus a hash of the original, so two
/// clusters never share an object.
pub fn object_name(cluster: &str) -> String {
    let valid = !cluster.is_empty()
        && cluster.len() <= 253
        && cluster
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && cluster.as_bytes()[0].is_ascii_alphanumeric()
        && cluster.as_bytes()[cluster.len() - 1].is_ascii_alphanumeric();
    if valid {
        return cluster.to_owned();
    }
    let mut base: String = cluster
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .take(200)
        .collect();
    base = base.trim_matches('-').to_owned();
    if base.is_empty() {
        base.push_str("cluster");
    }
    // FNV-1a: stable across builds and platforms (unlike std's hasher).
    let hash = cluster.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{base}-{:08x}", hash as u32)
}

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
pub fn spec_of(record: &ClusterRecord) -> ClusterReportSpec {
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
pub fn gateways_of(spec: &ClusterReportSpec) -> BTreeMap<GatewayKey, GatewayStatus> {
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
pub async fn run_importer(
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

    const COMMITTED: &str = include_str!("../../../manifests/crd-clusterreports.yaml");

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
            "manifests/crd-clusterreports.yaml is out of date: GWHUB_BLESS=1 cargo test -p gwhub --lib kube::reports"
        );
    }

    #[test]
    fn object_names_are_valid_and_distinct() {
        assert_eq!(object_name("gateway-1"), "gateway-1");
        let a = object_name("cluster_1");
        let b = object_name("cluster-1");
        assert_ne!(a, b);
        assert!(a.starts_with("cluster-1-"), "{a}");
        for name in ["Cluster_1", "_x_", "", &"x".repeat(300), "a.b", "-a"] {
            let n = object_name(name);
            assert!(!n.is_empty() && n.len() <= 253, "{n}");
            assert!(
                n.bytes().all(|b| b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || b == b'-'
                    || b == b'.'),
                "{n}"
            );
            assert!(n.as_bytes()[0].is_ascii_alphanumeric(), "{n}");
            assert!(n.as_bytes()[n.len() - 1].is_ascii_alphanumeric(), "{n}");
        }
    }

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
