//! mTLS for `gwhub serve`: the server certificate both listeners present,
//! the CA agents' client certificates must chain to, and the Dashboard's
//! optional client-certificate or bearer-token gate.
//!
//! Identity = cluster: on the ingest listener the reporting cluster is the
//! one named by the agent's certificate (see [`gwhub_common::identity`]),
//! so a compromised agent for cluster A can never speak for cluster B.
//! Hello's `cluster` is only a claim, checked against the certificate.
//! Those request-level checks are the ingest service's (`grpc/peer.rs`);
//! this module holds the material only.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tonic::{Request, Status};

use crate::authz::{KubeReaders, ReadError, Reader};
pub use crate::reload::TlsError;
use crate::reload::{DEFAULT_RELOAD_INTERVAL, Followed, Pem, Sources};

/// TLS material for both listeners: PEM given once, or files re-read when
/// they change ([`crate::reload`]). Its `Debug` leaves out the private
/// key and the token.
#[derive(Clone)]
pub struct HubTls {
    sources: Sources,
    dashboard_token: Option<Arc<str>>,
}

/// What `gwhub serve` was given for TLS (paths as on the command line).
#[derive(Clone, Debug, Default)]
pub struct TlsPaths<'a> {
    pub cert: Option<&'a Path>,
    pub key: Option<&'a Path>,
    pub client_ca: Option<&'a Path>,
    pub dashboard_client_ca: Option<&'a Path>,
    pub dashboard_token_file: Option<&'a Path>,
}

fn read(flag: &str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what: format!("{flag} {}", path.display()),
        source,
    })
}

/// What an early check of a PEM file looks for.
#[derive(Clone, Copy, Debug)]
enum Expect {
    Certificate,
    PrivateKey,
}

/// A PEM file holding at least one `expect` block, parsed by rustls' PEM
/// reader (a cheap early check, so a swapped flag or a damaged file fails at
/// start-up, naming the flag and the file).
fn pem(flag: &'static str, path: &Path, expect: Expect) -> Result<Pem, TlsError> {
    use tokio_rustls::rustls::pki_types::pem::{Error as PemError, PemObject};
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let bytes = read(flag, path)?;
    let what = format!("{flag} {}", path.display());
    let (found, label) = match expect {
        Expect::Certificate => (
            CertificateDer::from_pem_slice(&bytes).map(drop),
            "CERTIFICATE",
        ),
        Expect::PrivateKey => (
            PrivateKeyDer::from_pem_slice(&bytes).map(drop),
            "PRIVATE KEY",
        ),
    };
    match found {
        Ok(()) => Ok(Pem::File {
            flag,
            path: path.to_owned(),
        }),
        Err(PemError::NoItemsFound) => Err(TlsError::NoPem { what, label }),
        Err(e) => Err(TlsError::invalid(&what, format_args!("not valid PEM: {e}"))),
    }
}

impl HubTls {
    /// From PEM bytes: server certificate chain, its key, the agents' CA
    /// (checked when the hub starts).
    pub fn from_pem(cert: &[u8], key: &[u8], client_ca: &[u8]) -> Self {
        HubTls {
            sources: Sources {
                cert: Pem::Bytes(cert.into()),
                key: Pem::Bytes(key.into()),
                client_ca: Pem::Bytes(client_ca.into()),
                dashboard_client_ca: None,
                reload_every: DEFAULT_RELOAD_INTERVAL,
                client_cert_optional: false,
                revoked: None,
            },
            dashboard_token: None,
        }
    }

    /// Dashboard clients must present a certificate signed by this CA.
    pub fn with_dashboard_client_ca(mut self, ca: &[u8]) -> Self {
        self.sources.dashboard_client_ca = Some(Pem::Bytes(ca.into()));
        self
    }

    /// Agents without an identity may join: the ingest listener takes
    /// clients without a certificate (only Join serves them, through the
    /// hub's [`crate::issuer::Issuer`]).
    pub fn with_optional_client_cert(mut self) -> Self {
        self.sources.client_cert_optional = true;
        self
    }

    /// Refuses (and ends the streams of) certificates of removed clusters.
    pub fn with_revocations(mut self, revoked: crate::reload::Revocations) -> Self {
        self.sources.revoked = Some(revoked);
        self
    }

    /// Dashboard calls must carry `authorization: Bearer <token>`.
    pub fn with_dashboard_token(mut self, token: &str) -> Self {
        self.dashboard_token = Some(token.into());
        self
    }

    /// How often files are compared with what is in use (default 2 s).
    pub fn with_reload_interval(mut self, every: Duration) -> Self {
        self.sources.reload_every = every.max(Duration::from_millis(10));
        self
    }

    /// `None` when no TLS flag is given; an error names the missing or
    /// unreadable one. The files are followed while the hub runs.
    pub fn load(paths: &TlsPaths<'_>) -> Result<Option<HubTls>, TlsError> {
        let (cert, key, ca) = match (paths.cert, paths.key, paths.client_ca) {
            (None, None, None) => {
                if paths.dashboard_client_ca.is_some() || paths.dashboard_token_file.is_some() {
                    return Err(TlsError::Flags(
                        "--dashboard-client-ca and --dashboard-token-file need TLS \
                         (--tls-cert, --tls-key, --client-ca): a token or client \
                         certificate over plaintext protects nothing"
                            .to_owned(),
                    ));
                }
                return Ok(None);
            }
            (Some(c), Some(k), Some(a)) => (c, k, a),
            _ => {
                let missing: Vec<&str> = [
                    ("--tls-cert", paths.cert),
                    ("--tls-key", paths.key),
                    ("--client-ca", paths.client_ca),
                ]
                .iter()
                .filter(|(_, p)| p.is_none())
                .map(|(f, _)| *f)
                .collect();
                return Err(TlsError::Flags(format!(
                    "mTLS needs --tls-cert, --tls-key and --client-ca together; missing {}",
                    missing.join(", ")
                )));
            }
        };
        let tls = HubTls {
            sources: Sources {
                cert: pem("--tls-cert", cert, Expect::Certificate)?,
                key: pem("--tls-key", key, Expect::PrivateKey)?,
                client_ca: pem("--client-ca", ca, Expect::Certificate)?,
                dashboard_client_ca: None,
                reload_every: DEFAULT_RELOAD_INTERVAL,
                client_cert_optional: false,
                revoked: None,
            },
            dashboard_token: None,
        };
        tls.with_dashboard_files(paths).map(Some)
    }

    /// The serving certificate, its key and the agents' CA as something
    /// else keeps them current (the hub's Secrets, followed through the
    /// API); `paths.client_ca`, if given, is trusted besides that CA, and
    /// the Dashboard's flags apply as with files. `paths.cert` and
    /// `paths.key` are not read.
    pub fn followed(
        cert: Followed,
        key: Followed,
        client_ca: Followed,
        paths: &TlsPaths<'_>,
    ) -> Result<HubTls, TlsError> {
        let client_ca = match paths.client_ca {
            Some(ca) => Pem::Concat(vec![
                Pem::Api(client_ca),
                pem("--client-ca", ca, Expect::Certificate)?,
            ]),
            None => Pem::Api(client_ca),
        };
        let tls = HubTls {
            sources: Sources {
                cert: Pem::Api(cert),
                key: Pem::Api(key),
                client_ca,
                dashboard_client_ca: None,
                reload_every: DEFAULT_RELOAD_INTERVAL,
                client_cert_optional: false,
                revoked: None,
            },
            dashboard_token: None,
        };
        tls.with_dashboard_files(paths)
    }

    /// Adds `--dashboard-client-ca` and `--dashboard-token-file`, then
    /// parses everything once.
    fn with_dashboard_files(self, paths: &TlsPaths<'_>) -> Result<HubTls, TlsError> {
        let mut tls = self;
        if let Some(p) = paths.dashboard_client_ca {
            tls.sources.dashboard_client_ca =
                Some(pem("--dashboard-client-ca", p, Expect::Certificate)?);
        }
        if let Some(p) = paths.dashboard_token_file {
            let bytes = read("--dashboard-token-file", p)?;
            let token = std::str::from_utf8(&bytes)
                .map_err(|_| {
                    TlsError::invalid(
                        &format!("--dashboard-token-file {}", p.display()),
                        "not UTF-8",
                    )
                })?
                .trim();
            if token.is_empty() || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(TlsError::invalid(
                    &format!("--dashboard-token-file {}", p.display()),
                    "the token must be one non-empty word",
                ));
            }
            tls = tls.with_dashboard_token(token);
        }
        // Parses everything now, so a bad key or certificate stops
        // start-up with a message rather than failing the first handshake.
        tls.sources.check()?;
        Ok(tls)
    }

    /// Where the material comes from.
    pub fn sources(&self) -> &Sources {
        &self.sources
    }

    /// The Dashboard's bearer-token check (a no-op without a token).
    pub fn dashboard_auth(&self) -> DashboardAuth {
        DashboardAuth {
            token: self.dashboard_token.clone(),
            kube: None,
        }
    }
}

/// Interceptor requiring `authorization: Bearer <token>` on Dashboard calls
/// when a token is configured. The token is never logged. With
/// Kubernetes readers ([`crate::authz`]) it admits every call and each
/// call reviews its own token ([`DashboardAuth::reader`]).
#[derive(Clone, Default)]
pub struct DashboardAuth {
    token: Option<Arc<str>>,
    kube: Option<Arc<KubeReaders>>,
}

impl std::fmt::Debug for HubTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubTls")
            .field(
                "dashboard_client_ca",
                &self.sources.dashboard_client_ca.is_some(),
            )
            .field(
                "dashboard_token",
                &self.dashboard_token.as_ref().map(|_| "<redacted>"),
            )
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for DashboardAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DashboardAuth")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("kubernetes", &self.kube.is_some())
            .finish()
    }
}

impl tonic::service::Interceptor for DashboardAuth {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let Some(token) = &self.token else {
            // No token, or Kubernetes readers: the call reviews its own.
            return Ok(request);
        };
        let given = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        match given {
            Some(g) if constant_time_eq(g.as_bytes(), token.as_bytes()) => Ok(request),
            Some(_) => Err(Status::unauthenticated("invalid bearer token")),
            None => Err(Status::unauthenticated(
                "the Dashboard API requires an `authorization: Bearer <token>` header",
            )),
        }
    }
}

impl DashboardAuth {
    /// Readers authorized by Kubernetes RBAC (`--dashboard-auth=kubernetes`)
    /// instead of a shared token.
    pub fn with_kubernetes(mut self, readers: Arc<KubeReaders>) -> Self {
        self.token = None;
        self.kube = Some(readers);
        self
    }

    /// Whether a token is required at all.
    pub fn required(&self) -> bool {
        self.token.is_some() || self.kube.is_some()
    }

    /// Who presents `token` and what they may see: everything unless
    /// readers are authorized by Kubernetes (the shared token is checked
    /// before, by the interceptor or [`Self::accepts`]).
    pub async fn reader(&self, token: Option<&str>) -> Result<Reader, ReadError> {
        match &self.kube {
            None => Ok(Reader::anyone()),
            Some(k) => Reader::kubernetes(k.clone(), token).await,
        }
    }

    /// Whether the caller presenting `token` counts as authorized already,
    /// for the Dashboard's reserve (the Dashboard's call slots, `DashboardCalls`):
    /// with Kubernetes readers, a token that authenticated within the
    /// last hour; otherwise every caller that got this far (the shared
    /// token, when required, is checked before).
    pub fn known(&self, token: Option<&str>) -> bool {
        match (&self.kube, token) {
            (None, _) => true,
            (Some(k), Some(t)) => k.known(t),
            (Some(_), None) => false,
        }
    }

    /// Whether `given` is the token (always, when none is required).
    pub fn accepts(&self, given: Option<&str>) -> bool {
        match (&self.token, given) {
            (None, _) => true,
            (Some(t), Some(g)) => constant_time_eq(g.as_bytes(), t.as_bytes()),
            (Some(_), None) => false,
        }
    }
}

/// Compares without an early exit, so timing does not reveal a prefix.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token() {
        use tonic::service::Interceptor;
        let mut auth = DashboardAuth {
            token: Some("s3cret".into()),
            kube: None,
        };
        let mut req = Request::new(());
        assert_eq!(
            auth.call(Request::new(())).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        req.metadata_mut()
            .insert("authorization", "Bearer s3cret".parse().unwrap());
        assert!(auth.call(req).is_ok());
        let mut req = Request::new(());
        req.metadata_mut()
            .insert("authorization", "Bearer s3cre".parse().unwrap());
        assert!(auth.call(req).is_err());
        assert!(DashboardAuth::default().call(Request::new(())).is_ok());
        assert!(!format!("{auth:?}").contains("s3cret"));
    }
}
