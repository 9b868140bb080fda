//! What keeps Join and Renew from being blocked by callers without
//! credentials (spec section 7, "Hardening": "a valid token is never
//! refused because of other callers"), apart from [`super::join`] so the
//! policy is in one place:
//!
//! - [`KnownTokens`]: the ids of the join tokens that exist, followed from
//!   a watch of their Secrets (label `gwhub.io/join-token`), so a made-up
//!   token is refused from memory, with no API call and no budget spent
//!   (after [`GRACE`] for a token made a moment ago, a bounded number of
//!   callers at once);
//! - [`Keyed`]: one [`TokenBucket`] (the one rate limiter, from
//!   `gwhub_common::bucket`) per key: per token id, per source address
//!   ([`source_of`]; tokenless requests), per cluster (renewals). There is no global
//!   window a flood could use up;
//! - [`RefusalLog`]: refused joins counted (`gwhub_join_refused_total`) and
//!   logged at a bounded rate (a flood once wrote 7.6 MB of WARN lines in 3
//!   minutes): the first per source address per minute, then one summary.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use gwhub_common::bucket::TokenBucket;
use gwhub_common::join::TOKEN_LABEL;
use gwhub_common::watch_events::{Change, changes};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use parking_lot::{Mutex, RwLock};
use tokio_util::sync::CancellationToken;

/// Buckets kept before the full ones (keys that have not asked for a
/// while) are dropped: 10,000 keys are well under a megabyte.
const PRUNE_ABOVE: usize = 10_000;

/// A [`TokenBucket`] per key: `burst` attempts at once, refilled at
/// `per_minute` a minute.
#[derive(Debug)]
pub struct Keyed<K> {
    per_minute: u32,
    burst: u32,
    buckets: Mutex<HashMap<K, TokenBucket>>,
}

impl<K: Hash + Eq + Clone> Keyed<K> {
    pub fn new(per_minute: u32, burst: u32) -> Self {
        Keyed {
            per_minute,
            burst,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one attempt for `key` at `now`; `Err(retry)`: none is left,
    /// and one is back after `retry` (nothing was taken).
    pub fn admit(&self, key: &K, now: Instant) -> Result<(), Duration> {
        let mut buckets = self.buckets.lock();
        if buckets.len() > PRUNE_ABOVE {
            buckets.retain(|_, b| !b.full(now));
        }
        let qps = f64::from(self.per_minute) / 60.0;
        let bucket = buckets
            .entry(key.clone())
            .or_insert_with(|| TokenBucket::new(qps, self.burst, now));
        bucket.try_take(now)
    }
}

/// How long a token id not known yet may wait for the watch to bring it
/// (a token made a moment ago: `gwhubctl join create` then a join at
/// once); a second is many watch round trips.
pub const GRACE: Duration = Duration::from_secs(1);
/// Callers waiting out [`GRACE`] at once; beyond them an unknown id is
/// refused at once (a flood of made-up ids holds these, nothing else).
const GRACE_WAITERS: usize = 32;

/// The ids of the join tokens that exist now; `None` until the first list.
#[derive(Clone, Debug)]
pub struct KnownTokens {
    ids: Arc<RwLock<Option<HashSet<String>>>>,
    changed: Arc<tokio::sync::Notify>,
    waiters: Arc<tokio::sync::Semaphore>,
}

impl Default for KnownTokens {
    fn default() -> Self {
        KnownTokens {
            ids: Arc::default(),
            changed: Arc::default(),
            waiters: Arc::new(tokio::sync::Semaphore::new(GRACE_WAITERS)),
        }
    }
}

/// What [`KnownTokens::check`] says about a token id.
#[derive(Debug, PartialEq, Eq)]
pub enum Known {
    Yes,
    No,
    /// The Secrets are not listed yet.
    NotYet,
}

impl KnownTokens {
    /// Known ids from the start (tests).
    pub fn of(ids: impl IntoIterator<Item = String>) -> Self {
        let k = KnownTokens::default();
        *k.ids.write() = Some(ids.into_iter().collect());
        k
    }

    pub fn check(&self, id: &str) -> Known {
        match &*self.ids.read() {
            None => Known::NotYet,
            Some(ids) if ids.contains(id) => Known::Yes,
            Some(_) => Known::No,
        }
    }

    /// [`KnownTokens::check`], and when the id is not known (yet), waits
    /// up to `grace` for the watch to bring it, if a waiter's slot is
    /// free. No API call either way.
    pub async fn check_within(&self, id: &str, grace: Duration) -> Known {
        let first = self.check(id);
        if first == Known::Yes {
            return first;
        }
        let Ok(_slot) = self.waiters.try_acquire() else {
            return first;
        };
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            // Made before the check: a change in between still wakes it.
            let changed = self.changed.notified();
            let now = self.check(id);
            if now == Known::Yes || tokio::time::Instant::now() >= deadline {
                return now;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return self.check(id);
            }
        }
    }

    /// Follows the join token Secrets of `api` until `shutdown`.
    pub async fn follow(self, api: Api<Secret>, shutdown: CancellationToken) {
        let config = watcher::Config::default().labels(TOKEN_LABEL);
        let events = watcher::watcher(api, config).default_backoff();
        let mut events = std::pin::pin!(changes(events, shutdown));
        while let Some(change) = events.next().await {
            match change {
                Change::Listed(secrets) => {
                    let ids: HashSet<String> = secrets.iter().filter_map(token_id).collect();
                    tracing::debug!(tokens = ids.len(), "join tokens listed");
                    *self.ids.write() = Some(ids);
                }
                Change::Applied(s) => {
                    if let (Some(id), Some(ids)) = (token_id(&s), self.ids.write().as_mut()) {
                        ids.insert(id);
                    }
                }
                Change::Deleted(s) => {
                    if let (Some(id), Some(ids)) = (token_id(&s), self.ids.write().as_mut()) {
                        ids.remove(&id);
                    }
                }
                Change::Failed(e) => {
                    tracing::warn!(error = %e, "watching the join token Secrets failed; retrying");
                    continue;
                }
            }
            self.changed.notify_waiters();
        }
    }
}

/// A token Secret's id: its label's value.
fn token_id(s: &Secret) -> Option<String> {
    s.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(TOKEN_LABEL))
        .cloned()
}

/// The `reason` label of `gwhub_join_refused_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct RefusalLabel {
    reason: &'static str,
}

impl RefusalLabel {
    /// The label of refusals for `reason` (see [`reason_of`]).
    pub fn new(reason: &'static str) -> Self {
        RefusalLabel { reason }
    }
}

gwhub_common::metrics! {
    /// What Join and Renew count, served on `/metrics`; handed to the
    /// [`super::join::Joiner`] when the hub starts.
    #[derive(Debug, Default)]
    pub struct JoinCounters {
        /// Refused Join calls, by reason (see [`RefusalLog`]).
        pub joins_refused: prometheus_client::metrics::family::Family<
            RefusalLabel,
            prometheus_client::metrics::counter::Counter,
        > => "gwhub_join_refused",
            "Join calls refused, by reason (bad_token, denied, rate_limited, already_exists, invalid, unavailable, other).",
        /// Renewals of clusters outside the fleet inventory, admitted by
        /// `--inventory-mode=observe` (enforce refuses them).
        pub renewals_outside_inventory: prometheus_client::metrics::counter::Counter =>
            "gwhub_renewals_outside_inventory",
            "Renew calls admitted for clusters outside the fleet inventory (--inventory-mode=observe).",
    }
}

impl JoinCounters {
    /// Join calls refused for `reason` so far (`gwhub_join_refused_total`).
    pub fn joins_refused(&self, reason: &'static str) -> u64 {
        self.joins_refused
            .get_or_create(&RefusalLabel::new(reason))
            .get()
    }
}

/// A refusal's reason, from its status code.
pub fn reason_of(code: tonic::Code) -> &'static str {
    use tonic::Code as C;
    match code {
        C::Unauthenticated => "bad_token",
        C::PermissionDenied => "denied",
        C::ResourceExhausted => "rate_limited",
        C::AlreadyExists => "already_exists",
        C::InvalidArgument => "invalid",
        C::Unavailable => "unavailable",
        _ => "other",
    }
}

/// One line per source address per [`LOG_WINDOW`], then a summary.
const LOG_WINDOW: Duration = Duration::from_secs(60);
/// Addresses remembered per window (a flood from many addresses is
/// summarised beyond them): 200 lines a minute at most.
const LOG_SOURCES: usize = 200;

#[derive(Debug)]
struct LogWindow {
    started: Instant,
    logged: HashSet<String>,
    suppressed: u64,
}

/// Counts refused joins and decides which are logged one by one.
#[derive(Debug)]
pub struct RefusalLog {
    counter: std::sync::OnceLock<
        prometheus_client::metrics::family::Family<
            RefusalLabel,
            prometheus_client::metrics::counter::Counter,
        >,
    >,
    window: Mutex<Option<LogWindow>>,
}

impl Default for RefusalLog {
    fn default() -> Self {
        RefusalLog {
            counter: std::sync::OnceLock::new(),
            window: Mutex::new(None),
        }
    }
}

impl RefusalLog {
    /// Counts into `family` from now on (set once, by the hub at start).
    pub fn count_into(
        &self,
        family: prometheus_client::metrics::family::Family<
            RefusalLabel,
            prometheus_client::metrics::counter::Counter,
        >,
    ) {
        let _ = self.counter.set(family);
    }

    /// Counts a refusal from `source` at `now`: whether to log it (the
    /// first from that address this window), and how many refusals the
    /// window that just ended did not log (0: none, or it has not ended).
    pub fn refused(&self, source: &str, code: tonic::Code, now: Instant) -> (bool, u64) {
        if let Some(c) = self.counter.get() {
            c.get_or_create(&RefusalLabel {
                reason: reason_of(code),
            })
            .inc();
        }
        let mut window = self.window.lock();
        let mut summary = 0;
        let w = match window.as_mut() {
            Some(w) if now.duration_since(w.started) < LOG_WINDOW => w,
            _ => {
                summary = window.as_ref().map_or(0, |w| w.suppressed);
                window.insert(LogWindow {
                    started: now,
                    logged: HashSet::new(),
                    suppressed: 0,
                })
            }
        };
        let one = w.logged.len() < LOG_SOURCES && w.logged.insert(source.to_owned());
        if !one {
            w.suppressed += 1;
        }
        (one, summary)
    }
}

/// The address a source is counted as: exact IPv4 (also IPv4-mapped
/// IPv6), or the IPv6 /64 (one host usually holds a whole /64).
pub fn source_of(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let s = v6.segments();
                let net = std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0);
                format!("{net}/64")
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_exact_ipv4_and_ipv6_slash_64() {
        let s = |a: &str| source_of(a.parse().unwrap());
        assert_eq!(s("10.0.0.1"), "10.0.0.1");
        assert_eq!(s("::ffff:10.0.0.1"), "10.0.0.1");
        assert_eq!(s("2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::/64");
        assert_eq!(s("2001:db8:1:2::9"), s("2001:db8:1:2:ffff::1"));
        assert_ne!(s("2001:db8:1:2::9"), s("2001:db8:1:3::9"));
    }

    #[test]
    fn each_key_has_its_own_bucket_and_refills() {
        let t0 = Instant::now();
        let l: Keyed<&str> = Keyed::new(60, 2);
        assert!(l.admit(&"a", t0).is_ok());
        assert!(l.admit(&"a", t0).is_ok());
        let retry = l.admit(&"a", t0).unwrap_err();
        assert!(retry <= Duration::from_secs(1), "{retry:?}");
        // Another key is not held back by a.
        assert!(l.admit(&"b", t0).is_ok());
        // 60 a minute: one back after a second.
        assert!(l.admit(&"a", t0 + Duration::from_secs(1)).is_ok());
        assert!(l.admit(&"a", t0 + Duration::from_secs(1)).is_err());
    }

    #[test]
    fn refusals_are_logged_once_per_address_per_minute_then_summarised() {
        let log = RefusalLog::default();
        let t0 = Instant::now();
        let c = tonic::Code::Unauthenticated;
        assert_eq!(log.refused("10.0.0.1", c, t0), (true, 0));
        assert_eq!(log.refused("10.0.0.2", c, t0), (true, 0));
        for _ in 0..100 {
            assert_eq!(log.refused("10.0.0.1", c, t0), (false, 0));
        }
        // The next minute: the address again, and the summary of 100.
        let t1 = t0 + Duration::from_secs(61);
        assert_eq!(log.refused("10.0.0.1", c, t1), (true, 100));
        assert_eq!(log.refused("10.0.0.1", c, t1), (false, 0));
    }

    #[test]
    fn ids_are_unknown_until_listed() {
        let k = KnownTokens::default();
        assert_eq!(k.check("abcdef"), Known::NotYet);
        let k = KnownTokens::of(["abcdef".to_owned()]);
        assert_eq!(k.check("abcdef"), Known::Yes);
        assert_eq!(k.check("zzzzzz"), Known::No);
    }

    #[tokio::test]
    async fn an_unknown_id_waits_out_the_grace_for_the_watch() {
        let k = KnownTokens::of([]);
        let t0 = tokio::time::Instant::now();
        let grace = Duration::from_millis(200);
        assert_eq!(k.check_within("abcdef", grace).await, Known::No);
        assert!(t0.elapsed() >= grace);
        // Brought by the watch while it waits.
        let later = k.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if let Some(ids) = later.ids.write().as_mut() {
                ids.insert("abcdef".to_owned());
            }
            later.changed.notify_waiters();
        });
        assert_eq!(
            k.check_within("abcdef", Duration::from_secs(5)).await,
            Known::Yes
        );
    }

    /// A flood of made-up ids takes every waiter's slot: the next unknown
    /// id is refused without waiting (the grace here is an hour; the
    /// timeout only reports a failure), so made-up tokens never queue.
    #[tokio::test]
    async fn with_every_waiter_slot_taken_an_unknown_id_is_refused_at_once() {
        let k = KnownTokens::of([]);
        let held = k
            .waiters
            .clone()
            .try_acquire_many_owned(GRACE_WAITERS as u32)
            .unwrap();
        let answer = tokio::time::timeout(
            Duration::from_secs(30),
            k.check_within("abcdef", Duration::from_secs(3600)),
        )
        .await;
        assert_eq!(answer, Ok(Known::No), "it waited for a slot");
        drop(held);
    }
}
