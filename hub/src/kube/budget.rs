//! The hub's API write budget (`--kube-api-qps` / `--kube-api-burst`): one
//! [`TokenBucket`] that every write to the management cluster takes a token
//! from (hub Gateway status, ClusterReports, their deletions), so a storm of
//! reports cannot push the hub's write rate past what the API server's
//! owner allows. Writers take the token *before* reading what to write, so
//! a write that waited carries the latest state (changes coalesce while
//! waiting; none is lost: the writers' queues keep each object dirty until
//! written).

use std::sync::Arc;
use std::time::{Duration, Instant};

use gwhub_common::TokenBucket;
use parking_lot::Mutex;

use super::metrics::Metrics;

/// client-go's defaults are 5 QPS / burst 10, sized for one small
/// controller; the hub writes a status per hub Gateway and a report per
/// cluster, so it starts higher, as controller-runtime operators commonly do.
pub const DEFAULT_QPS: f64 = 50.0;
pub const DEFAULT_BURST: u32 = 100;

pub struct ApiBudget {
    bucket: Mutex<TokenBucket>,
    metrics: Arc<Metrics>,
}

impl ApiBudget {
    /// `qps` 0: no limit.
    pub fn new(qps: f64, burst: u32, metrics: Arc<Metrics>) -> Self {
        ApiBudget {
            bucket: Mutex::new(TokenBucket::new(qps, burst, Instant::now())),
            metrics,
        }
    }

    /// Waits for a token (counted in the throttling metrics when it
    /// waits); returns how long it waited.
    pub async fn acquire(&self) -> Duration {
        let wait = self.bucket.lock().take(Instant::now());
        if wait > Duration::ZERO {
            Metrics::bump(&self.metrics.api_throttled_waits);
            Metrics::add(
                &self.metrics.api_throttled_micros,
                u64::try_from(wait.as_micros()).unwrap_or(u64::MAX),
            );
            tokio::time::sleep(wait).await;
        }
        wait
    }
}
