//! Retry delays after failures: the one exponential backoff of both
//! runtimes. [`Exponential`] is one retrier's state (the agent's reconnect
//! to the hub, a join waiting for approval); [`Backoff`] keeps one per key
//! for writers that retry many objects independently (the hub's status
//! writer, the agent's status writes, fleet DNS outputs). Kept apart from
//! the pacing of passes ([`crate::pace`]): pacing spaces work that
//! succeeds, a backoff spaces attempts that fail.

use std::collections::BTreeMap;
use std::time::Duration;

/// The smallest first delay: a zero one would never grow.
const MIN_BASE: Duration = Duration::from_millis(1);

/// One retrier's exponential backoff: the first failure waits `base`, each
/// further consecutive failure doubles the step up to `max`, and
/// [`Exponential::reset`] starts over. With [`Exponential::jittered`] a
/// delay is "equal jitter": half the step fixed, half random, so a fleet
/// of agents does not retry in lockstep after a hub restart, yet each
/// waits at least half its step.
#[derive(Clone, Debug)]
pub struct Exponential {
    base: Duration,
    max: Duration,
    /// The step the next failure waits (before jitter).
    step: Duration,
    jitter: bool,
}

impl Exponential {
    /// Steps from `base` (at least 1 ms) doubling up to `max` (at least
    /// `base`), without jitter.
    pub fn new(base: Duration, max: Duration) -> Self {
        let base = base.max(MIN_BASE);
        Exponential {
            base,
            max: max.max(base),
            step: base,
            jitter: false,
        }
    }

    /// The same steps, each delay drawn from its upper half.
    pub fn jittered(mut self) -> Self {
        self.jitter = true;
        self
    }

    /// Records a failure; returns how long to wait before retrying.
    pub fn failed(&mut self) -> Duration {
        self.failed_with(fastrand::f64())
    }

    /// [`Self::failed`] with `random` in `[0, 1)` as the jitter's draw.
    fn failed_with(&mut self, random: f64) -> Duration {
        let step = self.step;
        self.step = step.saturating_mul(2).min(self.max);
        if self.jitter {
            let half = step / 2;
            half + half.mul_f64(random.clamp(0.0, 1.0))
        } else {
            step
        }
    }

    /// Records a success: the next failure waits `base` again.
    pub fn reset(&mut self) {
        self.step = self.base;
    }
}

/// Per-key [`Exponential`] backoff (without jitter) for writers retrying
/// failed writes: a key's first retry after `base`, doubling per
/// consecutive failure up to `max`; a success starts the key over. A write
/// the API server refuses for good (a 422, a webhook's denial) is then
/// retried a few times a minute at most, not every second forever. Only
/// keys that failed last are kept.
#[derive(Debug)]
pub struct Backoff<K> {
    fresh: Exponential,
    keys: std::sync::Mutex<BTreeMap<K, Exponential>>,
}

impl<K: Ord + Clone> Backoff<K> {
    pub fn new(base: Duration, max: Duration) -> Self {
        Backoff {
            fresh: Exponential::new(base, max),
            keys: std::sync::Mutex::new(BTreeMap::new()),
        }
    }

    /// Records a failure of `key`; returns how long to wait before retrying.
    pub fn failed(&self, key: &K) -> Duration {
        self.keys
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.clone())
            .or_insert_with(|| self.fresh.clone())
            .failed()
    }

    /// Records a success (or that `key` is gone): its next failure waits `base`.
    pub fn succeeded(&self, key: &K) {
        self.keys
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    /// (base, max, ms) -> the delays of consecutive failures.
    #[test]
    fn steps_double_up_to_the_cap() {
        let cases: &[(u64, u64, &[u64])] = &[
            (1000, 5000, &[1000, 2000, 4000, 5000, 5000]),
            (100, 10_000, &[100, 200, 400, 800, 1600, 3200, 6400, 10_000]),
            // A cap below the base is the base.
            (500, 100, &[500, 500, 500]),
            // A zero base would never grow: it is 1 ms.
            (0, 8, &[1, 2, 4, 8, 8]),
        ];
        for (base, max, want) in cases {
            let mut b = Exponential::new(MS(*base), MS(*max));
            let got: Vec<u64> = want.iter().map(|_| b.failed().as_millis() as u64).collect();
            assert_eq!(got, *want, "base {base} ms, max {max} ms");
        }
    }

    #[test]
    fn reset_starts_over_and_keys_are_independent() {
        let mut one = Exponential::new(MS(100), MS(1000));
        one.failed();
        one.failed();
        one.reset();
        assert_eq!(one.failed(), MS(100));

        let b = Backoff::new(Duration::from_secs(1), Duration::from_secs(5));
        let secs = |d: Duration| d.as_secs();
        assert_eq!(secs(b.failed(&"a")), 1);
        assert_eq!(secs(b.failed(&"a")), 2);
        assert_eq!(secs(b.failed(&"b")), 1, "keys are independent");
        for _ in 0..100 {
            b.failed(&"a");
        }
        assert_eq!(secs(b.failed(&"a")), 5, "no overflow");
        b.succeeded(&"a");
        assert_eq!(secs(b.failed(&"a")), 1);
    }

    proptest! {
        /// Every delay is at most the cap; without jitter each is the
        /// previous one doubled (or the cap), with jitter it lies in the
        /// upper half of that step; a reset goes back to the base.
        #[test]
        fn delays_stay_within_their_step(
            base in 0u64..5_000,
            max in 0u64..100_000,
            draws in proptest::collection::vec(0.0f64..1.0, 1..80),
            reset_at in 0usize..80,
        ) {
            let mut plain = Exponential::new(MS(base), MS(max));
            let mut jittered = Exponential::new(MS(base), MS(max)).jittered();
            let (first, cap) = (MS(base).max(MIN_BASE), MS(max).max(MS(base).max(MIN_BASE)));
            let mut step = first;
            for (i, r) in draws.iter().enumerate() {
                if i == reset_at {
                    plain.reset();
                    jittered.reset();
                    step = first;
                }
                let d = plain.failed_with(*r);
                prop_assert_eq!(d, step);
                prop_assert!(d <= cap);
                let j = jittered.failed_with(*r);
                prop_assert!(j >= step / 2 && j <= step, "{:?} outside [{:?}, {:?}]", j, step / 2, step);
                step = (step * 2).min(cap);
            }
        }
    }
}
