//! What the agent currently knows (every in-scope Gateway with its status)
//! and what the hub has not heard yet, kept under one lock so a snapshot
//! and the deltas after it can never disagree.
//!
//! Sources (a directory, the Kubernetes API, a demo's simulation) write here;
//! the hub client reads: a full snapshot on (re)connect or resync, which
//! clears the outbox, and deltas from the outbox after that.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use gateway_api::apis::standard::gateways::Gateway;
use gwhub_model::status::same_gateway as same_ignoring_time;
use tokio::sync::{Notify, watch};

use super::outbox::{Change, Outbox, Pushed};

pub use gwhub_model::GatewayKey;

/// A pending change as the hub client sends it.
pub type GatewayChange = Change<Arc<Gateway>>;

/// What the hub client should send next.
#[derive(Debug)]
pub enum Next {
    /// Deltas, oldest first, and when the earliest of them was made (unix
    /// milliseconds; 0: unknown), the start of the propagation the hub
    /// measures, and the W3C `traceparent` of the reconcile that made it
    /// ("": not traced).
    Deltas(Vec<(GatewayKey, GatewayChange)>, i64, String),
    /// The outbox overflowed: only a full snapshot brings the hub up to date.
    Snapshot,
}

/// How many changes a diff produced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Diff {
    pub upserts: usize,
    pub deletes: usize,
}

impl Diff {
    pub fn is_empty(&self) -> bool {
        self.upserts == 0 && self.deletes == 0
    }
}

struct Inner {
    current: BTreeMap<GatewayKey, Arc<Gateway>>,
    outbox: Outbox<GatewayKey, Arc<Gateway>>,
    /// When the oldest change in the outbox was made (unix milliseconds).
    pending_since: Option<i64>,
    /// The trace of the reconcile that made the oldest change (see
    /// [`gwhub_common::logging::traceparent`]).
    pending_trace: Option<String>,
}

impl Inner {
    fn upsert(&mut self, key: GatewayKey, gw: Gateway) -> bool {
        if let Some(old) = self.current.get(&key)
            && same_ignoring_time(old, &gw)
        {
            return false;
        }
        let gw = Arc::new(gw);
        self.current.insert(key.clone(), gw.clone());
        self.queue(key, Change::Upsert(gw));
        true
    }

    fn delete(&mut self, key: &GatewayKey) -> bool {
        if self.current.remove(key).is_none() {
            return false;
        }
        self.queue(key.clone(), Change::Delete);
        true
    }

    fn queue(&mut self, key: GatewayKey, change: GatewayChange) {
        self.pending_since
            .get_or_insert_with(|| jiff::Timestamp::now().as_millisecond());
        self.pending_trace
            .get_or_insert_with(gwhub_common::logging::traceparent);
        // The reconcile span (if any) names the Gateway it changed.
        tracing::Span::current().record("gateway", tracing::field::display(&key));
        if self.outbox.push(key, change) == Pushed::Overflow {
            tracing::debug!("outbox overflowed; the hub gets a full snapshot instead");
        }
    }
}

/// The agent's Gateways and its outbox; cheap to share (`Arc`).
pub struct GatewayStore {
    inner: Mutex<Inner>,
    changed: Notify,
    /// State read by probes and waiters (not a shutdown signal: that is
    /// the runtime's `CancellationToken`).
    ready: watch::Sender<bool>,
    /// False while the source (the API server's watches) is failing.
    source_ok: watch::Sender<bool>,
}

impl fmt::Debug for GatewayStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.lock();
        f.debug_struct("GatewayStore")
            .field("gateways", &inner.current.len())
            .field("pending", &inner.outbox.len())
            .finish()
    }
}

/// Default outbox capacity: far above a cluster's Gateway count (the spec
/// plans for ~100), so overflow means something is badly wrong.
pub const DEFAULT_MAX_PENDING: usize = 100_000;

impl Default for GatewayStore {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_PENDING)
    }
}

impl GatewayStore {
    /// An empty store whose outbox holds at most `max_pending` Gateways.
    pub fn new(max_pending: usize) -> Self {
        Self {
            inner: Mutex::new(Inner {
                current: BTreeMap::new(),
                outbox: Outbox::new(max_pending),
                pending_since: None,
                pending_trace: None,
            }),
            changed: Notify::new(),
            ready: watch::Sender::new(false),
            source_ok: watch::Sender::new(true),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent data (every
        // mutation is a single map operation), so poisoning is ignored.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets one Gateway; returns whether the hub has to hear about it
    /// (a change of timestamps only is not a change).
    pub fn upsert(&self, gw: Gateway) -> bool {
        let changed = self.lock().upsert(GatewayKey::of(&gw), gw);
        if changed {
            self.changed.notify_one();
        }
        changed
    }

    /// Removes one Gateway; returns whether it was there.
    pub fn delete(&self, key: &GatewayKey) -> bool {
        let changed = self.lock().delete(key);
        if changed {
            self.changed.notify_one();
        }
        changed
    }

    /// Makes `gateways` the complete set: upserts what changed, deletes
    /// what is gone.
    pub fn replace_all(&self, gateways: impl IntoIterator<Item = Gateway>) -> Diff {
        let next: BTreeMap<GatewayKey, Gateway> = gateways
            .into_iter()
            .map(|gw| (GatewayKey::of(&gw), gw))
            .collect();
        let mut diff = Diff::default();
        {
            let mut inner = self.lock();
            let gone: Vec<GatewayKey> = inner
                .current
                .keys()
                .filter(|k| !next.contains_key(k))
                .cloned()
                .collect();
            for key in gone {
                if inner.delete(&key) {
                    diff.deletes += 1;
                }
            }
            for (key, gw) in next {
                if inner.upsert(key, gw) {
                    diff.upserts += 1;
                }
            }
        }
        if !diff.is_empty() {
            self.changed.notify_one();
        }
        diff
    }

    /// Every Gateway, in key order, for a full snapshot; clears the outbox,
    /// since the snapshot carries everything pending.
    pub fn snapshot(&self) -> Vec<Arc<Gateway>> {
        let mut inner = self.lock();
        inner.outbox.clear();
        inner.pending_since = None;
        inner.pending_trace = None;
        inner.current.values().cloned().collect()
    }

    /// Up to `max` pending deltas (possibly none), or a demand for a snapshot.
    pub fn next(&self, max: usize) -> Next {
        let mut inner = self.lock();
        if inner.outbox.overflowed() {
            Next::Snapshot
        } else {
            let deltas = inner.outbox.drain(max);
            // What stays pending is no older than what went.
            let (since, trace) = match inner.outbox.is_empty() {
                true => (inner.pending_since.take(), inner.pending_trace.take()),
                false => (inner.pending_since, inner.pending_trace.clone()),
            };
            Next::Deltas(deltas, since.unwrap_or(0), trace.unwrap_or_default())
        }
    }

    /// Resolves when something may have changed since the last call
    /// (single consumer; a change before the call is not lost).
    pub async fn changed(&self) {
        self.changed.notified().await
    }

    /// Declares the store complete: the source has read its first full
    /// state. Until then the hub gets no snapshot, since an empty or partial
    /// one would tell it Gateways were deleted.
    pub fn mark_ready(&self) {
        self.ready.send_if_modified(|r| !std::mem::replace(r, true));
    }

    /// Whether [`mark_ready`](Self::mark_ready) was called.
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// Resolves once the store is ready.
    pub async fn wait_ready(&self) {
        let mut rx = self.ready.subscribe();
        // The sender lives in `self`, so this cannot fail while we wait.
        let _ = rx.wait_for(|r| *r).await;
    }

    /// Whether the store can be vouched for: false while the source cannot
    /// read its cluster. The hub client sends no heartbeats meanwhile, so
    /// the hub marks this cluster's report stale rather than showing, as
    /// fresh, a status nobody can check.
    pub(crate) fn set_source_ok(&self, ok: bool) {
        self.source_ok
            .send_if_modified(|s| std::mem::replace(s, ok) != ok);
    }

    /// Follows [`set_source_ok`](Self::set_source_ok).
    pub(crate) fn subscribe_source(&self) -> watch::Receiver<bool> {
        self.source_ok.subscribe()
    }

    /// The current Gateway of `key`.
    pub fn get(&self, key: &GatewayKey) -> Option<Arc<Gateway>> {
        self.lock().current.get(key).cloned()
    }

    /// Number of Gateways known.
    pub fn len(&self) -> usize {
        self.lock().current.len()
    }

    /// Whether no Gateway is known.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of Gateways with a change the hub has not been sent.
    pub fn pending(&self) -> usize {
        self.lock().outbox.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gateway_api::apis::standard::gateways::GatewayStatus;
    use gwhub_model::conditions;

    fn gw(name: &str, reason: &str, at: i64) -> Gateway {
        let mut g = Gateway::default();
        g.metadata.namespace = Some("openshift-ingress".into());
        g.metadata.name = Some(name.into());
        g.metadata.generation = Some(1);
        let t = jiff::Timestamp::from_second(at).unwrap();
        g.status = Some(GatewayStatus {
            conditions: Some(vec![conditions::new(
                "LoadBalancerReady",
                "False",
                reason,
                "m",
                Some(1),
                t,
            )]),
            ..Default::default()
        });
        g
    }

    fn keys(next: Next) -> Vec<String> {
        match next {
            Next::Deltas(d, _, _) => d
                .into_iter()
                .map(|(k, c)| match c {
                    Change::Upsert(_) => format!("+{k}"),
                    Change::Delete => format!("-{k}"),
                })
                .collect(),
            Next::Snapshot => vec!["snapshot".into()],
        }
    }

    /// Deltas carry when their oldest change was made; what stays pending
    /// keeps that time, an empty outbox has none.
    #[test]
    fn deltas_carry_when_their_oldest_change_was_made() {
        let s = GatewayStore::default();
        let before = jiff::Timestamp::now().as_millisecond();
        assert!(s.upsert(gw("a", "Pending", 1)));
        assert!(s.upsert(gw("b", "Pending", 1)));
        let Next::Deltas(first, since, _) = s.next(1) else {
            panic!("deltas expected")
        };
        assert_eq!(first.len(), 1);
        assert!(since >= before, "{since} < {before}");
        let Next::Deltas(rest, again, _) = s.next(10) else {
            panic!("deltas expected")
        };
        assert_eq!((rest.len(), again), (1, since));
        let Next::Deltas(none, unknown, _) = s.next(10) else {
            panic!("deltas expected")
        };
        assert_eq!((none.len(), unknown), (0, 0));
    }

    #[test]
    fn time_only_change_is_not_a_change() {
        let s = GatewayStore::default();
        assert!(s.upsert(gw("a", "Pending", 1)));
        s.snapshot();
        assert!(!s.upsert(gw("a", "Pending", 2)));
        assert_eq!(s.pending(), 0);
        assert!(s.upsert(gw("a", "Failed", 2)));
        assert_eq!(keys(s.next(10)), ["+openshift-ingress/a"]);
    }

    #[test]
    fn listener_condition_times_are_ignored_but_content_is_not() {
        use gateway_api::apis::standard::gateways::GatewayStatusListeners;
        let with_listener = |at: i64, reason: &str| {
            let mut g = gw("a", "x", 1);
            g.status.as_mut().unwrap().listeners = Some(vec![GatewayStatusListeners {
                name: "https".into(),
                conditions: vec![conditions::new(
                    "DNSReady",
                    "True",
                    reason,
                    "",
                    Some(1),
                    jiff::Timestamp::from_second(at).unwrap(),
                )],
                ..Default::default()
            }]);
            g
        };
        assert!(same_ignoring_time(
            &with_listener(1, "R"),
            &with_listener(2, "R")
        ));
        assert!(!same_ignoring_time(
            &with_listener(1, "R"),
            &with_listener(1, "S")
        ));
        assert!(!same_ignoring_time(
            &with_listener(1, "R"),
            &gw("a", "x", 1)
        ));
        let mut other_uid = gw("a", "x", 1);
        other_uid.metadata.uid = Some("new".into());
        assert!(!same_ignoring_time(&other_uid, &gw("a", "x", 1)));
    }

    #[test]
    fn replace_all_diffs() {
        let s = GatewayStore::default();
        let d = s.replace_all([gw("a", "x", 1), gw("b", "x", 1)]);
        assert_eq!(
            d,
            Diff {
                upserts: 2,
                deletes: 0
            }
        );
        assert_eq!(s.snapshot().len(), 2);
        let d = s.replace_all([gw("b", "x", 5), gw("c", "x", 1)]);
        assert_eq!(
            d,
            Diff {
                upserts: 1,
                deletes: 1
            }
        );
        assert_eq!(
            keys(s.next(10)),
            ["-openshift-ingress/a", "+openshift-ingress/c"]
        );
        assert!(s.replace_all([gw("b", "x", 9), gw("c", "x", 9)]).is_empty());
    }

    #[test]
    fn snapshot_clears_pending_and_overflow() {
        let s = GatewayStore::new(1);
        s.upsert(gw("a", "x", 1));
        s.upsert(gw("b", "x", 1));
        assert!(matches!(s.next(10), Next::Snapshot));
        assert_eq!(s.snapshot().len(), 2);
        assert_eq!(keys(s.next(10)), Vec::<String>::new());
    }

    #[tokio::test]
    async fn change_before_wait_is_not_lost() {
        let s = GatewayStore::default();
        s.upsert(gw("a", "x", 1));
        tokio::time::timeout(std::time::Duration::from_secs(1), s.changed())
            .await
            .expect("notified");
    }
}
