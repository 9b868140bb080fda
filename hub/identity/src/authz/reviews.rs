//! The port through which the Dashboard's readers are reviewed: a
//! TokenReview (whose token is it?) and a SubjectAccessReview (may that
//! user `get` hub Gateways in a namespace?).
//!
//! It exists so that the readers' budget, caches and re-checks
//! ([`super::KubeReaders`]) are decided here, with no Kubernetes client in
//! this crate: the runtime asks the API server
//! (`gwhub_k8s::reviews::ApiServerReviews`), and a test may answer
//! itself.

use std::collections::BTreeMap;

/// Why a review got no answer (the API server's error, say); the readers
/// cache it briefly and name it to the reader.
pub type Failure = Box<dyn std::error::Error + Send + Sync>;

/// Whom a token belongs to, as a TokenReview says: what a
/// SubjectAccessReview is then asked about.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct User {
    pub username: Option<String>,
    pub uid: Option<String>,
    pub groups: Option<Vec<String>>,
    pub extra: Option<BTreeMap<String, Vec<String>>>,
}

/// Answers the readers' two questions. Each call is one review; the
/// caller bounds how many and how long (`REVIEW_TIMEOUT`).
#[tonic::async_trait]
pub trait Reviews: Send + Sync + 'static {
    /// The user `token` authenticates as, or `None` when it is not a
    /// valid token.
    async fn token(&self, token: &str) -> Result<Option<User>, Failure>;

    /// Whether `user` may `get` `gateways.gateway.networking.k8s.io` in
    /// `namespace` (`""`: in every namespace).
    async fn access(&self, user: &User, namespace: &str) -> Result<bool, Failure>;
}
