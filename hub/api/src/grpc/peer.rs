//! How the ingest listener reads one request's TLS: the cluster its
//! client certificate names, when its stream must end because that
//! certificate expired or is no longer trusted, and whether Hello's claim
//! matches it.
//!
//! It exists apart from the TLS material ([`crate::tls`]): these checks
//! read the connection's info ([`crate::conn::conn_of`]), so they sit with
//! the service that asks, above the listeners, while the certificates stay
//! below them.

use gwhub_common::identity::{self, IdentitySource};
use tonic::{Request, Status};

/// The cluster the stream's client certificate names; `Unauthenticated`
/// when there is no certificate or it names no usable cluster.
pub(crate) fn peer_cluster<T>(request: &Request<T>) -> Result<String, Status> {
    if let Some(reason) = crate::conn::conn_of(request)
        .and_then(|c| c.tls.as_ref())
        .and_then(|t| t.revoked())
    {
        return Err(Status::permission_denied(reason));
    }
    // The hub's own handshakes ([`crate::conn::with_tls`]) put the
    // certificates in the connection's info; tonic's own listener in
    // `peer_certs`.
    let certs = crate::conn::conn_of(request)
        .and_then(|c| c.tls.as_ref())
        .map(|t| t.certs.clone())
        .filter(|c| !c.is_empty())
        .or_else(|| request.peer_certs())
        .ok_or_else(|| Status::unauthenticated("no client certificate: the hub requires mTLS"))?;
    let leaf = certs
        .first()
        .ok_or_else(|| Status::unauthenticated("no client certificate: the hub requires mTLS"))?;
    let id = identity::cluster_from_der(leaf)
        .map_err(|e| Status::unauthenticated(format!("client certificate: {e}")))?;
    if id.source == IdentitySource::CommonName {
        tracing::debug!(
            cluster = id.cluster,
            "cluster identity from the certificate CN"
        );
    }
    Ok(id.cluster)
}

/// With mTLS: resolves with the status to end the request's stream with,
/// once its client certificate expires or a reloaded client CA no longer
/// trusts it (`None` without a client certificate).
pub(crate) fn stream_end<T>(
    request: &Request<T>,
) -> Option<impl Future<Output = Status> + Send + 'static> {
    let peer = crate::conn::conn_of(request)?.tls.clone()?;
    Some(peer.until_invalid())
}

/// A Hello naming another cluster than the certificate is refused (an
/// empty claim defers to the certificate).
pub(crate) fn check_claim(certified: &str, claimed: &str) -> Result<(), Status> {
    if claimed.is_empty() || claimed == certified {
        return Ok(());
    }
    Err(Status::permission_denied(format!(
        "Hello names cluster {} but the client certificate is for cluster {certified:?}",
        gwhub_model::text::quote_client_input(claimed)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims() {
        assert!(check_claim("east", "").is_ok());
        assert!(check_claim("east", "east").is_ok());
        let e = check_claim("east", "west").unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied);
        assert!(e.message().contains("\"west\"") && e.message().contains("\"east\""));
    }
}
