//! Reports: a cluster's snapshot or changes applied to the fleet (within
//! the budgets), the records the Kubernetes store persists and imports, and
//! the per-cluster summaries the Dashboard lists.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_proto::{convert, v1};
use jiff::Timestamp;
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use tokio::sync::watch;

use super::lock_order::{self, Before, Held, Proof};
use super::sessions::{ClusterTransition, Session, Superseded};
use super::{Index, now_millis};
use gwhub_hub_rules::aggregate::fleet::SharedReport;
use gwhub_hub_rules::aggregate::{Fleet, Freshness, GatewayKey, Options, ReportedStatus};

/// The reports part of the index: every cluster's latest report (the
/// engine's [`Fleet`], keeping each Gateway's incremental aggregate) and
/// the revision the store follows.
pub(super) struct Reports {
    /// Taken for writes by ingest under a short lock; the last lock of
    /// the order (`lock_order`), reached only through [`Reports::read`]
    /// and [`Reports::write`].
    fleet: RwLock<Fleet>,
    /// Bumped whenever some cluster's reports were applied.
    revision: watch::Sender<u64>,
}

impl Reports {
    pub(super) fn new(options: Options) -> Self {
        let (revision, _) = watch::channel(0);
        Reports {
            fleet: RwLock::new(Fleet::with_incremental(options)),
            revision,
        }
    }

    /// The fleet for reading, for a short sync section: after the
    /// clusters or a pass's lock, if either is held (see `lock_order`).
    pub(super) fn read<'a, L: Before<lock_order::Fleet>>(
        &'a self,
        _held: Proof<'a, L>,
    ) -> RwLockReadGuard<'a, Fleet> {
        self.fleet.read()
    }

    /// The fleet for writing, as [`Reports::read`].
    pub(super) fn write<'a, L: Before<lock_order::Fleet>>(
        &'a self,
        _held: Proof<'a, L>,
    ) -> RwLockWriteGuard<'a, Fleet> {
        self.fleet.write()
    }

    /// Some cluster's reports changed: the store has something to write.
    pub(super) fn bump(&self) {
        self.revision.send_modify(|r| *r += 1);
    }
}

/// Why a delta was not applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(transparent)]
    Superseded(#[from] Superseded),
    /// Deltas may not grow a cluster past what one snapshot may carry.
    #[error(
        "cluster {cluster:?} would report {count} Gateways after this delta, more than the limit of {max}"
    )]
    TooManyGateways {
        cluster: String,
        count: usize,
        max: usize,
    },
}

/// How many Gateways a cluster reporting `current` reports after `changes`.
pub(super) fn count_after(current: Option<&BTreeSet<GatewayKey>>, changes: &[Change]) -> usize {
    let has = |k: &GatewayKey| current.is_some_and(|c| c.contains(k));
    let mut added = BTreeSet::new();
    let mut removed = BTreeSet::new();
    for change in changes {
        match change {
            Change::Upsert(key, _) if has(key) => {
                removed.remove(key);
            }
            Change::Upsert(key, _) => {
                added.insert(key);
            }
            Change::Delete(key) if has(key) => {
                removed.insert(key);
            }
            Change::Delete(key) => {
                added.remove(key);
            }
        }
    }
    current.map_or(0, BTreeSet::len) + added.len() - removed.len()
}

/// One change of a delta, decoded.
#[derive(Debug)]
pub enum Change {
    Upsert(GatewayKey, GatewayStatus),
    Delete(GatewayKey),
}

/// A cluster as `ListClusters` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterSummary {
    pub name: String,
    pub connected: bool,
    pub stale: bool,
    pub last_report_millis: i64,
    pub last_seen_millis: i64,
    pub gateway_count: usize,
    pub agent_version: String,
    /// Encoded bytes of the cluster's report (see `--max-cluster-report-bytes`).
    pub report_bytes: u64,
    /// See [`ClusterRecord::report_rev`]: lets the store skip unchanged
    /// clusters without copying their reports.
    pub report_rev: u64,
    /// The id of the cluster's latest stream to this hub (a new stream, a
    /// new id), so the store knows when its record of what it wrote for
    /// the cluster may be out of date.
    pub session: u64,
}

/// Everything one cluster reports, as persistence stores it.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterRecord {
    pub cluster: String,
    pub gateways: BTreeMap<GatewayKey, GatewayStatus>,
    pub last_report_millis: i64,
    pub last_seen_millis: i64,
    /// Whether the cluster streams to this hub right now.
    pub connected: bool,
    /// See [`Index::subscribe_reports`]; unchanged means nothing to persist.
    pub report_rev: u64,
}

/// One cluster's report of a Gateway, for `GetGateway`.
#[derive(Clone, Debug)]
pub struct ClusterGateway {
    pub cluster: String,
    pub stale: bool,
    pub last_seen_millis: i64,
    pub status: v1::GatewayStatus,
}

impl Index {
    /// Replaces everything the session's cluster reports, atomically.
    pub fn replace_snapshot(
        &self,
        session: &Session,
        gateways: BTreeMap<GatewayKey, GatewayStatus>,
    ) -> Result<(), Superseded> {
        let mut held = Held::nothing();
        let affected = {
            let mut fleet = self.inner.reports.write(held.proof());
            session.check(&fleet)?;
            let affected = fleet.replace_snapshot(session.cluster(), gateways);
            session.live().bump_report_rev(&mut fleet);
            affected
        };
        self.reported(session, affected);
        Ok(())
    }

    /// Applies one delta's changes, in order, under one lock; refuses the
    /// whole delta if the cluster would then report more than
    /// [`gwhub_model::limits::MAX_GATEWAYS`] Gateways.
    pub fn apply(&self, session: &Session, changes: Vec<Change>) -> Result<(), ApplyError> {
        self.apply_stamped(session, changes, None)
    }

    /// [`Index::apply`], the changes landing with `stamp` (when the agent
    /// observed them, the apply's trace: [`super::Stamp::current`]) under
    /// the same lock, so the pass that reads them takes it.
    pub fn apply_stamped(
        &self,
        session: &Session,
        changes: Vec<Change>,
        stamp: Option<super::provenance::Stamp>,
    ) -> Result<(), ApplyError> {
        let mut held = Held::nothing();
        let mut affected = BTreeSet::new();
        {
            let mut fleet = self.inner.reports.write(held.proof());
            session.check(&fleet)?;
            let count = count_after(fleet.cluster_gateways(session.cluster()), &changes);
            let max = gwhub_model::limits::MAX_GATEWAYS;
            if count > max {
                return Err(ApplyError::TooManyGateways {
                    cluster: session.cluster().to_owned(),
                    count,
                    max,
                });
            }
            for change in changes {
                let a = match change {
                    Change::Upsert(key, status) => fleet.upsert(session.cluster(), key, status),
                    Change::Delete(key) => fleet.delete(session.cluster(), &key),
                };
                affected.extend(a);
            }
            // With the stamp, under this lock, so the pass that reads
            // these changes takes it (`Aggregator::pending`); only where
            // something changed: a Gateway no pass is due for would keep
            // it for some later, unrelated change.
            self.note_changes_locked(session.cluster(), affected, stamp.as_ref());
            session.live().bump_report_rev(&mut fleet);
        }
        self.report_landed(session);
        Ok(())
    }

    /// Fires whenever some cluster's reports were applied (see
    /// [`Index::cluster_record`]).
    pub fn subscribe_reports(&self) -> watch::Receiver<u64> {
        self.inner.reports.revision.subscribe()
    }

    /// Everything `cluster` reports, for persistence; `None` if unknown.
    pub fn cluster_record(&self, cluster: &str) -> Option<ClusterRecord> {
        let mut held = Held::nothing();
        let live = self.inner.sessions.get(held.proof(), cluster)?;
        let (report_rev, gateways) = {
            let fleet = self.inner.reports.read(held.proof());
            // Bumped under the fleet lock, so it matches what is read here.
            let report_rev = live.report_rev_with(&fleet);
            let shared: Vec<(GatewayKey, Arc<ReportedStatus>)> = fleet
                .cluster_gateways(cluster)
                .into_iter()
                .flatten()
                .filter_map(|key| Some((key.clone(), fleet.status(cluster, key)?.clone())))
                .collect();
            (report_rev, shared)
        };
        // Full copies outside the lock.
        let gateways = gateways
            .into_iter()
            .map(|(key, status)| (key, status.to_status()))
            .collect();
        Some(ClusterRecord {
            cluster: cluster.to_owned(),
            gateways,
            last_report_millis: live.last_report(),
            last_seen_millis: live.last_seen(),
            connected: live.connected(),
            report_rev,
        })
    }

    /// Takes a cluster's reports from the store (a restart, or another hub
    /// replica the agent streams to), unless the cluster's stream to this
    /// hub has reported and is still on or was later than the stored
    /// report (its liveness is still taken then). Liveness continues from
    /// the stored times, so a cluster silent for `stale_after` is stale at
    /// once and a live one does not flap. A cluster past `--max-clusters` is not
    /// taken. Returns whether its Gateways were taken.
    pub fn import_cluster(
        &self,
        cluster: &str,
        gateways: BTreeMap<GatewayKey, GatewayStatus>,
        last_report_millis: i64,
        last_seen_millis: i64,
    ) -> bool {
        let mut held = Held::nothing();
        let limit =
            i64::try_from(self.inner.sessions.stale_after().as_millis()).unwrap_or(i64::MAX);
        if !self.may_import(cluster) {
            // It left while no hub saw it (or before this one listed the
            // inventory): its stored report goes, as a removed cluster's.
            tracing::debug!(
                cluster,
                "stored report not imported and deleted: the cluster is not in the fleet inventory"
            );
            self.inner.sessions.announce_pruned(cluster);
            return false;
        }
        let mut clusters = self.inner.sessions.lock(held.proof());
        // A cluster first heard of from the store (a restart) is not news.
        let known = clusters.contains(cluster);
        // The store is bounded like the streams: a relist or restart does
        // not bring back more clusters than --max-clusters.
        let max = self.inner.sessions.max_clusters();
        if !known && clusters.len() >= max {
            drop(clusters);
            self.inner.counters.refused_clusters.inc();
            tracing::warn!(
                cluster,
                max,
                "stored report not imported: the hub already keeps --max-clusters clusters"
            );
            return false;
        }
        let live = clusters.get_or_add(cluster);
        let mut fleet = self.inner.reports.write(clusters.proof());
        let heard_here = live.report_rev_with(&fleet) > 0;
        if heard_here && live.connected() {
            return false;
        }
        // After its stream here ended, a cluster's Gateways stay as it
        // reported them unless the store holds a later report (the replica
        // the agent moved to): the watch echo of this hub's own earlier
        // write, arriving after the disconnect, would otherwise roll the
        // cluster back to it and the store would never keep the last
        // report. Its liveness is taken either way: the other replica
        // refreshes lastSeenTime without a new report, and the cluster is
        // not stale while it streams there. (Report times are each
        // replica's wall clock.)
        let keep_ours = heard_here && last_report_millis <= live.last_report();
        let seen = live.raise_last_seen(last_seen_millis);
        live.raise_last_report(last_report_millis);
        let stale = now_millis().saturating_sub(seen) >= limit;
        let was_stale = live.swap_stale(stale);
        let last = Timestamp::from_millisecond(seen).unwrap_or(Timestamp::UNIX_EPOCH);
        let mut affected = if keep_ours {
            BTreeSet::new()
        } else {
            fleet.replace_snapshot(cluster, gateways)
        };
        affected.extend(if stale {
            fleet.mark_stale(cluster, last)
        } else {
            fleet.mark_fresh(cluster)
        });
        drop(fleet);
        drop(clusters);
        self.mark_dirty_by(cluster, affected);
        if !known {
            self.expectations_changed();
        }
        match (was_stale, stale) {
            (false, true) if known => self.transition(ClusterTransition::Stale {
                cluster: cluster.to_owned(),
                last_seen: last,
            }),
            (true, false) => self.transition(ClusterTransition::Fresh {
                cluster: cluster.to_owned(),
            }),
            _ => {}
        }
        !keep_ours
    }

    /// Whether `cluster` is known here (streaming to this hub, or imported
    /// from the store).
    pub fn has_cluster(&self, cluster: &str) -> bool {
        let mut held = Held::nothing();
        self.inner.sessions.lock(held.proof()).contains(cluster)
    }

    /// Forgets a cluster that is not streaming to this hub (its stored
    /// report was deleted: the operator deregistered it). Returns whether it
    /// was forgotten.
    pub fn deregister(&self, cluster: &str) -> bool {
        let mut held = Held::nothing();
        let mut clusters = self.inner.sessions.lock(held.proof());
        match clusters.get(cluster) {
            Some(live) if live.connected() => return false,
            Some(_) => {
                clusters.remove(cluster);
            }
            None => return false,
        }
        let affected = self
            .inner
            .reports
            .write(clusters.proof())
            .deregister(cluster);
        drop(clusters);
        tracing::info!(cluster, "cluster deregistered");
        self.mark_dirty_by(cluster, affected);
        self.expectations_changed();
        true
    }

    /// Every cluster, in name order.
    pub fn clusters(&self) -> Vec<ClusterSummary> {
        let mut held = Held::nothing();
        let counts: BTreeMap<String, usize> = self
            .inner
            .reports
            .fleet
            .read()
            .clusters()
            .map(|(n, _, count)| (n.to_owned(), count))
            .collect();
        let clusters = self.inner.sessions.lock(held.proof());
        clusters
            .all()
            .map(|l| ClusterSummary {
                name: l.name().to_owned(),
                connected: l.connected(),
                stale: l.stale(),
                last_report_millis: l.last_report(),
                last_seen_millis: l.last_seen(),
                gateway_count: counts.get(l.name()).copied().unwrap_or(0),
                agent_version: l.agent_version(),
                report_bytes: l.report_bytes(),
                report_rev: l.report_rev(),
                session: l.session_id(),
            })
            .collect()
    }

    /// Each cluster's report of `key`, in cluster name order.
    pub fn cluster_reports(&self, key: &GatewayKey) -> Vec<ClusterGateway> {
        let mut held = Held::nothing();
        let seen: BTreeMap<String, i64> = self
            .inner
            .sessions
            .lock(held.proof())
            .all()
            .map(|l| (l.name().to_owned(), l.last_seen()))
            .collect();
        let shared = self.inner.reports.read(held.proof()).reports_shared(key);
        shared
            .into_iter()
            .map(|r| ClusterGateway {
                stale: matches!(r.freshness, Freshness::Stale { .. }),
                last_seen_millis: seen.get(&r.cluster).copied().unwrap_or(0),
                // Validated on the way in, so this encodes.
                status: convert::status_to_proto(&r.status.to_status()).unwrap_or_default(),
                cluster: r.cluster,
            })
            .collect()
    }

    /// Every cluster's report of every hub Gateway `keep` accepts, for the
    /// web page's causes: the statuses are shared, so the fleet's read lock
    /// is held only to clone `Arc`s and names.
    pub fn all_reports(
        &self,
        keep: impl Fn(&GatewayKey) -> bool,
    ) -> Vec<(GatewayKey, SharedReport)> {
        let mut held = Held::nothing();
        let fleet = self.inner.reports.read(held.proof());
        let keys: Vec<GatewayKey> = fleet.gateway_keys().filter(|k| keep(k)).cloned().collect();
        keys.into_iter()
            .flat_map(|k| {
                let reports = fleet.reports_shared(&k);
                reports.into_iter().map(move |r| (k.clone(), r))
            })
            .collect()
    }

    /// Book-keeping after a snapshot or delta was applied: the session's
    /// last report time, the reports revision (the store writes on it) and
    /// the Gateways to re-aggregate.
    fn reported(&self, session: &Session, affected: BTreeSet<GatewayKey>) {
        self.report_landed(session);
        self.mark_dirty_by(session.cluster(), affected);
    }

    /// A report of `session`'s cluster landed: its time, and the store's
    /// revision.
    fn report_landed(&self, session: &Session) {
        session.live().set_last_report(now_millis());
        self.inner.reports.bump();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: &str) -> GatewayKey {
        GatewayKey::new("ns", n)
    }

    #[test]
    fn count_after_follows_the_changes_in_order() {
        let current: BTreeSet<GatewayKey> = [key("a"), key("b")].into();
        let up = |n: &str| Change::Upsert(key(n), GatewayStatus::default());
        let del = |n: &str| Change::Delete(key(n));
        assert_eq!(count_after(None, &[]), 0);
        assert_eq!(count_after(None, &[up("a"), up("a"), up("b")]), 2);
        assert_eq!(count_after(Some(&current), &[up("a"), up("c")]), 3);
        assert_eq!(count_after(Some(&current), &[del("a"), up("c")]), 2);
        // Deleted, then reported again; added, then deleted; unknown deletes.
        assert_eq!(count_after(Some(&current), &[del("a"), up("a")]), 2);
        assert_eq!(count_after(Some(&current), &[up("c"), del("c")]), 2);
        assert_eq!(count_after(Some(&current), &[del("x"), del("b")]), 1);
    }
}
