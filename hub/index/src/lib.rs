#![forbid(unsafe_code)]
#![warn(unreachable_pub)]
//! The hub's live state: every cluster's latest report (the engine's
//! `Fleet`), per-cluster connection bookkeeping, the hub Gateways as the
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
//!
//! [`Index`] is a thin, cheap-to-clone handle built once from an
//! [`IndexConfig`]; the state lives in parts, each owning its state and
//! locks in its own file: `sessions` (who streams, liveness, staleness,
//! prunes), `reports` (the fleet of reports and the store's revision),
//! `aggregator` (live hub Gateways, the dirty set, the published views),
//! `history` (status transitions) and `inventory` (ClusterProfiles and
//! placements). `view` is the views' encoding, so the gRPC side depends on
//! the index and never the other way round. `dns_view` is the view fleet
//! DNS publishes (the DNS controller writes it; gRPC and the page read it).
//! `counters` and `gauges` are what the index serves on `/metrics`.
//!
//! It is a crate of its own so that the hub's state has one owner that
//! names no listener, API server or name server: its direct dependencies
//! are the rules, the wire types and the shared plumbing, never tonic,
//! hyper, axum, a Kubernetes or DNS client, TLS or clap
//! (`scripts/check-deps.sh` checks them). Everything above it reads it
//! and writes it; it reads none of them. The runtime holds the [`Index`];
//! each service is handed only its port (`ports`: [`IngestPort`],
//! [`ReadPort`], [`DnsPort`], [`StorePort`], [`StatusPort`],
//! [`InventoryPort`], [`EventsPort`]), so each shows what it does with the
//! state.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use gwhub_hub_rules::aggregate::Options;

mod aggregator;
mod counters;
mod dns_condition;
mod dns_view;
mod gauges;
mod history;
mod hostnames;
mod inventory;
mod lock_order;
mod ports;
mod provenance;
mod reports;
mod sessions;
mod view;

use aggregator::Aggregator;
use dns_condition::DnsConditions;
use history::History;
use hostnames::Hostnames;
use inventory::FleetInventory;
use reports::Reports;
use sessions::Sessions;

pub use counters::IndexCounters;
pub use dns_condition::DnsMode;
pub use dns_view::{ClusterVerdict, DnsView, LastWrite, NameView, Verdict};
pub use gauges::{ClusterGauges, HubGatewayGauges};
pub use hostnames::ListenerHostnames;
pub use inventory::{Labels, ListedCluster, removed_message};
pub use ports::{DnsPort, EventsPort, IngestPort, InventoryPort, ReadPort, StatusPort, StorePort};
pub use provenance::{Provenance, Stamp};
pub use reports::{ApplyError, Change, ClusterGateway, ClusterRecord, ClusterSummary};
pub use sessions::{ClusterTransition, ConnectError, Session, Superseded, TooManyClusters};
#[cfg(any(test, feature = "testing"))]
pub use view::testing;
pub use view::{Cell, Cells, Encoded, GatewayView, OMISSIONS_UNCHANGED, Views};

/// The index's parts, each with its own state and locks (see each file).
/// A call that spans parts takes their locks in the order `lock_order`
/// holds it to (the compiler refuses another), each for a short sync
/// section, never across `.await`.
struct Inner {
    sessions: Sessions,
    reports: Reports,
    aggregator: Aggregator,
    history: History,
    inventory: FleetInventory,
    hostnames: Hostnames,
    dns_conditions: DnsConditions,
    counters: Arc<IndexCounters>,
}

/// Cheap to clone; every clone shares the same state.
#[derive(Clone)]
pub struct Index {
    inner: Arc<Inner>,
}

fn now_millis() -> i64 {
    Timestamp::now().as_millisecond()
}

/// Default of `--max-clusters` and `--max-connections` (one connection per
/// agent): room for the largest fleets one hub is known to serve (Open
/// Cluster Management is scale-tested with 3,500 managed clusters).
pub const DEFAULT_MAX_CLUSTERS: usize = 4096;

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
            history_capacity: gwhub_hub_rules::history::DEFAULT_CAPACITY,
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
        Index {
            inner: Arc::new(Inner {
                sessions: Sessions::new(stale_after, max_clusters, prune_after),
                reports: Reports::new(options.clone()),
                aggregator: Aggregator::new(options),
                history: History::new(history_capacity),
                inventory: FleetInventory::new(inventory),
                hostnames: Hostnames::default(),
                dns_conditions: DnsConditions::default(),
                counters: Arc::default(),
            }),
        }
    }

    pub fn stale_after(&self) -> Duration {
        self.inner.sessions.stale_after()
    }

    /// The index's counters (`--max-clusters`, `--insecure-prune-after`).
    pub fn counters(&self) -> &Arc<IndexCounters> {
        &self.inner.counters
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;

    use gateway_api::apis::standard::gateways::GatewayStatus;

    use super::*;
    use gwhub_hub_rules::aggregate::{GatewayKey, LiveHub};

    fn key(n: &str) -> GatewayKey {
        GatewayKey::new("ns", n)
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

    /// An index where cluster east reports hub Gateway ns/web Accepted.
    fn east_reporting_web() -> (Index, Session) {
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
        (index, session)
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
        assert_eq!(index.counters().refused_clusters.get(), 1);
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
        let (index, _session) = east_reporting_web();
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

    /// The hub's own last write outranks a watch event that predates it:
    /// another writer's change made before the hub's write but delivered
    /// after it (so the answer is not installed) must not restart the
    /// lastTransitionTime of the hub's unchanged conditions (which would
    /// also make the hub write again). A re-created Gateway (another uid)
    /// starts afresh.
    #[test]
    fn the_hubs_last_write_outranks_an_older_watch_event() {
        let (index, _session) = east_reporting_web();
        let long_ago = Timestamp::from_second(1_000).unwrap();
        let ours = |t: &str| gwhub_model::conditions::new(t, "True", "R", "", Some(1), long_ago);
        let object = |uid: &str, conditions: Vec<gwhub_model::Condition>| LiveHub {
            generation: 1,
            uid: Some(uid.to_owned()),
            status: GatewayStatus {
                conditions: Some(conditions),
                ..GatewayStatus::default()
            },
            ..LiveHub::default()
        };
        index.set_live_hub(key("web"), Some(object("u1", vec![])));
        let planned = index.live_hub(&key("web")).unwrap();
        // Another writer's condition, written before the hub's write and
        // seen after it: no hub conditions on it.
        let foreign = cond("example.com/Policy", "True");
        let mut stale = object("u1", vec![foreign.clone()]);
        stale.others.insert("example.com/Policy".into());
        assert!(index.set_live_hub(key("web"), Some(stale.clone())));
        // The hub's write answer: its conditions since long ago.
        let mut answer = object("u1", vec![ours("Accepted"), foreign.clone()]);
        answer.owned.insert("Accepted".into());
        answer.others.insert("example.com/Policy".into());
        answer.written = vec![ours("Accepted")];
        assert!(index.set_live_hub_written(key("web"), &planned, answer.clone()));
        index.aggregate_dirty();
        let transition = |index: &Index| {
            let view = index.view(&key("web")).unwrap();
            let status = view.lean.status.clone().unwrap();
            status
                .conditions
                .iter()
                .find(|c| c.r#type == "Accepted")
                .map(|c| c.last_transition_time)
        };
        assert_eq!(transition(&index), Some(1_000));
        // The stale object delivered again, then the write's own event
        // (no memory of the write): still the written time.
        index.set_live_hub(key("web"), Some(stale));
        index.aggregate_dirty();
        assert_eq!(transition(&index), Some(1_000));
        answer.written.clear();
        index.set_live_hub(key("web"), Some(answer));
        index.aggregate_dirty();
        assert_eq!(transition(&index), Some(1_000));
        // Deleted and created again: a new object, a new transition.
        index.set_live_hub(key("web"), Some(object("u2", vec![])));
        index.aggregate_dirty();
        assert!(transition(&index).is_some_and(|t| t > 1_000));
    }

    /// A propagation stamp lands with its delta's changes and is taken by
    /// the pass that reads them: it goes with the new view they make (for
    /// that view's write), and is dropped when they change nothing (no
    /// write carries them) or when the management cluster holds no such
    /// hub Gateway. The hub_propagation test once slept around the race
    /// this replaced: a stamp noted beside the changes, not with them.
    #[test]
    fn a_stamp_travels_with_its_changes_to_the_view() {
        use super::reports::Change;
        let (index, session) = east_reporting_web();
        let stamp = |at| Stamp::of(at, String::new());
        let upsert = |name: &str, types: &[&str]| vec![Change::Upsert(key(name), reported(types))];
        let observed = |name: &str| {
            index
                .view(&key(name))
                .and_then(|v| v.provenance().earliest_observed)
        };
        // A Gateway the management cluster lacks: no write, no stamp kept.
        index
            .apply_stamped(&session, upsert("other", &["Accepted"]), stamp(1_000))
            .unwrap();
        index.aggregate_dirty();
        assert!(index.view(&key("other")).is_some());
        assert_eq!(observed("other"), None);
        index.set_live_hub(
            key("web"),
            Some(LiveHub {
                generation: 1,
                ..LiveHub::default()
            }),
        );
        index.aggregate_dirty();
        // Unknown times: none.
        assert_eq!(stamp(0), None);
        // Landed with a change, not yet read: no view has it.
        let at = stamp(2_000);
        assert!(at.is_some());
        index
            .apply_stamped(&session, upsert("web", &["Accepted", "Programmed"]), at)
            .unwrap();
        assert_eq!(observed("web"), None);
        // Read into a new view: it carries it.
        assert!(index.aggregate_dirty());
        assert_eq!(observed("web"), Some(2_000));
        let first = index.view(&key("web")).unwrap().revision();
        // A change that changes nothing: dropped by the pass that read it.
        index
            .apply_stamped(
                &session,
                upsert("web", &["Accepted", "Programmed"]),
                stamp(3_000),
            )
            .unwrap();
        assert!(!index.aggregate_dirty());
        index
            .apply_stamped(&session, upsert("web", &["Accepted"]), None)
            .unwrap();
        assert!(index.aggregate_dirty());
        let view = index.view(&key("web")).unwrap();
        assert_eq!(view.provenance_since(Some(first)).earliest_observed, None);
        // Two deltas read by one pass: the earliest.
        for (types, at) in [(&["Accepted"][..], 5_000), (&["Programmed"][..], 4_000)] {
            index
                .apply_stamped(&session, upsert("web", types), stamp(at))
                .unwrap();
        }
        index.aggregate_dirty();
        assert_eq!(observed("web"), Some(4_000));
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
            gwhub_hub_rules::aggregate::OWN_CONDITION.to_owned(),
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

    /// A pass that read some Gateway tells its readers once it published,
    /// also when nothing changed (a view now standing for a newer live hub
    /// Gateway); a pass with nothing pending does not.
    #[test]
    fn passes_are_counted_for_readers_that_wait_for_one() {
        let (index, _session) = east_reporting_web();
        let mut passes = index.subscribe_passes();
        assert!(index.aggregate_dirty());
        assert!(passes.has_changed().unwrap());
        passes.borrow_and_update();
        assert!(!index.aggregate_dirty());
        assert!(!passes.has_changed().unwrap());
        index.set_live_hub(key("web"), Some(LiveHub::default()));
        index.aggregate_dirty();
        passes.borrow_and_update();
        let live = index.live_hub(&key("web")).unwrap();
        let mut newer = LiveHub::clone(&live);
        newer.owns_listeners = !newer.owns_listeners;
        assert!(index.set_live_hub_written(key("web"), &live, newer));
        assert!(!index.aggregate_dirty());
        assert!(passes.has_changed().unwrap());
        let newer = index.live_hub(&key("web")).unwrap();
        assert!(index.view(&key("web")).unwrap().aggregated_from(&newer));
    }

    /// The history bound comes from the config the index is built with:
    /// 0 keeps none, otherwise the newest transitions are kept.
    #[test]
    fn the_history_bound_is_the_configs() {
        let with = |history_capacity| {
            let index = Index::new(IndexConfig {
                history_capacity,
                ..IndexConfig::new(Options::default(), Duration::from_secs(60))
            });
            let session = index.connect("east", "test").unwrap();
            for types in [&["Accepted"][..], &["Accepted", "Programmed"]] {
                index
                    .replace_snapshot(&session, BTreeMap::from([(key("web"), reported(types))]))
                    .unwrap();
                index.aggregate_dirty();
            }
            index
        };
        let none = with(0);
        assert_eq!(none.history_capacity(), 0);
        assert!(none.history(&key("web"), 0).is_none());
        let kept = with(8);
        assert_eq!(kept.history_capacity(), 8);
        let all = kept.history(&key("web"), 0).unwrap();
        assert!(!all.is_empty());
        assert_eq!(kept.history(&key("web"), 1).unwrap().len(), 1);
    }
}
