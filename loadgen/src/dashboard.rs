//! The hub's Dashboard API as the bench reads it: a `WatchGateways`
//! follower that sees when every hub Gateway has every cluster and times
//! the latency marks, and a `ListClusters` poll for the fleet being in.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gwhub_proto::v1::{self, dashboard_client::DashboardClient};
use gwhub_test_kit::latency::Latencies;
use gwhub_test_kit::raw_agent::channel;
use prost::Message;
use tokio::sync::watch;

use crate::agents::{Shared, take_marks};
use crate::error::BenchError;

/// What the Dashboard watch delivered.
#[derive(Default)]
pub(crate) struct WatchStats {
    pub(crate) messages: u64,
    pub(crate) bytes: u64,
    pub(crate) max_bytes: u64,
}

/// Follows `WatchGateways`: reports when every hub Gateway has every
/// cluster, and records mark latencies (µs) until `finish`.
pub(crate) async fn watcher(
    url: String,
    clusters: usize,
    shared: Arc<Shared>,
    complete: watch::Sender<Option<Instant>>,
    mut finish: watch::Receiver<bool>,
) -> Result<(Latencies, WatchStats), BenchError> {
    let mut client =
        DashboardClient::new(channel(&url).await?).max_decoding_message_size(usize::MAX);
    let mut stream = client
        .watch_gateways(v1::WatchGatewaysRequest {
            omit_unchanged_omissions: true,
            ..Default::default()
        })
        .await
        .map_err(BenchError::dashboard("watch"))?
        .into_inner();
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut full = 0usize;
    let mut latencies = Latencies::new();
    let mut stats = WatchStats::default();
    loop {
        let m = tokio::select! {
            m = stream.message() => m.map_err(BenchError::dashboard("watch"))?,
            _ = finish.wait_for(|f| *f) => break,
        };
        let Some(m) = m else { break };
        let now = shared.now_us();
        let bytes = m.encoded_len() as u64;
        stats.messages += 1;
        stats.bytes += bytes;
        stats.max_bytes = stats.max_bytes.max(bytes);
        if std::env::var_os("GWHUB_BENCH_TRACE").is_some() {
            eprintln!(
                "watch message at {:.3} s: {bytes} bytes, {} upserted",
                now as f64 / 1e6,
                m.upserted.len()
            );
        }
        for gw in &m.upserted {
            let n = gw.clusters.len();
            let old = counts.insert(gw.name.clone(), n).unwrap_or(0);
            if n == clusters && old != clusters {
                full += 1;
            } else if n != clusters && old == clusters {
                full -= 1;
            }
            let Some(g) = gw
                .name
                .strip_prefix("gw-")
                .and_then(|g| g.parse::<usize>().ok())
            else {
                continue;
            };
            let conditions = gw
                .status
                .as_ref()
                .map(|s| &s.conditions[..])
                .unwrap_or_default();
            for cond in conditions {
                take_marks(&cond.message, g, &shared, now, &mut latencies);
            }
        }
        for d in &m.deleted {
            if counts.remove(&d.name) == Some(clusters) {
                full -= 1;
            }
        }
        if full == shared.gateways && complete.borrow().is_none() {
            let _ = complete.send(Some(Instant::now()));
        }
    }
    Ok((latencies, stats))
}

/// Polls `ListClusters` until every cluster reports every Gateway.
pub(crate) async fn wait_fleet(
    url: String,
    clusters: usize,
    gateways: usize,
) -> Result<Instant, BenchError> {
    let mut client =
        DashboardClient::new(channel(&url).await?).max_decoding_message_size(usize::MAX);
    loop {
        let list = client
            .list_clusters(v1::ListClustersRequest {})
            .await
            .map_err(BenchError::dashboard("ListClusters"))?
            .into_inner();
        let done = list
            .clusters
            .iter()
            .filter(|c| c.gateway_count as usize == gateways)
            .count();
        if done == clusters {
            return Ok(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
