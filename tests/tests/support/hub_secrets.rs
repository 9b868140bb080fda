//! The hub serving TLS from its Secrets as the Secrets and join suites
//! start it (Lease identity `tls-secrets`), and what those suites share:
//! a Secret's key, a CSR for a cluster's SPIFFE name, a join token as
//! `gwhubctl join create` stores it, an admin's approval or denial of a
//! tokenless join's request, and their bound on waits.

use std::time::Duration;

use gwhub_common::join::JoinToken;
use gwhub_hub::kube_hub::KubeHub;
use gwhub_k8s::join::token_secret;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestStatus,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};

use crate::support::kube_hub::kube_hub;

pub(crate) use gwhub_test_kit::wait::WAIT;

/// The bytes of key `k` of Secret `s`.
pub(crate) fn key(s: &Secret, k: &str) -> Vec<u8> {
    s.data.as_ref().unwrap()[k].0.clone()
}

/// The hub with its TLS from its Secrets, its serving certificate living
/// `lifetime`, as Lease identity `tls-secrets`.
pub(crate) async fn start_hub(client: &kube::Client, lifetime: Duration) -> KubeHub {
    start_hub_with(client, lifetime, gwhub_identity::pki::AGENT_CERT_LIFETIME).await
}

/// [`start_hub`], its agent certificates living `agent_lifetime`.
pub(crate) async fn start_hub_with(
    client: &kube::Client,
    lifetime: Duration,
    agent_lifetime: Duration,
) -> KubeHub {
    kube_hub(client)
        .identity("tls-secrets")
        .tls_from_secrets(|s| {
            s.serving_lifetime = lifetime;
            s.agent_lifetime = agent_lifetime;
        })
        .start()
        .await
}

/// A CSR for `cluster`'s SPIFFE name and its private key, both PEM.
pub(crate) fn csr_for(cluster: &str) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::default();
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.subject_alt_names = vec![rcgen::SanType::URI(
        format!("spiffe://gwhub/cluster/{cluster}")
            .try_into()
            .unwrap(),
    )];
    (
        p.serialize_request(&key).unwrap().pem().unwrap(),
        key.serialize_pem(),
    )
}

/// A join token for `cluster` valid `ttl` seconds, stored as `gwhubctl
/// join create` stores it; its secret.
pub(crate) async fn make_token(secrets: &Api<Secret>, cluster: &str, ttl: i64) -> String {
    let token = JoinToken::generate().unwrap();
    let expires = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(ttl);
    secrets
        .create(
            &PostParams::default(),
            &token_secret(&token, cluster, expires),
        )
        .await
        .unwrap();
    token.reveal()
}

/// Sets condition `type_` (Approved, Denied) on CertificateSigningRequest
/// `name`, as `kubectl certificate approve|deny` does.
pub(crate) async fn decide(csrs: &Api<CertificateSigningRequest>, name: &str, type_: &str) {
    let mut csr = csrs.get(name).await.unwrap();
    csr.status = Some(CertificateSigningRequestStatus {
        conditions: Some(vec![CertificateSigningRequestCondition {
            type_: type_.into(),
            status: "True".into(),
            reason: Some("KubectlApprove".into()),
            message: Some("by a gwhub test".into()),
            ..Default::default()
        }]),
        certificate: None,
    });
    csrs.replace_subresource("approval", name, &PostParams::default(), &csr)
        .await
        .unwrap();
}
