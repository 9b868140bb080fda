//! The port through which the ingest listener issues agent certificates
//! (`gwhub.v1.Ingest/Join` and `Renew`, spec section 7).
//!
//! It exists so that the gRPC side calls an issuer without knowing how it
//! issues: today the only one is the runtime's `kube::join::Joiner`, backed by
//! the hub's Secrets and CertificateSigningRequests. The trait sits beside
//! the TLS material, below both the listeners and the Kubernetes side, so
//! neither of them names the other, and the TLS configuration carries
//! certificates only, not a service.

use std::net::IpAddr;

use gwhub_proto::v1;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tonic::Status;

/// Issues agent certificates: a first one on Join, a fresh one on Renew.
#[tonic::async_trait]
pub trait Issuer: Send + Sync + 'static {
    /// Handles one Join call from `peer` (the client's address, when known).
    async fn join(
        &self,
        peer: Option<IpAddr>,
        req: v1::JoinRequest,
    ) -> Result<v1::JoinResponse, Status>;

    /// Handles one Renew call from `cluster`, named by the client
    /// certificate it `presented` (leaf first).
    async fn renew(
        &self,
        cluster: &str,
        presented: &[CertificateDer<'_>],
        req: v1::RenewRequest,
    ) -> Result<v1::JoinResponse, Status>;
}
