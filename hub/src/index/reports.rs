//! Reports: a cluster's snapshot or changes applied to the fleet (within
//! the budgets), the records the Kubernetes store persists and imports, and
//! the per-cluster summaries the Dashboard lists.

#[allow(unused_imports)]
use super::*;

impl Index {
    /// Replaces everything the session's cluster reports, atomically.
    pub fn replace_snapshot(
        &self,
        session: &Session,
        gateways: BTreeMap<GatewayKey, GatewayStatus>,
    ) -> Result<(), Superseded> {
        let affected = {
            let mut fleet = self.inner.fleet.write();
            if session.is_superseded() {
                return Err(Superseded(session.cluster().to_owned()));
            }
            let affected = fleet.replace_snapshot(session.cluster(), gateways);
            // Under the fleet lock, so `import_cluster` never overwrites it.
            session.live.report_rev.fetch_add(1, Ordering::SeqCst);
            affected
        };
        self.reported(session, affected);
        Ok(())
    }

    /// Applies one delta's changes, in order, under one lock; refuses the
    /// whole delta if the cluster would then report more than
    /// [`gwhub_model::limits::MAX_GATEWAYS`] Gateways.
    pub fn apply(&self, session: &Session, changes: Vec<Change>) -> Result<(), ApplyError> {
        let mut affected = BTreeSet::new();
        {
            let mut fleet = self.inner.fleet.write();
            if session.is_superseded() {
                return Err(Superseded(session.cluster().to_owned()).into());
            }
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
            session.live.report_rev.fetch_add(1, Ordering::SeqCst);
        }
        self.reported(session, affected);
        Ok(())
    }

    /// Fires whenever some cluster's reports were applied (see
    /// [`Index::cluster_record`]).
    pub(crate) fn subscribe_reports(&self) -> watch::Receiver<u64> {
        self.inner.reports.subscribe()
    }

    /// Everything `cluster` reports, for persistence; `None` if unknown.
    pub fn cluster_record(&self, cluster: &str) -> Option<ClusterRecord> {
        let live = self.inner.clusters.lock().get(cluster).cloned()?;
        let (report_rev, gateways) = {
            let fleet = self.inner.fleet.read();
            // Bumped under the fleet lock, so it matches what is read here.
            let report_rev = live.report_rev.load(Ordering::SeqCst);
            let shared: Vec<(GatewayKey, Arc<GatewayStatus>)> = fleet
                .cluster_gateways(cluster)
                .into_iter()
                .flatten()
                .filter_map(|key| Some((key.clone(), fleet.status(cluster, key)?.clone())))
                .collect();
            (report_rev, shared)
        };
        // Deep copies outside the lock.
        let gateways = gateways
            .into_iter()
            .map(|(key, status)| (key, GatewayStatus::clone(&status)))
            .collect();
        Some(ClusterRecord {
            cluster: cluster.to_owned(),
            gateways,
            last_report_millis: live.last_report.load(Ordering::SeqCst),
            last_seen_millis: live.last_seen.load(Ordering::SeqCst),
            connected: live.connected.load(Ordering::SeqCst),
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
    pub(crate) fn import_cluster(
        &self,
        cluster: &str,
        gateways: BTreeMap<GatewayKey, GatewayStatus>,
        last_report_millis: i64,
        last_seen_millis: i64,
    ) -> bool {
        let limit = i64::try_from(self.inner.stale_after.as_millis()).unwrap_or(i64::MAX);
        if !self.may_import(cluster) {
            // It left while no hub saw it (or before this one listed the
            // inventory): its stored report goes, as a removed cluster's.
            tracing::debug!(
                cluster,
                "stored report not imported and deleted: the cluster is not in the fleet inventory"
            );
            let _ = self.inner.pruned.send(cluster.to_owned());
            return false;
        }
        let mut clusters = self.inner.clusters.lock();
        // A cluster first heard of from the store (a restart) is not news.
        let known = clusters.contains_key(cluster);
        // The store is bounded like the streams: a relist or restart does
        // not bring back more clusters than --max-clusters.
        let max = self.inner.max_clusters;
        if !known && clusters.len() >= max {
            drop(clusters);
            Counters::bump(&self.inner.counters.refused_clusters);
            tracing::warn!(
                cluster,
                max,
                "stored report not imported: the hub already keeps --max-clusters clusters"
            );
            return false;
        }
        let live = clusters
            .entry(cluster.to_owned())
            .or_insert_with(|| Arc::new(ClusterLive::new(cluster)))
            .clone();
        let mut fleet = self.inner.fleet.write();
        let heard_here = live.report_rev.load(Ordering::SeqCst) > 0;
        if heard_here && live.connected.load(Ordering::SeqCst) {
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
        let keep_ours = heard_here && last_report_millis <= live.last_report.load(Ordering::SeqCst);
        let seen = last_seen_millis.max(live.last_seen.load(Ordering::SeqCst));
        live.last_seen.store(seen, Ordering::SeqCst);
        live.last_report.store(
            last_report_millis.max(live.last_report.load(Ordering::SeqCst)),
            Ordering::SeqCst,
        );
        let stale = now_millis().saturating_sub(seen) >= limit;
        let was_stale = live.stale.swap(stale, Ordering::SeqCst);
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
        self.mark_dirty(affected);
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
    pub(crate) fn has_cluster(&self, cluster: &str) -> bool {
        self.inner.clusters.lock().contains_key(cluster)
    }

    /// Forgets a cluster that is not streaming to this hub (its stored
    /// report was deleted: the operator deregistered it). Returns whether it
    /// was forgotten.
    pub fn deregister(&self, cluster: &str) -> bool {
        let mut clusters = self.inner.clusters.lock();
        match clusters.get(cluster) {
            Some(live) if live.connected.load(Ordering::SeqCst) => return false,
            Some(_) => {
                clusters.remove(cluster);
            }
            None => return false,
        }
        let affected = self.inner.fleet.write().deregister(cluster);
        drop(clusters);
        tracing::info!(cluster, "cluster deregistered");
        self.mark_dirty(affected);
        self.expectations_changed();
        true
    }

    /// Every cluster, in name order.
    pub fn clusters(&self) -> Vec<ClusterSummary> {
        let counts: BTreeMap<String, usize> = self
            .inner
            .fleet
            .read()
            .clusters()
            .map(|(n, _, count)| (n.to_owned(), count))
            .collect();
        let clusters = self.inner.clusters.lock();
        clusters
            .values()
            .map(|l| ClusterSummary {
                name: l.name.clone(),
                connected: l.connected.load(Ordering::SeqCst),
                stale: l.stale.load(Ordering::SeqCst),
                last_report_millis: l.last_report.load(Ordering::SeqCst),
                last_seen_millis: l.last_seen.load(Ordering::SeqCst),
                gateway_count: counts.get(&l.name).copied().unwrap_or(0),
                agent_version: l.agent_version.lock().clone(),
                report_bytes: l.report_bytes.load(Ordering::Relaxed),
                report_rev: l.report_rev.load(Ordering::SeqCst),
                session: l.session.lock().id,
            })
            .collect()
    }

    /// Each cluster's report of `key`, in cluster name order.
    pub fn cluster_reports(&self, key: &GatewayKey) -> Vec<ClusterGateway> {
        let seen: BTreeMap<String, i64> = self
            .inner
            .clusters
            .lock()
            .values()
            .map(|l| (l.name.clone(), l.last_seen.load(Ordering::SeqCst)))
            .collect();
        let shared = self.inner.fleet.read().reports_shared(key);
        shared
            .into_iter()
            .map(|r| ClusterGateway {
                stale: matches!(r.freshness, Freshness::Stale { .. }),
                last_seen_millis: seen.get(&r.cluster).copied().unwrap_or(0),
                // Validated on the way in, so this encodes.
                status: convert::status_to_proto(&r.status).unwrap_or_default(),
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
        let fleet = self.inner.fleet.read();
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
        session
            .live
            .last_report
            .store(now_millis(), Ordering::SeqCst);
        self.inner.reports.send_modify(|r| *r += 1);
        self.mark_dirty(affected);
    }
}
