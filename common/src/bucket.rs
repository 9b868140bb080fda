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
    pub(crate) fn available_in(&self, now: Instant) -> Duration {
        let mut b = self.clone();
        b.refill(now);
        b.shortfall()
    }

    /// How long until a token is there, as the bucket stands (zero: one
    /// is, or no limit).
    fn shortfall(&self) -> Duration {
        match self.qps {
            Some(qps) if self.tokens < 1.0 => Duration::from_secs_f64((1.0 - self.tokens) / qps),
            _ => Duration::ZERO,
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

    /// Takes one token at `now` if one is there; when the bucket is empty,
    /// takes and reserves nothing and says how long until a token is
    /// there: for a limit that refuses (and names when to come back)
    /// instead of making the caller wait.
    pub fn try_take(&mut self, now: Instant) -> Result<(), Duration> {
        if self.qps.is_none() {
            return Ok(());
        }
        self.refill(now);
        let wait = self.shortfall();
        if !wait.is_zero() {
            return Err(wait);
        }
        self.tokens -= 1.0;
        Ok(())
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

/// Which class a write of a [`PriorityBucket`] belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Served first (the hub's Gateway status writes).
    High,
    /// Served from what `High` leaves, and a floor share of the rate when
    /// `High` takes it all (the hub's ClusterReport writes).
    Low,
}

/// One [`TokenBucket`] shared by two classes of writes: the total rate
/// stays within `qps` / `burst`, a [`Class::High`] write reserves its token
/// at once (it waits only behind other reservations, never behind a queue
/// of `Low` writes), and a [`Class::Low`] write takes a token only when one
/// is there now, or when its own floor bucket (`qps * floor_share`, a
/// burst of one) grants it a reservation: `Low` writes are never starved,
/// and at most one `Low` reservation per floor interval sits ahead of a
/// `High` write.
#[derive(Clone, Debug)]
pub struct PriorityBucket {
    total: TokenBucket,
    floor: TokenBucket,
}

impl PriorityBucket {
    /// `qps` 0: no limit. `floor_share` is clamped to (0, 1].
    pub fn new(qps: f64, burst: u32, floor_share: f64, now: Instant) -> Self {
        let share = if floor_share.is_finite() {
            floor_share.clamp(0.01, 1.0)
        } else {
            1.0
        };
        let floor_qps = if qps.is_finite() && qps > 0.0 {
            qps * share
        } else {
            0.0
        };
        PriorityBucket {
            total: TokenBucket::new(qps, burst, now),
            floor: TokenBucket::new(floor_qps, 1, now),
        }
    }

    /// Takes a token for a `class` write at `now`: `Ok(wait)` once granted
    /// (wait that long, then write), `Err(retry)` when a `Low` write must
    /// ask again after `retry`.
    pub fn take(&mut self, class: Class, now: Instant) -> Result<Duration, Duration> {
        if !self.total.limited() {
            return Ok(Duration::ZERO);
        }
        match class {
            Class::High => Ok(self.total.take(now)),
            Class::Low => {
                if self.total.available_in(now).is_zero() {
                    return Ok(self.total.take(now));
                }
                let floor = self.floor.available_in(now);
                if floor.is_zero() {
                    self.floor.take(now);
                    return Ok(self.total.take(now));
                }
                let retry = floor.min(self.total.available_in(now));
                Err(retry.max(Duration::from_millis(1)))
            }
        }
    }

    /// Gives back a token taken for something that turned out to cost
    /// nothing.
    pub fn refund(&mut self) {
        self.total.refund();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusing take: a burst, then one a `1/qps`; a refusal reserves
    /// nothing, so the next token comes as if it had not been asked for.
    #[test]
    fn try_take_refuses_without_reserving() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let ms = Duration::from_millis;
        let mut b = TokenBucket::new(10.0, 3, t0);
        assert!((0..3).all(|_| b.try_take(at(0)).is_ok()));
        assert_eq!(b.try_take(at(0)), Err(ms(100)));
        assert_eq!(b.try_take(at(50)), Err(ms(50)));
        assert_eq!(b.try_take(at(100)), Ok(()));
        assert_eq!(b.try_take(at(100)), Err(ms(100)));
        // A second of silence refills the burst, no more.
        assert_eq!((0..5).filter(|_| b.try_take(at(1_200)).is_ok()).count(), 3);
        // No limit: always.
        let mut free = TokenBucket::new(0.0, 1, t0);
        assert!((0..100).all(|_| free.try_take(at(0)).is_ok()));
    }

    /// Each case: (qps, burst, floor share, takes as (time ms, class)) ->
    /// per take, the wait in ms, or `None` for "ask again".
    #[test]
    fn priority_takes_serve_high_first_and_keep_a_floor_for_low() {
        use Class::{High as H, Low as L};
        type Case = (
            f64,
            u32,
            f64,
            &'static [(u64, Class)],
            &'static [Option<u64>],
        );
        let cases: &[Case] = &[
            // Unlimited: everything at once.
            (
                0.0,
                1,
                0.5,
                &[(0, H), (0, L), (0, L)],
                &[Some(0), Some(0), Some(0)],
            ),
            // Tokens there: both classes go at once.
            (10.0, 2, 0.5, &[(0, L), (0, H)], &[Some(0), Some(0)]),
            // Empty bucket: High reserves and waits its turn...
            (
                10.0,
                1,
                0.5,
                &[(0, H), (0, H), (0, H)],
                &[Some(0), Some(100), Some(200)],
            ),
            // ...Low gets one floor reservation (behind High's), then asks
            // again rather than queueing ahead of later High writes.
            (
                10.0,
                1,
                0.5,
                &[(0, H), (0, H), (0, L), (0, L), (0, H)],
                &[Some(0), Some(100), Some(200), None, Some(300)],
            ),
            // A High write after a queue of Low requests waits only for
            // the rate, not for them (they were told to ask again).
            (
                10.0,
                1,
                0.5,
                &[(0, L), (0, L), (0, L), (0, L), (0, H)],
                &[Some(0), Some(100), None, None, Some(200)],
            ),
            // The floor refills at qps * share: one more Low reservation
            // per 200 ms while High keeps the bucket empty.
            (
                10.0,
                1,
                0.5,
                &[(0, H), (0, L), (0, H), (100, L), (200, L), (200, H)],
                &[Some(0), Some(100), Some(200), None, Some(100), Some(200)],
            ),
            // A quiet spell: Low takes what High leaves, at once.
            (
                10.0,
                2,
                0.5,
                &[(0, H), (1000, L), (1000, L)],
                &[Some(0), Some(0), Some(0)],
            ),
        ];
        for (i, (qps, burst, share, takes, want)) in cases.iter().enumerate() {
            let t0 = Instant::now();
            let mut b = PriorityBucket::new(*qps, *burst, *share, t0);
            let got: Vec<Option<u64>> = takes
                .iter()
                .map(|(t, class)| {
                    b.take(*class, t0 + ms(*t))
                        .ok()
                        .map(|w| (w.as_secs_f64() * 1000.0).round() as u64)
                })
                .collect();
            assert_eq!(&got, want, "case {i}");
        }
    }

    /// Over a long storm of both classes, 8 writers each (as the hub keeps
    /// 8 writes in flight per class), each asking again as soon as its last
    /// grant is used: the total rate is qps, Low gets at least its floor
    /// share and High the rest.
    #[test]
    fn a_two_class_storm_is_held_to_the_rate_with_a_floor_for_low() {
        let t0 = Instant::now();
        let mut b = PriorityBucket::new(50.0, 10, 0.25, t0);
        let end = 60_000u64;
        // Per writer: when it asks next (ms), and its class.
        let mut writers: Vec<(u64, Class)> = (0..16)
            .map(|i| (0, if i < 8 { Class::High } else { Class::Low }))
            .collect();
        let (mut high, mut low) = (0u32, 0u32);
        for t in 0..end {
            for (next, class) in &mut writers {
                if *next != t {
                    continue;
                }
                match b.take(*class, t0 + ms(t)) {
                    Ok(w) => {
                        let at = t + w.as_millis() as u64;
                        if at < end {
                            match class {
                                Class::High => high += 1,
                                Class::Low => low += 1,
                            }
                        }
                        // The write itself takes 1 ms.
                        *next = at + 1;
                    }
                    Err(retry) => *next = t + (retry.as_millis() as u64).max(1),
                }
            }
        }
        let total = high + low;
        assert!(total <= 10 + 50 * 60, "total {total}");
        assert!(low >= (50.0 * 60.0 * 0.25) as u32 - 5, "low {low}");
        assert!(high >= (50.0 * 60.0 * 0.7) as u32, "high {high}");
    }

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
