//! Writes the aggregate onto the hub Gateways: a watch of the hub Gateways
//! (kept as the little the writer needs, managedFields read then dropped),
//! one queue with one entry per Gateway (so it is bounded and a burst of
//! reports becomes one write), and one task that server-side applies the
//! hub's fields — only while this replica leads, and only when something but
//! time differs from the live status.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus, GatewayStatusListeners};
use gwhub_common::Condition;
use gwhub_common::conditions::same_ignoring_time;
use gwhub_common::pace::sleep_until;
use jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::FIELD_MANAGER;
use super::metrics::Metrics;
use crate::aggregate::{self, ClusterReport, GatewayKey, HubGateway, Options};
use crate::index::Index;

/// What the writer keeps of a live hub Gateway.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveHub {
    pub generation: i64,
    pub status: GatewayStatus,
    /// Condition types field manager `gwhub` owns.
    pub owned: BTreeSet<String>,
    /// Condition types another manager set through the status subresource
    /// (a deliberate writer, unlike the CRD's creation-time defaults).
    pub others: BTreeSet<String>,
    /// Whether field manager `gwhub` owns `status.addresses` (an atomic
    /// list): an empty one must then be applied (left out, so the API
    /// server drops what the hub wrote); otherwise it is another
    /// controller's, not the hub's to empty.
    pub owns_addresses: bool,
    /// Whether `gwhub` owns entries of `status.listeners`.
    pub owns_listeners: bool,
}

impl LiveHub {
    pub fn from_gateway(gw: &Gateway) -> Self {
        let mut owned = BTreeSet::new();
        let mut others = BTreeSet::new();
        let (mut owns_addresses, mut owns_listeners) = (false, false);
        for entry in gw.metadata.managed_fields.iter().flatten() {
            let fields = entry.fields_v1.as_ref().map(|f| &f.0);
            let types = owned_condition_types(fields);
            if entry.manager.as_deref() == Some(FIELD_MANAGER) {
                owned.extend(types);
                let status = fields.and_then(|f| f.get("f:status"));
                owns_addresses |= status.and_then(|s| s.get("f:addresses")).is_some();
                owns_listeners |= status
                    .and_then(|s| s.get("f:listeners"))
                    .and_then(Value::as_object)
                    .is_some_and(|l| !l.is_empty());
            } else if entry.subresource.as_deref() == Some("status") {
                others.extend(types);
            }
        }
        LiveHub {
            generation: gw.metadata.generation.unwrap_or(0),
            status: gw.status.clone().unwrap_or_default(),
            owned,
            others,
            owns_addresses,
            owns_listeners,
        }
    }

    /// Splits the live conditions into the hub's (for lastTransitionTime)
    /// and other writers' (kept, counted toward the 8). The managedFields
    /// decide where they can; otherwise the engine's rule for unknown
    /// ownership (`HubGateway::from_existing`).
    pub fn hub_gateway(&self, reports: &[ClusterReport<'_>]) -> HubGateway {
        let existing = self.status.conditions.clone().unwrap_or_default();
        let guess = HubGateway::from_existing(self.generation, &existing, reports);
        let guessed_ours: BTreeSet<&str> =
            guess.previous.iter().map(|c| c.type_.as_str()).collect();
        let (previous, foreign) = existing.into_iter().partition(|c: &Condition| {
            self.owned.contains(&c.type_)
                || (guessed_ours.contains(c.type_.as_str()) && !self.others.contains(&c.type_))
        });
        HubGateway {
            generation: self.generation,
            previous,
            foreign,
        }
    }
}

/// The condition types a managedFields entry's fieldsV1 holds under
/// `status.conditions` (keys like `k:{"type":"Accepted"}`).
fn owned_condition_types(fields: Option<&Value>) -> Vec<String> {
    let Some(conds) = fields
        .and_then(|f| f.get("f:status"))
        .and_then(|s| s.get("f:conditions"))
        .and_then(Value::as_object)
    else {
        return Vec::new();
    };
    conds
        .keys()
        .filter_map(|k| k.strip_prefix("k:"))
        .filter_map(|k| serde_json::from_str::<Value>(k).ok())
        .filter_map(|k| k.get("type").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

fn sorted_conditions(list: Option<&Vec<Condition>>) -> Vec<Condition> {
    let mut v = list.cloned().unwrap_or_default();
    v.sort_by(|a, b| a.type_.cmp(&b.type_));
    v
}

fn same_listeners(
    a: Option<&Vec<GatewayStatusListeners>>,
    b: Option<&Vec<GatewayStatusListeners>>,
) -> bool {
    let a = a.map(Vec::as_slice).unwrap_or_default();
    let b = b.map(Vec::as_slice).unwrap_or_default();
    let by_name = |l: &[GatewayStatusListeners]| -> BTreeMap<String, GatewayStatusListeners> {
        l.iter().map(|x| (x.name.clone(), x.clone())).collect()
    };
    let (a, b) = (by_name(a), by_name(b));
    a.len() == b.len()
        && a.iter().zip(&b).all(|((na, la), (nb, lb))| {
            na == nb
                && la.attached_routes == lb.attached_routes
                && la.supported_kinds.as_deref().unwrap_or_default()
                    == lb.supported_kinds.as_deref().unwrap_or_default()
                && same_ignoring_time(
                    &sorted_conditions(Some(&la.conditions)),
                    &sorted_conditions(Some(&lb.conditions)),
                )
        })
}

/// Whether writing `want` over `live` would change anything but times.
pub fn same_status(live: &GatewayStatus, want: &GatewayStatus) -> bool {
    live.addresses.as_deref().unwrap_or_default() == want.addresses.as_deref().unwrap_or_default()
        && same_listeners_and_conditions(live, want)
}

/// [`same_status`] without the addresses.
fn same_listeners_and_conditions(live: &GatewayStatus, want: &GatewayStatus) -> bool {
    same_listeners(live.listeners.as_ref(), want.listeners.as_ref())
        && same_ignoring_time(
            &sorted_conditions(live.conditions.as_ref()),
            &sorted_conditions(want.conditions.as_ref()),
        )
}

/// Whether applying `want` the way [`StatusWriter`] applies it would
/// change nothing but times over `live`. An empty address list is left out
/// of the apply: `status.addresses` is an atomic list, so applying `[]`
/// would take it over (and empty it) on a Gateway in scope that no cluster
/// reports, maybe a real one; left out, it releases what the hub wrote
/// before. So an empty list changes something only where the hub owns the
/// live one. Listeners are keyed by name: applying `[]` removes only the
/// hub's entries (when those were all, the list is first set empty, see
/// `StatusWriter::write`).
fn apply_is_noop(live: &LiveHub, want: &GatewayStatus) -> bool {
    let want_addresses = want.addresses.as_deref().unwrap_or_default();
    let addresses_same = if want_addresses.is_empty() {
        !live.owns_addresses
    } else {
        live.status.addresses.as_deref().unwrap_or_default() == want_addresses
    };
    addresses_same && same_listeners_and_conditions(&live.status, want)
}

/// Server-side apply cannot leave the status valid when the hub stops
/// writing something it wrote: its last listener entries leave the list
/// null, and a condition whose entry the CRD defaulted at creation (so
/// another manager co-owns its key) is left as a bare `type`, both of which
/// the CRD refuses, failing the whole write (the hub's own NoClusters
/// condition with it). So first remove them with a merge patch on the
/// fresh object, guarded by its resourceVersion; the apply follows.
async fn clear_before_apply(
    api: &Api<Gateway>,
    key: &GatewayKey,
    listeners: bool,
    dropped: &BTreeSet<&str>,
) {
    let fresh = match api.get_status(&key.name).await {
        Ok(gw) => gw,
        Err(e) => {
            tracing::debug!(gateway = %key, error = %e, "cannot read the hub Gateway before clearing; the apply will tell");
            return;
        }
    };
    let conditions = fresh
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .cloned()
        .unwrap_or_default();
    let kept: Vec<&Condition> = conditions
        .iter()
        .filter(|c| !dropped.contains(c.type_.as_str()))
        .collect();
    let mut status = serde_json::Map::new();
    if listeners {
        status.insert("listeners".into(), json!([]));
    }
    if kept.len() != conditions.len() {
        status.insert("conditions".into(), json!(kept));
    }
    if status.is_empty() {
        return;
    }
    let patch = json!({
        "metadata": {"resourceVersion": fresh.metadata.resource_version},
        "status": status,
    });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    if let Err(e) = api
        .patch_status(&key.name, &params, &Patch::Merge(&patch))
        .await
    {
        tracing::debug!(gateway = %key, error = %e, "clearing before the apply failed; the apply will tell");
    }
}

/// Hub Gateways waiting for a write; one entry per Gateway.
#[derive(Default)]
pub struct Queue {
    dirty: Mutex<BTreeSet<GatewayKey>>,
    notify: Notify,
}

impl Queue {
    pub fn push(&self, key: GatewayKey) {
        self.dirty.lock().insert(key);
        self.notify.notify_one();
    }

    fn extend(&self, keys: impl IntoIterator<Item = GatewayKey>) {
        self.dirty.lock().extend(keys);
        self.notify.notify_one();
    }

    fn take(&self) -> BTreeSet<GatewayKey> {
        std::mem::take(&mut *self.dirty.lock())
    }
}

/// The live hub Gateways, by key.
pub type Cache = Mutex<BTreeMap<GatewayKey, LiveHub>>;

/// Keeps [`Cache`] current and queues every Gateway that changed. `synced`
/// turns true once the first full list is in.
pub async fn run_gateway_watch(
    api: Api<Gateway>,
    cache: Arc<Cache>,
    queue: Arc<Queue>,
    synced: watch::Sender<bool>,
    shutdown: CancellationToken,
) {
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed()
        .take_until(shutdown.cancelled_owned())
        .boxed();
    let mut listing: BTreeMap<GatewayKey, LiveHub> = BTreeMap::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => listing.clear(),
            Ok(Event::InitApply(gw)) => {
                listing.insert(GatewayKey::of(&gw), LiveHub::from_gateway(&gw));
            }
            Ok(Event::InitDone) => {
                let keys: Vec<GatewayKey> = listing.keys().cloned().collect();
                *cache.lock() = std::mem::take(&mut listing);
                queue.extend(keys);
                synced.send_replace(true);
            }
            Ok(Event::Apply(gw)) => {
                let key = GatewayKey::of(&gw);
                let live = LiveHub::from_gateway(&gw);
                let changed = cache.lock().insert(key.clone(), live.clone()) != Some(live);
                if changed {
                    queue.push(key);
                }
            }
            Ok(Event::Delete(gw)) => {
                cache.lock().remove(&GatewayKey::of(&gw));
            }
            Err(e) => tracing::warn!(error = %e, "watching hub Gateways failed; retrying"),
        }
    }
}

/// Queues every hub Gateway whose aggregate the index changed.
pub async fn run_index_watch(index: Index, queue: Arc<Queue>, shutdown: CancellationToken) {
    let mut views = index.subscribe();
    let mut seen: BTreeMap<GatewayKey, u64> = BTreeMap::new();
    loop {
        let changed: Vec<GatewayKey> = {
            let views = views.borrow_and_update();
            let mut changed: Vec<GatewayKey> = seen
                .keys()
                .filter(|k| !views.gateways.contains_key(*k))
                .cloned()
                .collect();
            for (k, v) in &views.gateways {
                if seen.get(k) != Some(&v.revision()) {
                    changed.push(k.clone());
                }
            }
            seen = views
                .gateways
                .iter()
                .map(|(k, v)| (k.clone(), v.revision()))
                .collect();
            changed
        };
        if !changed.is_empty() {
            queue.extend(changed);
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            r = views.changed() => if r.is_err() { return },
        }
    }
}

/// The writer task.
pub struct StatusWriter {
    pub client: Client,
    pub index: Index,
    pub options: Options,
    pub cache: Arc<Cache>,
    pub queue: Arc<Queue>,
    pub metrics: Arc<Metrics>,
    /// Minimum spacing of write passes: a lone change is written at once,
    /// a burst at most once per hub Gateway per window
    /// ([`gwhub_common::KeyedPacer`]).
    pub debounce: Duration,
    /// Delay before a failed write is tried again: the base, doubling per
    /// consecutive failure of the same hub Gateway (a refused status is not
    /// re-sent every second forever).
    pub retry: gwhub_common::Backoff<GatewayKey>,
}

impl StatusWriter {
    /// Writes while `leader` is true and the hub Gateways and stored
    /// reports are loaded, until `shutdown`.
    pub async fn run(
        self,
        mut leader: watch::Receiver<bool>,
        mut ready: watch::Receiver<bool>,
        shutdown: CancellationToken,
    ) {
        // Per hub Gateway: a write for one never waits for another's window.
        let mut pacer = gwhub_common::KeyedPacer::<GatewayKey>::new(self.debounce);
        // Queued hub Gateways still inside their window.
        let mut waiting: BTreeSet<GatewayKey> = BTreeSet::new();
        loop {
            let active = *leader.borrow_and_update() && *ready.borrow_and_update();
            if active {
                waiting.extend(self.queue.take());
                let now = Instant::now();
                for key in pacer.take_due(&mut waiting, now) {
                    if shutdown.is_cancelled() {
                        return;
                    }
                    if !*leader.borrow() {
                        // Lost the lease mid-pass; the next leader writes.
                        self.queue.push(key);
                        continue;
                    }
                    pacer.started(&key, now);
                    if !self.write(key.clone(), &shutdown).await {
                        // Typically the echo of our own write.
                        pacer.idle(&key);
                    }
                }
            }
            let next = if active {
                pacer.next_due(&waiting, Instant::now())
            } else {
                None
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = sleep_until(next), if next.is_some() => {}
                _ = self.queue.notify.notified(), if active => {}
                r = leader.changed() => {
                    if r.is_err() { return }
                    if *leader.borrow() {
                        // A new leader checks every hub Gateway once.
                        let keys: Vec<GatewayKey> = self.cache.lock().keys().cloned().collect();
                        self.queue.extend(keys);
                    }
                }
                r = ready.changed() => if r.is_err() { return },
            }
        }
    }

    /// Returns whether it sent a write.
    async fn write(&self, key: GatewayKey, shutdown: &CancellationToken) -> bool {
        let Some(live) = self.cache.lock().get(&key).cloned() else {
            // Not a hub Gateway (or not in scope): nothing to write on.
            return false;
        };
        let now = Timestamp::now();
        let result = self.index.with_reports(&key, |reports| {
            let hub = live.hub_gateway(reports);
            let foreign: BTreeSet<String> = hub.foreign.iter().map(|c| c.type_.clone()).collect();
            aggregate::aggregate(&hub, reports, &self.options, now).map(|a| (a, foreign))
        });
        let (aggregation, foreign) = match result {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(gateway = %key, error = %e, "aggregation failed");
                return false;
            }
        };
        if apply_is_noop(&live, &aggregation.status) {
            Metrics::bump(&self.metrics.status_writes_skipped);
            return false;
        }
        let status = aggregation.status;
        // The hub's last listener entries go (see `clear_before_apply`).
        let clear_listeners =
            live.owns_listeners && status.listeners.as_deref().unwrap_or_default().is_empty();
        let own: Vec<&Condition> = status
            .conditions
            .iter()
            .flatten()
            .filter(|c| !foreign.contains(&c.type_))
            .collect();
        let mut body = serde_json::Map::new();
        // An empty address list is left out (see `apply_is_noop`).
        if let Some(addresses) = status.addresses.filter(|a| !a.is_empty()) {
            body.insert("addresses".into(), json!(addresses));
        }
        body.insert(
            "listeners".into(),
            json!(status.listeners.unwrap_or_default()),
        );
        body.insert("conditions".into(), json!(own));
        let patch = json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "status": body,
        });
        let api: Api<Gateway> = Api::namespaced(self.client.clone(), &key.namespace);
        let dropped: BTreeSet<&str> = live
            .owned
            .iter()
            .map(String::as_str)
            .filter(|t| !own.iter().any(|c| c.type_ == *t))
            .collect();
        if clear_listeners || !dropped.is_empty() {
            clear_before_apply(&api, &key, clear_listeners, &dropped).await;
        }
        // Forced: these fields are the hub's alone (a CRD default or an
        // earlier owner loses them); other writers' conditions are not sent.
        let params = PatchParams::apply(FIELD_MANAGER).force();
        match api
            .patch_status(&key.name, &params, &Patch::Apply(&patch))
            .await
        {
            Ok(gw) => {
                self.retry.succeeded(&key);
                Metrics::bump(&self.metrics.status_writes);
                tracing::debug!(gateway = %key, rv = ?gw.resource_version(), "hub Gateway status applied");
                self.cache.lock().insert(key, LiveHub::from_gateway(&gw));
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {
                self.retry.succeeded(&key);
                tracing::debug!(gateway = %key, "hub Gateway gone before its status was written");
            }
            Err(e) => {
                Metrics::bump(&self.metrics.status_write_errors);
                let retry = self.retry.failed(&key);
                tracing::warn!(gateway = %key, error = %e, ?retry, "hub Gateway status apply failed; retrying");
                let (queue, shutdown) = (self.queue.clone(), shutdown.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        _ = shutdown.cancelled() => {}
                        _ = tokio::time::sleep(retry) => queue.push(key),
                    }
                });
            }
        }
        true
    }
}
