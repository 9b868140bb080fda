//! Writes the reports of the clusters streaming to this replica: a changed
//! report (after a debounce, oldest unpersisted change first, a cluster at
//! most once per [`REWRITE_EVERY`]) and, once its stream ends, a cluster's
//! `lastSeenTime` (a connected cluster's liveness is this replica's
//! heartbeat, [`crate::liveness`], not a rewrite of its report),
//! only the parts whose hash changed, within the API budget; starts the
//! deletion of a pruned cluster's report once its write in flight ends.
//!
//! The decisions are [`gwhub_hub_rules::store_writer`]'s (tested there
//! without an API server): this is the loop that feeds it what happens
//! and performs what it says.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use gwhub_hub_rules::layout::{CLUSTER_LABEL, PART_LABEL, cluster_label, part_name};
use gwhub_hub_rules::report::{ClusterReport, ClusterReportSpec};
use gwhub_hub_rules::store_writer::{self, Cluster, Outcome, Pass, Seed, Write, Writer};
use kube::api::{Api, Patch, PatchParams};
use tokio_util::sync::CancellationToken;

use super::deletes;
use super::pack::parts_of;
use super::{LostQueue, StoredParts};
use crate::FIELD_MANAGER;
use crate::budget::ApiBudget;
use crate::metrics::Metrics;
use gwhub_index::StorePort;

/// Writes the reports of the clusters streaming to this replica.
pub(crate) struct ReportWriter {
    pub(crate) api: Api<ClusterReport>,
    pub(crate) index: StorePort,
    pub(crate) metrics: Arc<Metrics>,
    /// Wait after a change so a burst becomes one write.
    pub(crate) debounce: Duration,
    /// The API write budget shared with the status writer.
    pub(crate) budget: Arc<ApiBudget>,
    pub(crate) stored: StoredParts,
    /// A cluster that keeps changing is written at most this often
    /// ([`REWRITE_EVERY`]).
    pub(crate) rewrite_every: Duration,
    /// Report writes kept in flight at once, sized from the budget
    /// ([`store_writer::writes_in_flight`]) so it, not this, bounds the
    /// rate.
    pub(crate) writes_in_flight: usize,
}

/// A cluster that keeps changing is written at most this often (see
/// [`gwhub_hub_rules::store_queue`]).
pub(crate) const REWRITE_EVERY: Duration = Duration::from_secs(3);

/// Deletions of pruned clusters' stored reports the writer keeps in flight
/// at once, beside its writes ([`gwhub_hub_rules::store_queue::Prunes`]).
const PRUNES_IN_FLIGHT: usize = 4;

impl ReportWriter {
    /// Writes changed reports until `shutdown`, up to `writes_in_flight` at
    /// once, oldest unpersisted change first; `forget` names clusters
    /// whose object was deleted while they stream here (written again).
    /// Beside the writes, deletes the reports of clusters
    /// `--insecure-prune-after` forgot, up to PRUNES_IN_FLIGHT at once,
    /// each after its cluster's write in flight ends.
    pub(crate) async fn run(self, forget: Arc<LostQueue>, shutdown: CancellationToken) {
        let mut reports = self.index.subscribe_reports();
        let mut pruned = self.index.subscribe_pruned();
        let mut writer = Writer::new(
            store_writer::Config {
                debounce: self.debounce,
                rewrite_every: self.rewrite_every,
                writes_in_flight: self.writes_in_flight,
                prunes_in_flight: PRUNES_IN_FLIGHT,
            },
            Instant::now(),
        );
        let mut running = futures::stream::FuturesUnordered::new();
        let mut deleting = futures::stream::FuturesUnordered::new();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let now = Instant::now();
            if writer.scan_due(now) {
                let clusters = self
                    .index
                    .clusters()
                    .into_iter()
                    .map(|c| Cluster {
                        name: c.name,
                        connected: c.connected,
                        report_rev: c.report_rev,
                        session: c.session,
                        last_seen_millis: c.last_seen_millis,
                    })
                    .collect();
                writer.scan(now, clusters, |c| self.seed(c));
            }
            let actions = writer.next(now);
            for (cluster, parts) in actions.deletes {
                deleting.push(deletes::delete_pruned(
                    &self.api,
                    &self.budget,
                    &self.index,
                    &self.stored,
                    cluster,
                    parts,
                ));
            }
            for write in actions.writes {
                running.push(self.store(write));
            }
            let wake = actions.wake;
            tokio::select! {
                _ = shutdown.cancelled() => return,
                r = reports.changed() => {
                    if r.is_err() {
                        return;
                    }
                    reports.mark_unchanged();
                    writer.changed(Instant::now());
                }
                Some((name, outcome)) = running.next(), if !running.is_empty() => {
                    writer.write_ended(Instant::now(), &name, outcome);
                }
                _ = forget.notified() => {
                    writer.lost(Instant::now(), forget.take_keys());
                }
                r = pruned.recv() => match r {
                    Ok(cluster) => writer.pruned(&cluster),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "pruned clusters' reports not deleted (too many at once); a relist brings them back stale, to be pruned again");
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                },
                Some(cluster) = deleting.next(), if !deleting.is_empty() => {
                    writer.deletion_done(Instant::now(), &cluster);
                }
                _ = gwhub_common::pace::sleep_until(wake), if wake.is_some() => {}
                _ = tick.tick() => writer.tick(Instant::now()),
            }
            if shutdown.is_cancelled() {
                return;
            }
        }
    }

    /// What the store holds of `cluster`, as the importer last saw it:
    /// only its parts that differ (or are missing, unreadable, in the
    /// earlier format) are written, not the whole fleet again after a
    /// restart.
    fn seed(&self, cluster: &str) -> Option<Seed> {
        let stored = self.stored.lock();
        let parts = stored.get(cluster)?;
        let head = parts.get(&0)?;
        let n = head.parts;
        let hashes = (0..n)
            .map(|i| parts.get(&i).filter(|p| p.parts == n).and_then(|p| p.hash))
            .collect();
        Some(Seed {
            parts: n,
            hashes,
            last_seen_millis: head.last_seen_millis,
        })
    }

    /// Writes what changed of one cluster's report: parts first, the head
    /// last, then deletes the parts no count names any more.
    async fn store(&self, write: Write) -> (String, Outcome) {
        let Write {
            cluster: name,
            session,
            written,
            final_seen_due,
        } = write;
        // The budget first: what waited for it is the latest state.
        self.budget.acquire_report().await;
        let mut prepaid = true;
        let Some(record) = self.index.cluster_record(&name) else {
            self.budget.refund();
            return (name, Outcome::Nothing);
        };
        let report_rev = record.report_rev;
        let last_seen_millis = record.last_seen_millis;
        let current = written.as_ref().map_or(1, |w| w.parts);
        let (parts, left_out) = parts_of(record, current);
        if left_out > 0 {
            Metrics::add(&self.metrics.report_gateways_unstored, left_out as u64);
        }
        let hashes = parts.iter().map(|p| p.hash).collect();
        let Some(mut pass) = Pass::new(
            written.as_ref(),
            session,
            report_rev,
            last_seen_millis,
            hashes,
            final_seen_due,
        ) else {
            Metrics::bump(&self.metrics.report_writes_skipped);
            self.budget.refund();
            return (name, Outcome::Rev(report_rev));
        };
        // Parts first, the head (naming the count) last.
        for i in pass.parts_to_write() {
            let Some(p) = parts.get(i as usize) else {
                continue;
            };
            let ok = self.write(&p.spec, p.bytes, &mut prepaid).await;
            pass.part_written(i, ok);
        }
        if pass.head_due()
            && let Some(head) = parts.first()
        {
            let ok = self.write(&head.spec, head.bytes, &mut prepaid).await;
            pass.head_written(ok);
        }
        if pass.head_is_written() {
            // Parts no count names any more: ours and a previous
            // process's.
            let mut stale: BTreeSet<u32> = pass.stale_parts().collect();
            let n = pass.parts();
            if let Some(stored) = self.stored.lock().get(&name) {
                stale.extend(stored.keys().filter(|p| **p >= n));
            }
            for part in stale {
                deletes::delete_stale_part(&self.api, &self.budget, &name, part).await;
            }
        }
        (name, pass.outcome())
    }

    /// Writes one object; takes a token unless `prepaid` (then spends it).
    async fn write(&self, spec: &ClusterReportSpec, bytes: usize, prepaid: &mut bool) -> bool {
        let name = part_name(&spec.cluster, spec.part);
        let body = serde_json::json!({
            "apiVersion": "gwhub.io/v1alpha1",
            "kind": "ClusterReport",
            "metadata": {
                "name": name,
                "labels": {
                    CLUSTER_LABEL: cluster_label(&spec.cluster),
                    PART_LABEL: spec.part.to_string(),
                },
            },
            "spec": spec,
        });
        if !std::mem::take(prepaid) {
            self.budget.acquire_report().await;
        }
        let sent = std::time::Instant::now();
        let answer = self
            .api
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await;
        self.metrics.store_write_seconds.observe(sent.elapsed());
        match answer {
            // An API server whose ClusterReport CRD predates
            // `gatewaysPacked` prunes it and stores no Gateways: say so
            // instead of counting an empty report as written.
            Ok(stored)
                if spec.gateways_packed.is_some() && stored.spec.gateways_packed.is_none() =>
            {
                Metrics::bump(&self.metrics.report_write_errors);
                tracing::error!(cluster = %spec.cluster, object = %name, "the management cluster's ClusterReport CRD is older than this hub (it drops spec.gatewaysPacked): apply manifests/crd-clusterreports.yaml; retrying");
                false
            }
            Ok(_) => {
                Metrics::bump(&self.metrics.report_writes);
                Metrics::add(&self.metrics.report_write_bytes, bytes as u64);
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
