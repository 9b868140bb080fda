//! The cluster an mTLS client certificate speaks for. The hub derives the
//! reporting cluster from the certificate (never from what the agent says),
//! and the agent checks its own certificate with the same rule, so both
//! sides agree before a byte is sent.
//!
//! Rule: the SAN URI of the form `spiffe://gwhub/cluster/<name>` names the
//! cluster; without one, the subject's Common Name. A certificate naming
//! more than one cluster (two such URIs, or two CNs) is refused: which one
//! it speaks for would be a guess. Anything else has no identity.

use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

/// SAN URI prefix naming a cluster: `spiffe://gwhub/cluster/<name>`.
pub const SPIFFE_CLUSTER_PREFIX: &str = "spiffe://gwhub/cluster/";

/// Where a certificate's identity came from (for logs and messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdentitySource {
    SanUri,
    CommonName,
}

/// A cluster name taken from a certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterIdentity {
    pub cluster: String,
    pub source: IdentitySource,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IdentityError {
    #[error("not a valid X.509 certificate: {0}")]
    Parse(String),
    #[error(
        "the certificate names no cluster: no SAN URI {SPIFFE_CLUSTER_PREFIX}<name> and no subject CN"
    )]
    Missing,
    #[error(
        "the certificate's cluster name {name} is not valid: {1}",
        name = gwhub_model::text::quote_client_input(.0)
    )]
    Invalid(String, String),
    #[error(
        "the certificate names more than one cluster ({0:?}); a certificate must name exactly one"
    )]
    Ambiguous(Vec<String>),
}

/// The cluster named by a DER certificate (the leaf of a chain).
pub fn cluster_from_der(der: &[u8]) -> Result<ClusterIdentity, IdentityError> {
    let (_, cert) =
        X509Certificate::from_der(der).map_err(|e| IdentityError::Parse(e.to_string()))?;
    let san = cert
        .subject_alternative_name()
        .map_err(|e| IdentityError::Parse(e.to_string()))?;
    let mut uris: Vec<&str> = san
        .into_iter()
        .flat_map(|ext| ext.value.general_names.iter())
        .filter_map(|n| match n {
            GeneralName::URI(u) => u.strip_prefix(SPIFFE_CLUSTER_PREFIX),
            _ => None,
        })
        .collect();
    uris.sort_unstable();
    uris.dedup();
    let (cluster, source) = match uris.as_slice() {
        [name] => ((*name).to_owned(), IdentitySource::SanUri),
        [_, _, ..] => {
            return Err(IdentityError::Ambiguous(
                uris.iter().map(|u| (*u).to_owned()).collect(),
            ));
        }
        [] => {
            let mut cns = Vec::new();
            for cn in cert.subject().iter_common_name() {
                let cn = cn.as_str().map_err(|_| {
                    IdentityError::Invalid(String::new(), "the CN is not a string".to_owned())
                })?;
                if !cns.contains(&cn) {
                    cns.push(cn);
                }
            }
            match cns.as_slice() {
                [] => return Err(IdentityError::Missing),
                [cn] => ((*cn).to_owned(), IdentitySource::CommonName),
                _ => {
                    return Err(IdentityError::Ambiguous(
                        cns.iter().map(|c| (*c).to_owned()).collect(),
                    ));
                }
            }
        }
    };
    validate(&cluster)?;
    Ok(ClusterIdentity { cluster, source })
}

/// The cluster named by the first certificate of a PEM file's contents.
pub fn cluster_from_pem(pem: &[u8]) -> Result<ClusterIdentity, IdentityError> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem)
        .map_err(|e| IdentityError::Parse(format!("not PEM: {e}")))?;
    if pem.label != "CERTIFICATE" {
        return Err(IdentityError::Parse(format!(
            "expected a CERTIFICATE PEM block, found {:?}",
            pem.label
        )));
    }
    cluster_from_der(&pem.contents)
}

/// Names usable as a cluster: the one rule of [`gwhub_model::cluster`].
fn validate(name: &str) -> Result<(), IdentityError> {
    gwhub_model::cluster::validate(name)
        .map_err(|e| IdentityError::Invalid(name.to_owned(), e.to_string()))
}

/// A certificate's validity window, in Unix seconds (inclusive bounds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    pub not_before: i64,
    pub not_after: i64,
}

impl Validity {
    /// Whether `now` (Unix seconds) is past `not_after`.
    pub fn expired_at(&self, now: i64) -> bool {
        now > self.not_after
    }
}

/// The validity window of a DER certificate.
pub fn validity_from_der(der: &[u8]) -> Result<Validity, IdentityError> {
    let (_, cert) =
        X509Certificate::from_der(der).map_err(|e| IdentityError::Parse(e.to_string()))?;
    let v = cert.validity();
    Ok(Validity {
        not_before: v.not_before.timestamp(),
        not_after: v.not_after.timestamp(),
    })
}

/// The validity windows of every certificate in a PEM file's contents, in
/// file order; an error when there is none or one does not parse.
pub fn validities_from_pem(pem: &[u8]) -> Result<Vec<Validity>, IdentityError> {
    let mut out = Vec::new();
    for block in x509_parser::pem::Pem::iter_from_buffer(pem) {
        let block = block.map_err(|e| IdentityError::Parse(format!("not PEM: {e}")))?;
        if block.label == "CERTIFICATE" {
            out.push(validity_from_der(&block.contents)?);
        }
    }
    if out.is_empty() {
        return Err(IdentityError::Parse(
            "no CERTIFICATE PEM block found".to_owned(),
        ));
    }
    Ok(out)
}

/// The soonest `notAfter` (Unix seconds) among a PEM file's certificates.
pub fn soonest_expiry_pem(pem: &[u8]) -> Result<i64, IdentityError> {
    Ok(validities_from_pem(pem)?
        .iter()
        .map(|v| v.not_after)
        .min()
        .unwrap_or(i64::MAX))
}
