//! Typed caches fed by watches, and the set of Gateways a change touched.
//!
//! Watches are untyped (`DynamicObject`) and every object is parsed on its
//! own: with a typed watch, one object that does not parse fails the whole
//! list and blocks its kind forever. Here it is logged, counted and skipped,
//! and the rest of the kind stays current.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use futures::StreamExt;
use gwhub_common::CoalescingQueue;
use gwhub_common::watch_events::{Change, changes};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::watcher;
use kube::runtime::{WatchStreamExt, watcher as watch};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::metrics::Metrics;
use crate::runtime::GatewayStore;

/// `(namespace, name)`; the namespace is empty for cluster-scoped kinds.
pub type Key = (String, String);

/// The live objects of one kind, `managedFields` stripped except where the
/// watch keeps them (Gateways: they say who writes which condition).
pub struct Cache<K> {
    map: RwLock<BTreeMap<Key, Arc<K>>>,
}

impl<K> Default for Cache<K> {
    fn default() -> Self {
        Self {
            map: RwLock::new(BTreeMap::new()),
        }
    }
}

impl<K: Resource> Cache<K> {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<Key, Arc<K>>> {
        self.map.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<Key, Arc<K>>> {
        self.map.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The object called `name` in `namespace` (`""` for cluster-scoped).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.read()
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Every object, in key order.
    pub fn all(&self) -> Vec<Arc<K>> {
        self.read().values().cloned().collect()
    }

    /// The objects `keep` accepts, in key order.
    pub(crate) fn filtered(&self, keep: impl Fn(&K) -> bool) -> Vec<Arc<K>> {
        self.read().values().filter(|o| keep(o)).cloned().collect()
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn key_of<K: Resource>(obj: &K) -> Key {
    (
        obj.meta().namespace.clone().unwrap_or_default(),
        obj.meta().name.clone().unwrap_or_default(),
    )
}

/// Which Gateways (by name, in the scoped namespace) a change concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Touch {
    Nothing,
    Gateway(String),
    All,
}

#[derive(Default)]
struct DirtyInner {
    all: bool,
    synced: BTreeSet<&'static str>,
}

/// Gateways waiting to be re-evaluated: one entry per Gateway however many
/// changes touched it, so a burst costs one evaluation (and at most one write).
#[derive(Default)]
pub struct Dirty {
    /// "Every Gateway", and the kinds listed once, beside the queue.
    inner: Mutex<DirtyInner>,
    names: CoalescingQueue<String>,
}

/// What the reconciler takes from [`Dirty`] in one go.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Batch {
    pub all: bool,
    pub names: BTreeSet<String>,
}

impl Dirty {
    fn lock(&self) -> MutexGuard<'_, DirtyInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks what `touch` names for re-evaluation.
    pub fn touch(&self, touch: Touch) {
        match touch {
            Touch::Nothing => {}
            Touch::Gateway(name) => self.names.insert(name),
            Touch::All => {
                self.lock().all = true;
                self.names.wake();
            }
        }
    }

    /// Marks what `touch` names after `delay` (a retry), unless
    /// `shutdown` comes first.
    pub(crate) fn touch_after(
        self: &Arc<Self>,
        touch: Touch,
        delay: Duration,
        shutdown: &CancellationToken,
    ) {
        let (dirty, shutdown) = (self.clone(), shutdown.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = tokio::time::sleep(delay) => dirty.touch(touch),
            }
        });
    }

    /// Records that `kind`'s first list is in its cache.
    pub fn synced(&self, kind: &'static str) {
        let mut d = self.lock();
        d.synced.insert(kind);
        d.all = true;
        drop(d);
        self.names.wake();
    }

    /// How many kinds have been listed once.
    pub(crate) fn synced_count(&self) -> usize {
        self.lock().synced.len()
    }

    /// Takes everything marked so far.
    pub fn take(&self) -> Batch {
        let all = std::mem::take(&mut self.lock().all);
        Batch {
            all,
            names: self.names.take_keys(),
        }
    }

    /// Resolves when something was marked since the last call.
    pub async fn changed(&self) {
        self.names.notified().await
    }
}

/// Which watches are failing. While any is, the agent cannot see its
/// cluster, so it stops vouching for what it last reported
/// (`GatewayStore::set_source_ok`) and the hub marks the report stale.
pub struct WatchHealth {
    failing: Mutex<BTreeSet<&'static str>>,
    store: Arc<GatewayStore>,
}

impl WatchHealth {
    pub fn new(store: Arc<GatewayStore>) -> Self {
        WatchHealth {
            failing: Mutex::new(BTreeSet::new()),
            store,
        }
    }

    fn set(&self, kind: &'static str, ok: bool) {
        let mut failing = self.failing.lock().unwrap_or_else(|e| e.into_inner());
        let changed = if ok {
            failing.remove(kind)
        } else {
            failing.insert(kind)
        };
        if changed {
            self.store.set_source_ok(failing.is_empty());
        }
    }
}

/// What a watch needs besides its API: where to report and what it touches.
pub(crate) struct Follow<K> {
    pub(crate) kind: &'static str,
    pub(crate) cache: Arc<Cache<K>>,
    pub(crate) dirty: Arc<Dirty>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) health: Arc<WatchHealth>,
    /// The Gateways an object concerns (called for the old and new version).
    pub(crate) touches: Box<dyn Fn(&K) -> Touch + Send + Sync>,
    /// Keep `metadata.managedFields` (else stripped to save memory).
    pub(crate) keep_managed_fields: bool,
}

/// An untyped API for `K`'s resource, namespaced when `namespace` is given.
pub(crate) fn dynamic_api<K>(client: kube::Client, namespace: Option<&str>) -> Api<DynamicObject>
where
    K: Resource,
    K::DynamicType: Default,
{
    let ar = ApiResource::erase::<K>(&K::DynamicType::default());
    match namespace {
        Some(ns) => Api::namespaced_with(client, ns, &ar),
        None => Api::all_with(client, &ar),
    }
}

impl<K> Follow<K>
where
    K: Resource + DeserializeOwned + Clone + Debug + Send + Sync + 'static,
{
    /// Follows `api` (filtered by `config`) into the cache until `shutdown`.
    /// Watch errors are logged and counted; the watcher backs off and
    /// re-lists, so nothing here ever stops for good.
    pub(crate) async fn run(
        self,
        api: Api<DynamicObject>,
        config: watcher::Config,
        shutdown: CancellationToken,
    ) {
        let keep = self.keep_managed_fields;
        let stream = watch::watcher(api, config)
            .default_backoff()
            .modify(move |o| {
                if !keep {
                    o.managed_fields_mut().clear()
                }
            });
        let mut changes = std::pin::pin!(changes(stream, shutdown));
        while let Some(change) = changes.next().await {
            match change {
                Change::Failed(e) => {
                    self.health.set(self.kind, false);
                    Metrics::bump(&self.metrics.watch_errors);
                    tracing::warn!(kind = self.kind, error = %e, "watch failed; retrying with backoff");
                }
                Change::Listed(objects) => {
                    self.health.set(self.kind, true);
                    let fresh: BTreeMap<Key, Arc<K>> = objects
                        .into_iter()
                        .filter_map(|obj| self.parse(obj))
                        .map(|k| (key_of(&k), Arc::new(k)))
                        .collect();
                    *self.cache.write() = fresh;
                    // A re-list may have missed deletes and changes: every
                    // Gateway is re-evaluated (and the first one makes the
                    // kind count as synced).
                    self.dirty.synced(self.kind);
                }
                Change::Applied(obj) => {
                    self.health.set(self.kind, true);
                    if let Some(k) = self.parse(obj) {
                        let new = (self.touches)(&k);
                        let old = self.cache.write().insert(key_of(&k), Arc::new(k));
                        self.touch_both(old.as_deref(), new);
                    }
                }
                Change::Deleted(obj) => {
                    self.health.set(self.kind, true);
                    let key = (
                        obj.metadata.namespace.clone().unwrap_or_default(),
                        obj.metadata.name.clone().unwrap_or_default(),
                    );
                    let old = self.cache.write().remove(&key);
                    match old {
                        Some(old) => self.dirty.touch((self.touches)(&old)),
                        // Never parsed: whatever it touched, look again.
                        None => self.dirty.touch(Touch::All),
                    }
                }
            }
        }
    }

    fn touch_both(&self, old: Option<&K>, new: Touch) {
        if let Some(old) = old {
            let before = (self.touches)(old);
            if before != new {
                self.dirty.touch(before);
            }
        }
        self.dirty.touch(new);
    }

    fn parse(&self, obj: DynamicObject) -> Option<K> {
        let name = format!(
            "{}/{}",
            obj.metadata.namespace.as_deref().unwrap_or_default(),
            obj.metadata.name.as_deref().unwrap_or_default()
        );
        match obj.try_parse::<K>() {
            Ok(k) => Some(k),
            Err(e) => {
                Metrics::bump(&self.metrics.parse_errors);
                tracing::warn!(kind = self.kind, object = %name, error = %e, "object does not parse; skipped");
                None
            }
        }
    }
}

/// [`dynamic_api`] for the kind of `cache` (lets a macro name the kind once).
pub(crate) fn dynamic_api_for<K>(
    _cache: &Arc<Cache<K>>,
    client: kube::Client,
    namespace: Option<&str>,
) -> Api<DynamicObject>
where
    K: Resource,
    K::DynamicType: Default,
{
    dynamic_api::<K>(client, namespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_burst_is_one_entry_per_gateway() {
        let d = Dirty::default();
        for _ in 0..100 {
            d.touch(Touch::Gateway("a".into()));
            d.touch(Touch::Gateway("b".into()));
        }
        d.touch(Touch::Nothing);
        tokio::time::timeout(std::time::Duration::from_secs(1), d.changed())
            .await
            .expect("a touch before the wait is not lost");
        let batch = d.take();
        assert!(!batch.all);
        assert_eq!(batch.names.into_iter().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(d.take(), Batch::default());
        d.synced("Gateway");
        d.synced("Gateway");
        assert_eq!(d.synced_count(), 1);
        assert!(d.take().all, "a (re-)list re-evaluates everything");
    }
}
