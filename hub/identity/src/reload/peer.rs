//! A TLS peer of the hub's own handshake, and the watch that ends an
//! agent's stream when its certificate expires, is no longer trusted by a
//! reloaded client CA, or its cluster is removed. Apart from the reloading
//! because it runs per stream, for the stream's life.

use std::sync::Arc;
use std::time::Duration;

use gwhub_common::identity;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tonic::Status;

use super::{
    Acceptor, RECHECK_EVERY, Revocations, Slot, TlsMetrics, Trust, now_unix, revoked_reason,
    rfc3339,
};

/// A TLS peer: its certificates and what they were checked against.
#[derive(Clone)]
pub struct PeerTls {
    pub certs: Arc<Vec<CertificateDer<'static>>>,
    trust: Option<Arc<Slot<Trust>>>,
    metrics: TlsMetrics,
    /// Boxed: every connection's info holds this.
    revoked: Option<Arc<Revocations>>,
}

impl std::fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerTls")
            .field("certs", &self.certs.len())
            .finish_non_exhaustive()
    }
}

impl PeerTls {
    pub fn new(certs: Vec<CertificateDer<'static>>, acceptor: &Acceptor) -> Self {
        PeerTls {
            certs: Arc::new(certs),
            trust: acceptor.trust.clone(),
            metrics: acceptor.metrics.clone(),
            revoked: acceptor.revoked.clone().map(Arc::new),
        }
    }

    /// Why this client's certificate is refused as its cluster was removed.
    pub fn revoked(&self) -> Option<String> {
        let revoked = self.revoked.as_ref()?.borrow().clone();
        revoked_reason(&revoked, &self.certs)
    }

    /// Resolves with the status to end the stream with once the client
    /// certificate expires, or once a reloaded CA no longer trusts it.
    pub async fn until_invalid(self) -> Status {
        let not_after = self
            .certs
            .first()
            .and_then(|leaf| identity::validity_from_der(leaf).ok())
            .map(|v| v.not_after);
        let mut trust = self.trust.as_ref().map(|t| t.subscribe());
        // A reload between the handshake and now counts as one.
        if let Some(t) = trust.as_mut() {
            t.mark_changed();
        }
        let mut revoked = self.revoked.as_deref().cloned();
        if let Some(r) = revoked.as_mut() {
            r.mark_changed();
        }
        loop {
            let now = now_unix();
            if let Some(na) = not_after
                && now > na
            {
                self.metrics.ended("expired");
                return Status::unauthenticated(format!(
                    "client certificate expired at {}; reconnect with a renewed certificate",
                    rfc3339(na)
                ));
            }
            let wait = not_after.map_or(RECHECK_EVERY, |na| (na - now + 1).clamp(1, RECHECK_EVERY));
            let changed = async {
                match trust.as_mut() {
                    Some(t) => t.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            let removed = async {
                match revoked.as_mut() {
                    Some(r) => r.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(wait.unsigned_abs())) => {}
                ok = removed => {
                    if !ok {
                        revoked = None;
                        continue;
                    }
                    let current = revoked.as_mut().map(|r| r.borrow_and_update().clone());
                    if let Some(reason) = current.and_then(|c| revoked_reason(&c, &self.certs)) {
                        self.metrics.ended("revoked");
                        return Status::permission_denied(reason);
                    }
                }
                ok = changed => {
                    if !ok {
                        trust = None;
                        continue;
                    }
                    let current = trust.as_mut().map(|t| t.borrow_and_update().clone());
                    if let Some(current) = current
                        && let Err(e) = current.verify(&self.certs)
                    {
                        if not_after.is_some_and(|na| now_unix() > na) {
                            continue;
                        }
                        self.metrics.ended("untrusted");
                        return Status::unauthenticated(format!(
                            "client certificate no longer trusted by the hub's client CA: {e}"
                        ));
                    }
                }
            }
        }
    }
}
