//! What the hub's Kubernetes tasks bring about and wait on, in one type.
//!
//! A start-up [`Stage`] is brought about by one task, which is handed the
//! right to declare it and nothing more ([`Reached`]); a task that waits
//! names what it waits on ([`Wait`]): a stage, this replica leading, the
//! hub ready (the probe) or writable (what writes status). `ready` and
//! `writable` are derived from the stages in one place,
//! [`Readiness::spawn`], by a pure rule ([`derive()`]) with its own tests;
//! leading is decided by the election alone ([`Readiness::elect`]).
//!
//! It exists so that the runtime declares, per task, what it brings about
//! and what it waits on, instead of wiring a channel per condition and a
//! gate task by hand; the order (why `ready` needs these four stages, why
//! `writable` waits for the other replicas) is written here once.

use std::collections::BTreeMap;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use gwhub_index::Index;

/// A start-up condition one task brings about. Each holds once reached:
/// none flips back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// The stored reports were imported (the importer of
    /// [`crate::store::StoreTasks`]).
    Restored,
    /// The hub Gateways were listed
    /// ([`crate::status_writer::run_gateway_watch`]).
    GatewaysSynced,
    /// The ClusterProfiles were listed ([`crate::inventory`]); holds at once
    /// without a fleet inventory.
    InventorySynced,
    /// The PlacementDecisions were listed; holds at once without them.
    PlacementsSynced,
    /// This replica caught up with the clusters that replicas which ended
    /// served (the liveness records of [`crate::store::StoreTasks`]), so
    /// it writes nothing from a store that lags the ingest.
    CaughtUp,
}

const STAGES: [Stage; 5] = [
    Stage::Restored,
    Stage::GatewaysSynced,
    Stage::InventorySynced,
    Stage::PlacementsSynced,
    Stage::CaughtUp,
];

/// What a task waits on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// One stage (liveness waits for [`Stage::Restored`]).
    Stage(Stage),
    /// This replica leads: what the leader-only tasks wait on. Unlike the
    /// others it flips back and forth (a lost Lease).
    Leading,
    /// The probe's condition: ingest serves what the store holds.
    Ready,
    /// What writes status (hub Gateways, ClusterProfiles, fleet DNS):
    /// ready, and this replica caught up.
    Writable,
}

/// What the stages reached so far allow: `(ready, writable)`.
///
/// Ready (the probe, so agents come back to a replica that serves) needs
/// the expected clusters known: the stored reports and the lists of hub
/// Gateways, ClusterProfiles and PlacementDecisions. Writable (hub Gateway
/// and ClusterProfile status) needs ready and the replica caught up.
pub fn derive(reached: impl Fn(Stage) -> bool) -> (bool, bool) {
    let ready = reached(Stage::Restored)
        && reached(Stage::GatewaysSynced)
        && reached(Stage::InventorySynced)
        && reached(Stage::PlacementsSynced);
    (ready, ready && reached(Stage::CaughtUp))
}

/// The right to declare one [`Stage`] reached, handed to the task that
/// brings it about: it can reach the stage and read whether it holds,
/// never take it back.
#[derive(Clone, Debug)]
pub struct Reached {
    stage: Stage,
    tx: watch::Sender<bool>,
}

impl Reached {
    /// The stage holds from now on.
    pub fn reach(&self) {
        if !self.tx.send_replace(true) {
            tracing::debug!(stage = ?self.stage, "start-up stage reached");
        }
    }

    /// Whether the stage holds.
    pub fn holds(&self) -> bool {
        *self.tx.borrow()
    }

    /// A receiver of the stage, for another task of the same spawner that
    /// waits on it (liveness on the importer's `Restored`).
    pub(crate) fn follow(&self) -> watch::Receiver<bool> {
        self.tx.subscribe()
    }
}

/// The stages, leading and the two derived conditions.
pub struct Readiness {
    stages: BTreeMap<Stage, watch::Sender<bool>>,
    leading: watch::Sender<bool>,
    ready: watch::Sender<bool>,
    writable: watch::Sender<bool>,
}

impl Readiness {
    /// Nothing reached yet; `leads` is whether this replica leads before
    /// any election (it always does without one).
    pub fn new(leads: bool) -> Self {
        Readiness {
            stages: STAGES
                .into_iter()
                .map(|s| (s, watch::channel(false).0))
                .collect(),
            leading: watch::channel(leads).0,
            ready: watch::channel(false).0,
            writable: watch::channel(false).0,
        }
    }

    /// The right to reach `stage`, for the task that brings it about.
    pub fn bring_about(&self, stage: Stage) -> Reached {
        Reached {
            stage,
            tx: self.channel(stage).clone(),
        }
    }

    /// `stage` holds from the start (nothing to list for it).
    pub fn reached(&self, stage: Stage) {
        self.bring_about(stage).reach();
    }

    /// What a task waits on.
    pub fn wait(&self, what: Wait) -> watch::Receiver<bool> {
        match what {
            Wait::Stage(stage) => self.channel(stage).subscribe(),
            Wait::Leading => self.leading.subscribe(),
            Wait::Ready => self.ready.subscribe(),
            Wait::Writable => self.writable.subscribe(),
        }
    }

    /// Whether this replica leads, for the election
    /// ([`crate::leader::run`]), the one task that decides it.
    pub fn elect(&self) -> watch::Sender<bool> {
        self.leading.clone()
    }

    /// Derives `ready` and `writable` as the stages are reached, until
    /// shutdown (keeping every channel open for the waiters, leading's
    /// too where no election runs).
    ///
    /// Before `writable` turns true, `index` aggregates what is pending:
    /// each stage's task noted its changes in the index before it reached
    /// the stage (the importer its stored reports), but the aggregator
    /// task may not have passed yet, and a writer woken by `writable`
    /// would write the view from before them (a restarted hub showed "No
    /// cluster reports this Gateway" for its first write).
    pub fn spawn(self, index: Index, tasks: &mut JoinSet<()>, shutdown: CancellationToken) {
        tasks.spawn(async move {
            let mut changes: Vec<watch::Receiver<bool>> =
                self.stages.values().map(watch::Sender::subscribe).collect();
            loop {
                let (ready, writable) = derive(|s| *self.channel(s).borrow());
                if ready {
                    self.ready.send_if_modified(|r| !std::mem::replace(r, true));
                }
                if writable && !*self.writable.borrow() {
                    let index = index.clone();
                    // One pass: CPU work under the index's pass lock, off
                    // the async threads. It ends unless it panicked, which
                    // the aggregator task would report too; writable holds
                    // either way (the views are as current as they get).
                    if let Err(e) = tokio::task::spawn_blocking(move || index.aggregate_now()).await {
                        tracing::error!(error = %e, "aggregating before the hub turned writable failed");
                    }
                    self.writable.send_replace(true);
                }
                let changed = futures::future::select_all(
                    changes.iter_mut().map(|rx| Box::pin(rx.changed())),
                );
                // No `changed` fails: this task holds every stage's sender.
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = changed => {}
                }
            }
        });
    }

    fn channel(&self, stage: Stage) -> &watch::Sender<bool> {
        // Every stage has its channel from `new`.
        &self.stages[&stage]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gateway_api::apis::standard::gateways::GatewayStatus;
    use gwhub_hub_rules::aggregate::{GatewayKey, LiveHub, Options};
    use gwhub_index::IndexConfig;
    use std::time::Duration;

    fn index() -> Index {
        Index::new(IndexConfig::new(
            Options::default(),
            Duration::from_secs(60),
        ))
    }

    /// Every combination of reached stages: ready exactly when the four
    /// listing stages hold, writable exactly when ready and caught up.
    #[test]
    fn ready_needs_the_lists_and_writable_needs_ready_and_caught_up() {
        for bits in 0u32..(1 << STAGES.len()) {
            let reached = |s: Stage| {
                let i = STAGES.iter().position(|x| *x == s).unwrap_or(0);
                bits & (1 << i) != 0
            };
            let (ready, writable) = derive(reached);
            let lists = [
                Stage::Restored,
                Stage::GatewaysSynced,
                Stage::InventorySynced,
                Stage::PlacementsSynced,
            ]
            .into_iter()
            .all(reached);
            assert_eq!(ready, lists, "{bits:05b}");
            assert_eq!(writable, lists && reached(Stage::CaughtUp), "{bits:05b}");
        }
    }

    /// The derivation follows the stages as their tasks reach them, in any
    /// order; nothing is derived before its stages hold.
    #[tokio::test]
    async fn ready_then_writable_as_the_stages_are_reached() {
        let readiness = Readiness::new(true);
        readiness.reached(Stage::InventorySynced);
        readiness.reached(Stage::PlacementsSynced);
        let restored = readiness.bring_about(Stage::Restored);
        let synced = readiness.bring_about(Stage::GatewaysSynced);
        let caught_up = readiness.bring_about(Stage::CaughtUp);
        let mut ready = readiness.wait(Wait::Ready);
        let mut writable = readiness.wait(Wait::Writable);
        let mut tasks = JoinSet::new();
        let shutdown = CancellationToken::new();
        readiness.spawn(index(), &mut tasks, shutdown.clone());

        caught_up.reach();
        restored.reach();
        tokio::task::yield_now().await;
        assert!(!*ready.borrow() && !*writable.borrow());
        synced.reach();
        ready.wait_for(|r| *r).await.unwrap();
        writable.wait_for(|w| *w).await.unwrap();
        // Every stage reached, and still no task ended: a hub's task that
        // ends before shutdown stops the hub.
        assert!(
            tasks.try_join_next().is_none(),
            "a readiness task ended before shutdown"
        );

        shutdown.cancel();
        while tasks.join_next().await.is_some() {}
    }

    /// Leading is the election's alone: it flips both ways, and every
    /// waiter sees it; it is neither a stage nor derived from one. A stage
    /// is seen by what waits on it, and reaching it twice is reaching it.
    #[tokio::test]
    async fn leading_flips_and_stages_hold() {
        let readiness = Readiness::new(false);
        let mut leading = readiness.wait(Wait::Leading);
        let mut restored_seen = readiness.wait(Wait::Stage(Stage::Restored));
        let restored = readiness.bring_about(Stage::Restored);
        let election = readiness.elect();
        assert!(!*leading.borrow_and_update());
        election.send_replace(true);
        leading.wait_for(|l| *l).await.unwrap();
        election.send_replace(false);
        leading.wait_for(|l| !*l).await.unwrap();
        assert!(!restored.holds());
        restored.reach();
        restored.reach();
        assert!(restored.holds());
        restored_seen.wait_for(|r| *r).await.unwrap();
        // Leading counts for neither derived condition.
        assert!(!*readiness.wait(Wait::Ready).borrow());
        assert!(Readiness::new(true).wait(Wait::Leading).borrow().to_owned());
    }

    /// A restarted hub: its hub Gateway was aggregated with no report
    /// (listed before the store was), then the stored reports were
    /// imported and every stage reached while no aggregator task ran.
    /// When `writable` turns true the view holds the imported report, not
    /// "No cluster reports this Gateway" (what a status writer woken by it
    /// would otherwise write).
    #[tokio::test]
    async fn writable_views_hold_what_the_stages_loaded() {
        let index = index();
        let web = GatewayKey::new("ns", "web");
        index.set_live_hub(web.clone(), Some(LiveHub::default()));
        index.aggregate_now();
        let before = index
            .view(&web)
            .expect("the live hub Gateway is aggregated");
        assert!(before.clusters.is_empty(), "{:?}", before.clusters);

        let readiness = Readiness::new(true);
        let mut writable = readiness.wait(Wait::Writable);
        let stages: Vec<_> = STAGES
            .into_iter()
            .map(|s| readiness.bring_about(s))
            .collect();
        let mut tasks = JoinSet::new();
        let shutdown = CancellationToken::new();
        readiness.spawn(index.clone(), &mut tasks, shutdown.clone());
        let now = jiff::Timestamp::now().as_millisecond();
        assert!(index.import_cluster(
            "east",
            BTreeMap::from([(web.clone(), GatewayStatus::default())]),
            now,
            now,
        ));
        for stage in stages {
            stage.reach();
        }
        writable.wait_for(|w| *w).await.unwrap();
        let after = index.view(&web).expect("still aggregated");
        assert_eq!(&*after.clusters, ["east".to_owned()]);

        shutdown.cancel();
        while tasks.join_next().await.is_some() {}
    }
}
