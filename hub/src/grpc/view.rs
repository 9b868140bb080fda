//! The Dashboard's encoding of the index's views: an aggregated hub
//! Gateway and what was left out of it, as `gwhub.v1` messages. The index
//! builds each view once when it publishes it, so every watcher shares the
//! encoded form.

use std::collections::BTreeSet;
use std::sync::Arc;

use gwhub_proto::{convert, v1};
use parking_lot::Mutex;
use prost::Message;
use tonic::codegen::Bytes;

use crate::aggregate::{Aggregation, GatewayKey, LiveHub, Omission};
use crate::index::{Cell, GatewayView};

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
const OMISSIONS_UNCHANGED: &[u8] = &[0x38, 0x01];

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

/// Largest watch message the hub puts together, but for one Gateway
/// larger than it alone: a snapshot or change past it is sent as several
/// messages (`snapshot_incomplete`), so what a watcher holds of its own
/// does not grow with the view.
pub const WATCH_PAGE_BYTES: usize = 256 * 1024;

/// One watch message as gRPC frames it (the 5-byte prefix, then the
/// fields), in pieces: the Gateways are the views' shared encodings,
/// only the framing is the watcher's own.
#[derive(Debug, Default)]
pub(crate) struct Page {
    pub(crate) chunks: std::collections::VecDeque<Bytes>,
    /// Dropped with the page, once the transport took all of it.
    pub(crate) done: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Page {
    /// The gRPC message of a watch response: `upserted` as each view's
    /// shared encoding (lean or full), `deleted` encoded here (small).
    pub(crate) fn new(
        snapshot: bool,
        incomplete: bool,
        upserted: &[(Arc<GatewayView>, bool)],
        deleted: &[v1::GatewayRef],
    ) -> Page {
        let mut own = prost::bytes::BytesMut::new();
        if snapshot {
            prost::encoding::bool::encode(1, &snapshot, &mut own);
        }
        for d in deleted {
            prost::encoding::message::encode(3, d, &mut own);
        }
        if incomplete {
            prost::encoding::bool::encode(4, &incomplete, &mut own);
        }
        Page::framed(own, 2, upserted)
    }

    /// A `ListGatewaysResponse` of `gateways` (full), as [`Page::new`].
    pub(crate) fn list(
        gateways: &[Arc<GatewayView>],
        next_page_token: &str,
        total_size: u32,
    ) -> Page {
        let mut own = prost::bytes::BytesMut::new();
        if !next_page_token.is_empty() {
            prost::encoding::string::encode(2, &next_page_token.to_owned(), &mut own);
        }
        if total_size != 0 {
            prost::encoding::uint32::encode(3, &total_size, &mut own);
        }
        let full: Vec<(Arc<GatewayView>, bool)> =
            gateways.iter().map(|g| (g.clone(), false)).collect();
        Page::framed(own, 1, &full)
    }

    /// One gRPC message: the fields encoded in `own`, then each view's
    /// shared encoding (lean or full) as field `field`.
    fn framed(own: prost::bytes::BytesMut, field: u32, views: &[(Arc<GatewayView>, bool)]) -> Page {
        use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};
        let mut len = own.len();
        for (view, lean) in views {
            let n = view.encoded().len(*lean);
            len += encoded_len_varint(u64::from(field << 3)) + encoded_len_varint(n as u64) + n;
        }
        let mut chunks = std::collections::VecDeque::new();
        let mut prefix = prost::bytes::BytesMut::with_capacity(5 + own.len());
        prefix.extend_from_slice(&[0]);
        prefix.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
        prefix.extend_from_slice(&own);
        chunks.push_back(prefix.freeze());
        let mut head = prost::bytes::BytesMut::new();
        for (view, lean) in views {
            let e = view.encoded();
            encode_key(field, WireType::LengthDelimited, &mut head);
            encode_varint(e.len(*lean) as u64, &mut head);
            chunks.push_back(head.split().freeze());
            chunks.push_back(e.base.clone());
            match lean {
                true => chunks.push_back(Bytes::from_static(OMISSIONS_UNCHANGED)),
                false if e.omissions.is_empty() => {}
                false => chunks.push_back(e.omissions.clone()),
            }
        }
        Page { chunks, done: None }
    }

    /// The message without its gRPC prefix, decoded (for callers that take
    /// messages, not frames).
    pub(crate) fn decode(&self) -> Result<v1::WatchGatewaysResponse, prost::DecodeError> {
        self.decode_as()
    }

    /// The message as `M`.
    pub(crate) fn decode_as<M: Message + Default>(&self) -> Result<M, prost::DecodeError> {
        let mut all = prost::bytes::BytesMut::new();
        for c in &self.chunks {
            all.extend_from_slice(c);
        }
        let body = all.split_off(5.min(all.len()));
        M::decode(body.freeze())
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

    /// A page put together from the shared encodings is the message the
    /// generated code would encode: full views with their omissions, lean
    /// ones with `omissions_unchanged`, deletions, the flags.
    #[test]
    fn a_page_is_the_watch_message() {
        let mut full = view(vec![omission(
            None,
            Item::Condition,
            &["X"],
            Rule::TooMany(8),
        )]);
        full.set_revision(7);
        let full = Arc::new(full);
        let mut bare = view(Vec::new());
        bare.key = GatewayKey::new("ns", "bare");
        bare.lean.name = "bare".into();
        bare.set_revision(9);
        let bare = Arc::new(bare);
        let deleted = vec![v1::GatewayRef {
            namespace: "ns".into(),
            name: "gone".into(),
        }];
        let upserted = [
            (full.clone(), false),
            (full.clone(), true),
            (bare.clone(), false),
        ];
        let page = Page::new(true, true, &upserted, &deleted);
        let got = page.decode().unwrap();
        let want = v1::WatchGatewaysResponse {
            snapshot: true,
            upserted: vec![full.full(), full.lean.clone(), bare.full()],
            deleted,
            snapshot_incomplete: true,
        };
        assert_eq!(got, want);
        assert!(full.lean.omissions_unchanged);
        assert_eq!(got.upserted[0].omissions.len(), 1);
        // The framing says the message's exact length; the views'
        // encodings are shared, not copied.
        let total: usize = page.chunks.iter().map(|c| c.len()).sum();
        let head = &page.chunks[0];
        assert_eq!(head[0], 0);
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        assert_eq!(len + 5, total);
        assert!(
            page.chunks
                .iter()
                .any(|c| c.as_ptr() == full.encoded().base.as_ptr())
        );
        // Nothing set, nothing sent.
        let empty = Page::new(false, false, &[], &[]).decode().unwrap();
        assert_eq!(empty, v1::WatchGatewaysResponse::default());
    }

    #[test]
    fn a_list_page_is_the_list_answer() {
        let mut a = view(vec![omission(
            None,
            Item::Condition,
            &["X"],
            Rule::TooMany(8),
        )]);
        a.set_revision(3);
        let a = Arc::new(a);
        let got: v1::ListGatewaysResponse = Page::list(std::slice::from_ref(&a), "gw1.next", 7)
            .decode_as()
            .unwrap();
        assert_eq!(
            got,
            v1::ListGatewaysResponse {
                gateways: vec![a.full()],
                next_page_token: "gw1.next".into(),
                total_size: 7,
            }
        );
        let empty: v1::ListGatewaysResponse = Page::list(&[], "", 0).decode_as().unwrap();
        assert_eq!(empty, v1::ListGatewaysResponse::default());
    }
}
