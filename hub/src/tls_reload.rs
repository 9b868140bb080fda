//! Hub TLS material that follows its files (issue 23, rotation): the
//! serving certificate and key, the agents' client CA and the Dashboard's
//! client CA are re-read every few seconds and swapped in when their
//! content changes (a mounted Secret's `..data` swap, cert-manager, an
//! operator's copy), so new handshakes use them without a restart. A file
//! that fails to parse keeps the old material (logged and counted, naming
//! the file). The hub does its own TLS handshakes (`conn::with_tls`)
//! over a rustls config whose certificate resolver and client verifier read
//! the current material, and each agent stream watches its certificate:
//! it ends at the certificate's `notAfter`, or when a reloaded client CA no
//! longer trusts it (`tls::stream_end`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use gwhub_common::identity::{self, Validity};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;
use tokio_rustls::rustls::client::danger::HandshakeSignatureValid;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use tokio_rustls::rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::rustls::{
    self, DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme,
};
use tonic::Status;

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

impl TlsError {
    pub(crate) fn invalid(what: &str, reason: impl std::fmt::Display) -> Self {
        TlsError::Invalid {
            what: what.to_owned(),
            reason: reason.to_string(),
        }
    }
}

/// Where one piece of PEM comes from: bytes given once, a file re-read,
/// the latest value of a key of a Secret followed through the API
/// ([`crate::kube::tls_secrets`]), or several of these one after another
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
pub(crate) fn revoked_reason(
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

/// The `certificate` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct CertLabel {
    certificate: &'static str,
}

/// The labels of a reload.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReloadLabels {
    certificate: &'static str,
    result: &'static str,
}

/// The `reason` label of a stream ended for its certificate.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReasonLabel {
    reason: &'static str,
}

/// The three pieces of material, as named in the metrics.
pub(crate) const SERVING: &str = "serving";
pub(crate) const CLIENT_CA: &str = "client_ca";
pub(crate) const DASHBOARD_CLIENT_CA: &str = "dashboard_client_ca";

gwhub_common::metrics! {
    /// The TLS material's metrics (`/metrics`).
    #[derive(Clone, Debug)]
    pub struct TlsMetrics {
        expiry: Family<CertLabel, Gauge> =>
            "gwhub_tls_certificate_expiry_timestamp_seconds",
            "notAfter (Unix seconds) of the soonest-expiring certificate in each TLS file in use.",
        reloads: Family<ReloadLabels, Counter> => "gwhub_tls_reloads",
            "TLS files re-read after a change, by result (an error keeps the old material).",
        streams_ended: Family<ReasonLabel, Counter> => "gwhub_tls_streams_ended",
            "Agent streams ended because the client certificate expired or is no longer trusted.",
        handshakes_refused: Family<RefusalLabels, Counter> => "gwhub_tls_handshakes_refused",
            "TLS handshakes that failed, per listener and reason (expired, untrusted, no_certificate, timeout, other).",
    }
}

/// The labels of a failed handshake.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RefusalLabels {
    listener: &'static str,
    reason: &'static str,
}

/// Why a handshake failed, from tokio-rustls' error: the client
/// certificate expired (or is not valid yet), does not chain to the CA in
/// use, was not sent; anything else (the client refused ours, garbage).
pub(crate) fn refusal_reason(e: &std::io::Error) -> &'static str {
    use rustls::CertificateError as C;
    let Some(e) = e.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) else {
        return "other";
    };
    match e {
        rustls::Error::InvalidCertificate(
            C::Expired | C::ExpiredContext { .. } | C::NotValidYet | C::NotValidYetContext { .. },
        ) => "expired",
        rustls::Error::InvalidCertificate(_) => "untrusted",
        rustls::Error::NoCertificatesPresented => "no_certificate",
        _ => "other",
    }
}

impl Default for TlsMetrics {
    fn default() -> Self {
        let m = TlsMetrics {
            expiry: Family::default(),
            reloads: Family::default(),
            streams_ended: Family::default(),
            handshakes_refused: Family::default(),
        };
        for certificate in [SERVING, CLIENT_CA, DASHBOARD_CLIENT_CA] {
            for result in ["ok", "error"] {
                let _ = m.reloads.get_or_create(&ReloadLabels {
                    certificate,
                    result,
                });
            }
        }
        for reason in ["expired", "untrusted"] {
            let _ = m.streams_ended.get_or_create(&ReasonLabel { reason });
        }
        m
    }
}

impl TlsMetrics {
    fn expiry(&self, certificate: &'static str, not_after: i64) {
        self.expiry
            .get_or_create(&CertLabel { certificate })
            .set(not_after);
    }

    fn reloaded(&self, certificate: &'static str, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.reloads
            .get_or_create(&ReloadLabels {
                certificate,
                result,
            })
            .inc();
    }

    fn ended(&self, reason: &'static str) {
        self.streams_ended
            .get_or_create(&ReasonLabel { reason })
            .inc();
    }

    /// Reloads of `certificate` (`serving`, `client_ca`,
    /// `dashboard_client_ca`) with `result` (`ok`, `error`) so far.
    pub fn reloads(&self, certificate: &'static str, result: &'static str) -> u64 {
        self.reloads
            .get_or_create(&ReloadLabels {
                certificate,
                result,
            })
            .get()
    }

    /// Counts a failed handshake on `listener`.
    pub(crate) fn refused(&self, listener: &'static str, reason: &'static str) {
        self.handshakes_refused
            .get_or_create(&RefusalLabels { listener, reason })
            .inc();
    }

    /// Handshakes on `listener` refused for `reason` so far.
    pub fn handshakes_refused(&self, listener: &'static str, reason: &'static str) -> u64 {
        self.handshakes_refused
            .get_or_create(&RefusalLabels { listener, reason })
            .get()
    }

    /// Streams ended for `reason` (`expired`, `untrusted`) so far.
    pub fn streams_ended(&self, reason: &'static str) -> u64 {
        self.streams_ended
            .get_or_create(&ReasonLabel { reason })
            .get()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certs_of(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::invalid(what, format_args!("not PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(TlsError::NoPem {
            what: what.to_owned(),
            label: "CERTIFICATE",
        });
    }
    Ok(certs)
}

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

/// Whether `cert` and `key` (PEM) make a serving pair the hub can use
/// (the check a reload makes); `Err` says why not.
pub(crate) fn check_serving_pair(cert: &[u8], key: &[u8]) -> Result<(), TlsError> {
    Serving::parse(cert, key, "tls.crt", "tls.key").map(drop)
}

impl Serving {
    fn parse(cert: &[u8], key: &[u8], cert_name: &str, key_name: &str) -> Result<Self, TlsError> {
        let chain = certs_of(cert, cert_name)?;
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| {
            TlsError::invalid(key_name, format_args!("no PEM private key found: {e}"))
        })?;
        let certified = CertifiedKey::from_der(chain, key, &provider())
            .map_err(|e| TlsError::invalid(&format!("{cert_name} with {key_name}"), e))?;
        let validities =
            identity::validities_from_pem(cert).map_err(|e| TlsError::invalid(cert_name, e))?;
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
pub(crate) struct TlsRuntime {
    serving: Arc<Slot<Serving>>,
    client_ca: Arc<Slot<Trust>>,
    dashboard_ca: Option<Arc<Slot<Trust>>>,
    metrics: TlsMetrics,
    client_cert_optional: bool,
    revoked: Option<Revocations>,
}

/// What the listeners' handshakes need.
#[derive(Clone)]
pub(crate) struct Acceptor {
    pub acceptor: tokio_rustls::TlsAcceptor,
    /// The slot client certificates are checked against (none without
    /// client certificates).
    pub trust: Option<Arc<Slot<Trust>>>,
    pub metrics: TlsMetrics,
    /// Removed clusters (ingest only).
    pub revoked: Option<Revocations>,
}

/// The listener an acceptor is for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ListenerKind {
    Ingest,
    Dashboard,
    /// Serves browsers too: offers HTTP/1.1 besides h2.
    Web,
}

/// The material the hub's TLS flags name.
#[derive(Clone)]
pub(crate) struct Sources {
    pub cert: Pem,
    pub key: Pem,
    pub client_ca: Pem,
    pub dashboard_client_ca: Option<Pem>,
    pub reload_every: Duration,
    /// The ingest listener lets a client without a certificate finish the
    /// handshake (to call Join); Report still refuses it.
    pub client_cert_optional: bool,
    /// Removed clusters whose certificates are refused.
    pub revoked: Option<Revocations>,
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
    pub(crate) fn start(
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
    pub(crate) fn acceptor(&self, kind: ListenerKind) -> Result<Acceptor, TlsError> {
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

/// A TLS peer: its certificates and what they were checked against.
#[derive(Clone)]
pub(crate) struct PeerTls {
    pub(crate) certs: Arc<Vec<CertificateDer<'static>>>,
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
    pub(crate) fn new(certs: Vec<CertificateDer<'static>>, acceptor: &Acceptor) -> Self {
        PeerTls {
            certs: Arc::new(certs),
            trust: acceptor.trust.clone(),
            metrics: acceptor.metrics.clone(),
            revoked: acceptor.revoked.clone().map(Arc::new),
        }
    }

    /// Why this client's certificate is refused as its cluster was removed.
    pub(crate) fn revoked(&self) -> Option<String> {
        let revoked = self.revoked.as_ref()?.borrow().clone();
        revoked_reason(&revoked, &self.certs)
    }

    /// Resolves with the status to end the stream with once the client
    /// certificate expires, or once a reloaded CA no longer trusts it.
    pub(crate) async fn until_invalid(self) -> Status {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ca() -> (String, rcgen::Issuer<'static, rcgen::KeyPair>) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::default();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let pem = p.self_signed(&key).unwrap().pem();
        (pem, rcgen::Issuer::new(p, key))
    }

    #[test]
    fn bad_material_names_the_file() {
        let e = Trust::parse(b"nope", "--client-ca /x").unwrap_err();
        assert!(matches!(e, TlsError::NoPem { .. }), "{e:?}");
        assert!(e.to_string().contains("--client-ca /x"), "{e}");
        let (ca_pem, _) = ca();
        let e =
            Serving::parse(ca_pem.as_bytes(), b"", "--tls-cert /c", "--tls-key /k").unwrap_err();
        assert!(e.to_string().contains("--tls-key /k"), "{e}");
        assert!(Trust::parse(ca_pem.as_bytes(), "x").is_ok());
    }

    fn leaf(issuer: &rcgen::Issuer<'static, rcgen::KeyPair>) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let p = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        (
            p.signed_by(&key, issuer).unwrap().pem(),
            key.serialize_pem(),
        )
    }

    /// Every file is followed: a changed CA is swapped in and counted, a
    /// garbage one or a missing one keeps what is in use, nothing panics.
    #[tokio::test]
    async fn files_are_followed_and_bad_ones_kept_out() {
        let dir = tempfile::tempdir().unwrap();
        let (ca_pem, issuer) = ca();
        let (cert, key) = leaf(&issuer);
        let file = |name: &str, content: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, content).unwrap();
            p
        };
        let src = |flag, path| Pem::File { flag, path };
        let sources = Sources {
            cert: src("--tls-cert", file("tls.crt", &cert)),
            key: src("--tls-key", file("tls.key", &key)),
            client_ca: src("--client-ca", file("ca.crt", &ca_pem)),
            dashboard_client_ca: Some(src("--dashboard-client-ca", file("dash.crt", &ca_pem))),
            reload_every: Duration::from_millis(20),
            client_cert_optional: false,
            revoked: None,
        };
        let metrics = TlsMetrics::default();
        let (runtime, follow) = TlsRuntime::start(sources, metrics.clone()).unwrap();
        let follow = tokio::spawn(follow.expect("files are followed"));
        let wait = |certificate, result, n| {
            let metrics = metrics.clone();
            async move {
                for _ in 0..250 {
                    if metrics.reloads(certificate, result) == n {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                panic!("{certificate} {result} never reached {n}");
            }
        };
        let dashboard = runtime.dashboard_ca.clone().unwrap();
        let before = dashboard.borrow().clone();
        let (other_ca, _) = ca();
        file("dash.crt", &other_ca);
        wait(DASHBOARD_CLIENT_CA, "ok", 1).await;
        assert!(!Arc::ptr_eq(&before, &dashboard.borrow()));
        let current = dashboard.borrow().clone();
        file("dash.crt", "garbage");
        wait(DASHBOARD_CLIENT_CA, "error", 1).await;
        assert!(Arc::ptr_eq(&current, &dashboard.borrow()));
        std::fs::remove_file(dir.path().join("ca.crt")).unwrap();
        std::fs::remove_file(dir.path().join("tls.key")).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(metrics.reloads(CLIENT_CA, "error"), 0);
        assert_eq!(metrics.reloads(SERVING, "error"), 0);
        assert!(!follow.is_finished());
        follow.abort();
    }

    #[test]
    fn metrics_start_at_zero_and_count() {
        let m = TlsMetrics::default();
        assert_eq!(m.streams_ended("expired"), 0);
        m.ended("expired");
        assert_eq!(m.streams_ended("expired"), 1);
        m.expiry(SERVING, 42);
        let mut r = gwhub_common::metrics_http::Registry::default();
        m.register(&mut r);
        let text = gwhub_common::metrics_http::encode(&r);
        assert!(
            text.contains(
                "gwhub_tls_certificate_expiry_timestamp_seconds{certificate=\"serving\"} 42"
            ),
            "{text}"
        );
        assert!(
            text.contains("gwhub_tls_reloads_total{certificate=\"client_ca\",result=\"error\"} 0"),
            "{text}"
        );
    }
}
