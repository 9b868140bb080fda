//! Latency samples for every bench: one HDR histogram (microsecond
//! resolution, three significant figures, so a reported value is within
//! 0.1% of the sample) instead of a percentile function per bench.

use std::time::Duration;

use hdrhistogram::Histogram;

/// Latencies in microseconds, from 1 µs up (larger values grow it).
pub struct Latencies(Histogram<u64>);

impl Default for Latencies {
    fn default() -> Self {
        Self::new()
    }
}

impl Latencies {
    /// An empty histogram.
    pub fn new() -> Self {
        // Within hdrhistogram's 0..=5 significant figures: cannot fail.
        Latencies(Histogram::new(3).expect("3 significant figures are valid"))
    }

    /// Records one sample of `us` microseconds.
    pub fn record_us(&mut self, us: u64) {
        // `record` grows the histogram; `saturating_record` would clamp to
        // its current range. Only a value beyond what it can ever track
        // (past 2^63) fails, and is kept as its largest.
        if self.0.record(us).is_err() {
            self.0.saturating_record(us);
        }
    }

    /// Records one sample.
    pub fn record(&mut self, d: Duration) {
        self.record_us(u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    }

    /// How many samples were recorded.
    pub fn len(&self) -> u64 {
        self.0.len()
    }

    /// Whether no sample was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The sample at quantile `q` (0.5 for p50, 1.0 for the maximum), or
    /// `None` without samples.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        (!self.is_empty()).then(|| Duration::from_micros(self.0.value_at_quantile(q)))
    }

    /// [`Latencies::quantile`] in milliseconds, NaN without samples (what
    /// the benches' JSON has always shown for "no sample").
    pub fn ms(&self, q: f64) -> f64 {
        self.quantile(q)
            .map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_of_known_samples() {
        let mut l = Latencies::new();
        assert!(l.is_empty());
        assert!(l.ms(0.5).is_nan());
        assert_eq!(l.quantile(0.99), None);
        for ms in 1..=100u64 {
            l.record(Duration::from_millis(ms));
        }
        assert_eq!(l.len(), 100);
        let close = |got: f64, want: f64| (got - want).abs() <= want * 0.001;
        assert!(close(l.ms(0.5), 50.0), "p50 {}", l.ms(0.5));
        assert!(close(l.ms(0.99), 99.0), "p99 {}", l.ms(0.99));
        assert!(close(l.ms(1.0), 100.0), "max {}", l.ms(1.0));
    }

    #[test]
    fn huge_samples_are_kept() {
        let mut l = Latencies::new();
        l.record(Duration::from_secs(3600));
        l.record_us(0);
        l.record_us(u64::MAX);
        assert_eq!(l.len(), 3);
        assert!(
            l.quantile(1.0)
                .is_some_and(|d| d >= Duration::from_secs(3599))
        );
    }
}
