//! An in-process hub in Kubernetes mode, the way every suite starts one:
//! the hub's namespace from the manifests, the test Lease (4 s, renewed
//! every 500 ms, so a failover fits a test), stale after 60 s unless told,
//! plain gRPC unless the hub's TLS is asked to come from its Secrets. The
//! suites differ only in the settings the builder names; the wiring is the
//! hub's own start-up path (`kube_hub::Builder::new`, as `gwhub serve` starts).

use std::time::Duration;

use gwhub_dns::DnsConfig;
use gwhub_hub::kube_hub::KubeHub;
use gwhub_hub::serve::HubConfig;
use gwhub_hub_rules::inventory::Mode;
use gwhub_identity::tls::TlsPaths;
use gwhub_k8s::leader::LeaseConfig;
use gwhub_k8s::tls_secrets::SecretsConfig;
use gwhub_k8s::{Connected, KubeOptions};
use gwhub_test_kit::install::SYSTEM_NS;
use kube::Client;
use kube::api::{Api, PostParams};

/// The Lease the in-process replicas elect over: `gwhub-hub`, 4 s,
/// renewed every 500 ms, held as `identity`.
pub(crate) fn lease(identity: &str) -> LeaseConfig {
    LeaseConfig {
        name: "gwhub-hub".into(),
        identity: identity.into(),
        lease_duration: Duration::from_secs(4),
        renew_every: Duration::from_millis(500),
    }
}

/// Another replica holds the test Lease for an hour (made if absent, taken
/// over if a hub holds it): a hub on it stops leading, or never starts.
pub(crate) async fn lease_held_elsewhere(admin: &Client) {
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    let name = lease("any").name;
    let leases: Api<Lease> = Api::namespaced(admin.clone(), SYSTEM_NS);
    for attempt in 1..=10 {
        let mut lease = leases
            .get_opt(&name)
            .await
            .unwrap()
            .unwrap_or_else(|| Lease {
                metadata: kube::api::ObjectMeta {
                    name: Some(name.clone()),
                    ..Default::default()
                },
                spec: None,
            });
        lease.spec = Some(LeaseSpec {
            holder_identity: Some("another-replica".into()),
            lease_duration_seconds: Some(3600),
            renew_time: Some(MicroTime(jiff::Timestamp::now())),
            ..LeaseSpec::default()
        });
        let written = match lease.metadata.resource_version {
            Some(_) => leases.replace(&name, &PostParams::default(), &lease).await,
            None => leases.create(&PostParams::default(), &lease).await,
        };
        match written {
            Ok(_) => return,
            // A hub renewed or made it in between.
            Err(kube::Error::Api(e)) if e.code == 409 && attempt < 10 => continue,
            Err(e) => panic!("take the Lease: {e}"),
        }
    }
}

/// The other replica ends and releases the Lease (deletes it).
pub(crate) async fn lease_released(admin: &Client) {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(admin.clone(), SYSTEM_NS);
    leases
        .delete(&lease("any").name, &Default::default())
        .await
        .expect("release the Lease");
}

/// What the hub is started with; see [`kube_hub`].
pub(crate) struct KubeHubBuilder {
    client: Client,
    config: HubConfig,
    options: KubeOptions,
    dns: Option<DnsConfig>,
    secrets: Option<SecretsConfig>,
}

/// A hub acting as `client` (usually the hub's ServiceAccount) in
/// namespace [`SYSTEM_NS`]: no Lease, no inventory, no DNS, clusters
/// stale after 60 s, ingest without TLS.
pub(crate) fn kube_hub(client: &Client) -> KubeHubBuilder {
    KubeHubBuilder {
        client: client.clone(),
        config: HubConfig::loopback(Duration::from_secs(60)),
        options: KubeOptions::new(SYSTEM_NS),
        dns: None,
        secrets: None,
    }
}

impl KubeHubBuilder {
    /// Elects a leader over [`lease`] as `identity`.
    pub(crate) fn identity(mut self, identity: &str) -> Self {
        self.options.lease = Some(lease(identity));
        self
    }

    /// Clusters go stale after `stale_after` of silence.
    pub(crate) fn stale_after(mut self, stale_after: Duration) -> Self {
        self.config.stale_after = stale_after;
        self
    }

    /// Follows the fleet inventory (ClusterProfiles) of namespace `ns`.
    pub(crate) fn inventory(mut self, ns: &str, mode: Mode) -> Self {
        self.options.inventory = Some((ns.to_owned(), mode));
        self
    }

    /// Publishes fleet DNS as `dns` says.
    pub(crate) fn dns(mut self, dns: Option<DnsConfig>) -> Self {
        self.dns = dns;
        self
    }

    /// Any other Kubernetes option (API budget, status shards).
    pub(crate) fn options(mut self, set: impl FnOnce(&mut KubeOptions)) -> Self {
        set(&mut self.options);
        self
    }

    /// Any other hub setting (budgets).
    pub(crate) fn config(mut self, set: impl FnOnce(&mut HubConfig)) -> Self {
        set(&mut self.config);
        self
    }

    /// Serves mTLS from the hub's Secrets (made when absent) for
    /// `localhost` and `127.0.0.1`; `set` changes the certificates'
    /// lifetimes.
    pub(crate) fn tls_from_secrets(mut self, set: impl FnOnce(&mut SecretsConfig)) -> Self {
        let mut secrets = SecretsConfig::new(SYSTEM_NS);
        secrets.sans = vec!["localhost".into(), "127.0.0.1".into()];
        set(&mut secrets);
        self.secrets = Some(secrets);
        self.config.insecure = false;
        self
    }

    /// Starts the hub; panics if it cannot.
    pub(crate) async fn start(self) -> KubeHub {
        let KubeHubBuilder {
            client,
            config,
            options,
            dns,
            secrets,
        } = self;
        let connected = Connected::new(client, options)
            .await
            .expect("the hub reaches its store");
        let mut hub = gwhub_hub::kube_hub::Builder::new(connected, config).dns(dns);
        if let Some(secrets) = secrets {
            hub = hub.tls_from_secrets(secrets, TlsPaths::default());
        }
        hub.start().await.expect("hub starts in Kubernetes mode")
    }
}
