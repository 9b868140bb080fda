//! The hub's TLS material kept in Secrets on the management cluster (spec
//! section 7): the signing CA in `gwhub-ca`, the serving certificate in
//! `gwhub-serving` (both `kubernetes.io/tls`, in the hub's namespace).
//!
//! At start-up any replica creates an absent Secret (a create is atomic:
//! of replicas racing, one wins and the others read its Secret); after
//! that only the leader writes, renewing the serving certificate at 2/3 of
//! its lifetime or re-creating a deleted one. Only Secrets marked
//! `gwhub.io/managed-by: gwhub` are ever written: one an operator supplied
//! (cert-manager, a corporate CA) is only read. Every replica watches both
//! Secrets and hands their content to the TLS reload machinery
//! ([`gwhub_identity::reload`]) as a followed source, so new handshakes use a
//! replaced certificate within seconds, with no restart.
//!
//! What the hub made, it repairs. A corrupt or half-written
//! `gwhub-serving` is re-issued. Every replica keeps the last usable
//! hub-made CA it read in memory: when `gwhub-ca` turns corrupt, the
//! leader writes that CA back, byte for byte, and no agent notices. A
//! replica that starts on a corrupt `gwhub-ca` waits
//! [`SecretsConfig::ca_repair_grace`] (at least [`CA_REPAIR_GRACE`], and
//! longer than a lease, so a running replica can take over the lead from
//! the restarted one) for a running leader to do so; when none does,
//! nobody holds the CA any
//! more: it copies the corrupt Secret to `gwhub-ca-corrupt-<unix time>`,
//! issues a new CA (every agent must join again), logs that as an ERROR
//! and records a Warning Event on `gwhub-ca`. An operator's CA is never
//! replaced.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::KubeError;
use gwhub_identity::pki::{self, Pair};
use gwhub_identity::reload::Followed;
use gwhub_identity::tls::{HubTls, TlsPaths};

/// The hub's signing CA.
pub const CA_SECRET: &str = "gwhub-ca";
/// The hub's serving certificate (its chain ends with the CA).
pub const SERVING_SECRET: &str = "gwhub-serving";
/// The mark on Secrets the hub made (and may therefore replace).
pub const MANAGED_BY: &str = "gwhub.io/managed-by";
const TLS_CRT: &str = "tls.crt";
const TLS_KEY: &str = "tls.key";
const CA_CRT: &str = "ca.crt";
/// The label on the copy of a corrupt `gwhub-ca` the hub replaced.
pub const CORRUPT_COPY_OF: &str = "gwhub.io/corrupt-copy-of";
/// How long a starting replica waits at least for a running leader to
/// write back a corrupt hub-made `gwhub-ca` before it issues a new CA.
pub const CA_REPAIR_GRACE: Duration = Duration::from_secs(10);
/// The reason of the Event recorded when a corrupt `gwhub-ca` is replaced.
pub const CA_REISSUED: &str = "CAReissued";

/// How the hub makes its certificates.
#[derive(Clone, Debug)]
pub struct SecretsConfig {
    /// The serving certificate's SANs (`--hub-san`).
    pub sans: Vec<String>,
    pub serving_lifetime: Duration,
    pub ca_lifetime: Duration,
    /// Lifetime of the agent certificates signed at Join.
    pub agent_lifetime: Duration,
    /// How long a starting replica waits for a running leader to write
    /// back a corrupt hub-made CA ([`CA_REPAIR_GRACE`], or longer with
    /// leader election: see [`crate::Connected::tls_from_secrets`]).
    pub ca_repair_grace: Duration,
}

impl SecretsConfig {
    /// The defaults for a hub in `namespace`: the Service's DNS names.
    pub fn new(namespace: &str) -> Self {
        SecretsConfig {
            sans: pki::default_sans(namespace),
            serving_lifetime: pki::SERVING_LIFETIME,
            ca_lifetime: pki::CA_LIFETIME,
            agent_lifetime: pki::AGENT_CERT_LIFETIME,
            ca_repair_grace: CA_REPAIR_GRACE,
        }
    }

    /// How often the leader looks at the serving certificate.
    fn check_every(&self) -> Duration {
        (self.serving_lifetime / 20).clamp(Duration::from_secs(1), Duration::from_secs(60))
    }
}

/// What goes wrong making, reading or renewing the hub's TLS Secrets;
/// each names the Secret and the problem.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    #[error("Secret {CA_SECRET} has no {key}: the hub cannot sign its serving certificate")]
    CaKeyMissing { key: &'static str },
    #[error("Secret {namespace}/{name} has no {key}")]
    KeyMissing {
        namespace: String,
        name: String,
        key: &'static str,
    },
    #[error("cannot {verb} Secret {namespace}/{name}: {error}")]
    Api {
        verb: &'static str,
        namespace: String,
        name: String,
        error: Box<kube::Error>,
    },
    #[error("cannot read the hub's Secrets: {0}")]
    Read(Box<kube::Error>),
    #[error("cannot {verb} Secret {SERVING_SECRET}: {error}")]
    Write {
        verb: &'static str,
        error: Box<kube::Error>,
    },
    #[error("{0}")]
    Pki(gwhub_identity::pki::PkiError),
    #[error("{0}")]
    Tls(gwhub_identity::tls::TlsError),
}

type Fallible<T> = Result<T, SecretsError>;

fn managed(s: &Secret) -> bool {
    s.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(MANAGED_BY))
        .is_some_and(|v| v == super::FIELD_MANAGER)
}

/// Whether `s` holds a usable serving pair; `Err` says why not.
fn serving_pair(s: &Secret) -> Result<(), gwhub_identity::tls::TlsError> {
    let missing = |key| gwhub_identity::tls::TlsError::invalid(key, "missing or empty");
    let crt = key_of(s, TLS_CRT).ok_or_else(|| missing(TLS_CRT))?;
    let key = key_of(s, TLS_KEY).ok_or_else(|| missing(TLS_KEY))?;
    gwhub_identity::pki::check_serving_pair(&crt, &key).map_err(Into::into)
}

fn key_of(s: &Secret, key: &str) -> Option<Arc<[u8]>> {
    s.data
        .as_ref()
        .and_then(|d| d.get(key))
        .filter(|b| !b.0.is_empty())
        .map(|b| Arc::from(b.0.as_slice()))
}

fn new_secret(name: &str, data: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            annotations: Some(BTreeMap::from([(
                MANAGED_BY.to_owned(),
                super::FIELD_MANAGER.to_owned(),
            )])),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/name".to_owned(),
                "gwhub".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Secret::default()
    }
}

/// `ca`'s pair when it can sign (see [`pki::check_ca`]).
fn usable_ca(ca: &Secret) -> Fallible<Pair> {
    let pair = ca_pair(ca)?;
    pki::check_ca(&pair).map_err(SecretsError::Pki)?;
    Ok(pair)
}

fn ca_pair(ca: &Secret) -> Fallible<Pair> {
    let text = |key| {
        key_of(ca, key)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .ok_or(SecretsError::CaKeyMissing { key })
    };
    Ok(Pair {
        cert_pem: text(TLS_CRT)?,
        key_pem: text(TLS_KEY)?,
    })
}

fn serving_secret(ca: &Pair, config: &SecretsConfig) -> Fallible<Secret> {
    let now = jiff::Timestamp::now().as_second();
    let serving = pki::new_serving(ca, &config.sans, now, config.serving_lifetime)
        .map_err(SecretsError::Pki)?;
    Ok(new_secret(
        SERVING_SECRET,
        &[
            (TLS_CRT, &serving.cert_pem),
            (TLS_KEY, &serving.key_pem),
            (CA_CRT, &ca.cert_pem),
        ],
    ))
}

/// `name`, created from `make` when absent (another replica's create
/// winning the race is read back).
async fn get_or_create(
    api: &Api<Secret>,
    name: &str,
    make: impl FnOnce() -> Fallible<Secret>,
) -> Fallible<Secret> {
    let api_err = |verb: &'static str, error: kube::Error| SecretsError::Api {
        verb,
        namespace: api.namespace().unwrap_or_default().to_owned(),
        name: name.to_owned(),
        error: Box::new(error),
    };
    if let Some(s) = api.get_opt(name).await.map_err(|e| api_err("read", e))? {
        return Ok(s);
    }
    match api.create(&PostParams::default(), &make()?).await {
        Ok(s) => {
            tracing::info!(secret = name, "created the hub's Secret");
            Ok(s)
        }
        Err(kube::Error::Api(e)) if e.code == 409 => {
            api.get(name).await.map_err(|e| api_err("read", e))
        }
        Err(e) => Err(api_err("create", e)),
    }
}

/// The current content of the three pieces, followed.
struct Slots {
    serving_cert: watch::Sender<Arc<[u8]>>,
    serving_key: watch::Sender<Arc<[u8]>>,
    ca_cert: watch::Sender<Arc<[u8]>>,
    /// The last usable hub-made CA read: what the leader writes back.
    ca: parking_lot::Mutex<Option<Pair>>,
    /// Told when `gwhub-ca` turned corrupt: the leader looks at once.
    repair: tokio::sync::Notify,
}

/// Follows the Secrets (every replica) and renews the serving certificate
/// (the leader); started by `gwhub_hub::kube_hub`.
pub struct Follower {
    api: Api<Secret>,
    config: SecretsConfig,
    slots: Arc<Slots>,
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follower")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Makes the absent Secrets, reads both and returns the hub's TLS over
/// them (`paths`: an operator's extra `--client-ca` and the Dashboard's
/// flags) with what keeps them current.
pub async fn start(
    api: Api<Secret>,
    config: SecretsConfig,
    paths: &TlsPaths<'_>,
) -> Result<(HubTls, Follower), KubeError> {
    start_inner(api, config, paths)
        .await
        .map_err(KubeError::TlsSecrets)
}

async fn start_inner(
    api: Api<Secret>,
    config: SecretsConfig,
    paths: &TlsPaths<'_>,
) -> Fallible<(HubTls, Follower)> {
    let ca_lifetime = config.ca_lifetime;
    let ca = get_or_create(&api, CA_SECRET, || {
        let ca = pki::new_ca(jiff::Timestamp::now().as_second(), ca_lifetime)
            .map_err(SecretsError::Pki)?;
        Ok(new_secret(
            CA_SECRET,
            &[(TLS_CRT, &ca.cert_pem), (TLS_KEY, &ca.key_pem)],
        ))
    })
    .await?;
    let (ca, reissued) = match usable_ca(&ca) {
        Err(e) if managed(&ca) => recover_ca(&api, ca, &config, e).await?,
        _ => (ca, false),
    };
    let mut serving = get_or_create(&api, SERVING_SECRET, || {
        serving_secret(&ca_pair(&ca)?, &config)
    })
    .await?;
    // A new CA: the serving certificate the old one signed goes too.
    if reissued && managed(&serving) {
        let mut next = serving_secret(&ca_pair(&ca)?, &config)?;
        next.metadata.resource_version = serving.metadata.resource_version.clone();
        match api
            .replace(SERVING_SECRET, &PostParams::default(), &next)
            .await
        {
            Ok(s) => serving = s,
            Err(e) => {
                tracing::warn!(error = %e, "cannot re-issue Secret {SERVING_SECRET} for the new CA; serving one from memory");
                serving = next;
            }
        }
    }
    // A hub-made serving Secret found corrupt or half-written (before:
    // the hub exited, a crash loop): serve a fresh certificate from memory
    // and let the leader re-issue the Secret ([`renew_once`]); the follow
    // keeps the corrupt content out until then. An operator's is only
    // read: its error stops the start and says why.
    if managed(&serving)
        && let Err(e) = serving_pair(&serving)
    {
        tracing::warn!(
            error = %e,
            "Secret {SERVING_SECRET} (made by the hub) is corrupt; serving a new certificate \
             until the leader re-issues it"
        );
        serving = serving_secret(&ca_pair(&ca)?, &config)?;
    }
    let ns = api.namespace().unwrap_or_default().to_owned();
    let need = |s: &Secret, name: &str, key: &'static str| {
        key_of(s, key).ok_or_else(|| SecretsError::KeyMissing {
            namespace: ns.clone(),
            name: name.to_owned(),
            key,
        })
    };
    let slots = Arc::new(Slots {
        serving_cert: watch::Sender::new(need(&serving, SERVING_SECRET, TLS_CRT)?),
        serving_key: watch::Sender::new(need(&serving, SERVING_SECRET, TLS_KEY)?),
        ca_cert: watch::Sender::new(need(&ca, CA_SECRET, TLS_CRT)?),
        ca: parking_lot::Mutex::new(usable_ca(&ca).ok().filter(|_| managed(&ca))),
        repair: tokio::sync::Notify::new(),
    });
    let followed = |name: &str, key: &str, slot: &watch::Sender<Arc<[u8]>>| Followed {
        name: format!("Secret {ns}/{name} {key}"),
        current: slot.subscribe(),
    };
    let tls = HubTls::followed(
        followed(SERVING_SECRET, TLS_CRT, &slots.serving_cert),
        followed(SERVING_SECRET, TLS_KEY, &slots.serving_key),
        followed(CA_SECRET, TLS_CRT, &slots.ca_cert),
        paths,
    )
    .map_err(SecretsError::Tls)?;
    tracing::info!(
        namespace = %ns,
        serving_managed = managed(&serving),
        ca_managed = managed(&ca),
        "serving with the certificate in Secret {SERVING_SECRET}; agents' CA from Secret {CA_SECRET}"
    );
    Ok((tls, Follower { api, config, slots }))
}

impl Follower {
    /// Spawns the watches and the leader's renewal onto `tasks`.
    pub fn spawn(
        self,
        tasks: &mut JoinSet<()>,
        leader: watch::Receiver<bool>,
        shutdown: CancellationToken,
    ) {
        for name in [CA_SECRET, SERVING_SECRET] {
            tasks.spawn(follow(
                self.api.clone(),
                name,
                self.slots.clone(),
                shutdown.clone(),
            ));
        }
        tasks.spawn(renew(self.api, self.config, self.slots, leader, shutdown));
    }
}

/// Copies `name`'s content into the slots whenever it changes.
async fn follow(
    api: Api<Secret>,
    name: &'static str,
    slots: Arc<Slots>,
    shutdown: CancellationToken,
) {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = std::pin::pin!(watcher::watcher(api, config).default_backoff());
    loop {
        let event = tokio::select! {
            _ = shutdown.cancelled() => return,
            e = events.next() => e,
        };
        let secret = match event {
            None => return,
            Some(Ok(Event::Apply(s) | Event::InitApply(s))) => s,
            Some(Ok(Event::Delete(_))) => {
                tracing::warn!(
                    secret = name,
                    "the hub's Secret was deleted; keeping the material in use"
                );
                continue;
            }
            Some(Ok(_)) => continue,
            Some(Err(e)) => {
                tracing::warn!(secret = name, error = %e, "watching the hub's Secret failed; retrying");
                continue;
            }
        };
        let set = |slot: &watch::Sender<Arc<[u8]>>, key: &str| match key_of(&secret, key) {
            Some(b) => {
                slot.send_if_modified(|cur| {
                    let changed = **cur != *b;
                    if changed {
                        *cur = b.clone();
                    }
                    changed
                });
            }
            None => tracing::warn!(
                secret = name,
                key,
                "the hub's Secret lacks a key; keeping the material in use"
            ),
        };
        if name == CA_SECRET && managed(&secret) {
            // The hub's own: a usable one is kept in memory as well; a
            // corrupt one is kept out and the leader writes back the last.
            match usable_ca(&secret) {
                Ok(pair) => {
                    *slots.ca.lock() = Some(pair);
                    set(&slots.ca_cert, TLS_CRT);
                }
                Err(e) => {
                    tracing::warn!(
                        error = %e,
                        "Secret {CA_SECRET} (made by the hub) is corrupt or half-written; \
                         keeping the CA in use, the leader writes it back"
                    );
                    slots.repair.notify_one();
                }
            }
        } else if name == CA_SECRET {
            // An operator's: only read (the reload reports a bad one).
            set(&slots.ca_cert, TLS_CRT);
        } else {
            // Certificate and key change together: set both before the
            // reload compares them (a mismatch would be refused and kept
            // out until both are in).
            set(&slots.serving_key, TLS_KEY);
            set(&slots.serving_cert, TLS_CRT);
        }
    }
}

/// The leader writes back a corrupt hub-made CA, renews a hub-made serving
/// certificate at 2/3 of its lifetime and re-creates a deleted one.
async fn renew(
    api: Api<Secret>,
    config: SecretsConfig,
    slots: Arc<Slots>,
    mut leader: watch::Receiver<bool>,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(config.check_every());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
            _ = slots.repair.notified() => {}
            r = leader.changed() => if r.is_err() { return },
        }
        if !*leader.borrow() {
            continue;
        }
        if let Err(e) = renew_once(&api, &config, &slots).await {
            tracing::warn!(error = %e, "cannot renew the hub's serving certificate; retrying");
        }
    }
}

/// A starting replica found its own `gwhub-ca` corrupt (`why`). A running
/// leader writes it back from memory within the grace; when none
/// does, the corrupt Secret is copied aside and a new CA replaces it. The
/// CA Secret to use is returned, and whether it is a new CA.
async fn recover_ca(
    api: &Api<Secret>,
    mut ca: Secret,
    config: &SecretsConfig,
    why: SecretsError,
) -> Fallible<(Secret, bool)> {
    let ns = api.namespace().unwrap_or_default().to_owned();
    let api_err = |verb: &'static str, name: &str, error: kube::Error| SecretsError::Api {
        verb,
        namespace: ns.clone(),
        name: name.to_owned(),
        error: Box::new(error),
    };
    tracing::warn!(
        error = %why,
        grace_s = config.ca_repair_grace.as_secs(),
        "Secret {CA_SECRET} (made by the hub) is corrupt; waiting for a running replica to write it back"
    );
    let deadline = tokio::time::Instant::now() + config.ca_repair_grace;
    loop {
        if usable_ca(&ca).is_ok() || !managed(&ca) {
            return Ok((ca, false));
        }
        if tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        ca = api
            .get(CA_SECRET)
            .await
            .map_err(|e| api_err("read", CA_SECRET, e))?;
    }
    // Nobody holds it: keep the corrupt bytes for the operator first.
    let now = jiff::Timestamp::now().as_second();
    let copy = format!("{CA_SECRET}-corrupt-{now}");
    let kept = Secret {
        metadata: ObjectMeta {
            name: Some(copy.clone()),
            labels: Some(BTreeMap::from([
                ("app.kubernetes.io/name".to_owned(), "gwhub".to_owned()),
                (CORRUPT_COPY_OF.to_owned(), CA_SECRET.to_owned()),
            ])),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".to_owned()),
        data: ca.data.clone(),
        ..Secret::default()
    };
    api.create(&PostParams::default(), &kept)
        .await
        .map_err(|e| api_err("create", &copy, e))?;
    let pair = pki::new_ca(now, config.ca_lifetime).map_err(SecretsError::Pki)?;
    let mut next = new_secret(
        CA_SECRET,
        &[(TLS_CRT, &pair.cert_pem), (TLS_KEY, &pair.key_pem)],
    );
    next.metadata.resource_version = ca.metadata.resource_version.clone();
    match api.replace(CA_SECRET, &PostParams::default(), &next).await {
        Ok(s) => {
            tracing::error!(
                copy = %copy,
                "Secret {CA_SECRET} (made by the hub) was corrupt and no running replica held the CA: \
                 issued a new CA. EVERY AGENT MUST JOIN AGAIN (its certificate is from the old CA). \
                 The corrupt Secret is kept as {copy}"
            );
            record_reissue(api, &s, &copy).await;
            Ok((s, true))
        }
        // Another replica wrote it meanwhile: use what it wrote.
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let s = api
                .get(CA_SECRET)
                .await
                .map_err(|e| api_err("read", CA_SECRET, e))?;
            usable_ca(&s)?;
            Ok((s, false))
        }
        Err(e) => Err(api_err("update", CA_SECRET, e)),
    }
}

/// A Warning Event on `gwhub-ca`: a new CA, agents must join again.
async fn record_reissue(api: &Api<Secret>, ca: &Secret, copy: &str) {
    use kube::Resource;
    use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
    let reporter = Reporter {
        controller: super::FIELD_MANAGER.into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    let recorder = Recorder::new(api.clone().into_client(), reporter);
    let event = KubeEvent {
        type_: EventType::Warning,
        reason: CA_REISSUED.into(),
        note: Some(format!(
            "Secret {CA_SECRET} was corrupt and no running replica held the CA: a new CA was \
             issued; every agent must join again. The corrupt Secret is kept as {copy}"
        )),
        action: "Repair".into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, &ca.object_ref(&())).await {
        tracing::warn!(error = %e, "cannot record the Event of the new CA");
    }
}

/// `ca` as the renewal goes on with it: the hub's own CA turned corrupt
/// or half-written is written back from memory first (the agents'
/// certificates stay valid). `None`: nothing more this time (no CA in
/// memory, or written meanwhile: looked at again next time).
async fn repair_ca(api: &Api<Secret>, mut ca: Secret, slots: &Slots) -> Fallible<Option<Secret>> {
    // The hub's own CA turned corrupt or half-written: write back the one
    // in memory (the agents' certificates stay valid).
    if managed(&ca)
        && let Err(e) = usable_ca(&ca)
    {
        let held = slots.ca.lock().clone();
        let Some(pair) = held else {
            tracing::error!(error = %e, "Secret {CA_SECRET} (made by the hub) is corrupt and this replica holds no CA to write back");
            return Ok(None);
        };
        let mut next = new_secret(
            CA_SECRET,
            &[(TLS_CRT, &pair.cert_pem), (TLS_KEY, &pair.key_pem)],
        );
        next.metadata.resource_version = ca.metadata.resource_version.clone();
        match api.replace(CA_SECRET, &PostParams::default(), &next).await {
            Ok(s) => {
                tracing::warn!(error = %e, "Secret {CA_SECRET} (made by the hub) was corrupt; wrote back the CA in use");
                ca = s;
            }
            // Written meanwhile: look again next time.
            Err(kube::Error::Api(e)) if e.code == 409 => return Ok(None),
            Err(error) => {
                return Err(SecretsError::Api {
                    verb: "update",
                    namespace: api.namespace().unwrap_or_default().to_owned(),
                    name: CA_SECRET.to_owned(),
                    error: Box::new(error),
                });
            }
        }
    }
    Ok(Some(ca))
}

async fn renew_once(api: &Api<Secret>, config: &SecretsConfig, slots: &Slots) -> Fallible<()> {
    let read = |e| SecretsError::Read(Box::new(e));
    let Some(ca) = api.get_opt(CA_SECRET).await.map_err(read)? else {
        tracing::warn!(
            "Secret {CA_SECRET} is gone; restart the hub to make a new CA (agents must join again)"
        );
        return Ok(());
    };
    let Some(ca) = repair_ca(api, ca, slots).await? else {
        return Ok(());
    };
    let now = jiff::Timestamp::now().as_second();
    if let Some(crt) = key_of(&ca, TLS_CRT)
        && let Ok(na) = gwhub_common::identity::soonest_expiry_pem(&crt)
        && na - now < 30 * 86_400
    {
        tracing::warn!(
            not_after = na,
            "the hub's CA (Secret {CA_SECRET}) expires within 30 days; replace it and let agents join again"
        );
    }
    let current = api.get_opt(SERVING_SECRET).await.map_err(read)?;
    match current {
        None => {
            let s = serving_secret(&ca_pair(&ca)?, config)?;
            match api.create(&PostParams::default(), &s).await {
                Ok(_) => tracing::info!("re-created the deleted Secret {SERVING_SECRET}"),
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => {
                    return Err(SecretsError::Write {
                        verb: "create",
                        error: Box::new(e),
                    });
                }
            }
        }
        Some(s) if managed(&s) => {
            // Corrupt or half-written (a key missing, unparsable, the two
            // not a pair) is due at once.
            let due = match (serving_pair(&s), key_of(&s, TLS_CRT)) {
                (Ok(()), Some(crt)) => pki::renewal_due(&crt, now).unwrap_or(true),
                (Err(e), _) => {
                    tracing::warn!(error = %e, "Secret {SERVING_SECRET} (made by the hub) is corrupt; re-issuing it");
                    true
                }
                (Ok(()), None) => true,
            };
            if !due {
                return Ok(());
            }
            let mut next = serving_secret(&ca_pair(&ca)?, config)?;
            next.metadata.resource_version = s.metadata.resource_version.clone();
            match api
                .replace(SERVING_SECRET, &PostParams::default(), &next)
                .await
            {
                Ok(_) => tracing::info!(
                    "renewed the hub's serving certificate (Secret {SERVING_SECRET})"
                ),
                // Someone else wrote it meanwhile: look again next time.
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => {
                    return Err(SecretsError::Write {
                        verb: "update",
                        error: Box::new(e),
                    });
                }
            }
        }
        // Supplied by the operator: only read.
        Some(_) => {}
    }
    Ok(())
}
