//! Hub Gateway status writing spread over the replicas (`--status-shards
//! N`): hub Gateways fall into N shards by a stable hash of
//! `namespace/name` ([`gwhub_hub_rules::shards::shard_of`]); shard `i` has
//! Lease `gwhub-shard-<i>`, and a replica writes a hub Gateway only while
//! it holds its shard's Lease (stepping down before the Lease could expire
//! for others, as [`super::leader`] does). The live replicas announce
//! themselves in Lease `gwhub-shard-replicas` (an annotation mapping each
//! replica to its last beat, judged by this replica's own clock), so a
//! newcomer is seen before it holds anything. Which shards to keep, take or
//! give up is [`gwhub_hub_rules::shards::decide`], a pure function; this
//! module does the I/O with [`super::leader`]'s Lease code.
//!
//! A shard given up is first dropped from what this replica writes, and its
//! Lease released only a round later, so a write in flight ends before
//! another replica may take the shard.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gwhub_hub_rules::shards::{decide, shard_of};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::leader::{LeaseConfig, LeaseWatch, Seen, release, take};
use super::metrics::Metrics;
use crate::aggregate::GatewayKey;

/// Which hub Gateways this replica writes the status of now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Writes {
    /// None (not leading, or no shard held).
    Nothing,
    /// Every hub Gateway (leader, or no election).
    All,
    /// Those of the held shards, out of `count`.
    Shards {
        count: u32,
        held: Arc<BTreeSet<u32>>,
    },
}

impl Writes {
    /// Whether this replica writes `key` now.
    pub fn covers(&self, key: &GatewayKey) -> bool {
        match self {
            Writes::Nothing => false,
            Writes::All => true,
            Writes::Shards { count, held } => {
                held.contains(&shard_of(&key.namespace, &key.name, *count))
            }
        }
    }

    /// Whether this replica writes any hub Gateway now.
    pub fn any(&self) -> bool {
        match self {
            Writes::Nothing => false,
            Writes::All => true,
            Writes::Shards { held, .. } => !held.is_empty(),
        }
    }
}

/// The shard Leases' names, count and timing.
#[derive(Clone, Debug)]
pub struct ShardConfig {
    /// Number of shards (`--status-shards`, at least 1).
    pub shards: u32,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_every: Duration,
}

/// The prefix of the shard Leases' names.
pub const LEASE_PREFIX: &str = "gwhub-shard";
/// The Lease the replicas announce themselves in.
pub const REPLICAS_LEASE: &str = "gwhub-shard-replicas";
/// Its annotation: JSON `{identity: last beat (ms)}`.
const REPLICAS_ANNOTATION: &str = "gwhub.io/replicas";

impl ShardConfig {
    /// `shards` shards with the leader Lease's identity and timing.
    pub fn new(shards: u32, lease: &LeaseConfig) -> Self {
        ShardConfig {
            shards,
            identity: lease.identity.clone(),
            lease_duration: lease.lease_duration,
            renew_every: lease.renew_every,
        }
    }

    /// Lease of shard `shard`: `gwhub-shard-<shard>`.
    pub fn lease_name(shard: u32) -> String {
        format!("{LEASE_PREFIX}-{shard}")
    }
}

/// The replicas seen beating in [`REPLICAS_LEASE`].
#[derive(Default)]
struct Replicas {
    /// Per replica, its last beat and when this replica saw it change.
    seen: BTreeMap<String, (i64, Instant)>,
    /// When this replica last wrote its own beat.
    beat_at: Option<Instant>,
}

impl Replicas {
    /// Reads the replicas (writing this replica's beat when due, and
    /// dropping replicas silent for two Lease durations); the live ones.
    async fn beat(
        &mut self,
        api: &Api<Lease>,
        config: &ShardConfig,
        leaving: bool,
    ) -> kube::Result<BTreeSet<String>> {
        let me = config.identity.as_str();
        let lease = api.get_opt(REPLICAS_LEASE).await?;
        let mut beats: BTreeMap<String, i64> = lease
            .as_ref()
            .and_then(|l| l.metadata.annotations.as_ref())
            .and_then(|a| a.get(REPLICAS_ANNOTATION))
            .and_then(|text| match serde_json::from_str(text) {
                Ok(map) => Some(map),
                Err(e) => {
                    tracing::warn!(lease = REPLICAS_LEASE, error = %e, "unreadable replicas annotation; rewriting it");
                    None
                }
            })
            .unwrap_or_default();
        let now = Instant::now();
        for (id, beat) in &beats {
            if self.seen.get(id).map(|s| s.0) != Some(*beat) {
                self.seen.insert(id.clone(), (*beat, now));
            }
        }
        self.seen.retain(|id, _| beats.contains_key(id));
        let mut live: BTreeSet<String> = self
            .seen
            .iter()
            .filter(|(_, (_, at))| at.elapsed() < config.lease_duration)
            .map(|(id, _)| id.clone())
            .collect();
        live.insert(me.to_owned());
        let due = self
            .beat_at
            .is_none_or(|t| t.elapsed() >= config.renew_every)
            || !beats.contains_key(me);
        if !due && !leaving {
            return Ok(live);
        }
        let gone = config.lease_duration * 2;
        beats.retain(|id, _| {
            id != me && self.seen.get(id).is_some_and(|(_, at)| at.elapsed() < gone)
        });
        if !leaving {
            beats.insert(me.to_owned(), jiff::Timestamp::now().as_millisecond());
        }
        let text = serde_json::to_string(&beats).unwrap_or_default();
        let written = match lease {
            Some(mut lease) => {
                lease
                    .metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(REPLICAS_ANNOTATION.to_owned(), text);
                // Guarded by the resourceVersion read: a concurrent beat
                // wins and this one is written next round.
                api.replace(REPLICAS_LEASE, &PostParams::default(), &lease)
                    .await
            }
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(REPLICAS_LEASE.to_owned()),
                        annotations: Some(BTreeMap::from([(REPLICAS_ANNOTATION.to_owned(), text)])),
                        ..Default::default()
                    },
                    spec: Some(LeaseSpec::default()),
                };
                api.create(&PostParams::default(), &lease).await
            }
        };
        match written {
            Ok(_) => self.beat_at = Some(now),
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e),
        }
        Ok(live)
    }
}

/// This replica's shard state between rounds.
struct State {
    watches: Vec<LeaseWatch>,
    /// Per shard, when this replica last took or renewed its Lease.
    renewed: Vec<Option<Instant>>,
    /// Given up: not written any more, released next round.
    draining: BTreeSet<u32>,
    replicas: Replicas,
    live: BTreeSet<String>,
}

/// Holds a fair share of the shard Leases until `shutdown`, publishing
/// which hub Gateways this replica writes on `writes`; releases them (and
/// leaves the replicas Lease) on the way out.
pub async fn run(
    api: Api<Lease>,
    config: ShardConfig,
    writes: watch::Sender<Writes>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let count = config.shards.max(1);
    let mut state = State {
        watches: (0..count).map(|_| LeaseWatch::default()).collect(),
        renewed: vec![None; count as usize],
        draining: BTreeSet::new(),
        replicas: Replicas::default(),
        live: BTreeSet::new(),
    };
    let step_down_after = config.lease_duration * 2 / 3;
    // Free and expired shards are noticed as fast as a leader candidate
    // notices an expired leader Lease.
    let tick = config.renew_every.min(Duration::from_secs(2));
    loop {
        // A request that hangs must not keep this replica writing past the
        // step-down point.
        let attempt = tokio::time::timeout(
            config.renew_every,
            round(&api, &config, count, tick, &mut state),
        );
        tokio::select! {
            _ = shutdown.cancelled() => break,
            r = attempt => if r.is_err() {
                tracing::warn!(timeout = ?config.renew_every, "status shard Lease round timed out");
            },
        }
        let held: BTreeSet<u32> = (0..count)
            .filter(|s| {
                !state.draining.contains(s)
                    && state.renewed[*s as usize].is_some_and(|t| t.elapsed() < step_down_after)
            })
            .collect();
        publish(&writes, &metrics, &config, count, held);
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(tick) => {}
        }
    }
    publish(&writes, &metrics, &config, count, BTreeSet::new());
    let held: Vec<u32> = (0..count)
        .filter(|s| state.renewed[*s as usize].is_some())
        .collect();
    let releases = held.iter().map(|s| {
        let name = ShardConfig::lease_name(*s);
        let (api, identity) = (&api, config.identity.as_str());
        async move { release(api, &name, identity).await }
    });
    let leave = state.replicas.beat(&api, &config, true);
    let done = async { tokio::join!(futures::future::join_all(releases), leave) };
    if tokio::time::timeout(Duration::from_secs(2), done)
        .await
        .is_err()
    {
        tracing::debug!("could not release the status shard Leases in time");
    }
}

fn publish(
    writes: &watch::Sender<Writes>,
    metrics: &Metrics,
    config: &ShardConfig,
    count: u32,
    held: BTreeSet<u32>,
) {
    metrics.status_shards_held.set(held.len() as u64);
    let next = Writes::Shards {
        count,
        held: Arc::new(held),
    };
    writes.send_if_modified(|now| {
        if *now == next {
            return false;
        }
        if let Writes::Shards { held, .. } = &next {
            tracing::info!(identity = %config.identity, shards = ?held, "writing the hub Gateways of these status shards");
        }
        *now = next.clone();
        true
    });
}

/// One round: read the replicas and the shards, decide, act.
async fn round(
    api: &Api<Lease>,
    config: &ShardConfig,
    count: u32,
    tick: Duration,
    state: &mut State,
) {
    match state.replicas.beat(api, config, false).await {
        Ok(live) => state.live = live,
        Err(e) => tracing::warn!(error = %e, lease = REPLICAS_LEASE, "reading the replicas failed"),
    }
    let me = config.identity.as_str();
    // A held shard is read (and renewed) only when its renewal is due.
    let due =
        |renewed: Option<Instant>| renewed.is_none_or(|t| t.elapsed() + tick >= config.renew_every);
    let renewed = state.renewed.clone();
    let looks = state
        .watches
        .iter_mut()
        .zip(0..count)
        .filter(|(_, s)| due(renewed[*s as usize]))
        .map(|(watch, s)| async move {
            let name = ShardConfig::lease_name(s);
            let seen = watch.look(api, &name, me, config.lease_duration).await;
            (s, seen)
        });
    let mut seen: BTreeMap<u32, Seen> = BTreeMap::new();
    let mut unknown: BTreeSet<u32> = BTreeSet::new();
    for (s, look) in futures::future::join_all(looks).await {
        match look {
            Ok(look) => {
                seen.insert(s, look);
            }
            Err(e) => {
                tracing::warn!(error = %e, shard = s, "reading a status shard Lease failed");
                unknown.insert(s);
            }
        }
    }
    let holders: Vec<Option<String>> = (0..count)
        .map(|s| match seen.get(&s) {
            Some(Seen::Mine(_)) => Some(me.to_owned()),
            Some(Seen::Held(h)) => Some(h.clone()),
            Some(Seen::Absent | Seen::Free(_)) => None,
            // Not read: held and not yet due, or unreadable.
            None => state.renewed[s as usize].map(|_| me.to_owned()),
        })
        .collect();
    for (s, look) in &seen {
        if !matches!(look, Seen::Mine(_)) && state.renewed[*s as usize].take().is_some() {
            tracing::warn!(shard = s, "lost a status shard Lease");
            state.draining.remove(s);
        }
    }
    let mut decision = decide(me, &holders, &state.live);
    decision.acquire.retain(|s| !unknown.contains(s));
    // Given up a round ago: release now; kept again (a replica left
    // meanwhile): written again. The state is updated before any request,
    // so a round cut short by its timeout never leaves a released shard
    // counted as held.
    let releasing: Vec<u32> = state
        .draining
        .intersection(&decision.release)
        .copied()
        .collect();
    state.draining = decision
        .release
        .iter()
        .filter(|s| !releasing.contains(s))
        .copied()
        .collect();
    for s in &releasing {
        state.renewed[*s as usize] = None;
    }
    let mut takes = Vec::new();
    for (s, look) in seen {
        let wanted = decision.keep.contains(&s)
            || decision.acquire.contains(&s)
            || state.draining.contains(&s);
        if wanted && !releasing.contains(&s) {
            takes.push((s, look));
        }
    }
    let taking = takes.into_iter().map(|(s, look)| async move {
        let name = ShardConfig::lease_name(s);
        let held = take(api, &name, me, config.lease_duration, look).await;
        (s, held)
    });
    let releases = releasing.iter().map(|s| async move {
        let name = ShardConfig::lease_name(*s);
        (*s, release(api, &name, me).await)
    });
    let (taken, released) = tokio::join!(
        futures::future::join_all(taking),
        futures::future::join_all(releases)
    );
    for (s, held) in taken {
        match held {
            Ok(true) => {
                if state.renewed[s as usize].is_none() {
                    tracing::info!(shard = s, "took a status shard Lease");
                }
                state.renewed[s as usize] = Some(Instant::now());
                state.watches[s as usize].taken();
            }
            Ok(false) => {
                // Another replica changed it first.
                if state.renewed[s as usize].take().is_some() {
                    tracing::warn!(shard = s, "lost a status shard Lease");
                }
                state.draining.remove(&s);
            }
            Err(e) => tracing::warn!(error = %e, shard = s, "status shard Lease request failed"),
        }
    }
    for (s, r) in released {
        match r {
            Ok(()) => tracing::info!(shard = s, "released a status shard Lease (rebalancing)"),
            Err(e) => {
                tracing::debug!(error = %e, shard = s, "could not release a status shard Lease")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_cover_their_shards_only() {
        let key = GatewayKey::new("default", "web");
        let shard = shard_of("default", "web", 4);
        let held = |s: &[u32]| Writes::Shards {
            count: 4,
            held: Arc::new(s.iter().copied().collect()),
        };
        assert!(held(&[shard]).covers(&key));
        assert!(!held(&[(shard + 1) % 4]).covers(&key));
        assert!(!held(&[]).any());
        assert!(Writes::All.covers(&key) && Writes::All.any());
        assert!(!Writes::Nothing.covers(&key) && !Writes::Nothing.any());
    }
}
