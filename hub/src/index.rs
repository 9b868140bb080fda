//! The hub's live state: every cluster's latest report (the engine's
//! [`Fleet`]), per-cluster connection bookkeeping, the hub Gateways as the
//! management cluster holds them (Kubernetes mode), and the aggregated hub
//! Gateways published through a `watch` channel.
//!
//! Each hub Gateway is aggregated once, here, and the result published
//! once: the Dashboard serves it and the Kubernetes status writer applies
//! it (it only diffs it against the live object). So both show the same
//! conditions, omissions and observedGeneration.
//!
//! Ingest only updates the fleet under a short write lock and marks the
//! affected Gateways dirty; one aggregator task re-aggregates each dirty
//! Gateway once, however many reports touched it meanwhile, and wakes
//! watchers only when an aggregated Gateway really changed. No lock is ever
//! held across an `.await`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_proto::{convert, v1};
use jiff::Timestamp;
use parking_lot::{Mutex, RwLock};
use tokio::sync::{Notify, broadcast, watch};
use tokio_util::sync::CancellationToken;

use crate::aggregate::fleet::SharedReport;
use crate::aggregate::{
    Aggregation, ClusterReport, Fleet, Freshness, GatewayKey, HubGateway, Item, LiveHub, Omission,
    Options,
};
use crate::budget::Counters;

/// Generation a hub Gateway gets when the management cluster holds none
/// (always with `--no-kube`), like `gwhub aggregate` with no hub file.
const NO_KUBE_GENERATION: i64 = 1;

/// One aggregated hub Gateway as the Dashboard serves it.
///
/// Encoded once per change; a read clones (sending needs an owned message
/// anyway). The encoded status is kept once: a full message is the lean
/// one plus the omissions, put together at read.
#[derive(Debug)]
pub struct GatewayView {
    pub key: GatewayKey,
    pub aggregation: Aggregation,
    /// Without omissions and with `omissions_unchanged` set, as watchers
    /// that already have the omissions get it; `clusters` in name order.
    pub lean: v1::AggregatedGateway,
    /// The omissions as the Dashboard API spells them.
    pub omissions: Vec<v1::Omission>,
    /// The revision at which the omissions last changed.
    pub omissions_revision: u64,
    /// Condition types in `aggregation.status` that are other writers'
    /// (kept from the live hub Gateway, never applied by the hub).
    pub foreign: BTreeSet<String>,
    /// The live hub Gateway this aggregation was made from (the same `Arc`
    /// as [`Index::live_hub`] while that is current); a later live object
    /// that aggregates the same updates it without a new view.
    aggregated_with: Mutex<Option<Arc<LiveHub>>>,
}

impl GatewayView {
    /// The live hub Gateway the view was aggregated with.
    pub fn aggregated_with(&self) -> Option<Arc<LiveHub>> {
        self.aggregated_with.lock().clone()
    }

    /// Whether the view was aggregated with exactly `live` (not an equal
    /// copy: the object the index holds now).
    pub fn aggregated_from(&self, live: &Arc<LiveHub>) -> bool {
        self.aggregated_with
            .lock()
            .as_ref()
            .is_some_and(|a| Arc::ptr_eq(a, live))
    }

    pub fn revision(&self) -> u64 {
        self.lean.revision
    }

    /// The whole aggregated Gateway, omissions included.
    pub fn full(&self) -> v1::AggregatedGateway {
        v1::AggregatedGateway {
            omissions: self.omissions.clone(),
            omissions_unchanged: false,
            ..self.lean.clone()
        }
    }
}

/// Every aggregated hub Gateway.
#[derive(Debug, Default)]
pub struct Views {
    /// Every hub Gateway some cluster reports (what the Dashboard lists).
    pub gateways: BTreeMap<GatewayKey, Arc<GatewayView>>,
    /// Hub Gateways on the management cluster that no cluster reports
    /// (their status says `NoClusters`); written, not listed.
    pub unreported: BTreeMap<GatewayKey, Arc<GatewayView>>,
    /// Bumped on every change; also each changed view's revision.
    pub revision: u64,
}

impl Views {
    /// The aggregation of `key`, reported or not.
    pub fn get(&self, key: &GatewayKey) -> Option<&Arc<GatewayView>> {
        self.gateways.get(key).or_else(|| self.unreported.get(key))
    }
}

/// A cluster's connection and liveness, shared with its stream so the hot
/// path (touching liveness) takes only the cluster's own session lock.
#[derive(Debug)]
struct ClusterLive {
    name: String,
    /// The current stream: its id and the token that ends it. Taken by
    /// `connect` (which supersedes), and by every write a stream makes for
    /// the cluster (liveness, reports), so a superseded stream's write can
    /// never land after the newer stream was accepted.
    session: Mutex<SessionSlot>,
    connected: AtomicBool,
    stale: AtomicBool,
    /// Unix milliseconds of the last message of any kind; 0 if never.
    last_seen: AtomicI64,
    /// Unix milliseconds of the last snapshot or delta applied; 0 if never.
    last_report: AtomicI64,
    agent_version: Mutex<String>,
    /// Bumped on every applied snapshot or delta, so persistence can tell
    /// which clusters changed without comparing everything.
    report_rev: AtomicU64,
    /// Encoded bytes of the cluster's report, as its stream counted them
    /// against `--max-cluster-report-bytes`.
    report_bytes: AtomicU64,
}

impl ClusterLive {
    fn new(name: &str) -> Self {
        ClusterLive {
            name: name.to_owned(),
            session: Mutex::new(SessionSlot {
                id: 0,
                cancel: CancellationToken::new(),
            }),
            connected: AtomicBool::new(false),
            stale: AtomicBool::new(false),
            last_seen: AtomicI64::new(0),
            last_report: AtomicI64::new(0),
            agent_version: Mutex::new(String::new()),
            report_rev: AtomicU64::new(0),
            report_bytes: AtomicU64::new(0),
        }
    }
}

/// The stream a cluster's state currently belongs to.
#[derive(Debug)]
struct SessionSlot {
    id: u64,
    /// Cancelled when a newer stream takes over.
    cancel: CancellationToken,
}

/// What a stream holds to act for its cluster.
#[derive(Clone, Debug)]
pub struct Session {
    live: Arc<ClusterLive>,
    id: u64,
    cancel: CancellationToken,
}

impl Session {
    pub fn cluster(&self) -> &str {
        &self.live.name
    }

    /// Whether a newer stream for the same cluster took over.
    pub fn is_superseded(&self) -> bool {
        self.live.session.lock().id != self.id
    }

    /// Resolves as soon as a newer stream for the same cluster is accepted;
    /// the stream must then end (ABORTED, as the protocol says).
    pub async fn superseded(&self) {
        self.cancel.cancelled().await;
    }
}

/// A stream for a cluster the hub does not know yet, past `--max-clusters`.
#[derive(Debug, thiserror::Error)]
#[error(
    "cluster budget: the hub already keeps {max} clusters (--max-clusters); cluster {cluster:?} is refused"
)]
pub struct TooManyClusters {
    pub cluster: String,
    pub max: usize,
}

/// A newer stream for the same cluster took over; the older one must end.
#[derive(Debug, thiserror::Error)]
#[error("a newer stream for cluster {0:?} took over")]
pub struct Superseded(pub String);

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
fn count_after(current: Option<&BTreeSet<GatewayKey>>, changes: &[Change]) -> usize {
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

/// A cluster's liveness changed: what an operator should hear of (the
/// Kubernetes side records it as an Event on the cluster's `ClusterReport`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterTransition {
    /// Nothing from the cluster for `--stale-after`; its reports are shown
    /// as stale from now on.
    Stale {
        cluster: String,
        last_seen: Timestamp,
    },
    /// A stale cluster was heard from again.
    Fresh { cluster: String },
}

/// Transitions kept for a slow subscriber before it misses some.
const TRANSITIONS_BUFFER: usize = 1024;

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

struct Inner {
    fleet: RwLock<Fleet>,
    /// Serialises aggregation passes, so an older pass never publishes
    /// over a newer one (held without any other lock, never across `.await`).
    aggregating: Mutex<()>,
    clusters: Mutex<BTreeMap<String, Arc<ClusterLive>>>,
    /// The hub Gateways on the management cluster (Kubernetes mode), as
    /// its Gateway watch last saw them; taken alone, never with another lock.
    live: Mutex<BTreeMap<GatewayKey, Arc<LiveHub>>>,
    dirty: Mutex<BTreeSet<GatewayKey>>,
    dirty_notify: Notify,
    views: watch::Sender<Views>,
    /// Bumped whenever some cluster's reports were applied.
    reports: watch::Sender<u64>,
    transitions: broadcast::Sender<ClusterTransition>,
    /// Clusters the prune forgot, for the store to delete their reports.
    pruned: broadcast::Sender<String>,
    options: Options,
    stale_after: Duration,
    counters: Arc<Counters>,
    /// `--max-clusters`.
    max_clusters: AtomicUsize,
    /// Milliseconds after which a disconnected, silent cluster is forgotten
    /// (`--insecure-prune-after`); 0: never.
    prune_after_millis: AtomicI64,
}

/// Cheap to clone; every clone shares the same state.
#[derive(Clone)]
pub struct Index {
    inner: Arc<Inner>,
}

fn now_millis() -> i64 {
    Timestamp::now().as_millisecond()
}

impl Index {
    pub fn new(options: Options, stale_after: Duration) -> Self {
        let (views, _) = watch::channel(Views::default());
        let (reports, _) = watch::channel(0);
        let (transitions, _) = broadcast::channel(TRANSITIONS_BUFFER);
        let (pruned, _) = broadcast::channel(TRANSITIONS_BUFFER);
        Index {
            inner: Arc::new(Inner {
                fleet: RwLock::new(Fleet::new()),
                aggregating: Mutex::new(()),
                clusters: Mutex::new(BTreeMap::new()),
                live: Mutex::new(BTreeMap::new()),
                dirty: Mutex::new(BTreeSet::new()),
                dirty_notify: Notify::new(),
                views,
                reports,
                transitions,
                pruned,
                options,
                stale_after,
                counters: Arc::default(),
                max_clusters: AtomicUsize::new(usize::MAX),
                prune_after_millis: AtomicI64::new(0),
            }),
        }
    }

    pub fn stale_after(&self) -> Duration {
        self.inner.stale_after
    }

    /// The budgets' counters (see [`crate::budget`]).
    pub fn counters(&self) -> &Arc<Counters> {
        &self.inner.counters
    }

    /// Streams for more than `max` clusters are refused (`--max-clusters`).
    pub fn set_max_clusters(&self, max: usize) {
        self.inner.max_clusters.store(max, Ordering::Relaxed);
    }

    /// Disconnected clusters silent for `after` are forgotten by the
    /// staleness sweep (`--insecure-prune-after`); zero: never.
    pub fn set_prune_after(&self, after: Duration) {
        let ms = i64::try_from(after.as_millis()).unwrap_or(i64::MAX);
        self.inner.prune_after_millis.store(ms, Ordering::Relaxed);
    }

    /// Records the encoded size of the session's cluster's report.
    pub fn set_report_bytes(&self, session: &Session, bytes: u64) {
        if !session.is_superseded() {
            session.live.report_bytes.store(bytes, Ordering::Relaxed);
        }
    }

    /// Every cluster `--insecure-prune-after` forgets from now on (the
    /// store deletes their reports, so a relist or restart does not bring
    /// them back).
    pub fn subscribe_pruned(&self) -> broadcast::Receiver<String> {
        self.inner.pruned.subscribe()
    }

    /// Every stale/fresh transition of a cluster from now on.
    pub fn subscribe_transitions(&self) -> broadcast::Receiver<ClusterTransition> {
        self.inner.transitions.subscribe()
    }

    fn transition(&self, t: ClusterTransition) {
        // No subscriber (no Kubernetes side) is fine.
        let _ = self.inner.transitions.send(t);
    }

    /// Aggregated hub Gateways; `changed()` fires only on real change.
    pub fn subscribe(&self) -> watch::Receiver<Views> {
        self.inner.views.subscribe()
    }

    /// Registers a new stream for `cluster`, superseding any older one. The
    /// cluster's reports stay as they are until its next snapshot, so a
    /// reconnect does not flap the aggregate.
    pub fn connect(&self, cluster: &str, agent_version: &str) -> Result<Session, TooManyClusters> {
        // Under the clusters lock, like `disconnect`: an older stream's
        // disconnect cannot land between taking over and marking connected.
        // The session slot is taken under the fleet lock, which the older
        // stream's report writes hold while they check their session: none
        // of them lands after this.
        let session = {
            let mut clusters = self.inner.clusters.lock();
            let max = self.inner.max_clusters.load(Ordering::Relaxed);
            if !clusters.contains_key(cluster) && clusters.len() >= max {
                Counters::bump(&self.inner.counters.refused_clusters);
                return Err(TooManyClusters {
                    cluster: cluster.to_owned(),
                    max,
                });
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
            Session { live, id, cancel }
        };
        *session.live.agent_version.lock() = agent_version.to_owned();
        self.touch(&session);
        Ok(session)
    }

    /// The stream ended; its cluster's reports stay (and go stale in time).
    pub fn disconnect(&self, session: &Session) {
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
        session
            .live
            .last_report
            .store(now_millis(), Ordering::SeqCst);
        self.inner.reports.send_modify(|r| *r += 1);
        self.mark_dirty(affected);
        Ok(())
    }

    /// Applies one delta's changes, in order, under one lock; refuses the
    /// whole delta if the cluster would then report more than
    /// [`gwhub_proto::limits::MAX_GATEWAYS`] Gateways.
    pub fn apply(&self, session: &Session, changes: Vec<Change>) -> Result<(), ApplyError> {
        let mut affected = BTreeSet::new();
        {
            let mut fleet = self.inner.fleet.write();
            if session.is_superseded() {
                return Err(Superseded(session.cluster().to_owned()).into());
            }
            let count = count_after(fleet.cluster_gateways(session.cluster()), &changes);
            let max = gwhub_proto::limits::MAX_GATEWAYS;
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
        session
            .live
            .last_report
            .store(now_millis(), Ordering::SeqCst);
        self.inner.reports.send_modify(|r| *r += 1);
        self.mark_dirty(affected);
        Ok(())
    }

    /// Fires whenever some cluster's reports were applied (see
    /// [`Index::cluster_record`]).
    pub fn subscribe_reports(&self) -> watch::Receiver<u64> {
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
    /// replica the agent streams to), unless the cluster's live stream to
    /// this hub has already reported, which is newer. Liveness continues from the stored
    /// times, so a cluster silent for `stale_after` is stale at once and a
    /// live one does not flap. A cluster past `--max-clusters` is not
    /// taken. Returns whether it was taken.
    pub fn import_cluster(
        &self,
        cluster: &str,
        gateways: BTreeMap<GatewayKey, GatewayStatus>,
        last_report_millis: i64,
        last_seen_millis: i64,
    ) -> bool {
        let limit = i64::try_from(self.inner.stale_after.as_millis()).unwrap_or(i64::MAX);
        let mut clusters = self.inner.clusters.lock();
        // A cluster first heard of from the store (a restart) is not news.
        let known = clusters.contains_key(cluster);
        // The store is bounded like the streams: a relist or restart does
        // not bring back more clusters than --max-clusters.
        let max = self.inner.max_clusters.load(Ordering::Relaxed);
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
        if live.connected.load(Ordering::SeqCst) && live.report_rev.load(Ordering::SeqCst) > 0 {
            return false;
        }
        let seen = last_seen_millis.max(live.last_seen.load(Ordering::SeqCst));
        live.last_seen.store(seen, Ordering::SeqCst);
        live.last_report.store(
            last_report_millis.max(live.last_report.load(Ordering::SeqCst)),
            Ordering::SeqCst,
        );
        let stale = now_millis().saturating_sub(seen) >= limit;
        let was_stale = live.stale.swap(stale, Ordering::SeqCst);
        let last = Timestamp::from_millisecond(seen).unwrap_or(Timestamp::UNIX_EPOCH);
        let mut affected = fleet.replace_snapshot(cluster, gateways);
        affected.extend(if stale {
            fleet.mark_stale(cluster, last)
        } else {
            fleet.mark_fresh(cluster)
        });
        drop(fleet);
        drop(clusters);
        self.mark_dirty(affected);
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
        true
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
        true
    }

    /// Sets (or, with `None`, forgets) the hub Gateway `key` as the
    /// management cluster holds it; it is re-aggregated if that changed.
    /// Returns whether it changed.
    pub fn set_live_hub(&self, key: GatewayKey, live: Option<LiveHub>) -> bool {
        let changed = {
            let mut map = self.inner.live.lock();
            match live {
                Some(live) if map.get(&key).is_some_and(|l| **l == live) => false,
                Some(live) => {
                    map.insert(key.clone(), Arc::new(live));
                    true
                }
                None => map.remove(&key).is_some(),
            }
        };
        if changed {
            self.mark_dirty(BTreeSet::from([key]));
        }
        changed
    }

    /// Installs `written` (the answer to a status write planned against
    /// `planned`) as the live hub Gateway `key`, unless the watch installed
    /// another object meanwhile: the answer may be older than that (a spec
    /// edited since), and the watch is then the source. Returns whether it
    /// was installed.
    pub fn set_live_hub_written(
        &self,
        key: GatewayKey,
        planned: &Arc<LiveHub>,
        written: LiveHub,
    ) -> bool {
        {
            let mut map = self.inner.live.lock();
            match map.get(&key) {
                Some(current) if Arc::ptr_eq(current, planned) => {
                    if **current == written {
                        return false;
                    }
                    map.insert(key.clone(), Arc::new(written));
                }
                _ => return false,
            }
        }
        self.mark_dirty(BTreeSet::from([key]));
        true
    }

    /// Replaces every live hub Gateway (after the watch listed them all);
    /// the ones that changed, came or went are re-aggregated.
    pub fn replace_live_hubs(&self, all: BTreeMap<GatewayKey, LiveHub>) {
        let affected: BTreeSet<GatewayKey> = {
            let mut map = self.inner.live.lock();
            let mut affected: BTreeSet<GatewayKey> = map
                .keys()
                .filter(|k| !all.contains_key(*k))
                .cloned()
                .collect();
            let mut next = BTreeMap::new();
            for (key, live) in all {
                match map.remove(&key) {
                    Some(old) if *old == live => {
                        next.insert(key, old);
                    }
                    _ => {
                        affected.insert(key.clone());
                        next.insert(key, Arc::new(live));
                    }
                }
            }
            *map = next;
            affected
        };
        self.mark_dirty(affected);
    }

    /// The hub Gateway `key` as the management cluster holds it.
    pub fn live_hub(&self, key: &GatewayKey) -> Option<Arc<LiveHub>> {
        self.inner.live.lock().get(key).cloned()
    }

    /// Every hub Gateway the management cluster holds.
    pub fn live_hub_keys(&self) -> Vec<GatewayKey> {
        self.inner.live.lock().keys().cloned().collect()
    }

    /// Forgets disconnected clusters silent for the prune bound (see
    /// [`Index::set_prune_after`]).
    pub fn prune_silent(&self) {
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
    pub fn sweep_stale(&self) {
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
    pub async fn run_staleness(self) {
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

    fn mark_dirty(&self, affected: BTreeSet<GatewayKey>) {
        if affected.is_empty() {
            return;
        }
        self.inner.dirty.lock().extend(affected);
        self.inner.dirty_notify.notify_one();
    }

    /// Re-aggregates dirty Gateways until the returned future is dropped.
    pub async fn run_aggregator(self) {
        loop {
            self.inner.dirty_notify.notified().await;
            self.aggregate_dirty();
            // Let ingest run between passes on a busy hub.
            tokio::task::yield_now().await;
        }
    }

    /// One aggregation pass over the dirty Gateways; publishes only if some
    /// aggregated Gateway changed. Returns whether one did. Also called by
    /// the status writer before it reads a view, so what it applies was
    /// aggregated with every input set before.
    ///
    /// Each Gateway is aggregated with the hub Gateway as the management
    /// cluster holds it (its generation, the hub's conditions for their
    /// lastTransitionTime, other writers' conditions), or, where there is
    /// none, with generation 1 and the previous view's conditions.
    ///
    /// The reports are taken under one short read lock (shared, not copied),
    /// the live hub Gateways under another; aggregation, comparison and
    /// encoding happen after them, and the watch channel's lock is held only
    /// to insert the finished views.
    pub fn aggregate_dirty(&self) -> bool {
        let _pass = self.inner.aggregating.lock();
        let keys = std::mem::take(&mut *self.inner.dirty.lock());
        if keys.is_empty() {
            return false;
        }
        let inputs: Vec<(GatewayKey, Vec<SharedReport>)> = {
            let fleet = self.inner.fleet.read();
            keys.into_iter()
                .map(|key| {
                    let reports = fleet.reports_shared(&key);
                    (key, reports)
                })
                .collect()
        };
        let lives: Vec<Option<Arc<LiveHub>>> = {
            let live = self.inner.live.lock();
            inputs.iter().map(|(k, _)| live.get(k).cloned()).collect()
        };
        let now = Timestamp::now();
        // Only this pass (see `aggregating`) changes the views, so what it
        // reads here stays current until it publishes.
        let olds: Vec<Option<Arc<GatewayView>>> = {
            let views = self.inner.views.borrow();
            inputs.iter().map(|(k, _)| views.get(k).cloned()).collect()
        };
        let mut results: Vec<(GatewayKey, Option<GatewayView>)> = Vec::with_capacity(inputs.len());
        for (((key, shared), live), old) in inputs.into_iter().zip(lives).zip(olds) {
            let old = old.as_ref();
            if shared.is_empty() && live.is_none() {
                if old.is_some() {
                    results.push((key, None));
                }
                continue;
            }
            let reports: Vec<ClusterReport<'_>> =
                shared.iter().map(SharedReport::as_report).collect();
            let hub = match &live {
                Some(live) => live.hub_gateway(&reports),
                None => HubGateway {
                    generation: NO_KUBE_GENERATION,
                    previous: old
                        .and_then(|v| v.aggregation.status.conditions.clone())
                        .unwrap_or_default(),
                    foreign: Vec::new(),
                },
            };
            let aggregation =
                match crate::aggregate::aggregate(&hub, &reports, &self.inner.options, now) {
                    Ok(a) => a,
                    Err(e) => {
                        // The fleet holds one report per cluster, so this
                        // cannot happen; keep the last good view.
                        tracing::error!(gateway = %key, error = %e, "aggregation failed");
                        continue;
                    }
                };
            let foreign: BTreeSet<String> = hub.foreign.into_iter().map(|c| c.type_).collect();
            drop(reports);
            if let Some(old) = old
                && old.aggregation == aggregation
                && old.foreign == foreign
                && old.lean.clusters.len() == shared.len()
                && old
                    .lean
                    .clusters
                    .iter()
                    .zip(&shared)
                    .all(|(a, b)| *a == b.cluster)
            {
                // Same result from this live object: the view stands for it.
                *old.aggregated_with.lock() = live;
                continue;
            }
            let clusters = shared.into_iter().map(|r| r.cluster).collect();
            let view = build_view(
                key.clone(),
                aggregation,
                foreign,
                clusters,
                old.map(|v| &**v),
                live,
            );
            results.push((key, Some(view)));
        }
        if results.is_empty() {
            return false;
        }
        self.inner.views.send_if_modified(|views| {
            for (key, view) in results {
                views.gateways.remove(&key);
                views.unreported.remove(&key);
                if let Some(mut view) = view {
                    views.revision += 1;
                    view.set_revision(views.revision);
                    let map = match view.lean.clusters.is_empty() {
                        true => &mut views.unreported,
                        false => &mut views.gateways,
                    };
                    map.insert(key, Arc::new(view));
                }
            }
            views.revision += 1;
            true
        })
    }

    /// The published aggregation of `key`, reported or not.
    pub fn view(&self, key: &GatewayKey) -> Option<Arc<GatewayView>> {
        self.inner.views.borrow().get(key).cloned()
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
}

/// Encodes a changed view; its revision is set when it is published
/// ([`GatewayView::set_revision`]). Omissions equal to `old`'s keep their
/// revision, so watchers that have them are not sent them again.
fn build_view(
    key: GatewayKey,
    aggregation: Aggregation,
    foreign: BTreeSet<String>,
    clusters: Vec<String>,
    old: Option<&GatewayView>,
    live: Option<Arc<LiveHub>>,
) -> GatewayView {
    let status = convert::status_to_proto(&aggregation.status).unwrap_or_else(|e| {
        tracing::error!(gateway = %key, error = %e, "aggregated status does not encode");
        v1::GatewayStatus::default()
    });
    // Unchanged omissions are copied from the old view, not formatted again.
    let unchanged = old.filter(|o| o.aggregation.omissions == aggregation.omissions);
    // 0: changed, set to the view's revision on publishing.
    let omissions_revision = unchanged.map_or(0, |o| o.omissions_revision);
    let lean = v1::AggregatedGateway {
        namespace: key.namespace.clone(),
        name: key.name.clone(),
        status: Some(status),
        clusters,
        omissions: Vec::new(),
        revision: 0,
        omissions_unchanged: true,
    };
    let omissions = match unchanged {
        Some(o) => o.omissions.clone(),
        None => aggregation
            .omissions
            .iter()
            .map(omission_to_proto)
            .collect(),
    };
    GatewayView {
        key,
        aggregation,
        lean,
        omissions,
        omissions_revision,
        foreign,
        aggregated_with: Mutex::new(live),
    }
}

impl GatewayView {
    fn set_revision(&mut self, revision: u64) {
        self.lean.revision = revision;
        if self.omissions_revision == 0 {
            self.omissions_revision = revision;
        }
    }
}

/// The engine's omission as the Dashboard API spells it.
pub fn omission_to_proto(o: &Omission) -> v1::Omission {
    let item = match o.item {
        Item::Address => "address",
        Item::Listener => "listener",
        Item::ListenerCondition => "listener_condition",
        Item::SupportedKind => "supported_kind",
        Item::Condition => "condition",
        Item::ForeignCondition => "foreign_condition",
    };
    // From the variant's name, so a rule the engine adds later still maps.
    let debug = format!("{:?}", o.rule);
    let variant = debug.split(['(', ' ', '{']).next().unwrap_or_default();
    let mut rule = String::with_capacity(variant.len() + 4);
    for (i, ch) in variant.chars().enumerate() {
        if ch.is_ascii_uppercase() {
            if i > 0 {
                rule.push('_');
            }
            rule.push(ch.to_ascii_lowercase());
        } else {
            rule.push(ch);
        }
    }
    v1::Omission {
        cluster: o.cluster.clone().unwrap_or_default(),
        item: item.to_owned(),
        names: o.names.clone(),
        rule,
        message: o.to_string(),
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

    fn cond(type_: &str, status: &str) -> gwhub_common::Condition {
        gwhub_common::conditions::new(type_, status, "R", "", Some(1), Timestamp::UNIX_EPOCH)
    }

    fn reported(types: &[&str]) -> GatewayStatus {
        GatewayStatus {
            conditions: Some(types.iter().map(|t| cond(t, "True")).collect()),
            ..GatewayStatus::default()
        }
    }

    fn condition_types(view: &GatewayView) -> BTreeSet<String> {
        let status = view.lean.status.as_ref().unwrap();
        status.conditions.iter().map(|c| c.r#type.clone()).collect()
    }

    /// Stored reports are bounded like streams (`--max-clusters`), and a
    /// pruned cluster is announced so the store deletes its report.
    #[tokio::test]
    async fn imports_respect_max_clusters_and_prunes_are_announced() {
        let index = Index::new(Options::default(), Duration::from_secs(60));
        index.set_max_clusters(2);
        let long_ago = now_millis() - 3_600_000;
        let one = || BTreeMap::from([(key("web"), reported(&["Accepted"]))]);
        assert!(index.import_cluster("a", one(), long_ago, long_ago));
        assert!(index.import_cluster("b", one(), long_ago, long_ago));
        assert!(!index.import_cluster("c", one(), long_ago, long_ago));
        assert_eq!(Counters::get(&index.counters().refused_clusters), 1);
        // A known cluster is still updated.
        assert!(index.import_cluster("a", one(), long_ago, long_ago));
        assert_eq!(index.clusters().len(), 2);

        let mut pruned = index.subscribe_pruned();
        index.set_prune_after(Duration::from_secs(60));
        index.prune_silent();
        let mut names = vec![pruned.recv().await.unwrap(), pruned.recv().await.unwrap()];
        names.sort();
        assert_eq!(names, ["a", "b"]);
        assert!(index.clusters().is_empty());
        // Room again.
        assert!(index.import_cluster("c", one(), long_ago, long_ago));
    }

    /// A status write's answer is installed only over the live object the
    /// write was planned against: a newer one from the watch (a spec edit)
    /// stays. A view tells which live object it was aggregated with, also
    /// when a newer object aggregates the same.
    #[test]
    fn a_write_answer_never_replaces_a_newer_live_hub_gateway() {
        let index = Index::new(Options::default(), Duration::from_secs(60));
        let session = index.connect("east", "test").unwrap();
        index
            .replace_snapshot(
                &session,
                BTreeMap::from([(key("web"), reported(&["Accepted"]))]),
            )
            .unwrap();
        let at = |generation| LiveHub {
            generation,
            ..LiveHub::default()
        };
        index.set_live_hub(key("web"), Some(at(1)));
        index.aggregate_dirty();
        let planned = index.live_hub(&key("web")).unwrap();
        assert!(index.view(&key("web")).unwrap().aggregated_from(&planned));
        // The user edits the spec while the write is under way.
        assert!(index.set_live_hub(key("web"), Some(at(2))));
        let edited = index.live_hub(&key("web")).unwrap();
        assert!(!index.view(&key("web")).unwrap().aggregated_from(&edited));
        // The write's answer predates the edit.
        assert!(!index.set_live_hub_written(key("web"), &planned, at(1)));
        assert!(Arc::ptr_eq(&index.live_hub(&key("web")).unwrap(), &edited));
        index.aggregate_dirty();
        let view = index.view(&key("web")).unwrap();
        assert!(view.aggregated_from(&edited));
        let status = view.lean.status.as_ref().unwrap();
        assert!(
            status
                .conditions
                .iter()
                .all(|c| c.observed_generation == Some(2)),
            "{status:?}"
        );
        // An answer over the object planned against is installed; the same
        // aggregation from it keeps the view, which now stands for it.
        let mut answer = at(2);
        answer.owns_listeners = true;
        assert!(index.set_live_hub_written(key("web"), &edited, answer));
        let written = index.live_hub(&key("web")).unwrap();
        assert!(!index.aggregate_dirty());
        let same = index.view(&key("web")).unwrap();
        assert_eq!(same.revision(), view.revision());
        assert!(same.aggregated_from(&written));
    }

    /// The published view is aggregated with the live hub Gateway when
    /// there is one: its generation, its other writers' conditions taking
    /// slots of the 8 (and the omissions naming what they pushed out); with
    /// none, generation 1. A live hub Gateway no cluster reports is
    /// aggregated (NoClusters) but not listed.
    #[test]
    fn views_are_aggregated_with_the_live_hub_gateway() {
        let index = Index::new(Options::default(), Duration::from_secs(60));
        let session = index.connect("east", "test").unwrap();
        let types = ["Accepted", "Programmed", "DNSReady"];
        index
            .replace_snapshot(&session, BTreeMap::from([(key("web"), reported(&types))]))
            .unwrap();
        index.aggregate_dirty();
        let view = index.view(&key("web")).unwrap();
        assert!(view.aggregation.omissions.is_empty());
        assert_eq!(
            view.lean.status.as_ref().unwrap().conditions[0].observed_generation,
            Some(1)
        );

        let foreign: Vec<String> = (0..6).map(|i| format!("example.com/F{i}")).collect();
        let live = LiveHub {
            generation: 3,
            status: GatewayStatus {
                conditions: Some(foreign.iter().map(|t| cond(t, "True")).collect()),
                ..GatewayStatus::default()
            },
            others: foreign.iter().cloned().collect(),
            ..LiveHub::default()
        };
        assert!(index.set_live_hub(key("web"), Some(live.clone())));
        assert!(!index.set_live_hub(key("web"), Some(live.clone())));
        assert!(index.aggregate_dirty());
        let view = index
            .subscribe()
            .borrow()
            .gateways
            .get(&key("web"))
            .cloned()
            .unwrap();
        let mut want: BTreeSet<String> = foreign.iter().cloned().collect();
        want.extend([
            crate::aggregate::OWN_CONDITION.to_owned(),
            "Accepted".to_owned(),
        ]);
        assert_eq!(condition_types(&view), want);
        assert_eq!(view.foreign, foreign.iter().cloned().collect());
        let status = view.lean.status.as_ref().unwrap();
        for c in status
            .conditions
            .iter()
            .filter(|c| !c.r#type.starts_with("example.com/"))
        {
            assert_eq!(c.observed_generation, Some(3), "{c:?}");
        }
        let left_out: BTreeSet<&str> = view
            .omissions
            .iter()
            .filter(|o| o.rule == "too_many")
            .flat_map(|o| o.names.iter().map(String::as_str))
            .collect();
        assert_eq!(left_out, BTreeSet::from(["DNSReady", "Programmed"]));
        // Re-aggregated with nothing changed: nothing published.
        index.mark_dirty(BTreeSet::from([key("web")]));
        assert!(!index.aggregate_dirty());
        // The hub Gateway gone from the management cluster: generation 1,
        // every aggregated type again.
        assert!(index.set_live_hub(key("web"), None));
        assert!(index.aggregate_dirty());
        let view = index.view(&key("web")).unwrap();
        assert_eq!(condition_types(&view).len(), 4);
        assert!(view.foreign.is_empty() && view.omissions.is_empty());

        // No cluster reports it: aggregated for the writer, not listed.
        index.set_live_hub(key("lonely"), Some(LiveHub::default()));
        index.aggregate_dirty();
        let views = index.subscribe();
        let views = views.borrow();
        assert!(!views.gateways.contains_key(&key("lonely")));
        let lonely = views.get(&key("lonely")).unwrap();
        assert_eq!(
            lonely.aggregation.status.conditions.as_ref().unwrap()[0].reason,
            "NoClusters"
        );
    }
}
