//! Spacing of write passes. A change after a quiet spell is written at once
//! (no latency added to the common case); changes that arrive within a
//! window of the last pass wait for the window to end and are written
//! together. So a storm costs at most one pass per window, and a lone change
//! costs no waiting at all, unlike a trailing debounce that delays every
//! change by the full window. A pass that turns out to have changed nothing
//! (typically woken by the echo of our own write) gives its window back, so
//! it cannot delay the next real change.

use std::time::{Duration, Instant};

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
}
