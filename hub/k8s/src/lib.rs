#![forbid(unsafe_code)]
#![warn(unreachable_pub)]
//! The hub's Kubernetes mode (`gwhub serve` without `--no-kube`): the
//! tasks `gwhub_hub::kube_hub` attaches to the in-memory hub
//! (`gwhub_hub::serve`), a crate of their own so that the part of the hub
//! that talks to the management cluster is read, changed and tested
//! without the gRPC and web listeners (it names none of them):
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
//! - [`tls_secrets`]: the hub's CA and serving certificate in Secrets;
//! - [`reviews`]: the Dashboard readers' TokenReviews and
//!   SubjectAccessReviews (`--dashboard-auth=kubernetes`);
//! - [`readiness`]: what each of these tasks brings about at start-up
//!   (the store restored, the lists synced, the replica caught up) and
//!   waits on (a stage, leading, ready, writable), in one type.

pub mod budget;
pub mod events;
pub mod inventory;
pub mod issued;
pub mod join;
pub mod join_csr;
pub mod join_limits;
pub mod leader;
pub mod liveness;
pub mod metrics;
pub mod pending;
pub mod readiness;
pub mod reporting;
pub mod reviews;
pub mod revocations;
pub mod shards;
pub mod status_writer;
pub mod store;
pub mod stored;
pub mod tls_secrets;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tokio::sync::watch;

use gwhub_hub_rules::report::ClusterReport;
use leader::LeaseConfig;

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

/// The removed clusters' ConfigMap, what follows it, and how long the
/// certificates it covers live.
type Revoked = (
    Api<k8s_openapi::api::core::v1::ConfigMap>,
    watch::Sender<Arc<std::collections::BTreeMap<String, i64>>>,
    Duration,
);

/// A management cluster reached and its store checked, ready to attach to
/// a running `gwhub_hub::serve::Hub`.
pub struct Connected {
    pub client: Client,
    pub options: KubeOptions,
    /// Whether the PlacementDecision CRD is served (with an inventory).
    placements: bool,
}

/// The hub's identity made from its Secrets by
/// [`Connected::tls_from_secrets`], in the pieces that go to different
/// places: the TLS material and the issuer to
/// `gwhub_hub::serve::Hub::start_with`, what
/// keeps them current to `gwhub_hub::kube_hub`'s attach.
pub struct SecretsIdentity {
    /// Both listeners' TLS, followed from the Secrets; agents without a
    /// certificate may connect to join.
    pub tls: gwhub_identity::tls::HubTls,
    /// Serves Join and Renew: `gwhub_hub::serve::KubeExtras::issuer`.
    pub issuer: Arc<join::Joiner>,
    /// What follows the Secrets, the removed clusters and the join tokens.
    pub followers: SecretsFollowers,
}

impl std::fmt::Debug for SecretsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretsIdentity")
            .field("tls", &self.tls)
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

/// What keeps a [`SecretsIdentity`] current once the hub runs.
pub struct SecretsFollowers {
    /// Follows the hub's TLS Secrets (the leader renews them).
    pub(crate) secrets: tls_secrets::Follower,
    /// The removed clusters.
    pub(crate) revocations: Revoked,
    /// The join tokens that exist.
    pub(crate) tokens: (
        join_limits::KnownTokens,
        Api<k8s_openapi::api::core::v1::Secret>,
    ),
}

impl SecretsFollowers {
    /// Spawns what keeps the identity current on `tasks` until
    /// `shutdown`: the Secrets' follower (the leader renews the serving
    /// certificate), the join tokens that exist, the sweep of tokenless
    /// requests and the removed clusters. `namespace` is the hub's own.
    pub fn spawn(
        self,
        client: &Client,
        namespace: &str,
        leader: &watch::Receiver<bool>,
        tasks: &mut tokio::task::JoinSet<()>,
        shutdown: &tokio_util::sync::CancellationToken,
    ) {
        let SecretsFollowers {
            secrets,
            revocations: (api, slot, lifetime),
            tokens: (known, tokens_api),
        } = self;
        secrets.spawn(tasks, leader.clone(), shutdown.clone());
        tasks.spawn(known.follow(tokens_api, shutdown.clone()));
        tasks.spawn(pending::sweep(
            Api::all(client.clone()),
            Api::namespaced(client.clone(), namespace),
            leader.clone(),
            shutdown.clone(),
        ));
        tasks.spawn(revocations::follow(
            api,
            slot,
            Api::namespaced(client.clone(), namespace),
            leader.clone(),
            lifetime,
            shutdown.clone(),
        ));
    }
}

impl Connected {
    /// Whether the PlacementDecision CRD is served (with an inventory):
    /// `gwhub.io/placement` is followed only then.
    pub fn placements_served(&self) -> bool {
        self.placements
    }

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
        })
    }

    /// The fleet inventory the hub must start with, for
    /// `gwhub_hub::serve::Hub::start_with`'s `gwhub_hub::serve::KubeExtras` (so no agent streams before it holds).
    pub fn inventory(&self) -> Option<(String, gwhub_hub_rules::inventory::Mode)> {
        self.options.inventory.clone()
    }

    /// The hub's TLS from Secrets `gwhub-ca` and `gwhub-serving` in its
    /// namespace, made when absent, and the issuer of agent certificates;
    /// `gwhub_hub::kube_hub`'s attach then follows them (given
    /// [`SecretsIdentity::followers`]) and the leader renews the serving
    /// certificate.
    pub async fn tls_from_secrets(
        &self,
        config: tls_secrets::SecretsConfig,
        paths: &gwhub_identity::tls::TlsPaths<'_>,
    ) -> Result<SecretsIdentity, KubeError> {
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
        let followers = SecretsFollowers {
            secrets: follower,
            revocations: (configmaps, removed_tx, agent_lifetime),
            tokens: (joiner.known_tokens(), joiner.token_secrets()),
        };
        Ok(SecretsIdentity {
            tls: tls.with_optional_client_cert().with_revocations(removed_rx),
            issuer: Arc::new(joiner),
            followers,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use gateway_api::apis::standard::gateways::GatewayStatus;
    use jiff::Timestamp;

    use gwhub_hub_rules::aggregate::{GatewayKey, Options};
    use gwhub_index::Index;

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
        let index = Index::new(gwhub_index::IndexConfig::new(
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
