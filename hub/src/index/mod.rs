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
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_common::CoalescingQueue;
use gwhub_proto::{convert, v1};
use jiff::Timestamp;
use parking_lot::{Mutex, RwLock};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use crate::aggregate::fleet::SharedReport;
use crate::aggregate::{Aggregation, Fleet, Freshness, GatewayKey, HubGateway, LiveHub, Options};
use crate::budget::Counters;
use crate::history;

mod aggregator;
mod inventory;
mod reports;
mod sessions;
mod view;

pub use inventory::{Labels, ListedCluster, removed_message};
pub use view::{Cell, GatewayView, Views};
pub(crate) use view::{OMISSIONS_UNCHANGED, build_view, cells};

/// Generation a hub Gateway gets when the management cluster holds none
/// (always with `--no-kube`), like `gwhub aggregate` with no hub file.
const NO_KUBE_GENERATION: i64 = 1;

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

struct Inner {
    fleet: RwLock<Fleet>,
    /// Serialises aggregation passes, so an older pass never publishes
    /// over a newer one (held without any other lock, never across `.await`).
    aggregating: Mutex<()>,
    clusters: Mutex<BTreeMap<String, Arc<ClusterLive>>>,
    /// The hub Gateways on the management cluster (Kubernetes mode), as
    /// its Gateway watch last saw them; taken alone, never with another lock.
    live: Mutex<BTreeMap<GatewayKey, Arc<LiveHub>>>,
    /// Gateways to re-aggregate, for the aggregator task.
    dirty: CoalescingQueue<GatewayKey>,
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
    max_clusters: usize,
    /// Milliseconds after which a disconnected, silent cluster is forgotten
    /// (`--insecure-prune-after`); 0: never.
    prune_after_millis: i64,
    /// The last status transitions of each reported hub Gateway (taken
    /// alone, by the aggregation pass and `GetGatewayHistory`).
    history: Mutex<BTreeMap<GatewayKey, history::Ring>>,
    /// `--gateway-history`: transitions kept per hub Gateway; 0: none.
    history_capacity: usize,
    /// Per hub Gateway on the management cluster, when agents observed the
    /// earliest change not yet written (unix milliseconds; taken alone;
    /// dropped when an aggregation changes nothing).
    observed: Mutex<BTreeMap<GatewayKey, i64>>,
    /// The fleet inventory (`--inventory-namespace`), if any; taken alone
    /// or inside the clusters lock, never around another lock.
    inventory: RwLock<Option<gwhub_hub_rules::inventory::Inventory>>,
    /// The PlacementDecisions by (namespace, name), once watched; `None`
    /// while they are not (no CRD). Taken alone.
    placements: RwLock<Option<BTreeMap<(String, String), gwhub_hub_rules::inventory::Placement>>>,
    /// Traced changes (only with `--otlp-endpoint`): per Gateway, the W3C
    /// `traceparent` of the delta apply its next aggregation continues, and
    /// of the aggregation the status write continues (each taken alone).
    traces: Mutex<Traces>,
}

/// See `Inner::traces`.
#[derive(Default)]
pub(crate) struct Traces {
    pub(crate) aggregate: BTreeMap<GatewayKey, String>,
    pub(crate) write: BTreeMap<GatewayKey, String>,
}

/// Cheap to clone; every clone shares the same state.
#[derive(Clone)]
pub struct Index {
    inner: Arc<Inner>,
}

fn now_millis() -> i64 {
    Timestamp::now().as_millisecond()
}

/// Everything the index is built from, set once: the index has no setters.
#[derive(Clone, Debug)]
pub struct IndexConfig {
    /// The aggregation engine's options.
    pub options: Options,
    /// A cluster silent for this long is stale (`--stale-after`).
    pub stale_after: Duration,
    /// Streams (and stored reports) for more clusters are refused
    /// (`--max-clusters`).
    pub max_clusters: usize,
    /// Disconnected clusters silent for this long are forgotten by the
    /// staleness sweep (`--insecure-prune-after`); `None`: never.
    pub prune_after: Option<Duration>,
    /// Status transitions kept per hub Gateway (`--gateway-history`); 0
    /// keeps none.
    pub history_capacity: usize,
    /// The fleet inventory's namespace and mode (`--inventory-namespace`):
    /// nobody may stream before its first list. `None`: no inventory.
    pub inventory: Option<(String, gwhub_hub_rules::inventory::Mode)>,
}

impl IndexConfig {
    /// No cluster bound, no pruning, the default history, no inventory.
    pub fn new(options: Options, stale_after: Duration) -> Self {
        IndexConfig {
            options,
            stale_after,
            max_clusters: usize::MAX,
            prune_after: None,
            history_capacity: history::DEFAULT_CAPACITY,
            inventory: None,
        }
    }
}

impl Index {
    pub fn new(config: IndexConfig) -> Self {
        let IndexConfig {
            options,
            stale_after,
            max_clusters,
            prune_after,
            history_capacity,
            inventory,
        } = config;
        let prune_after_millis = prune_after.map_or(0, |after| {
            i64::try_from(after.as_millis()).unwrap_or(i64::MAX)
        });
        let (views, _) = watch::channel(Views::default());
        let (reports, _) = watch::channel(0);
        let (transitions, _) = broadcast::channel(TRANSITIONS_BUFFER);
        let (pruned, _) = broadcast::channel(TRANSITIONS_BUFFER);
        Index {
            inner: Arc::new(Inner {
                fleet: RwLock::new(Fleet::with_incremental(options.clone())),
                aggregating: Mutex::new(()),
                clusters: Mutex::new(BTreeMap::new()),
                live: Mutex::new(BTreeMap::new()),
                dirty: CoalescingQueue::default(),
                views,
                reports,
                transitions,
                pruned,
                options,
                stale_after,
                counters: Arc::default(),
                max_clusters,
                prune_after_millis,
                history: Mutex::new(BTreeMap::new()),
                history_capacity,
                observed: Mutex::new(BTreeMap::new()),
                inventory: RwLock::new(inventory.map(|(namespace, mode)| {
                    gwhub_hub_rules::inventory::Inventory::new(&namespace, mode)
                })),
                placements: RwLock::new(None),
                traces: Mutex::default(),
            }),
        }
    }

    pub fn stale_after(&self) -> Duration {
        self.inner.stale_after
    }

    /// Notes that an agent observed changes to `keys` at `unix_millis` (a
    /// delta's `observed_unix_millis`; 0: unknown, ignored), for the hub
    /// Gateways on the management cluster among them: the earliest is kept
    /// until the status writer takes it ([`Index::take_observed`]) and
    /// measures the propagation to its write.
    pub(crate) fn note_observed(
        &self,
        keys: impl IntoIterator<Item = GatewayKey>,
        unix_millis: i64,
    ) {
        if unix_millis <= 0 {
            return;
        }
        let keys: Vec<GatewayKey> = keys
            .into_iter()
            .filter(|k| self.live_hub(k).is_some())
            .collect();
        if keys.is_empty() {
            return;
        }
        let mut observed = self.inner.observed.lock();
        for key in keys {
            observed
                .entry(key)
                .and_modify(|t| *t = (*t).min(unix_millis))
                .or_insert(unix_millis);
        }
    }

    /// Notes that the current span (a delta apply) changed `keys`, so their
    /// next aggregation continues its trace; nothing when not traced.
    pub(crate) fn note_trace(&self, keys: impl IntoIterator<Item = GatewayKey>) {
        let traceparent = gwhub_common::logging::traceparent();
        if traceparent.is_empty() {
            return;
        }
        let mut traces = self.inner.traces.lock();
        for key in keys {
            traces
                .aggregate
                .entry(key)
                .or_insert_with(|| traceparent.clone());
        }
    }

    /// Takes the trace an aggregation of `key` left for its status write.
    pub(crate) fn take_write_trace(&self, key: &GatewayKey) -> Option<String> {
        self.inner.traces.lock().write.remove(key)
    }

    /// Takes what [`Index::note_observed`] kept for `key`.
    pub(crate) fn take_observed(&self, key: &GatewayKey) -> Option<i64> {
        self.inner.observed.lock().remove(key)
    }

    /// The budgets' counters (see [`crate::budget`]).
    pub fn counters(&self) -> &Arc<Counters> {
        &self.inner.counters
    }

    /// The transitions kept per hub Gateway.
    pub fn history_capacity(&self) -> usize {
        self.inner.history_capacity
    }

    /// The newest `limit` (0: all) status transitions of `key`, oldest
    /// first; `None` if the hub keeps no history for it.
    pub fn history(&self, key: &GatewayKey, limit: usize) -> Option<Vec<history::Transition>> {
        self.inner.history.lock().get(key).map(|r| r.latest(limit))
    }

    /// Records the transitions of `key` (see [`history`]); `None` forgets
    /// its history.
    pub(crate) fn record_history(
        &self,
        key: &GatewayKey,
        now: Option<&history::Conditions>,
        millis: i64,
    ) {
        let capacity = self.history_capacity();
        let mut all = self.inner.history.lock();
        match now {
            Some(now) if capacity > 0 => {
                all.entry(key.clone())
                    .or_default()
                    .record(now, millis, capacity);
            }
            _ => {
                all.remove(key);
            }
        }
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

    fn cond(type_: &str, status: &str) -> gwhub_model::Condition {
        gwhub_model::conditions::new(type_, status, "R", "", Some(1), Timestamp::UNIX_EPOCH)
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
        let index = Index::new(IndexConfig {
            max_clusters: 2,
            prune_after: Some(Duration::from_secs(60)),
            ..IndexConfig::new(Options::default(), Duration::from_secs(60))
        });
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
        let index = Index::new(IndexConfig::new(
            Options::default(),
            Duration::from_secs(60),
        ));
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
        let index = Index::new(IndexConfig::new(
            Options::default(),
            Duration::from_secs(60),
        ));
        let session = index.connect("east", "test").unwrap();
        let types = ["Accepted", "Programmed", "DNSReady"];
        index
            .replace_snapshot(&session, BTreeMap::from([(key("web"), reported(&types))]))
            .unwrap();
        index.aggregate_dirty();
        let view = index.view(&key("web")).unwrap();
        assert!(view.omissions.is_empty());
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
