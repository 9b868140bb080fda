//! Sessions and liveness: which cluster streams where, a newer stream
//! superseding an older one, heartbeats, staleness and pruning of silent
//! clusters.

#[allow(unused_imports)]
use super::*;

impl Index {
    /// Records the encoded size of the session's cluster's report.
    pub(crate) fn set_report_bytes(&self, session: &Session, bytes: u64) {
        if !session.is_superseded() {
            session.live.report_bytes.store(bytes, Ordering::Relaxed);
        }
    }

    /// Every cluster `--insecure-prune-after` forgets from now on (the
    /// store deletes their reports, so a relist or restart does not bring
    /// them back).
    pub(crate) fn subscribe_pruned(&self) -> broadcast::Receiver<String> {
        self.inner.pruned.subscribe()
    }

    /// Every stale/fresh transition of a cluster from now on.
    pub(crate) fn subscribe_transitions(&self) -> broadcast::Receiver<ClusterTransition> {
        self.inner.transitions.subscribe()
    }

    pub(super) fn transition(&self, t: ClusterTransition) {
        // No subscriber (no Kubernetes side) is fine.
        let _ = self.inner.transitions.send(t);
    }

    /// Registers a new stream for `cluster`, superseding any older one. The
    /// cluster's reports stay as they are until its next snapshot, so a
    /// reconnect does not flap the aggregate.
    /// With a fleet inventory, a cluster outside it is refused (or, with
    /// `--inventory-mode=observe`, admitted and flagged).
    pub fn connect(&self, cluster: &str, agent_version: &str) -> Result<Session, ConnectError> {
        // Under the clusters lock, like `disconnect`: an older stream's
        // disconnect cannot land between taking over and marking connected.
        // The session slot is taken under the fleet lock, which the older
        // stream's report writes hold while they check their session: none
        // of them lands after this.
        let session = {
            let mut clusters = self.inner.clusters.lock();
            // Under the clusters lock: a leave cannot land between the check
            // and the connection.
            if self.admit(cluster)? {
                tracing::warn!(
                    cluster,
                    "agent outside the fleet inventory admitted (--inventory-mode=observe)"
                );
            }
            let max = self.inner.max_clusters.load(Ordering::Relaxed);
            let new = !clusters.contains_key(cluster);
            if new && clusters.len() >= max {
                Counters::bump(&self.inner.counters.refused_clusters);
                return Err(TooManyClusters {
                    cluster: cluster.to_owned(),
                    max,
                }
                .into());
            }
            let live = clusters
                .entry(cluster.to_owned())
                .or_insert_with(|| Arc::new(ClusterLive::new(cluster)))
                .clone();
            let (id, cancel) = {
                let _fleet = self.inner.fleet.write();
                let mut slot = live.session.lock();
                slot.id += 1;
                let cancel = CancellationToken::new();
                let old = std::mem::replace(&mut slot.cancel, cancel.clone());
                old.cancel();
                (slot.id, cancel)
            };
            live.connected.store(true, Ordering::SeqCst);
            (Session { live, id, cancel }, new)
        };
        let (session, new) = session;
        if new {
            self.expectations_changed();
        }
        *session.live.agent_version.lock() = agent_version.to_owned();
        self.touch(&session);
        Ok(session)
    }

    /// The stream ended; its cluster's reports stay (and go stale in time).
    pub(crate) fn disconnect(&self, session: &Session) {
        let _clusters = self.inner.clusters.lock();
        if !session.is_superseded() {
            session.live.connected.store(false, Ordering::SeqCst);
        }
    }

    /// Records that the cluster is alive; a stale cluster turns fresh. A
    /// superseded session's messages do not count (returns `false`): only
    /// the stream the cluster's report came from keeps it fresh.
    pub fn touch(&self, session: &Session) -> bool {
        let live = &session.live;
        {
            let slot = live.session.lock();
            if slot.id != session.id {
                return false;
            }
            live.last_seen.store(now_millis(), Ordering::SeqCst);
        }
        // Pairs with the re-check in `sweep_stale` (both SeqCst): either the
        // sweep sees this time, or this sees its `stale` flag.
        if live.stale.load(Ordering::SeqCst) {
            let _clusters = self.inner.clusters.lock();
            if live.stale.swap(false, Ordering::SeqCst) {
                let affected = self.inner.fleet.write().mark_fresh(&live.name);
                self.mark_dirty(affected);
                tracing::info!(cluster = %live.name, "cluster is fresh again");
                self.transition(ClusterTransition::Fresh {
                    cluster: live.name.clone(),
                });
            }
        }
        true
    }

    /// Another hub replica serves `cluster` and was alive at `seen_millis`
    /// (its heartbeat, see `kube::liveness`): the cluster's last-seen moves
    /// on and a stale one turns fresh. A cluster streaming here (its own
    /// messages count), or not known here yet (its stored report brings
    /// it), is left alone.
    pub(crate) fn seen_elsewhere(&self, cluster: &str, seen_millis: i64) {
        let limit = i64::try_from(self.inner.stale_after.as_millis()).unwrap_or(i64::MAX);
        let clusters = self.inner.clusters.lock();
        let Some(live) = clusters.get(cluster) else {
            return;
        };
        if live.connected.load(Ordering::SeqCst) {
            return;
        }
        let seen = live
            .last_seen
            .fetch_max(seen_millis, Ordering::SeqCst)
            .max(seen_millis);
        if now_millis().saturating_sub(seen) >= limit || !live.stale.swap(false, Ordering::SeqCst) {
            return;
        }
        let affected = self.inner.fleet.write().mark_fresh(&live.name);
        drop(clusters);
        self.mark_dirty(affected);
        tracing::info!(
            cluster,
            "cluster is fresh again (served by another replica)"
        );
        self.transition(ClusterTransition::Fresh {
            cluster: cluster.to_owned(),
        });
    }

    /// Forgets disconnected clusters silent for the prune bound (see
    /// [`Index::set_prune_after`]).
    pub(crate) fn prune_silent(&self) {
        let after = self.inner.prune_after_millis.load(Ordering::Relaxed);
        if after <= 0 {
            return;
        }
        let now = now_millis();
        let gone: Vec<String> = {
            let mut clusters = self.inner.clusters.lock();
            let gone: Vec<String> = clusters
                .values()
                .filter(|l| {
                    !l.connected.load(Ordering::SeqCst)
                        && now.saturating_sub(l.last_seen.load(Ordering::SeqCst)) >= after
                })
                .map(|l| l.name.clone())
                .collect();
            let mut affected = BTreeSet::new();
            if !gone.is_empty() {
                let mut fleet = self.inner.fleet.write();
                for name in &gone {
                    clusters.remove(name);
                    affected.extend(fleet.deregister(name));
                }
            }
            drop(clusters);
            self.mark_dirty(affected);
            gone
        };
        for cluster in gone {
            Counters::bump(&self.inner.counters.clusters_pruned);
            tracing::info!(
                cluster,
                "silent disconnected cluster forgotten (--insecure-prune-after)"
            );
            let _ = self.inner.pruned.send(cluster);
        }
    }

    /// Marks clusters silent for longer than `stale_after` stale.
    pub(crate) fn sweep_stale(&self) {
        let now = now_millis();
        let limit = i64::try_from(self.inner.stale_after.as_millis()).unwrap_or(i64::MAX);
        let clusters = self.inner.clusters.lock();
        for live in clusters.values() {
            if live.stale.load(Ordering::SeqCst) {
                continue;
            }
            let seen = live.last_seen.load(Ordering::SeqCst);
            if now.saturating_sub(seen) < limit {
                continue;
            }
            live.stale.store(true, Ordering::SeqCst);
            let seen = live.last_seen.load(Ordering::SeqCst);
            if now.saturating_sub(seen) < limit {
                // A message arrived meanwhile (see `touch`).
                live.stale.store(false, Ordering::SeqCst);
                continue;
            }
            let last = Timestamp::from_millisecond(seen).unwrap_or(Timestamp::UNIX_EPOCH);
            tracing::info!(cluster = %live.name, last_seen = %last, "cluster is stale");
            let affected = self.inner.fleet.write().mark_stale(&live.name, last);
            self.mark_dirty(affected);
            self.transition(ClusterTransition::Stale {
                cluster: live.name.clone(),
                last_seen: last,
            });
        }
    }

    /// Runs the staleness sweep until the returned future is dropped.
    pub(crate) async fn run_staleness(self) {
        let period =
            (self.inner.stale_after / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.sweep_stale();
            self.prune_silent();
        }
    }
}
