//! `gwhub.io/Reporting` (the hub as a cluster manager where
//! there is none): on the ClusterProfiles the hub published at a join
//! (label `x-k8s.io/cluster-manager` and `spec.clusterManager.name` both
//! `gwhub`), the leader keeps a status condition saying whether the
//! cluster's agent reports: True while it is fresh, False `Stale` or
//! `NeverConnected` (since when) otherwise. Written with server-side apply
//! on the status subresource as field manager [`FIELD_MANAGER`], only when
//! the condition changes; other managers' ClusterProfiles are never
//! written. The decision itself is the pure
//! [`gwhub_hub_rules::inventory::reporting`].

use std::collections::BTreeMap;
use std::time::Duration;

use gwhub_hub_rules::inventory::{ClusterProfile, Heard, REPORTING_CONDITION, reporting};
use gwhub_model::conditions::{Condition, carry_transition_time};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use gwhub_index::InventoryPort;

/// The field manager of the hub's condition on its ClusterProfiles.
pub const FIELD_MANAGER: &str = "gwhub-reporting";

/// How often the leader compares the conditions with what the hub knows.
const EVERY: Duration = Duration::from_secs(1);

/// Whether `a` and `b` say the same, their transition times aside.
fn same(a: &Condition, b: &Condition) -> bool {
    a.status == b.status
        && a.reason == b.reason
        && a.message == b.message
        && a.observed_generation == b.observed_generation
}

/// What the hub knows of each cluster now.
fn heard(index: &InventoryPort) -> BTreeMap<String, Heard> {
    index
        .clusters()
        .into_iter()
        .map(|c| {
            let h = if c.stale {
                Heard::Stale {
                    last_seen_millis: c.last_seen_millis,
                }
            } else {
                Heard::Fresh
            };
            (c.name, h)
        })
        .collect()
}

/// Keeps the condition on the hub's ClusterProfiles (`profiles`, followed
/// by the inventory watch) while this replica leads and the stored reports
/// are loaded (`ready`: a restarted hub knows who connected before, and
/// has caught up with the clusters of the replicas that ended, as for hub
/// Gateway status: see `kube::liveness::Gate`).
pub async fn run(
    api: Api<ClusterProfile>,
    index: InventoryPort,
    profiles: watch::Receiver<BTreeMap<String, ClusterProfile>>,
    leader: watch::Receiver<bool>,
    ready: watch::Receiver<bool>,
    shutdown: CancellationToken,
) {
    // What this replica wrote while leading: the watch may not show it yet.
    let mut written: BTreeMap<String, Condition> = BTreeMap::new();
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if !*leader.borrow() || !*ready.borrow() {
            written.clear();
            continue;
        }
        let managed = profiles.borrow().clone();
        written.retain(|name, _| managed.contains_key(name));
        let heard = heard(&index);
        let now = jiff::Timestamp::now();
        for (name, profile) in managed {
            let current = profile
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == REPORTING_CONDITION));
            let next = reporting(
                heard.get(&name).copied().unwrap_or(Heard::Never),
                profile.metadata.creation_timestamp.as_ref().map(|t| t.0),
                profile.metadata.generation,
                now,
            );
            let next = carry_transition_time(next, current);
            if current.is_some_and(|c| same(c, &next))
                || written.get(&name).is_some_and(|c| same(c, &next))
            {
                continue;
            }
            let body = json!({
                "apiVersion": "multicluster.x-k8s.io/v1alpha1",
                "kind": "ClusterProfile",
                "metadata": {"name": name, "namespace": profile.metadata.namespace},
                "status": {"conditions": [next]},
            });
            let pp = PatchParams::apply(FIELD_MANAGER).force();
            match api.patch_status(&name, &pp, &Patch::Apply(&body)).await {
                Ok(_) => {
                    tracing::info!(
                        cluster = %name,
                        status = %next.status,
                        reason = %next.reason,
                        "ClusterProfile {REPORTING_CONDITION} applied"
                    );
                    written.insert(name, next);
                }
                // Deleted meanwhile: the watch drops it.
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => tracing::warn!(
                    cluster = %name,
                    error = %e,
                    "cannot write {REPORTING_CONDITION} on the ClusterProfile; retrying"
                ),
            }
        }
    }
}
