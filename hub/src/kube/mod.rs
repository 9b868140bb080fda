//! The hub's Kubernetes mode (`gwhub serve` without `--no-kube`): the
//! in-memory hub of [`crate::serve`] plus
//! - [`store`]: every cluster's report stored as a `ClusterReport` object
//!   and imported back, so a restarted hub (or a new leader) resumes
//!   without flapping or forgetting;
//! - [`status_writer`]: the hub Gateways watched into the index (which
//!   aggregates with them) and the index's aggregate server-side applied
//!   onto each hub Gateway `ns/name` (field manager `gwhub`), through one
//!   coalescing queue, skipping writes that would change only times;
//! - [`liveness`]: each replica's heartbeat and the clusters it serves, so
//!   a connected cluster's report is not rewritten just to stay fresh, and
//!   a restarted hub writes status only once the clusters the ended
//!   process served are back (its store may lag what that process heard);
//! - [`leader`]: a Lease, so only one replica writes status; the others keep
//!   ingesting (and storing their agents' reports) and serve the Dashboard;
//!   [`shards`]: with `--status-shards`, status writing spread over the
//!   replicas by a Lease per shard of hub Gateways;
//! - [`events`]: Events on a cluster's `ClusterReport` when it goes stale or
//!   reports again;
//! - [`inventory`]: the fleet inventory, the ClusterProfiles of
//!   `--inventory-namespace` (who may stream, which clusters a hub Gateway
//!   expects, who leaves), and the PlacementDecisions of
//!   `gwhub.io/placement`; [`reporting`]: the `gwhub.io/Reporting`
//!   condition on the ClusterProfiles the hub published at a join.
//! - [`tls_secrets`]: the hub's CA and serving certificate in Secrets.

pub mod budget;
pub mod events;
pub mod inventory;
pub mod issued;
pub mod join;
pub mod join_limits;
pub mod leader;
mod liveness;
pub mod metrics;
pub mod pending;
pub mod reporting;
pub mod revocations;
pub mod shards;
pub mod status_writer;
mod store;
pub mod tls_secrets;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::serve::{Hub, HubConfig, ServeError};
use gwhub_hub_rules::report::ClusterReport;
use leader::LeaseConfig;
use metrics::Metrics;
use status_writer::{Queue, StatusWriter};
use store::ReportWriter;

/// The field manager of everything the hub writes.
pub const FIELD_MANAGER: &str = "gwhub";

/// Where and how the hub works on the management cluster.
#[derive(Clone, Debug)]
pub struct KubeOptions {
    /// Namespace of the `ClusterReport` objects and the Lease (the hub's own).
    pub namespace: String,
    /// Only hub Gateways in this namespace; all namespaces when `None`.
    pub gateway_namespace: Option<String>,
    /// `None`: no election, this replica always writes (one replica only).
    pub lease: Option<LeaseConfig>,
    /// `--status-shards`: with election, the hub Gateways' status is
    /// written by whichever replica holds their shard's Lease (spread over
    /// the replicas); 0: by the leader alone.
    pub status_shards: u32,
    /// Minimum spacing of the hub's write passes (status and reports), so
    /// a burst of reports becomes one write per hub Gateway per window.
    pub debounce: Duration,
    /// API writes per second (all writers together; 0: no limit).
    pub api_qps: f64,
    /// API writes that may go at once before `api_qps` applies.
    pub api_burst: u32,
    /// `--inventory-namespace` and `--inventory-mode`: the fleet is the
    /// ClusterProfiles there; `None`: any cluster may report (as before).
    pub inventory: Option<(String, gwhub_hub_rules::inventory::Mode)>,
    /// Fleet DNS (`--dns-*`); `None`: off.
    pub dns: Option<crate::dns::DnsConfig>,
}

impl KubeOptions {
    pub fn new(namespace: impl Into<String>) -> Self {
        KubeOptions {
            namespace: namespace.into(),
            gateway_namespace: None,
            lease: Some(LeaseConfig::new(leader::default_identity())),
            status_shards: 0,
            debounce: Duration::from_millis(50),
            api_qps: budget::DEFAULT_QPS,
            api_burst: budget::DEFAULT_BURST,
            inventory: None,
            dns: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    #[error("Kubernetes client configuration: {0}")]
    Config(String),
    #[error(
        "cannot list ClusterReports in namespace {namespace:?} ({source}); is the CRD from manifests/ installed and may the hub read it?"
    )]
    Store {
        namespace: String,
        source: kube::Error,
    },
    #[error(
        "cannot list ClusterProfiles in namespace {namespace:?} ({source}); are the ClusterProfile CRDs (multicluster.x-k8s.io) installed and may the hub read them?"
    )]
    Inventory {
        namespace: String,
        source: kube::Error,
    },
    #[error(
        "cannot list PlacementDecisions ({source}); may the hub read them (manifests/hub/rbac.yaml)?"
    )]
    Placements { source: kube::Error },
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// The hub's TLS Secrets (names the Secret and the problem).
    #[error("TLS: {0}")]
    TlsSecrets(tls_secrets::SecretsError),
    /// The removed clusters' ConfigMap, read before serving.
    #[error("TLS: {0}")]
    Revocations(revocations::RevocationsError),
}

/// A client from `--kubeconfig`, else `KUBECONFIG` / `~/.kube/config`, else
/// the in-cluster service account.
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, KubeError> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .map_err(|e| KubeError::Config(format!("{}: {e}", path.display())))?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| KubeError::Config(format!("{}: {e}", path.display())))?
        }
        None => Config::infer()
            .await
            .map_err(|e| KubeError::Config(e.to_string()))?,
    };
    Client::try_from(config).map_err(|e| KubeError::Config(e.to_string()))
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

/// The removed clusters' ConfigMap, what follows it, and how long the
/// certificates it covers live.
type Revoked = (
    Api<k8s_openapi::api::core::v1::ConfigMap>,
    watch::Sender<Arc<std::collections::BTreeMap<String, i64>>>,
    Duration,
);

/// A management cluster reached and its store checked, ready to attach to
/// a running [`Hub`].
pub struct Connected {
    pub client: Client,
    pub options: KubeOptions,
    /// Whether the PlacementDecision CRD is served (with an inventory).
    placements: bool,
    /// Follows the hub's TLS Secrets once [`Connected::tls_from_secrets`]
    /// made the hub's TLS from them.
    secrets: Option<tls_secrets::Follower>,
    /// Followed with the Secrets: the removed clusters.
    revocations: Option<Revoked>,
    /// Followed with the Secrets: the join tokens that exist.
    tokens: Option<(
        join_limits::KnownTokens,
        Api<k8s_openapi::api::core::v1::Secret>,
    )>,
}

impl Connected {
    /// Checks that the hub can list its `ClusterReport`s (the CRD from
    /// `manifests/` is installed and RBAC allows it): fail fast, with a hint.
    pub async fn new(client: Client, options: KubeOptions) -> Result<Connected, KubeError> {
        let api: Api<ClusterReport> = Api::namespaced(client.clone(), &options.namespace);
        api.list(&ListParams::default().limit(1))
            .await
            .map_err(|source| KubeError::Store {
                namespace: options.namespace.clone(),
                source,
            })?;
        if let Some((namespace, _)) = &options.inventory {
            let api: Api<gwhub_hub_rules::inventory::ClusterProfile> =
                Api::namespaced(client.clone(), namespace);
            api.list(&ListParams::default().limit(1))
                .await
                .map_err(|source| KubeError::Inventory {
                    namespace: namespace.clone(),
                    source,
                })?;
        }
        let placements = match &options.inventory {
            None => false,
            Some(_) => {
                let api: Api<gwhub_hub_rules::inventory::PlacementDecision> =
                    match &options.gateway_namespace {
                        Some(ns) => Api::namespaced(client.clone(), ns),
                        None => Api::all(client.clone()),
                    };
                match api.list(&ListParams::default().limit(1)).await {
                    Ok(_) => true,
                    // No CRD: no placements (gwhub.io/placement says so).
                    Err(kube::Error::Api(s)) if s.code == 404 => {
                        tracing::info!(
                            "the PlacementDecision CRD (multicluster.x-k8s.io) is not installed: gwhub.io/placement is not available"
                        );
                        false
                    }
                    Err(source) => return Err(KubeError::Placements { source }),
                }
            }
        };
        Ok(Connected {
            client,
            options,
            placements,
            secrets: None,
            revocations: None,
            tokens: None,
        })
    }

    /// The fleet inventory the hub must start with, for
    /// [`Hub::start_with`]'s [`crate::serve::KubeExtras`] (so no agent streams before it holds).
    pub fn inventory(&self) -> Option<(String, gwhub_hub_rules::inventory::Mode)> {
        self.options.inventory.clone()
    }

    /// The hub's TLS from Secrets `gwhub-ca` and `gwhub-serving` in its
    /// namespace, made when absent; [`Connected::attach`] then follows them
    /// and the leader renews the serving certificate.
    pub async fn tls_from_secrets(
        &mut self,
        config: tls_secrets::SecretsConfig,
        paths: &crate::tls::TlsPaths<'_>,
    ) -> Result<crate::tls::HubTls, KubeError> {
        let api = Api::namespaced(self.client.clone(), &self.options.namespace);
        let mut config = config;
        // A restarted leader's lease must run out before a running replica
        // leads and can write a corrupt CA back: wait past it.
        if let Some(lease) = &self.options.lease {
            config.ca_repair_grace = config
                .ca_repair_grace
                .max(lease.lease_duration + lease.renew_every);
        }
        let agent_lifetime = config.agent_lifetime;
        let (tls, follower) = tls_secrets::start(api, config, paths).await?;
        self.secrets = Some(follower);
        let mut joiner =
            join::Joiner::new(self.client.clone(), &self.options.namespace, agent_lifetime);
        if let Some((namespace, mode)) = &self.options.inventory {
            joiner = joiner.with_inventory(self.client.clone(), namespace);
            if *mode == gwhub_hub_rules::inventory::Mode::Enforce {
                joiner = joiner.enforcing_inventory();
            }
        }
        // Removed clusters: read before serving, so a restarted hub
        // refuses their certificates from its first handshake.
        let configmaps = Api::namespaced(self.client.clone(), &self.options.namespace);
        let removed = revocations::read(&configmaps)
            .await
            .map_err(KubeError::Revocations)?;
        let (removed_tx, removed_rx) = watch::channel(Arc::new(removed));
        self.revocations = Some((configmaps, removed_tx, agent_lifetime));
        self.tokens = Some((joiner.known_tokens(), joiner.token_secrets()));
        Ok(tls
            .with_joiner(Arc::new(joiner))
            .with_revocations(removed_rx))
    }

    /// Adds the Kubernetes side to a running hub. Ingest already serves:
    /// stored reports are imported for every cluster that has not reported
    /// to this process yet (a live report is newer), and status is written
    /// only once they and the hub Gateways are loaded.
    ///
    /// Still one long function: the planned runtime builder (each
    /// task declaring what it waits on) replaces this choreography.
    pub fn attach(self, hub: Hub) -> KubeHub {
        let Connected {
            client,
            options,
            placements,
            secrets,
            revocations,
            tokens,
        } = self;
        let index = hub.index.clone();
        let reports_api: Api<ClusterReport> = Api::namespaced(client.clone(), &options.namespace);
        let metrics = Arc::new(Metrics::default());
        let shutdown = CancellationToken::new();
        let mut tasks = JoinSet::new();
        // The `watch<bool>`s below are state (restored, synced, leading,
        // ready: read and waited on, some flip back), not shutdown: that is
        // `shutdown` above, the one token every task ends on.
        let (restored_tx, mut restored) = watch::channel(false);
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
        let (sightings, heartbeats, mut caught_up) = liveness::Liveness {
            leases: Api::namespaced(client.clone(), &options.namespace),
            configmaps: Api::namespaced(client.clone(), &options.namespace),
            index: index.clone(),
            identity: options
                .lease
                .as_ref()
                .map_or_else(leader::default_identity, |l| l.identity.clone()),
            stored: stored.clone(),
            restored: restored.clone(),
            lost_own: Default::default(),
            beat_every,
            metrics: metrics.clone(),
        }
        .spawn(&mut tasks, shutdown.clone());
        tasks.spawn(store::run_importer(
            store::Store {
                api: reports_api.clone(),
                index: index.clone(),
                stored: stored.clone(),
                metrics: metrics.clone(),
                budget: budget.clone(),
                sightings,
            },
            restored_tx,
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
        let (synced_tx, mut synced) = watch::channel(false);
        tasks.spawn(status_writer::run_gateway_watch(
            gateways,
            index.clone(),
            queue.clone(),
            synced_tx,
            shutdown.clone(),
        ));
        tasks.spawn(status_writer::run_index_watch(
            index.clone(),
            queue.clone(),
            shutdown.clone(),
        ));

        let (leader_tx, leader) = watch::channel(options.lease.is_none());
        let (inventory_tx, mut inventory_synced) = watch::channel(options.inventory.is_none());
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
            tasks.spawn(inventory::revoke_orphans(
                Api::namespaced(client.clone(), namespace),
                inventory::Removals {
                    configmaps: Api::namespaced(client.clone(), &options.namespace),
                    leader: leader.clone(),
                },
                namespace.clone(),
                shutdown.clone(),
            ));
            tasks.spawn(inventory::run_inventory_watch(
                Api::namespaced(client.clone(), namespace),
                index.clone(),
                inventory_tx,
                inventory::Removals {
                    configmaps: Api::namespaced(client.clone(), &options.namespace),
                    leader: leader.clone(),
                },
                managed_tx,
                shutdown.clone(),
            ));
        } else {
            drop(inventory_tx);
            drop(managed_tx);
        }
        let (placements_tx, mut placements_synced) = watch::channel(!placements);
        if placements {
            let api = match &options.gateway_namespace {
                Some(ns) => Api::namespaced(client.clone(), ns),
                None => Api::all(client.clone()),
            };
            tasks.spawn(inventory::run_placement_watch(
                api,
                index.clone(),
                placements_tx,
                shutdown.clone(),
            ));
        } else {
            drop(placements_tx);
        }

        let (ready_tx, ready) = watch::channel(false);
        // What writes status (hub Gateways, ClusterProfiles) waits on:
        // `ready` (the probe: ingest must serve for agents to come back),
        // and a restarted hub caught up with the clusters the ended
        // replicas served (`liveness::Gate`), so it writes nothing from a
        // store that lags the ingest.
        let (writable_tx, writable) = watch::channel(false);
        let stop = shutdown.clone();
        tasks.spawn(async move {
            // Status is written only with the expected clusters known.
            let both = async {
                restored.wait_for(|r| *r).await.is_ok()
                    && synced.wait_for(|s| *s).await.is_ok()
                    && inventory_synced.wait_for(|s| *s).await.is_ok()
                    && placements_synced.wait_for(|s| *s).await.is_ok()
            };
            tokio::select! {
                _ = stop.cancelled() => return,
                ok = both => if !ok { return },
            }
            ready_tx.send_replace(true);
            tokio::select! {
                _ = stop.cancelled() => return,
                ok = caught_up.wait_for(|c| *c) => if ok.is_err() { return },
            }
            writable_tx.send_replace(true);
            // Keep the channels open for the writers.
            stop.cancelled().await;
        });

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
        if let Some(config) = options.dns.clone() {
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
    /// [`Hub::start`] plus [`Connected::attach`]: the in-process entry
    /// point for tests.
    pub async fn start(
        config: HubConfig,
        options: KubeOptions,
        client: Client,
    ) -> Result<KubeHub, KubeError> {
        let connected = Connected::new(client, options).await?;
        let extras = crate::serve::KubeExtras {
            inventory: connected.inventory(),
            ..crate::serve::KubeExtras::default()
        };
        let hub = Hub::start_with(config, None, extras).await?;
        Ok(connected.attach(hub))
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use gateway_api::apis::standard::gateways::GatewayStatus;
    use jiff::Timestamp;

    use crate::index::Index;
    use gwhub_hub_rules::aggregate::{GatewayKey, Options};

    fn one(ip: &str) -> BTreeMap<GatewayKey, GatewayStatus> {
        let status: GatewayStatus = serde_json::from_value(serde_json::json!({
            "addresses": [{"type": "IPAddress", "value": ip}]
        }))
        .unwrap();
        BTreeMap::from([(GatewayKey::new("ns", "gw"), status)])
    }

    /// A stored report never overwrites what the cluster's own stream said
    /// (after the stream ended, unless the store's is later);
    /// one silent for longer than stale_after is stale at once; a deleted
    /// store object deregisters only a cluster that is not streaming here.
    #[test]
    fn import_respects_live_streams_and_staleness() {
        let index = Index::new(crate::index::IndexConfig::new(
            Options::default(),
            std::time::Duration::from_secs(60),
        ));
        let now = Timestamp::now().as_millisecond();
        assert!(index.import_cluster("old", one("10.0.0.1"), now - 120_000, now - 120_000));
        assert!(index.import_cluster("recent", one("10.0.0.2"), now - 1_000, now - 1_000));
        let by_name = |n: &str| index.clusters().into_iter().find(|c| c.name == n).unwrap();
        assert!(by_name("old").stale);
        assert!(!by_name("recent").stale);

        let session = index.connect("live", "test").unwrap();
        // Connected but not yet reported: the store fills the gap.
        assert!(index.import_cluster("live", one("10.0.0.3"), now, now));
        index.replace_snapshot(&session, one("10.0.0.4")).unwrap();
        assert!(!index.import_cluster("live", one("10.0.0.5"), now, now));
        let rec = index.cluster_record("live").unwrap();
        assert_eq!(rec.gateways, one("10.0.0.4"));
        assert!(rec.connected && rec.report_rev > 0);
        // The stream ends: the echo of an earlier write of this hub (an
        // older report) does not roll it back; a later report, written by
        // the replica the agent moved to, is taken. Its liveness (a later
        // last-seen, from that replica's heartbeat) is taken either way,
        // so the cluster does not go stale here.
        index.disconnect(&session);
        let reported_at = index.cluster_record("live").unwrap().last_report_millis;
        assert!(!index.import_cluster("live", one("10.0.0.3"), reported_at - 500, now));
        assert!(!index.import_cluster("live", one("10.0.0.3"), reported_at, now + 5_000));
        let rec = index.cluster_record("live").unwrap();
        assert_eq!(rec.gateways, one("10.0.0.4"));
        assert_eq!(rec.last_seen_millis, now + 5_000);
        assert!(index.import_cluster("live", one("10.0.0.6"), reported_at + 1, now));
        assert_eq!(
            index.cluster_record("live").unwrap().gateways,
            one("10.0.0.6")
        );
        let session = index.connect("live", "test").unwrap();
        index.replace_snapshot(&session, one("10.0.0.4")).unwrap();

        assert!(!index.deregister("live"));
        assert!(index.deregister("old"));
        assert!(index.cluster_record("old").is_none());
    }
}
