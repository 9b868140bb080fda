//! The hub's API write budget (`--kube-api-qps` / `--kube-api-burst`): one
//! [`PriorityBucket`] that every write to the management cluster takes a
//! token from (hub Gateway status, ClusterReports, their deletions), so a
//! storm of reports cannot push the hub's write rate past what the API
//! server's owner allows. Hub Gateway status writes (what users see) come
//! first and never queue behind report writes; report writes take what they
//! leave and at least [`REPORT_FLOOR_SHARE`] of the rate while both wait. Writers take the token *before* reading what to write, so
//! a write that waited carries the latest state (changes coalesce while
//! waiting; none is lost: the writers' queues keep each object dirty until
//! written).

use std::sync::Arc;
use std::time::{Duration, Instant};

use gwhub_common::{Class, PriorityBucket};
use parking_lot::Mutex;

use super::metrics::Metrics;

/// client-go's defaults are 5 QPS / burst 10, sized for one small
/// controller; the hub writes a status per hub Gateway and a report per
/// cluster, so it starts higher, as controller-runtime operators commonly
/// do. 100/s: at 1,000 clusters x 10 Gateways changing 100 times a second,
/// 50/s left the persisted lag at ~56 s (over `--stale-after`/2), 100/s
/// kept it under 20 s with the API server at 0.9 of 2 cores (packed
/// reports; docs/benchmarks.md).
pub const DEFAULT_QPS: f64 = 100.0;
pub const DEFAULT_BURST: u32 = 200;
/// The share of `--kube-api-qps` ClusterReport writes keep while status
/// writes would take it all: at the default 100/s, 50 report writes/s.
pub const REPORT_FLOOR_SHARE: f64 = 0.5;

pub struct ApiBudget {
    bucket: Mutex<PriorityBucket>,
    metrics: Arc<Metrics>,
}

impl ApiBudget {
    /// `qps` 0: no limit.
    pub fn new(qps: f64, burst: u32, metrics: Arc<Metrics>) -> Self {
        ApiBudget {
            bucket: Mutex::new(PriorityBucket::new(
                qps,
                burst,
                REPORT_FLOOR_SHARE,
                Instant::now(),
            )),
            metrics,
        }
    }

    /// Waits for a token for a hub Gateway status write (counted in the
    /// throttling metrics when it waits); returns how long it waited (zero:
    /// it did not).
    pub async fn acquire(&self) -> Duration {
        self.acquire_as(Class::High).await
    }

    /// Waits for a token for a ClusterReport write or deletion.
    pub async fn acquire_report(&self) -> Duration {
        self.acquire_as(Class::Low).await
    }

    /// Gives back a token taken for a write that turned out not to be
    /// needed (nothing to write), so an idle pass costs no budget.
    pub fn refund(&self) {
        self.bucket.lock().refund();
    }

    async fn acquire_as(&self, class: Class) -> Duration {
        let start = Instant::now();
        let mut slept = false;
        loop {
            let taken = self.bucket.lock().take(class, Instant::now());
            let (wait, granted) = match taken {
                Ok(wait) => (wait, true),
                Err(retry) => (retry, false),
            };
            if !wait.is_zero() {
                slept = true;
                tokio::time::sleep(wait).await;
            }
            if granted {
                break;
            }
        }
        if !slept {
            return Duration::ZERO;
        }
        let waited = start.elapsed();
        {
            let micros = u64::try_from(waited.as_micros()).unwrap_or(u64::MAX);
            Metrics::bump(&self.metrics.api_throttled_waits);
            Metrics::add(&self.metrics.api_throttled_micros, micros);
            let per_class = match class {
                Class::High => &self.metrics.api_throttled_status_micros,
                Class::Low => &self.metrics.api_throttled_report_micros,
            };
            Metrics::add(per_class, micros);
        }
        waited
    }
}
