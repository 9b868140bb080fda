//! Hub Gateway status writing spread over the replicas (`--status-shards
//! N`): hub Gateways fall into N shards by a stable hash of
//! `namespace/name` ([`gwhub_hub_rules::shards::shard_of`]); shard `i` has
//! Lease `gwhub-shard-<i>`, and a replica writes a hub Gateway only while
//! it holds its shard's Lease (stepping down before the Lease could expire
//! for others, as [`super::leader`] does). The live replicas are those
//! whose liveness heartbeat Lease ([`super::liveness`], renewed at least
//! as often as a shard Lease) this replica saw change within a Lease
//! duration by its own clock ([`gwhub_hub_rules::shards::LiveReplicas`]),
//! so a newcomer is seen before it holds anything. Which shards to keep,
//! take or give up is [`gwhub_hub_rules::shards::decide`], a pure
//! function; this module does the I/O with [`super::leader`]'s Lease code.
//!
//! A shard given up is first dropped from what this replica writes, and its
//! Lease released only a round later, so a write in flight ends before
//! another replica may take the shard.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gwhub_hub_rules::shards::{Decision, LiveReplicas, decide, shard_of};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::leader::{LeaseConfig, LeaseWatch, Seen, release, take};
use super::liveness::Heartbeats;
use super::metrics::Metrics;
use gwhub_hub_rules::aggregate::GatewayKey;

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

/// This replica's shard state between rounds.
struct State {
    watches: Vec<LeaseWatch>,
    /// Per shard, when this replica last took or renewed its Lease.
    renewed: Vec<Option<Instant>>,
    /// Given up: not written any more, released next round.
    draining: BTreeSet<u32>,
    /// The replicas' liveness heartbeats, and who is live by them.
    heartbeats: Heartbeats,
    replicas: LiveReplicas,
}

/// Holds a fair share of the shard Leases until `shutdown`, publishing
/// which hub Gateways this replica writes on `writes`; releases them on
/// the way out.
pub async fn run(
    api: Api<Lease>,
    config: ShardConfig,
    heartbeats: Heartbeats,
    writes: watch::Sender<Writes>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let count = config.shards.max(1);
    let mut state = State {
        watches: (0..count).map(|_| LeaseWatch::default()).collect(),
        renewed: vec![None; count as usize],
        draining: BTreeSet::new(),
        heartbeats,
        replicas: LiveReplicas::default(),
    };
    // The replicas known before the first decision (bounded: without
    // them this replica counts the holders only).
    let listed = state.heartbeats.wait_for(Option::is_some);
    let _ = tokio::time::timeout(config.lease_duration, listed).await;
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
    let done = futures::future::join_all(releases);
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
    let beats = state.heartbeats.borrow().clone().unwrap_or_default();
    let live = state.replicas.observe(
        &beats,
        Instant::now(),
        jiff::Timestamp::now().as_millisecond(),
        config.lease_duration,
    );
    let me = config.identity.as_str();
    let (seen, unknown) = look_due(api, config, count, tick, state).await;
    let holders = holders_of(me, count, &seen, state);
    let mut decision = decide(me, &holders, &live);
    decision.acquire.retain(|s| !unknown.contains(s));
    let releasing = start_releasing(state, &decision);
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
    record_taken(state, taken);
    for (s, r) in released {
        match r {
            Ok(()) => tracing::info!(shard = s, "released a status shard Lease (rebalancing)"),
            Err(e) => {
                tracing::debug!(error = %e, shard = s, "could not release a status shard Lease")
            }
        }
    }
}

/// Reads the shard Leases due a look (a held shard only when its renewal
/// is due): what each says, and the shards that could not be read.
async fn look_due(
    api: &Api<Lease>,
    config: &ShardConfig,
    count: u32,
    tick: Duration,
    state: &mut State,
) -> (BTreeMap<u32, Seen>, BTreeSet<u32>) {
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
    (seen, unknown)
}

/// Per shard, who holds it as far as this round knows (a shard not read
/// is this replica's while it holds it); a shard read as not this
/// replica's any more is noted lost.
fn holders_of(
    me: &str,
    count: u32,
    seen: &BTreeMap<u32, Seen>,
    state: &mut State,
) -> Vec<Option<String>> {
    let holders: Vec<Option<String>> = (0..count)
        .map(|s| match seen.get(&s) {
            Some(Seen::Mine(_)) => Some(me.to_owned()),
            Some(Seen::Held(h)) => Some(h.clone()),
            Some(Seen::Absent | Seen::Free(_)) => None,
            // Not read: held and not yet due, or unreadable.
            None => state.renewed[s as usize].map(|_| me.to_owned()),
        })
        .collect();
    for (s, look) in seen {
        if !matches!(look, Seen::Mine(_)) && state.renewed[*s as usize].take().is_some() {
            tracing::warn!(shard = s, "lost a status shard Lease");
            state.draining.remove(s);
        }
    }
    holders
}

/// The shards to release now. Given up a round ago: release now; kept
/// again (a replica left meanwhile): written again. The state is updated before any request,
/// so a round cut short by its timeout never leaves a released shard
/// counted as held.
fn start_releasing(state: &mut State, decision: &Decision) -> Vec<u32> {
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
    releasing
}

/// Notes the answers to this round's takes and renewals.
fn record_taken(state: &mut State, taken: Vec<(u32, kube::Result<bool>)>) {
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
