//! Attaching the Kubernetes side to a running hub: one step per concern
//! (the store, the hub Gateways' watches, the inventory, the election, the
//! write shards, the Secrets' followers, Events, fleet DNS, the status
//! writer), each spawning its tasks on one [`Wiring`] and returning the
//! channels a later step needs.
//!
//! It exists so that [`attach`] reads as the order of start-up
//! (what each step needs from the ones before it) instead of one
//! three-hundred-line function; every task still ends on the one shutdown
//! token, and each step declares what its tasks bring about
//! ([`Readiness::bring_about`]) and wait on ([`Readiness::wait`]): a
//! stage, leading, ready or writable.

use std::sync::Arc;
use std::time::Duration;

use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::KubeHub;
use crate::index::{DnsView, Index};
use crate::serve::Hub;
use gwhub_dns::DnsConfig;
use gwhub_hub_rules::inventory::ClusterProfile;
use gwhub_k8s::metrics::Metrics;
use gwhub_k8s::readiness::{Readiness, Stage, Wait};
use gwhub_k8s::status_writer::{Queue, StatusWriter, Unwritten};
use gwhub_k8s::{
    Connected, KubeOptions, SecretsFollowers, budget, events, inventory, leader, liveness,
    reporting, shards, status_writer, store,
};

/// What every step shares: the management cluster, the hub's index, the
/// Kubernetes mode's metrics and API budget, and the tasks with their one
/// shutdown token.
struct Wiring {
    client: Client,
    options: KubeOptions,
    index: Index,
    metrics: Arc<Metrics>,
    budget: Arc<budget::ApiBudget>,
    shutdown: CancellationToken,
    tasks: JoinSet<()>,
}

/// The ClusterProfiles the hub published, by name, for their condition.
type Profiles = watch::Receiver<std::collections::BTreeMap<String, ClusterProfile>>;

/// Adds the Kubernetes side to a running hub, with fleet DNS when
/// `dns_config` is given. Ingest already serves: stored reports are
/// imported for every cluster that has not reported to this process yet
/// (a live report is newer), and status is written only once the hub is
/// writable ([`gwhub_k8s::readiness::derive`]).
pub(super) fn attach(
    connected: Connected,
    hub: Hub,
    followers: Option<SecretsFollowers>,
    dns_config: Option<DnsConfig>,
) -> KubeHub {
    let placements = connected.placements_served();
    let Connected {
        client, options, ..
    } = connected;
    let metrics = Arc::new(Metrics::default());
    let budget = Arc::new(budget::ApiBudget::new(
        options.api_qps,
        options.api_burst,
        metrics.clone(),
    ));
    let mut w = Wiring {
        client,
        options,
        index: hub.index.clone(),
        metrics,
        budget,
        shutdown: CancellationToken::new(),
        tasks: JoinSet::new(),
    };
    // Without an election this replica always leads.
    let r = Readiness::new(w.options.lease.is_none());
    let heartbeats = w.store(&r);
    let (queue, unwritten) = w.gateway_watches(&r);
    let managed = w.inventory(&r);
    w.placements(&r, placements);
    w.election(&r);
    let writes = w.write_shards(heartbeats, &r);
    if let Some(followers) = followers {
        w.followers(followers, &r);
    }
    if let Some((namespace, managed)) = managed {
        w.profiles_status(&namespace, managed, &r);
    }
    w.events(&r);
    let dns = w.dns(&hub, dns_config, &r);
    w.status_writer(queue, unwritten, writes.clone(), &r);
    // `ready` is the probe (ingest must serve for agents to come back);
    // `writable`, what writes status, also waits for this replica to
    // catch up (`gwhub_k8s::readiness::derive`).
    let ready = r.wait(Wait::Ready);
    let leader = r.wait(Wait::Leading);
    r.spawn(w.index.clone(), &mut w.tasks, w.shutdown.clone());
    let Wiring {
        options,
        metrics,
        shutdown,
        tasks,
        ..
    } = w;
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

impl Wiring {
    /// An API in the hub's own namespace.
    fn own<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.options.namespace)
    }

    /// An API over the hub Gateways' namespace (`--gateway-namespace`), or
    /// every namespace.
    fn gateway_scope<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        match &self.options.gateway_namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }

    /// The store: the replicas' liveness records (heartbeats, and this
    /// replica catching up: `CaughtUp`), the importer of stored reports
    /// (`Restored`) and the report writer (`gwhub_k8s::store::StoreTasks`).
    /// Returns the heartbeats the write shards judge replicas by.
    fn store(&mut self, readiness: &Readiness) -> liveness::Heartbeats {
        store::StoreTasks {
            client: self.client.clone(),
            options: self.options.clone(),
            index: self.index.store_port(),
            metrics: self.metrics.clone(),
            budget: self.budget.clone(),
        }
        .spawn(
            readiness.bring_about(Stage::Restored),
            readiness.bring_about(Stage::CaughtUp),
            &mut self.tasks,
            &self.shutdown,
        )
    }

    /// The hub Gateways' watch (`GatewaysSynced`) and the index's, both
    /// queueing what the status writer writes.
    fn gateway_watches(&mut self, readiness: &Readiness) -> (Arc<Queue>, Arc<Unwritten>) {
        let gateways: Api<Gateway> = self.gateway_scope();
        let queue = Arc::new(Queue::default());
        let unwritten = Arc::new(Unwritten::default());
        self.tasks.spawn(status_writer::run_gateway_watch(
            gateways,
            self.index.status_port(),
            queue.clone(),
            readiness.bring_about(Stage::GatewaysSynced),
            self.shutdown.clone(),
        ));
        self.tasks.spawn(status_writer::run_index_watch(
            self.index.status_port(),
            queue.clone(),
            unwritten.clone(),
            self.shutdown.clone(),
        ));
        (queue, unwritten)
    }

    /// The fleet inventory's watch (`InventorySynced`, at once without
    /// one), the record of removals and the revocation of orphaned
    /// certificates. Returns the inventory's namespace and the
    /// ClusterProfiles the hub published, for their condition (`None`
    /// without an inventory).
    fn inventory(&mut self, readiness: &Readiness) -> Option<(String, Profiles)> {
        let Some((namespace, mode)) = self.options.inventory.clone() else {
            readiness.reached(Stage::InventorySynced);
            return None;
        };
        if self.index.inventory_namespace().as_deref() != Some(namespace.as_str()) {
            // The index is built once, from one config: the hub must be
            // started with the inventory (`KubeExtras::inventory`).
            tracing::error!(
                namespace,
                ?mode,
                "the hub was started without this fleet inventory; its admissions do not follow it"
            );
        }
        let (managed_tx, managed) = watch::channel(Default::default());
        let profiles = || Api::namespaced(self.client.clone(), &namespace);
        let removals = inventory::Removals::default();
        self.tasks.spawn(inventory::record_removals(
            removals.clone(),
            self.own(),
            readiness.wait(Wait::Leading),
            self.shutdown.clone(),
        ));
        self.tasks.spawn(inventory::revoke_orphans(
            profiles(),
            self.own(),
            readiness.wait(Wait::Leading),
            removals.clone(),
            namespace.clone(),
            self.shutdown.clone(),
        ));
        self.tasks.spawn(inventory::run_inventory_watch(
            profiles(),
            self.index.inventory_port(),
            readiness.bring_about(Stage::InventorySynced),
            removals,
            managed_tx,
            self.shutdown.clone(),
        ));
        Some((namespace, managed))
    }

    /// The PlacementDecisions' watch (`PlacementsSynced`, at once where
    /// the CRD is not served).
    fn placements(&mut self, readiness: &Readiness, served: bool) {
        if !served {
            readiness.reached(Stage::PlacementsSynced);
            return;
        }
        self.tasks.spawn(inventory::run_placement_watch(
            self.gateway_scope(),
            self.index.inventory_port(),
            readiness.bring_about(Stage::PlacementsSynced),
            self.shutdown.clone(),
        ));
    }

    /// The leader election on the hub's Lease (what `Wait::Leading`
    /// follows); without one this replica always leads.
    fn election(&mut self, readiness: &Readiness) {
        if let Some(lease) = self.options.lease.clone() {
            let api: Api<Lease> = self.own();
            self.tasks.spawn(leader::run(
                api,
                lease,
                readiness.elect(),
                self.metrics.clone(),
                self.shutdown.clone(),
            ));
        } else {
            self.metrics.leader.set(1);
        }
    }

    /// Which hub Gateways this replica writes: the status shards it holds
    /// (`--status-shards`), else all of them while it leads.
    fn write_shards(
        &mut self,
        heartbeats: liveness::Heartbeats,
        readiness: &Readiness,
    ) -> watch::Receiver<shards::Writes> {
        let (writes_tx, writes) = watch::channel(if self.options.lease.is_none() {
            shards::Writes::All
        } else {
            shards::Writes::Nothing
        });
        match &self.options.lease {
            Some(lease) if self.options.status_shards > 0 => {
                self.tasks.spawn(shards::run(
                    self.own(),
                    shards::ShardConfig::new(self.options.status_shards, lease),
                    heartbeats,
                    writes_tx,
                    self.metrics.clone(),
                    self.shutdown.clone(),
                ));
            }
            _ => {
                let mut leading = readiness.wait(Wait::Leading);
                let stop = self.shutdown.clone();
                self.tasks.spawn(async move {
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
        writes
    }

    /// The ClusterProfiles' condition in `namespace`, written by the
    /// leader once the hub is writable.
    fn profiles_status(&mut self, namespace: &str, managed: Profiles, readiness: &Readiness) {
        self.tasks.spawn(reporting::run(
            Api::namespaced(self.client.clone(), namespace),
            self.index.inventory_port(),
            managed,
            readiness.wait(Wait::Leading),
            readiness.wait(Wait::Writable),
            self.shutdown.clone(),
        ));
    }

    /// With TLS from the hub's Secrets: what keeps the identity current
    /// (`SecretsFollowers::spawn`).
    fn followers(&mut self, followers: SecretsFollowers, readiness: &Readiness) {
        followers.spawn(
            &self.client,
            &self.options.namespace,
            &readiness.wait(Wait::Leading),
            &mut self.tasks,
            &self.shutdown,
        );
    }

    /// The clusters' stale/fresh transitions as Events.
    fn events(&mut self, readiness: &Readiness) {
        self.tasks.spawn(events::run(
            self.client.clone(),
            self.options.namespace.clone(),
            self.index.events_port(),
            readiness.wait(Wait::Leading),
            self.metrics.clone(),
            self.shutdown.clone(),
        ));
    }

    /// Fleet DNS, when configured; returns its published view (empty
    /// while it is off or this replica does not lead).
    fn dns(
        &mut self,
        hub: &Hub,
        config: Option<DnsConfig>,
        readiness: &Readiness,
    ) -> watch::Receiver<Arc<DnsView>> {
        let view = hub.dns_view.clone();
        let dns = view.subscribe();
        if let Some(config) = config {
            self.tasks.spawn(
                gwhub_dns::DnsController {
                    config,
                    client: self.client.clone(),
                    index: self.index.dns_port(),
                    budget: self.budget.clone(),
                    metrics: self.metrics.clone(),
                    gateway_namespace: self.options.gateway_namespace.clone(),
                    leader: readiness.wait(Wait::Leading),
                    writable: readiness.wait(Wait::Writable),
                    view,
                }
                .run(self.shutdown.clone()),
            );
        }
        dns
    }

    /// The hub Gateways' status writer.
    fn status_writer(
        &mut self,
        queue: Arc<Queue>,
        unwritten: Arc<Unwritten>,
        writes: watch::Receiver<shards::Writes>,
        readiness: &Readiness,
    ) {
        self.tasks.spawn(
            StatusWriter {
                client: self.client.clone(),
                index: self.index.status_port(),
                queue,
                unwritten,
                metrics: self.metrics.clone(),
                debounce: self.options.debounce,
                budget: self.budget.clone(),
                retry: gwhub_common::Backoff::new(Duration::from_secs(1), Duration::from_secs(300)),
            }
            .run(
                writes,
                readiness.wait(Wait::Writable),
                self.shutdown.clone(),
            ),
        );
    }
}
