//! Liveness out of the per-cluster store: each hub replica publishes the
//! set of clusters it serves (ConfigMaps, rewritten only when the set
//! changes, at most every `PUBLISH_EVERY`) and a heartbeat (a Lease it
//! renews every few seconds), and follows the other replicas' into the
//! index, so a cluster streaming to another replica stays fresh here
//! without its `ClusterReport` being rewritten.
//!
//! It exists because refreshing each connected cluster's `lastSeenTime`
//! in its `ClusterReport` cost one API write per cluster per
//! `--stale-after`/2, growing with the fleet; this costs a Lease renewal
//! per replica per heartbeat and a record write per change of the set.
//! The record format, its size bound and who counts as seen when are
//! [`gwhub_hub_rules::liveness`]'s. A cluster's `ClusterReport` gets its
//! last-seen when its stream ends (the store writer).
//!
//! The heartbeats are also the one answer to "which replicas are
//! alive": the status shards ([`super::shards`]) read them from here.
//!
//! Records stay after their replica ends, so a restarted hub knows when
//! the clusters of a crashed process were last seen (its last heartbeat):
//! neither all stale nor all fresh. Once nothing depends on an ended
//! replica's record (its heartbeat older than twice `--stale-after`, each
//! cluster it lists seen as late elsewhere,
//! [`gwhub_hub_rules::liveness::collectable`]), any replica deletes it.
//! `kubectl get leases,configmaps -l gwhub.io/liveness` lists them.
//!
//! The records also gate a restarted hub's status writes (`Gate`):
//! its store may lag what the ended process had heard, so it writes no
//! hub Gateway (or ClusterProfile) status until the clusters that
//! process served are back here, elsewhere, or stale anyway.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use gwhub_hub_rules::liveness::{
    self, CHUNK_BUDGET_BYTES, CHUNK_KEY, CHUNKS_KEY, CLUSTERS_KEY, Chunk, ENDED_ANNOTATION, LABEL,
    LABEL_VALUE, REPLICA_KEY, Replica,
};
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::metrics::Metrics;
use crate::FIELD_MANAGER;
use crate::readiness::Reached;
use crate::stored::StoredParts;
use gwhub_index::StorePort;

/// The served set is rewritten at most this often (a burst of connects,
/// e.g. after a restart, becomes one write).
pub(crate) const PUBLISH_EVERY: Duration = Duration::from_secs(2);

/// How often a replica renews its heartbeat: a quarter of `--stale-after`
/// (so three renewals may fail before its clusters go stale elsewhere),
/// between 0.5 s and 10 s.
pub fn heartbeat_every(stale_after: Duration) -> Duration {
    (stale_after / 4).clamp(Duration::from_millis(500), Duration::from_secs(10))
}

/// Every replica's heartbeat (liveness identity -> last beat, ms), but
/// those whose process ended gracefully, once the heartbeat Leases were
/// listed (`None` before): which replicas are alive, for the status
/// shards ([`crate::shards`]).
pub type Heartbeats = watch::Receiver<Option<Arc<BTreeMap<String, i64>>>>;

/// Each cluster's last-seen by the other replicas' records, for the
/// importer (a stored report's `lastSeenTime` may be older), and whether
/// the records were listed once.
#[derive(Clone)]
pub struct Sightings {
    seen: Arc<Mutex<BTreeMap<String, i64>>>,
    synced: watch::Receiver<bool>,
}

impl Sightings {
    /// The latest heartbeat of another replica serving `cluster` (ms).
    pub(crate) fn get(&self, cluster: &str) -> Option<i64> {
        self.seen.lock().get(cluster).copied()
    }

    /// Waits until the records were listed once, at most `bound` (the
    /// store is imported anyway then; the sightings follow).
    pub(crate) async fn synced(&self, bound: Duration) {
        let mut rx = self.synced.clone();
        let _ = tokio::time::timeout(bound, rx.wait_for(|s| *s)).await;
    }

    /// Sightings that never sync (tests without liveness).
    #[cfg(test)]
    pub(crate) fn none() -> Sightings {
        Sightings {
            seen: Arc::default(),
            synced: watch::channel(true).1,
        }
    }
}

/// One replica's liveness on the management cluster.
pub(crate) struct Liveness {
    pub(crate) leases: Api<Lease>,
    pub(crate) configmaps: Api<ConfigMap>,
    pub(crate) index: StorePort,
    /// This replica (its leader-election identity); the Lease's holder is
    /// it with this process's start time (see [`Liveness::spawn`]).
    pub(crate) identity: String,
    /// The stored reports as the importer saw them (their lastSeenTime),
    /// and whether it listed them once: an ended replica's record goes
    /// only when the store says as much.
    pub(crate) stored: StoredParts,
    pub(crate) restored: watch::Receiver<bool>,
    /// Set once a restarted hub has caught up: every cluster a replica no
    /// longer alive served is back (or stale anyway), so hub Gateway
    /// status written from this process's view shows no lagging store
    /// ([`gwhub_hub_rules::liveness::awaited`]). Turns true once, never
    /// back.
    pub(crate) caught_up: Reached,
    /// Set when this replica's record was deleted: written again whole.
    pub(crate) lost_own: Arc<AtomicBool>,
    /// How often the heartbeat is renewed: [`heartbeat_every`], or more
    /// often where the status shards judge replicas alive by it.
    pub(crate) beat_every: Duration,
    /// For the restart gate's gauge.
    pub(crate) metrics: Arc<Metrics>,
}

impl Liveness {
    /// Starts publishing this replica's liveness and following the
    /// others'; the returned sightings feed the importer and the
    /// heartbeats the status shards, and the restart gate sets
    /// `caught_up`.
    pub(crate) fn spawn(
        mut self,
        tasks: &mut tokio::task::JoinSet<()>,
        shutdown: CancellationToken,
    ) -> (Sightings, Heartbeats) {
        // One record per process (see `liveness::process_identity`).
        let started = Timestamp::now().as_millisecond();
        self.identity = liveness::process_identity(&self.identity, started);
        let (synced_tx, synced) = watch::channel(false);
        let sightings = Sightings {
            seen: Arc::default(),
            synced,
        };
        let (beats_tx, heartbeats) = watch::channel(None);
        let me = Arc::new(self);
        tasks.spawn(me.clone().publish(shutdown.clone()));
        let gate = Gate {
            started_millis: started,
            started: Instant::now(),
            most: 0,
            open: me.caught_up.clone(),
        };
        tasks.spawn(me.follow(sightings.seen.clone(), synced_tx, beats_tx, gate, shutdown));
        (sightings, heartbeats)
    }

    /// Renews the heartbeat every [`heartbeat_every`] and rewrites the
    /// served set when it changed (at most every [`PUBLISH_EVERY`]).
    async fn publish(self: Arc<Self>, shutdown: CancellationToken) {
        let beat_every = self.beat_every;
        let mut since: BTreeMap<String, i64> = BTreeMap::new();
        let mut published: Option<Vec<String>> = None;
        let mut last_publish: Option<Instant> = None;
        let mut next_beat = Instant::now();
        let mut tick = tokio::time::interval(beat_every.min(Duration::from_millis(500)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => {
                    // Ended, not killed: the others stop counting this
                    // replica alive at once (the status shards).
                    let _ = tokio::time::timeout(Duration::from_secs(2), self.renew(true)).await;
                    return;
                }
                _ = tick.tick() => {}
            }
            let now = Instant::now();
            let wall = Timestamp::now().as_millisecond();
            let clusters = self
                .index
                .clusters()
                .into_iter()
                .map(|c| (c.name, c.connected, c.stale));
            since = liveness::served(clusters, &since, wall);
            let chunks = liveness::encode(&since, CHUNK_BUDGET_BYTES);
            if self.lost_own.swap(false, Ordering::SeqCst) {
                published = None;
            }
            let due = last_publish.is_none_or(|t| now.duration_since(t) >= PUBLISH_EVERY);
            if published.as_ref() != Some(&chunks) && due {
                last_publish = Some(now);
                if self.write_record(&chunks, published.as_deref()).await {
                    published = Some(chunks);
                }
            }
            if now >= next_beat {
                next_beat = now + beat_every;
                self.renew(false).await;
            }
        }
    }

    /// Writes the record's chunks that differ from `before`.
    async fn write_record(&self, chunks: &[String], before: Option<&[String]>) -> bool {
        let n = chunks.len();
        let relaid = before.is_none_or(|b| b.len() != n);
        let mut ok = true;
        for (i, text) in chunks.iter().enumerate() {
            if !relaid && before.and_then(|b| b.get(i)) == Some(text) {
                continue;
            }
            let chunk = u32::try_from(i).unwrap_or(u32::MAX);
            let name = liveness::object_name(&self.identity, chunk);
            let body = serde_json::json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "labels": {LABEL: LABEL_VALUE}},
                "data": {
                    REPLICA_KEY: self.identity,
                    CHUNK_KEY: i.to_string(),
                    CHUNKS_KEY: n.to_string(),
                    CLUSTERS_KEY: text,
                },
            });
            let params = PatchParams::apply(FIELD_MANAGER).force();
            if let Err(e) = self
                .configmaps
                .patch(&name, &params, &Patch::Apply(&body))
                .await
            {
                tracing::warn!(object = %name, error = %e, "cannot write this replica's liveness record; retrying");
                ok = false;
            }
        }
        ok
    }

    /// Renews this replica's heartbeat Lease (made when absent); `ended`:
    /// for the last time, marked [`ENDED_ANNOTATION`].
    async fn renew(&self, ended: bool) {
        let name = liveness::object_name(&self.identity, 0);
        let secs = i32::try_from(self.index.stale_after().as_secs())
            .unwrap_or(i32::MAX)
            .max(1);
        let body = Lease {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(BTreeMap::from([(LABEL.to_owned(), LABEL_VALUE.to_owned())])),
                annotations: ended
                    .then(|| BTreeMap::from([(ENDED_ANNOTATION.to_owned(), "true".to_owned())])),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                lease_duration_seconds: Some(secs),
                // A MicroTime (the API server takes 6 fractional digits).
                renew_time: Some(MicroTime(Timestamp::now())),
                ..Default::default()
            }),
        };
        let params = PatchParams::apply(FIELD_MANAGER).force();
        if let Err(e) = self
            .leases
            .patch(&name, &params, &Patch::Apply(&body))
            .await
        {
            tracing::warn!(lease = %name, error = %e, "cannot renew this replica's liveness heartbeat; retrying");
        }
    }

    /// Follows every replica's heartbeat and record; each heartbeat
    /// period, hands each cluster's last-seen by the others to the index.
    async fn follow(
        self: Arc<Self>,
        seen: Arc<Mutex<BTreeMap<String, i64>>>,
        synced: watch::Sender<bool>,
        heartbeats: watch::Sender<Option<Arc<BTreeMap<String, i64>>>>,
        mut gate: Gate,
        shutdown: CancellationToken,
    ) {
        let config = watcher::Config::default().labels(&format!("{LABEL}={LABEL_VALUE}"));
        let mut leases = watcher::watcher(self.leases.clone(), config.clone())
            .default_backoff()
            .boxed();
        let mut maps = watcher::watcher(self.configmaps.clone(), config)
            .default_backoff()
            .boxed();
        let mut f = Followed::default();
        let mut tick = tokio::time::interval(
            heartbeat_every(self.index.stale_after()).min(Duration::from_secs(1)),
        );
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                Some(e) = leases.next() => {
                    f.lease_event(e);
                    if f.beats_listed {
                        f.publish_alive(&heartbeats);
                    }
                }
                Some(e) = maps.next() => f.record_event(e, &self),
                _ = tick.tick() => self.heartbeat_round(&mut f, &seen, &synced, &mut gate).await,
            }
        }
    }

    /// One heartbeat period of [`Liveness::follow`]: the gate checked,
    /// each cluster's last-seen by the others handed to the index, and the
    /// records of replicas long gone collected.
    async fn heartbeat_round(
        &self,
        f: &mut Followed,
        seen: &Mutex<BTreeMap<String, i64>>,
        synced: &watch::Sender<bool>,
        gate: &mut Gate,
    ) {
        if !(f.beats_listed && f.records_listed) {
            // Not listed (yet): the gate opens on its bound only.
            gate.check(self, None, &f.ended);
            return;
        }
        let replicas: BTreeMap<String, Replica> = f
            .beats
            .keys()
            .chain(f.records.keys())
            .map(|id| {
                let r = Replica {
                    heartbeat_millis: f.beats.get(id).copied(),
                    served: f.records.get(id).and_then(liveness::assemble),
                };
                (id.clone(), r)
            })
            .collect();
        gate.check(self, Some(&replicas), &f.ended);
        let now_seen = liveness::last_seen(&replicas, &self.identity);
        *seen.lock() = now_seen.clone();
        for (cluster, t) in &now_seen {
            if f.handed.get(cluster) != Some(t) {
                self.index.seen_elsewhere(cluster, *t);
            }
        }
        f.handed = now_seen;
        synced.send_replace(true);
        if *self.restored.borrow() {
            let gone = self.collectable(&replicas);
            for id in gone {
                let chunks: Vec<u32> = f
                    .records
                    .remove(&id)
                    .map(|r| r.into_keys().collect())
                    .unwrap_or_default();
                f.beats.remove(&id);
                self.collect(&id, chunks).await;
            }
        }
    }

    /// The replicas whose records may go: long gone, and every cluster
    /// they served seen later by the store ([`liveness::collectable`]).
    fn collectable(&self, replicas: &BTreeMap<String, Replica>) -> Vec<String> {
        let stored = self.stored.lock();
        let retention = i64::try_from(self.index.stale_after().as_millis())
            .unwrap_or(i64::MAX / 2)
            .saturating_mul(2);
        liveness::collectable(
            replicas,
            &self.identity,
            Timestamp::now().as_millisecond(),
            retention,
            |c| match stored.get(c).and_then(|p| p.get(&0)) {
                Some(head) => Some(head.last_seen_millis),
                // Known but not in the store's view (a
                // relist under way): not known to be
                // as late, so kept.
                None if self.index.has_cluster(c) => Some(i64::MIN),
                None => None,
            },
        )
    }
}

/// What [`Liveness::follow`] knows of the replicas from its two watches.
#[derive(Default)]
struct Followed {
    /// identity -> heartbeat (ms).
    beats: BTreeMap<String, i64>,
    /// identity -> chunks.
    records: BTreeMap<String, BTreeMap<u32, Chunk>>,
    beats_listed: bool,
    records_listed: bool,
    beats_next: BTreeMap<String, i64>,
    records_next: BTreeMap<String, BTreeMap<u32, Chunk>>,
    /// The replicas whose process ended gracefully (see `renew`).
    ended: BTreeSet<String>,
    ended_next: BTreeSet<String>,
    /// The last-seen times last handed to the index.
    handed: BTreeMap<String, i64>,
}

impl Followed {
    /// Takes one event of the heartbeat Leases' watch.
    fn lease_event(&mut self, e: Result<Event<Lease>, watcher::Error>) {
        match e {
            Ok(Event::Init) => {
                self.beats_next.clear();
                self.ended_next.clear();
            }
            Ok(Event::InitApply(l)) => {
                if let Some((id, t)) = heartbeat(&l) {
                    if has_ended(&l) {
                        self.ended_next.insert(id.clone());
                    }
                    self.beats_next.insert(id, t);
                }
            }
            Ok(Event::InitDone) => {
                self.beats = std::mem::take(&mut self.beats_next);
                self.ended = std::mem::take(&mut self.ended_next);
                self.beats_listed = true;
            }
            Ok(Event::Apply(l)) => {
                if let Some((id, t)) = heartbeat(&l) {
                    match has_ended(&l) {
                        true => self.ended.insert(id.clone()),
                        false => self.ended.remove(&id),
                    };
                    self.beats.insert(id, t);
                }
            }
            Ok(Event::Delete(l)) => {
                if let Some((id, _)) = heartbeat(&l) {
                    self.beats.remove(&id);
                    self.ended.remove(&id);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "watching the replicas' liveness Leases failed; retrying")
            }
        }
    }

    /// Publishes the heartbeats of the replicas alive (not ended) when
    /// they changed.
    fn publish_alive(&self, heartbeats: &watch::Sender<Option<Arc<BTreeMap<String, i64>>>>) {
        let alive: BTreeMap<String, i64> = self
            .beats
            .iter()
            .filter(|(id, _)| !self.ended.contains(*id))
            .map(|(id, t)| (id.clone(), *t))
            .collect();
        heartbeats.send_if_modified(|h| {
            if h.as_deref() == Some(&alive) {
                return false;
            }
            *h = Some(Arc::new(alive));
            true
        });
    }

    /// Takes one event of the liveness records' watch; a record of this
    /// replica deleted (by another one, collecting) is noted in `live`.
    fn record_event(&mut self, e: Result<Event<ConfigMap>, watcher::Error>, live: &Liveness) {
        match e {
            Ok(Event::Init) => self.records_next.clear(),
            Ok(Event::InitApply(c)) => add_chunk(&mut self.records_next, &c),
            Ok(Event::InitDone) => {
                self.records = std::mem::take(&mut self.records_next);
                self.records_listed = true;
            }
            Ok(Event::Apply(c)) => add_chunk(&mut self.records, &c),
            Ok(Event::Delete(c)) => {
                if let Some((id, i, _)) = chunk_of(&c) {
                    if id == live.identity {
                        live.lost_own.store(true, Ordering::SeqCst);
                    }
                    if let Some(r) = self.records.get_mut(&id) {
                        r.remove(&i);
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "watching the replicas' liveness records failed; retrying")
            }
        }
    }
}

/// The restart gate: hub Gateway status waits until the clusters of the
/// replicas no longer alive are back ([`liveness::awaited`]).
pub(crate) struct Gate {
    /// This process's start (ms since the epoch, as the heartbeats).
    started_millis: i64,
    started: Instant,
    /// The most clusters awaited at once, for the log line.
    most: usize,
    open: Reached,
}

impl Gate {
    /// Opens the gate when nothing is awaited; `replicas`: `None` while
    /// the records are not listed (then only the bound opens it).
    fn check(
        &mut self,
        live: &Liveness,
        replicas: Option<&BTreeMap<String, Replica>>,
        ended: &BTreeSet<String>,
    ) {
        if self.open.holds() {
            return;
        }
        let now = Timestamp::now().as_millisecond();
        let stale_after =
            i64::try_from(live.index.stale_after().as_millis()).unwrap_or(i64::MAX / 2);
        let awaited = match replicas {
            Some(replicas) => {
                // Heard here: reported on a stream to this process (an
                // import does not count), so newer than the store.
                let heard: std::collections::HashSet<String> = live
                    .index
                    .clusters()
                    .into_iter()
                    .filter(|c| c.report_rev > 0)
                    .map(|c| c.name)
                    .collect();
                liveness::awaited(
                    replicas,
                    ended,
                    &live.identity,
                    self.started_millis,
                    now,
                    stale_after,
                    |c| heard.contains(c),
                )
                .len()
            }
            None if now.saturating_sub(self.started_millis) >= stale_after => 0,
            None => return,
        };
        self.most = self.most.max(awaited);
        live.metrics.restart_awaited_clusters.set(awaited as u64);
        if awaited > 0 {
            return;
        }
        let waited = self.started.elapsed();
        if self.most > 0 || replicas.is_none() {
            tracing::info!(
                clusters = self.most,
                waited_ms = waited.as_millis() as u64,
                records_listed = replicas.is_some(),
                bound_reached = now.saturating_sub(self.started_millis) >= stale_after,
                "caught up after the restart: every cluster the ended replicas served is back or stale; writing hub Gateway status"
            );
        } else {
            tracing::debug!(
                "no cluster of an ended replica to wait for; writing hub Gateway status"
            );
        }
        self.open.reach();
    }
}

impl Liveness {
    /// Deletes an ended replica's Lease and record chunks (already gone:
    /// another replica was first).
    async fn collect(&self, identity: &str, chunks: Vec<u32>) {
        tracing::info!(
            replica = identity,
            "deleting an ended replica's liveness record: nothing depends on it any more"
        );
        let params = kube::api::DeleteParams::default();
        let lease = liveness::object_name(identity, 0);
        if let Err(e) = self.leases.delete(&lease, &params).await
            && !matches!(&e, kube::Error::Api(s) if s.code == 404)
        {
            tracing::warn!(lease = %lease, error = %e, "cannot delete an ended replica's heartbeat");
        }
        for i in chunks {
            let name = liveness::object_name(identity, i);
            if let Err(e) = self.configmaps.delete(&name, &params).await
                && !matches!(&e, kube::Error::Api(s) if s.code == 404)
            {
                tracing::warn!(object = %name, error = %e, "cannot delete an ended replica's liveness record");
            }
        }
    }
}

/// A replica's Lease: (its holder, its renewTime in ms).
fn heartbeat(lease: &Lease) -> Option<(String, i64)> {
    let spec = lease.spec.as_ref()?;
    let id = spec.holder_identity.clone()?;
    let t = spec.renew_time.as_ref()?.0.as_millisecond();
    Some((id, t))
}

/// Whether a replica's Lease says its process ended gracefully.
fn has_ended(lease: &Lease) -> bool {
    lease.annotations().contains_key(ENDED_ANNOTATION)
}

/// A record chunk: (replica, index, chunk); `None` when malformed.
fn chunk_of(c: &ConfigMap) -> Option<(String, u32, Chunk)> {
    let data = c.data.as_ref()?;
    let id = data.get(REPLICA_KEY)?.clone();
    let i = data.get(CHUNK_KEY)?.parse().ok()?;
    let chunks = data.get(CHUNKS_KEY)?.parse().ok()?;
    let (served, bad) = liveness::decode(data.get(CLUSTERS_KEY).map_or("", String::as_str));
    if bad > 0 {
        tracing::warn!(object = %c.name_any(), lines = bad, "a liveness record has lines that are not `<cluster> <ms>`; skipped");
    }
    Some((id, i, Chunk { chunks, served }))
}

fn add_chunk(records: &mut BTreeMap<String, BTreeMap<u32, Chunk>>, c: &ConfigMap) {
    match chunk_of(c) {
        Some((id, i, chunk)) => {
            records.entry(id).or_default().insert(i, chunk);
        }
        None => {
            tracing::warn!(object = %c.name_any(), "a ConfigMap labelled {LABEL} is not a liveness record; ignored");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeats_scale_with_stale_after_within_bounds() {
        assert_eq!(
            heartbeat_every(Duration::from_secs(60)),
            Duration::from_secs(10)
        );
        assert_eq!(
            heartbeat_every(Duration::from_secs(8)),
            Duration::from_secs(2)
        );
        assert_eq!(
            heartbeat_every(Duration::from_millis(100)),
            Duration::from_millis(500)
        );
    }

    /// Another replica's heartbeat for a cluster not streaming here moves
    /// its last-seen on (a stale one turns fresh); an old one does not;
    /// a cluster streaming here keeps its own.
    #[test]
    fn other_replicas_heartbeats_keep_their_clusters_fresh_here() {
        let index = gwhub_index::Index::new(gwhub_index::IndexConfig::new(
            Default::default(),
            Duration::from_secs(60),
        ));
        let now = Timestamp::now().as_millisecond();
        let stale = |n: &str| {
            index
                .clusters()
                .into_iter()
                .find(|c| c.name == n)
                .unwrap()
                .stale
        };
        index.import_cluster("away", BTreeMap::new(), now - 120_000, now - 120_000);
        assert!(stale("away"));
        index.seen_elsewhere("away", now - 90_000);
        assert!(stale("away"), "a heartbeat older than stale-after");
        index.seen_elsewhere("away", now - 1_000);
        assert!(!stale("away"));
        assert_eq!(
            index.cluster_record("away").unwrap().last_seen_millis,
            now - 1_000
        );
        index.seen_elsewhere("away", now - 5_000);
        assert_eq!(
            index.cluster_record("away").unwrap().last_seen_millis,
            now - 1_000,
            "never moves back"
        );
        let _session = index.connect("here", "test").unwrap();
        let before = index.cluster_record("here").unwrap().last_seen_millis;
        index.seen_elsewhere("here", now + 60_000);
        assert_eq!(
            index.cluster_record("here").unwrap().last_seen_millis,
            before
        );
        // Unknown here: nothing (its stored report brings it).
        index.seen_elsewhere("unknown", now);
        assert!(index.cluster_record("unknown").is_none());
    }

    #[test]
    fn record_chunks_read_back() {
        let mut c = ConfigMap {
            data: Some(BTreeMap::from([
                (REPLICA_KEY.to_string(), "hub-1".to_string()),
                (CHUNK_KEY.to_string(), "0".to_string()),
                (CHUNKS_KEY.to_string(), "1".to_string()),
                (CLUSTERS_KEY.to_string(), "east 5\nwest 6\n".to_string()),
            ])),
            ..Default::default()
        };
        let (id, i, chunk) = chunk_of(&c).unwrap();
        assert_eq!((id.as_str(), i, chunk.chunks), ("hub-1", 0, 1));
        assert_eq!(chunk.served.len(), 2);
        c.data.as_mut().unwrap().remove(REPLICA_KEY);
        assert!(chunk_of(&c).is_none());
    }
}
