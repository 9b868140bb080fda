//! The Dashboard readers' reviews asked of the management cluster's API
//! server: the [`Reviews`] port of `gwhub_identity::authz`, as
//! `TokenReview` (authentication.k8s.io/v1) and `SubjectAccessReview`
//! (authorization.k8s.io/v1) creations with the hub's ServiceAccount.
//!
//! It exists so that identity keeps the readers' rules (budget, caches,
//! re-checks) with no Kubernetes client; this file only translates.

use gwhub_hub_rules::read_access;
use gwhub_identity::authz::reviews::Failure;
use gwhub_identity::authz::{Reviews, User};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};

/// [`Reviews`] by the API server `client` talks to.
pub struct ApiServerReviews {
    tokens: Api<TokenReview>,
    access: Api<SubjectAccessReview>,
}

impl ApiServerReviews {
    /// Reviews asked with `client`'s identity (the hub's ServiceAccount,
    /// which the shipped RBAC lets create both).
    pub fn new(client: Client) -> Self {
        ApiServerReviews {
            tokens: Api::all(client.clone()),
            access: Api::all(client),
        }
    }
}

#[tonic::async_trait]
impl Reviews for ApiServerReviews {
    async fn token(&self, token: &str) -> Result<Option<User>, Failure> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..Default::default()
        };
        let answer = self.tokens.create(&PostParams::default(), &review).await?;
        let status = answer.status.unwrap_or_default();
        Ok(match (status.authenticated, status.user) {
            (Some(true), Some(u)) => Some(User {
                username: u.username,
                uid: u.uid,
                groups: u.groups,
                extra: u.extra,
            }),
            _ => None,
        })
    }

    async fn access(&self, user: &User, namespace: &str) -> Result<bool, Failure> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username.clone(),
                uid: user.uid.clone(),
                groups: user.groups.clone(),
                extra: user.extra.clone(),
                resource_attributes: Some(ResourceAttributes {
                    namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
                    verb: Some(read_access::VERB.to_owned()),
                    group: Some(read_access::GROUP.to_owned()),
                    resource: Some(read_access::RESOURCE.to_owned()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = self.access.create(&PostParams::default(), &review).await?;
        Ok(answer.status.is_some_and(|s| s.allowed))
    }
}
