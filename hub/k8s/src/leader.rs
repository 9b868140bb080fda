//! Leader election with a `coordination.k8s.io/v1` Lease, so two hub
//! replicas never both write hub Gateway status. Every change of the Lease
//! is a replace guarded by its resourceVersion, so two candidates cannot
//! both win. Expiry is judged by this replica's own clock from when it last
//! saw the Lease change (as client-go does), so clock skew between replicas
//! does not matter. A leader that cannot renew steps down before its Lease
//! could expire for others.

use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::metrics::Metrics;

/// The Lease's timing and who this replica is.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    pub name: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_every: Duration,
}

impl LeaseConfig {
    /// Lease `gwhub-hub`, 15s, renewed every 5s; identity from the pod name
    /// (`POD_NAME`, else `HOSTNAME`) plus the process id.
    pub fn new(identity: String) -> Self {
        LeaseConfig {
            name: "gwhub-hub".to_owned(),
            identity,
            lease_duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
        }
    }

    /// Sets the Lease duration (`--lease-duration`); renewals come every
    /// third of it, so two can fail before the Lease is lost.
    pub fn set_duration(&mut self, lease_duration: Duration) {
        self.lease_duration = lease_duration;
        self.renew_every = lease_duration / 3;
    }
}

/// `POD_NAME` or `HOSTNAME` (else "gwhub") plus the process id.
pub fn default_identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "gwhub".to_owned());
    format!("{host}_{}", std::process::id())
}

fn now() -> MicroTime {
    MicroTime(Timestamp::now())
}

/// What this replica last saw of someone else's Lease.
struct Observed {
    resource_version: Option<String>,
    at: Instant,
}

/// Campaigns and renews until `shutdown`, publishing leadership on
/// `leader`; releases the Lease on the way out so a successor need not wait.
pub async fn run(
    api: Api<Lease>,
    config: LeaseConfig,
    leader: watch::Sender<bool>,
    metrics: std::sync::Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let mut observed = LeaseWatch::default();
    let mut last_renew: Option<Instant> = None;
    // Step down well before others may take over.
    let step_down_after = config.lease_duration * 2 / 3;
    loop {
        // A request that hangs must not keep this replica leading past the
        // step-down point (the client has no read timeout of its own).
        // The renewal counts from when it was sent, not answered: others
        // count the Lease's duration from when they see it change, which
        // is later (a slow answer must not stretch this replica's term).
        let sent = Instant::now();
        let attempt = tokio::time::timeout(
            config.renew_every,
            try_acquire_or_renew(&api, &config, &mut observed),
        );
        let held = tokio::select! {
            _ = shutdown.cancelled() => break,
            r = attempt => match r {
                Ok(Ok(held)) => held,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, lease = %config.name, "lease request failed");
                    false
                }
                Err(_) => {
                    tracing::warn!(lease = %config.name, timeout = ?config.renew_every, "lease request timed out");
                    false
                }
            },
        };
        if held {
            last_renew = Some(sent);
        }
        let leading = last_renew.is_some_and(|t| t.elapsed() < step_down_after);
        if leading != *leader.borrow() {
            if leading {
                Metrics::bump(&metrics.leader_transitions);
                tracing::info!(identity = %config.identity, lease = %config.name, "became leader: writing hub Gateway status");
            } else {
                tracing::info!(identity = %config.identity, lease = %config.name, "not leader: passive (ingest and Dashboard only)");
            }
            leader.send_replace(leading);
            metrics.leader.set(u64::from(leading));
        }
        let wait = if leading {
            config.renew_every
        } else {
            // Candidates poll a bit faster than the renew period.
            config.renew_every.min(Duration::from_secs(2))
        };
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(wait) => {}
        }
    }
    if *leader.borrow() {
        leader.send_replace(false);
        metrics.leader.set(0);
        if let Err(e) = release(&api, &config.name, &config.identity).await {
            tracing::debug!(error = %e, "could not release the lease");
        }
    }
}

async fn try_acquire_or_renew(
    api: &Api<Lease>,
    config: &LeaseConfig,
    observed: &mut LeaseWatch,
) -> kube::Result<bool> {
    let seen = observed
        .look(api, &config.name, &config.identity, config.lease_duration)
        .await?;
    let held = take(
        api,
        &config.name,
        &config.identity,
        config.lease_duration,
        seen,
    )
    .await?;
    if held {
        observed.taken();
    }
    Ok(held)
}

/// One Lease as this replica last judged it: the one home of Lease
/// acquire, renew and release, for the leader Lease and the status shard
/// Leases (`super::shards`).
pub(crate) enum Seen {
    /// No such Lease yet.
    Absent,
    /// Released, or expired by this replica's clock: free to take.
    Free(Lease),
    /// Held by this replica (as of this read).
    Mine(Lease),
    /// Held by that other replica and not expired.
    Held(String),
}

/// What this replica saw of one Lease over time, so expiry is judged by
/// its own clock from when the Lease last changed.
#[derive(Default)]
pub(crate) struct LeaseWatch {
    observed: Option<Observed>,
}

impl LeaseWatch {
    /// Reads Lease `name` and judges who holds it.
    pub(crate) async fn look(
        &mut self,
        api: &Api<Lease>,
        name: &str,
        identity: &str,
        default_duration: Duration,
    ) -> kube::Result<Seen> {
        let Some(mut lease) = api.get_opt(name).await? else {
            return Ok(Seen::Absent);
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        let holder = spec.holder_identity.clone().unwrap_or_default();
        if holder == identity {
            return Ok(Seen::Mine(lease));
        }
        let rv = lease.metadata.resource_version.clone();
        let duration = spec
            .lease_duration_seconds
            .map(|s| Duration::from_secs(u64::try_from(s).unwrap_or(0)))
            .unwrap_or(default_duration);
        let changed = self
            .observed
            .as_ref()
            .is_none_or(|o| o.resource_version != rv);
        if changed {
            self.observed = Some(Observed {
                resource_version: rv,
                at: Instant::now(),
            });
        }
        let expired = holder.is_empty()
            || self
                .observed
                .as_ref()
                .is_some_and(|o| o.at.elapsed() >= duration);
        Ok(if expired {
            Seen::Free(lease)
        } else {
            Seen::Held(holder)
        })
    }

    /// This replica wrote the Lease: what it saw of others is over.
    pub(crate) fn taken(&mut self) {
        self.observed = None;
    }
}

/// Takes (creates, or replaces a free one) or renews Lease `name` as
/// [`LeaseWatch::look`] saw it; whether this replica holds it now. Every
/// replace carries the resourceVersion read, so a concurrent change wins
/// and two replicas cannot both take it.
pub(crate) async fn take(
    api: &Api<Lease>,
    name: &str,
    identity: &str,
    lease_duration: Duration,
    seen: Seen,
) -> kube::Result<bool> {
    let secs = i32::try_from(lease_duration.as_secs()).unwrap_or(i32::MAX);
    let mut lease = match seen {
        Seen::Held(_) => return Ok(false),
        Seen::Absent => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.to_owned()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(identity.to_owned()),
                    lease_duration_seconds: Some(secs),
                    acquire_time: Some(now()),
                    renew_time: Some(now()),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        }
        Seen::Free(mut lease) => {
            let spec = lease.spec.get_or_insert_with(Default::default);
            spec.holder_identity = Some(identity.to_owned());
            spec.acquire_time = Some(now());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            lease
        }
        Seen::Mine(lease) => lease,
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    spec.lease_duration_seconds = Some(secs);
    spec.renew_time = Some(now());
    // Carries the resourceVersion read: a concurrent change wins.
    match api.replace(name, &PostParams::default(), &lease).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Gives Lease `name` up if this replica holds it, so a successor need
/// not wait for it to expire.
pub(crate) async fn release(api: &Api<Lease>, name: &str, identity: &str) -> kube::Result<()> {
    let Some(mut lease) = api.get_opt(name).await? else {
        return Ok(());
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    if spec.holder_identity.as_deref() != Some(identity) {
        return Ok(());
    }
    spec.holder_identity = None;
    spec.renew_time = Some(now());
    api.replace(name, &PostParams::default(), &lease)
        .await
        .map(|_| ())
}
