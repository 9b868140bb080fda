//! The vocabulary of the hub's CertificateSigningRequests, shared by the
//! token join ([`super::join`]) and the tokenless one ([`super::pending`]):
//! the signer, the labels and names a request carries (valid for every
//! valid cluster name), the conditions read from it, and the answer when
//! the API server cannot be reached.
//!
//! It exists apart from both so that neither names the other for these:
//! `pending` uses the Joiner, and nothing here uses either.

use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use tonic::Status;

/// The signer of agent certificates.
pub const SIGNER: &str = "gwhub.io/cluster-agent";
/// The label of a tokenless join's request.
pub const MANUAL_LABEL: &str = "gwhub.io/approval";
/// The start of the answer while a tokenless request waits.
pub const WAITING: &str = "waiting for approval";

/// The longest label value (Kubernetes).
const MAX_LABEL_VALUE: usize = 63;
/// The longest cluster part of a CSR's name: `gwhub-` + it + `-key-` and 16
/// hex digits, or `-renew-` and an id, stay well within 253.
const MAX_NAME_PART: usize = 200;

/// A hash standing for a cluster name too long (or with characters) for a
/// label value or an object name: `h-` and 32 hex digits of its SHA-256
/// (128 bits: no two cluster names meet).
fn hashed(cluster: &str) -> String {
    let hex = gwhub_common::join::key_hash(cluster.as_bytes());
    format!("h-{}", hex.get(..32).unwrap_or(&hex))
}

/// The value of label `gwhub.io/cluster` for `cluster` (on join token
/// Secrets and CSRs): the name when it is a valid label value (at most 63
/// characters), else `hashed`, so every valid cluster name can get a
/// join token.
pub fn cluster_label(cluster: &str) -> String {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if cluster.len() <= MAX_LABEL_VALUE
        && alnum(cluster.chars().next())
        && alnum(cluster.chars().last())
    {
        cluster.to_owned()
    } else {
        hashed(cluster)
    }
}

/// The cluster's part of a CSR's name: the name when it is an object name
/// of at most [`MAX_NAME_PART`] characters, else [`hashed`].
pub(super) fn name_part(cluster: &str) -> String {
    if cluster.len() <= MAX_NAME_PART && gwhub_model::cluster::object_name(cluster) == cluster {
        cluster.to_owned()
    } else {
        hashed(cluster)
    }
}

/// The CertificateSigningRequest of a tokenless join of `cluster` with
/// the key of hash `key_hash`.
pub fn pending_name(cluster: &str, key_hash: &str) -> String {
    format!(
        "gwhub-{}-key-{}",
        name_part(cluster),
        key_hash.get(..16).unwrap_or(key_hash)
    )
}

/// The status of a condition `type_` of `csr`, True.
pub(super) fn condition(
    csr: &CertificateSigningRequest,
    type_: &str,
) -> Option<CertificateSigningRequestCondition> {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_ && c.status == "True"))
        .cloned()
}

/// Neither approved, denied nor failed.
pub(super) fn is_pending(csr: &CertificateSigningRequest) -> bool {
    ["Approved", "Denied", "Failed"]
        .iter()
        .all(|t| condition(csr, t).is_none())
}

/// The answer when the API server cannot do `what` now (logged, naming
/// the error; the caller is told to retry).
pub(super) fn unavailable(what: &str, e: kube::Error) -> Status {
    tracing::warn!(error = %e, "join: {what}");
    Status::unavailable(format!("the hub cannot {what} now; retry later"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every valid cluster name makes valid label values and object names.
    #[test]
    fn long_cluster_names_are_hashed_into_labels_and_names() {
        let long = "a".repeat(253);
        for cluster in ["east", "a_b", "x.y", long.as_str(), &"b".repeat(64)] {
            gwhub_model::cluster::validate(cluster).unwrap();
            let label = cluster_label(cluster);
            assert!(label.len() <= 63, "{label}");
            let name = pending_name(cluster, &"f".repeat(64));
            assert!(name.len() <= 253, "{name}");
            assert_eq!(gwhub_model::cluster::object_name(&name), name);
        }
        assert_eq!(cluster_label("east"), "east");
        assert_eq!(
            pending_name("east", "0123456789abcdef99"),
            "gwhub-east-key-0123456789abcdef"
        );
        assert_ne!(cluster_label(&long), cluster_label(&"a".repeat(252)));
    }
}
