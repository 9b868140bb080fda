//! A token bucket, the way client-go's `--kube-api-qps` / `--kube-api-burst`
//! limiter works: `burst` tokens to start with, refilled at `qps` per second
//! up to `burst`; each call takes one. Taking from an empty bucket reserves
//! the next token and says how long to wait for it, so callers are served in
//! the order they asked and the long-run rate never exceeds `qps`.
//!
//! Pure: the caller passes the time (see the hub's `kube::budget` for the
//! async side).

use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct TokenBucket {
    /// Tokens per second; `None`: no limit.
    qps: Option<f64>,
    burst: f64,
    /// May go negative: tokens reserved ahead of time.
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket at `now`. `qps` 0 (or negative, or not finite) means
    /// no limit; `burst` 0 counts as 1.
    pub fn new(qps: f64, burst: u32, now: Instant) -> Self {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps: (qps.is_finite() && qps > 0.0).then_some(qps),
            burst,
            tokens: burst,
            last: now,
        }
    }

    /// Whether the bucket limits at all.
    pub fn limited(&self) -> bool {
        self.qps.is_some()
    }

    fn refill(&mut self, now: Instant) {
        let Some(qps) = self.qps else {
            return;
        };
        if now > self.last {
            let dt = (now - self.last).as_secs_f64();
            self.tokens = (self.tokens + dt * qps).min(self.burst);
            self.last = now;
        }
    }

    /// How long from `now` until a token is there (zero: one is), without
    /// taking it.
    pub fn available_in(&self, now: Instant) -> Duration {
        let Some(qps) = self.qps else {
            return Duration::ZERO;
        };
        let mut b = self.clone();
        b.refill(now);
        if b.tokens >= 1.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - b.tokens) / qps)
        }
    }

    /// Whether the bucket is full at `now` (as if never used).
    pub fn full(&self, now: Instant) -> bool {
        let mut b = self.clone();
        b.refill(now);
        b.tokens >= b.burst
    }

    /// Gives back a token taken for something that turned out to cost
    /// nothing.
    pub fn refund(&mut self) {
        self.tokens = (self.tokens + 1.0).min(self.burst);
    }

    /// Takes one token at `now`; returns how long to wait before using it
    /// (zero: at once).
    pub fn take(&mut self, now: Instant) -> Duration {
        let Some(qps) = self.qps else {
            return Duration::ZERO;
        };
        self.refill(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / qps)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Each case: (qps, burst, take times in ms) -> waits in ms (rounded).
    #[test]
    fn takes_wait_as_a_token_bucket_says() {
        type Case = (f64, u32, &'static [u64], &'static [u64]);
        let cases: &[Case] = &[
            // Unlimited.
            (0.0, 10, &[0, 0, 0, 0], &[0, 0, 0, 0]),
            (-1.0, 1, &[0, 0], &[0, 0]),
            // A burst goes at once, then one token per 1/qps.
            (10.0, 3, &[0, 0, 0, 0, 0], &[0, 0, 0, 100, 200]),
            // Spaced calls never wait.
            (10.0, 1, &[0, 100, 200, 300], &[0, 0, 0, 0]),
            // A quiet spell refills up to the burst, no further.
            (10.0, 2, &[0, 0, 1000, 1000, 1000], &[0, 0, 0, 0, 100]),
            // Reservations queue: a later caller waits behind earlier ones.
            (5.0, 1, &[0, 0, 100], &[0, 200, 300]),
            // Burst 0 counts as 1.
            (10.0, 0, &[0, 0], &[0, 100]),
        ];
        for (i, (qps, burst, at, want)) in cases.iter().enumerate() {
            let t0 = Instant::now();
            let mut b = TokenBucket::new(*qps, *burst, t0);
            let got: Vec<u64> = at
                .iter()
                .map(|t| {
                    let w = b.take(t0 + ms(*t));
                    (w.as_secs_f64() * 1000.0).round() as u64
                })
                .collect();
            assert_eq!(&got, want, "case {i}");
            assert_eq!(b.limited(), *qps > 0.0, "case {i}");
        }
    }

    #[test]
    fn availability_and_refunds() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(10.0, 2, t0);
        assert!(b.full(t0));
        assert_eq!(b.available_in(t0), Duration::ZERO);
        b.take(t0);
        b.take(t0);
        assert!(!b.full(t0));
        assert_eq!(b.available_in(t0), ms(100));
        assert_eq!(b.available_in(t0 + ms(40)), ms(60));
        b.refund();
        assert_eq!(b.available_in(t0), Duration::ZERO);
        b.refund();
        b.refund();
        assert!(b.full(t0), "refunds stop at the burst");
        assert!(TokenBucket::new(0.0, 1, t0).full(t0));
    }

    /// Over a long storm the rate is qps (plus the first burst).
    #[test]
    fn a_storm_is_held_to_the_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(50.0, 100, t0);
        // 1,000 callers at once: the last is served after (1000-100)/50 s.
        let mut last = Duration::ZERO;
        for _ in 0..1000 {
            last = b.take(t0);
        }
        assert_eq!((last.as_secs_f64() * 10.0).round() / 10.0, 18.0);
    }
}
