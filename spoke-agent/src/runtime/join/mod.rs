//! Joining the hub and renewing the agent's identity (spec section 7), for
//! `gwhub-agent run --join-token-file F --hub-ca-hash sha256:HEX`: a
//! cluster with no identity joins the hub. The agent makes its key locally
//! (it never leaves the cluster), finds the hub's CA in the hub's
//! certificate chain by the pinned hash of its public key (`pinned`,
//! kubeadm's discovery), sends a certificate request with the join token,
//! and keeps key, certificate and CA in Secret `gwhub-agent-identity` in
//! its own namespace. A restarted agent uses that Secret. The material is
//! written to private files so the usual mTLS path (files re-read at each
//! connect, [`super::tls`]) streams with it.
//!
//! Without a token the hub records the request for an operator's
//! `kubectl certificate approve`; the agent asks again with the same key
//! (kept in memory) with backoff until it is approved, or refused.
//!
//! It lives in the agent crate because it is the agent's runtime (network
//! I/O, Secret writes, a renew loop, a pinned certificate verifier); the
//! command line only turns flags into a [`JoinPlan`] and calls [`obtain`]
//! and [`renew_loop`].

mod pinned;

use std::path::{Path, PathBuf};
use std::time::Duration;

use gwhub_common::backoff::Exponential;
use gwhub_common::join::{JoinToken, ca_pin_pem, parse_pin};
use gwhub_model::error_chain;
use gwhub_proto::v1::{self, ingest_client::IngestClient};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio_util::sync::CancellationToken;

/// The Secret the agent keeps its identity in.
pub const IDENTITY_SECRET: &str = "gwhub-agent-identity";

/// Why the agent cannot join the hub or renew its identity; each message
/// names the flag, file, Secret or hub it is about.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error("--hub-ca-hash: {0}")]
    BadPin(#[source] gwhub_common::join::JoinError),
    #[error("--join-token-file {path}: {source}")]
    TokenFileUnreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--join-token-file {path}: {source}")]
    BadToken {
        path: PathBuf,
        #[source]
        source: gwhub_common::join::JoinError,
    },
    #[error("--hub {hub:?}: {reason}")]
    BadHubUrl { hub: String, reason: String },
    #[error("--cluster {cluster:?}: {reason}")]
    BadCluster { cluster: String, reason: String },
    #[error("cannot reach the hub at {hub}: {reason}")]
    HubUnreachable { hub: String, reason: String },
    #[error("the hub at {hub} is not the pinned hub: {reason}")]
    NotThePinnedHub { hub: String, reason: String },
    #[error("the hub's certificate chain holds no CA matching --hub-ca-hash")]
    NoPinnedCa,
    #[error("the hub answered with a CA that does not match --hub-ca-hash")]
    CaMismatch,
    #[error("the hub refused to join cluster {cluster:?}: {message}")]
    JoinRefused {
        cluster: String,
        code: tonic::Code,
        message: String,
    },
    #[error("the hub refused to renew: {message}")]
    RenewRefused { code: tonic::Code, message: String },
    #[error(
        "the hub issued a certificate that is not for this agent's key {key_sha256} ({reason})"
    )]
    NotForThisKey { key_sha256: String, reason: String },
    #[error("cannot set up TLS to the hub: {0}")]
    Tls(String),
    #[error("cannot make a key: {0}")]
    Key(#[source] rcgen::Error),
    #[error("cannot make the certificate request: {0}")]
    Csr(#[source] rcgen::Error),
    #[error(transparent)]
    KubeClient(#[from] crate::controller::Error),
    #[error("cannot read Secret {namespace}/{IDENTITY_SECRET}: {source}")]
    SecretRead {
        namespace: String,
        // Boxed: a kube::Error is most of the enum's size.
        #[source]
        source: Box<kube::Error>,
    },
    #[error("cannot update Secret {namespace}/{IDENTITY_SECRET}: {source}")]
    SecretWrite {
        namespace: String,
        // Boxed: a kube::Error is most of the enum's size.
        #[source]
        source: Box<kube::Error>,
    },
    #[error(
        "Secret {namespace}/{IDENTITY_SECRET} lacks tls.crt, tls.key or ca.crt; delete it to join again"
    )]
    IncompleteSecret { namespace: String },
    #[error("{path}: {source}")]
    File {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the join runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// Result alias of joining and renewal.
pub type Result<T, E = JoinError> = std::result::Result<T, E>;

fn file_error(path: &Path) -> impl FnOnce(std::io::Error) -> JoinError + '_ {
    move |source| JoinError::File {
        path: path.to_owned(),
        source,
    }
}

/// What joining needs (from `gwhub-agent run`'s flags).
#[derive(Debug, Clone)]
pub struct JoinPlan {
    /// `--hub`: the hub's `https://` ingest URL.
    pub hub: String,
    /// `--cluster`: the name the certificate will carry.
    pub cluster: String,
    /// `--join-token-file`; `None`: join without a token (manual approval).
    pub token_file: Option<PathBuf>,
    /// `--hub-ca-hash`: `sha256:HEX` of the hub CA's public key.
    pub pin: String,
    /// `--identity-namespace`: where Secret `gwhub-agent-identity` lives.
    pub namespace: String,
    /// `--kubeconfig` of the workload cluster.
    pub kubeconfig: Option<PathBuf>,
}

/// Where the identity was written: certificate, key, CA, in a private
/// directory that is removed when the last clone of this is dropped (the
/// agent's clean stop), so no key is left behind.
#[derive(Debug, Clone)]
pub struct IdentityFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
    /// Owns the directory: removing it on drop.
    _dir: std::sync::Arc<tempfile::TempDir>,
}

/// Key, certificate and CA as PEM text.
struct Identity {
    cert: String,
    key: String,
    ca: String,
}

/// The stored identity, or a new one from joining; written to files.
/// Blocks (its own runtime) until joined: without a token, until an
/// operator approves the request.
pub fn obtain(plan: &JoinPlan) -> Result<IdentityFiles> {
    parse_pin(&plan.pin).map_err(JoinError::BadPin)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(JoinError::Runtime)?;
    let identity = runtime.block_on(identity(plan))?;
    write_files(&identity)
}

fn data(s: &Secret, key: &str) -> Option<String> {
    s.data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .filter(|s| !s.is_empty())
}

fn stored(s: &Secret) -> Option<Identity> {
    Some(Identity {
        cert: data(s, "tls.crt")?,
        key: data(s, "tls.key")?,
        ca: data(s, "ca.crt")?,
    })
}

/// The Secret's data for `identity`.
fn secret_data(identity: &Identity) -> std::collections::BTreeMap<String, ByteString> {
    [
        ("tls.crt", &identity.cert),
        ("tls.key", &identity.key),
        ("ca.crt", &identity.ca),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
    .collect()
}

async fn identity(plan: &JoinPlan) -> Result<Identity> {
    let client = crate::controller::client(plan.kubeconfig.as_deref()).await?;
    let ns = &plan.namespace;
    let secrets: Api<Secret> = Api::namespaced(client, ns);
    let existing =
        secrets
            .get_opt(IDENTITY_SECRET)
            .await
            .map_err(|source| JoinError::SecretRead {
                namespace: ns.clone(),
                source: Box::new(source),
            })?;
    if let Some(s) = existing {
        let Some(found) = stored(&s) else {
            return Err(JoinError::IncompleteSecret {
                namespace: ns.clone(),
            });
        };
        tracing::info!(secret = IDENTITY_SECRET, namespace = %ns, "using the stored identity");
        return Ok(found);
    }
    let identity = join(plan).await?;
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
        data: Some(secret_data(&identity)),
        ..Secret::default()
    };
    if let Err(e) = secrets.create(&PostParams::default(), &secret).await {
        // The certificate is issued; without the Secret a restart would
        // need a new token, so say so loudly but stream.
        tracing::error!(error = %e, "cannot store the identity in Secret {ns}/{IDENTITY_SECRET}; a restarted agent will need a new join token");
    }
    tracing::info!(cluster = %plan.cluster, "joined the hub; identity stored in Secret {ns}/{IDENTITY_SECRET}");
    Ok(identity)
}

/// The join token to send: the file's, or none (manual approval).
fn token(plan: &JoinPlan) -> Result<String> {
    let Some(path) = &plan.token_file else {
        return Ok(String::new());
    };
    let text = std::fs::read_to_string(path).map_err(|source| JoinError::TokenFileUnreadable {
        path: path.clone(),
        source,
    })?;
    let token = JoinToken::parse(&text).map_err(|source| JoinError::BadToken {
        path: path.clone(),
        source,
    })?;
    Ok(token.reveal())
}

async fn join(plan: &JoinPlan) -> Result<Identity> {
    let token = token(plan)?;
    let pin = parse_pin(&plan.pin).map_err(JoinError::BadPin)?;
    if !plan.hub.starts_with("https://") {
        return Err(JoinError::BadHubUrl {
            hub: plan.hub.clone(),
            reason: "joining needs an https:// URL".to_owned(),
        });
    }
    let ca_der = pinned::discover_ca(&plan.hub, &pin).await?;
    let ca_pem = gwhub_common::pem::encode("CERTIFICATE", &ca_der);
    let request = Request::new(&plan.cluster)?;
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(&ca_pem));
    let mut client = IngestClient::new(connect(&plan.hub, tls).await?);
    let mut backoff = Exponential::new(APPROVAL_BACKOFF_MIN, APPROVAL_BACKOFF_MAX);
    let resp = loop {
        let answer = client
            .join(v1::JoinRequest {
                cluster: plan.cluster.clone(),
                token: token.clone(),
                csr_pem: request.csr.clone(),
            })
            .await;
        match answer {
            Ok(resp) => break resp.into_inner(),
            // Without a token: the same request again, until an operator
            // approves it (or the hub can take it). The operator approves
            // the request whose fingerprint (the hub's
            // gwhub.io/key-sha256 annotation) is this one.
            Err(s) if token.is_empty() && retry_without_token(s.code()) => {
                let delay = backoff.failed();
                tracing::warn!(
                    cluster = %plan.cluster,
                    key_sha256 = request.key_sha256,
                    retry_in_s = delay.as_secs(),
                    "{}",
                    s.message()
                );
                tokio::time::sleep(delay).await;
            }
            Err(s) => {
                return Err(JoinError::JoinRefused {
                    cluster: plan.cluster.clone(),
                    code: s.code(),
                    message: s.message().to_owned(),
                });
            }
        }
    };
    if ca_pin_pem(resp.ca_pem.as_bytes()).ok().as_deref() != Some(pin.as_str()) {
        return Err(JoinError::CaMismatch);
    }
    request.check_issued(&resp.certificate_pem)?;
    Ok(Identity {
        cert: resp.certificate_pem,
        key: request.key.serialize_pem(),
        ca: resp.ca_pem,
    })
}

/// Between attempts of a join without a token.
const APPROVAL_BACKOFF_MIN: Duration = Duration::from_secs(2);
const APPROVAL_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// A channel to `hub` with `tls`.
async fn connect(
    hub: &str,
    tls: tonic::transport::ClientTlsConfig,
) -> Result<tonic::transport::Channel> {
    tonic::transport::Endpoint::from_shared(hub.to_owned())
        .map_err(|e| JoinError::BadHubUrl {
            hub: hub.to_owned(),
            reason: e.to_string(),
        })?
        .tls_config(tls)
        .map_err(|e| JoinError::Tls(error_chain(&e)))?
        .connect()
        .await
        .map_err(|e| JoinError::HubUnreachable {
            hub: hub.to_owned(),
            reason: error_chain(&e),
        })
}

/// Whether a tokenless join asks again after an answer with `code`: it
/// waits for approval, or the hub is busy or down for now.
fn retry_without_token(code: tonic::Code) -> bool {
    matches!(
        code,
        tonic::Code::FailedPrecondition | tonic::Code::Unavailable | tonic::Code::ResourceExhausted
    )
}

/// A new key and a certificate request naming exactly one cluster.
struct Request {
    key: rcgen::KeyPair,
    csr: String,
    /// `sha256:HEX` of the key's SubjectPublicKeyInfo.
    key_sha256: String,
}

impl Request {
    fn new(cluster: &str) -> Result<Self> {
        use rcgen::PublicKeyData;
        let key = rcgen::KeyPair::generate().map_err(JoinError::Key)?;
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        let uri = format!("{}{cluster}", gwhub_common::identity::SPIFFE_CLUSTER_PREFIX);
        params.subject_alt_names = vec![rcgen::SanType::URI(uri.as_str().try_into().map_err(
            |e: rcgen::Error| JoinError::BadCluster {
                cluster: cluster.to_owned(),
                reason: e.to_string(),
            },
        )?)];
        let csr = params
            .serialize_request(&key)
            .and_then(|c| c.pem())
            .map_err(JoinError::Csr)?;
        let key_sha256 = format!(
            "sha256:{}",
            gwhub_common::join::key_hash(&key.subject_public_key_info())
        );
        Ok(Request {
            key,
            csr,
            key_sha256,
        })
    }

    /// Whether `cert_pem` (its first certificate) is for this key: a
    /// certificate for another key would be stored and then fail at every
    /// connect.
    fn check_issued(&self, cert_pem: &str) -> Result<()> {
        let not_for_key = |reason: String| JoinError::NotForThisKey {
            key_sha256: self.key_sha256.clone(),
            reason,
        };
        // The SPKI hash of a certificate, whichever it is.
        let issued = ca_pin_pem(cert_pem.as_bytes()).map_err(|e| not_for_key(e.to_string()))?;
        if issued != self.key_sha256 {
            return Err(not_for_key(format!("it is for key {issued}")));
        }
        Ok(())
    }
}

/// Renews the identity at 2/3 of its certificate's lifetime, over the
/// connection its current certificate authenticates, until `shutdown`:
/// the Secret and the files get the new key and certificate, and the next
/// connection uses them (the hub ends the old stream when the old
/// certificate expires; the agent reconnects at once).
pub async fn renew_loop(plan: JoinPlan, files: IdentityFiles, shutdown: CancellationToken) {
    loop {
        let now = jiff::Timestamp::now().as_second();
        // An unreadable certificate is renewed at once.
        let first = std::fs::read(&files.cert)
            .ok()
            .and_then(|pem| gwhub_common::identity::validities_from_pem(&pem).ok())
            .and_then(|v| v.into_iter().next());
        let (renew_at, not_after) = match first {
            Some(v) => (
                v.not_before + (v.not_after - v.not_before).max(0) * 2 / 3,
                v.not_after,
            ),
            None => (now, now),
        };
        let wait = u64::try_from(renew_at - now).unwrap_or(0);
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(wait)) => {}
        }
        match renew_once(&plan, &files).await {
            Ok(()) => tracing::info!(cluster = %plan.cluster, "renewed the client certificate"),
            Err(e) => {
                let left = (not_after - jiff::Timestamp::now().as_second()).max(0);
                let retry = u64::try_from((left / 10).clamp(1, 30)).unwrap_or(1);
                tracing::warn!(error = %e, retry_in_s = retry, "cannot renew the client certificate");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(retry)) => {}
                }
            }
        }
    }
}

async fn renew_once(plan: &JoinPlan, files: &IdentityFiles) -> Result<()> {
    let read = |p: &Path| std::fs::read(p).map_err(file_error(p));
    let (cert, key, ca) = (read(&files.cert)?, read(&files.key)?, read(&files.ca)?);
    let request = Request::new(&plan.cluster)?;
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(&ca))
        .identity(tonic::transport::Identity::from_pem(&cert, &key));
    let resp = IngestClient::new(connect(&plan.hub, tls).await?)
        .renew(v1::RenewRequest {
            csr_pem: request.csr.clone(),
        })
        .await
        .map_err(|s| JoinError::RenewRefused {
            code: s.code(),
            message: s.message().to_owned(),
        })?
        .into_inner();
    request.check_issued(&resp.certificate_pem)?;
    let renewed = Identity {
        cert: resp.certificate_pem,
        key: request.key.serialize_pem(),
        ca: resp.ca_pem,
    };
    let client = crate::controller::client(plan.kubeconfig.as_deref()).await?;
    let ns = &plan.namespace;
    let secrets: Api<Secret> = Api::namespaced(client, ns);
    let mut secret =
        secrets
            .get(IDENTITY_SECRET)
            .await
            .map_err(|source| JoinError::SecretRead {
                namespace: ns.clone(),
                source: Box::new(source),
            })?;
    secret.data = Some(secret_data(&renewed));
    secrets
        .replace(IDENTITY_SECRET, &PostParams::default(), &secret)
        .await
        .map_err(|source| JoinError::SecretWrite {
            namespace: ns.clone(),
            source: Box::new(source),
        })?;
    // Key first, then certificate: each written whole (rename).
    for (path, content) in [
        (&files.key, &renewed.key),
        (&files.ca, &renewed.ca),
        (&files.cert, &renewed.cert),
    ] {
        let tmp = path.with_extension("new");
        std::fs::write(&tmp, content).map_err(file_error(&tmp))?;
        std::fs::rename(&tmp, path).map_err(file_error(path))?;
    }
    Ok(())
}

/// Writes the identity to a new private directory (mode 0700, a random
/// name under the temporary directory, created only if it did not exist).
fn write_files(identity: &Identity) -> Result<IdentityFiles> {
    let mut builder = tempfile::Builder::new();
    builder.prefix("gwhub-agent-identity-");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o700));
    }
    let temp = std::env::temp_dir();
    let dir = builder.tempdir().map_err(file_error(&temp))?;
    let files = IdentityFiles {
        cert: dir.path().join("tls.crt"),
        key: dir.path().join("tls.key"),
        ca: dir.path().join("ca.crt"),
        _dir: std::sync::Arc::new(dir),
    };
    for (path, content) in [
        (&files.cert, &identity.cert),
        (&files.key, &identity.key),
        (&files.ca, &identity.ca),
    ] {
        std::fs::write(path, content).map_err(file_error(path))?;
    }
    Ok(files)
}

#[cfg(test)]
mod tests;
