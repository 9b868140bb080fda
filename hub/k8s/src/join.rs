//! `gwhub.v1.Ingest/Join` (spec section 7): a cluster with a join token
//! from `gwhubctl join create` gets its client certificate. The token is
//! checked against its Secret `gwhub-join-<id>` (the secret's hash, compared
//! in constant time; not expired; bound to the cluster asked for) and used
//! up; the request is recorded as a `certificates.k8s.io/v1`
//! CertificateSigningRequest of signer `gwhub.io/cluster-agent`, approved
//! (the `approval` subresource) and signed with the key in Secret
//! `gwhub-ca` (the `status` subresource), then deleted (the hub's CSRs
//! are deleted once issued, denied or expired). A refused attempt issues and records
//! nothing. A token whose id no token Secret has is refused from memory
//! (see [`super::join_limits`]); attempts are limited per token id, tokenless
//! ones per source address, renewals per cluster, never overall: nobody
//! without a token can keep a valid one out.
//! With a fleet inventory, a join publishes the cluster's ClusterProfile
//! first when none exists, so the new cluster may stream at once.
//!
//! Every issued certificate is recorded in ConfigMap `gwhub-issued`
//! ([`super::issued`]).
//!
//! A Join with no token is the manual path, in [`super::pending`].

use std::net::IpAddr;
use std::time::{Duration, Instant};

use gwhub_common::join::{JoinToken, TOKEN_LABEL};
use gwhub_hub_rules::inventory::ClusterProfile;
use gwhub_proto::v1;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestSpec,
    CertificateSigningRequestStatus,
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams, Preconditions};
use tonic::Status;

use super::join_csr::{SIGNER, WAITING, cluster_label, name_part, pending_name, unavailable};
use super::join_limits::{Keyed, Known, KnownTokens, RefusalLog, source_of};
use super::tls_secrets::CA_SECRET;
use gwhub_identity::issuer::Issuer;
use gwhub_identity::pki::{self, Pair};

/// Data keys of a join token's Secret.
pub const CLUSTER_KEY: &str = "cluster";
pub const EXPIRES_KEY: &str = "expires";
pub const HASH_KEY: &str = "tokenHash";

/// Attempts per join token id: a minute's burst of 5, then 5 a minute (an
/// agent uses its token once, and retries only when the hub was busy).
const PER_TOKEN_PER_MINUTE: u32 = 5;
/// Tokenless attempts per source address: a burst of 10, then 10 a minute
/// (an agent waiting for approval asks every 2 to 30 s).
const PER_SOURCE_PER_MINUTE: u32 = 10;
/// Renewals per cluster: a burst of 5, then 5 a minute (an agent renews
/// every few weeks; a retry loop, or a stolen key, is cut off).
const RENEW_PER_CLUSTER_PER_MINUTE: u32 = 5;
/// The API server's floor for `spec.expirationSeconds`.
const MIN_EXPIRATION_SECONDS: u64 = 600;

/// The Secret that records `token` for `cluster` until `expires` (only
/// the secret's hash), in the hub's namespace.
pub fn token_secret(token: &JoinToken, cluster: &str, expires: jiff::Timestamp) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(token.secret_name()),
            labels: Some(
                [
                    (TOKEN_LABEL.to_owned(), token.id.clone()),
                    ("gwhub.io/cluster".to_owned(), cluster_label(cluster)),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        type_: Some("gwhub.io/join-token".to_owned()),
        string_data: Some(
            [
                (CLUSTER_KEY.to_owned(), cluster.to_owned()),
                (EXPIRES_KEY.to_owned(), expires.to_string()),
                (HASH_KEY.to_owned(), token.hash()),
            ]
            .into(),
        ),
        ..Secret::default()
    }
}

/// The free checks of a Join (no API call): the cluster's name and the
/// token's format, or (no token) the request's names and key.
fn precheck(req: &v1::JoinRequest) -> Result<Credential, Status> {
    gwhub_model::cluster::validate(&req.cluster)
        .map_err(|e| Status::invalid_argument(format!("cluster {:?}: {e}", req.cluster)))?;
    if req.token.is_empty() {
        let hash = pki::agent_csr_key_hash(&req.csr_pem, &req.cluster)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        return Ok(Credential::Manual(pending_name(&req.cluster, &hash), hash));
    }
    JoinToken::parse(&req.token)
        .map(Credential::Token)
        .map_err(|e| Status::unauthenticated(format!("join token: {e}")))
}

/// What a Join carries.
enum Credential {
    Token(JoinToken),
    /// No token: the name of its CertificateSigningRequest, the hash of
    /// its key.
    Manual(String, String),
}

/// Issues agent certificates for valid join tokens.
pub struct Joiner {
    secrets: Api<Secret>,
    /// ConfigMaps `gwhub-revoked` and `gwhub-issued`, read fresh.
    pub(super) configmaps: Api<ConfigMap>,
    pub(super) csrs: Api<CertificateSigningRequest>,
    pub(super) lifetime: Duration,
    /// Tokenless requests are counted and created one at a time.
    pub(super) manual: tokio::sync::Mutex<()>,
    /// The join tokens that exist (ids), followed by [`KnownTokens::follow`].
    tokens: KnownTokens,
    /// How long an id not known yet waits for the watch.
    grace: Duration,
    per_token: Keyed<String>,
    /// Tokenless attempts, per source address (see [`source_of`]).
    per_source: Keyed<String>,
    /// Renewals, per cluster.
    renew_limit: Keyed<String>,
    /// Refused joins: counted, logged at a bounded rate.
    refusals: RefusalLog,
    /// `--inventory-namespace`: where a join publishes its ClusterProfile.
    pub(super) profiles: Option<(Api<ClusterProfile>, String)>,
    /// Enforce mode: a tokenless join needs the cluster's ClusterProfile.
    enforce_inventory: bool,
    /// Observe mode: renewals of clusters outside the inventory, admitted.
    outside_renewals: std::sync::OnceLock<prometheus_client::metrics::counter::Counter>,
}

impl std::fmt::Debug for Joiner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Joiner")
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

fn data(s: &Secret, key: &str) -> Option<String> {
    s.data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| String::from_utf8_lossy(&b.0).trim().to_owned())
}

fn raw(s: &Secret, key: &str) -> Option<String> {
    s.data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
}

fn unknown_token(id: &str) -> Status {
    Status::unauthenticated(format!(
        "join token {id} is unknown (used, deleted or never made)"
    ))
}

impl Joiner {
    /// Tokens and the CA in `namespace`; certificates valid for `lifetime`.
    pub fn new(client: Client, namespace: &str, lifetime: Duration) -> Self {
        Joiner {
            secrets: Api::namespaced(client.clone(), namespace),
            configmaps: Api::namespaced(client.clone(), namespace),
            csrs: Api::all(client),
            lifetime,
            manual: tokio::sync::Mutex::new(()),
            tokens: KnownTokens::default(),
            grace: super::join_limits::GRACE,
            per_token: Keyed::new(PER_TOKEN_PER_MINUTE, PER_TOKEN_PER_MINUTE),
            per_source: Keyed::new(PER_SOURCE_PER_MINUTE, PER_SOURCE_PER_MINUTE),
            renew_limit: Keyed::new(RENEW_PER_CLUSTER_PER_MINUTE, RENEW_PER_CLUSTER_PER_MINUTE),
            refusals: RefusalLog::default(),
            profiles: None,
            enforce_inventory: false,
            outside_renewals: std::sync::OnceLock::new(),
        }
    }

    /// The join token ids this Joiner admits; follow them with
    /// [`KnownTokens::follow`] on [`Joiner::token_secrets`].
    pub fn known_tokens(&self) -> KnownTokens {
        self.tokens.clone()
    }

    /// Refused joins are counted into `family` (`gwhub_join_refused_total`).
    pub fn count_refusals_into(
        &self,
        family: prometheus_client::metrics::family::Family<
            super::join_limits::RefusalLabel,
            prometheus_client::metrics::counter::Counter,
        >,
    ) {
        self.refusals.count_into(family);
    }

    /// Renewals admitted outside the inventory (observe mode) are counted
    /// into `counter` (`gwhub_renewals_outside_inventory_total`).
    pub fn count_outside_renewals_into(
        &self,
        counter: prometheus_client::metrics::counter::Counter,
    ) {
        let _ = self.outside_renewals.set(counter);
    }

    /// Where the join token Secrets are.
    pub fn token_secrets(&self) -> Api<Secret> {
        self.secrets.clone()
    }

    /// Known token ids from the start, not followed, no grace (tests).
    pub fn with_known_tokens(mut self, tokens: KnownTokens) -> Self {
        self.tokens = tokens;
        self.grace = Duration::ZERO;
        self
    }

    /// Joins publish the cluster's ClusterProfile in the inventory
    /// `namespace` when none exists.
    pub fn with_inventory(mut self, client: Client, namespace: &str) -> Self {
        self.profiles = Some((Api::namespaced(client, namespace), namespace.to_owned()));
        self
    }

    /// The inventory is enforced: a tokenless join of a cluster without a
    /// ClusterProfile is refused (a token is the operator's word; no token
    /// is anyone's).
    pub fn enforcing_inventory(mut self) -> Self {
        self.enforce_inventory = true;
        self
    }

    /// Handles one Join call from `peer`.
    pub async fn join(
        &self,
        peer: Option<IpAddr>,
        req: v1::JoinRequest,
    ) -> Result<v1::JoinResponse, Status> {
        let now = Instant::now();
        let retry = |e: Duration| e.as_secs().max(1);
        let result = match precheck(&req) {
            Err(e) => Err(e),
            Ok(Credential::Token(token)) => {
                match self.tokens.check_within(&token.id, self.grace).await {
                    // From memory: no API call, nobody's budget.
                    Known::No => Err(unknown_token(&token.id)),
                    Known::NotYet => Err(Status::unavailable(
                        "the hub has not read its join tokens yet; retry shortly",
                    )),
                    Known::Yes => match self.per_token.admit(&token.id, now) {
                        Err(e) => Err(Status::resource_exhausted(format!(
                            "too many attempts with join token {}; retry in {}s",
                            token.id,
                            retry(e)
                        ))),
                        Ok(()) => self.join_checked(&req, token).await,
                    },
                }
            }
            Ok(Credential::Manual(name, hash)) => {
                let source = peer.map_or_else(|| "unknown".to_owned(), source_of);
                match self.per_source.admit(&source, now) {
                    Err(e) => Err(Status::resource_exhausted(format!(
                        "too many join attempts without a token from {source}; retry in {}s",
                        retry(e)
                    ))),
                    Ok(()) => self.join_manual(peer, &req, &name, &hash).await,
                }
            }
        };
        match &result {
            Ok(_) => tracing::info!(cluster = req.cluster, ?peer, "cluster joined"),
            Err(s) if s.message().starts_with(WAITING) => tracing::info!(
                cluster = req.cluster,
                ?peer,
                message = s.message(),
                "join waits for approval"
            ),
            Err(s) => {
                let source = peer.map_or_else(|| "unknown".to_owned(), source_of);
                let (one, summary) = self.refusals.refused(&source, s.code(), Instant::now());
                if summary > 0 {
                    tracing::warn!(
                        refused = summary,
                        "more joins were refused in the last minute than were logged \
                         (see gwhub_join_refused_total)"
                    );
                }
                if one {
                    tracing::warn!(
                        cluster = req.cluster,
                        source,
                        message = s.message(),
                        "join refused (the first from this address this minute)"
                    );
                }
            }
        }
        result
    }

    async fn join_checked(
        &self,
        req: &v1::JoinRequest,
        token: JoinToken,
    ) -> Result<v1::JoinResponse, Status> {
        let id = &token.id;
        let unknown = || unknown_token(id);
        let stored = self
            .secrets
            .get_opt(&token.secret_name())
            .await
            .map_err(|e| unavailable("read the join token", e))?
            .filter(|s| {
                s.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(TOKEN_LABEL))
            })
            .ok_or_else(unknown)?;
        if !data(&stored, HASH_KEY).is_some_and(|h| token.matches(&h)) {
            return Err(unknown());
        }
        let expires = data(&stored, EXPIRES_KEY)
            .and_then(|e| e.parse::<jiff::Timestamp>().ok())
            .ok_or_else(|| {
                Status::unauthenticated(format!("join token {id} has no valid expiry"))
            })?;
        if expires <= jiff::Timestamp::now() {
            return Err(Status::unauthenticated(format!(
                "join token {id} expired at {expires}; make a new one with gwhubctl join create"
            )));
        }
        if data(&stored, CLUSTER_KEY).as_deref() != Some(req.cluster.as_str()) {
            return Err(Status::permission_denied(format!(
                "join token {id} is bound to another cluster, not {:?}",
                req.cluster
            )));
        }
        let ca = self.ca().await?;
        let now = jiff::Timestamp::now().as_second();
        let cert = pki::sign_agent_csr(&ca, &req.csr_pem, &req.cluster, now, self.lifetime)
            .map_err(|e| Status::internal(format!("cannot sign: {e}")))?
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        // In the inventory before the certificate exists: it may stream at
        // once (enforce mode). Before the token is used up: a failure here
        // leaves the token for a retry.
        self.publish_profile(&req.cluster).await?;
        self.record_issued(&req.cluster, now, true).await?;
        // Single use: only the caller whose delete wins goes on.
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: stored.metadata.uid.clone(),
                resource_version: stored.metadata.resource_version.clone(),
            }),
            ..DeleteParams::default()
        };
        match self.secrets.delete(&token.secret_name(), &dp).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => return Err(unknown()),
            Err(e) => return Err(unavailable("use up the join token", e)),
        }
        self.record(&req.cluster, id, "GwhubJoinToken", &req.csr_pem, &cert)
            .await?;
        Ok(v1::JoinResponse {
            certificate_pem: cert,
            ca_pem: ca.cert_pem,
        })
    }

    /// Handles one Renew call from an agent whose client certificate
    /// (`presented`, its chain) names `cluster` (the handshake checked it
    /// against the CA).
    ///
    /// The removals are read fresh before signing and again after: this
    /// replica's followed copy of `gwhub-revoked` may lag, and a removal
    /// written while a renewal is signed would otherwise miss the new
    /// certificate (dated after it). After the second read, a removal
    /// written later is dated after the new certificate and covers it.
    pub async fn renew(
        &self,
        cluster: &str,
        presented: &[tokio_rustls::rustls::pki_types::CertificateDer<'_>],
        req: v1::RenewRequest,
    ) -> Result<v1::JoinResponse, Status> {
        self.renew_limit
            .admit(&cluster.to_owned(), Instant::now())
            .map_err(|e| {
                Status::resource_exhausted(format!(
                    "too many renewals for cluster {cluster:?}; retry in {}s",
                    e.as_secs().max(1)
                ))
            })?;
        self.refuse_removed(presented).await?;
        let member = self.renewal_in_inventory(cluster).await?;
        let ca = self.ca().await?;
        let now = jiff::Timestamp::now().as_second();
        let cert = pki::sign_agent_csr(&ca, &req.csr_pem, cluster, now, self.lifetime)
            .map_err(|e| Status::internal(format!("cannot sign: {e}")))?
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        self.record_issued(cluster, now, member).await?;
        let id = gwhub_common::join::JoinToken::generate()
            .map_err(|e| Status::internal(e.to_string()))?
            .id;
        self.record(
            cluster,
            &format!("renew-{id}"),
            "GwhubRenewal",
            &req.csr_pem,
            &cert,
        )
        .await?;
        self.refuse_removed(presented).await?;
        tracing::info!(cluster, "agent certificate renewed");
        Ok(v1::JoinResponse {
            certificate_pem: cert,
            ca_pem: ca.cert_pem,
        })
    }

    /// PERMISSION_DENIED when the cluster of `presented` was removed after
    /// that certificate was issued, as `gwhub-revoked` says now.
    async fn refuse_removed(
        &self,
        presented: &[tokio_rustls::rustls::pki_types::CertificateDer<'_>],
    ) -> Result<(), Status> {
        let removed = super::revocations::read(&self.configmaps)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        match gwhub_identity::reload::revoked_reason(&removed, presented) {
            Some(reason) => Err(Status::permission_denied(reason)),
            None => Ok(()),
        }
    }

    /// With an enforced inventory, PERMISSION_DENIED unless `cluster` has
    /// its ClusterProfile (`what` needs it: a tokenless join, a renewal).
    pub(super) async fn require_profile(&self, cluster: &str, what: &str) -> Result<(), Status> {
        if !self.enforce_inventory {
            return Ok(());
        }
        match self.has_profile(cluster).await? {
            Some((false, namespace)) => Err(Status::permission_denied(format!(
                "cluster {cluster:?} has no ClusterProfile in the fleet inventory \
                 (namespace {namespace}); {what} needs it"
            ))),
            _ => Ok(()),
        }
    }

    /// A renewal checks the inventory in every mode, as a stream does:
    /// outside it, enforce mode refuses ([`Self::require_profile`]);
    /// observe mode admits, logs a warning and counts it
    /// (`gwhub_renewals_outside_inventory_total`). Whether the cluster is
    /// in the inventory (true without one).
    async fn renewal_in_inventory(&self, cluster: &str) -> Result<bool, Status> {
        if self.enforce_inventory {
            return self
                .require_profile(cluster, "a renewal")
                .await
                .map(|()| true);
        }
        if let Some((false, namespace)) = self.has_profile(cluster).await? {
            if let Some(c) = self.outside_renewals.get() {
                c.inc();
            }
            tracing::warn!(
                cluster,
                inventory = %namespace,
                "renewal of a cluster outside the fleet inventory admitted (--inventory-mode=observe)"
            );
            return Ok(false);
        }
        Ok(true)
    }

    /// Whether `cluster` has its ClusterProfile, and the inventory's
    /// namespace; `None` without an inventory.
    async fn has_profile(&self, cluster: &str) -> Result<Option<(bool, &str)>, Status> {
        let Some((profiles, namespace)) = self.profiles.as_ref() else {
            return Ok(None);
        };
        // Listed (the hub's verb on the inventory), by name.
        let lp = kube::api::ListParams::default().fields(&format!("metadata.name={cluster}"));
        let found = profiles
            .list(&lp)
            .await
            .map_err(|e| unavailable("read the fleet inventory", e))?;
        Ok(Some((!found.items.is_empty(), namespace.as_str())))
    }

    /// With an inventory, publishes `cluster`'s ClusterProfile when none
    /// exists (before its certificate: it may stream at once).
    pub(super) async fn publish_profile(&self, cluster: &str) -> Result<(), Status> {
        if let Some((profiles, namespace)) = &self.profiles {
            super::inventory::publish(profiles, namespace, cluster)
                .await
                .map_err(|e| unavailable("publish the cluster's ClusterProfile", e))?;
        }
        Ok(())
    }

    /// The CA from Secret `gwhub-ca` (read fresh: a replaced CA signs).
    pub(super) async fn ca(&self) -> Result<Pair, Status> {
        let ca = self
            .secrets
            .get(CA_SECRET)
            .await
            .map_err(|e| unavailable("read its CA", e))?;
        match (raw(&ca, "tls.crt"), raw(&ca, "tls.key")) {
            (Some(cert_pem), Some(key_pem)) => Ok(Pair { cert_pem, key_pem }),
            _ => Err(Status::failed_precondition(format!(
                "Secret {CA_SECRET} has no tls.key: the hub cannot sign agent certificates"
            ))),
        }
    }

    /// The CertificateSigningRequest `name` of `cluster` for `csr`, of
    /// the hub's signer, not yet approved.
    pub(super) fn csr_object(
        &self,
        cluster: &str,
        name: &str,
        csr: &str,
    ) -> CertificateSigningRequest {
        let expiration = self.lifetime.as_secs().max(MIN_EXPIRATION_SECONDS);
        CertificateSigningRequest {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(
                    [
                        ("gwhub.io/cluster".to_owned(), cluster_label(cluster)),
                        ("app.kubernetes.io/name".to_owned(), "gwhub".to_owned()),
                    ]
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            spec: CertificateSigningRequestSpec {
                request: ByteString(csr.as_bytes().to_vec()),
                signer_name: SIGNER.to_owned(),
                usages: Some(vec![
                    "digital signature".to_owned(),
                    "client auth".to_owned(),
                ]),
                expiration_seconds: i32::try_from(expiration).ok(),
                ..CertificateSigningRequestSpec::default()
            },
            status: None,
        }
    }

    /// The CertificateSigningRequest: created, approved (the token was
    /// valid), its certificate set.
    async fn record(
        &self,
        cluster: &str,
        id: &str,
        reason: &str,
        csr: &str,
        cert: &str,
    ) -> Result<(), Status> {
        let object = self.csr_object(cluster, &format!("gwhub-{}-{id}", name_part(cluster)), csr);
        let pp = PostParams::default();
        let created = self
            .csrs
            .create(&pp, &object)
            .await
            .map_err(|e| unavailable("record the certificate request", e))?;
        let name = created.metadata.name.clone().unwrap_or_default();
        let mut approved = created;
        approved.status = Some(CertificateSigningRequestStatus {
            conditions: Some(vec![CertificateSigningRequestCondition {
                type_: "Approved".to_owned(),
                status: "True".to_owned(),
                reason: Some(reason.to_owned()),
                message: Some(match reason {
                    "GwhubRenewal" => format!("renewal by cluster {cluster}'s current certificate"),
                    _ => format!("join token {id}, bound to cluster {cluster}"),
                }),
                ..CertificateSigningRequestCondition::default()
            }]),
            certificate: None,
        });
        let mut signed = self
            .csrs
            .replace_subresource("approval", &name, &pp, &approved)
            .await
            .map_err(|e| unavailable("approve the certificate request", e))?;
        if let Some(status) = signed.status.as_mut() {
            status.certificate = Some(ByteString(cert.as_bytes().to_vec()));
        }
        self.csrs
            .replace_subresource("status", &name, &pp, &signed)
            .await
            .map_err(|e| unavailable("record the certificate", e))?;
        // Issued: the request has served (the API server's audit log and
        // gwhub-issued keep the record); deleted so they do not pile up.
        if let Err(e) = self.csrs.delete(&name, &DeleteParams::default()).await {
            tracing::warn!(csr = name, error = %e, "cannot delete the issued certificate request");
        }
        Ok(())
    }
}

/// The ingest listener reaches the Joiner only through the port.
#[tonic::async_trait]
impl Issuer for Joiner {
    async fn join(
        &self,
        peer: Option<IpAddr>,
        req: v1::JoinRequest,
    ) -> Result<v1::JoinResponse, Status> {
        Joiner::join(self, peer, req).await
    }

    async fn renew(
        &self,
        cluster: &str,
        presented: &[tokio_rustls::rustls::pki_types::CertificateDer<'_>],
        req: v1::RenewRequest,
    ) -> Result<v1::JoinResponse, Status> {
        Joiner::renew(self, cluster, presented, req).await
    }
}

#[cfg(test)]
mod tests;
