//! The index's published views: each aggregated hub Gateway as the
//! Dashboard serves it, encoded as `gwhub.v1` messages once, when the
//! aggregator publishes it, so every watcher shares the encoded form. The
//! encoding lives here, beside the views, so the index never needs the
//! gRPC side; the gRPC side only frames these encodings
//! (`crate::grpc::view::Page`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use gwhub_proto::{convert, v1};
use parking_lot::Mutex;
use prost::Message;
use tonic::codegen::Bytes;

use crate::aggregate::fleet::SharedReport;
use crate::aggregate::{Aggregation, Freshness, GatewayKey, LiveHub, Omission};
use crate::listing::Health;

/// One aggregated hub Gateway as the Dashboard serves it.
///
/// Encoded once per change; a read clones (sending needs an owned message
/// anyway). The encoded status is kept once: a full message is the lean
/// one plus the omissions, put together at read.
#[derive(Debug)]
pub struct GatewayView {
    pub key: GatewayKey,
    /// The aggregated status; its `omissions` are always empty here: they
    /// are kept once, encoded, in [`GatewayView::omissions`] (with their
    /// rules in `omission_rules`, so a new aggregation is compared exactly).
    pub aggregation: Aggregation,
    /// Without omissions and with `omissions_unchanged` set, as watchers
    /// that already have the omissions get it; `clusters` in name order.
    pub lean: v1::AggregatedGateway,
    /// The omissions as the Dashboard API spells them.
    pub omissions: Vec<v1::Omission>,
    /// Each omission's rule and whether it names a cluster: with
    /// `omissions`, exactly the engine's omissions (see
    /// [`GatewayView::same_omissions`]).
    pub(crate) omission_rules: Vec<(crate::aggregate::Rule, bool)>,
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
    pub cells: Vec<Cell>,
    /// The expected clusters that do not report it, in name order (as in
    /// `lean.missing_clusters`; for the cluster filter).
    pub missing: Vec<String>,
    /// The live hub Gateway this aggregation was made from (the same `Arc`
    /// as [`Index::live_hub`] while that is current); a later live object
    /// that aggregates the same updates it without a new view.
    pub(crate) aggregated_with: Mutex<Option<Arc<LiveHub>>>,
    /// Its wire encoding, made once on first read and shared by every
    /// watcher (see [`Encoded`]).
    pub(crate) encoded: std::sync::OnceLock<Encoded>,
}

/// One cluster's report of a hub Gateway, summarised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cell {
    pub cluster: String,
    pub health: Health,
    pub stale: bool,
}

/// The cells of the reports `shared`.
pub(crate) fn cells(shared: &[SharedReport]) -> Vec<Cell> {
    shared
        .iter()
        .map(|r| Cell {
            cluster: r.cluster.clone(),
            health: crate::listing::health(r.status.conditions().iter().map(|c| c.status())),
            stale: matches!(r.freshness, Freshness::Stale { .. }),
        })
        .collect()
}

impl GatewayView {
    /// The filter's view of this Gateway.
    pub fn facts(&self) -> crate::listing::Facts<'_> {
        crate::listing::Facts {
            namespace: &self.key.namespace,
            clusters: &self.lean.clusters,
            missing: &self.missing,
            not_ready: self.not_ready,
        }
    }

    /// The live hub Gateway the view was aggregated with.
    pub fn aggregated_with(&self) -> Option<Arc<LiveHub>> {
        self.aggregated_with.lock().clone()
    }

    /// Whether the view was aggregated with exactly `live` (not an equal
    /// copy: the object the index holds now).
    pub(crate) fn aggregated_from(&self, live: &Arc<LiveHub>) -> bool {
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

/// Encodes a changed view; its revision is set when it is published
/// ([`GatewayView::set_revision`]). Omissions equal to `old`'s keep their
/// revision, so watchers that have them are not sent them again.
pub(crate) fn build_view(
    key: GatewayKey,
    aggregation: Aggregation,
    foreign: BTreeSet<String>,
    clusters: Vec<String>,
    cells: Vec<Cell>,
    old: Option<&GatewayView>,
    live: Option<Arc<LiveHub>>,
) -> GatewayView {
    let not_ready = crate::listing::not_ready(
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
    // Unchanged omissions are copied from the old view, not formatted again.
    let unchanged = old.filter(|o| o.same_omissions(&aggregation.omissions));
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
        // Set by the aggregation pass, which knows the expectation.
        missing_clusters: Vec::new(),
        unexpected_clusters: Vec::new(),
    };
    let omissions = match unchanged {
        Some(o) => o.omissions.clone(),
        None => aggregation
            .omissions
            .iter()
            .map(omission_to_proto)
            .collect(),
    };
    // Kept once, encoded (see `GatewayView::aggregation`): at 1,000
    // clusters a hub Gateway leaves out thousands of listeners and addresses.
    let Aggregation {
        status,
        omissions: engine_omissions,
    } = aggregation;
    // A new vector: collecting in place would keep the omissions' larger one.
    let mut omission_rules = Vec::with_capacity(engine_omissions.len());
    omission_rules.extend(
        engine_omissions
            .into_iter()
            .map(|o| (o.rule, o.cluster.is_some())),
    );
    GatewayView {
        key,
        aggregation: Aggregation {
            status,
            omissions: Vec::new(),
        },
        lean,
        omissions,
        omission_rules,
        omissions_revision,
        foreign,
        not_ready,
        cells,
        missing: Vec::new(),
        aggregated_with: Mutex::new(live),
        encoded: std::sync::OnceLock::new(),
    }
}

/// A view's `AggregatedGateway` encoded once, in two parts every watcher
/// shares: a watch message is put together from them without copying
/// ([`Page`]). Protobuf fields may come in any order and a repeated
/// field's entries need not be adjacent, so the lean message is `base`
/// plus `omissions_unchanged = true`, the full one `base` plus the
/// omissions.
#[derive(Debug, Clone)]
pub(crate) struct Encoded {
    /// Every field but `omissions` and `omissions_unchanged`.
    pub(crate) base: Bytes,
    /// The omissions, each as field 5.
    pub(crate) omissions: Bytes,
}

/// `omissions_unchanged = true` (field 7, varint 1).
pub(crate) const OMISSIONS_UNCHANGED: &[u8] = &[0x38, 0x01];

impl Encoded {
    /// The encoded length of the message, lean or full.
    pub(crate) fn len(&self, lean: bool) -> usize {
        self.base.len()
            + match lean {
                true => OMISSIONS_UNCHANGED.len(),
                false => self.omissions.len(),
            }
    }

    /// What the message adds to a watch or list message: itself, its
    /// field's tag and its length.
    pub(crate) fn framed_len(&self, lean: bool) -> usize {
        let n = self.len(lean);
        1 + prost::encoding::encoded_len_varint(n as u64) + n
    }
}

impl GatewayView {
    /// Its shared wire encoding (made on the first call, outside any lock
    /// of the index: views are immutable once published).
    pub(crate) fn encoded(&self) -> &Encoded {
        self.encoded.get_or_init(|| {
            let base = v1::AggregatedGateway {
                omissions: Vec::new(),
                omissions_unchanged: false,
                ..self.lean.clone()
            };
            let mut omissions = Vec::new();
            for o in &self.omissions {
                prost::encoding::message::encode(5, o, &mut omissions);
            }
            Encoded {
                base: Bytes::from(base.encode_to_vec()),
                omissions: Bytes::from(omissions),
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
                .zip(&self.omission_rules)
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

#[cfg(test)]
mod tests {
    use gateway_api::apis::standard::gateways::GatewayStatus;

    use super::*;
    use crate::aggregate::{Item, Rule};

    fn omission(cluster: Option<&str>, item: Item, names: &[&str], rule: Rule) -> Omission {
        Omission {
            cluster: cluster.map(str::to_owned),
            item,
            names: names.iter().map(|n| (*n).to_owned()).collect(),
            rule,
        }
    }

    fn view(omissions: Vec<Omission>) -> GatewayView {
        let aggregation = Aggregation {
            status: GatewayStatus::default(),
            omissions,
        };
        let key = GatewayKey::new("ns", "web");
        build_view(
            key,
            aggregation,
            BTreeSet::new(),
            Vec::new(),
            Vec::new(),
            None,
            None,
        )
    }

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
        assert_eq!(v.omission_rules.capacity(), 2);
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
            assert_ne!(encoded, v.omissions, "change {i}");
        }
        assert!(view(Vec::new()).same_omissions(&[]));
    }
}
