//! What a report's content does to the index: snapshot chunks assembled
//! into one replacement, deltas checked for sequence, validated against
//! [`gwhub_model::limits`] and the cluster's byte budget, then applied.
//! Apart from the stream's plumbing (Hello, acks, heartbeats, rate limit)
//! so the rules a report's content meets read in one place.

use std::collections::{BTreeMap, HashMap};

use gwhub_model::limits::*;
use gwhub_proto::convert::{self, check_count};
use gwhub_proto::v1::{self, change};
use prost::Message as _;
use tonic::Status;

use super::{AgentStream, Partial};
use crate::index::{ApplyError, Change};
use gwhub_hub_rules::aggregate::GatewayKey;

/// A Gateway's listener hostnames, `(listener, hostname)` (fleet DNS).
type Hostnames = Vec<(String, String)>;

/// A delta's changes, validated and converted, before they are applied.
struct Decoded {
    changes: Vec<Change>,
    /// Each changed Gateway's listener hostnames (`None`: deleted).
    hostnames: Vec<(GatewayKey, Option<Hostnames>)>,
    /// Sizes after the delta, of the Gateways it touches (`None`: deleted).
    resized: HashMap<GatewayKey, Option<u64>>,
    /// The cluster's report size after the delta.
    bytes: u64,
}

impl AgentStream {
    /// Takes one chunk of a snapshot; the last one replaces what the
    /// cluster reported.
    pub(super) fn snapshot(&mut self, chunk: v1::SnapshotChunk) -> Result<(), Status> {
        let in_order = match &self.partial {
            // A new snapshot may start at any time (it replaces a partial one).
            _ if chunk.chunk == 0 => true,
            Some(p) => p.id == chunk.snapshot_id && p.next_chunk == chunk.chunk,
            None => false,
        };
        if !in_order {
            // The rest of an abandoned snapshot: one request is enough. A
            // snapshot in progress is never continued past a skipped chunk.
            if self.resync_requested && self.partial.is_none() {
                return Ok(());
            }
            let expected = match &self.partial {
                Some(p) => format!("chunk {} of snapshot {}", p.next_chunk, p.id),
                None => "chunk 0 of a new snapshot".to_owned(),
            };
            self.request_resync(
                v1::ResyncReason::BadChunkOrder,
                format!(
                    "expected {expected}, got chunk {} of snapshot {}",
                    chunk.chunk, chunk.snapshot_id
                ),
            );
            return Ok(());
        }
        let mut partial = match self.partial.take() {
            Some(p) if chunk.chunk != 0 => p,
            _ => Partial {
                id: chunk.snapshot_id,
                next_chunk: 0,
                gateways: BTreeMap::new(),
                hostnames: BTreeMap::new(),
                sizes: HashMap::new(),
                bytes: 0,
            },
        };
        let total = partial.gateways.len() + chunk.gateways.len();
        if total > MAX_GATEWAYS {
            return Err(Status::resource_exhausted(format!(
                "snapshot {}: more than {MAX_GATEWAYS} Gateways (got {total} by chunk {})",
                chunk.snapshot_id, chunk.chunk
            )));
        }
        for (i, report) in chunk.gateways.into_iter().enumerate() {
            let size = report.encoded_len() as u64;
            partial.bytes += size;
            self.check_budget(partial.bytes, || {
                format!("snapshot {} chunk {}", chunk.snapshot_id, chunk.chunk)
            })?;
            let r = convert::report_from_proto(report).map_err(|e| {
                Status::invalid_argument(format!(
                    "snapshot {} chunk {}: gateways[{i}]: {e}",
                    chunk.snapshot_id, chunk.chunk
                ))
            })?;
            let key = GatewayKey::new(r.namespace, r.name);
            if partial.gateways.contains_key(&key) {
                return Err(Status::invalid_argument(format!(
                    "snapshot {}: Gateway {key} reported twice",
                    chunk.snapshot_id
                )));
            }
            partial.sizes.insert(key.clone(), size);
            partial.hostnames.insert(key.clone(), r.listener_hostnames);
            partial.gateways.insert(key, r.status);
        }
        partial.next_chunk = chunk.chunk.saturating_add(1);
        if !chunk.r#final {
            self.partial = Some(partial);
            return Ok(());
        }
        let session = self.session().clone();
        self.index
            .replace_listener_hostnames(session.cluster(), partial.hostnames);
        self.index
            .replace_snapshot(&session, partial.gateways)
            .map_err(|e| Status::aborted(e.to_string()))?;
        self.sizes = partial.sizes;
        self.bytes = partial.bytes;
        self.index.set_report_bytes(&session, self.bytes);
        self.applied = Some(chunk.seq);
        // Acks restart from the snapshot's seq even if it went backwards
        // (an agent that restarted).
        self.acked = None;
        self.resync_requested = false;
        Ok(())
    }

    /// Applies one delta, or drops it and asks for a resync when it does
    /// not follow what this stream applied.
    pub(super) fn delta(&mut self, delta: v1::Delta) -> Result<(), Status> {
        if !self.in_sequence(delta.seq) {
            return Ok(());
        }
        let v1::Delta {
            seq,
            changes,
            traceparent,
            observed_unix_millis,
            ..
        } = delta;
        let decoded = self.decode(seq, changes)?;
        self.apply(seq, &traceparent, observed_unix_millis, decoded)
    }

    /// Whether a delta numbered `seq` follows what this stream applied:
    /// not in the middle of a snapshot, after one, next in sequence.
    /// Otherwise a resync is requested (once) and the delta dropped.
    fn in_sequence(&mut self, seq: u64) -> bool {
        if let Some(p) = &self.partial {
            let message = format!(
                "delta {seq} in the middle of snapshot {} (before chunk {})",
                p.id, p.next_chunk
            );
            self.request_resync(v1::ResyncReason::BadChunkOrder, message);
            return false;
        }
        let Some(applied) = self.applied else {
            if !self.resync_requested {
                self.request_resync(
                    v1::ResyncReason::NoSnapshot,
                    format!("delta {seq} before any snapshot on this stream"),
                );
            }
            return false;
        };
        if Some(seq) != applied.checked_add(1) {
            let message = match applied.checked_add(1) {
                Some(next) => format!("expected seq {next}, got {seq}"),
                None => format!(
                    "no delta can follow seq {applied}, the largest sequence number (got {seq}); send a snapshot with a lower seq"
                ),
            };
            self.request_resync(v1::ResyncReason::SequenceGap, message);
            return false;
        }
        true
    }

    /// Delta `seq`'s changes validated and converted, within the cluster's
    /// budget (the stream ends otherwise, before anything is applied).
    fn decode(&self, seq: u64, delta_changes: Vec<v1::Change>) -> Result<Decoded, Status> {
        check_count("changes", delta_changes.len(), MAX_GATEWAYS)
            .map_err(|e| Status::resource_exhausted(format!("delta {seq}: {e}")))?;
        let mut changes = Vec::with_capacity(delta_changes.len());
        let mut hostnames = Vec::new();
        // Sizes after the delta, of the Gateways it touches (None: deleted).
        let mut resized: HashMap<GatewayKey, Option<u64>> = HashMap::new();
        let mut bytes = self.bytes;
        for (i, c) in delta_changes.into_iter().enumerate() {
            let at = |e: convert::Invalid| {
                Status::invalid_argument(format!("delta {seq} changes[{i}]: {e}"))
            };
            match c.change {
                Some(change::Change::Upsert(report)) => {
                    let size = report.encoded_len() as u64;
                    let r = convert::report_from_proto(report).map_err(at)?;
                    let key = GatewayKey::new(r.namespace, r.name);
                    bytes = bytes.saturating_sub(self.size_of(&resized, &key)) + size;
                    self.check_budget(bytes, || format!("delta {seq}"))?;
                    resized.insert(key.clone(), Some(size));
                    hostnames.push((key.clone(), Some(r.listener_hostnames)));
                    changes.push(Change::Upsert(key, r.status));
                }
                Some(change::Change::Delete(r)) => {
                    let (namespace, name) = convert::ref_from_proto(r).map_err(at)?;
                    let key = GatewayKey::new(namespace, name);
                    bytes = bytes.saturating_sub(self.size_of(&resized, &key));
                    resized.insert(key.clone(), None);
                    hostnames.push((key.clone(), None));
                    changes.push(Change::Delete(key));
                }
                None => {
                    return Err(Status::invalid_argument(format!(
                        "delta {seq} changes[{i}]: neither upsert nor delete"
                    )));
                }
            }
        }
        Ok(Decoded {
            changes,
            hostnames,
            resized,
            bytes,
        })
    }

    /// Applies decoded delta `seq` to the index in its own span (continuing
    /// the agent's `traceparent`), stamped with when the agent observed it,
    /// and keeps the cluster's new sizes.
    fn apply(
        &mut self,
        seq: u64,
        traceparent: &str,
        observed_unix_millis: i64,
        decoded: Decoded,
    ) -> Result<(), Status> {
        let Decoded {
            changes,
            hostnames,
            resized,
            bytes,
        } = decoded;
        let session = self.session().clone();
        // Continues the agent's trace (its report span) when it sent one;
        // a root, not a child of the long agent_stream span, when it did not.
        let span = tracing::info_span!(
            parent: None,
            "apply_delta",
            cluster = %session.cluster(),
            gateway = tracing::field::Empty,
            seq = seq,
            changes = changes.len(),
        );
        if let [key] = resized.keys().collect::<Vec<_>>().as_slice() {
            span.record("gateway", tracing::field::display(key));
        }
        gwhub_common::logging::set_parent(&span, traceparent);
        let _in_span = span.enter();
        // When the agent observed it and this span's trace, landing with
        // the changes, so the pass that reads them takes both
        // (`Index::apply_stamped`).
        let stamp = crate::index::Stamp::current(observed_unix_millis);
        for (key, h) in hostnames {
            self.index
                .set_listener_hostnames(session.cluster(), &key, h);
        }
        let applied = self.index.apply_stamped(&session, changes, stamp);
        applied.map_err(|e| match e {
            ApplyError::Superseded(e) => Status::aborted(e.to_string()),
            e @ ApplyError::TooManyGateways { .. } => {
                Status::resource_exhausted(format!("delta {seq}: {e}"))
            }
        })?;
        for (key, size) in resized {
            match size {
                Some(size) => self.sizes.insert(key, size),
                None => self.sizes.remove(&key),
            };
        }
        self.bytes = bytes;
        self.index.set_report_bytes(&session, bytes);
        self.applied = Some(seq);
        Ok(())
    }

    /// A Gateway's encoded size with the changes so far applied.
    fn size_of(&self, resized: &HashMap<GatewayKey, Option<u64>>, key: &GatewayKey) -> u64 {
        match resized.get(key) {
            Some(size) => size.unwrap_or(0),
            None => self.sizes.get(key).copied().unwrap_or(0),
        }
    }

    /// Ends the stream if the cluster would hold more than its budget; what
    /// the cluster reported before stays.
    fn check_budget(&self, bytes: u64, at: impl FnOnce() -> String) -> Result<(), Status> {
        let max = self.config.max_cluster_report_bytes;
        if bytes <= max {
            return Ok(());
        }
        self.counters.refused_cluster_report_bytes.inc();
        Err(Status::resource_exhausted(format!(
            "{}: cluster {:?} would hold more than {max} bytes of reported status, its budget (the hub's --max-cluster-report-bytes); its last good report is kept",
            at(),
            self.session().cluster()
        )))
    }
}
