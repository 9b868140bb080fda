//! Incremental aggregation of one hub Gateway: what the summary needs is
//! kept per Gateway and updated from one cluster's change, so a change costs
//! the hub that cluster's part and the output, not a pass over the fleet.
//!
//! [`super::aggregate_expected`] stays the reference: [`Incremental`] gives
//! exactly its output for the same reports (the property test
//! `incremental_matches_the_engine` drives both with random changes).
//!
//! What is kept, per Gateway:
//! - per cluster (in name order), its report and how many of its addresses
//!   and listeners are valid, its condition types, and the omissions that
//!   depend on its report alone (invalid condition types, addresses and
//!   listener names), already grouped as the engine groups them;
//! - per valid condition type, how many clusters report it and the clusters
//!   where it is not True (stale, not reported, or not `True`), in name
//!   order, with their fragment of the message: a summary joins only the
//!   fragments its message can show, formatted when their cluster changed;
//! - per round of the round-robin selection of addresses (16) and listeners
//!   (64), the clusters with more valid entries than the round, so the kept
//!   entries are found without looking at the other clusters.
//!
//! - per cluster leaving entries out past a limit, those omissions, named
//!   (kept up to date for the changed cluster and the few whose share of
//!   the round-robin selection the change moved), and a version that
//!   changes whenever an omission not depending on the hub Gateway does.
//!
//! Costs: a change costs its cluster's entries and condition types (times
//! the log of the fleet), and the clusters whose kept share it moved (at
//! most the limits, 16 and 64). A condition type no cluster reported
//! before costs one pass (every other cluster does not report it).
//! [`Incremental::aggregate_status`] and [`Incremental::aggregate_parts`]
//! cost the output: the kept addresses and listeners, and the fragments
//! the messages show. [`Incremental::omissions`] costs the omissions it
//! lists (no recomputation); a reader that kept them can skip even that
//! while [`Incremental::omissions_version`] and the hub Gateway's own
//! omissions stay the same.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::compact::ReportedStatus;
use super::limits::{MAX_ADDRESSES, MAX_LISTENERS, is_condition_type};
use super::omissions::{Item, Omission, Omissions, Rule};
use super::{Aggregation, ClusterReport, Freshness, Options, addresses, conditions, listeners};

mod output;

/// One hub Gateway's aggregation, kept up to date cluster by cluster.
#[derive(Clone, Debug)]
pub struct Incremental {
    options: Options,
    clusters: BTreeMap<String, Part>,
    /// Every valid Gateway-level condition type some cluster reports.
    types: BTreeMap<String, TypeState>,
    /// Invalid condition types some cluster reports (by how many), for
    /// [`Incremental::reports_type`].
    invalid_types: BTreeMap<String, usize>,
    addresses: Rounds,
    listeners: Rounds,
    /// Clusters with omissions of their own, per section of the output.
    condition_omitters: BTreeSet<String>,
    address_omitters: BTreeSet<String>,
    listener_omitters: BTreeSet<String>,
    /// How many omission groups the clusters' own omissions make.
    groups: usize,
    /// Per cluster leaving addresses out past the limit, that omission.
    address_limit: BTreeMap<String, Omission>,
    /// Per cluster with valid listeners, the omissions building its kept
    /// listeners made, then its listeners left out past the limit (if any
    /// of either).
    listener_tail: BTreeMap<String, Vec<Omission>>,
    /// See [`Incremental::omissions_version`].
    version: u64,
}

/// Versions of the omissions, process-wide, so two aggregates (or one
/// before and after a change) never share a version by accident.
static VERSIONS: AtomicU64 = AtomicU64::new(1);

fn next_version() -> u64 {
    VERSIONS.fetch_add(1, Ordering::Relaxed)
}

/// Each cluster's share of a round-robin selection, owned (at most the
/// limit's entries): compared before and after a change.
type Kept = BTreeMap<String, usize>;

/// What one cluster contributes, from its report alone.
#[derive(Clone, Debug)]
struct Part {
    status: Arc<ReportedStatus>,
    freshness: Freshness,
    /// Valid condition types it reports.
    types: BTreeSet<String>,
    invalid_types: BTreeSet<String>,
    condition_omissions: Vec<Omission>,
    valid_addresses: usize,
    address_omissions: Vec<Omission>,
    valid_listeners: usize,
    listener_omissions: Vec<Omission>,
}

impl Part {
    fn new(
        cluster: &str,
        status: Arc<ReportedStatus>,
        freshness: Freshness,
        options: &Options,
    ) -> Self {
        let mut o = Omissions::default();
        let types = super::condition_types(cluster, &status, &mut o)
            .into_iter()
            .map(str::to_owned)
            .collect();
        let condition_omissions = o.0;
        let invalid_types = status
            .conditions()
            .iter()
            .filter(|c| !is_condition_type(c.type_()))
            .map(|c| c.type_().to_owned())
            .collect();
        let mut o = Omissions::default();
        let valid_addresses = addresses::valid(cluster, &status, options, &mut o).len();
        let address_omissions = o.0;
        let mut o = Omissions::default();
        let valid_listeners = listeners::valid(cluster, &status, &mut o).len();
        let listener_omissions = o.0;
        Part {
            status,
            freshness,
            types,
            invalid_types,
            condition_omissions,
            valid_addresses,
            address_omissions,
            valid_listeners,
            listener_omissions,
        }
    }

    fn report<'a>(&'a self, cluster: &'a str) -> ClusterReport<'a> {
        ClusterReport {
            cluster,
            status: &self.status,
            freshness: self.freshness,
        }
    }

    /// Whether `other` leaves out what this part does on its own.
    fn same_own_omissions(&self, other: &Part) -> bool {
        self.condition_omissions == other.condition_omissions
            && self.address_omissions == other.address_omissions
            && self.listener_omissions == other.listener_omissions
    }

    fn groups(&self) -> usize {
        self.condition_omissions.len()
            + self.address_omissions.len()
            + self.listener_omissions.len()
    }
}

#[derive(Clone, Debug, Default)]
struct TypeState {
    /// Clusters reporting the type.
    reporters: usize,
    /// Clusters where it is not True, with their fragment (see
    /// [`conditions::fragment`]): formatted once per change, not per output.
    not_true: BTreeMap<String, String>,
}

/// The round-robin selection of a list capped at `limit`: round `r` holds
/// the clusters with more than `r` valid entries.
#[derive(Clone, Debug)]
struct Rounds {
    limit: usize,
    rounds: Vec<BTreeSet<String>>,
    /// Valid entries over all clusters.
    total: usize,
}

impl Rounds {
    fn new(limit: usize) -> Self {
        Rounds {
            limit,
            rounds: Vec::new(),
            total: 0,
        }
    }

    fn insert(&mut self, cluster: &str, len: usize) {
        let n = len.min(self.limit);
        if self.rounds.len() < n {
            self.rounds.resize_with(n, BTreeSet::new);
        }
        for round in &mut self.rounds[..n] {
            round.insert(cluster.to_owned());
        }
        self.total += len;
    }

    fn remove(&mut self, cluster: &str, len: usize) {
        let n = len.min(self.limit).min(self.rounds.len());
        for round in &mut self.rounds[..n] {
            round.remove(cluster);
        }
        while self.rounds.last().is_some_and(BTreeSet::is_empty) {
            self.rounds.pop();
        }
        self.total = self.total.saturating_sub(len);
    }

    /// How many leading entries each cluster keeps (only those keeping
    /// some), in name order: every cluster's first before any second, as
    /// [`super::limits::round_robin`] chooses.
    fn kept(&self) -> BTreeMap<&str, usize> {
        let mut kept = BTreeMap::new();
        let mut left = self.limit;
        for round in &self.rounds {
            for cluster in round {
                if left == 0 {
                    return kept;
                }
                *kept.entry(cluster.as_str()).or_insert(0) += 1;
                left -= 1;
            }
        }
        kept
    }
}

/// [`Incremental::aggregate_parts`]: the status, and the omissions that
/// depend on the hub Gateway.
#[derive(Clone, Debug)]
pub struct Parts {
    /// The status; its `omissions` are empty.
    pub aggregation: Aggregation,
    /// The omissions the hub Gateway makes (its other writers' conditions,
    /// the types they own), in order: with
    /// [`Incremental::omissions_version`] they determine every omission.
    pub hub_omissions: Vec<Omission>,
}

impl Incremental {
    pub fn new(options: Options) -> Self {
        Incremental {
            options,
            clusters: BTreeMap::new(),
            types: BTreeMap::new(),
            invalid_types: BTreeMap::new(),
            addresses: Rounds::new(MAX_ADDRESSES),
            listeners: Rounds::new(MAX_LISTENERS),
            condition_omitters: BTreeSet::new(),
            address_omitters: BTreeSet::new(),
            listener_omitters: BTreeSet::new(),
            groups: 0,
            address_limit: BTreeMap::new(),
            listener_tail: BTreeMap::new(),
            version: next_version(),
        }
    }

    /// Changes whenever an omission that does not depend on the hub
    /// Gateway changes (never back to an earlier value): equal versions of
    /// one aggregate, with equal [`Parts::hub_omissions`], mean equal
    /// omissions, so a reader keeping them need not list them again.
    pub fn omissions_version(&self) -> u64 {
        self.version
    }

    /// Number of clusters reporting the Gateway.
    pub fn len(&self) -> usize {
        self.clusters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty()
    }

    /// Whether some cluster reports a condition of type `type_` (valid or
    /// not), as `HubGateway::from_existing_with` asks.
    pub fn reports_type(&self, type_: &str) -> bool {
        self.types.contains_key(type_) || self.invalid_types.contains_key(type_)
    }

    /// `cluster` reports the Gateway with `status` (a cluster added or its
    /// report changed), `freshness` as the hub judges it.
    pub fn set(
        &mut self,
        cluster: &str,
        status: impl Into<Arc<ReportedStatus>>,
        freshness: Freshness,
    ) {
        let part = Part::new(cluster, status.into(), freshness, &self.options);
        let kept = self.kept();
        let old = self.clusters.remove(cluster);
        let own_changed = match &old {
            Some(o) => !o.same_own_omissions(&part),
            None => part.groups() > 0,
        };
        if own_changed {
            self.version = next_version();
        }
        let dropped: Vec<String> = match &old {
            Some(old) => {
                self.unindex(cluster, old);
                old.types
                    .iter()
                    .filter(|t| !part.types.contains(*t))
                    .cloned()
                    .collect()
            }
            None => Vec::new(),
        };
        for t in &part.types {
            if old.as_ref().is_some_and(|o| o.types.contains(t)) {
                continue;
            }
            match self.types.get_mut(t) {
                Some(state) => state.reporters += 1,
                None => {
                    // A type new to the Gateway: every other cluster does
                    // not report it.
                    let not_true = self
                        .clusters
                        .iter()
                        .filter_map(|(c, p)| {
                            Some((c.clone(), conditions::fragment(t, &p.report(c))?))
                        })
                        .collect();
                    let state = TypeState {
                        reporters: 1,
                        not_true,
                    };
                    self.types.insert(t.clone(), state);
                }
            }
        }
        for t in dropped {
            self.unreport(&t);
        }
        for t in &part.invalid_types {
            *self.invalid_types.entry(t.clone()).or_insert(0) += 1;
        }
        self.index(cluster, &part);
        self.clusters.insert(cluster.to_owned(), part);
        self.update_not_true(cluster);
        self.update_limits(cluster, kept);
    }

    /// `cluster` no longer reports the Gateway (or left the fleet).
    pub fn remove(&mut self, cluster: &str) {
        let kept = self.kept();
        let Some(old) = self.clusters.remove(cluster) else {
            return;
        };
        if old.groups() > 0 {
            self.version = next_version();
        }
        self.unindex(cluster, &old);
        for t in &old.types {
            self.unreport(t);
        }
        for state in self.types.values_mut() {
            state.not_true.remove(cluster);
        }
        self.update_limits(cluster, kept);
    }

    /// Each cluster's share of the address and listener selections.
    fn kept(&self) -> (Kept, Kept) {
        let owned = |k: BTreeMap<&str, usize>| {
            k.into_iter()
                .map(|(c, n)| (c.to_owned(), n))
                .collect::<Kept>()
        };
        (owned(self.addresses.kept()), owned(self.listeners.kept()))
    }

    /// After `cluster` changed (or left), with `before` the selections'
    /// shares before: names again the limit omissions of `cluster` and of
    /// the clusters whose share moved (at most the limits), and moves the
    /// version if one of them changed.
    fn update_limits(&mut self, cluster: &str, before: (Kept, Kept)) {
        let (after_addresses, after_listeners) = self.kept();
        let moved = |before: &Kept, after: &Kept| -> BTreeSet<String> {
            let mut moved: BTreeSet<String> = before
                .iter()
                .filter(|(c, n)| after.get(*c) != Some(*n))
                .chain(after.iter().filter(|(c, n)| before.get(*c) != Some(*n)))
                .map(|(c, _)| c.clone())
                .collect();
            moved.insert(cluster.to_owned());
            moved
        };
        let mut changed = false;
        for c in moved(&before.0, &after_addresses) {
            let keep = after_addresses.get(&c).copied().unwrap_or(0);
            let next = self.address_limit_of(&c, keep);
            changed |= set_entry(&mut self.address_limit, c, next);
        }
        for c in moved(&before.1, &after_listeners) {
            let keep = after_listeners.get(&c).copied().unwrap_or(0);
            let next = self.listener_tail_of(&c, keep);
            changed |= set_entry(&mut self.listener_tail, c, next);
        }
        if changed {
            self.version = next_version();
        }
    }

    /// `cluster`'s addresses left out past the limit when it keeps `keep`.
    fn address_limit_of(&self, cluster: &str, keep: usize) -> Option<Omission> {
        let part = self.clusters.get(cluster)?;
        if part.valid_addresses <= keep {
            return None;
        }
        let mut scratch = Omissions::default();
        let valid = addresses::valid(cluster, &part.status, &self.options, &mut scratch);
        Some(Omission {
            cluster: Some(cluster.to_owned()),
            item: Item::Address,
            names: valid
                .iter()
                .skip(keep)
                .map(|(a, _)| a.value.to_string())
                .collect(),
            rule: Rule::TooManyRoundRobin(MAX_ADDRESSES),
        })
    }

    /// What building `cluster`'s `keep` kept listeners left out, then its
    /// listeners left out past the limit; `None` when neither.
    fn listener_tail_of(&self, cluster: &str, keep: usize) -> Option<Vec<Omission>> {
        let part = self.clusters.get(cluster)?;
        if part.valid_listeners == 0 {
            return None;
        }
        let mut scratch = Omissions::default();
        let valid = listeners::valid(cluster, &part.status, &mut scratch);
        let mut built = Omissions::default();
        for l in valid.iter().take(keep) {
            listeners::build(cluster, l, &mut built);
        }
        let mut tail = built.0;
        if part.valid_listeners > keep {
            tail.push(Omission {
                cluster: Some(cluster.to_owned()),
                item: Item::Listener,
                names: valid
                    .iter()
                    .skip(keep)
                    .map(|l| listeners::full_name(cluster, l))
                    .collect(),
                rule: Rule::TooManyRoundRobin(MAX_LISTENERS),
            });
        }
        (!tail.is_empty()).then_some(tail)
    }

    /// `cluster`'s report went stale (or is fresh again); its report stays.
    pub fn set_freshness(&mut self, cluster: &str, freshness: Freshness) {
        match self.clusters.get_mut(cluster) {
            Some(part) if part.freshness != freshness => part.freshness = freshness,
            _ => return,
        }
        self.update_not_true(cluster);
    }

    /// One reporter fewer of valid type `t`; forgets it with the last.
    fn unreport(&mut self, t: &str) {
        if let Some(state) = self.types.get_mut(t) {
            state.reporters = state.reporters.saturating_sub(1);
            if state.reporters == 0 {
                self.types.remove(t);
            }
        }
    }

    /// Puts `cluster` in or out of each type's not-True clusters.
    fn update_not_true(&mut self, cluster: &str) {
        let Some(part) = self.clusters.get(cluster) else {
            return;
        };
        let report = part.report(cluster);
        for (t, state) in &mut self.types {
            match conditions::fragment(t, &report) {
                Some(f) => match state.not_true.get_mut(cluster) {
                    Some(old) => *old = f,
                    None => {
                        state.not_true.insert(cluster.to_owned(), f);
                    }
                },
                None => {
                    state.not_true.remove(cluster);
                }
            }
        }
    }

    /// Adds what `part` contributes outside the types.
    fn index(&mut self, cluster: &str, part: &Part) {
        self.addresses.insert(cluster, part.valid_addresses);
        self.listeners.insert(cluster, part.valid_listeners);
        let sets = [
            (
                &mut self.condition_omitters,
                part.condition_omissions.is_empty(),
            ),
            (
                &mut self.address_omitters,
                part.address_omissions.is_empty(),
            ),
            (
                &mut self.listener_omitters,
                part.listener_omissions.is_empty(),
            ),
        ];
        for (set, empty) in sets {
            if !empty {
                set.insert(cluster.to_owned());
            }
        }
        self.groups += part.groups();
    }

    /// Takes back what [`Incremental::index`] added, and the invalid types.
    fn unindex(&mut self, cluster: &str, part: &Part) {
        self.addresses.remove(cluster, part.valid_addresses);
        self.listeners.remove(cluster, part.valid_listeners);
        self.condition_omitters.remove(cluster);
        self.address_omitters.remove(cluster);
        self.listener_omitters.remove(cluster);
        self.groups = self.groups.saturating_sub(part.groups());
        for t in &part.invalid_types {
            if let Some(n) = self.invalid_types.get_mut(t) {
                *n -= 1;
                if *n == 0 {
                    self.invalid_types.remove(t);
                }
            }
        }
    }
}

/// Sets (`Some`) or removes `key`'s entry; whether that changed it.
fn set_entry<T: PartialEq>(map: &mut BTreeMap<String, T>, key: String, value: Option<T>) -> bool {
    match value {
        Some(v) => match map.get_mut(&key) {
            Some(old) if *old == v => false,
            Some(old) => {
                *old = v;
                true
            }
            None => {
                map.insert(key, v);
                true
            }
        },
        None => map.remove(&key).is_some(),
    }
}
