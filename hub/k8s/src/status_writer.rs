//! Writes the aggregate onto the hub Gateways: a watch of the hub Gateways
//! (kept in the index as the little aggregation and writer need,
//! managedFields read then dropped), one queue with one entry per Gateway
//! (so it is bounded and a burst of reports becomes one write), and one task
//! that server-side applies the hub's fields — only to the hub Gateways
//! this replica writes now (all while it leads, or those of the status
//! shards it holds: [`super::shards::Writes`]), and only when something but
//! time differs from the live status.
//!
//! The writer aggregates nothing itself: it applies the index's published
//! aggregation (the one the Dashboard serves), which the index computed
//! with the live hub Gateway. What to clear, what to apply and whether to
//! write at all is [`plan`], a pure function; [`StatusWriter`] executes it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use gateway_api::apis::standard::gateways::Gateway;
use gwhub_common::CoalescingQueue;
use gwhub_common::pace::sleep_until;
use gwhub_common::watch_events::{Change, changes};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::FIELD_MANAGER;
use super::metrics::Metrics;
use super::shards::Writes;
use crate::readiness::Reached;
use gwhub_hub_rules::aggregate::{GatewayKey, LiveHub};
pub use gwhub_hub_rules::status_plan::{Plan, Write, clear_patch, plan};
use gwhub_index::{GatewayView, Provenance, StatusPort};

/// Executes [`clear_patch`] on the fresh object; a failure is left for the
/// apply to tell.
async fn clear_before_apply(api: &Api<Gateway>, key: &GatewayKey, write: &Write) {
    let fresh = match tokio::time::timeout(PATCH_TIMEOUT, api.get_status(&key.name)).await {
        Ok(Ok(gw)) => gw,
        Err(_) => {
            tracing::debug!(
                "no answer reading the hub Gateway before clearing; the apply will tell"
            );
            return;
        }
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "cannot read the hub Gateway before clearing; the apply will tell");
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
    match tokio::time::timeout(
        PATCH_TIMEOUT,
        api.patch_status(&key.name, &params, &Patch::Merge(&patch)),
    )
    .await
    {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "clearing before the apply failed; the apply will tell")
        }
        Err(_) => tracing::debug!("no answer clearing before the apply; the apply will tell"),
    }
}

/// Hub Gateways waiting for a write; one entry per Gateway.
pub type Queue = CoalescingQueue<GatewayKey>;

/// Per hub Gateway, where the changes of the views this replica has not
/// written yet came from: the writer's own account, so the write that
/// carries them observes the earliest agent-observed time (and continues
/// the first traced aggregation), a failed write keeps them for the next,
/// and a skipped one drops them.
///
/// Each view is noted as the index watch sees it and as a write plans from
/// it, whichever comes first; a view carries the provenance of the views
/// of its Gateway before it ([`GatewayView::provenance_since`]), so one
/// the watch missed (the views channel keeps only the latest) is still
/// noted, and one noted twice counts once (by revision).
#[derive(Default)]
pub struct Unwritten {
    entries: parking_lot::Mutex<BTreeMap<GatewayKey, Carried>>,
}

/// See [`Unwritten`].
#[derive(Default)]
struct Carried {
    /// The revision of the last view noted.
    through: Option<u64>,
    provenance: Provenance,
}

impl Unwritten {
    /// Notes what `view` carries over the views noted before it.
    pub(crate) fn note(&self, view: &GatewayView) {
        let mut entries = self.entries.lock();
        let carried = entries.entry(view.key.clone()).or_default();
        if carried.through.is_some_and(|r| r >= view.revision()) {
            return;
        }
        carried
            .provenance
            .merge(view.provenance_since(carried.through));
        carried.through = Some(view.revision());
    }

    /// The trace the next write of `key` continues.
    fn trace(&self, key: &GatewayKey) -> Option<String> {
        self.entries.lock().get(key)?.provenance.trace.clone()
    }

    /// Takes where the changes noted for `key` came from, for the write
    /// that carries them (or none, when it is skipped).
    fn take(&self, key: &GatewayKey) -> Provenance {
        self.entries
            .lock()
            .get_mut(key)
            .map(|c| std::mem::take(&mut c.provenance))
            .unwrap_or_default()
    }

    /// Keeps `taken` for the next write of `key`, its write having failed
    /// (before what was noted since: it came first).
    fn keep(&self, key: GatewayKey, mut taken: Provenance) {
        let mut entries = self.entries.lock();
        let carried = entries.entry(key).or_default();
        taken.merge(std::mem::take(&mut carried.provenance));
        carried.provenance = taken;
    }

    /// `key` has no view any more.
    fn forget(&self, key: &GatewayKey) {
        self.entries.lock().remove(key);
    }
}

/// Keeps the index's live hub Gateways current (so it aggregates with
/// them) and queues every one that changed. `synced`
/// ([`crate::readiness::Stage::GatewaysSynced`]) is reached once the first
/// full list is in.
pub async fn run_gateway_watch(
    api: Api<Gateway>,
    index: StatusPort,
    queue: Arc<Queue>,
    synced: Reached,
    shutdown: CancellationToken,
) {
    let events = watcher::watcher(api, watcher::Config::default()).default_backoff();
    let mut changes = std::pin::pin!(changes(events, shutdown));
    while let Some(change) = changes.next().await {
        match change {
            Change::Listed(gateways) => {
                let listing: BTreeMap<GatewayKey, LiveHub> = gateways
                    .iter()
                    .map(|gw| (GatewayKey::of(gw), LiveHub::from_gateway(gw, FIELD_MANAGER)))
                    .collect();
                let keys: Vec<GatewayKey> = listing.keys().cloned().collect();
                index.replace_live_hubs(listing);
                queue.insert_all(keys);
                synced.reach();
            }
            Change::Applied(gw) => {
                let key = GatewayKey::of(&gw);
                let live = LiveHub::from_gateway(&gw, FIELD_MANAGER);
                if index.set_live_hub(key.clone(), Some(live)) {
                    queue.insert(key);
                }
            }
            Change::Deleted(gw) => {
                index.set_live_hub(GatewayKey::of(&gw), None);
            }
            Change::Failed(e) => {
                tracing::warn!(error = %e, "watching hub Gateways failed; retrying")
            }
        }
    }
}

/// Queues every hub Gateway whose aggregate the index changed, noting
/// where its changes came from ([`Unwritten`]).
pub async fn run_index_watch(
    index: StatusPort,
    queue: Arc<Queue>,
    unwritten: Arc<Unwritten>,
    shutdown: CancellationToken,
) {
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
            for k in &changed {
                unwritten.forget(k);
            }
            for (k, v) in all() {
                if seen.get(k) != Some(&v.revision()) {
                    unwritten.note(v);
                    changed.push(k.clone());
                }
            }
            seen = all().map(|(k, v)| (k.clone(), v.revision())).collect();
            changed
        };
        if !changed.is_empty() {
            queue.insert_all(changed);
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            r = views.changed() => if r.is_err() { return },
        }
    }
}

/// Hub Gateway status writes the writer keeps in flight at once.
pub const WRITES_IN_FLIGHT: usize = 8;

/// How long one status request (the apply, and the read and merge patch
/// that may clear before it) may take before it counts as failed and is
/// retried with the writer's backoff (`gwhub_status_write_api_seconds`
/// shows the real answers: milliseconds on a healthy API server). 10 s is
/// far above that and below the 15 s Lease a leader holds by default, so
/// a stuck write fails and is retried before a step-down could move it.
pub const PATCH_TIMEOUT: Duration = Duration::from_secs(10);

enum Prepared {
    Nothing,
    /// The view is older than the live hub Gateway: parked until a pass.
    Parked,
    Write(Arc<LiveHub>, Write),
}

/// What became of one hub Gateway's write.
enum Outcome {
    /// Nothing sent (typically the echo of our own write).
    Nothing,
    /// Sent (or failed and queued again after its backoff).
    Sent,
    /// Its view was older than the live hub Gateway: it is queued again
    /// once the aggregator has passed, which it does for every live
    /// change (not on a timer: the pass that makes the view current is
    /// already due).
    Parked,
}

/// The writer task.
pub struct StatusWriter {
    pub client: Client,
    pub index: StatusPort,
    pub queue: Arc<Queue>,
    /// Where the changes of the views not written yet came from (shared
    /// with [`run_index_watch`]).
    pub unwritten: Arc<Unwritten>,
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
    /// Writes the hub Gateways `writes` covers once the hub Gateways and
    /// stored reports are loaded and a restarted hub caught up with the
    /// clusters of the replicas that ended (`ready`), until `shutdown`.
    pub async fn run(
        self,
        mut leader: watch::Receiver<Writes>,
        mut ready: watch::Receiver<bool>,
        shutdown: CancellationToken,
    ) {
        // Per hub Gateway: a write for one never waits for another's window.
        let mut pacer = gwhub_common::KeyedPacer::<GatewayKey>::new(self.debounce);
        let mut writing = Writes::Nothing;
        // Hub Gateways whose view was older than their live object, until
        // the next aggregation pass.
        let mut parked: BTreeSet<GatewayKey> = BTreeSet::new();
        let mut passes = self.index.subscribe_passes();
        loop {
            // A pass after this requeues what the writes below park; one
            // before it made what they read current.
            passes.borrow_and_update();
            let now_writes = leader.borrow_and_update().clone();
            if now_writes != writing {
                if now_writes.any() {
                    // A new leader (or shard holder) checks each of its hub
                    // Gateways once.
                    self.queue.insert_all(self.index.live_hub_keys());
                }
                writing = now_writes;
            }
            let active = writing.any() && *ready.borrow_and_update();
            if active {
                // Another replica's hub Gateways are its own to write (each
                // is queued again when this replica takes its shard).
                let mine: Vec<GatewayKey> = {
                    let writes = leader.borrow();
                    self.queue
                        .take_keys()
                        .into_iter()
                        .filter(|k| writes.covers(k))
                        .collect()
                };
                pacer.wait(mine);
                let now = Instant::now();
                let due = pacer.take_due(now);
                for key in &due {
                    pacer.started(key, now);
                }
                // Up to WRITES_IN_FLIGHT hub Gateways at once: one write is
                // an API round trip, and a pass over many Gateways written
                // one after another made the last wait for all the others.
                let (this, stop, leader_ref) = (&self, &shutdown, &leader);
                let done: Vec<(GatewayKey, Outcome)> = futures::stream::iter(due)
                    .map(|key| async move {
                        if stop.is_cancelled() {
                            return (key, Outcome::Sent);
                        }
                        if !leader_ref.borrow().covers(&key) {
                            // Lost the lease mid-pass; its next holder writes.
                            return (key, Outcome::Nothing);
                        }
                        let outcome = this.write(key.clone(), stop, leader_ref).await;
                        (key, outcome)
                    })
                    .buffer_unordered(WRITES_IN_FLIGHT)
                    .collect()
                    .await;
                if shutdown.is_cancelled() {
                    return;
                }
                for (key, outcome) in done {
                    match outcome {
                        Outcome::Sent => {}
                        Outcome::Nothing => pacer.idle(&key),
                        Outcome::Parked => {
                            pacer.idle(&key);
                            parked.insert(key);
                        }
                    }
                }
            }
            let next = if active {
                pacer.next_due(Instant::now())
            } else {
                None
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = sleep_until(next), if next.is_some() => {}
                _ = self.queue.notified(), if active => {}
                r = passes.changed(), if !parked.is_empty() => {
                    if r.is_err() {
                        return;
                    }
                    self.queue.insert_all(std::mem::take(&mut parked));
                }
                r = leader.changed() => if r.is_err() { return },
                r = ready.changed() => if r.is_err() { return },
            }
        }
    }

    /// What writing `key` takes now: nothing, a requeue, or a write.
    fn prepare(&self, key: &GatewayKey) -> Prepared {
        let started = Instant::now();
        let prepared = self.prepare_now(key);
        let took = started.elapsed();
        Metrics::add(&self.metrics.status_prepare_micros, took.as_micros() as u64);
        self.metrics.status_aggregation_seconds.observe(took);
        prepared
    }

    /// [`Self::prepare`]'s work, untimed. The writer aggregates nothing:
    /// it is woken after the pass that published the view (the index
    /// watch), and a view older than the live object waits for the pass
    /// that live change is due (parked), so what it applies was aggregated
    /// with every input it was woken for.
    fn prepare_now(&self, key: &GatewayKey) -> Prepared {
        let Some(live) = self.index.live_hub(key) else {
            // Not a hub Gateway (or not in scope): nothing to write on.
            return Prepared::Nothing;
        };
        let Some(view) = self.index.view(key) else {
            // Every live hub Gateway is aggregated; a failed aggregation
            // was logged by the index.
            return Prepared::Nothing;
        };
        self.unwritten.note(&view);
        if !view.aggregated_from(&live) {
            // The live object changed after the aggregation (a condition
            // another writer added would be dropped by a plan against it):
            // try again once it is aggregated.
            tracing::debug!("hub Gateway changed since aggregation; write requeued");
            return Prepared::Parked;
        }
        match plan(&live, &view.aggregation.status, &view.foreign) {
            Plan::Noop => {
                // The object already says it: no write carries the
                // changes' provenance.
                self.unwritten.take(key);
                Metrics::bump(&self.metrics.status_writes_skipped);
                Prepared::Nothing
            }
            Plan::Write(write) => Prepared::Write(live, write),
        }
    }

    /// [`Self::write_now`] in a span naming the hub Gateway (its log lines
    /// carry it), continuing the trace of the first traced aggregation
    /// among the views not written yet, when there is one (only with
    /// `--otlp-endpoint`).
    async fn write(
        &self,
        key: GatewayKey,
        shutdown: &CancellationToken,
        leader: &watch::Receiver<Writes>,
    ) -> Outcome {
        let span = tracing::info_span!("status_write", gateway = %key);
        if let Some(view) = self.index.view(&key) {
            self.unwritten.note(&view);
        }
        if let Some(parent) = self.unwritten.trace(&key) {
            gwhub_common::logging::set_parent(&span, &parent);
        }
        self.write_now(key, shutdown, leader).instrument(span).await
    }

    /// Applies the published aggregation of `key` if it differs from the
    /// live hub Gateway.
    async fn write_now(
        &self,
        key: GatewayKey,
        shutdown: &CancellationToken,
        leader: &watch::Receiver<Writes>,
    ) -> Outcome {
        let (mut live, mut write) = match self.prepare(&key) {
            Prepared::Nothing => return Outcome::Nothing,
            Prepared::Parked => return Outcome::Parked,
            Prepared::Write(live, write) => (live, write),
        };
        // The API write budget: after a wait, write the latest state
        // (what changed meanwhile coalesces into this write).
        if self.budget.acquire().await > Duration::ZERO {
            // The wait can outlast the Lease: a replica that stepped down
            // meanwhile must not write beside the new leader.
            if !leader.borrow().covers(&key) {
                self.queue.insert(key);
                return Outcome::Nothing;
            }
            (live, write) = match self.prepare(&key) {
                Prepared::Nothing => return Outcome::Nothing,
                Prepared::Parked => return Outcome::Parked,
                Prepared::Write(live, write) => (live, write),
            };
        }
        let api: Api<Gateway> = Api::namespaced(self.client.clone(), &key.namespace);
        if write.clears() {
            if self.budget.acquire().await > Duration::ZERO && !leader.borrow().covers(&key) {
                self.queue.insert(key);
                return Outcome::Nothing;
            }
            clear_before_apply(&api, &key, &write).await;
        }
        // Where the changes this write carries came from: taken after the
        // plan noted its view (one noted since is counted with this write,
        // a little early, never twice); kept if the write fails.
        let provenance = self.unwritten.take(&key);
        // Forced: these fields are the hub's alone (a CRD default or an
        // earlier owner loses them); other writers' conditions are not sent.
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let sent = Instant::now();
        // Bounded: the client has no read timeout of its own, and a write
        // stuck on a silent API server would hold its slot (one of
        // WRITES_IN_FLIGHT) and its Gateway's changes for ever.
        let answer = tokio::time::timeout(
            PATCH_TIMEOUT,
            api.patch_status(&key.name, &params, &Patch::Apply(&write.apply)),
        )
        .await;
        let took = sent.elapsed();
        Metrics::add(&self.metrics.status_api_micros, took.as_micros() as u64);
        self.metrics.status_write_api_seconds.observe(took);
        let failed = match answer {
            Ok(Ok(gw)) => {
                self.applied(&key, &live, &gw, provenance.earliest_observed);
                None
            }
            Ok(Err(kube::Error::Api(s))) if s.code == 404 => {
                self.retry.succeeded(&key);
                tracing::debug!("hub Gateway gone before its status was written");
                None
            }
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!("no answer within {PATCH_TIMEOUT:?}")),
        };
        if let Some(e) = failed {
            self.write_failed(key, provenance, &e, shutdown);
        }
        Outcome::Sent
    }

    /// Notes a status write of `key` the API server applied: the
    /// propagation time of the changes it carries (agents observed them
    /// at `observed`), and its answer as the live hub Gateway over `live`,
    /// the object the plan used.
    fn applied(&self, key: &GatewayKey, live: &Arc<LiveHub>, gw: &Gateway, observed: Option<i64>) {
        self.retry.succeeded(key);
        Metrics::bump(&self.metrics.status_writes);
        if let Some(t) = observed {
            // Clocks of two machines: a skewed agent gives 0, not
            // a negative time.
            let ms = jiff::Timestamp::now()
                .as_millisecond()
                .saturating_sub(t)
                .max(0);
            let took = Duration::from_millis(u64::try_from(ms).unwrap_or(0));
            self.metrics.propagation_seconds.observe(took);
        }
        tracing::debug!(rv = ?gw.resource_version(), "hub Gateway status applied");
        // Only over the object the plan used: the watch may have
        // installed a newer one (a spec edit) the answer predates.
        self.index.set_live_hub_written(
            key.clone(),
            live,
            LiveHub::from_written(gw, FIELD_MANAGER),
        );
    }

    /// A status write of `key` failed with `e`: the provenance of its
    /// changes kept for the next, and the Gateway queued again after its
    /// backoff (unless the hub shuts down first).
    fn write_failed(
        &self,
        key: GatewayKey,
        provenance: Provenance,
        e: &str,
        shutdown: &CancellationToken,
    ) {
        self.unwritten.keep(key.clone(), provenance);
        Metrics::bump(&self.metrics.status_write_errors);
        let retry = self.retry.failed(&key);
        tracing::warn!(error = %e, ?retry, "hub Gateway status apply failed; retrying");
        let (queue, shutdown) = (self.queue.clone(), shutdown.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = tokio::time::sleep(retry) => queue.insert(key),
            }
        });
    }
}
