//! `gwhub-agent run --join-token-file F --hub-ca-hash sha256:HEX` (spec
//! section 7): a cluster with no identity joins the hub. The agent makes
//! its key locally (it never leaves the cluster), finds the hub's CA in the
//! hub's certificate chain by the pinned hash of its public key (kubeadm's
//! discovery), sends a certificate request with the join token, and keeps
//! key, certificate and CA in Secret `gwhub-agent-identity` in its own
//! namespace. A restarted agent uses that Secret. The material is written
//! to private files so the usual mTLS path (files re-read at each
//! connect) streams with it.
//!
//! Without a token the hub records the request for an operator's
//! `kubectl certificate approve`; the agent asks again with the same key
//! (kept in memory) with backoff until it is approved, or refused.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gwhub_common::backoff::Exponential;
use gwhub_common::join::{JoinToken, ca_pin_der, ca_pin_pem, parse_pin};
use gwhub_proto::v1::{self, ingest_client::IngestClient};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio_rustls::rustls::client::WebPkiServerVerifier;
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::crypto::{
    CryptoProvider, verify_tls12_signature, verify_tls13_signature,
};
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::{self, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// The Secret the agent keeps its identity in.
pub(super) const IDENTITY_SECRET: &str = "gwhub-agent-identity";

/// What joining needs.
#[derive(Debug, Clone)]
pub(super) struct JoinPlan {
    pub hub: String,
    pub cluster: String,
    /// `None`: join without a token (manual approval).
    pub token_file: Option<PathBuf>,
    pub pin: String,
    pub namespace: String,
    pub kubeconfig: Option<PathBuf>,
}

/// Where the identity was written: certificate, key, CA.
#[derive(Debug, Clone)]
pub(super) struct IdentityFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
}

/// The stored identity, or a new one from joining; written to files.
pub(super) fn obtain(plan: &JoinPlan) -> Result<IdentityFiles, String> {
    parse_pin(&plan.pin).map_err(|e| format!("--hub-ca-hash: {e}"))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let (cert, key, ca) = runtime.block_on(identity(plan))?;
    write_files(&cert, &key, &ca)
}

fn data(s: &Secret, key: &str) -> Option<String> {
    s.data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .filter(|s| !s.is_empty())
}

fn stored(s: &Secret) -> Option<(String, String, String)> {
    Some((data(s, "tls.crt")?, data(s, "tls.key")?, data(s, "ca.crt")?))
}

async fn identity(plan: &JoinPlan) -> Result<(String, String, String), String> {
    let client = gwhub_agent::controller::client(plan.kubeconfig.as_deref())
        .await
        .map_err(|e| e.to_string())?;
    let ns = &plan.namespace;
    let secrets: Api<Secret> = Api::namespaced(client, ns);
    let existing = secrets
        .get_opt(IDENTITY_SECRET)
        .await
        .map_err(|e| format!("cannot read Secret {ns}/{IDENTITY_SECRET}: {e}"))?;
    if let Some(s) = existing {
        let Some(found) = stored(&s) else {
            return Err(format!(
                "Secret {ns}/{IDENTITY_SECRET} lacks tls.crt, tls.key or ca.crt; delete it to join again"
            ));
        };
        tracing::info!(secret = IDENTITY_SECRET, namespace = %ns, "using the stored identity");
        return Ok(found);
    }
    let (cert, key, ca) = join(plan).await?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(IDENTITY_SECRET.to_owned()),
            labels: Some(
                [(
                    "app.kubernetes.io/name".to_owned(),
                    "gwhub-agent".to_owned(),
                )]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(
            [("tls.crt", &cert), ("tls.key", &key), ("ca.crt", &ca)]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Secret::default()
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => {}
        Err(e) => {
            // The certificate is issued; without the Secret a restart
            // would need a new token, so say so loudly but stream.
            tracing::error!(error = %e, "cannot store the identity in Secret {ns}/{IDENTITY_SECRET}; a restarted agent will need a new join token");
        }
    }
    tracing::info!(cluster = %plan.cluster, "joined the hub; identity stored in Secret {ns}/{IDENTITY_SECRET}");
    Ok((cert, key, ca))
}

async fn join(plan: &JoinPlan) -> Result<(String, String, String), String> {
    let token = match &plan.token_file {
        Some(path) => {
            let file = path.display();
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("--join-token-file {file}: {e}"))?;
            let token =
                JoinToken::parse(&text).map_err(|e| format!("--join-token-file {file}: {e}"))?;
            token.reveal()
        }
        None => String::new(),
    };
    let pin = parse_pin(&plan.pin).map_err(|e| format!("--hub-ca-hash: {e}"))?;
    if !plan.hub.starts_with("https://") {
        return Err(format!(
            "--hub {:?}: joining needs an https:// URL",
            plan.hub
        ));
    }
    let ca_der = discover_ca(&plan.hub, &pin).await?;
    let ca_pem = gwhub_common::pem::encode("CERTIFICATE", &ca_der);
    let (csr, key) = new_csr(&plan.cluster)?;
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(&ca_pem));
    let channel = tonic::transport::Endpoint::from_shared(plan.hub.clone())
        .map_err(|e| format!("--hub {:?}: {e}", plan.hub))?
        .tls_config(tls)
        .map_err(|e| e.to_string())?
        .connect()
        .await
        .map_err(|e| {
            format!(
                "cannot reach the hub at {}: {}",
                plan.hub,
                gwhub_model::error_chain(&e)
            )
        })?;
    let mut client = IngestClient::new(channel);
    // Without a token an operator approves the request whose fingerprint
    // (the hub's gwhub.io/key-sha256 annotation) is this one.
    let key_sha256 = {
        use rcgen::PublicKeyData;
        format!(
            "sha256:{}",
            gwhub_common::join::key_hash(&key.subject_public_key_info())
        )
    };
    let mut backoff = Exponential::new(APPROVAL_BACKOFF_MIN, APPROVAL_BACKOFF_MAX);
    let resp = loop {
        let answer = client
            .join(v1::JoinRequest {
                cluster: plan.cluster.clone(),
                token: token.clone(),
                csr_pem: csr.clone(),
            })
            .await;
        match answer {
            Ok(resp) => break resp.into_inner(),
            // Without a token: the same request again, until an operator
            // approves it (or the hub can take it).
            Err(s) if token.is_empty() && retry_without_token(&s) => {
                let delay = backoff.failed();
                tracing::warn!(
                    cluster = %plan.cluster,
                    key_sha256,
                    retry_in_s = delay.as_secs(),
                    "{}",
                    s.message()
                );
                tokio::time::sleep(delay).await;
            }
            Err(s) => {
                return Err(format!(
                    "the hub refused to join cluster {:?}: {}",
                    plan.cluster,
                    s.message()
                ));
            }
        }
    };
    if ca_pin_pem(resp.ca_pem.as_bytes()).ok().as_deref() != Some(pin.as_str()) {
        return Err("the hub answered with a CA that does not match --hub-ca-hash".to_owned());
    }
    Ok((resp.certificate_pem, key.serialize_pem(), resp.ca_pem))
}

/// Between attempts of a join without a token.
const APPROVAL_BACKOFF_MIN: std::time::Duration = std::time::Duration::from_secs(2);
const APPROVAL_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(30);

/// Whether a tokenless join asks again after `s`: it waits for approval,
/// or the hub is busy or down for now.
fn retry_without_token(s: &tonic::Status) -> bool {
    matches!(
        s.code(),
        tonic::Code::FailedPrecondition | tonic::Code::Unavailable | tonic::Code::ResourceExhausted
    )
}

/// A new key and a certificate request naming exactly `cluster`.
fn new_csr(cluster: &str) -> Result<(String, rcgen::KeyPair), String> {
    let key = rcgen::KeyPair::generate().map_err(|e| format!("cannot make a key: {e}"))?;
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    let uri = format!("{}{cluster}", gwhub_common::identity::SPIFFE_CLUSTER_PREFIX);
    params.subject_alt_names = vec![rcgen::SanType::URI(
        uri.as_str()
            .try_into()
            .map_err(|e| format!("--cluster {cluster:?}: {e}"))?,
    )];
    let csr = params
        .serialize_request(&key)
        .and_then(|c| c.pem())
        .map_err(|e| format!("cannot make the certificate request: {e}"))?;
    Ok((csr, key))
}

/// Renews the identity at 2/3 of its certificate's lifetime, over the
/// connection its current certificate authenticates, until `shutdown`:
/// the Secret and the files get the new key and certificate, and the next
/// connection uses them (the hub ends the old stream when the old
/// certificate expires; the agent reconnects at once).
pub(super) async fn renew_loop(
    plan: JoinPlan,
    files: IdentityFiles,
    shutdown: tokio_util::sync::CancellationToken,
) {
    loop {
        let now = jiff::Timestamp::now().as_second();
        let (renew_at, not_after) = match std::fs::read(&files.cert)
            .map_err(|e| e.to_string())
            .and_then(|pem| {
                gwhub_common::identity::validities_from_pem(&pem).map_err(|e| e.to_string())
            }) {
            Ok(v) if !v.is_empty() => (
                v[0].not_before + (v[0].not_after - v[0].not_before).max(0) * 2 / 3,
                v[0].not_after,
            ),
            Ok(_) | Err(_) => (now, now),
        };
        let wait = u64::try_from(renew_at - now).unwrap_or(0);
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(std::time::Duration::from_secs(wait)) => {}
        }
        match renew_once(&plan, &files).await {
            Ok(()) => tracing::info!(cluster = %plan.cluster, "renewed the client certificate"),
            Err(e) => {
                let left = (not_after - jiff::Timestamp::now().as_second()).max(0);
                let retry = (left / 10).clamp(1, 30) as u64;
                tracing::warn!(error = %e, retry_in_s = retry, "cannot renew the client certificate");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(std::time::Duration::from_secs(retry)) => {}
                }
            }
        }
    }
}

async fn renew_once(plan: &JoinPlan, files: &IdentityFiles) -> Result<(), String> {
    let read = |p: &Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let (cert, key, ca) = (read(&files.cert)?, read(&files.key)?, read(&files.ca)?);
    let (csr, new_key) = new_csr(&plan.cluster)?;
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(&ca))
        .identity(tonic::transport::Identity::from_pem(&cert, &key));
    let channel = tonic::transport::Endpoint::from_shared(plan.hub.clone())
        .map_err(|e| e.to_string())?
        .tls_config(tls)
        .map_err(|e| e.to_string())?
        .connect()
        .await
        .map_err(|e| format!("cannot reach the hub: {}", gwhub_model::error_chain(&e)))?;
    let resp = IngestClient::new(channel)
        .renew(v1::RenewRequest { csr_pem: csr })
        .await
        .map_err(|s| format!("the hub refused to renew: {}", s.message()))?
        .into_inner();
    let key_pem = new_key.serialize_pem();
    let client = gwhub_agent::controller::client(plan.kubeconfig.as_deref())
        .await
        .map_err(|e| e.to_string())?;
    let ns = &plan.namespace;
    let secrets: Api<Secret> = Api::namespaced(client, ns);
    let mut secret = secrets
        .get(IDENTITY_SECRET)
        .await
        .map_err(|e| format!("cannot read Secret {ns}/{IDENTITY_SECRET}: {e}"))?;
    secret.data = Some(
        [
            ("tls.crt", &resp.certificate_pem),
            ("tls.key", &key_pem),
            ("ca.crt", &resp.ca_pem),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
        .collect(),
    );
    secrets
        .replace(IDENTITY_SECRET, &PostParams::default(), &secret)
        .await
        .map_err(|e| format!("cannot update Secret {ns}/{IDENTITY_SECRET}: {e}"))?;
    // Key first, then certificate: each written whole (rename).
    for (path, content) in [
        (&files.key, &key_pem),
        (&files.ca, &resp.ca_pem),
        (&files.cert, &resp.certificate_pem),
    ] {
        let tmp = path.with_extension("new");
        std::fs::write(&tmp, content).map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// Accepts the hub's chain only if it holds a CA whose SPKI hash is the
/// pin and the chain verifies against that CA (with the hub's name).
#[derive(Debug)]
struct Pinned {
    pin: String,
    provider: Arc<CryptoProvider>,
    found: std::sync::Mutex<Option<Vec<u8>>>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
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
        Err(rustls::Error::General(
            "the hub's certificate chain holds no CA matching --hub-ca-hash".to_owned(),
        ))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
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
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
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

/// The hub's CA (DER), found in its chain by `pin`.
pub(super) async fn discover_ca(hub: &str, pin: &str) -> Result<Vec<u8>, String> {
    let uri: tonic::transport::Uri = hub.parse().map_err(|e| format!("--hub {hub:?}: {e}"))?;
    let host = uri
        .host()
        .ok_or_else(|| format!("--hub {hub:?}: no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = uri.port_u16().unwrap_or(443);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let pinned = Arc::new(Pinned {
        pin: pin.to_owned(),
        provider: provider.clone(),
        found: std::sync::Mutex::new(None),
    });
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(pinned.clone())
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot reach the hub at {hub}: {e}"))?;
    let name = ServerName::try_from(host.clone()).map_err(|e| format!("--hub {hub:?}: {e}"))?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("the hub at {hub} is not the pinned hub: {e}"))?;
    let found = pinned.found.lock().ok().and_then(|f| f.clone());
    found.ok_or_else(|| "the hub's certificate chain holds no CA matching --hub-ca-hash".to_owned())
}

/// Writes the identity to a private directory.
fn write_files(cert: &str, key: &str, ca: &str) -> Result<IdentityFiles, String> {
    let dir = std::env::temp_dir().join(format!("gwhub-agent-identity-{}", std::process::id()));
    create_private_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let files = IdentityFiles {
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
        ca: dir.join("ca.crt"),
    };
    for (path, content) in [(&files.cert, cert), (&files.key, key), (&files.ca, ca)] {
        std::fs::write(path, content).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(files)
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The CA found by its pin is written as rcgen writes certificates.
    #[test]
    fn the_discovered_ca_is_written_as_rcgen_writes_it() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["a".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        assert_eq!(
            gwhub_common::pem::encode("CERTIFICATE", cert.der()).replace("\r\n", "\n"),
            cert.pem().replace("\r\n", "\n")
        );
    }
}
