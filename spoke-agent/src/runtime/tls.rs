//! The agent's side of mTLS: its client identity, the CA it trusts for the
//! hub, and the cluster name its certificate carries. The hub takes the
//! cluster from the certificate, so the agent reads it with the same rule
//! ([`gwhub_common::identity`]) and fails fast when `--cluster` disagrees,
//! instead of being refused by the hub on every reconnect.

use std::path::{Path, PathBuf};

use gwhub_common::identity;
use prometheus_client::metrics::gauge::Gauge;
use rustls_pki_types::pem::{Error as PemError, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

/// TLS for the hub connection plus the cluster the certificate names.
/// Its `Debug` shows only the cluster: the config holds the private key.
#[derive(Clone)]
pub struct ClientTls {
    pub config: ClientTlsConfig,
    pub cluster: String,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

/// Why the agent's TLS flags cannot be used; each message names the flag
/// (and the file, when one was read) and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{flag} {path}: {source}")]
    Read {
        flag: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what}: {reason}")]
    Certificate { what: String, reason: String },
    #[error(
        "--cluster {claimed:?} does not match the client certificate, which is for \
         cluster {actual:?}; drop --cluster (the certificate names the cluster) or use \
         that cluster's certificate"
    )]
    ClusterMismatch { claimed: String, actual: String },
    #[error("{flag}: no PEM {what} found")]
    NoPem {
        flag: &'static str,
        what: &'static str,
    },
    #[error("{flag}: not valid PEM ({what}): {reason}")]
    BadPem {
        flag: &'static str,
        what: &'static str,
        reason: String,
    },
    #[error("{0}")]
    Flags(String),
}

/// Whether `pem` holds a `T` block (the first one parsed by rustls' PEM
/// reader), so a swapped or damaged file fails here, naming its flag.
fn check_pem<T: PemObject>(
    pem: &[u8],
    flag: &'static str,
    what: &'static str,
) -> Result<(), TlsError> {
    match T::from_pem_slice(pem) {
        Ok(_) => Ok(()),
        Err(PemError::NoItemsFound) => Err(TlsError::NoPem { flag, what }),
        Err(e) => Err(TlsError::BadPem {
            flag,
            what,
            reason: e.to_string(),
        }),
    }
}

fn read(flag: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        flag,
        path: path.display().to_string(),
        source,
    })
}

impl ClientTls {
    /// From PEM bytes. `cluster`, when given, must equal the certificate's.
    pub fn from_pem(
        cert: &[u8],
        key: &[u8],
        ca: &[u8],
        cluster: Option<&str>,
    ) -> Result<Self, TlsError> {
        Self::from_named_pem(cert, "--tls-cert".to_owned(), key, ca, cluster)
    }

    /// As [`Self::from_pem`], naming the certificate `cert_name` in errors.
    fn from_named_pem(
        cert: &[u8],
        cert_name: String,
        key: &[u8],
        ca: &[u8],
        cluster: Option<&str>,
    ) -> Result<Self, TlsError> {
        let id = identity::cluster_from_pem(cert).map_err(|e| TlsError::Certificate {
            what: cert_name,
            reason: e.to_string(),
        })?;
        if let Some(claimed) = cluster
            && claimed != id.cluster
        {
            return Err(TlsError::ClusterMismatch {
                claimed: claimed.to_owned(),
                actual: id.cluster,
            });
        }
        check_pem::<CertificateDer<'static>>(ca, "--ca", "certificate")?;
        check_pem::<PrivateKeyDer<'static>>(key, "--tls-key", "private key")?;
        Ok(ClientTls {
            config: ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(ca))
                .identity(Identity::from_pem(cert, key)),
            cluster: id.cluster,
        })
    }

    /// Reads `--tls-cert`, `--tls-key` and `--ca`.
    pub fn load(
        cert: &Path,
        key: &Path,
        ca: &Path,
        cluster: Option<&str>,
    ) -> Result<Self, TlsError> {
        let cert_pem = read("--tls-cert", cert)?;
        let key_pem = read("--tls-key", key)?;
        let ca_pem = read("--ca", ca)?;
        let cert_name = format!("--tls-cert {}", cert.display());
        Self::from_named_pem(&cert_pem, cert_name, &key_pem, &ca_pem, cluster)
    }
}

/// The agent's TLS files, read again at every (re)connect: a renewed
/// certificate (a mounted Secret's `..data` swap, cert-manager) is used by
/// the next connection without a restart. Files that no longer load (or
/// name another cluster) leave the last good config in use, with a warning.
#[derive(Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
    /// The cluster the first certificate named; a renewal must name it too.
    pub cluster: String,
    /// `gwhub_agent_certificate_expiry_timestamp_seconds`, set at each load.
    pub expiry: Gauge,
}

impl std::fmt::Debug for TlsFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsFiles")
            .field("cert", &self.cert)
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

impl TlsFiles {
    /// The files as they are now; sets the expiry gauge.
    pub fn load(&self) -> Result<ClientTlsConfig, TlsError> {
        let tls = ClientTls::load(&self.cert, &self.key, &self.ca, Some(&self.cluster))?;
        let cert = read("--tls-cert", &self.cert)?;
        let not_after = identity::soonest_expiry_pem(&cert).map_err(|e| TlsError::Certificate {
            what: format!("--tls-cert {}", self.cert.display()),
            reason: e.to_string(),
        })?;
        self.expiry.set(not_after);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        if not_after < now {
            tracing::warn!(
                file = %self.cert.display(),
                not_after,
                "the client certificate has expired; the hub will refuse it until it is renewed"
            );
        }
        Ok(tls.config)
    }
}

/// `gwhub-agent run`'s hub connection flags → the cluster to report and
/// the TLS config with the files it came from (`None` with `--insecure`).
/// Every error says what to do.
pub fn hub_connection(
    hub: &str,
    insecure: bool,
    cluster: Option<&str>,
    cert: Option<&Path>,
    key: Option<&Path>,
    ca: Option<&Path>,
) -> Result<(String, Option<(ClientTlsConfig, TlsFiles)>), TlsError> {
    let cluster = cluster.map(str::trim).filter(|c| !c.is_empty());
    let url = || {
        tonic::transport::Endpoint::from_shared(hub.to_owned())
            .map(|_| ())
            .map_err(|e| TlsError::Flags(format!("--hub {hub:?}: not a valid URL: {e}")))
    };
    if let (Some(cert), Some(key), Some(ca)) = (cert, key, ca) {
        let tls = ClientTls::load(cert, key, ca, cluster)?;
        url()?;
        if !hub.starts_with("https://") {
            return Err(TlsError::Flags(format!(
                "--hub {hub:?}: with mTLS the URL must start with https://"
            )));
        }
        let files = TlsFiles {
            cert: cert.to_owned(),
            key: key.to_owned(),
            ca: ca.to_owned(),
            cluster: tls.cluster.clone(),
            expiry: Gauge::default(),
        };
        // Sets the expiry gauge (and warns of an expired certificate).
        let config = files.load().unwrap_or(tls.config);
        return Ok((tls.cluster, Some((config, files))));
    }
    if !insecure {
        return Err(TlsError::Flags(
            "refusing to start: no TLS material (--tls-cert, --tls-key, --ca) and \
             no --insecure. Without TLS anyone on the network could read the stream \
             and the hub could not verify this cluster's identity; pass --insecure \
             (with --cluster NAME) to run unauthenticated anyway"
                .into(),
        ));
    }
    let Some(cluster) = cluster else {
        return Err(TlsError::Flags(
            "--cluster NAME is required with --insecure (the hub takes the \
             cluster's name from it)"
                .into(),
        ));
    };
    url()?;
    if !hub.starts_with("http://") {
        return Err(TlsError::Flags(format!(
            "--hub {hub:?}: with --insecure the URL must start with http://"
        )));
    }
    Ok((cluster.to_owned(), None))
}
