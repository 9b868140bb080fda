//! The tokenless join (spec section 7, "Hardening"), apart from the token
//! path in [`super::join`] because nobody vouches for its caller:
//!
//! - a cluster that holds a live identity (ConfigMap `gwhub-issued`, see
//!   [`super::issued`]) is refused `ALREADY_EXISTS`: its agent renews, or
//!   an operator removes it and makes a token; so nobody can ask for a
//!   joined cluster's name and have an operator approve it by mistake;
//! - a removed cluster needs a new token, and its requests (pending or
//!   approved) are void;
//! - a request is a CertificateSigningRequest named after the cluster and
//!   the key, annotated with who asked (source address, the key's SHA-256
//!   fingerprint, when): an operator approves the one whose fingerprint the
//!   agent logged. Several may wait for one cluster (the hub never points a
//!   requester at another's request); the approval is signed for the key
//!   that made it, once (the request is then deleted and the identity
//!   recorded, so a second collection is `ALREADY_EXISTS`);
//! - at most [`MAX_PENDING`] wait, [`MAX_PENDING_PER_SOURCE`] per source
//!   address; each expires and is deleted after [`PENDING_TTL`].

use std::net::IpAddr;
use std::time::Duration;

use gwhub_proto::v1;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::api::{DeleteParams, ListParams, PostParams};
use tonic::Status;

use super::issued::{self, Issued};
use super::join::Joiner;
use super::join_csr::{MANUAL_LABEL, WAITING, condition, is_pending, unavailable};
use super::join_limits::source_of;
use gwhub_identity::pki;

/// Unapproved tokenless requests the hub keeps at most (spec).
pub const MAX_PENDING: usize = 64;
/// ... of them from one source address (spec: an eighth would be 8; 4
/// leaves room for 16 addresses, and a real agent needs one).
pub const MAX_PENDING_PER_SOURCE: usize = 4;
/// How long a request waits for an operator before it is deleted (spec):
/// an operator's working session, not a day of squatting.
pub const PENDING_TTL: Duration = Duration::from_secs(3600);
/// Who asked: the source address (exact IPv4, IPv6 /64).
pub const SOURCE_ANNOTATION: &str = "gwhub.io/source-address";
/// The requester's key: `sha256:<hex>` of its SubjectPublicKeyInfo, as the
/// agent logs it.
pub const KEY_ANNOTATION: &str = "gwhub.io/key-sha256";
/// When it was asked (RFC 3339).
pub const REQUESTED_ANNOTATION: &str = "gwhub.io/requested-at";

fn annotation<'a>(csr: &'a CertificateSigningRequest, key: &str) -> Option<&'a str> {
    csr.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// When `csr` was asked (its annotation, else its creation), Unix seconds.
fn requested_at(csr: &CertificateSigningRequest) -> Option<i64> {
    annotation(csr, REQUESTED_ANNOTATION)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map(|t| t.as_second())
        .or_else(|| {
            csr.metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_second())
        })
}

/// Whether `csr` is older than [`PENDING_TTL`] at `now` (Unix seconds).
fn expired(csr: &CertificateSigningRequest, now: i64) -> bool {
    let ttl = i64::try_from(PENDING_TTL.as_secs()).unwrap_or(i64::MAX);
    requested_at(csr).is_some_and(|t| t.saturating_add(ttl) <= now)
}

/// The answer while request `name` waits for an administrator.
fn waiting(name: &str) -> Status {
    Status::failed_precondition(format!("{WAITING}: kubectl certificate approve {name}"))
}

/// `sha256:<hex>`, the fingerprint format of the annotation and the agent.
fn fingerprint(key_hash: &str) -> String {
    format!("sha256:{key_hash}")
}

impl Joiner {
    /// A tokenless join of `req.cluster` from `peer` with the key of hash
    /// `key_hash`, its request `name`.
    pub(super) async fn join_manual(
        &self,
        peer: Option<IpAddr>,
        req: &v1::JoinRequest,
        name: &str,
        key_hash: &str,
    ) -> Result<v1::JoinResponse, Status> {
        let cluster = &req.cluster;
        self.require_profile(cluster, "a join without a token")
            .await?;
        let removed = super::revocations::read(&self.configmaps)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let removed_at = removed.get(cluster.as_str()).copied();
        let identity = issued::read(&self.configmaps)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?
            .remove(cluster.as_str());
        let now = jiff::Timestamp::now().as_second();
        let existing = self
            .csrs
            .get_opt(name)
            .await
            .map_err(|e| unavailable("read the certificate request", e))?;
        self.refuse_standing(
            cluster,
            name,
            existing.as_ref(),
            removed_at,
            identity.as_ref(),
            now,
        )
        .await?;
        let csr = match existing {
            Some(csr) if expired(&csr, now) => {
                self.delete_request(name, "it expired").await;
                None
            }
            other => other,
        };
        let Some(csr) = csr else {
            self.request_approval(peer, cluster, name, &req.csr_pem, key_hash)
                .await?;
            return Err(waiting(name));
        };
        let request = self
            .approved_request(&csr, cluster, name, removed_at, key_hash)
            .await?;
        let ca = self.ca().await?;
        let cert = pki::sign_agent_csr(&ca, &request, cluster, now, self.lifetime)
            .map_err(|e| Status::internal(format!("cannot sign: {e}")))?
            .map_err(|e| {
                Status::invalid_argument(format!("CertificateSigningRequest {name}: {e}"))
            })?;
        self.publish_profile(cluster).await?;
        self.record_issued(cluster, now, true).await?;
        // Once: the approval is used up.
        self.delete_request(name, "its certificate was issued")
            .await;
        tracing::info!(
            cluster,
            csr = name,
            key = fingerprint(key_hash),
            "approved join request signed"
        );
        Ok(v1::JoinResponse {
            certificate_pem: cert,
            ca_pem: ca.cert_pem,
        })
    }

    /// Refuses a join the cluster's standing rules out: request `name`
    /// (`existing`) is not a join request of `cluster`, the cluster was
    /// removed and not joined again since with a token, or it holds a live
    /// identity. A request it voids is deleted.
    async fn refuse_standing(
        &self,
        cluster: &str,
        name: &str,
        existing: Option<&CertificateSigningRequest>,
        removed_at: Option<i64>,
        identity: Option<&Issued>,
        now: i64,
    ) -> Result<(), Status> {
        let ours = |csr: &CertificateSigningRequest| {
            csr.spec.signer_name == super::join_csr::SIGNER
                && csr.metadata.labels.as_ref().is_some_and(|l| {
                    l.get("gwhub.io/cluster") == Some(&super::join_csr::cluster_label(cluster))
                })
        };
        if let Some(csr) = existing
            && !ours(csr)
        {
            return Err(Status::permission_denied(format!(
                "CertificateSigningRequest {name} is not a gwhub join request of cluster {cluster:?}"
            )));
        }
        // Removed, and not joined again since with a token: void.
        if let Some(at) = removed_at
            && identity.is_none_or(|i| i.issued <= at)
        {
            if existing.is_some() {
                self.delete_request(name, "its cluster was removed").await;
            }
            let at = jiff::Timestamp::from_second(at).unwrap_or_default();
            return Err(Status::permission_denied(format!(
                "cluster {cluster:?} was removed at {at}: joining it again needs a new token \
                 (gwhubctl join create {cluster})"
            )));
        }
        if let Some(i) = identity.filter(|i| i.live(now, removed_at)) {
            if existing.is_some() {
                self.delete_request(name, "its cluster holds an identity")
                    .await;
            }
            let until = jiff::Timestamp::from_second(i.not_after).unwrap_or_default();
            return Err(Status::already_exists(format!(
                "cluster {cluster:?} already holds an identity (valid until {until}): its agent \
                 renews it over its connection (Ingest/Renew); to replace it, remove the cluster \
                 (gwhubctl cluster remove {cluster}) and join with a new token \
                 (gwhubctl join create {cluster})"
            )));
        }
        Ok(())
    }

    /// The request (PEM) of `csr` once an administrator approved it for
    /// this caller's key; refused (and deleted) when it was made before the
    /// cluster's removal or was denied, still waiting when not approved.
    async fn approved_request(
        &self,
        csr: &CertificateSigningRequest,
        cluster: &str,
        name: &str,
        removed_at: Option<i64>,
        key_hash: &str,
    ) -> Result<String, Status> {
        // Asked before a removal (approved or not): void.
        if removed_at.is_some_and(|at| requested_at(csr).is_none_or(|t| t <= at)) {
            self.delete_request(name, "its cluster was removed").await;
            return Err(Status::permission_denied(format!(
                "CertificateSigningRequest {name} was made before cluster {cluster:?} was \
                 removed: joining it again needs a new token (gwhubctl join create {cluster})"
            )));
        }
        for refused in ["Denied", "Failed"] {
            if let Some(c) = condition(csr, refused) {
                self.delete_request(name, "it was refused").await;
                return Err(Status::permission_denied(format!(
                    "CertificateSigningRequest {name} was {}{}; it is deleted, a new request \
                     asks again",
                    refused.to_lowercase(),
                    c.message.map(|m| format!(" ({m})")).unwrap_or_default()
                )));
            }
        }
        if condition(csr, "Approved").is_none() {
            return Err(waiting(name));
        }
        // The approval is for the key that made the request: the recorded
        // request is what is signed, and it must be this caller's key (the
        // name holds only 64 bits of its hash).
        let request = String::from_utf8_lossy(&csr.spec.request.0).into_owned();
        if pki::agent_csr_key_hash(&request, cluster).ok().as_deref() != Some(key_hash) {
            return Err(Status::permission_denied(format!(
                "CertificateSigningRequest {name} was made with another key"
            )));
        }
        Ok(request)
    }

    /// Deletes the request `name` (best effort: logged; the identity
    /// record and the removal already void it).
    async fn delete_request(&self, name: &str, why: &str) {
        match self.csrs.delete(name, &DeleteParams::default()).await {
            Ok(_) => tracing::info!(csr = name, why, "join request deleted"),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => tracing::warn!(csr = name, why, error = %e, "cannot delete join request"),
        }
    }

    /// Records the unapproved request `name` of `cluster` from `peer`,
    /// unless too many wait in all or from that address. Expired requests
    /// are deleted on the way. One at a time per replica (the count and
    /// the create are one step).
    async fn request_approval(
        &self,
        peer: Option<IpAddr>,
        cluster: &str,
        name: &str,
        csr: &str,
        key_hash: &str,
    ) -> Result<(), Status> {
        let _one = self.manual.lock().await;
        let now = jiff::Timestamp::now();
        let lp = ListParams::default().labels(&format!("{MANUAL_LABEL}=manual"));
        let all = self
            .csrs
            .list(&lp)
            .await
            .map_err(|e| unavailable("list the certificate requests", e))?
            .items;
        let mut pending = Vec::new();
        for c in all {
            if expired(&c, now.as_second()) {
                if let Some(n) = c.metadata.name.as_deref() {
                    self.delete_request(n, "it expired").await;
                }
            } else if is_pending(&c) {
                pending.push(c);
            }
        }
        if pending.len() >= MAX_PENDING {
            return Err(Status::resource_exhausted(format!(
                "{} join requests already wait for approval (at most {MAX_PENDING}); \
                 approve, deny or delete some (kubectl get csr -l {MANUAL_LABEL}=manual), \
                 or join with a token",
                pending.len()
            )));
        }
        let source = peer.map(source_of);
        if let Some(source) = &source {
            let mine = pending
                .iter()
                .filter(|c| annotation(c, SOURCE_ANNOTATION) == Some(source.as_str()))
                .count();
            if mine >= MAX_PENDING_PER_SOURCE {
                return Err(Status::resource_exhausted(format!(
                    "{mine} join requests from {source} already wait for approval (at most \
                     {MAX_PENDING_PER_SOURCE} per address); join with a token"
                )));
            }
        }
        let mut object = self.csr_object(cluster, name, csr);
        if let Some(labels) = object.metadata.labels.as_mut() {
            labels.insert(MANUAL_LABEL.to_owned(), "manual".to_owned());
        }
        let mut annotations = std::collections::BTreeMap::from([
            (KEY_ANNOTATION.to_owned(), fingerprint(key_hash)),
            (REQUESTED_ANNOTATION.to_owned(), now.to_string()),
        ]);
        if let Some(source) = source {
            annotations.insert(SOURCE_ANNOTATION.to_owned(), source);
        }
        object.metadata.annotations = Some(annotations);
        match self.csrs.create(&PostParams::default(), &object).await {
            Ok(_) => {
                tracing::info!(
                    cluster,
                    csr = name,
                    key = fingerprint(key_hash),
                    "join request waits for approval"
                );
                Ok(())
            }
            // A concurrent retry (another replica) made it.
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(unavailable("record the certificate request", e)),
        }
    }

    /// Records that `cluster` was issued a certificate at `now` (Unix
    /// seconds) for the hub's lifetime; `member`: the cluster has its
    /// ClusterProfile, so the identity is the inventory's (a cluster
    /// outside it, renewed in observe mode, is not: it never had a
    /// ClusterProfile whose deletion a restarted hub must catch up on).
    pub(super) async fn record_issued(
        &self,
        cluster: &str,
        now: i64,
        member: bool,
    ) -> Result<(), Status> {
        let lifetime = i64::try_from(self.lifetime.as_secs()).unwrap_or(i64::MAX);
        let entry = Issued {
            issued: now,
            not_after: now.saturating_add(lifetime),
            inventory: self
                .profiles
                .as_ref()
                .filter(|_| member)
                .map(|(_, ns)| ns.clone()),
        };
        issued::record(&self.configmaps, cluster, &entry)
            .await
            .map_err(|e| {
                tracing::warn!(cluster, error = %e, "join: cannot record the identity");
                Status::unavailable("the hub cannot record the identity now; retry later")
            })
    }
}

/// How often the leader sweeps the tokenless requests (also once when it
/// starts leading): a fifth of [`PENDING_TTL`], so none outlives it by
/// more than 12 minutes even when nobody asks.
const SWEEP_EVERY: Duration = Duration::from_secs(720);

/// While this replica leads, deletes the tokenless requests that are
/// expired, denied or failed, or made before their cluster's removal
/// (void), every [`SWEEP_EVERY`], until `shutdown`.
pub(crate) async fn sweep(
    csrs: kube::Api<CertificateSigningRequest>,
    configmaps: kube::Api<k8s_openapi::api::core::v1::ConfigMap>,
    mut leader: tokio::sync::watch::Receiver<bool>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            led = leader.wait_for(|l| *l) => if led.is_err() { return },
        }
        if let Err(e) = sweep_once(&csrs, &configmaps).await {
            tracing::warn!(error = %e, "cannot sweep the join requests; retrying later");
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(SWEEP_EVERY) => {}
        }
    }
}

/// What stops a sweep.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SweepError {
    #[error("cannot list the join requests: {0}")]
    List(kube::Error),
    #[error(transparent)]
    Removed(#[from] super::revocations::RevocationsError),
}

async fn sweep_once(
    csrs: &kube::Api<CertificateSigningRequest>,
    configmaps: &kube::Api<k8s_openapi::api::core::v1::ConfigMap>,
) -> Result<(), SweepError> {
    let removed = super::revocations::read(configmaps).await?;
    let lp = ListParams::default().labels(&format!("{MANUAL_LABEL}=manual"));
    let now = jiff::Timestamp::now().as_second();
    for csr in csrs.list(&lp).await.map_err(SweepError::List)?.items {
        let Some(name) = csr.metadata.name.as_deref() else {
            continue;
        };
        let cluster = csr
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("gwhub.io/cluster"));
        // Labels of long names are hashed: compared the same way.
        let void = removed.iter().any(|(c, at)| {
            cluster == Some(&super::join_csr::cluster_label(c))
                && requested_at(&csr).is_none_or(|t| t <= *at)
        });
        let why = if expired(&csr, now) {
            "it expired"
        } else if condition(&csr, "Denied").is_some() || condition(&csr, "Failed").is_some() {
            "it was refused"
        } else if void {
            "its cluster was removed"
        } else {
            continue;
        };
        match csrs.delete(name, &DeleteParams::default()).await {
            Ok(_) => tracing::info!(csr = name, why, "join request deleted"),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => tracing::warn!(csr = name, why, error = %e, "cannot delete join request"),
        }
    }
    Ok(())
}
