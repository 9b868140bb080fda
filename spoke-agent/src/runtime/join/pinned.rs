//! Finding the hub's CA by its pin (kubeadm's discovery): before it has any
//! trust anchor, the joining agent accepts the hub's TLS chain only if the
//! chain holds a CA whose public-key hash is `--hub-ca-hash` and the hub's
//! certificate verifies against that CA under the hub's name. It exists
//! apart from the join flow because it is the one place that plugs a
//! custom verifier into rustls, and it should be read on its own.

use std::sync::{Arc, Mutex};

use gwhub_common::join::ca_pin_der;
use tokio_rustls::rustls::client::WebPkiServerVerifier;
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::crypto::{
    CryptoProvider, verify_tls12_signature, verify_tls13_signature,
};
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::{self, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::{JoinError, Result};

/// What the verifier says when the chain holds no CA with the pin; names
/// the flag, so a wrong pin in a log points at what to fix.
const NO_PINNED_CA: &str = "the hub's certificate chain holds no CA matching --hub-ca-hash";

/// Accepts the hub's chain only if it holds a CA whose SPKI hash is the
/// pin and the chain verifies against that CA (with the hub's name).
#[derive(Debug)]
struct Pinned {
    pin: String,
    provider: Arc<CryptoProvider>,
    found: Mutex<Option<Vec<u8>>>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        for ca in intermediates {
            if ca_pin_der(ca).ok().as_deref() != Some(self.pin.as_str()) {
                continue;
            }
            let mut roots = RootCertStore::empty();
            roots
                .add(ca.clone().into_owned())
                .map_err(|e| rustls::Error::General(e.to_string()))?;
            let verifier =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), self.provider.clone())
                    .build()
                    .map_err(|e| rustls::Error::General(e.to_string()))?;
            let ok =
                verifier.verify_server_cert(end_entity, intermediates, server_name, ocsp, now)?;
            if let Ok(mut found) = self.found.lock() {
                *found = Some(ca.to_vec());
            }
            return Ok(ok);
        }
        Err(rustls::Error::General(NO_PINNED_CA.to_owned()))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The hub's CA (DER), found in its chain by `pin` (`sha256:HEX`).
pub(super) async fn discover_ca(hub: &str, pin: &str) -> Result<Vec<u8>> {
    let bad_hub = |reason: String| JoinError::BadHubUrl {
        hub: hub.to_owned(),
        reason,
    };
    let uri: tonic::transport::Uri = hub.parse().map_err(|e| bad_hub(format!("{e}")))?;
    let host = uri
        .host()
        .ok_or_else(|| bad_hub("no host".to_owned()))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = uri.port_u16().unwrap_or(443);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let pinned = Arc::new(Pinned {
        pin: pin.to_owned(),
        provider: provider.clone(),
        found: Mutex::new(None),
    });
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| JoinError::Tls(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(pinned.clone())
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| JoinError::HubUnreachable {
            hub: hub.to_owned(),
            reason: e.to_string(),
        })?;
    let name = ServerName::try_from(host.clone()).map_err(|e| bad_hub(e.to_string()))?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| JoinError::NotThePinnedHub {
            hub: hub.to_owned(),
            reason: e.to_string(),
        })?;
    let found = pinned.found.lock().ok().and_then(|f| f.clone());
    found.ok_or(JoinError::NoPinnedCa)
}
