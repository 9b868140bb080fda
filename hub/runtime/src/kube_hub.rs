//! The hub in Kubernetes mode, put together: [`Builder`] (from
//! [`Connected::hub`]) starts it, the one start-up path of `gwhub serve`
//! and the tests; `Connected::attach` adds every Kubernetes task (store,
//! status writer, Leases, liveness, joins, inventory, Events) and fleet
//! DNS to the running [`Hub`], and [`KubeHub`] runs them until shutdown.
//!
//! It exists beside [`crate::serve`], above the parts, because attaching
//! is wiring: it names the running hub, the DNS controller and each
//! Kubernetes task, so none of those parts has to name another. What each
//! task brings about or waits on at start-up is one type,
//! [`readiness::Readiness`]; the planned runtime builder grows here.

use std::sync::Arc;
use std::time::Duration;

use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::dns::DnsConfig;
use crate::kube::metrics::Metrics;
use crate::kube::status_writer::{Queue, StatusWriter, Unwritten};
use crate::kube::store::ReportWriter;
use crate::kube::{
    Connected, KubeError, KubeOptions, SecretsFollowers, budget, events, inventory, leader,
    liveness, pending, reporting, revocations, shards, status_writer, store,
};
use crate::serve::{Hub, HubConfig, ServeError};
use gwhub_hub_rules::report::ClusterReport;
use readiness::{Readiness, Stage};

mod builder;
mod readiness;

pub use builder::Builder;

/// Why a hub in Kubernetes mode could not start.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// The management cluster (reached, its store and inventory checked).
    #[error(transparent)]
    Kube(#[from] KubeError),
    /// The hub's listeners.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// A running hub in Kubernetes mode.
pub struct KubeHub {
    pub hub: Hub,
    pub metrics: Arc<Metrics>,
    /// Whether this replica currently writes hub Gateway status.
    pub leader: watch::Receiver<bool>,
    /// Which hub Gateways this replica writes the status of now.
    pub writes: watch::Receiver<shards::Writes>,
    /// True once the stored reports and the hub Gateways are loaded.
    pub ready: watch::Receiver<bool>,
    /// Fleet DNS as this replica last decided it (empty while it is off or
    /// not leading).
    pub dns: watch::Receiver<Arc<crate::index::DnsView>>,
    shutdown: CancellationToken,
    tasks: JoinSet<()>,
}

impl Connected {
    /// Adds the Kubernetes side to a running hub, with fleet DNS when
    /// `dns_config` is given. Ingest already serves:
    /// stored reports are imported for every cluster that has not reported
    /// to this process yet (a live report is newer), and status is written
    /// only once they and the hub Gateways are loaded.
    ///
    /// Still one long function: the planned runtime builder (each
    /// task declaring what it waits on) replaces this choreography.
    pub(crate) fn attach(
        self,
        hub: Hub,
        followers: Option<SecretsFollowers>,
        dns_config: Option<DnsConfig>,
    ) -> KubeHub {
        let Connected {
            client,
            options,
            placements,
        } = self;
        let (secrets, revocations, tokens) = match followers {
            Some(f) => (Some(f.secrets), Some(f.revocations), Some(f.tokens)),
            None => (None, None, None),
        };
        let index = hub.index.clone();
        let reports_api: Api<ClusterReport> = Api::namespaced(client.clone(), &options.namespace);
        let metrics = Arc::new(Metrics::default());
        let shutdown = CancellationToken::new();
        let mut tasks = JoinSet::new();
        // Start-up conditions (restored, synced, caught up, ready,
        // writable: they hold once reached) are the stages of `readiness`;
        // `leader` and `writes` below flip back and forth. Neither is
        // shutdown: that is `shutdown` above, the one token every task
        // ends on.
        let readiness = Readiness::new();
        let forget = Arc::new(store::LostQueue::default());
        let budget = Arc::new(budget::ApiBudget::new(
            options.api_qps,
            options.api_burst,
            metrics.clone(),
        ));
        let stored = store::StoredParts::default();
        // Where the status shards judge replicas alive by the heartbeat,
        // it beats at least as often as a shard Lease is renewed.
        let beat_every = match &options.lease {
            Some(lease) if options.status_shards > 0 => {
                liveness::heartbeat_every(index.stale_after()).min(lease.renew_every)
            }
            _ => liveness::heartbeat_every(index.stale_after()),
        };
        let (sightings, heartbeats, caught_up) = liveness::Liveness {
            leases: Api::namespaced(client.clone(), &options.namespace),
            configmaps: Api::namespaced(client.clone(), &options.namespace),
            index: index.clone(),
            identity: options
                .lease
                .as_ref()
                .map_or_else(leader::default_identity, |l| l.identity.clone()),
            stored: stored.clone(),
            restored: readiness.receiver(Stage::Restored),
            lost_own: Default::default(),
            beat_every,
            metrics: metrics.clone(),
        }
        .spawn(&mut tasks, shutdown.clone());
        readiness.follow(Stage::CaughtUp, caught_up, &mut tasks, shutdown.clone());
        tasks.spawn(store::run_importer(
            store::Store {
                api: reports_api.clone(),
                index: index.clone(),
                stored: stored.clone(),
                metrics: metrics.clone(),
                budget: budget.clone(),
                sightings,
            },
            readiness.sender(Stage::Restored),
            forget.clone(),
            shutdown.clone(),
        ));
        tasks.spawn(
            ReportWriter {
                api: reports_api,
                index: index.clone(),
                metrics: metrics.clone(),
                debounce: options.debounce,
                budget: budget.clone(),
                stored,
                rewrite_every: store::REWRITE_EVERY,
                writes_in_flight: gwhub_hub_rules::store_writer::writes_in_flight(options.api_qps),
            }
            .run(forget, shutdown.clone()),
        );

        let gateways: Api<Gateway> = match &options.gateway_namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let queue = Arc::new(Queue::default());
        let unwritten = Arc::new(Unwritten::default());
        tasks.spawn(status_writer::run_gateway_watch(
            gateways,
            index.clone(),
            queue.clone(),
            readiness.sender(Stage::GatewaysSynced),
            shutdown.clone(),
        ));
        tasks.spawn(status_writer::run_index_watch(
            index.clone(),
            queue.clone(),
            unwritten.clone(),
            shutdown.clone(),
        ));

        let (leader_tx, leader) = watch::channel(options.lease.is_none());
        // The ClusterProfiles the hub published, for their condition.
        let (managed_tx, managed) = watch::channel(Default::default());
        if let Some((namespace, mode)) = &options.inventory {
            if index.inventory_namespace().as_deref() != Some(namespace.as_str()) {
                // The index is built once, from one config: the hub must
                // be started with the inventory (`KubeExtras::inventory`).
                tracing::error!(
                    namespace,
                    ?mode,
                    "the hub was started without this fleet inventory; its admissions do not follow it"
                );
            }
            let removals = inventory::Removals::default();
            tasks.spawn(inventory::record_removals(
                removals.clone(),
                Api::namespaced(client.clone(), &options.namespace),
                leader.clone(),
                shutdown.clone(),
            ));
            tasks.spawn(inventory::revoke_orphans(
                Api::namespaced(client.clone(), namespace),
                Api::namespaced(client.clone(), &options.namespace),
                leader.clone(),
                removals.clone(),
                namespace.clone(),
                shutdown.clone(),
            ));
            tasks.spawn(inventory::run_inventory_watch(
                Api::namespaced(client.clone(), namespace),
                index.clone(),
                readiness.sender(Stage::InventorySynced),
                removals,
                managed_tx,
                shutdown.clone(),
            ));
        } else {
            readiness.reached(Stage::InventorySynced);
            drop(managed_tx);
        }
        if placements {
            let api = match &options.gateway_namespace {
                Some(ns) => Api::namespaced(client.clone(), ns),
                None => Api::all(client.clone()),
            };
            tasks.spawn(inventory::run_placement_watch(
                api,
                index.clone(),
                readiness.sender(Stage::PlacementsSynced),
                shutdown.clone(),
            ));
        } else {
            readiness.reached(Stage::PlacementsSynced);
        }

        // `ready` is the probe (ingest must serve for agents to come
        // back); `writable`, what writes status (hub Gateways,
        // ClusterProfiles), also waits for this replica to catch up
        // (`readiness::derive` says why).
        let ready = readiness.ready();
        let writable = readiness.writable();
        readiness.spawn(&mut tasks, shutdown.clone());

        if let Some(lease) = options.lease.clone() {
            let api: Api<Lease> = Api::namespaced(client.clone(), &options.namespace);
            tasks.spawn(leader::run(
                api,
                lease,
                leader_tx,
                metrics.clone(),
                shutdown.clone(),
            ));
        } else {
            // No election: this replica always writes.
            metrics.leader.set(1);
            let stop = shutdown.clone();
            tasks.spawn(async move {
                let _keep = leader_tx;
                stop.cancelled().await;
            });
        }
        let (writes_tx, writes) = watch::channel(if options.lease.is_none() {
            shards::Writes::All
        } else {
            shards::Writes::Nothing
        });
        match &options.lease {
            Some(lease) if options.status_shards > 0 => {
                tasks.spawn(shards::run(
                    Api::namespaced(client.clone(), &options.namespace),
                    shards::ShardConfig::new(options.status_shards, lease),
                    heartbeats,
                    writes_tx,
                    metrics.clone(),
                    shutdown.clone(),
                ));
            }
            // The leader writes every hub Gateway.
            _ => {
                let mut leading = leader.clone();
                let stop = shutdown.clone();
                tasks.spawn(async move {
                    loop {
                        let all = *leading.borrow_and_update();
                        writes_tx.send_replace(if all {
                            shards::Writes::All
                        } else {
                            shards::Writes::Nothing
                        });
                        tokio::select! {
                            _ = stop.cancelled() => return,
                            r = leading.changed() => if r.is_err() { return },
                        }
                    }
                });
            }
        }
        if let Some(secrets) = secrets {
            secrets.spawn(&mut tasks, leader.clone(), shutdown.clone());
        }
        if let Some((namespace, _)) = &options.inventory {
            tasks.spawn(reporting::run(
                Api::namespaced(client.clone(), namespace),
                index.clone(),
                managed,
                leader.clone(),
                writable.clone(),
                shutdown.clone(),
            ));
        }
        if let Some((known, api)) = tokens {
            tasks.spawn(known.follow(api, shutdown.clone()));
            tasks.spawn(pending::sweep(
                Api::all(client.clone()),
                Api::namespaced(client.clone(), &options.namespace),
                leader.clone(),
                shutdown.clone(),
            ));
        }
        if let Some((api, slot, lifetime)) = revocations {
            tasks.spawn(revocations::follow(
                api,
                slot,
                Api::namespaced(client.clone(), &options.namespace),
                leader.clone(),
                lifetime,
                shutdown.clone(),
            ));
        }
        tasks.spawn(events::run(
            client.clone(),
            options.namespace.clone(),
            index.clone(),
            leader.clone(),
            metrics.clone(),
            shutdown.clone(),
        ));
        let dns_tx = hub.dns_view.clone();
        let dns = dns_tx.subscribe();
        if let Some(config) = dns_config {
            tasks.spawn(
                crate::dns::DnsController {
                    config,
                    client: client.clone(),
                    index: index.clone(),
                    budget: budget.clone(),
                    metrics: metrics.clone(),
                    gateway_namespace: options.gateway_namespace.clone(),
                    leader: leader.clone(),
                    writable: writable.clone(),
                    view: dns_tx,
                }
                .run(shutdown.clone()),
            );
        }
        tasks.spawn(
            StatusWriter {
                client,
                index,
                queue,
                unwritten,
                metrics: metrics.clone(),
                debounce: options.debounce,
                budget,
                retry: gwhub_common::Backoff::new(Duration::from_secs(1), Duration::from_secs(300)),
            }
            .run(writes.clone(), writable, shutdown.clone()),
        );
        tracing::info!(namespace = %options.namespace, gateway_namespace = ?options.gateway_namespace, election = options.lease.is_some(), status_shards = options.status_shards, "hub Kubernetes mode started");
        KubeHub {
            hub,
            metrics,
            leader,
            writes,
            ready,
            dns,
            shutdown,
            tasks,
        }
    }
}

impl KubeHub {
    /// The [`Builder`] of [`Connected::hub`] with neither TLS nor fleet
    /// DNS: the in-process entry point for tests.
    pub async fn start(
        config: HubConfig,
        options: KubeOptions,
        client: Client,
    ) -> Result<KubeHub, HubError> {
        Self::start_with_dns(config, options, None, client).await
    }

    /// [`KubeHub::start`] with fleet DNS (`dns`).
    pub async fn start_with_dns(
        config: HubConfig,
        options: KubeOptions,
        dns: Option<DnsConfig>,
        client: Client,
    ) -> Result<KubeHub, HubError> {
        Connected::new(client, options)
            .await?
            .hub(config)
            .dns(dns)
            .start()
            .await
    }

    /// Stops writing (releasing the Lease), then shuts the hub down.
    pub async fn shutdown(mut self) -> Result<(), ServeError> {
        self.shutdown.cancel();
        let stop = async { while self.tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(Duration::from_secs(5), stop)
            .await
            .is_err()
        {
            self.tasks.shutdown().await;
        }
        self.hub.shutdown().await
    }

    /// Serves until `signal` resolves (then shuts down cleanly) or a server
    /// or task ends early (then shuts down and returns why, so the process
    /// exits non-zero and is restarted).
    pub async fn run_until(mut self, signal: impl Future<Output = ()>) -> Result<(), ServeError> {
        let ended = tokio::select! {
            _ = signal => None,
            e = self.hub.ended() => Some(e),
            Some(r) = self.tasks.join_next() => {
                Some(crate::serve::task_end("a Kubernetes task (watch, store, Lease or status writer)", r))
            }
        };
        match ended {
            None => {
                tracing::info!("shutting down: releasing the lease, draining streams");
                self.shutdown().await
            }
            Some(e) => {
                tracing::error!(error = %e, "shutting down");
                let _ = self.shutdown().await;
                Err(e)
            }
        }
    }
}
