//! The watch on the hub Gateways of the management API server: the
//! latency of each mark (change -> hub Gateway status there), per replica
//! writing it, and each hub Gateway's shape, so a restart can be judged
//! (whole again, and which statuses were wrong meanwhile). Apart from the
//! run because it runs on its own thread and shares only the view.

use std::collections::HashMap;
use std::sync::Arc;

use gwhub_test_kit::latency::Latencies;
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::agents::{Shared, take_marks_with};
use crate::error::BenchError;
use crate::replicas::Holders;

/// What a hub Gateway's status looks like, for "whole again" after a
/// restart: the hub's own verdict and how many listeners and addresses it
/// carries (a cluster missing shows as fewer), and whether a cluster is
/// shown stale.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Shape {
    pub(crate) own_reason: String,
    pub(crate) listeners: usize,
    pub(crate) addresses: usize,
    pub(crate) stale: bool,
}

impl Shape {
    pub(crate) fn of(status: &serde_json::Value) -> Shape {
        let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
        let own_reason = conditions
            .iter()
            .find(|c| c["type"] == "kuadrant.io/MultiClusterAggregated")
            .and_then(|c| c["reason"].as_str())
            .unwrap_or("")
            .to_owned();
        Shape {
            own_reason,
            listeners: status["listeners"].as_array().map_or(0, Vec::len),
            addresses: status["addresses"].as_array().map_or(0, Vec::len),
            stale: conditions.iter().any(|c| {
                c["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("status is stale"))
            }),
        }
    }
}

/// The first stale fragment a status shows, for the report of a wrong
/// status (empty when none).
fn stale_fragment(status: &serde_json::Value) -> String {
    let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    conditions
        .iter()
        .filter_map(|c| c["message"].as_str())
        .flat_map(|m| m.split("; "))
        .find(|f| f.contains("status is stale"))
        .map(|f| format!(": {f}"))
        .unwrap_or_default()
}

/// What the watch on the hub Gateways saw.
#[derive(Default)]
pub(crate) struct KubeView {
    pub(crate) shapes: HashMap<String, Shape>,
    /// Shapes when the hub was killed; `Some` while a restart is judged.
    pub(crate) baseline: Option<HashMap<String, Shape>>,
    /// Statuses written during the restart that differ from the baseline's
    /// shape, name a stale cluster or no clusters.
    pub(crate) wrong: u64,
    pub(crate) events: u64,
}

impl KubeView {
    pub(crate) fn whole(&self) -> bool {
        self.baseline
            .as_ref()
            .is_some_and(|b| b.iter().all(|(n, s)| self.shapes.get(n) == Some(s)))
    }
}

/// Watches the hub Gateways on the management API server: mark
/// latencies (change -> status there) and the shapes.
/// Latencies are also counted per replica, for the replica `holders`
/// shows writing the hub Gateway when its status arrives.
pub(crate) async fn hub_gateway_watcher(
    client: kube::Client,
    shared: Arc<Shared>,
    view: Arc<Mutex<KubeView>>,
    writers: Writers,
    mut finish: watch::Receiver<bool>,
) -> Result<(Latencies, Vec<Latencies>), BenchError> {
    use futures::StreamExt;
    use kube::runtime::watcher::{self, Event};
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
        client,
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "Gateway"),
            "gateways",
        ),
    );
    let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
    let mut latencies = Latencies::new();
    let mut per_replica: Vec<Latencies> = (0..writers.replicas).map(|_| Latencies::new()).collect();
    loop {
        let event = tokio::select! {
            e = stream.next() => e,
            _ = finish.wait_for(|f| *f) => break,
        };
        let Some(event) = event else { break };
        let obj = match event {
            Ok(Event::Apply(o)) | Ok(Event::InitApply(o)) => o,
            Ok(_) => continue,
            Err(e) => {
                eprintln!("hub Gateway watch: {e}");
                continue;
            }
        };
        let now = shared.now_us();
        let name = obj.metadata.name.clone().unwrap_or_default();
        let namespace = obj.metadata.namespace.clone().unwrap_or_default();
        let status = obj.data.get("status").cloned().unwrap_or_default();
        if let Some(g) = name
            .strip_prefix("gw-")
            .and_then(|g| g.parse::<usize>().ok())
        {
            let writer =
                writers
                    .holders
                    .lock()
                    .writer(writers.replicas, writers.shards, &namespace, &name);
            for c in status["conditions"].as_array().into_iter().flatten() {
                if let Some(m) = c["message"].as_str() {
                    take_marks_with(m, g, &shared, now, |us| {
                        latencies.record_us(us);
                        if let Some(l) = writer.and_then(|w| per_replica.get_mut(w)) {
                            l.record_us(us);
                        }
                    });
                }
            }
        }
        let shape = Shape::of(&status);
        let mut v = view.lock();
        v.events += 1;
        let judged = v.baseline.as_ref().map(|b| {
            let before = b.get(&name).cloned();
            let wrong = shape.stale
                || shape.own_reason == "NoClusters"
                || before.as_ref().is_some_and(|s| *s != shape);
            (wrong, before)
        });
        if let Some((true, before)) = judged {
            v.wrong += 1;
            // The first few, to say what was wrong.
            if v.wrong <= 5 {
                eprintln!(
                    "wrong status during the restart: {namespace}/{name} {shape:?} (before the kill: {before:?}){}",
                    stale_fragment(&status)
                );
            }
        }
        v.shapes.insert(name, shape);
    }
    Ok((latencies, per_replica))
}

/// Who writes which hub Gateway, for the watcher.
pub(crate) struct Writers {
    pub(crate) replicas: usize,
    pub(crate) shards: u32,
    pub(crate) holders: Arc<Mutex<Holders>>,
}
