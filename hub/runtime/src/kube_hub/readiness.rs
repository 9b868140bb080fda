//! The hub's start-up conditions in Kubernetes mode, in one type: each
//! task that brings a condition about is handed its [`Stage`]'s sender (a
//! task that also waits on one, as liveness waits for `Restored`, follows
//! that sender), and the two conditions derived from them (`ready`: the
//! probe; `writable`: what status writers wait on) are decided in one
//! place, [`Readiness::spawn`], by a pure rule ([`derive`]) with its own
//! tests.
//!
//! It exists so that `attach` declares what each task waits on instead of
//! wiring a channel per condition and a hand-built gate task; the order
//! (why `ready` needs these four, why `writable` waits for the other
//! replicas) is written here once.

use std::collections::BTreeMap;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::index::Index;

/// A start-up condition one task brings about. Each holds once reached:
/// none flips back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Stage {
    /// The stored reports were imported (the importer of
    /// `gwhub_k8s::store::StoreTasks`).
    Restored,
    /// The hub Gateways were listed (`gwhub_k8s::status_writer::run_gateway_watch`).
    GatewaysSynced,
    /// The ClusterProfiles were listed (`gwhub_k8s::inventory`); holds at once
    /// without a fleet inventory.
    InventorySynced,
    /// The PlacementDecisions were listed; holds at once without them.
    PlacementsSynced,
    /// This replica caught up with the clusters that replicas which ended
    /// served (the liveness records of `gwhub_k8s::store::StoreTasks`), so
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

/// What the stages reached so far allow: `(ready, writable)`.
///
/// Ready (the probe, so agents come back to a replica that serves) needs
/// the expected clusters known: the stored reports and the lists of hub
/// Gateways, ClusterProfiles and PlacementDecisions. Writable (hub Gateway
/// and ClusterProfile status) needs ready and the replica caught up.
pub(crate) fn derive(reached: impl Fn(Stage) -> bool) -> (bool, bool) {
    let ready = reached(Stage::Restored)
        && reached(Stage::GatewaysSynced)
        && reached(Stage::InventorySynced)
        && reached(Stage::PlacementsSynced);
    (ready, ready && reached(Stage::CaughtUp))
}

/// The stages' channels and the two derived conditions.
pub(crate) struct Readiness {
    stages: BTreeMap<Stage, watch::Sender<bool>>,
    ready: watch::Sender<bool>,
    writable: watch::Sender<bool>,
}

impl Readiness {
    pub(crate) fn new() -> Self {
        Readiness {
            stages: STAGES
                .into_iter()
                .map(|s| (s, watch::channel(false).0))
                .collect(),
            ready: watch::channel(false).0,
            writable: watch::channel(false).0,
        }
    }

    /// The sender of `stage`, for the task that brings it about.
    pub(crate) fn sender(&self, stage: Stage) -> watch::Sender<bool> {
        self.channel(stage).clone()
    }

    /// `stage` holds from the start (nothing to list for it).
    pub(crate) fn reached(&self, stage: Stage) {
        self.channel(stage).send_replace(true);
    }

    /// The probe's condition.
    pub(crate) fn ready(&self) -> watch::Receiver<bool> {
        self.ready.subscribe()
    }

    /// What status writers wait on.
    pub(crate) fn writable(&self) -> watch::Receiver<bool> {
        self.writable.subscribe()
    }

    /// Derives `ready` and `writable` as the stages are reached, until
    /// shutdown (keeping their channels open for the waiters).
    ///
    /// Before `writable` turns true, `index` aggregates what is pending:
    /// each stage's task noted its changes in the index before it reached
    /// the stage (the importer its stored reports), but the aggregator
    /// task may not have passed yet, and a writer woken by `writable`
    /// would write the view from before them (a restarted hub showed "No
    /// cluster reports this Gateway" for its first write).
    pub(crate) fn spawn(self, index: Index, tasks: &mut JoinSet<()>, shutdown: CancellationToken) {
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
    use crate::index::IndexConfig;
    use gateway_api::apis::standard::gateways::GatewayStatus;
    use gwhub_hub_rules::aggregate::{GatewayKey, LiveHub, Options};
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
        let readiness = Readiness::new();
        readiness.reached(Stage::InventorySynced);
        readiness.reached(Stage::PlacementsSynced);
        let restored = readiness.sender(Stage::Restored);
        let synced = readiness.sender(Stage::GatewaysSynced);
        let caught_up = readiness.sender(Stage::CaughtUp);
        let mut ready = readiness.ready();
        let mut writable = readiness.writable();
        let mut tasks = JoinSet::new();
        let shutdown = CancellationToken::new();
        readiness.spawn(index(), &mut tasks, shutdown.clone());

        caught_up.send_replace(true);
        restored.send_replace(true);
        tokio::task::yield_now().await;
        assert!(!*ready.borrow() && !*writable.borrow());
        synced.send_replace(true);
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

        let readiness = Readiness::new();
        let mut writable = readiness.writable();
        let stages: Vec<_> = STAGES.into_iter().map(|s| readiness.sender(s)).collect();
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
            stage.send_replace(true);
        }
        writable.wait_for(|w| *w).await.unwrap();
        let after = index.view(&web).expect("still aggregated");
        assert_eq!(&*after.clusters, ["east".to_owned()]);

        shutdown.cancel();
        while tasks.join_next().await.is_some() {}
    }
}
