//! Hub TLS material that follows its files (issue 23, rotation): the
//! serving certificate and key, the agents' client CA and the Dashboard's
//! client CA are re-read every few seconds and swapped in when their
//! content changes (a mounted Secret's `..data` swap, cert-manager, an
//! operator's copy), so new handshakes use them without a restart. A file
//! that fails to parse keeps the old material (logged and counted, naming
//! the file). The hub does its own TLS handshakes
//! (`gwhub_net::conn::with_tls`) over a rustls config whose certificate
//! resolver and client verifier read the current material, and each agent
//! stream watches its certificate: it ends at the certificate's
//! `notAfter`, or when a reloaded client CA no longer trusts it (the
//! runtime's `grpc::peer::stream_end`).

mod metrics;
mod peer;

pub use metrics::{TlsMetrics, refusal_reason};
pub use peer::PeerTls;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::pki::{certs_of, provider};
use gwhub_common::identity::{self, Validity};
use tokio::sync::watch;
use tokio_rustls::rustls::client::danger::HandshakeSignatureValid;
use tokio_rustls::rustls::pki_types::{CertificateDer, UnixTime};
use tokio_rustls::rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::rustls::{
    self, DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme,
};

/// How often the files are compared with what was loaded.
pub(crate) const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(2);

/// A serving certificate expiring within this is warned about.
const EXPIRY_WARNING: i64 = 7 * 24 * 3600;

/// The longest a stream waits before looking at its certificate again
/// (a wall clock that jumps is noticed within this).
const RECHECK_EVERY: i64 = 60;

/// Why TLS material cannot be used; every message names the flag, file or
/// Secret key it came from.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{what}: {source}")]
    Read {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what}: no PEM block \"BEGIN {label}\" found")]
    NoPem { what: String, label: &'static str },
    #[error("{what}: {reason}")]
    Invalid { what: String, reason: String },
    #[error("{0}")]
    Flags(String),
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// The same messages as the parse in [`crate::pki`] gave them.
impl From<crate::pki::PemError> for TlsError {
    fn from(e: crate::pki::PemError) -> Self {
        match e {
            crate::pki::PemError::NoCertificate { what } => TlsError::NoPem {
                what,
                label: "CERTIFICATE",
            },
            crate::pki::PemError::Invalid { what, reason } => TlsError::Invalid { what, reason },
        }
    }
}

impl TlsError {
    pub fn invalid(what: &str, reason: impl std::fmt::Display) -> Self {
        TlsError::Invalid {
            what: what.to_owned(),
            reason: reason.to_string(),
        }
    }
}

/// Where one piece of PEM comes from: bytes given once, a file re-read,
/// the latest value of a key of a Secret followed through the API
/// (the runtime's `kube::tls_secrets`), or several of these one after another
/// (a client CA from a Secret plus an operator's `--client-ca`).
#[derive(Clone)]
pub(crate) enum Pem {
    Bytes(Arc<[u8]>),
    File { flag: &'static str, path: PathBuf },
    Api(Followed),
    Concat(Vec<Pem>),
}

/// PEM that something else keeps current (a Secret's key, watched).
#[derive(Clone, Debug)]
pub struct Followed {
    /// E.g. `Secret gwhub-system/gwhub-serving tls.crt`, for messages.
    pub name: String,
    pub current: watch::Receiver<Arc<[u8]>>,
}

impl Pem {
    /// The content now; an error names the flag and the file.
    pub(crate) fn read(&self) -> Result<Arc<[u8]>, TlsError> {
        match self {
            Pem::Bytes(b) => Ok(b.clone()),
            Pem::File { flag, path } => {
                std::fs::read(path)
                    .map(Arc::from)
                    .map_err(|source| TlsError::Read {
                        what: format!("{flag} {}", path.display()),
                        source,
                    })
            }
            Pem::Api(f) => Ok(f.current.borrow().clone()),
            Pem::Concat(parts) => {
                let mut all = Vec::new();
                for p in parts {
                    all.extend_from_slice(&p.read()?);
                    if all.last().is_some_and(|b| *b != b'\n') {
                        all.push(b'\n');
                    }
                }
                Ok(Arc::from(all))
            }
        }
    }

    /// `--flag path` (or "the given PEM"), for messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Pem::Bytes(_) => "the given PEM".to_owned(),
            Pem::File { flag, path } => format!("{flag} {}", path.display()),
            Pem::Api(f) => f.name.clone(),
            Pem::Concat(parts) => parts
                .iter()
                .map(Pem::describe)
                .collect::<Vec<_>>()
                .join(" + "),
        }
    }

    /// Whether the content can change (so it is followed).
    fn is_file(&self) -> bool {
        match self {
            Pem::Bytes(_) => false,
            Pem::File { .. } | Pem::Api(_) => true,
            Pem::Concat(parts) => parts.iter().any(Pem::is_file),
        }
    }
}

/// Clusters removed from the hub (`gwhubctl cluster remove`), each with
/// when (Unix seconds): their certificates issued until then are refused.
pub(crate) type Revocations = watch::Receiver<Arc<BTreeMap<String, i64>>>;

/// Why `certs` (a client chain) is revoked, if it is.
pub fn revoked_reason(
    revoked: &BTreeMap<String, i64>,
    certs: &[CertificateDer<'_>],
) -> Option<String> {
    let leaf = certs.first()?;
    let id = identity::cluster_from_der(leaf).ok()?;
    let at = *revoked.get(&id.cluster)?;
    let v = identity::validity_from_der(leaf).ok()?;
    (crate::pki::issued_at(v.not_before, v.not_after) <= at).then(|| {
        format!(
            "cluster {:?} was removed from the hub at {}; its certificates are refused \
             (join it again with a new token: gwhubctl join create)",
            id.cluster,
            rfc3339(at)
        )
    })
}

/// The three pieces of material, as named in the metrics.
pub(crate) const SERVING: &str = "serving";
pub(crate) const CLIENT_CA: &str = "client_ca";
pub(crate) const DASHBOARD_CLIENT_CA: &str = "dashboard_client_ca";

fn now_unix() -> i64 {
    jiff::Timestamp::now().as_second()
}

fn rfc3339(unix: i64) -> String {
    jiff::Timestamp::from_second(unix)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| unix.to_string())
}

/// The serving certificate chain with its key.
#[derive(Debug)]
pub(crate) struct Serving {
    key: Arc<CertifiedKey>,
    /// The leaf's window.
    leaf: Validity,
    /// The soonest `notAfter` in the chain.
    soonest: i64,
}

impl Serving {
    /// The checks are [`crate::pki::serving_pair`]'s.
    fn parse(cert: &[u8], key: &[u8], cert_name: &str, key_name: &str) -> Result<Self, TlsError> {
        let (certified, validities) = crate::pki::serving_pair(cert, key, cert_name, key_name)?;
        let leaf = validities[0];
        let soonest = validities
            .iter()
            .map(|v| v.not_after)
            .min()
            .unwrap_or(leaf.not_after);
        Ok(Serving {
            key: Arc::new(certified),
            leaf,
            soonest,
        })
    }

    /// Warns when the certificate expires within a week or is not yet valid.
    fn warn_if_due(&self, cert_name: &str) {
        let now = now_unix();
        if self.leaf.not_before > now {
            tracing::warn!(
                file = cert_name,
                not_before = rfc3339(self.leaf.not_before),
                "the hub's serving certificate is not valid yet; clients will refuse it"
            );
        }
        if self.leaf.not_after < now {
            tracing::warn!(
                file = cert_name,
                not_after = rfc3339(self.leaf.not_after),
                "the hub's serving certificate has EXPIRED; clients will refuse it"
            );
        } else if self.leaf.not_after - now < EXPIRY_WARNING {
            tracing::warn!(
                file = cert_name,
                not_after = rfc3339(self.leaf.not_after),
                "the hub's serving certificate expires within 7 days; renew it"
            );
        }
    }
}

/// A client CA: the verifier built from it.
#[derive(Debug)]
pub(crate) struct Trust {
    verifier: Arc<dyn ClientCertVerifier>,
    soonest: i64,
}

impl Trust {
    fn parse(pem: &[u8], name: &str) -> Result<Self, TlsError> {
        let certs = certs_of(pem, name)?;
        let mut roots = RootCertStore::empty();
        for (i, c) in certs.into_iter().enumerate() {
            roots
                .add(c)
                .map_err(|e| TlsError::invalid(name, format_args!("certificate {}: {e}", i + 1)))?;
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|e| TlsError::invalid(name, e))?;
        let soonest = identity::soonest_expiry_pem(pem).map_err(|e| TlsError::invalid(name, e))?;
        Ok(Trust { verifier, soonest })
    }

    fn verify(&self, certs: &[CertificateDer<'static>]) -> Result<(), Untrusted> {
        let Some((leaf, rest)) = certs.split_first() else {
            return Err(Untrusted::NoCertificate);
        };
        self.verifier
            .verify_client_cert(leaf, rest, UnixTime::now())
            .map(|_| ())
            .map_err(Untrusted::Refused)
    }
}

/// Why a stream's client certificate is not trusted by the current CA.
#[derive(Debug, thiserror::Error)]
enum Untrusted {
    #[error("no certificate")]
    NoCertificate,
    #[error("{0}")]
    Refused(tokio_rustls::rustls::Error),
}

/// One piece of material: the current value, swapped on reload (readers
/// take the `Arc` and let go of the lock at once).
type Slot<T> = watch::Sender<Arc<T>>;

/// The hub's current TLS material and the acceptors' configs over it.
#[derive(Debug)]
pub struct TlsRuntime {
    serving: Arc<Slot<Serving>>,
    client_ca: Arc<Slot<Trust>>,
    dashboard_ca: Option<Arc<Slot<Trust>>>,
    metrics: TlsMetrics,
    client_cert_optional: bool,
    revoked: Option<Revocations>,
}

/// What the listeners' handshakes need.
#[derive(Clone)]
pub struct Acceptor {
    pub acceptor: tokio_rustls::TlsAcceptor,
    /// The slot client certificates are checked against (none without
    /// client certificates).
    pub(crate) trust: Option<Arc<Slot<Trust>>>,
    pub metrics: TlsMetrics,
    /// Removed clusters (ingest only).
    pub(crate) revoked: Option<Revocations>,
}

/// The listener an acceptor is for.
#[derive(Clone, Copy, Debug)]
pub enum ListenerKind {
    Ingest,
    Dashboard,
    /// Serves browsers too: offers HTTP/1.1 besides h2.
    Web,
}

/// The material the hub's TLS flags name.
#[derive(Clone)]
pub struct Sources {
    pub(crate) cert: Pem,
    pub(crate) key: Pem,
    pub(crate) client_ca: Pem,
    pub(crate) dashboard_client_ca: Option<Pem>,
    pub(crate) reload_every: Duration,
    /// The ingest listener lets a client without a certificate finish the
    /// handshake (to call Join); Report still refuses it.
    pub(crate) client_cert_optional: bool,
    /// Removed clusters whose certificates are refused.
    pub(crate) revoked: Option<Revocations>,
}

impl Sources {
    /// Reads and parses everything once (start-up: any error stops it).
    pub(crate) fn check(&self) -> Result<(), TlsError> {
        Self::serving(&self.cert, &self.key)?;
        Trust::parse(&self.client_ca.read()?, &self.client_ca.describe())?;
        if let Some(d) = &self.dashboard_client_ca {
            Trust::parse(&d.read()?, &d.describe())?;
        }
        Ok(())
    }

    fn serving(cert: &Pem, key: &Pem) -> Result<(Serving, PairBytes), TlsError> {
        let (c, k) = (cert.read()?, key.read()?);
        let s = Serving::parse(&c, &k, &cert.describe(), &key.describe())?;
        Ok((s, [c, k]))
    }
}

impl TlsRuntime {
    /// Loads the material (an error names the file) and, when any of it
    /// comes from files, returns the task that follows them.
    pub fn start(
        sources: Sources,
        metrics: TlsMetrics,
    ) -> Result<
        (
            Arc<TlsRuntime>,
            Option<impl Future<Output = ()> + Send + 'static>,
        ),
        TlsError,
    > {
        let (serving, serving_bytes) = Sources::serving(&sources.cert, &sources.key)?;
        serving.warn_if_due(&sources.cert.describe());
        metrics.expiry(SERVING, serving.soonest);
        let ca_bytes = sources.client_ca.read()?;
        let client_ca = Trust::parse(&ca_bytes, &sources.client_ca.describe())?;
        metrics.expiry(CLIENT_CA, client_ca.soonest);
        let (dashboard_ca, dashboard_bytes) = match &sources.dashboard_client_ca {
            Some(d) => {
                let bytes = d.read()?;
                let t = Trust::parse(&bytes, &d.describe())?;
                metrics.expiry(DASHBOARD_CLIENT_CA, t.soonest);
                (Some(t), Some(bytes))
            }
            None => (None, None),
        };
        let slot = |t| Arc::new(watch::Sender::new(Arc::new(t)));
        let runtime = Arc::new(TlsRuntime {
            serving: Arc::new(watch::Sender::new(Arc::new(serving))),
            client_ca: slot(client_ca),
            dashboard_ca: dashboard_ca.map(slot),
            metrics,
            client_cert_optional: sources.client_cert_optional,
            revoked: sources.revoked.clone(),
        });
        let files = sources.cert.is_file()
            || sources.key.is_file()
            || sources.client_ca.is_file()
            || sources
                .dashboard_client_ca
                .as_ref()
                .is_some_and(Pem::is_file);
        let task = files.then(|| {
            let seen = Seen {
                serving: serving_bytes,
                client_ca: ca_bytes,
                dashboard_ca: dashboard_bytes,
                unreadable: BTreeMap::new(),
            };
            runtime.clone().follow(sources, seen)
        });
        Ok((runtime, task))
    }

    /// The acceptor of one listener.
    pub fn acceptor(&self, kind: ListenerKind) -> Result<Acceptor, TlsError> {
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?;
        let trust = match kind {
            ListenerKind::Ingest => Some(self.client_ca.clone()),
            ListenerKind::Dashboard | ListenerKind::Web => self.dashboard_ca.clone(),
        };
        let builder = match &trust {
            Some(slot) => builder.with_client_cert_verifier(Arc::new(CurrentVerifier {
                slot: slot.clone(),
                optional: matches!(kind, ListenerKind::Ingest) && self.client_cert_optional,
            })),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(Arc::new(CurrentCert(self.serving.clone())));
        config.alpn_protocols = match kind {
            ListenerKind::Web => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            _ => vec![b"h2".to_vec()],
        };
        Ok(Acceptor {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
            trust,
            metrics: self.metrics.clone(),
            revoked: match kind {
                ListenerKind::Ingest => self.revoked.clone(),
                _ => None,
            },
        })
    }

    /// Compares the files with what was loaded every `reload_every`,
    /// forever; swaps in what changed and parses.
    async fn follow(self: Arc<Self>, sources: Sources, mut seen: Seen) {
        let mut tick = tokio::time::interval(sources.reload_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            self.reload_serving(&sources, &mut seen);
            reload_trust(
                &self.client_ca,
                &sources.client_ca,
                &mut seen.client_ca,
                &mut seen.unreadable,
                CLIENT_CA,
                &self.metrics,
            );
            if let (Some(slot), Some(pem), Some(bytes)) = (
                &self.dashboard_ca,
                &sources.dashboard_client_ca,
                seen.dashboard_ca.as_mut(),
            ) {
                reload_trust(
                    slot,
                    pem,
                    bytes,
                    &mut seen.unreadable,
                    DASHBOARD_CLIENT_CA,
                    &self.metrics,
                );
            }
        }
    }

    fn reload_serving(&self, sources: &Sources, seen: &mut Seen) {
        let (Some(c), Some(k)) = (
            read_noting(&sources.cert, &mut seen.unreadable),
            read_noting(&sources.key, &mut seen.unreadable),
        ) else {
            return;
        };
        if seen.serving[0] == c && seen.serving[1] == k {
            return;
        }
        seen.serving = [c.clone(), k.clone()];
        let (cert_name, key_name) = (sources.cert.describe(), sources.key.describe());
        match Serving::parse(&c, &k, &cert_name, &key_name) {
            Ok(s) => {
                tracing::info!(
                    file = cert_name,
                    not_after = rfc3339(s.leaf.not_after),
                    "reloaded the serving certificate"
                );
                s.warn_if_due(&cert_name);
                self.metrics.expiry(SERVING, s.soonest);
                self.metrics.reloaded(SERVING, true);
                self.serving.send_replace(Arc::new(s));
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot reload the serving certificate; keeping the one in use");
                self.metrics.reloaded(SERVING, false);
            }
        }
    }
}

/// A certificate file's and its key file's content.
type PairBytes = [Arc<[u8]>; 2];

/// What the files held when last read.
struct Seen {
    serving: PairBytes,
    client_ca: Arc<[u8]>,
    dashboard_ca: Option<Arc<[u8]>>,
    /// Files that cannot be read now, with the error last logged.
    unreadable: BTreeMap<String, String>,
}

/// `pem`'s content, or `None` (keeping what is in use) when it cannot be
/// read: a file missing for a moment (an operator's non-atomic copy) or
/// for good; each new error is logged once.
fn read_noting(pem: &Pem, unreadable: &mut BTreeMap<String, String>) -> Option<Arc<[u8]>> {
    match pem.read() {
        Ok(b) => {
            unreadable.remove(&pem.describe());
            Some(b)
        }
        Err(e) => {
            let e = e.to_string();
            if unreadable.insert(pem.describe(), e.clone()).as_ref() != Some(&e) {
                tracing::warn!(error = %e, "cannot read a TLS file; keeping what is in use");
            }
            None
        }
    }
}

fn reload_trust(
    slot: &Slot<Trust>,
    pem: &Pem,
    seen: &mut Arc<[u8]>,
    unreadable: &mut BTreeMap<String, String>,
    certificate: &'static str,
    metrics: &TlsMetrics,
) {
    let Some(bytes) = read_noting(pem, unreadable) else {
        return;
    };
    if *seen == bytes {
        return;
    }
    *seen = bytes.clone();
    let name = pem.describe();
    match Trust::parse(&bytes, &name) {
        Ok(t) => {
            if certificate == CLIENT_CA {
                tracing::info!(
                    file = name,
                    "reloaded the agents' client CA; streams it no longer trusts end"
                );
            } else {
                tracing::info!(file = name, "reloaded the Dashboard's client CA");
            }
            metrics.expiry(certificate, t.soonest);
            metrics.reloaded(certificate, true);
            slot.send_replace(Arc::new(t));
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot reload a client CA; keeping the one in use");
            metrics.reloaded(certificate, false);
        }
    }
}

/// Presents the serving certificate in use now.
#[derive(Debug)]
struct CurrentCert(Arc<Slot<Serving>>);

impl ResolvesServerCert for CurrentCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.borrow().key.clone())
    }
}

/// Checks client certificates against the CA in use now.
#[derive(Debug)]
struct CurrentVerifier {
    slot: Arc<Slot<Trust>>,
    /// A client may send no certificate (then it is anonymous).
    optional: bool,
}

impl CurrentVerifier {
    fn current(&self) -> Arc<dyn ClientCertVerifier> {
        self.slot.borrow().verifier.clone()
    }
}

impl ClientCertVerifier for CurrentVerifier {
    fn client_auth_mandatory(&self) -> bool {
        !self.optional
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // The hints would borrow from material that may be swapped; an
        // empty list asks a client to send whatever certificate it has.
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.current()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.current().supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests;
