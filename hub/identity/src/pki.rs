//! The hub's own certificates, as pure functions (spec section 7): the
//! signing CA it keeps in Secret `gwhub-ca`, the serving certificate it
//! keeps in Secret `gwhub-serving` (its chain includes the CA, so a client
//! that pins the CA by hash finds it), and when either is due for
//! renewal. The Kubernetes side (the runtime's `kube::tls_secrets`) only stores
//! and reads what these make.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

use gwhub_common::identity;
use tokio_rustls::rustls::crypto::CryptoProvider;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::sign::CertifiedKey;

/// The hub CA's lifetime.
pub const CA_LIFETIME: Duration = Duration::from_secs(365 * 86_400);
/// The serving certificate's lifetime.
pub const SERVING_LIFETIME: Duration = Duration::from_secs(90 * 86_400);
/// Certificates start this long before "now", for peers whose clock lags.
pub const BACKDATE: Duration = Duration::from_secs(5 * 60);
/// The hub CA's common name.
pub const CA_COMMON_NAME: &str = "gwhub CA";

/// Why a certificate could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("cannot create the {what}: {source}")]
    Make { what: String, source: rcgen::Error },
    #[error("{0}")]
    Read(String),
    #[error("--hub-san {0:?}: {1}")]
    San(String, String),
}

/// A certificate (PEM, possibly a chain) and its private key (PEM).
#[derive(Clone, PartialEq, Eq)]
pub struct Pair {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for Pair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pair")
            .field("cert_pem", &self.cert_pem.len())
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

fn make(what: &str) -> impl Fn(rcgen::Error) -> PkiError + '_ {
    move |source| PkiError::Make {
        what: what.to_owned(),
        source,
    }
}

/// How far a certificate of `lifetime` starts before "now": [`BACKDATE`],
/// or a tenth of a short lifetime (so its renewal is not due at once).
pub fn backdate(lifetime: Duration) -> Duration {
    BACKDATE.min(lifetime / 10)
}

/// Sets `p`'s validity to `[now - backdate, now + lifetime]`.
fn window(p: &mut CertificateParams, now: i64, lifetime: Duration) {
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    let at = |t: i64| epoch + Duration::from_secs(u64::try_from(t).unwrap_or(0));
    p.not_before = at(now - backdate(lifetime).as_secs() as i64);
    p.not_after = at(now.saturating_add(lifetime.as_secs() as i64));
}

/// A new self-signed CA valid for `lifetime` from `now` (Unix seconds).
pub fn new_ca(now: i64, lifetime: Duration) -> Result<Pair, PkiError> {
    let key = KeyPair::generate().map_err(make("CA key"))?;
    let mut p = CertificateParams::default();
    p.distinguished_name
        .push(DnType::CommonName, CA_COMMON_NAME);
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    window(&mut p, now, lifetime);
    let cert = p.self_signed(&key).map_err(make("CA"))?;
    Ok(Pair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// The issuer `ca` describes (its certificate is the first PEM block).
fn issuer(ca: &Pair) -> Result<Issuer<'static, KeyPair>, PkiError> {
    let key =
        KeyPair::from_pem(&ca.key_pem).map_err(|e| PkiError::Read(format!("the CA's key: {e}")))?;
    Issuer::from_ca_cert_pem(&ca.cert_pem, key)
        .map_err(|e| PkiError::Read(format!("the CA's certificate: {e}")))
}

/// Whether `ca` can sign: its key and certificate parse, and the key is
/// the certificate's.
pub fn check_ca(ca: &Pair) -> Result<(), PkiError> {
    check_serving_pair(ca.cert_pem.as_bytes(), ca.key_pem.as_bytes())
        .map_err(|e| PkiError::Read(e.to_string()))?;
    issuer(ca).map(drop)
}

/// Why PEM is not a usable certificate chain or serving pair; `what`
/// names the file, flag or Secret key it came from.
#[derive(Debug, thiserror::Error)]
pub enum PemError {
    #[error("{what}: no PEM block \"BEGIN CERTIFICATE\" found")]
    NoCertificate { what: String },
    #[error("{what}: {reason}")]
    Invalid { what: String, reason: String },
}

impl PemError {
    fn invalid(what: &str, reason: impl std::fmt::Display) -> Self {
        PemError::Invalid {
            what: what.to_owned(),
            reason: reason.to_string(),
        }
    }
}

/// The crypto provider of every TLS configuration and key the hub uses.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(tokio_rustls::rustls::crypto::ring::default_provider())
}

/// The certificates in `pem`: at least one.
pub(crate) fn certs_of(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, PemError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PemError::invalid(what, format_args!("not PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(PemError::NoCertificate {
            what: what.to_owned(),
        });
    }
    Ok(certs)
}

/// A serving certificate chain (`cert`, PEM) with its key (`key`, PEM),
/// checked: both parse, the key is the leaf's; with the validity window of
/// each certificate in the chain, leaf first. `cert_name` and `key_name`
/// say where each came from.
pub(crate) fn serving_pair(
    cert: &[u8],
    key: &[u8],
    cert_name: &str,
    key_name: &str,
) -> Result<(CertifiedKey, Vec<identity::Validity>), PemError> {
    let chain = certs_of(cert, cert_name)?;
    let key = PrivateKeyDer::from_pem_slice(key)
        .map_err(|e| PemError::invalid(key_name, format_args!("no PEM private key found: {e}")))?;
    let certified = CertifiedKey::from_der(chain, key, &provider())
        .map_err(|e| PemError::invalid(&format!("{cert_name} with {key_name}"), e))?;
    let validities =
        identity::validities_from_pem(cert).map_err(|e| PemError::invalid(cert_name, e))?;
    Ok((certified, validities))
}

/// Whether `cert` and `key` (PEM) make a serving pair the hub can use
/// (the check a reload makes); `Err` says why not.
pub fn check_serving_pair(cert: &[u8], key: &[u8]) -> Result<(), PemError> {
    serving_pair(cert, key, "tls.crt", "tls.key").map(drop)
}

/// The Service's DNS names in `namespace` (manifests/hub/service.yaml).
pub fn default_sans(namespace: &str) -> Vec<String> {
    vec![
        format!("gwhub.{namespace}.svc"),
        format!("gwhub.{namespace}.svc.cluster.local"),
        "gwhub".to_owned(),
    ]
}

fn san(s: &str) -> Result<SanType, PkiError> {
    match s.parse::<IpAddr>() {
        Ok(ip) => Ok(SanType::IpAddress(ip)),
        Err(_) if !dns_name_ok(s) => Err(PkiError::San(
            s.to_owned(),
            "not a DNS name or IP address (letters, digits, '-', '.')".to_owned(),
        )),
        Err(_) => Ok(SanType::DnsName(s.try_into().map_err(
            |e: rcgen::Error| PkiError::San(s.to_owned(), e.to_string()),
        )?)),
    }
}

fn dns_name_ok(s: &str) -> bool {
    let s = s.strip_prefix("*.").unwrap_or(s);
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// A serving certificate for `sans` signed by `ca`, valid for `lifetime`
/// from `now`; its PEM is the leaf followed by the CA certificate.
pub fn new_serving(
    ca: &Pair,
    sans: &[String],
    now: i64,
    lifetime: Duration,
) -> Result<Pair, PkiError> {
    let Some(first) = sans.first() else {
        return Err(PkiError::San(
            String::new(),
            "at least one DNS name or IP address is needed".to_owned(),
        ));
    };
    let issuer = issuer(ca)?;
    let key = KeyPair::generate().map_err(make("serving key"))?;
    let mut p = CertificateParams::default();
    p.distinguished_name
        .push(DnType::CommonName, first.as_str());
    p.subject_alt_names = sans.iter().map(|s| san(s)).collect::<Result<_, _>>()?;
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    p.use_authority_key_identifier_extension = true;
    window(&mut p, now, lifetime);
    let cert = p
        .signed_by(&key, &issuer)
        .map_err(make("serving certificate"))?;
    let ca_first = gwhub_common::pem::first_block(&ca.cert_pem)
        .map_err(|e| PkiError::Read(format!("the hub CA certificate: {e}")))?;
    Ok(Pair {
        cert_pem: format!("{}{}", cert.pem(), ca_first),
        key_pem: key.serialize_pem(),
    })
}

/// An agent certificate's default lifetime (`--agent-cert-lifetime`).
pub const AGENT_CERT_LIFETIME: Duration = Duration::from_secs(30 * 86_400);

/// Why a certificate request is refused (the agent is told).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CsrError {
    #[error("not a valid certificate request (PEM, signed by its own key): {0}")]
    Parse(String),
    #[error(
        "the certificate request must name exactly the cluster {cluster:?}: one SAN URI {}{cluster} \
         and no other name (found {found})",
        identity::SPIFFE_CLUSTER_PREFIX
    )]
    Names { cluster: String, found: String },
}

/// Checks `csr_pem` (its signature proves the key is the requester's; its
/// names are exactly `cluster`'s identity: one SAN URI
/// `spiffe://gwhub/cluster/<cluster>`, the subject at most CN=`cluster`)
/// and signs it with `ca` as a client certificate valid for `lifetime`.
pub fn sign_agent_csr(
    ca: &Pair,
    csr_pem: &str,
    cluster: &str,
    now: i64,
    lifetime: Duration,
) -> Result<Result<String, CsrError>, PkiError> {
    let mut csr = match parse_agent_csr(csr_pem, cluster) {
        Ok(c) => c,
        Err(e) => return Ok(Err(e)),
    };
    let issuer = issuer(ca)?;
    let p = &mut csr.params;
    p.is_ca = IsCa::ExplicitNoCa;
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    p.use_authority_key_identifier_extension = true;
    p.custom_extensions.clear();
    window(p, now, lifetime);
    let cert = csr.signed_by(&issuer).map_err(make("agent certificate"))?;
    Ok(Ok(cert.pem()))
}

/// The hex SHA-256 of the public key of `csr_pem`, once checked as
/// [`sign_agent_csr`] checks it (no CA needed): names a tokenless join's
/// CertificateSigningRequest, so retries with the same key find it.
pub fn agent_csr_key_hash(csr_pem: &str, cluster: &str) -> Result<String, CsrError> {
    use rcgen::PublicKeyData;
    let csr = parse_agent_csr(csr_pem, cluster)?;
    Ok(gwhub_common::join::key_hash(
        &csr.public_key.subject_public_key_info(),
    ))
}

/// `csr_pem` parsed (its signature checked), naming exactly `cluster`.
fn parse_agent_csr(
    csr_pem: &str,
    cluster: &str,
) -> Result<rcgen::CertificateSigningRequestParams, CsrError> {
    let csr = rcgen::CertificateSigningRequestParams::from_pem(csr_pem)
        .map_err(|e| CsrError::Parse(e.to_string()))?;
    let want = format!("{}{cluster}", identity::SPIFFE_CLUSTER_PREFIX);
    let sans: Vec<String> = csr
        .params
        .subject_alt_names
        .iter()
        .map(|s| match s {
            SanType::URI(u) => format!("URI:{}", u.as_str()),
            other => format!("{other:?}"),
        })
        .collect();
    let cn_ok = |v: &rcgen::DnValue| match v {
        rcgen::DnValue::Utf8String(s) => s == cluster,
        rcgen::DnValue::PrintableString(s) => s.as_str() == cluster,
        _ => false,
    };
    let dn: Vec<String> = csr
        .params
        .distinguished_name
        .iter()
        .filter(|(t, v)| !(matches!(t, DnType::CommonName) && cn_ok(v)))
        .map(|(t, v)| format!("subject {t:?}={v:?}"))
        .collect();
    if sans != [format!("URI:{want}")] || !dn.is_empty() {
        let mut found = sans;
        found.extend(dn);
        return Err(CsrError::Names {
            cluster: cluster.to_owned(),
            found: if found.is_empty() {
                "none".to_owned()
            } else {
                found.join(", ")
            },
        });
    }
    Ok(csr)
}

/// Whether the leaf (first certificate) of `cert_pem` is at or past 2/3 of
/// its lifetime at `now`, or already expired, or not valid yet.
pub fn renewal_due(cert_pem: &[u8], now: i64) -> Result<bool, PkiError> {
    let v = identity::validities_from_pem(cert_pem).map_err(|e| PkiError::Read(e.to_string()))?;
    let Some(leaf) = v.first() else {
        return Err(PkiError::Read("no certificate".to_owned()));
    };
    Ok(now >= renew_at(leaf.not_before, leaf.not_after) || now < leaf.not_before)
}

/// When a certificate the hub made over `[not_before, not_after]` was
/// issued: `not_before` plus its back-dating ([`backdate`] of the
/// lifetime). A revocation at `t` covers certificates issued at or
/// before `t`; one from a later join is not covered.
pub fn issued_at(not_before: i64, not_after: i64) -> i64 {
    let window = (not_after - not_before).max(0);
    not_before + (BACKDATE.as_secs() as i64).min(window / 11)
}

/// When a certificate valid over `[not_before, not_after]` is renewed: at
/// 2/3 of its lifetime.
pub fn renew_at(not_before: i64, not_after: i64) -> i64 {
    not_before + (not_after - not_before).max(0) * 2 / 3
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000;

    #[test]
    fn the_ca_is_valid_for_its_lifetime_and_signs_a_serving_chain() {
        let ca = new_ca(NOW, CA_LIFETIME).unwrap();
        let v = identity::validities_from_pem(ca.cert_pem.as_bytes()).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].not_after, NOW + CA_LIFETIME.as_secs() as i64);
        assert_eq!(v[0].not_before, NOW - BACKDATE.as_secs() as i64);

        let sans = default_sans("ns1");
        let serving = new_serving(&ca, &sans, NOW, SERVING_LIFETIME).unwrap();
        let v = identity::validities_from_pem(serving.cert_pem.as_bytes()).unwrap();
        assert_eq!(v.len(), 2, "leaf then CA");
        assert_eq!(v[0].not_after, NOW + SERVING_LIFETIME.as_secs() as i64);
        // The second block is the CA itself.
        assert!(
            serving
                .cert_pem
                .ends_with(&gwhub_common::pem::first_block(&ca.cert_pem).unwrap())
        );
        assert!(serving.key_pem.contains("PRIVATE KEY"));
        assert_ne!(serving.key_pem, ca.key_pem);
    }

    #[test]
    fn the_serving_certificate_names_its_sans_and_verifies_against_the_ca() {
        use tokio_rustls::rustls::client::WebPkiServerVerifier;
        use tokio_rustls::rustls::client::danger::ServerCertVerifier;
        use tokio_rustls::rustls::pki_types::pem::PemObject;
        use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
        use tokio_rustls::rustls::{RootCertStore, crypto::ring::default_provider};

        let now = jiff::Timestamp::now().as_second();
        let ca = new_ca(now, CA_LIFETIME).unwrap();
        let sans = vec!["gwhub.x.svc".to_owned(), "10.0.0.1".to_owned()];
        let serving = new_serving(&ca, &sans, now, SERVING_LIFETIME).unwrap();
        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(ca.cert_pem.as_bytes()).unwrap())
            .unwrap();
        let verifier = WebPkiServerVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            std::sync::Arc::new(default_provider()),
        )
        .build()
        .unwrap();
        let chain: Vec<CertificateDer> =
            CertificateDer::pem_slice_iter(serving.cert_pem.as_bytes())
                .collect::<Result<_, _>>()
                .unwrap();
        for name in ["gwhub.x.svc", "10.0.0.1"] {
            let name = ServerName::try_from(name.to_owned()).unwrap();
            verifier
                .verify_server_cert(&chain[0], &chain[1..], &name, &[], UnixTime::now())
                .unwrap_or_else(|e| panic!("{name:?}: {e}"));
        }
        let other = ServerName::try_from("gwhub.other.svc").unwrap();
        assert!(
            verifier
                .verify_server_cert(&chain[0], &chain[1..], &other, &[], UnixTime::now())
                .is_err()
        );
    }

    #[test]
    fn renewal_is_due_at_two_thirds_of_the_lifetime() {
        let ca = new_ca(NOW, CA_LIFETIME).unwrap();
        let s = new_serving(&ca, &default_sans("a"), NOW, Duration::from_secs(3000)).unwrap();
        let pem = s.cert_pem.as_bytes();
        let nb = NOW - 300;
        let at = renew_at(nb, NOW + 3000);
        assert_eq!(at, nb + (3000 + 300) * 2 / 3);
        let short = new_serving(&ca, &default_sans("a"), NOW, Duration::from_secs(30)).unwrap();
        assert!(
            !renewal_due(short.cert_pem.as_bytes(), NOW).unwrap(),
            "a short lifetime is back-dated by a tenth of it"
        );
        assert!(!renewal_due(pem, NOW).unwrap());
        assert!(!renewal_due(pem, at - 1).unwrap());
        assert!(renewal_due(pem, at).unwrap());
        assert!(renewal_due(pem, NOW + 4000).unwrap(), "expired");
        assert!(renewal_due(pem, nb - 10).unwrap(), "not valid yet");
        assert!(renewal_due(b"nonsense", NOW).is_err());
    }

    fn csr(sans: Vec<SanType>, cn: Option<&str>) -> (String, KeyPair) {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::default();
        p.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            p.distinguished_name.push(DnType::CommonName, cn);
        }
        p.subject_alt_names = sans;
        (p.serialize_request(&key).unwrap().pem().unwrap(), key)
    }

    fn uri(s: &str) -> SanType {
        SanType::URI(s.try_into().unwrap())
    }

    #[test]
    fn an_agent_csr_naming_exactly_its_cluster_is_signed() {
        let now = jiff::Timestamp::now().as_second();
        let ca = new_ca(now, CA_LIFETIME).unwrap();
        let (req, key) = csr(vec![uri("spiffe://gwhub/cluster/east")], Some("east"));
        let cert = sign_agent_csr(&ca, &req, "east", now, Duration::from_secs(600))
            .unwrap()
            .unwrap();
        let id = identity::cluster_from_pem(cert.as_bytes()).unwrap();
        assert_eq!(id.cluster, "east");
        assert_eq!(id.source, identity::IdentitySource::SanUri);
        let v = identity::validities_from_pem(cert.as_bytes()).unwrap();
        assert_eq!(v[0].not_after, now + 600);
        // The certificate carries the requester's key.
        use rcgen::PublicKeyData;
        let der = tokio_rustls::rustls::pki_types::CertificateDer::from(x509_der(&cert));
        let (_, parsed) = x509_parser::parse_x509_certificate(&der).unwrap();
        assert_eq!(
            parsed.public_key().raw,
            key.subject_public_key_info().as_slice()
        );
        // A CSR without CN is fine too.
        let (req, _) = csr(vec![uri("spiffe://gwhub/cluster/east")], None);
        assert!(
            sign_agent_csr(&ca, &req, "east", now, AGENT_CERT_LIFETIME)
                .unwrap()
                .is_ok()
        );
    }

    fn x509_der(pem: &str) -> Vec<u8> {
        use tokio_rustls::rustls::pki_types::pem::PemObject;
        tokio_rustls::rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes())
            .unwrap()
            .to_vec()
    }

    #[test]
    fn a_csr_for_another_name_or_garbage_is_refused() {
        let ca = new_ca(NOW, CA_LIFETIME).unwrap();
        let cases = [
            csr(vec![uri("spiffe://gwhub/cluster/west")], None).0,
            csr(vec![uri("spiffe://gwhub/cluster/east")], Some("west")).0,
            csr(vec![], Some("east")).0,
            csr(
                vec![
                    uri("spiffe://gwhub/cluster/east"),
                    SanType::DnsName("east".try_into().unwrap()),
                ],
                None,
            )
            .0,
        ];
        for req in cases {
            let e = sign_agent_csr(&ca, &req, "east", NOW, AGENT_CERT_LIFETIME)
                .unwrap()
                .unwrap_err();
            assert!(matches!(e, CsrError::Names { .. }), "{e}");
            assert!(e.to_string().contains("spiffe://gwhub/cluster/east"), "{e}");
        }
        let e = sign_agent_csr(&ca, "garbage", "east", NOW, AGENT_CERT_LIFETIME)
            .unwrap()
            .unwrap_err();
        assert!(matches!(e, CsrError::Parse(_)), "{e}");
    }

    #[test]
    fn the_ca_pin_is_found_in_the_serving_chain() {
        let ca = new_ca(NOW, CA_LIFETIME).unwrap();
        let serving = new_serving(&ca, &default_sans("a"), NOW, SERVING_LIFETIME).unwrap();
        let pin = gwhub_common::join::ca_pin_der(&x509_der(&ca.cert_pem)).unwrap();
        assert!(pin.starts_with("sha256:") && pin.len() == 71, "{pin}");
        use tokio_rustls::rustls::pki_types::pem::PemObject;
        let chain: Vec<_> = tokio_rustls::rustls::pki_types::CertificateDer::pem_slice_iter(
            serving.cert_pem.as_bytes(),
        )
        .collect::<Result<_, _>>()
        .unwrap();
        let pins: Vec<String> = chain
            .iter()
            .map(|c| gwhub_common::join::ca_pin_der(c).unwrap())
            .collect();
        assert_eq!(pins[1], pin);
        assert_ne!(pins[0], pin);
    }

    #[test]
    fn issued_at_undoes_the_back_dating() {
        for lifetime in [20, 3000, 30 * 86_400] {
            let ca = new_ca(NOW, CA_LIFETIME).unwrap();
            let s =
                new_serving(&ca, &default_sans("a"), NOW, Duration::from_secs(lifetime)).unwrap();
            let v = identity::validities_from_pem(s.cert_pem.as_bytes()).unwrap();
            assert_eq!(
                issued_at(v[0].not_before, v[0].not_after),
                NOW,
                "{lifetime}"
            );
        }
    }

    #[test]
    fn bad_sans_and_a_bad_ca_are_named() {
        let ca = new_ca(NOW, CA_LIFETIME).unwrap();
        let e = new_serving(&ca, &[], NOW, SERVING_LIFETIME).unwrap_err();
        assert!(e.to_string().contains("at least one"), "{e}");
        let e = new_serving(&ca, &["bad name!".to_owned()], NOW, SERVING_LIFETIME).unwrap_err();
        assert!(e.to_string().contains("bad name!"), "{e}");
        let broken = Pair {
            cert_pem: ca.cert_pem.clone(),
            key_pem: "nope".to_owned(),
        };
        let e = new_serving(&broken, &default_sans("a"), NOW, SERVING_LIFETIME).unwrap_err();
        assert!(e.to_string().contains("the CA's key"), "{e}");
    }
}
