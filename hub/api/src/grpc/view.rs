//! Watch and list messages put together from the views' shared
//! encodings: the index encodes each view once when it publishes it
//! ([`crate::index::GatewayView`]); this only adds the gRPC framing and the
//! message's own fields, so every watcher shares the views' bytes.

use std::sync::Arc;

use gwhub_proto::v1;
use prost::Message;
use tonic::codegen::Bytes;

use crate::index::{GatewayView, OMISSIONS_UNCHANGED};

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
            if !e.clusters.is_empty() {
                chunks.push_back(e.clusters.clone());
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::testing::{omission, set_revision, view};
    use gwhub_hub_rules::aggregate::{GatewayKey, Item, Rule};

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
        full.clusters = vec!["east".to_owned(), "west".to_owned()].into();
        set_revision(&mut full, 7);
        let full = Arc::new(full);
        let mut bare = view(Vec::new());
        bare.key = GatewayKey::new("ns", "bare");
        bare.lean.name = "bare".into();
        set_revision(&mut bare, 9);
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
            upserted: vec![full.full(), full.lean(), bare.full()],
            deleted,
            snapshot_incomplete: true,
        };
        assert_eq!(got, want);
        assert!(full.lean.omissions_unchanged);
        assert_eq!(got.upserted[1].clusters, ["east", "west"]);
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
        set_revision(&mut a, 3);
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
