//! The index's published views: each aggregated hub Gateway as the
//! Dashboard serves it, encoded as `gwhub.v1` messages once, when the
//! aggregator publishes it, so every watcher shares the encoded form. The
//! encoding lives here, beside the views, so the index never needs the
//! gRPC side; the gRPC side only frames these encodings
//! (the runtime's `grpc::view::Page`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bytes::Bytes;
use gwhub_proto::{convert, v1};
use prost::Message;

use gwhub_hub_rules::aggregate::fleet::SharedReport;
use gwhub_hub_rules::aggregate::{Aggregation, Freshness, GatewayKey, LiveHub, Omission, Rule};
use gwhub_hub_rules::listing::Health;

use crate::provenance::Provenance;

/// Views of one Gateway whose provenance a view keeps besides its own (see
/// [`GatewayView::provenance_since`]).
const EARLIER: usize = 16;

/// One aggregated hub Gateway as the Dashboard serves it. Immutable once
/// published: a pass that finds the same result from a newer live hub
/// Gateway publishes a copy standing for it (`GatewayView::standing_for`).
///
/// Encoded once per change; a read clones (sending needs an owned message
/// anyway). The encoded status is kept once: a full message is the lean
/// one plus the omissions, put together at read. What one cluster's change
/// leaves as it was (the omissions, the cluster list, most cells) is
/// shared with the previous view, not copied: a new view costs the change
/// and the status, not the fleet.
#[derive(Debug)]
pub struct GatewayView {
    pub key: GatewayKey,
    /// The aggregated status; its `omissions` are always empty here: they
    /// are kept once, encoded, in [`GatewayView::omissions`] (with their
    /// rules in `omission_rules`, so a new aggregation is compared exactly).
    pub aggregation: Aggregation,
    /// Without omissions and with `omissions_unchanged` set, as watchers
    /// that already have the omissions get it, and without `clusters`
    /// (they are [`GatewayView::clusters`]; [`GatewayView::lean`] has them).
    pub lean: v1::AggregatedGateway,
    /// The reporting clusters, in name order (shared between views while
    /// no cluster comes or goes).
    pub clusters: Arc<[String]>,
    /// The omissions as the Dashboard API spells them (shared between
    /// views while they are the same).
    pub omissions: Arc<[v1::Omission]>,
    /// Each omission's rule and whether it names a cluster: with
    /// `omissions`, exactly the engine's omissions (see
    /// [`GatewayView::same_omissions`]).
    omission_rules: Arc<[(Rule, bool)]>,
    /// What the omissions were listed from, when the incremental aggregate
    /// did: the same again means the same omissions, not listed again.
    omissions_source: Option<OmissionsSource>,
    /// The revision at which the omissions last changed.
    pub omissions_revision: u64,
    /// Condition types in `aggregation.status` that are other writers'
    /// (kept from the live hub Gateway, never applied by the hub).
    pub foreign: BTreeSet<String>,
    /// Some aggregated condition is not True (the Dashboard's `not_ready`
    /// filter).
    pub not_ready: bool,
    /// Each reporting cluster's own report in one word, in cluster order
    /// (the web page's fleet overview).
    pub cells: Cells,
    /// The expected clusters that do not report it, in name order (as in
    /// `lean.missing_clusters`; for the cluster filter).
    pub missing: Vec<String>,
    /// The live hub Gateway this aggregation was made from (the same `Arc`
    /// as [`Index::live_hub`] while that is current); a later live object
    /// that aggregates the same gets a copy of the view standing for it,
    /// at the same revision.
    aggregated_with: Option<Arc<LiveHub>>,
    /// Where the changes it carries over the view before came from (only
    /// for a hub Gateway on the management cluster: a status write
    /// follows): when agents observed the earliest, and the trace of the
    /// aggregation that made it.
    provenance: Provenance,
    /// The provenance of the views of this Gateway published before it
    /// (those that had one, the last [`EARLIER`]), each with its
    /// revision, oldest first: a reader that missed some of them (the
    /// views channel keeps only the latest) still finds theirs.
    earlier: Arc<[(u64, Provenance)]>,
    /// Its wire encoding, made once on first read and shared by every
    /// watcher (see [`Encoded`]).
    encoded: std::sync::OnceLock<Encoded>,
    /// The encoded cluster list and omissions, shared with the views
    /// before it while they are the same (encoded once, not per change).
    clusters_encoded: Arc<std::sync::OnceLock<Bytes>>,
    omissions_encoded: Arc<std::sync::OnceLock<Bytes>>,
}

/// One cluster's report of a hub Gateway, summarised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cell {
    pub cluster: String,
    pub health: Health,
    pub stale: bool,
}

impl Cell {
    /// The cell of the report `r`.
    pub(crate) fn of(r: &SharedReport) -> Self {
        Cell {
            cluster: r.cluster.clone(),
            health: gwhub_hub_rules::listing::health(
                r.status.conditions().iter().map(|c| c.status()),
            ),
            stale: matches!(r.freshness, Freshness::Stale { .. }),
        }
    }
}

/// Cells per chunk: a changed cell copies its chunk (at most twice this)
/// and the list of chunks (the fleet over this).
const CHUNK: usize = 64;

/// A view's cells in cluster order, in chunks shared between views: a new
/// view that changes a few clusters' cells copies those chunks and the
/// list of chunks, not every cell, and dropping the old view drops only
/// what it does not share.
#[derive(Clone, Debug, Default)]
pub struct Cells {
    /// Non-empty chunks, in cluster order.
    chunks: Arc<Vec<Arc<Vec<Cell>>>>,
    len: usize,
}

impl Cells {
    /// The cells of the reports `shared` (in cluster order).
    pub(crate) fn of(shared: &[SharedReport]) -> Self {
        let chunks: Vec<Arc<Vec<Cell>>> = shared
            .chunks(CHUNK)
            .map(|c| Arc::new(c.iter().map(Cell::of).collect()))
            .collect();
        Cells {
            chunks: Arc::new(chunks),
            len: shared.len(),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = &Cell> {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    /// The chunk that holds (or would hold) `cluster`.
    fn chunk_of(&self, cluster: &str) -> usize {
        self.chunks
            .partition_point(|c| c.first().is_some_and(|f| f.cluster.as_str() <= cluster))
            .saturating_sub(1)
    }

    /// `cluster`'s cell.
    pub fn get(&self, cluster: &str) -> Option<&Cell> {
        let chunk = self.chunks.get(self.chunk_of(cluster))?;
        let at = chunk
            .binary_search_by(|c| c.cluster.as_str().cmp(cluster))
            .ok()?;
        chunk.get(at)
    }

    /// Sets (`Some`, with `cluster`'s name) or removes `cluster`'s cell.
    /// Returns whether a cell came or went (the cluster list changed).
    pub(crate) fn set(&mut self, cluster: &str, cell: Option<Cell>) -> bool {
        let at = self.chunk_of(cluster);
        let chunks = Arc::make_mut(&mut self.chunks);
        if chunks.is_empty() {
            let Some(cell) = cell else {
                return false;
            };
            chunks.push(Arc::new(vec![cell]));
            self.len = 1;
            return true;
        }
        let Some(chunk) = chunks.get_mut(at) else {
            return false;
        };
        let found = chunk.binary_search_by(|c| c.cluster.as_str().cmp(cluster));
        let came_or_went = match (found, cell) {
            (Ok(i), Some(cell)) => {
                if chunk.get(i) != Some(&cell) {
                    Arc::make_mut(chunk)[i] = cell;
                }
                false
            }
            (Ok(i), None) => {
                Arc::make_mut(chunk).remove(i);
                self.len -= 1;
                true
            }
            (Err(i), Some(cell)) => {
                Arc::make_mut(chunk).insert(i, cell);
                self.len += 1;
                true
            }
            (Err(_), None) => false,
        };
        if chunk.is_empty() {
            chunks.remove(at);
        } else if chunk.len() > 2 * CHUNK {
            let rest = Arc::make_mut(chunk).split_off(CHUNK);
            chunks.insert(at + 1, Arc::new(rest));
        }
        came_or_went
    }

    /// The cluster names, in order.
    pub(crate) fn clusters(&self) -> Arc<[String]> {
        self.iter().map(|c| c.cluster.clone()).collect()
    }
}

impl PartialEq for Cells {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

/// What a view's omissions were listed from (see
/// [`gwhub_hub_rules::aggregate::Incremental::omissions_version`]).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OmissionsSource {
    pub(crate) version: u64,
    pub(crate) hub: Vec<Omission>,
}

/// A new aggregation's omissions, for [`build_view`].
pub(crate) struct Omitted {
    /// Every omission; `None`: the old view's stand (listed from the same
    /// source).
    pub(crate) list: Option<Vec<Omission>>,
    pub(crate) source: Option<OmissionsSource>,
}

impl GatewayView {
    /// The filter's view of this Gateway.
    pub fn facts(&self) -> gwhub_hub_rules::listing::Facts<'_> {
        gwhub_hub_rules::listing::Facts {
            namespace: &self.key.namespace,
            clusters: &self.clusters,
            missing: &self.missing,
            not_ready: self.not_ready,
        }
    }

    /// The live hub Gateway the view was aggregated with.
    pub fn aggregated_with(&self) -> Option<Arc<LiveHub>> {
        self.aggregated_with.clone()
    }

    /// What its omissions were listed from, when the incremental
    /// aggregate listed them.
    pub(crate) fn omissions_source(&self) -> Option<&OmissionsSource> {
        self.omissions_source.as_ref()
    }

    /// Where the changes it carries came from (see the field).
    #[cfg(test)]
    pub(crate) fn provenance(&self) -> &Provenance {
        &self.provenance
    }

    /// Whether the view was aggregated with exactly `live` (not an equal
    /// copy: the object the index holds now).
    pub fn aggregated_from(&self, live: &Arc<LiveHub>) -> bool {
        self.aggregated_with
            .as_ref()
            .is_some_and(|a| Arc::ptr_eq(a, live))
    }

    /// This view as the same aggregation from `live`, its omissions
    /// listed from `source`: the same revision and encoding (nobody is
    /// told of a change), the fields shared or copied.
    pub(crate) fn standing_for(
        &self,
        live: Option<Arc<LiveHub>>,
        source: Option<OmissionsSource>,
    ) -> GatewayView {
        let encoded = std::sync::OnceLock::new();
        if let Some(e) = self.encoded.get() {
            let _ = encoded.set(e.clone());
        }
        GatewayView {
            key: self.key.clone(),
            aggregation: self.aggregation.clone(),
            lean: self.lean.clone(),
            clusters: self.clusters.clone(),
            omissions: self.omissions.clone(),
            omission_rules: self.omission_rules.clone(),
            omissions_source: source,
            omissions_revision: self.omissions_revision,
            foreign: self.foreign.clone(),
            not_ready: self.not_ready,
            cells: self.cells.clone(),
            missing: self.missing.clone(),
            aggregated_with: live,
            provenance: self.provenance.clone(),
            earlier: self.earlier.clone(),
            encoded,
            clusters_encoded: self.clusters_encoded.clone(),
            omissions_encoded: self.omissions_encoded.clone(),
        }
    }

    pub fn revision(&self) -> u64 {
        self.lean.revision
    }

    /// Where the changes this view carries over the view at `revision`
    /// came from (`None`: over none): its own provenance and that of the
    /// views published in between, the earliest time and the first trace.
    /// A reader that noted every view before, up to `revision`, and
    /// notes this one gets each change's provenance once (unless it fell
    /// more than 16 views of this Gateway behind: then the oldest are not
    /// in it, and a write is measured from a later change).
    pub fn provenance_since(&self, revision: Option<u64>) -> Provenance {
        let after = |r: u64| revision.is_none_or(|since| r > since);
        let mut all = Provenance::default();
        for (_, p) in self.earlier.iter().filter(|(r, _)| after(*r)) {
            all.merge(p.clone());
        }
        if after(self.revision()) {
            all.merge(self.provenance.clone());
        }
        all
    }

    /// The whole aggregated Gateway, omissions included.
    pub fn full(&self) -> v1::AggregatedGateway {
        v1::AggregatedGateway {
            omissions: self.omissions.to_vec(),
            omissions_unchanged: false,
            ..self.lean()
        }
    }

    /// The lean message (without omissions, `omissions_unchanged` set), its
    /// clusters included.
    pub fn lean(&self) -> v1::AggregatedGateway {
        v1::AggregatedGateway {
            clusters: self.clusters.to_vec(),
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

/// Encodes a changed view; its revision is set when it is published
/// ([`GatewayView::set_revision`]). Omissions equal to `old`'s keep their
/// revision, so watchers that have them are not sent them again, and are
/// shared with it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn build_view(
    key: GatewayKey,
    aggregation: Aggregation,
    omitted: Omitted,
    foreign: BTreeSet<String>,
    clusters: Arc<[String]>,
    cells: Cells,
    old: Option<&GatewayView>,
    live: Option<Arc<LiveHub>>,
    provenance: Provenance,
) -> GatewayView {
    let not_ready = gwhub_hub_rules::listing::not_ready(
        aggregation
            .status
            .conditions
            .iter()
            .flatten()
            .map(|c| c.status.as_str()),
    );
    let status = convert::status_to_proto(&aggregation.status).unwrap_or_else(|e| {
        tracing::error!(gateway = %key, error = %e, "aggregated status does not encode");
        v1::GatewayStatus::default()
    });
    let lean = v1::AggregatedGateway {
        namespace: key.namespace.clone(),
        name: key.name.clone(),
        status: Some(status),
        // Kept once, in `clusters`.
        clusters: Vec::new(),
        omissions: Vec::new(),
        revision: 0,
        omissions_unchanged: true,
        // Set by the aggregation pass, which knows the expectation.
        missing_clusters: Vec::new(),
        unexpected_clusters: Vec::new(),
    };
    // Unchanged omissions are shared with the old view, not formatted
    // again; the revision 0: changed, set to the view's on publishing.
    let Omitted { list, source } = omitted;
    let unchanged = match (&list, old) {
        (None, old) => old,
        (Some(list), Some(old)) if old.same_omissions(list) => Some(old),
        (Some(_), _) => None,
    };
    let (omissions, omission_rules, omissions_revision, omissions_encoded) = match (unchanged, list)
    {
        (Some(o), _) => (
            o.omissions.clone(),
            o.omission_rules.clone(),
            o.omissions_revision,
            o.omissions_encoded.clone(),
        ),
        (None, list) => {
            let list = list.unwrap_or_default();
            let encoded: Arc<[v1::Omission]> = list.iter().map(omission_to_proto).collect();
            let rules: Arc<[(Rule, bool)]> = list
                .into_iter()
                .map(|o| (o.rule, o.cluster.is_some()))
                .collect();
            (encoded, rules, 0, Arc::default())
        }
    };
    let clusters_encoded = match old {
        Some(o) if Arc::ptr_eq(&o.clusters, &clusters) => o.clusters_encoded.clone(),
        _ => Arc::default(),
    };
    let earlier = earlier_of(old);
    let Aggregation { status, .. } = aggregation;
    GatewayView {
        key,
        aggregation: Aggregation {
            status,
            omissions: Vec::new(),
        },
        lean,
        clusters,
        omissions,
        omission_rules,
        omissions_source: source,
        omissions_revision,
        foreign,
        not_ready,
        cells,
        missing: Vec::new(),
        aggregated_with: live,
        provenance,
        earlier,
        encoded: std::sync::OnceLock::new(),
        clusters_encoded,
        omissions_encoded,
    }
}

/// The provenance a view after `old` keeps of the views before it:
/// `old`'s (when it had one) after those `old` kept, the last [`EARLIER`].
fn earlier_of(old: Option<&GatewayView>) -> Arc<[(u64, Provenance)]> {
    match old {
        Some(o) if !o.provenance.is_empty() => {
            let kept = o.earlier.len().saturating_sub(EARLIER - 1);
            o.earlier
                .iter()
                .skip(kept)
                .cloned()
                .chain(std::iter::once((o.revision(), o.provenance.clone())))
                .collect()
        }
        Some(o) => o.earlier.clone(),
        None => Arc::default(),
    }
}

/// A view's `AggregatedGateway` encoded once, in parts every watcher
/// shares: a watch message is put together from them without copying
/// (`Page`). Protobuf fields may come in any order and a repeated
/// field's entries need not be adjacent, so the lean message is `base`,
/// `clusters` and `omissions_unchanged = true`, the full one `base`,
/// `clusters` and the omissions. The clusters and the omissions are
/// shared with the views before while they are the same.
#[derive(Debug, Clone)]
pub struct Encoded {
    /// Every field but `clusters`, `omissions` and `omissions_unchanged`.
    pub base: Bytes,
    /// The clusters, each as field 4.
    pub clusters: Bytes,
    /// The omissions, each as field 5.
    pub omissions: Bytes,
}

/// `omissions_unchanged = true` (field 7, varint 1).
pub const OMISSIONS_UNCHANGED: &[u8] = &[0x38, 0x01];

impl Encoded {
    /// The encoded length of the message, lean or full.
    pub fn len(&self, lean: bool) -> usize {
        self.base.len()
            + self.clusters.len()
            + match lean {
                true => OMISSIONS_UNCHANGED.len(),
                false => self.omissions.len(),
            }
    }

    /// What the message adds to a watch or list message: itself, its
    /// field's tag and its length.
    pub fn framed_len(&self, lean: bool) -> usize {
        let n = self.len(lean);
        1 + prost::encoding::encoded_len_varint(n as u64) + n
    }
}

impl GatewayView {
    /// Its shared wire encoding (made on the first call, outside any lock
    /// of the index: views are immutable once published).
    pub fn encoded(&self) -> &Encoded {
        self.encoded.get_or_init(|| {
            // `lean` has no clusters: they are encoded apart.
            let base = v1::AggregatedGateway {
                omissions: Vec::new(),
                omissions_unchanged: false,
                ..self.lean.clone()
            };
            let clusters = self.clusters_encoded.get_or_init(|| {
                let mut clusters = Vec::new();
                for c in self.clusters.iter() {
                    prost::encoding::string::encode(4, c, &mut clusters);
                }
                Bytes::from(clusters)
            });
            let omissions = self.omissions_encoded.get_or_init(|| {
                let mut omissions = Vec::new();
                for o in self.omissions.iter() {
                    prost::encoding::message::encode(5, o, &mut omissions);
                }
                Bytes::from(omissions)
            });
            Encoded {
                base: Bytes::from(base.encode_to_vec()),
                clusters: clusters.clone(),
                omissions: omissions.clone(),
            }
        })
    }
}

impl GatewayView {
    /// Whether the engine's `omissions` are the ones this view encodes.
    /// Exact: an omission is its cluster, item, names and rule, and its
    /// message is made of them alone; item codes are distinct.
    pub(crate) fn same_omissions(&self, omissions: &[Omission]) -> bool {
        self.omissions.len() == omissions.len()
            && self.omission_rules.len() == omissions.len()
            && self
                .omissions
                .iter()
                .zip(self.omission_rules.iter())
                .zip(omissions)
                .all(|((encoded, (rule, has_cluster)), o)| {
                    *has_cluster == o.cluster.is_some()
                        && encoded.cluster == o.cluster.as_deref().unwrap_or_default()
                        && encoded.item == o.item.code()
                        && *rule == o.rule
                        && encoded.names == o.names
                })
    }

    pub(crate) fn set_revision(&mut self, revision: u64) {
        self.lean.revision = revision;
        if self.omissions_revision == 0 {
            self.omissions_revision = revision;
        }
    }
}

/// The engine's omission as the Dashboard API spells it.
pub(crate) fn omission_to_proto(o: &Omission) -> v1::Omission {
    v1::Omission {
        cluster: o.cluster.clone().unwrap_or_default(),
        item: o.item.code().to_owned(),
        names: o.names.clone(),
        rule: o.rule.code().to_owned(),
        message: o.to_string(),
    }
}

/// Views for tests (here and in the gRPC side's, through the `testing`
/// feature).
#[cfg(any(test, feature = "testing"))]
pub mod testing {
    use gateway_api::apis::standard::gateways::GatewayStatus;

    use super::*;
    use gwhub_hub_rules::aggregate::Item;

    pub fn omission(cluster: Option<&str>, item: Item, names: &[&str], rule: Rule) -> Omission {
        Omission {
            cluster: cluster.map(str::to_owned),
            item,
            names: names.iter().map(|n| (*n).to_owned()).collect(),
            rule,
        }
    }

    /// A view of `key` with a default status, no cluster and `omissions`.
    pub fn keyed(key: GatewayKey, omissions: Vec<Omission>) -> GatewayView {
        let aggregation = Aggregation {
            status: GatewayStatus::default(),
            omissions: Vec::new(),
        };
        let omitted = Omitted {
            list: Some(omissions),
            source: None,
        };
        build_view(
            key,
            aggregation,
            omitted,
            BTreeSet::new(),
            Arc::from([]),
            Cells::default(),
            None,
            None,
            Provenance::default(),
        )
    }

    /// `view` published at `revision` (as the aggregator sets it).
    pub fn set_revision(view: &mut GatewayView, revision: u64) {
        view.set_revision(revision);
    }

    /// [`keyed`] `ns/web`.
    pub fn view(omissions: Vec<Omission>) -> GatewayView {
        keyed(GatewayKey::new("ns", "web"), omissions)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{omission, view};
    use super::*;
    use gwhub_hub_rules::aggregate::Item;
    use gwhub_hub_rules::listing::Health;

    /// The view keeps its omissions once, encoded, and still tells exactly
    /// whether a new aggregation left out the same: any field differing
    /// (also a rule's detail, a cluster of "" against none) is a change.
    #[test]
    fn omissions_are_kept_once_and_compared_exactly() {
        let base = || {
            vec![
                omission(
                    Some("east"),
                    Item::Listener,
                    &["east.a", "east.b"],
                    Rule::TooManyRoundRobin(64),
                ),
                omission(None, Item::Condition, &["X"], Rule::TooMany(8)),
            ]
        };
        let v = view(base());
        assert!(v.aggregation.omissions.is_empty());
        assert_eq!(v.omission_rules.len(), 2);
        assert_eq!(v.omissions.len(), 2);
        assert!(v.same_omissions(&base()));
        type Change = fn(&mut Vec<Omission>);
        let changed: [Change; 9] = [
            |o| o[0].cluster = Some("west".into()),
            |o| o[1].cluster = Some(String::new()),
            |o| o[0].item = Item::Address,
            |o| {
                o[0].names.pop();
            },
            |o| o[0].names[1] = "east.c".into(),
            |o| o[0].rule = Rule::TooManyRoundRobin(16),
            |o| o[1].rule = Rule::InvalidCondition("x".into()),
            |o| {
                o.pop();
            },
            |o| o.reverse(),
        ];
        for (i, change) in changed.iter().enumerate() {
            let mut o = base();
            change(&mut o);
            assert!(!v.same_omissions(&o), "change {i}");
            // What is published for it differs too.
            let encoded: Vec<v1::Omission> = o.iter().map(omission_to_proto).collect();
            assert_ne!(encoded[..], v.omissions[..], "change {i}");
        }
        assert!(view(Vec::new()).same_omissions(&[]));
    }

    /// A view keeps the provenance of the views of its Gateway before it:
    /// a reader that missed some finds theirs, one that noted them does not
    /// get them again; only the last 16 are kept.
    #[test]
    fn a_view_keeps_the_provenance_of_the_views_before_it() {
        let next = |old: Option<&GatewayView>, revision, provenance| {
            let aggregation = Aggregation {
                status: Default::default(),
                omissions: Vec::new(),
            };
            let omitted = Omitted {
                list: Some(Vec::new()),
                source: None,
            };
            let mut v = build_view(
                GatewayKey::new("ns", "web"),
                aggregation,
                omitted,
                BTreeSet::new(),
                Arc::from([]),
                Cells::default(),
                old,
                None,
                provenance,
            );
            v.set_revision(revision);
            v
        };
        let at = |t, trace: Option<&str>| Provenance {
            earliest_observed: Some(t),
            trace: trace.map(str::to_owned),
        };
        let v1 = next(None, 1, at(500, None));
        let v2 = next(Some(&v1), 2, Provenance::default());
        let v3 = next(Some(&v2), 3, at(300, Some("t3")));
        let v4 = next(Some(&v3), 4, at(900, Some("t4")));
        assert_eq!(v4.provenance_since(None), at(300, Some("t3")));
        assert_eq!(v4.provenance_since(Some(1)), at(300, Some("t3")));
        assert_eq!(v4.provenance_since(Some(3)), at(900, Some("t4")));
        assert!(v4.provenance_since(Some(4)).is_empty());
        assert_eq!(v4.earlier.len(), 2, "views without one are not kept");
        let mut v = v4;
        for r in 5..40 {
            v = next(Some(&v), r, at(1_000 + r as i64, None));
        }
        assert_eq!(v.earlier.len(), EARLIER);
        assert_eq!(
            v.provenance_since(None).earliest_observed,
            Some(1_000 + 39 - 16)
        );
    }

    proptest::proptest! {
        /// Cells patched one by one are the cells built at once, whatever
        /// comes and goes (chunks split and emptied on the way).
        #[test]
        fn patched_cells_are_the_cells_built_at_once(
            ops in proptest::collection::vec((0..400usize, proptest::option::of(proptest::bool::ANY)), 1..600)
        ) {
            let mut model: BTreeMap<String, Cell> = BTreeMap::new();
            let mut cells = Cells::default();
            for (i, op) in ops {
                let cluster = format!("c{i:03}");
                let cell = op.map(|stale| Cell {
                    cluster: cluster.clone(),
                    health: Health::Ready,
                    stale,
                });
                let before = cells.clone();
                let was: Vec<Cell> = model.values().cloned().collect();
                let came_or_went = match &cell {
                    Some(c) => model.insert(cluster.clone(), c.clone()).is_none(),
                    None => model.remove(&cluster).is_some(),
                };
                proptest::prop_assert_eq!(cells.set(&cluster, cell.clone()), came_or_went);
                proptest::prop_assert_eq!(cells.get(&cluster), cell.as_ref());
                proptest::prop_assert_eq!(cells.len(), model.len());
                proptest::prop_assert!(cells.iter().eq(model.values()));
                // The copy taken before is untouched.
                proptest::prop_assert!(before.iter().eq(was.iter()));
            }
            let names: Vec<String> = model.keys().cloned().collect();
            proptest::prop_assert_eq!(&cells.clusters()[..], &names[..]);
        }
    }
}
