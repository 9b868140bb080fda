//! The aggregator: the hub Gateways as the management cluster holds them,
//! one pending entry per changed Gateway (what changed and where it came
//! from), and the one task that re-aggregates each changed Gateway once and
//! publishes the views the Dashboard and the status writer share.

mod live_hubs;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use jiff::Timestamp;
use parking_lot::Mutex;
use tokio::sync::{Notify, watch};

use super::Index;
use super::lock_order::{self, Held, Proof};
use super::provenance::{Pending, Provenance, Stamp, Touched};
use super::view::{Cell, Cells, GatewayView, OmissionsSource, Omitted, Views, build_view};
use gwhub_hub_rules::aggregate::fleet::SharedReport;
use gwhub_hub_rules::aggregate::{Aggregation, GatewayKey, HubGateway, LiveHub, Options};

/// Generation a hub Gateway gets when the management cluster holds none
/// (always with `--no-kube`), like `gwhub aggregate` with no hub file.
const NO_KUBE_GENERATION: i64 = 1;

/// The aggregator part of the index: the hub Gateways as the management
/// cluster holds them, one pending entry per changed Gateway, and the
/// published views (each with the provenance of the changes it carries,
/// for the status write).
///
/// Lock order (`lock_order`, checked by the compiler): `passes` first
/// (only a pass takes it, [`Aggregator::lock_passes`]), then the clusters
/// and the fleet; `pending` is a leaf, taken alone or inside the fleet
/// lock; every other lock here is taken alone.
pub(super) struct Aggregator {
    /// Serialises aggregation passes, so an older pass never publishes
    /// over a newer one, and holds what only passes keep (never held
    /// across `.await`).
    passes: Mutex<Passes>,
    /// The hub Gateways on the management cluster (Kubernetes mode), as
    /// its Gateway watch last saw them; taken alone, never with another lock.
    live: Mutex<BTreeMap<GatewayKey, Arc<LiveHub>>>,
    /// One entry per Gateway to re-aggregate: which clusters' reports
    /// changed since its last pass and where the changes came from (see
    /// [`Pending`]). Every change merges into it after (or, for a
    /// delta's, together with) the change itself; a pass takes the
    /// entries, then reads what they name.
    ///
    /// Why a pass takes exactly the stamps of the changes it reads: a
    /// delta's stamp is merged in the same fleet write lock as its changes
    /// ([`Index::apply_stamped`]). A pass takes every entry (before it
    /// reads the live hub Gateways and expectations, so a change of those
    /// after the take stays for the next pass), then, holding the fleet
    /// for reading, the provenance of entries that landed since (their
    /// touched clusters stay for the next pass, which finds the view
    /// current). So a stamp merged before the pass read the fleet is
    /// taken by it, with its change, and one merged after is not: its
    /// change is not read either.
    pending: Mutex<BTreeMap<GatewayKey, Pending>>,
    /// Wakes the aggregator task when an entry is added.
    wake: Notify,
    views: watch::Sender<Views>,
    /// Counts the passes that took entries (see [`Index::subscribe_passes`]).
    passes_done: watch::Sender<u64>,
    options: Options,
}

/// A pass's lock held ([`Aggregator::lock_passes`]): what only passes
/// keep, and the proof of the lock for the clusters' and the fleet's.
struct PassesGuard<'a> {
    passes: parking_lot::MutexGuard<'a, Passes>,
    proof: Proof<'a, lock_order::Passes>,
}

impl<'a> PassesGuard<'a> {
    fn proof(&self) -> Proof<'a, lock_order::Passes> {
        self.proof
    }
}

impl std::ops::Deref for PassesGuard<'_> {
    type Target = Passes;
    fn deref(&self) -> &Passes {
        &self.passes
    }
}

impl std::ops::DerefMut for PassesGuard<'_> {
    fn deref_mut(&mut self) -> &mut Passes {
        &mut self.passes
    }
}

/// What only aggregation passes keep, under `Aggregator::passes`.
#[derive(Default)]
struct Passes {
    /// Gateways whose last aggregation failed (see `aggregate_dirty`):
    /// their next pass compares everything.
    failed: BTreeSet<GatewayKey>,
}

impl Aggregator {
    /// The pass's lock, the first of the order (see `lock_order`).
    fn lock_passes<'a>(&'a self, held: Proof<'a, lock_order::Nothing>) -> PassesGuard<'a> {
        PassesGuard {
            passes: self.passes.lock(),
            proof: held.then(),
        }
    }

    pub(super) fn new(options: Options) -> Self {
        let (views, _) = watch::channel(Views::default());
        let (passes_done, _) = watch::channel(0);
        Aggregator {
            passes: Mutex::new(Passes::default()),
            live: Mutex::new(BTreeMap::new()),
            pending: Mutex::new(BTreeMap::new()),
            wake: Notify::new(),
            views,
            passes_done,
            options,
        }
    }

    /// Merges a change of `keys` into their entries and wakes the
    /// aggregator task.
    fn note(&self, keys: BTreeSet<GatewayKey>, touched: &Touched, stamp: Option<&Stamp>) {
        if keys.is_empty() {
            return;
        }
        super::provenance::note(&mut self.pending.lock(), keys, touched, stamp);
        self.wake.notify_one();
    }

    /// The hub Gateways that expect clusters (annotated with expected
    /// clusters or a placement).
    pub(super) fn expecting_keys(&self) -> BTreeSet<GatewayKey> {
        self.live
            .lock()
            .iter()
            .filter(|(_, l)| l.expected_clusters.is_some() || l.placement.is_some())
            .map(|(k, _)| k.clone())
            .collect()
    }
}

impl Index {
    /// Aggregated hub Gateways; `changed()` fires only on real change.
    pub fn subscribe(&self) -> watch::Receiver<Views> {
        self.inner.aggregator.views.subscribe()
    }

    pub(super) fn mark_dirty(&self, affected: BTreeSet<GatewayKey>) {
        self.inner.aggregator.note(affected, &Touched::All, None);
    }

    /// [`Index::mark_dirty`] after a change of `cluster`'s reports alone
    /// (its snapshot or delta applied to the fleet, its freshness, it gone):
    /// the pass reads only that cluster's report.
    pub(super) fn mark_dirty_by(&self, cluster: &str, affected: BTreeSet<GatewayKey>) {
        self.mark_touched(Some(cluster), affected);
    }

    /// [`Index::mark_dirty`] after a change that left every report as it
    /// was (the hub Gateway on the management cluster, its expectation):
    /// the pass reads no report, it keeps the old view's cells and cluster
    /// list, so a status write's answer costs the output, not the fleet.
    pub(super) fn mark_dirty_hub(&self, affected: BTreeSet<GatewayKey>) {
        self.mark_touched(None, affected);
    }

    fn mark_touched(&self, cluster: Option<&str>, affected: BTreeSet<GatewayKey>) {
        self.inner
            .aggregator
            .note(affected, &Touched::by(cluster), None);
    }

    /// [`Index::mark_dirty_by`] for a delta's changes, with its stamp;
    /// called by [`Index::apply_stamped`] holding the fleet lock for
    /// writing (see `Aggregator::pending`).
    pub(crate) fn note_changes_locked(
        &self,
        cluster: &str,
        affected: BTreeSet<GatewayKey>,
        stamp: Option<&Stamp>,
    ) {
        self.inner
            .aggregator
            .note(affected, &Touched::by(Some(cluster)), stamp);
    }

    /// Changes after every aggregation pass that read some Gateway, once
    /// it published what changed. A reader that found a view not yet
    /// aggregated with an input it knows of (the status writer: a live hub
    /// Gateway newer than the view's) looks again then: every input change
    /// marks its Gateway for a pass.
    pub fn subscribe_passes(&self) -> watch::Receiver<u64> {
        self.inner.aggregator.passes_done.subscribe()
    }

    /// Re-aggregates dirty Gateways until the returned future is dropped:
    /// the one driver of aggregation (readers only read what it publishes).
    pub async fn run_aggregator(self) {
        loop {
            self.inner.aggregator.wake.notified().await;
            self.pass();
            // Let ingest run between passes on a busy hub.
            tokio::task::yield_now().await;
        }
    }

    /// One aggregation pass, as the aggregator task runs it, for tests,
    /// benches and fuzzing (`testing` feature): returns whether some
    /// aggregated Gateway changed.
    #[cfg(any(test, feature = "testing"))]
    pub fn aggregate_dirty(&self) -> bool {
        self.pass()
    }

    /// Aggregates what is pending now, in the caller's thread (blocking it
    /// for one pass): every change noted before the call is in the views
    /// when it returns (a pass already running finishes first: passes are
    /// serialised). For a start-up condition that promises readers the
    /// views hold what was loaded before it (the Kubernetes mode's
    /// `writable`: a restarted hub's stored reports are imported, and the
    /// status writer must not write the view aggregated before them).
    pub fn aggregate_now(&self) {
        self.pass();
    }

    /// [`Index::aggregate_pending`], then tells [`Index::subscribe_passes`]
    /// when it read something.
    fn pass(&self) -> bool {
        let Some(changed) = self.aggregate_pending() else {
            return false;
        };
        self.inner.aggregator.passes_done.send_modify(|n| *n += 1);
        changed
    }

    /// One aggregation pass over the dirty Gateways; publishes only if some
    /// aggregated Gateway changed. Returns whether one did (`None`: no
    /// Gateway was dirty).
    ///
    /// Each Gateway is aggregated with the hub Gateway as the management
    /// cluster holds it (its generation, the hub's conditions for their
    /// lastTransitionTime, other writers' conditions), or, where there is
    /// none, with generation 1 and the previous view's conditions.
    ///
    /// The live hub Gateways are taken under one short lock, then the
    /// reports (shared, not copied) and their aggregation under the fleet's
    /// read lock: the fleet keeps each Gateway's incremental aggregate, so
    /// that costs the output (and the omissions' names), not a pass of the
    /// engine over the clusters. Comparison and encoding happen after, and
    /// the watch channel's lock is held only to insert the finished views.
    fn aggregate_pending(&self) -> Option<bool> {
        let mut held = Held::nothing();
        let mut passes = self.inner.aggregator.lock_passes(held.proof());
        let (inputs, mut provenance, now) = self.read_pending(&mut passes)?;
        let results: Vec<(GatewayKey, Update)> = inputs
            .into_iter()
            .filter_map(|input| {
                let origin = provenance.remove(&input.key).unwrap_or_default();
                self.update_of(input, origin, now, &mut passes)
            })
            .collect();
        if results.is_empty() {
            return Some(false);
        }
        Some(self.publish(results))
    }

    /// A pass's inputs: every pending entry taken, what each names read
    /// (the live hub Gateway, the expected clusters, the DNS condition,
    /// the published view) and, under the fleet's read lock, the reports
    /// and their aggregation, with the provenance of exactly the changes
    /// read. `None`: nothing was pending.
    fn read_pending(
        &self,
        passes: &mut PassesGuard<'_>,
    ) -> Option<(Vec<Input>, BTreeMap<GatewayKey, Provenance>, Timestamp)> {
        let mut taken = std::mem::take(&mut *self.inner.aggregator.pending.lock());
        if taken.is_empty() {
            return None;
        }
        for (key, entry) in taken.iter_mut() {
            if passes.failed.remove(key) {
                entry.touched = Touched::All;
            }
        }
        let keys: Vec<GatewayKey> = taken.keys().cloned().collect();
        let lives = self.live_hubs_of(&keys);
        let carry_dns = self.dns_mode() == super::DnsMode::Following;
        let mut dns = self.dns_conditions_of(&keys);
        let expectations = {
            let keys: Vec<&GatewayKey> = keys.iter().collect();
            self.expectations(passes.proof(), &keys, &lives)
        };
        let now = Timestamp::now();
        // Only this pass (see `Aggregator::passes`) changes the views, so what it
        // reads here stays current until it publishes.
        let olds: Vec<Option<Arc<GatewayView>>> = {
            let views = self.inner.aggregator.views.borrow();
            keys.iter().map(|k| views.get(k).cloned()).collect()
        };
        // The reports and their aggregation under one short read lock: the
        // fleet keeps each Gateway's incremental aggregate, so this costs
        // the output, not a pass of the engine over every cluster. Where
        // only some clusters' reports changed since the published view,
        // only theirs are read: the view is patched.
        let (inputs, provenance) = {
            let fleet = self.inner.reports.read(passes.proof());
            // With the provenance of the changes that landed since the
            // take: exactly the changes read here (see `pending`).
            super::provenance::take_provenance(
                &mut self.inner.aggregator.pending.lock(),
                &mut taken,
            );
            let (mut touched, provenance): (BTreeMap<_, _>, BTreeMap<_, _>) = taken
                .into_iter()
                .map(|(k, p)| ((k.clone(), p.touched), (k, p.provenance)))
                .unzip();
            let inputs: Vec<Input> = keys
                .into_iter()
                .zip(lives)
                .zip(olds)
                .zip(expectations)
                .map(|(((key, live), old), expectation)| {
                    let reports = match (touched.remove(&key), &old) {
                        (Some(Touched::Clusters(clusters)), Some(old))
                            if !old.clusters.is_empty() =>
                        {
                            let changed = clusters
                                .iter()
                                .map(|c| (c.clone(), fleet.report_shared(c, &key)))
                                .collect();
                            Reports::Changed(clusters, changed)
                        }
                        (touched, _) => Reports::All(fleet.reports_shared(&key), touched),
                    };
                    let inc = fleet.incremental(&key);
                    let aggregated = (inc.is_some() || live.is_some()).then(|| {
                        aggregate_one(
                            inc,
                            live.as_deref(),
                            old.as_deref(),
                            expectation.as_ref(),
                            (dns.remove(&key).as_ref(), carry_dns),
                            &self.inner.aggregator.options,
                            now,
                        )
                    });
                    Input {
                        key,
                        reports,
                        live,
                        old,
                        expectation,
                        aggregated,
                    }
                })
                .collect();
            (inputs, provenance)
        };
        Some((inputs, provenance, now))
    }

    /// What one Gateway's pass brings: a new view (or none: nothing
    /// reports it and no live object holds it), the old view standing for
    /// a new live object or omissions source, or nothing when the result
    /// is the same. `origin`: where its changes came from; it goes with a
    /// new view for its write, and is dropped with a result that changed
    /// nothing (no write carries it: one kept would be counted by some
    /// later, unrelated write). A failed aggregation keeps the last good
    /// view and is noted in `passes`, so the next pass compares everything.
    fn update_of(
        &self,
        input: Input,
        origin: Provenance,
        now: Timestamp,
        passes: &mut PassesGuard<'_>,
    ) -> Option<(GatewayKey, Update)> {
        let Input {
            key,
            reports,
            live,
            old,
            expectation,
            aggregated,
        } = input;
        let old = old.as_ref();
        let (cells, clusters, same_cells) = cells_of(&reports, old);
        let span = aggregate_span(&key, clusters.len(), origin.trace);
        let _in_span = span.as_ref().map(|s| s.enter());
        let Some(aggregated) = aggregated else {
            self.inner.history.record(&key, None, now.as_millisecond());
            return old.is_some().then_some((key, Update::Changed(None)));
        };
        let (hub, aggregation, omitted) = match aggregated {
            Ok(a) => a,
            Err(e) => {
                // The fleet holds one report per cluster, so this
                // cannot happen; keep the last good view. Its history
                // was not recorded: the next pass compares everything.
                tracing::error!(gateway = %key, error = %e, "aggregation failed");
                passes.failed.insert(key);
                return None;
            }
        };
        // The hub's own DNS condition travels as the first kept one
        // (see `dns_condition`); it is not another writer's.
        let foreign: BTreeSet<String> = hub
            .foreign
            .into_iter()
            .map(|c| c.type_)
            .filter(|t| t != gwhub_dns_rules::CONDITION_TYPE)
            .collect();
        if clusters.is_empty() {
            self.inner.history.record(&key, None, now.as_millisecond());
        } else if self.inner.history.capacity() > 0 {
            self.record_history(passes.proof(), &key, &aggregation, reports, now);
        }
        let (missing, unexpected) =
            gwhub_hub_rules::aggregate::missing_and_unexpected(expectation.as_ref(), &clusters);
        let missing: Vec<gwhub_proto::v1::MissingCluster> =
            missing.into_iter().map(missing_to_proto).collect();
        let same_omissions = match &omitted.list {
            None => true,
            Some(list) => old.is_some_and(|o| o.same_omissions(list)),
        };
        if let Some(old) = old
            && same_cells
            && same_omissions
            && old.lean.missing_clusters == missing
            && old.lean.unexpected_clusters == unexpected
            && old.aggregation.status == aggregation.status
            && old.foreign == foreign
        {
            // Same result from this live object: the view stands for
            // it, and its omissions are listed from this source now
            // (the same omissions). Nothing to write, so no
            // propagation to measure.
            let source = omitted.source.or_else(|| old.omissions_source().cloned());
            let same_live = match &live {
                Some(live) => old.aggregated_from(live),
                None => old.aggregated_with().is_none(),
            };
            return (!same_live || source.as_ref() != old.omissions_source())
                .then(|| (key, Update::Stands(old.standing_for(live, source))));
        }
        let provenance = write_provenance(live.is_some(), origin.earliest_observed, span.is_some());
        let mut view = build_view(
            key.clone(),
            aggregation,
            omitted,
            foreign,
            clusters,
            cells,
            old.map(|v| &**v),
            live,
            provenance,
        );
        view.missing = missing.iter().map(|m| m.cluster.clone()).collect();
        view.lean.missing_clusters = missing;
        view.lean.unexpected_clusters = unexpected;
        Some((key, Update::Changed(Some(view))))
    }

    /// Publishes a pass's updates in one change of the views channel:
    /// a view that stands for a new live object is replaced in place, at
    /// its revision (nobody is woken); a changed one gets the next
    /// revision. Returns whether a watcher is woken.
    fn publish(&self, results: Vec<(GatewayKey, Update)>) -> bool {
        self.inner.aggregator.views.send_if_modified(|views| {
            let mut changed = false;
            for (key, update) in results {
                let view = match update {
                    Update::Stands(view) => {
                        // In place, at its revision: nobody is woken.
                        let map = match views.gateways.contains_key(&key) {
                            true => &mut views.gateways,
                            false => &mut views.unreported,
                        };
                        map.insert(key, Arc::new(view));
                        continue;
                    }
                    Update::Changed(view) => view,
                };
                changed = true;
                views.gateways.remove(&key);
                views.unreported.remove(&key);
                if let Some(mut view) = view {
                    views.revision += 1;
                    view.set_revision(views.revision);
                    let map = match view.clusters.is_empty() {
                        true => &mut views.unreported,
                        false => &mut views.gateways,
                    };
                    map.insert(key, Arc::new(view));
                }
            }
            if changed {
                views.revision += 1;
            }
            changed
        })
    }

    /// Records `key`'s status transitions: with only some clusters'
    /// reports changed, their conditions and the hub Gateway's own are
    /// compared with the last recorded, not every cluster's.
    fn record_history(
        &self,
        held: Proof<'_, lock_order::Passes>,
        key: &GatewayKey,
        aggregation: &Aggregation,
        reports: Reports,
        now: Timestamp,
    ) {
        let millis = now.as_millisecond();
        let touched = match reports {
            Reports::Changed(clusters, changed) => Some((clusters, changed)),
            Reports::All(shared, Some(Touched::Clusters(clusters))) => {
                // `shared` is in cluster name order.
                let changed: Vec<(String, Option<SharedReport>)> = clusters
                    .iter()
                    .map(|c| {
                        let at = shared.binary_search_by(|r| r.cluster.as_str().cmp(c));
                        (c.clone(), at.ok().and_then(|at| shared.get(at)).cloned())
                    })
                    .collect();
                if self.record_clusters(key, aggregation, &clusters, &changed, millis) {
                    return;
                }
                return self.record_all(key, aggregation, &shared, millis);
            }
            Reports::All(shared, _) => return self.record_all(key, aggregation, &shared, millis),
        };
        if let Some((clusters, changed)) = touched
            && !self.record_clusters(key, aggregation, &clusters, &changed, millis)
        {
            // No history yet: every cluster's conditions are needed.
            let shared = self.inner.reports.read(held).reports_shared(key);
            self.record_all(key, aggregation, &shared, millis);
        }
    }

    /// [`Index::record_history`] when only `clusters` changed, `changed`
    /// being their reports; `false` (nothing recorded) with no history yet.
    fn record_clusters(
        &self,
        key: &GatewayKey,
        aggregation: &Aggregation,
        clusters: &BTreeSet<String>,
        changed: &[(String, Option<SharedReport>)],
        millis: i64,
    ) -> bool {
        let reports = changed
            .iter()
            .filter_map(|(c, r)| r.as_ref().map(|r| (c.as_str(), &*r.status)));
        let conditions = gwhub_hub_rules::history::conditions(&aggregation.status, reports);
        let clusters: BTreeSet<&str> = clusters.iter().map(String::as_str).collect();
        self.inner
            .history
            .record_clusters(key, &conditions, &clusters, millis)
    }

    /// [`Index::record_history`] from every cluster's report, `shared`.
    fn record_all(
        &self,
        key: &GatewayKey,
        aggregation: &Aggregation,
        shared: &[SharedReport],
        millis: i64,
    ) {
        let conditions = gwhub_hub_rules::history::conditions(
            &aggregation.status,
            shared.iter().map(|r| (r.cluster.as_str(), &*r.status)),
        );
        self.inner.history.record(key, Some(&conditions), millis);
    }

    /// The published aggregation of `key`, reported or not.
    pub fn view(&self, key: &GatewayKey) -> Option<Arc<GatewayView>> {
        self.inner.aggregator.views.borrow().get(key).cloned()
    }
}

/// What a pass publishes for one Gateway.
/// The cells and the cluster list of a Gateway's new view, and whether
/// they are the old view's: patched where only some clusters changed
/// (sharing the rest with the old view), else made from every report.
fn cells_of(reports: &Reports, old: Option<&Arc<GatewayView>>) -> (Cells, Arc<[String]>, bool) {
    match (reports, old) {
        (Reports::Changed(_, changed), Some(old)) => {
            let mut cells = old.cells.clone();
            let mut came_or_went = false;
            for (cluster, report) in changed {
                came_or_went |= cells.set(cluster, report.as_ref().map(Cell::of));
            }
            let clusters = match came_or_went {
                true => cells.clusters(),
                false => old.clusters.clone(),
            };
            let same = !came_or_went
                && changed
                    .iter()
                    .all(|(c, _)| old.cells.get(c) == cells.get(c));
            (cells, clusters, same)
        }
        (reports, _) => {
            let shared: &[SharedReport] = match reports {
                Reports::All(shared, _) => shared,
                Reports::Changed(..) => &[],
            };
            let cells = Cells::of(shared);
            let clusters: Arc<[String]> = shared.iter().map(|r| r.cluster.clone()).collect();
            let same = old.is_some_and(|o| o.cells == cells && o.clusters == clusters);
            (cells, clusters, same)
        }
    }
}

/// The span of one Gateway's aggregation, a child of the trace its
/// changes came with (none without one).
fn aggregate_span(
    key: &GatewayKey,
    clusters: usize,
    trace: Option<String>,
) -> Option<tracing::Span> {
    trace.map(|parent| {
        let span = tracing::info_span!("aggregate", gateway = %key, clusters);
        gwhub_common::logging::set_parent(&span, &parent);
        span
    })
}

/// Where a new view's changes came from, for the status write that
/// follows (only with a live hub Gateway; none without): when agents
/// observed the earliest, and, when the aggregation was traced, the trace
/// the write continues (called inside the aggregation's span).
fn write_provenance(live: bool, earliest_observed: Option<i64>, traced: bool) -> Provenance {
    if !live {
        return Provenance::default();
    }
    Provenance {
        earliest_observed,
        trace: traced
            .then(gwhub_common::logging::traceparent)
            .filter(|t| !t.is_empty()),
    }
}

/// A missing cluster as the Dashboard API spells it.
fn missing_to_proto(
    m: gwhub_hub_rules::aggregate::MissingCluster,
) -> gwhub_proto::v1::MissingCluster {
    gwhub_proto::v1::MissingCluster {
        cluster: m.cluster,
        never_reported: m.never_reported,
    }
}

enum Update {
    /// A new view (`None`: none any more), at a new revision.
    Changed(Option<GatewayView>),
    /// The same aggregation from a newer live hub Gateway (or omissions
    /// source): the view standing for it, at the same revision.
    Stands(GatewayView),
}

/// One dirty Gateway's inputs, read under the fleet's lock.
struct Input {
    key: GatewayKey,
    reports: Reports,
    live: Option<Arc<LiveHub>>,
    old: Option<Arc<GatewayView>>,
    expectation: Option<gwhub_hub_rules::aggregate::Expectation>,
    /// The hub Gateway, its aggregation and omissions; `None` when there
    /// is neither a report nor a live hub Gateway.
    aggregated: Option<Aggregated>,
}

type Aggregated =
    Result<(HubGateway, Aggregation, Omitted), gwhub_hub_rules::aggregate::AggregateError>;

/// The reports a pass reads for one Gateway.
enum Reports {
    /// Every cluster's, in name order (and what the dirty set says
    /// changed).
    All(Vec<SharedReport>, Option<Touched>),
    /// Only these clusters' reports changed since the published view:
    /// theirs (`None`: it no longer reports the Gateway).
    Changed(BTreeSet<String>, Vec<(String, Option<SharedReport>)>),
}

/// Aggregates one Gateway from its incremental aggregate (`None`: no
/// cluster reports it) with the hub Gateway as the management cluster
/// holds it, or, where there is none, with generation 1 and the previous
/// view's conditions. The omissions are listed only when they may differ
/// from `old`'s (see [`OmissionsSource`]).
fn aggregate_one(
    inc: Option<&gwhub_hub_rules::aggregate::Incremental>,
    live: Option<&LiveHub>,
    old: Option<&GatewayView>,
    expectation: Option<&gwhub_hub_rules::aggregate::Expectation>,
    (dns, carry_dns): (Option<&gwhub_dns_rules::DnsCondition>, bool),
    options: &Options,
    now: Timestamp,
) -> Aggregated {
    let mut hub = match live {
        Some(live) => live.hub_gateway_with(|t| inc.is_some_and(|i| i.reports_type(t))),
        None => HubGateway {
            generation: NO_KUBE_GENERATION,
            previous: old
                .and_then(|v| v.aggregation.status.conditions.clone())
                .unwrap_or_default(),
            foreign: Vec::new(),
        },
    };
    super::dns_condition::inject(&mut hub, dns, carry_dns, now);
    let (aggregation, omitted) = match inc {
        Some(inc) => {
            let parts = inc.aggregate_parts(&hub, expectation, now);
            let source = OmissionsSource {
                version: inc.omissions_version(),
                hub: parts.hub_omissions,
            };
            let same = old.is_some_and(|o| o.omissions_source() == Some(&source));
            let list = (!same).then(|| inc.omissions_with(&source.hub));
            let omitted = Omitted {
                list,
                source: Some(source),
            };
            (parts.aggregation, omitted)
        }
        None => {
            let mut aggregation = gwhub_hub_rules::aggregate::aggregate_expected(
                &hub,
                &[],
                expectation,
                options,
                now,
            )?;
            let omitted = Omitted {
                list: Some(std::mem::take(&mut aggregation.omissions)),
                source: None,
            };
            (aggregation, omitted)
        }
    };
    Ok((hub, aggregation, omitted))
}

#[cfg(test)]
mod tests;
