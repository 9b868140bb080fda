//! The hub Gateway as the management cluster holds it, read into what the
//! aggregation and the status writer need of it. Pure: the Kubernetes side
//! builds it from its watch, the index aggregates with it.

use std::collections::BTreeSet;

use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus};
use gwhub_common::Condition;
use serde_json::Value;

use super::{ClusterReport, HubGateway};

/// A hub Gateway as it is on the management cluster: what its aggregation
/// needs of it (generation, the hub's previous conditions, other writers'
/// conditions) and what the status writer diffs against.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveHub {
    pub generation: i64,
    pub status: GatewayStatus,
    /// Condition types field manager `gwhub` owns.
    pub owned: BTreeSet<String>,
    /// Condition types another manager set through the status subresource
    /// (a deliberate writer, unlike the CRD's creation-time defaults).
    pub others: BTreeSet<String>,
    /// Whether field manager `gwhub` owns `status.addresses` (an atomic
    /// list): an empty one must then be applied (left out, so the API
    /// server drops what the hub wrote); otherwise it is another
    /// controller's, not the hub's to empty.
    pub owns_addresses: bool,
    /// Whether `gwhub` owns entries of `status.listeners`.
    pub owns_listeners: bool,
}

impl LiveHub {
    /// Reads `gw`, its managedFields telling `field_manager`'s (the hub's)
    /// fields from other writers'.
    pub fn from_gateway(gw: &Gateway, field_manager: &str) -> Self {
        let mut owned = BTreeSet::new();
        let mut others = BTreeSet::new();
        let (mut owns_addresses, mut owns_listeners) = (false, false);
        for entry in gw.metadata.managed_fields.iter().flatten() {
            let fields = entry.fields_v1.as_ref().map(|f| &f.0);
            let types = owned_condition_types(fields);
            if entry.manager.as_deref() == Some(field_manager) {
                owned.extend(types);
                let status = fields.and_then(|f| f.get("f:status"));
                owns_addresses |= status.and_then(|s| s.get("f:addresses")).is_some();
                owns_listeners |= status
                    .and_then(|s| s.get("f:listeners"))
                    .and_then(Value::as_object)
                    .is_some_and(|l| !l.is_empty());
            } else if entry.subresource.as_deref() == Some("status") {
                others.extend(types);
            }
        }
        LiveHub {
            generation: gw.metadata.generation.unwrap_or(0),
            status: gw.status.clone().unwrap_or_default(),
            owned,
            others,
            owns_addresses,
            owns_listeners,
        }
    }

    /// Splits the live conditions into the hub's (for lastTransitionTime)
    /// and other writers' (kept, counted toward the 8). The managedFields
    /// decide where they can; otherwise the engine's rule for unknown
    /// ownership ([`HubGateway::from_existing`]).
    pub fn hub_gateway(&self, reports: &[ClusterReport<'_>]) -> HubGateway {
        let existing = self.status.conditions.clone().unwrap_or_default();
        let guess = HubGateway::from_existing(self.generation, &existing, reports);
        let guessed_ours: BTreeSet<&str> =
            guess.previous.iter().map(|c| c.type_.as_str()).collect();
        let (previous, foreign) = existing.into_iter().partition(|c: &Condition| {
            self.owned.contains(&c.type_)
                || (guessed_ours.contains(c.type_.as_str()) && !self.others.contains(&c.type_))
        });
        HubGateway {
            generation: self.generation,
            previous,
            foreign,
        }
    }
}

/// The condition types a managedFields entry's fieldsV1 holds under
/// `status.conditions` (keys like `k:{"type":"Accepted"}`).
fn owned_condition_types(fields: Option<&Value>) -> Vec<String> {
    let Some(conds) = fields
        .and_then(|f| f.get("f:status"))
        .and_then(|s| s.get("f:conditions"))
        .and_then(Value::as_object)
    else {
        return Vec::new();
    };
    conds
        .keys()
        .filter_map(|k| k.strip_prefix("k:"))
        .filter_map(|k| serde_json::from_str::<Value>(k).ok())
        .filter_map(|k| k.get("type").and_then(Value::as_str).map(str::to_owned))
        .collect()
}
