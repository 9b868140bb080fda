//! Spacing of write passes. A change after a quiet spell is written at once
//! (no latency added to the common case); changes that arrive within a
//! window of the last pass wait for the window to end and are written
//! together. So a storm costs at most one pass per window, and a lone change
//! costs no waiting at all, unlike a trailing debounce that delays every
//! change by the full window. A pass that turns out to have changed nothing
//! (typically woken by the echo of our own write) gives its window back, so
//! it cannot delay the next real change.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::bucket::TokenBucket;

/// Leading-edge pacing of passes at least `window` apart.
#[derive(Clone, Debug)]
pub struct Pacer {
    window: Duration,
    last: Option<Instant>,
    /// `last` before the current pass, restored by [`Pacer::idle`].
    before: Option<Instant>,
}

impl Pacer {
    pub fn new(window: Duration) -> Self {
        Pacer {
            window,
            last: None,
            before: None,
        }
    }

    /// How long to wait at `now` before the next pass may start.
    pub fn delay(&self, now: Instant) -> Duration {
        self.last
            .map(|last| (last + self.window).saturating_duration_since(now))
            .unwrap_or_default()
    }

    /// Records that a pass starts at `now`.
    pub fn started(&mut self, now: Instant) {
        self.before = self.last.replace(now);
    }

    /// The pass begun last wrote nothing: it does not count against the
    /// window.
    pub fn idle(&mut self) {
        self.last = self.before;
    }
}

/// Writes a key may make at once before [`KeyedPacer`]'s rate applies.
pub const KEYED_BURST: u32 = 3;

/// Per key (a Gateway), a token bucket of [`KEYED_BURST`] passes refilled
/// at one per `window`: a pass for one key never waits for another's, a
/// change waits only once its key has used up the burst, so lone changes
/// and changes up to one per `window` pass at once, and a storm costs at
/// most `KEYED_BURST` + one pass per `window` per key. (A fixed window made
/// every change landing inside it wait for the rest of it: 4x the floor at
/// about 10 changes a second.) Keys taken from a [`CoalescingQueue`] wait
/// here until their bucket allows; what changes while a write is in flight
/// coalesces in the queue into the next pass.
#[derive(Clone, Debug)]
pub struct KeyedPacer<K> {
    window: Duration,
    burst: u32,
    keys: BTreeMap<K, TokenBucket>,
    /// Keys due for a pass, still inside their window.
    waiting: BTreeSet<K>,
}

impl<K: Ord + Clone> KeyedPacer<K> {
    pub fn new(window: Duration) -> Self {
        Self::with_burst(window, KEYED_BURST)
    }

    /// Passes per key at once before the rate (one per `window`) applies.
    pub(crate) fn with_burst(window: Duration, burst: u32) -> Self {
        KeyedPacer {
            window,
            burst,
            keys: BTreeMap::new(),
            waiting: BTreeSet::new(),
        }
    }

    fn rate(&self) -> f64 {
        if self.window.is_zero() {
            0.0
        } else {
            1.0 / self.window.as_secs_f64()
        }
    }

    /// Adds `keys` to those waiting for a pass.
    pub fn wait(&mut self, keys: impl IntoIterator<Item = K>) {
        self.waiting.extend(keys);
    }

    /// How long `key` must wait at `now`.
    pub fn delay(&self, key: &K, now: Instant) -> Duration {
        self.keys
            .get(key)
            .map_or(Duration::ZERO, |b| b.available_in(now))
    }

    /// The earliest instant a waiting key may pass, if any is waiting.
    pub fn next_due(&self, now: Instant) -> Option<Instant> {
        self.waiting.iter().map(|k| now + self.delay(k, now)).min()
    }

    /// Records that `key`'s pass starts at `now` (takes its token).
    pub fn started(&mut self, key: &K, now: Instant) {
        let (rate, burst) = (self.rate(), self.burst);
        self.keys
            .entry(key.clone())
            .or_insert_with(|| TokenBucket::new(rate, burst, now))
            .take(now);
    }

    /// `key`'s pass begun last changed nothing (typically the echo of our
    /// own write): its token is given back.
    pub fn idle(&mut self, key: &K) {
        if let Some(b) = self.keys.get_mut(key) {
            b.refund();
        }
    }

    /// Forgets the keys whose bucket is full again, so only keys passed
    /// recently are kept (deleted Gateways do not accumulate). Call before
    /// a round of passes, not between `started` and `idle`.
    pub fn prune(&mut self, now: Instant) {
        self.keys.retain(|_, b| !b.full(now));
    }

    /// Starts a round at `now`: prunes, and takes the waiting keys that
    /// may pass now (in key order); the rest keep waiting.
    pub fn take_due(&mut self, now: Instant) -> Vec<K> {
        self.prune(now);
        let (due, later): (BTreeSet<K>, BTreeSet<K>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|k| self.delay(k, now).is_zero());
        self.waiting = later;
        due.into_iter().collect()
    }
}

/// Work waiting per key, coalesced for one consumer task: one entry per key
/// however often it is pushed (a later push replaces the value), so a
/// burst of changes to one key costs one pass. The hub's status writer,
/// the agent's re-evaluations and the agent's status writes all queue
/// through it; [`KeyedPacer`] spaces the passes.
#[derive(Debug)]
pub struct CoalescingQueue<K, V = ()> {
    entries: std::sync::Mutex<BTreeMap<K, V>>,
    notify: Notify,
}

impl<K, V> Default for CoalescingQueue<K, V> {
    fn default() -> Self {
        CoalescingQueue {
            entries: std::sync::Mutex::new(BTreeMap::new()),
            notify: Notify::new(),
        }
    }
}

impl<K: Ord, V> CoalescingQueue<K, V> {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<K, V>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `value` for `key`, replacing an older entry, and wakes the
    /// consumer.
    pub fn push(&self, key: K, value: V) {
        self.lock().insert(key, value);
        self.notify.notify_one();
    }

    /// Queues every entry of `entries` and wakes the consumer once.
    pub fn extend(&self, entries: impl IntoIterator<Item = (K, V)>) {
        self.lock().extend(entries);
        self.notify.notify_one();
    }

    /// Drops `key`'s entry, if queued (no wake-up).
    pub fn remove<Q>(&self, key: &Q)
    where
        K: std::borrow::Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.lock().remove(key);
    }

    /// Takes the first entry in key order.
    pub fn pop_first(&self) -> Option<(K, V)> {
        self.lock().pop_first()
    }

    /// Takes every entry.
    pub fn take(&self) -> BTreeMap<K, V> {
        std::mem::take(&mut *self.lock())
    }

    /// Wakes the consumer without queueing anything (for state kept beside
    /// the queue).
    pub fn wake(&self) {
        self.notify.notify_one();
    }

    /// Resolves when something was queued (or [`Self::wake`] called) since
    /// the consumer last woke; a wake-up before the call is not lost.
    pub async fn notified(&self) {
        self.notify.notified().await
    }
}

impl<K: Ord> CoalescingQueue<K> {
    /// Queues `key`.
    pub fn insert(&self, key: K) {
        self.push(key, ());
    }

    /// Queues every key of `keys`.
    pub fn insert_all(&self, keys: impl IntoIterator<Item = K>) {
        self.extend(keys.into_iter().map(|k| (k, ())));
    }

    /// Takes every queued key.
    pub fn take_keys(&self) -> BTreeSet<K> {
        self.take().into_keys().collect()
    }
}

/// Sleeps until `due`; never resolves for `None` (nothing is waiting).
pub async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_pass_and_passes_after_a_quiet_window_do_not_wait() {
        let t0 = Instant::now();
        let w = Duration::from_millis(100);
        let mut p = Pacer::new(w);
        assert_eq!(p.delay(t0), Duration::ZERO);
        p.started(t0);
        assert_eq!(
            p.delay(t0 + Duration::from_millis(30)),
            Duration::from_millis(70)
        );
        assert_eq!(p.delay(t0 + w), Duration::ZERO);
        assert_eq!(p.delay(t0 + Duration::from_secs(5)), Duration::ZERO);
    }

    #[test]
    fn an_idle_pass_gives_its_window_back() {
        let t0 = Instant::now();
        let w = Duration::from_millis(100);
        let mut p = Pacer::new(w);
        p.started(t0);
        // The echo of the first pass's write, 20 ms later: nothing to do.
        let echo = t0 + Duration::from_millis(20);
        assert_eq!(p.delay(echo), Duration::from_millis(80));
        p.started(echo + Duration::from_millis(80));
        p.idle();
        // A real change right after waits for nothing: the window counts
        // from the first pass, not from the idle one.
        assert_eq!(p.delay(t0 + w), Duration::ZERO);
        // Inside the first pass's window it still waits.
        p.started(t0 + w);
        p.idle();
        assert_eq!(
            p.delay(t0 + Duration::from_millis(50)),
            Duration::from_millis(50)
        );
    }

    #[test]
    fn keys_are_paced_independently() {
        let t0 = Instant::now();
        let w = Duration::from_millis(100);
        let ms = Duration::from_millis;
        let mut p = KeyedPacer::with_burst(w, 2);
        // A burst of two passes at once, then one per window.
        p.started(&"a", t0);
        assert_eq!(p.delay(&"a", t0 + ms(10)), Duration::ZERO);
        p.started(&"a", t0 + ms(10));
        assert_eq!(p.delay(&"a", t0 + ms(30)), ms(70));
        // Another Gateway does not wait for `a`.
        assert_eq!(p.delay(&"b", t0 + ms(30)), Duration::ZERO);
        p.started(&"b", t0 + ms(30));
        assert_eq!(p.next_due(t0), None, "nothing waits");
        p.wait(["a"]);
        assert_eq!(p.next_due(t0 + ms(40)), Some(t0 + ms(100)));
        p.wait(["b", "c"]);
        assert_eq!(p.next_due(t0 + ms(40)), Some(t0 + ms(40)));
        // An idle pass gives its token back.
        p.idle(&"a");
        assert_eq!(p.delay(&"a", t0 + ms(40)), Duration::ZERO);
        p.started(&"a", t0 + ms(40));
        // A round takes the waiting keys that may pass and leaves the rest.
        assert_eq!(p.take_due(t0 + ms(50)), vec!["b", "c"]);
        assert_eq!(p.waiting, BTreeSet::from(["a"]));
        // Pruning keeps only keys whose bucket is not full again.
        p.prune(t0 + ms(50));
        assert_eq!(p.keys.len(), 2);
        p.prune(t0 + ms(300));
        assert!(p.keys.is_empty());
    }

    /// (changes: every `every` ms for 1 s, window ms) -> at most this many
    /// passes, and each change waits at most this long (ms).
    #[test]
    fn keyed_pacing_bounds_storms_and_spares_moderate_rates() {
        let ms = Duration::from_millis;
        let cases: &[(u64, u64, usize, u64)] = &[
            // Lone changes: never wait.
            (500, 100, 2, 0),
            // About 10 a second against a 100 ms window: never wait.
            (100, 100, 10, 0),
            // Jittery 10 a second (two at once, then a gap): never wait.
            (50, 100, 13, 50),
            // A storm (every 2 ms): burst + one per window.
            (2, 100, 3 + 10, 100),
            (2, 50, 3 + 20, 50),
        ];
        for (every, window, max_passes, max_wait) in cases {
            let t0 = Instant::now();
            let mut p = KeyedPacer::new(ms(*window));
            let mut passes: Vec<Instant> = Vec::new();
            let mut worst = Duration::ZERO;
            let mut change = t0;
            let mut pending: Option<Instant> = None;
            let mut now = t0;
            while now < t0 + Duration::from_secs(1) || pending.is_some() {
                if change <= now && change < t0 + Duration::from_secs(1) {
                    pending.get_or_insert(change);
                    change += ms(*every);
                }
                if let Some(first) = pending
                    && p.delay(&"gw", now).is_zero()
                {
                    worst = worst.max(now - first);
                    p.started(&"gw", now);
                    passes.push(now);
                    pending = None;
                }
                now += ms(1);
            }
            let case = format!("every {every} ms, window {window} ms");
            assert!(
                passes.len() <= *max_passes,
                "{case}: {} passes",
                passes.len()
            );
            assert!(worst <= ms(*max_wait), "{case}: waited {worst:?}");
        }
    }

    #[test]
    fn a_storm_gets_one_pass_per_window() {
        let t0 = Instant::now();
        let (w, every) = (Duration::from_millis(50), Duration::from_millis(7));
        let mut p = Pacer::new(w);
        // A change every 7 ms for a second; a pass takes what is pending.
        let mut starts: Vec<Instant> = Vec::new();
        let mut change = t0;
        while change < t0 + Duration::from_secs(1) {
            let start = change + p.delay(change);
            p.started(start);
            starts.push(start);
            // The next change the pass did not see.
            while change <= start {
                change += every;
            }
        }
        assert_eq!(starts[0], t0, "the first change waits for nothing");
        assert!(starts.windows(2).all(|s| s[1] - s[0] >= w));
        assert!(starts.len() <= 21, "{} passes", starts.len());
    }

    #[tokio::test]
    async fn a_queue_coalesces_per_key_and_keeps_a_wake_up() {
        let q: CoalescingQueue<&str, u32> = CoalescingQueue::default();
        q.push("b", 1);
        q.push("a", 2);
        q.push("b", 3);
        // Woken before anyone waited: the wake-up is kept.
        tokio::time::timeout(Duration::from_secs(5), q.notified())
            .await
            .expect("a push wakes the consumer");
        assert_eq!(q.pop_first(), Some(("a", 2)));
        q.remove(&"b");
        assert_eq!(q.pop_first(), None);
        let keys: CoalescingQueue<&str> = CoalescingQueue::default();
        keys.insert("x");
        keys.insert_all(["y", "x"]);
        assert_eq!(keys.take_keys(), BTreeSet::from(["x", "y"]));
        assert!(keys.take_keys().is_empty());
    }
}
