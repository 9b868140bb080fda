//! The fleet inventory in the index (`gwhub serve --inventory-namespace`):
//! the ClusterProfiles the Kubernetes side watches, who may stream, a
//! removed cluster's leave (its stream ended, its reports forgotten and
//! deleted, it drops out of every hub Gateway), each annotated hub
//! Gateway's expected clusters, and the fleet as the Dashboard lists it.
//! The rules are `gwhub_hub_rules::inventory`; this is their state.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use parking_lot::RwLock;

use super::Index;
use super::lock_order::{self, Before, Held, Proof};
use super::reports::ClusterSummary;
use super::sessions::Session;
use gwhub_hub_rules::aggregate::{GatewayKey, LiveHub};
use gwhub_hub_rules::inventory::{
    Admitted, DECISION_KEY_LABEL, EXPECTED_CLUSTERS_ANNOTATION, Inventory, Mode,
    PLACEMENT_ANNOTATION, Placement, Refusal, Selector, placed_clusters,
};

use gwhub_hub_rules::aggregate::{Expectation, ExpectedCluster};

/// The inventory part of the index: the ClusterProfiles and the
/// PlacementDecisions, each under its own lock, taken alone or inside the
/// sessions' clusters lock, never around another lock.
pub(super) struct FleetInventory {
    /// The fleet inventory (`--inventory-namespace`), if any.
    current: RwLock<Option<Inventory>>,
    /// The PlacementDecisions by (namespace, name), once watched; `None`
    /// while they are not (no CRD).
    placements: RwLock<Option<BTreeMap<(String, String), Placement>>>,
}

impl FleetInventory {
    pub(super) fn new(inventory: Option<(String, Mode)>) -> Self {
        FleetInventory {
            current: RwLock::new(
                inventory.map(|(namespace, mode)| Inventory::new(&namespace, mode)),
            ),
            placements: RwLock::new(None),
        }
    }
}

/// Labels of a ClusterProfile.
pub type Labels = BTreeMap<String, String>;

/// A cluster as the Dashboard lists it: what the hub knows of it, and where
/// it stands with the inventory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedCluster {
    pub summary: ClusterSummary,
    /// It has a ClusterProfile in the inventory.
    pub in_inventory: bool,
    /// In the inventory, never heard of by this hub.
    pub never_connected: bool,
    /// Known to the hub but not in the inventory (`--inventory-mode=observe`).
    pub outside_inventory: bool,
}

impl Index {
    /// The inventory's namespace, if the hub has one.
    pub fn inventory_namespace(&self) -> Option<String> {
        self.inner
            .inventory
            .current
            .read()
            .as_ref()
            .map(|i| i.namespace.clone())
    }

    /// Whether the inventory's first list is in (true without one).
    pub fn inventory_synced(&self) -> bool {
        self.inner
            .inventory
            .current
            .read()
            .as_ref()
            .is_none_or(|i| i.synced)
    }

    /// Whether an agent for `cluster` may stream: `Ok(true)` when it is
    /// outside the inventory and admitted only to be flagged.
    pub(crate) fn admit(&self, cluster: &str) -> Result<bool, Refusal> {
        match self.inner.inventory.current.read().as_ref() {
            None => Ok(false),
            Some(inv) => inv.admit(cluster).map(|a| a == Admitted::Outside),
        }
    }

    /// Whether a stored report of `cluster` may be imported: not one of a
    /// cluster an enforcing, listed inventory does not hold.
    pub(crate) fn may_import(&self, cluster: &str) -> bool {
        match self.inner.inventory.current.read().as_ref() {
            Some(inv) if inv.synced && inv.mode == Mode::Enforce => inv.contains(cluster),
            _ => true,
        }
    }

    /// The inventory's complete list: every ClusterProfile's name and
    /// labels. Clusters that left meanwhile (and, when enforcing, every
    /// known cluster outside it: a restart after a leave) are removed.
    pub fn replace_inventory(&self, all: BTreeMap<String, Labels>) {
        let mut held = Held::nothing();
        let leaving: Vec<String> = {
            let mut guard = self.inner.inventory.current.write();
            let Some(inv) = guard.as_mut() else { return };
            let mut leaving: BTreeSet<String> = match inv.synced {
                true => inv
                    .clusters
                    .keys()
                    .filter(|n| !all.contains_key(*n))
                    .cloned()
                    .collect(),
                false => BTreeSet::new(),
            };
            let enforce = inv.mode == Mode::Enforce;
            inv.clusters = all;
            inv.synced = true;
            let inv = inv.clone();
            drop(guard);
            if enforce {
                let clusters = self.inner.sessions.lock(held.proof());
                leaving.extend(clusters.names().filter(|n| !inv.contains(n)).cloned());
            }
            leaving.into_iter().collect()
        };
        for cluster in leaving {
            self.remove_cluster(&cluster);
        }
        self.expectations_changed();
    }

    /// A ClusterProfile created or changed.
    pub fn upsert_inventory(&self, cluster: &str, labels: Labels) {
        {
            let mut guard = self.inner.inventory.current.write();
            let Some(inv) = guard.as_mut() else { return };
            if inv.clusters.get(cluster) == Some(&labels) {
                return;
            }
            inv.clusters.insert(cluster.to_owned(), labels);
        }
        self.expectations_changed();
    }

    /// A ClusterProfile deleted: the cluster leaves the fleet.
    pub fn remove_from_inventory(&self, cluster: &str) {
        {
            let mut guard = self.inner.inventory.current.write();
            let Some(inv) = guard.as_mut() else { return };
            inv.clusters.remove(cluster);
        }
        self.remove_cluster(cluster);
        self.expectations_changed();
    }

    /// Forgets `cluster` whether it streams here or not: its stream (if
    /// any) ends (PERMISSION_DENIED, see [`Session::removed`]), it drops
    /// out of every hub Gateway, and the store deletes its reports (the
    /// same path as a pruned cluster's). Returns whether it was known.
    pub fn remove_cluster(&self, cluster: &str) -> bool {
        let mut held = Held::nothing();
        let namespace = self.inventory_namespace().unwrap_or_default();
        let affected = {
            let mut clusters = self.inner.sessions.lock(held.proof());
            let Some(live) = clusters.remove(cluster) else {
                return false;
            };
            live.set_removed_from(namespace);
            let mut fleet = self.inner.reports.write(clusters.proof());
            // A write of its stream in flight finds itself superseded.
            live.end_streams(&mut fleet);
            fleet.deregister(cluster)
        };
        tracing::info!(cluster, "cluster removed: it left the fleet inventory");
        self.mark_dirty_by(cluster, affected);
        self.inner.reports.bump();
        self.inner.sessions.announce_pruned(cluster);
        self.expectations_changed();
        true
    }

    /// Re-aggregates every hub Gateway that expects clusters (the
    /// inventory, the placements or what the hub knows of a cluster
    /// changed).
    pub(super) fn expectations_changed(&self) {
        if self.inner.inventory.current.read().is_none() {
            return;
        }
        let keys = self.inner.aggregator.expecting_keys();
        self.mark_dirty_hub(keys);
    }

    /// Every PlacementDecision, after a (re-)list.
    pub fn replace_placements(&self, all: Vec<Placement>) {
        *self.inner.inventory.placements.write() = Some(
            all.into_iter()
                .map(|p| ((p.namespace.clone(), p.name.clone()), p))
                .collect(),
        );
        self.expectations_changed();
    }

    /// A PlacementDecision created, changed (`Some`) or deleted.
    pub fn set_placement(&self, namespace: &str, name: &str, placement: Option<Placement>) {
        {
            let mut guard = self.inner.inventory.placements.write();
            let all = guard.get_or_insert_with(BTreeMap::new);
            let key = (namespace.to_owned(), name.to_owned());
            match placement {
                Some(p) if all.get(&key) == Some(&p) => return,
                Some(p) => {
                    all.insert(key, p);
                }
                None => {
                    if all.remove(&key).is_none() {
                        return;
                    }
                }
            }
        }
        self.expectations_changed();
    }

    /// Each hub Gateway's expectation (`gwhub.io/expected-clusters` or
    /// `gwhub.io/placement`), for an aggregation pass: `None` where it has
    /// none or the hub has no inventory. The expected names are selected
    /// under the inventory's (then the placements') read lock, not from a
    /// copy of it, and whether the hub knows each is read under the
    /// sessions' lock after: a pass costs the expected clusters, not a
    /// copy of the inventory and of every known cluster.
    pub(super) fn expectations<L: Before<lock_order::Clusters>>(
        &self,
        held: Proof<'_, L>,
        keys: &[&GatewayKey],
        lives: &[Option<Arc<LiveHub>>],
    ) -> Vec<Option<Expectation>> {
        let none = || vec![None; lives.len()];
        let annotated = |l: &Option<Arc<LiveHub>>| {
            l.as_ref()
                .is_some_and(|l| l.expected_clusters.is_some() || l.placement.is_some())
        };
        if !lives.iter().any(annotated) {
            return none();
        }
        // Per Gateway: the expected names, or the problem reading them.
        let mut read: Vec<Option<Result<Vec<String>, String>>> = {
            let inv = self.inner.inventory.current.read();
            let Some(inv) = inv.as_ref() else {
                return none();
            };
            lives
                .iter()
                .map(|l| {
                    let l = l.as_ref()?;
                    match (&l.expected_clusters, &l.placement) {
                        (None, None) => None,
                        (Some(_), Some(_)) => Some(Err(format!(
                            "annotations {EXPECTED_CLUSTERS_ANNOTATION} and {PLACEMENT_ANNOTATION} are both set; set one"
                        ))),
                        (Some(selector), None) => Some(match Selector::parse(selector) {
                            Ok(s) => Ok(inv.select(&s).into_iter().map(str::to_owned).collect()),
                            Err(e) => Err(format!(
                                "annotation {EXPECTED_CLUSTERS_ANNOTATION}: {e}"
                            )),
                        }),
                        // Read from the placements below.
                        (None, Some(_)) => Some(Ok(Vec::new())),
                    }
                })
                .collect()
        };
        if lives.iter().any(|l| {
            l.as_ref()
                .is_some_and(|l| l.expected_clusters.is_none() && l.placement.is_some())
        }) {
            let placements = self.inner.inventory.placements.read();
            for ((key, l), out) in keys.iter().zip(lives).zip(read.iter_mut()) {
                let Some(reference) = l
                    .as_ref()
                    .filter(|l| l.expected_clusters.is_none())
                    .and_then(|l| l.placement.as_ref())
                else {
                    continue;
                };
                let found = placements
                    .as_ref()
                    .and_then(|all| placed_clusters(all.values(), &key.namespace, reference));
                *out = Some(match (found, placements.as_ref()) {
                    (Some(clusters), _) => Ok(clusters.into_iter().collect()),
                    (None, None) => Err(format!(
                        "annotation {PLACEMENT_ANNOTATION}: the PlacementDecision CRD (multicluster.x-k8s.io) is not installed"
                    )),
                    (None, Some(_)) => Err(format!(
                        "annotation {PLACEMENT_ANNOTATION}: no PlacementDecision named {reference:?} or labelled {DECISION_KEY_LABEL}={reference:?} in namespace {:?}",
                        key.namespace
                    )),
                });
            }
        }
        let known = self.inner.sessions.lock(held);
        read.into_iter()
            .map(|r| {
                Some(match r? {
                    Ok(names) => Expectation::Clusters(
                        names
                            .into_iter()
                            .map(|name| ExpectedCluster {
                                known: known.contains(&name),
                                name,
                            })
                            .collect(),
                    ),
                    Err(why) => Expectation::Invalid(why),
                })
            })
            .collect()
    }

    /// Every cluster the hub knows and every cluster of the inventory, in
    /// name order, each with where it stands with the inventory.
    pub fn listed_clusters(&self) -> Vec<ListedCluster> {
        let known = self.clusters();
        let inv = self.inner.inventory.current.read().clone();
        let Some(inv) = inv else {
            return known
                .into_iter()
                .map(|summary| ListedCluster {
                    summary,
                    in_inventory: false,
                    never_connected: false,
                    outside_inventory: false,
                })
                .collect();
        };
        let mut out: BTreeMap<String, ListedCluster> = known
            .into_iter()
            .map(|summary| {
                let member = inv.contains(&summary.name);
                (
                    summary.name.clone(),
                    ListedCluster {
                        in_inventory: member,
                        never_connected: false,
                        outside_inventory: inv.synced && !member,
                        summary,
                    },
                )
            })
            .collect();
        for name in inv.clusters.keys() {
            out.entry(name.clone()).or_insert_with(|| ListedCluster {
                summary: ClusterSummary {
                    name: name.clone(),
                    connected: false,
                    stale: false,
                    last_report_millis: 0,
                    last_seen_millis: 0,
                    gateway_count: 0,
                    agent_version: String::new(),
                    report_bytes: 0,
                    report_rev: 0,
                    session: 0,
                },
                in_inventory: true,
                never_connected: true,
                outside_inventory: false,
            });
        }
        out.into_values().collect()
    }
}

/// What a removed cluster's stream is told.
pub fn removed_message(session: &Session) -> String {
    let namespace = session.live().removed_from().unwrap_or_default();
    Refusal::Removed {
        cluster: session.cluster().to_owned(),
        namespace,
    }
    .to_string()
}

impl Session {
    /// Whether the session's cluster left the inventory (its stream must
    /// end with PERMISSION_DENIED).
    pub fn removed(&self) -> bool {
        self.live().removed_from().is_some()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use gateway_api::apis::standard::gateways::GatewayStatus;
    use jiff::Timestamp;

    use super::*;
    use crate::{IndexConfig, now_millis};
    use gwhub_hub_rules::aggregate::Options;

    fn key(n: &str) -> GatewayKey {
        GatewayKey::new("ns", n)
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn ready() -> GatewayStatus {
        GatewayStatus {
            conditions: Some(vec![gwhub_model::conditions::new(
                "LoadBalancerReady",
                "True",
                "Ready",
                "",
                Some(1),
                Timestamp::UNIX_EPOCH,
            )]),
            ..GatewayStatus::default()
        }
    }

    fn fleet(mode: Mode) -> Index {
        Index::new(IndexConfig {
            inventory: Some(("fleet".to_owned(), mode)),
            ..IndexConfig::new(Options::default(), Duration::from_secs(60))
        })
    }

    fn profiles(names: &[&str]) -> BTreeMap<String, Labels> {
        names
            .iter()
            .map(|n| ((*n).to_owned(), labels(&[("name", n)])))
            .collect()
    }

    #[test]
    fn admission_waits_for_the_list_then_enforces_or_flags() {
        let index = fleet(Mode::Enforce);
        assert!(matches!(
            index.admit("east"),
            Err(Refusal::NotLoaded { .. })
        ));
        index.replace_inventory(profiles(&["east"]));
        assert_eq!(index.admit("east"), Ok(false));
        assert!(matches!(index.admit("rogue"), Err(Refusal::Outside { .. })));

        let observe = fleet(Mode::Observe);
        observe.replace_inventory(profiles(&["east"]));
        assert_eq!(observe.admit("rogue"), Ok(true));

        let none = Index::new(IndexConfig::new(
            Options::default(),
            Duration::from_secs(60),
        ));
        assert_eq!(none.admit("anyone"), Ok(false));
        assert!(none.inventory_synced());
    }

    /// Every inventory cluster is listed (a silent one as never
    /// connected), a known cluster outside it flagged.
    #[test]
    fn the_listing_holds_the_whole_inventory() {
        let index = fleet(Mode::Observe);
        index.replace_inventory(profiles(&["east", "north"]));
        let _east = index.connect("east", "t").unwrap();
        let _rogue = index.connect("rogue", "t").unwrap();
        let listed: Vec<(String, bool, bool, bool, bool)> = index
            .listed_clusters()
            .into_iter()
            .map(|c| {
                (
                    c.summary.name,
                    c.summary.connected,
                    c.in_inventory,
                    c.never_connected,
                    c.outside_inventory,
                )
            })
            .collect();
        assert_eq!(
            listed,
            [
                ("east".into(), true, true, false, false),
                ("north".into(), false, true, true, false),
                ("rogue".into(), true, false, false, true),
            ]
        );
    }

    /// Leaving ends the stream (its writes refused), forgets the cluster's
    /// reports (announced for the store to delete) and re-aggregates.
    #[tokio::test]
    async fn a_removed_cluster_leaves_everything() {
        let index = fleet(Mode::Enforce);
        index.replace_inventory(profiles(&["east", "west"]));
        let mut pruned = index.subscribe_pruned();
        let west = index.connect("west", "t").unwrap();
        let east = index.connect("east", "t").unwrap();
        for s in [&east, &west] {
            index
                .replace_snapshot(s, BTreeMap::from([(key("web"), ready())]))
                .unwrap();
        }
        index.aggregate_dirty();
        assert_eq!(
            index.view(&key("web")).unwrap().clusters[..],
            ["east", "west"]
        );

        index.remove_from_inventory("west");
        assert!(west.removed() && west.is_superseded());
        tokio::time::timeout(Duration::from_secs(1), west.superseded())
            .await
            .unwrap();
        assert_eq!(pruned.recv().await.unwrap(), "west");
        assert!(index.replace_snapshot(&west, BTreeMap::new()).is_err());
        assert!(!index.has_cluster("west"));
        index.aggregate_dirty();
        assert_eq!(index.view(&key("web")).unwrap().clusters[..], ["east"]);
        assert!(matches!(index.admit("west"), Err(Refusal::Outside { .. })));
        // Its stored report is not imported again, but deleted.
        assert!(!index.may_import("west"));
        let now = now_millis();
        assert!(!index.import_cluster("west", BTreeMap::new(), now, now));
        assert_eq!(pruned.recv().await.unwrap(), "west");
        assert!(!index.has_cluster("west"));
    }

    /// An enforcing inventory's first list removes known clusters outside
    /// it (their stored reports, after a leave while the hub was down).
    #[test]
    fn the_first_list_removes_clusters_outside_an_enforcing_inventory() {
        let index = fleet(Mode::Enforce);
        let now = now_millis();
        let one = BTreeMap::from([(key("web"), ready())]);
        assert!(index.import_cluster("west", one.clone(), now, now));
        assert!(index.import_cluster("east", one, now, now));
        index.replace_inventory(profiles(&["east"]));
        let names: Vec<String> = index.clusters().into_iter().map(|c| c.name).collect();
        assert_eq!(names, ["east"]);
    }

    /// A hub Gateway annotated `gwhub.io/expected-clusters` aggregates its
    /// expected clusters: the silent ones are named, and the names follow
    /// the fleet (never reported, then connected without the Gateway).
    #[test]
    fn annotated_hub_gateways_expect_inventory_clusters() {
        let index = fleet(Mode::Enforce);
        let mut all = profiles(&["east", "north", "west"]);
        all.insert("south".into(), labels(&[("tier", "edge")]));
        index.replace_inventory(all);
        let east = index.connect("east", "t").unwrap();
        index
            .replace_snapshot(&east, BTreeMap::from([(key("web"), ready())]))
            .unwrap();
        let annotated = |sel: &str| LiveHub {
            generation: 1,
            expected_clusters: Some(sel.to_owned()),
            ..LiveHub::default()
        };
        index.set_live_hub(key("web"), Some(annotated("tier!=edge")));
        index.aggregate_dirty();
        let message = |type_: &str| {
            let view = index.view(&key("web")).unwrap();
            let c = view
                .aggregation
                .status
                .conditions
                .clone()
                .unwrap()
                .into_iter()
                .find(|c| c.type_ == type_)
                .unwrap();
            (c.status, c.message)
        };
        assert_eq!(
            message("LoadBalancerReady"),
            (
                "False".into(),
                "north never reported; west never reported".into()
            )
        );
        assert_eq!(
            message(gwhub_hub_rules::aggregate::OWN_CONDITION).1,
            "Aggregated the status of 1 of 3 expected clusters; north never reported; west never reported"
        );
        let view = index.view(&key("web")).unwrap();
        assert!(view.not_ready);
        let missing: Vec<(&str, bool)> = view
            .lean
            .missing_clusters
            .iter()
            .map(|m| (m.cluster.as_str(), m.never_reported))
            .collect();
        assert_eq!(missing, [("north", true), ("west", true)]);
        assert!(gwhub_hub_rules::listing::Filter::new("", "north", false).matches(view.facts()));
        assert!(view.lean.unexpected_clusters.is_empty());
        // West connects (without the Gateway): re-aggregated.
        let west = index.connect("west", "t").unwrap();
        index.replace_snapshot(&west, BTreeMap::new()).unwrap();
        index.aggregate_dirty();
        assert_eq!(
            message("LoadBalancerReady").1,
            "north never reported; west does not report this Gateway"
        );
        let view = index.view(&key("web")).unwrap();
        assert!(!view.lean.missing_clusters[1].never_reported);
        // A reporting cluster not expected is flagged.
        index.set_live_hub(key("web"), Some(annotated("name=west")));
        index.aggregate_dirty();
        let view = index.view(&key("web")).unwrap();
        assert_eq!(view.lean.unexpected_clusters, ["east"]);
        index.set_live_hub(key("web"), Some(annotated("tier!=edge")));
        index.aggregate_dirty();
        // North leaves the inventory: no longer expected.
        index.remove_from_inventory("north");
        index.aggregate_dirty();
        assert_eq!(
            message("LoadBalancerReady").1,
            "west does not report this Gateway"
        );
        // A bad selector is named in the hub's own condition.
        index.set_live_hub(key("web"), Some(annotated("tier in edge")));
        index.aggregate_dirty();
        let (status, own) = message(gwhub_hub_rules::aggregate::OWN_CONDITION);
        assert_eq!(status, "False");
        assert!(
            own.starts_with(
                "annotation gwhub.io/expected-clusters: label selector \"tier in edge\""
            ),
            "{own}"
        );
        assert_eq!(message("LoadBalancerReady").0, "True");
    }

    /// `gwhub.io/placement` expects the clusters of the named decision (all
    /// slices of a decision key), following it as it changes; one that does
    /// not exist, or both annotations at once, is named.
    #[test]
    fn placements_name_the_expected_clusters() {
        let index = fleet(Mode::Enforce);
        index.replace_inventory(profiles(&["east", "north", "west"]));
        let east = index.connect("east", "t").unwrap();
        index
            .replace_snapshot(&east, BTreeMap::from([(key("web"), ready())]))
            .unwrap();
        let placed = |name: &str, key: Option<&str>, clusters: &[&str]| Placement {
            namespace: "ns".into(),
            name: name.into(),
            decision_key: key.map(str::to_owned),
            clusters: clusters.iter().map(|c| (*c).to_owned()).collect(),
        };
        index.replace_placements(vec![
            placed("web-0", Some("web"), &["east"]),
            placed("web-1", Some("web"), &["north"]),
        ]);
        let live = |placement: Option<&str>, selector: Option<&str>| LiveHub {
            generation: 1,
            placement: placement.map(str::to_owned),
            expected_clusters: selector.map(str::to_owned),
            ..LiveHub::default()
        };
        let own = |index: &Index| {
            let view = index.view(&key("web")).unwrap();
            let c = view.aggregation.status.conditions.clone().unwrap();
            c.into_iter()
                .find(|c| c.type_ == gwhub_hub_rules::aggregate::OWN_CONDITION)
                .map(|c| (c.status, c.message))
                .unwrap()
        };
        index.set_live_hub(key("web"), Some(live(Some("web"), None)));
        index.aggregate_dirty();
        assert_eq!(
            own(&index).1,
            "Aggregated the status of 1 of 2 expected clusters; north never reported"
        );
        // The scheduler moves north's slice to west.
        index.set_placement("ns", "web-1", Some(placed("web-1", Some("web"), &["west"])));
        index.aggregate_dirty();
        assert_eq!(
            own(&index).1,
            "Aggregated the status of 1 of 2 expected clusters; west never reported"
        );
        index.set_placement("ns", "web-1", None);
        index.aggregate_dirty();
        assert_eq!(
            own(&index).1,
            "Aggregated the status of 1 of 1 expected cluster"
        );
        index.set_live_hub(key("web"), Some(live(Some("gone"), None)));
        index.aggregate_dirty();
        let (status, message) = own(&index);
        assert_eq!(status, "False");
        assert!(
            message.contains("no PlacementDecision named \"gone\""),
            "{message}"
        );
        index.set_live_hub(key("web"), Some(live(Some("web"), Some(""))));
        index.aggregate_dirty();
        assert!(own(&index).1.contains("both set"), "{:?}", own(&index));
    }
}
