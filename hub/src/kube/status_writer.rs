//! Writes the aggregate onto the hub Gateways: a watch of the hub Gateways
//! (kept in the index as the little aggregation and writer need,
//! managedFields read then dropped), one queue with one entry per Gateway
//! (so it is bounded and a burst of reports becomes one write), and one task
//! that server-side applies the hub's fields — only while this replica
//! leads, and only when something but time differs from the live status.
//!
//! The writer aggregates nothing itself: it applies the index's published
//! aggregation (the one the Dashboard serves), which the index computed
//! with the live hub Gateway. What to clear, what to apply and whether to
//! write at all is [`plan`], a pure function; [`StatusWriter`] executes it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus, GatewayStatusListeners};
use gwhub_common::Condition;
use gwhub_common::conditions::same_ignoring_time;
use gwhub_common::pace::sleep_until;
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
use crate::aggregate::{GatewayKey, LiveHub};
use crate::index::Index;

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

/// What the writer does for one hub Gateway.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// Applying would change nothing but times.
    Noop,
    Write(Write),
}

/// A write: first clear what apply cannot remove validly, then apply.
#[derive(Clone, Debug, PartialEq)]
pub struct Write {
    /// The hub's last listener entries go: set the list empty first.
    pub clear_listeners: bool,
    /// Condition types on the hub Gateway that are not other writers' and
    /// that the hub does not write (any more), removed first.
    pub drop_conditions: BTreeSet<String>,
    /// The server-side apply body (field manager `gwhub`).
    pub apply: Value,
}

impl Write {
    fn clears(&self) -> bool {
        self.clear_listeners || !self.drop_conditions.is_empty()
    }
}

/// What writing `want` (the published aggregation, other writers'
/// conditions of types `foreign` among its conditions) onto `live` takes.
///
/// Other writers' conditions are not sent; an empty address list is left
/// out (see `apply_is_noop`); the listeners are always sent (keyed by name,
/// `[]` removes only the hub's entries). Server-side apply cannot leave the
/// status valid when the hub stops writing something it wrote: its last
/// listener entries leave the list null, and a condition whose entry the
/// CRD defaulted at creation (so another manager co-owns its key) is left as
/// a bare `type`, both of which the CRD refuses, failing the whole write.
/// So those are cleared first ([`clear_patch`]).
pub fn plan(live: &LiveHub, want: &GatewayStatus, foreign: &BTreeSet<String>) -> Plan {
    if apply_is_noop(live, want) {
        return Plan::Noop;
    }
    let listeners = want.listeners.clone().unwrap_or_default();
    let clear_listeners = live.owns_listeners && listeners.is_empty();
    let own: Vec<&Condition> = want
        .conditions
        .iter()
        .flatten()
        .filter(|c| !foreign.contains(&c.type_))
        .collect();
    // Every condition on the live object that is not another writer's is
    // the hub's (see `LiveHub::hub_gateway`): one it no longer writes goes,
    // including a CRD default it never took over (left, it would count
    // toward the 8 and get the write refused).
    let drop_conditions = live
        .status
        .conditions
        .iter()
        .flatten()
        .map(|c| &c.type_)
        .filter(|t| !foreign.contains(*t) && !own.iter().any(|c| c.type_ == **t))
        .cloned()
        .collect();
    let mut body = serde_json::Map::new();
    if let Some(addresses) = want.addresses.as_ref().filter(|a| !a.is_empty()) {
        body.insert("addresses".into(), json!(addresses));
    }
    body.insert("listeners".into(), json!(listeners));
    body.insert("conditions".into(), json!(own));
    Plan::Write(Write {
        clear_listeners,
        drop_conditions,
        apply: json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "status": body,
        }),
    })
}

/// The merge patch that clears, on the fresh object `fresh`, what the apply
/// cannot remove validly (see [`plan`]): the listener list set empty if
/// `listeners`, the conditions of `dropped` types removed. Guarded by the
/// object's resourceVersion. `None`: nothing to clear.
pub fn clear_patch(fresh: &Gateway, listeners: bool, dropped: &BTreeSet<String>) -> Option<Value> {
    let conditions = fresh
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let kept: Vec<&Condition> = conditions
        .iter()
        .filter(|c| !dropped.contains(&c.type_))
        .collect();
    let mut status = serde_json::Map::new();
    if listeners {
        status.insert("listeners".into(), json!([]));
    }
    if kept.len() != conditions.len() {
        status.insert("conditions".into(), json!(kept));
    }
    if status.is_empty() {
        return None;
    }
    Some(json!({
        "metadata": {"resourceVersion": fresh.metadata.resource_version},
        "status": status,
    }))
}

/// Executes [`clear_patch`] on the fresh object; a failure is left for the
/// apply to tell.
async fn clear_before_apply(api: &Api<Gateway>, key: &GatewayKey, write: &Write) {
    let fresh = match api.get_status(&key.name).await {
        Ok(gw) => gw,
        Err(e) => {
            tracing::debug!(gateway = %key, error = %e, "cannot read the hub Gateway before clearing; the apply will tell");
            return;
        }
    };
    let Some(patch) = clear_patch(&fresh, write.clear_listeners, &write.drop_conditions) else {
        return;
    };
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

/// Keeps the index's live hub Gateways current (so it aggregates with
/// them) and queues every one that changed. `synced` turns true once the
/// first full list is in.
pub async fn run_gateway_watch(
    api: Api<Gateway>,
    index: Index,
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
                listing.insert(
                    GatewayKey::of(&gw),
                    LiveHub::from_gateway(&gw, FIELD_MANAGER),
                );
            }
            Ok(Event::InitDone) => {
                let keys: Vec<GatewayKey> = listing.keys().cloned().collect();
                index.replace_live_hubs(std::mem::take(&mut listing));
                queue.extend(keys);
                synced.send_replace(true);
            }
            Ok(Event::Apply(gw)) => {
                let key = GatewayKey::of(&gw);
                let live = LiveHub::from_gateway(&gw, FIELD_MANAGER);
                if index.set_live_hub(key.clone(), Some(live)) {
                    queue.push(key);
                }
            }
            Ok(Event::Delete(gw)) => {
                index.set_live_hub(GatewayKey::of(&gw), None);
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
            let all = || views.gateways.iter().chain(&views.unreported);
            let mut changed: Vec<GatewayKey> = seen
                .keys()
                .filter(|k| views.get(k).is_none())
                .cloned()
                .collect();
            for (k, v) in all() {
                if seen.get(k) != Some(&v.revision()) {
                    changed.push(k.clone());
                }
            }
            seen = all().map(|(k, v)| (k.clone(), v.revision())).collect();
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

/// Hub Gateway status writes the writer keeps in flight at once.
pub const WRITES_IN_FLIGHT: usize = 8;

enum Prepared {
    Nothing,
    Requeued,
    Write(Arc<LiveHub>, Write),
}

/// The writer task.
pub struct StatusWriter {
    pub client: Client,
    pub index: Index,
    pub queue: Arc<Queue>,
    pub metrics: Arc<Metrics>,
    /// Pacing of writes per hub Gateway: written at once up to a burst of
    /// three, then at most once per hub Gateway per window
    /// ([`gwhub_common::KeyedPacer`]).
    pub debounce: Duration,
    /// The API write budget shared with the report store.
    pub budget: Arc<super::budget::ApiBudget>,
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
                let due = pacer.take_due(&mut waiting, now);
                for key in &due {
                    pacer.started(key, now);
                }
                // Up to WRITES_IN_FLIGHT hub Gateways at once: one write is
                // an API round trip, and a pass over many Gateways written
                // one after another made the last wait for all the others.
                let (this, stop, leader_ref) = (&self, &shutdown, &leader);
                let done: Vec<(GatewayKey, bool)> = futures::stream::iter(due)
                    .map(|key| async move {
                        if stop.is_cancelled() {
                            return (key, true);
                        }
                        if !*leader_ref.borrow() {
                            // Lost the lease mid-pass; the next leader writes.
                            this.queue.push(key.clone());
                            return (key, false);
                        }
                        let wrote = this.write(key.clone(), stop).await;
                        (key, wrote)
                    })
                    .buffer_unordered(WRITES_IN_FLIGHT)
                    .collect()
                    .await;
                if shutdown.is_cancelled() {
                    return;
                }
                for (key, wrote) in done {
                    if !wrote {
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
                        self.queue.extend(self.index.live_hub_keys());
                    }
                }
                r = ready.changed() => if r.is_err() { return },
            }
        }
    }

    /// What writing `key` takes now: nothing, a requeue, or a write.
    fn prepare(&self, key: &GatewayKey) -> Prepared {
        // Inputs set before this (a live change, a report) are aggregated
        // first, so what is applied was aggregated with them.
        self.index.aggregate_dirty();
        let Some(live) = self.index.live_hub(key) else {
            // Not a hub Gateway (or not in scope): nothing to write on.
            return Prepared::Nothing;
        };
        let Some(view) = self.index.view(key) else {
            // Every live hub Gateway is aggregated; a failed aggregation
            // was logged by the index.
            return Prepared::Nothing;
        };
        if !view.aggregated_from(&live) {
            // The live object changed after the aggregation (a condition
            // another writer added would be dropped by a plan against it):
            // try again once it is aggregated, paced like a write.
            tracing::debug!(gateway = %key, "hub Gateway changed since aggregation; write requeued");
            self.queue.push(key.clone());
            return Prepared::Requeued;
        }
        match plan(&live, &view.aggregation.status, &view.foreign) {
            Plan::Noop => {
                Metrics::bump(&self.metrics.status_writes_skipped);
                Prepared::Nothing
            }
            Plan::Write(write) => Prepared::Write(live, write),
        }
    }

    /// Applies the published aggregation of `key` if it differs from the
    /// live hub Gateway; returns whether it sent a write (or requeued one).
    async fn write(&self, key: GatewayKey, shutdown: &CancellationToken) -> bool {
        let (mut live, mut write) = match self.prepare(&key) {
            Prepared::Nothing => return false,
            Prepared::Requeued => return true,
            Prepared::Write(live, write) => (live, write),
        };
        // The API write budget: after a wait, write the latest state
        // (what changed meanwhile coalesces into this write).
        if self.budget.acquire().await > Duration::ZERO {
            (live, write) = match self.prepare(&key) {
                Prepared::Nothing => return false,
                Prepared::Requeued => return true,
                Prepared::Write(live, write) => (live, write),
            };
        }
        let api: Api<Gateway> = Api::namespaced(self.client.clone(), &key.namespace);
        if write.clears() {
            self.budget.acquire().await;
            clear_before_apply(&api, &key, &write).await;
        }
        // Forced: these fields are the hub's alone (a CRD default or an
        // earlier owner loses them); other writers' conditions are not sent.
        let params = PatchParams::apply(FIELD_MANAGER).force();
        match api
            .patch_status(&key.name, &params, &Patch::Apply(&write.apply))
            .await
        {
            Ok(gw) => {
                self.retry.succeeded(&key);
                Metrics::bump(&self.metrics.status_writes);
                tracing::debug!(gateway = %key, rv = ?gw.resource_version(), "hub Gateway status applied");
                // Only over the object the plan used: the watch may have
                // installed a newer one (a spec edit) the answer predates.
                self.index.set_live_hub_written(
                    key,
                    &live,
                    LiveHub::from_gateway(&gw, FIELD_MANAGER),
                );
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

#[cfg(test)]
mod tests {
    use super::*;

    fn status(v: Value) -> GatewayStatus {
        serde_json::from_value(v).unwrap()
    }

    fn cond(type_: &str, status: &str, time: &str) -> Value {
        json!({"type": type_, "status": status, "reason": "R", "message": "",
               "observedGeneration": 1, "lastTransitionTime": time})
    }

    const T1: &str = "2026-11-23T10:00:00Z";
    const T2: &str = "2026-11-23T11:00:00Z";

    fn listener(name: &str) -> Value {
        json!({"name": name, "attachedRoutes": 1, "supportedKinds": [], "conditions": []})
    }

    fn live(status: Value, owned: &[&str], owns_addresses: bool, owns_listeners: bool) -> LiveHub {
        LiveHub {
            generation: 1,
            status: self::status(status),
            owned: owned.iter().map(|t| (*t).to_owned()).collect(),
            others: BTreeSet::new(),
            owns_addresses,
            owns_listeners,
        }
    }

    fn types(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|t| (*t).to_owned()).collect()
    }

    fn write(plan: Plan) -> Write {
        match plan {
            Plan::Write(w) => w,
            Plan::Noop => panic!("expected a write"),
        }
    }

    #[test]
    fn plan_is_a_noop_when_only_times_differ() {
        let addr = json!([{"type": "kuadrant.io/MultiClusterIPAddress", "value": "a/10.0.0.1"}]);
        let on_live = live(
            json!({"addresses": addr, "listeners": [listener("a.http")],
                   "conditions": [cond("Accepted", "True", T1), cond("x.io/Foreign", "True", T1)]}),
            &["Accepted"],
            true,
            true,
        );
        let want = status(json!({"addresses": addr, "listeners": [listener("a.http")],
            "conditions": [cond("Accepted", "True", T2), cond("x.io/Foreign", "True", T1)]}));
        assert_eq!(plan(&on_live, &want, &types(&["x.io/Foreign"])), Plan::Noop);

        // No addresses wanted: nothing to do unless the hub owns the live ones.
        let bare = status(json!({"listeners": [listener("a.http")],
            "conditions": [cond("Accepted", "True", T1), cond("x.io/Foreign", "True", T1)]}));
        let mut not_ours = on_live.clone();
        not_ours.owns_addresses = false;
        assert_eq!(
            plan(&not_ours, &bare, &types(&["x.io/Foreign"])),
            Plan::Noop
        );
        let w = write(plan(&on_live, &bare, &types(&["x.io/Foreign"])));
        assert!(w.apply["status"].get("addresses").is_none(), "{}", w.apply);
        assert!(!w.clears());
    }

    #[test]
    fn plan_applies_only_the_hubs_conditions() {
        let on_live = live(
            json!({"conditions": [cond("x.io/Foreign", "True", T1)]}),
            &[],
            false,
            false,
        );
        let want = status(json!({"listeners": [listener("a.http")],
            "conditions": [cond("Accepted", "True", T2), cond("x.io/Foreign", "True", T1)]}));
        let w = write(plan(&on_live, &want, &types(&["x.io/Foreign"])));
        assert_eq!(
            w.apply,
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "status": {
                "listeners": [listener("a.http")],
                "conditions": [cond("Accepted", "True", T2)],
            }})
        );
        assert_eq!(
            w,
            Write {
                clear_listeners: false,
                drop_conditions: BTreeSet::new(),
                apply: w.apply.clone()
            }
        );
    }

    #[test]
    fn plan_clears_what_apply_cannot_remove() {
        // (live owned types, hub owns listeners, wanted listeners, wanted
        // condition types) -> (clear listeners, dropped types)
        type Case<'a> = (
            &'a [&'a str],
            bool,
            &'a [&'a str],
            &'a [&'a str],
            bool,
            &'a [&'a str],
        );
        let cases: &[Case] = &[
            (&["Accepted"], true, &[], &["Accepted"], true, &[]),
            (
                &["Accepted"],
                false,
                &[],
                &["Programmed"],
                false,
                &["Accepted"],
            ),
            (
                &["Accepted", "Programmed"],
                true,
                &["a.http"],
                &["Accepted"],
                false,
                &["Programmed"],
            ),
            (
                &[],
                false,
                &["a.http"],
                &["Accepted", "Programmed"],
                false,
                &[],
            ),
            // A CRD default the hub never wrote, not another writer's.
            (&[], false, &[], &["Accepted"], false, &["Programmed"]),
        ];
        for (owned, owns_listeners, want_l, want_c, clear, dropped) in cases {
            let mut live_conds: Vec<Value> = owned.iter().map(|t| cond(t, "True", T1)).collect();
            if owned.is_empty() {
                live_conds.push(cond("Programmed", "Unknown", T1));
            }
            live_conds.push(cond("x.io/Foreign", "True", T1));
            let live_l: Vec<Value> = if *owns_listeners {
                vec![listener("a.http")]
            } else {
                vec![]
            };
            let on_live = live(
                json!({"listeners": live_l, "conditions": live_conds}),
                owned,
                false,
                *owns_listeners,
            );
            let want = status(json!({
                "listeners": want_l.iter().map(|l| listener(l)).collect::<Vec<_>>(),
                "conditions": want_c.iter().map(|t| cond(t, "False", T2)).collect::<Vec<_>>(),
            }));
            let w = write(plan(&on_live, &want, &types(&["x.io/Foreign"])));
            let case = format!("{owned:?} {owns_listeners} {want_l:?} {want_c:?}");
            assert_eq!(w.clear_listeners, *clear, "{case}");
            assert_eq!(w.drop_conditions, types(dropped), "{case}");
            assert_eq!(w.clears(), *clear || !dropped.is_empty(), "{case}");
        }
    }

    #[test]
    fn clear_patch_keeps_other_conditions_and_guards_the_version() {
        let mut gw: Gateway = serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "web", "namespace": "ns", "resourceVersion": "42"},
            "spec": {"gatewayClassName": "c", "listeners": []},
            "status": {"conditions": [cond("Accepted", "Unknown", T1), cond("x.io/Foreign", "True", T1)]}
        }))
        .unwrap();
        assert_eq!(clear_patch(&gw, false, &BTreeSet::new()), None);
        assert_eq!(clear_patch(&gw, false, &types(&["Programmed"])), None);
        assert_eq!(
            clear_patch(&gw, false, &types(&["Accepted"])),
            Some(json!({"metadata": {"resourceVersion": "42"},
                        "status": {"conditions": [cond("x.io/Foreign", "True", T1)]}}))
        );
        assert_eq!(
            clear_patch(&gw, true, &BTreeSet::new()),
            Some(json!({"metadata": {"resourceVersion": "42"}, "status": {"listeners": []}}))
        );
        gw.status = None;
        assert_eq!(
            clear_patch(&gw, true, &types(&["Accepted"])),
            Some(json!({"metadata": {"resourceVersion": "42"}, "status": {"listeners": []}}))
        );
    }
}
