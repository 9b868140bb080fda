//! Sessions and liveness: which cluster streams where, a newer stream
//! superseding an older one, heartbeats, staleness and pruning of silent
//! clusters.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use gwhub_hub_rules::aggregate::Fleet;
use jiff::Timestamp;
use parking_lot::{Mutex, MutexGuard};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::lock_order::{self, Before, Held, Proof};
use super::{Index, now_millis};

/// The sessions part of the index: every known cluster's liveness record,
/// and the channels that announce its transitions and prunes. Its state is
/// private: other parts reach a cluster's record through [`Sessions::lock`]
/// and change it through [`ClusterLive`]'s methods.
///
/// Lock order (`lock_order`, checked by the compiler): a pass's lock, the
/// clusters ([`Sessions::lock`], which takes the proof of what is held),
/// then the fleet (the reports part); one cluster's session slot and the
/// inventory are leaves, taken inside those or alone. The types also hold
/// the part that matters
/// for a superseded stream: a slot is only ever moved on
/// ([`ClusterLive::supersede`], [`ClusterLive::end_streams`]) with the
/// fleet's write guard in hand, and a stream's report write checks its
/// slot ([`Session::check`]) with the fleet guard in hand, so no write of
/// an older stream lands after a newer one took over. A report's revision
/// is likewise bumped and read only with the fleet
/// ([`ClusterLive::bump_report_rev`], [`ClusterLive::report_rev_with`]).
pub(super) struct Sessions {
    /// Every known cluster.
    clusters: Mutex<BTreeMap<String, Arc<ClusterLive>>>,
    transitions: broadcast::Sender<ClusterTransition>,
    /// Clusters the prune forgot, for the store to delete their reports.
    pruned: broadcast::Sender<String>,
    stale_after: Duration,
    /// `--max-clusters`.
    max_clusters: usize,
    /// Milliseconds after which a disconnected, silent cluster is forgotten
    /// (`--insecure-prune-after`); 0: never.
    prune_after_millis: i64,
}

impl Sessions {
    pub(super) fn new(
        stale_after: Duration,
        max_clusters: usize,
        prune_after: Option<Duration>,
    ) -> Self {
        let (transitions, _) = broadcast::channel(TRANSITIONS_BUFFER);
        let (pruned, _) = broadcast::channel(TRANSITIONS_BUFFER);
        Sessions {
            clusters: Mutex::new(BTreeMap::new()),
            transitions,
            pruned,
            stale_after,
            max_clusters,
            prune_after_millis: prune_after.map_or(0, |after| {
                i64::try_from(after.as_millis()).unwrap_or(i64::MAX)
            }),
        }
    }

    /// A cluster silent for this long is stale.
    pub(super) fn stale_after(&self) -> Duration {
        self.stale_after
    }

    /// `--max-clusters`.
    pub(super) fn max_clusters(&self) -> usize {
        self.max_clusters
    }

    /// Tells the store that `cluster` was forgotten, so it deletes the
    /// cluster's stored report (no subscriber is fine).
    pub(super) fn announce_pruned(&self, cluster: &str) {
        let _ = self.pruned.send(cluster.to_owned());
    }

    /// Every known cluster, locked: after a pass's lock, before the
    /// fleet (see `lock_order`).
    pub(super) fn lock<'a, L: Before<lock_order::Clusters>>(
        &'a self,
        held: Proof<'a, L>,
    ) -> Clusters<'a> {
        Clusters {
            proof: held.then(),
            guard: self.clusters.lock(),
        }
    }

    /// `cluster`'s record, if known (the clusters lock is held only to
    /// clone it).
    pub(super) fn get<L: Before<lock_order::Clusters>>(
        &self,
        held: Proof<'_, L>,
        cluster: &str,
    ) -> Option<Arc<ClusterLive>> {
        self.lock(held).get(cluster).cloned()
    }
}

/// Every known cluster, under the clusters lock ([`Sessions::lock`]).
pub(super) struct Clusters<'a> {
    guard: MutexGuard<'a, BTreeMap<String, Arc<ClusterLive>>>,
    proof: Proof<'a, lock_order::Clusters>,
}

impl<'a> Clusters<'a> {
    /// The proof that the clusters are locked, for the fleet's lock.
    pub(super) fn proof(&self) -> Proof<'a, lock_order::Clusters> {
        self.proof
    }

    /// `cluster`'s record, if known.
    pub(super) fn get(&self, cluster: &str) -> Option<&Arc<ClusterLive>> {
        self.guard.get(cluster)
    }

    pub(super) fn contains(&self, cluster: &str) -> bool {
        self.guard.contains_key(cluster)
    }

    pub(super) fn len(&self) -> usize {
        self.guard.len()
    }

    /// Every known cluster's name, in order.
    pub(super) fn names(&self) -> impl Iterator<Item = &String> {
        self.guard.keys()
    }

    /// Every known cluster's record, in name order.
    pub(super) fn all(&self) -> impl Iterator<Item = &Arc<ClusterLive>> {
        self.guard.values()
    }

    /// `cluster`'s record, made if it is new (the caller checked
    /// `--max-clusters`).
    pub(super) fn get_or_add(&mut self, cluster: &str) -> Arc<ClusterLive> {
        self.guard
            .entry(cluster.to_owned())
            .or_insert_with(|| Arc::new(ClusterLive::new(cluster)))
            .clone()
    }

    /// Forgets `cluster`; its record, if it was known.
    pub(super) fn remove(&mut self, cluster: &str) -> Option<Arc<ClusterLive>> {
        self.guard.remove(cluster)
    }
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

/// A cluster's connection and liveness, shared with its stream so the hot
/// path (touching liveness) takes only the cluster's own session lock.
/// Private to this part: the others read and change it by its methods.
#[derive(Debug)]
pub(super) struct ClusterLive {
    name: String,
    /// The current stream: its id and the token that ends it. Moved on by
    /// `connect` (which supersedes) and by a removal, both holding the
    /// fleet's write lock, which every write a stream makes for the
    /// cluster (reports) also holds while it checks its id: a superseded
    /// stream's write can never land after the newer stream was accepted.
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
    /// The inventory namespace it left (its ClusterProfile was deleted).
    removed_from: Mutex<Option<String>>,
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
            removed_from: Mutex::new(None),
        }
    }

    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// A new stream takes the cluster over (the fleet's write guard in
    /// hand, see [`Sessions`]): the older stream's token is cancelled, and
    /// the new stream's id and token returned.
    fn supersede(&self, _fleet: &mut Fleet) -> (u64, CancellationToken) {
        let mut slot = self.session.lock();
        slot.id += 1;
        let cancel = CancellationToken::new();
        let old = std::mem::replace(&mut slot.cancel, cancel.clone());
        old.cancel();
        (slot.id, cancel)
    }

    /// The cluster was removed: its stream, if any, ends and finds itself
    /// superseded at its next write (the fleet's write guard in hand).
    pub(super) fn end_streams(&self, _fleet: &mut Fleet) {
        let mut slot = self.session.lock();
        slot.id += 1;
        slot.cancel.cancel();
        self.connected.store(false, Ordering::SeqCst);
    }

    /// Whether a stream of the cluster is connected to this hub.
    pub(super) fn connected(&self) -> bool {
        self.connected.load(Ordering::SeqCst)
    }

    pub(super) fn stale(&self) -> bool {
        self.stale.load(Ordering::SeqCst)
    }

    /// Sets the stale flag; whether it was set before.
    pub(super) fn swap_stale(&self, stale: bool) -> bool {
        self.stale.swap(stale, Ordering::SeqCst)
    }

    /// Unix milliseconds of the cluster's last message; 0 if never.
    pub(super) fn last_seen(&self) -> i64 {
        self.last_seen.load(Ordering::SeqCst)
    }

    /// Moves the last-seen time on to `millis` unless it is later;
    /// returns the result.
    pub(super) fn raise_last_seen(&self, millis: i64) -> i64 {
        self.last_seen
            .fetch_max(millis, Ordering::SeqCst)
            .max(millis)
    }

    /// Unix milliseconds of the cluster's last applied report; 0 if never.
    pub(super) fn last_report(&self) -> i64 {
        self.last_report.load(Ordering::SeqCst)
    }

    /// Moves the last report time on to `millis` unless it is later.
    pub(super) fn raise_last_report(&self, millis: i64) {
        self.last_report.fetch_max(millis, Ordering::SeqCst);
    }

    /// A report landed at `millis` (this hub's clock).
    pub(super) fn set_last_report(&self, millis: i64) {
        self.last_report.store(millis, Ordering::SeqCst);
    }

    /// A report of the cluster was applied (the fleet's write guard in
    /// hand, so a reader holding the fleet sees a revision matching the
    /// reports).
    pub(super) fn bump_report_rev(&self, _fleet: &mut Fleet) {
        self.report_rev.fetch_add(1, Ordering::SeqCst);
    }

    /// The report revision, read with the fleet (so it matches the
    /// reports read beside it).
    pub(super) fn report_rev_with(&self, _fleet: &Fleet) -> u64 {
        self.report_rev.load(Ordering::SeqCst)
    }

    /// The report revision, for a summary (no fleet in hand).
    pub(super) fn report_rev(&self) -> u64 {
        self.report_rev.load(Ordering::SeqCst)
    }

    /// The cluster left the inventory of `namespace`: its stream is told so.
    pub(super) fn set_removed_from(&self, namespace: String) {
        *self.removed_from.lock() = Some(namespace);
    }

    /// The inventory namespace the cluster left, if it was removed.
    pub(super) fn removed_from(&self) -> Option<String> {
        self.removed_from.lock().clone()
    }

    /// The agent version its current stream announced.
    pub(super) fn agent_version(&self) -> String {
        self.agent_version.lock().clone()
    }

    /// Encoded bytes of its report (`--max-cluster-report-bytes`).
    pub(super) fn report_bytes(&self) -> u64 {
        self.report_bytes.load(Ordering::Relaxed)
    }

    /// The id of its latest stream to this hub.
    pub(super) fn session_id(&self) -> u64 {
        self.session.lock().id
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
    pub(crate) fn is_superseded(&self) -> bool {
        self.live.session.lock().id != self.id
    }

    /// `Ok` while this is still the cluster's current stream, checked with
    /// the fleet in hand (see [`Sessions`]): a write made under the same
    /// guard cannot land after a newer stream took over.
    pub(super) fn check(&self, _fleet: &Fleet) -> Result<(), Superseded> {
        match self.is_superseded() {
            false => Ok(()),
            true => Err(Superseded(self.cluster().to_owned())),
        }
    }

    /// The cluster's record.
    pub(super) fn live(&self) -> &ClusterLive {
        &self.live
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

/// Why a stream's cluster may not connect.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(transparent)]
    TooMany(#[from] TooManyClusters),
    /// The fleet inventory refuses it (or is not loaded yet).
    #[error(transparent)]
    Inventory(#[from] gwhub_hub_rules::inventory::Refusal),
}

/// A newer stream for the same cluster took over; the older one must end.
#[derive(Debug, thiserror::Error)]
#[error("a newer stream for cluster {0:?} took over")]
pub struct Superseded(pub String);

impl Index {
    /// Records the encoded size of the session's cluster's report.
    pub fn set_report_bytes(&self, session: &Session, bytes: u64) {
        if !session.is_superseded() {
            session.live().report_bytes.store(bytes, Ordering::Relaxed);
        }
    }

    /// Every cluster `--insecure-prune-after` forgets from now on (the
    /// store deletes their reports, so a relist or restart does not bring
    /// them back).
    pub fn subscribe_pruned(&self) -> broadcast::Receiver<String> {
        self.inner.sessions.pruned.subscribe()
    }

    /// Every stale/fresh transition of a cluster from now on.
    pub fn subscribe_transitions(&self) -> broadcast::Receiver<ClusterTransition> {
        self.inner.sessions.transitions.subscribe()
    }

    pub(super) fn transition(&self, t: ClusterTransition) {
        // No subscriber (no Kubernetes side) is fine.
        let _ = self.inner.sessions.transitions.send(t);
    }

    /// Registers a new stream for `cluster`, superseding any older one. The
    /// cluster's reports stay as they are until its next snapshot, so a
    /// reconnect does not flap the aggregate.
    /// With a fleet inventory, a cluster outside it is refused (or, with
    /// `--inventory-mode=observe`, admitted and flagged).
    pub fn connect(&self, cluster: &str, agent_version: &str) -> Result<Session, ConnectError> {
        let mut held = Held::nothing();
        // Under the clusters lock, like `disconnect`: an older stream's
        // disconnect cannot land between taking over and marking connected.
        // The session slot is taken under the fleet lock, which the older
        // stream's report writes hold while they check their session: none
        // of them lands after this.
        let session = {
            let mut clusters = self.inner.sessions.lock(held.proof());
            // Under the clusters lock: a leave cannot land between the check
            // and the connection.
            if self.admit(cluster)? {
                tracing::warn!(
                    cluster,
                    "agent outside the fleet inventory admitted (--inventory-mode=observe)"
                );
            }
            let max = self.inner.sessions.max_clusters;
            let new = !clusters.contains(cluster);
            if new && clusters.len() >= max {
                self.inner.counters.refused_clusters.inc();
                return Err(TooManyClusters {
                    cluster: cluster.to_owned(),
                    max,
                }
                .into());
            }
            let live = clusters.get_or_add(cluster);
            let (id, cancel) = live.supersede(&mut self.inner.reports.write(clusters.proof()));
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
    pub fn disconnect(&self, session: &Session) {
        let mut held = Held::nothing();
        let _clusters = self.inner.sessions.lock(held.proof());
        if !session.is_superseded() {
            session.live.connected.store(false, Ordering::SeqCst);
        }
    }

    /// Records that the cluster is alive; a stale cluster turns fresh. A
    /// superseded session's messages do not count (returns `false`): only
    /// the stream the cluster's report came from keeps it fresh.
    pub fn touch(&self, session: &Session) -> bool {
        let mut held = Held::nothing();
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
            let clusters = self.inner.sessions.lock(held.proof());
            if live.stale.swap(false, Ordering::SeqCst) {
                let affected = self
                    .inner
                    .reports
                    .write(clusters.proof())
                    .mark_fresh(&live.name);
                self.mark_dirty_by(&live.name, affected);
                tracing::info!(cluster = %live.name, "cluster is fresh again");
                self.transition(ClusterTransition::Fresh {
                    cluster: live.name.clone(),
                });
            }
        }
        true
    }

    /// Another hub replica serves `cluster` and was alive at `seen_millis`
    /// (its heartbeat, see the runtime's `kube::liveness`): the cluster's last-seen moves
    /// on and a stale one turns fresh. A cluster streaming here (its own
    /// messages count), or not known here yet (its stored report brings
    /// it), is left alone.
    pub fn seen_elsewhere(&self, cluster: &str, seen_millis: i64) {
        let mut held = Held::nothing();
        let limit = i64::try_from(self.inner.sessions.stale_after.as_millis()).unwrap_or(i64::MAX);
        let clusters = self.inner.sessions.lock(held.proof());
        let Some(live) = clusters.get(cluster) else {
            return;
        };
        if live.connected() {
            return;
        }
        let seen = live.raise_last_seen(seen_millis);
        if now_millis().saturating_sub(seen) >= limit || !live.stale.swap(false, Ordering::SeqCst) {
            return;
        }
        let affected = self
            .inner
            .reports
            .write(clusters.proof())
            .mark_fresh(&live.name);
        drop(clusters);
        self.mark_dirty_by(cluster, affected);
        tracing::info!(
            cluster,
            "cluster is fresh again (served by another replica)"
        );
        self.transition(ClusterTransition::Fresh {
            cluster: cluster.to_owned(),
        });
    }

    /// Forgets disconnected clusters silent for the prune bound (see
    /// [`IndexConfig::prune_after`]).
    pub(crate) fn prune_silent(&self) {
        let mut held = Held::nothing();
        let after = self.inner.sessions.prune_after_millis;
        if after <= 0 {
            return;
        }
        let now = now_millis();
        let gone: Vec<String> = {
            let mut clusters = self.inner.sessions.lock(held.proof());
            let gone: Vec<String> = clusters
                .all()
                .filter(|l| !l.connected() && now.saturating_sub(l.last_seen()) >= after)
                .map(|l| l.name.clone())
                .collect();
            let mut affected = BTreeSet::new();
            if !gone.is_empty() {
                let mut fleet = self.inner.reports.write(clusters.proof());
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
            self.inner.counters.clusters_pruned.inc();
            tracing::info!(
                cluster,
                "silent disconnected cluster forgotten (--insecure-prune-after)"
            );
            self.inner.sessions.announce_pruned(&cluster);
        }
    }

    /// Marks clusters silent for longer than `stale_after` stale.
    pub(crate) fn sweep_stale(&self) {
        let mut held = Held::nothing();
        let now = now_millis();
        let limit = i64::try_from(self.inner.sessions.stale_after.as_millis()).unwrap_or(i64::MAX);
        let clusters = self.inner.sessions.lock(held.proof());
        for live in clusters.all() {
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
            let affected = self
                .inner
                .reports
                .write(clusters.proof())
                .mark_stale(&live.name, last);
            self.mark_dirty_by(&live.name, affected);
            self.transition(ClusterTransition::Stale {
                cluster: live.name.clone(),
                last_seen: last,
            });
        }
    }

    /// Runs the staleness sweep until the returned future is dropped.
    pub async fn run_staleness(self) {
        let period = (self.inner.sessions.stale_after / 4)
            .clamp(Duration::from_millis(50), Duration::from_secs(1));
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.sweep_stale();
            self.prune_silent();
        }
    }
}
