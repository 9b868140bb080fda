//! What the store holds, as the importer last saw it: shared by the
//! report writer (which parts to write or delete) and the replicas'
//! liveness (a stored report's `lastSeenTime`), so that neither module
//! names the other for it.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

/// Which parts of each cluster the store holds (from the importer's
/// watch), so the writer can delete parts no count names any more, also
/// ones a previous process left.
pub type StoredParts = Arc<Mutex<BTreeMap<String, BTreeMap<u32, StoredPart>>>>;

/// One stored object as the importer last saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoredPart {
    /// The count of parts it was written for.
    pub(crate) parts: u32,
    /// The hash of its Gateways as `store::pack::parts_of` computes it (`None`:
    /// unreadable, or written in the earlier format: to be rewritten).
    pub(crate) hash: Option<u64>,
    /// On a head: its lastSeenTime (ms).
    pub(crate) last_seen_millis: i64,
}
