//! The one start-up path of a hub in Kubernetes mode, from a connection to
//! the management cluster ([`Builder::new`]): its TLS (given, or from
//! its Secrets with the join issuer and the followers that come with
//! them), its Dashboard readers, the listeners, then every Kubernetes task
//! and fleet DNS attached (`attach`), and last the admin server
//! (`/metrics` and the probes, ready with the hub).
//!
//! It exists so that `gwhub serve` and the tests start a hub the same way:
//! what differs between them is a builder call, not a copy of the wiring.

use std::sync::Arc;

use super::{HubError, KubeHub};
use crate::authz::KubeReaders;
use crate::serve::{Hub, HubConfig, KubeExtras};
use crate::tls::{HubTls, TlsPaths};
use gwhub_dns::DnsConfig;
use gwhub_k8s::Connected;
use gwhub_k8s::reviews::ApiServerReviews;
use gwhub_k8s::tls_secrets::SecretsConfig;

/// Where the hub's TLS comes from.
enum Tls<'a> {
    /// Plaintext (`--insecure`).
    Plain,
    /// Certificates on disk.
    Given(HubTls),
    /// The hub's Secrets, made when absent.
    Secrets(SecretsConfig, TlsPaths<'a>),
}

/// A hub in Kubernetes mode about to start; see the module's doc.
#[must_use = "a builder does nothing until `start`"]
pub struct Builder<'a> {
    connected: Connected,
    config: HubConfig,
    tls: Tls<'a>,
    kubernetes_readers: bool,
    dns: Option<DnsConfig>,
    admin: Option<std::net::SocketAddr>,
}

impl<'a> Builder<'a> {
    /// Starts building the hub `connected` serves, with `config` for its
    /// listeners; plaintext, open Dashboard and no fleet DNS until the
    /// builder says otherwise.
    pub fn new(connected: Connected, config: HubConfig) -> Self {
        Builder {
            connected,
            config,
            tls: Tls::Plain,
            kubernetes_readers: false,
            dns: None,
            admin: None,
        }
    }

    /// Serves mTLS with certificates from disk (`None`: as before).
    pub fn tls(mut self, tls: Option<HubTls>) -> Self {
        if let Some(tls) = tls {
            self.tls = Tls::Given(tls);
        }
        self
    }

    /// Serves mTLS from the hub's Secrets (made when absent): agents may
    /// join, the leader renews the serving certificate, and every replica
    /// follows the Secrets, the removed clusters and the join tokens.
    /// `paths` are the Dashboard's own files, if any.
    pub fn tls_from_secrets(mut self, config: SecretsConfig, paths: TlsPaths<'a>) -> Self {
        self.tls = Tls::Secrets(config, paths);
        self
    }

    /// Dashboard and page readers authorized by Kubernetes RBAC
    /// (`--dashboard-auth=kubernetes`): the API server reviews their
    /// tokens.
    pub fn kubernetes_readers(mut self) -> Self {
        self.kubernetes_readers = true;
        self
    }

    /// Fleet DNS (`None`: off).
    pub fn dns(mut self, dns: Option<DnsConfig>) -> Self {
        self.dns = dns;
        self
    }

    /// Serves `/metrics`, `/healthz` and `/readyz` on `addr` once started
    /// (`None`: no admin server), ready with the hub ([`Hub::serve_admin`]).
    pub fn admin(mut self, addr: Option<std::net::SocketAddr>) -> Self {
        self.admin = addr;
        self
    }

    /// Reads or makes the TLS material, binds the listeners, attaches the
    /// Kubernetes side and serves the admin endpoints.
    pub async fn start(self) -> Result<KubeHub, HubError> {
        let Builder {
            connected,
            config,
            tls,
            kubernetes_readers,
            dns,
            admin,
        } = self;
        let (tls, issuer, followers) = match tls {
            Tls::Plain => (None, None, None),
            Tls::Given(tls) => (Some(tls), None, None),
            Tls::Secrets(secrets, paths) => {
                let identity = connected.tls_from_secrets(secrets, &paths).await?;
                (
                    Some(identity.tls),
                    Some(identity.issuer),
                    Some(identity.followers),
                )
            }
        };
        let readers = kubernetes_readers.then(|| {
            Arc::new(KubeReaders::new(Arc::new(ApiServerReviews::new(
                connected.client.clone(),
            ))))
        });
        let extras = KubeExtras {
            inventory: connected.inventory(),
            readers,
            issuer,
        };
        let hub = Hub::start_with(config, tls, extras).await?;
        let kube = super::attach::attach(connected, hub, followers, dns);
        if let Some(addr) = admin {
            let ready = (kube.metrics.clone(), kube.ready.clone());
            kube.hub
                .serve_admin(addr, Some(ready))
                .await
                .map_err(|source| HubError::Admin { addr, source })?;
        }
        Ok(kube)
    }
}
