//! The hub Gateway as the management cluster holds it, read into what the
//! aggregation and the status writer need of it. Pure: the Kubernetes side
//! builds it from its watch, the index aggregates with it.

use std::collections::BTreeSet;

use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus};
use gwhub_model::Condition;
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
    /// The `gwhub.io/expected-clusters` annotation (a label selector over
    /// the fleet inventory), if set.
    pub expected_clusters: Option<String>,
    /// The `gwhub.io/placement` annotation (a PlacementDecision in the hub
    /// Gateway's namespace, by name or decision key), if set.
    pub placement: Option<String>,
    /// The object's uid: [`LiveHub::carry_written`] carries the hub's last
    /// written conditions only within one object's life.
    pub uid: Option<String>,
    /// The hub's conditions as its last status write's answer had them.
    /// A watch can install an object older than that answer (another
    /// writer's change made before the hub's write, delivered after it);
    /// aggregating against its conditions would restart every unchanged
    /// condition's lastTransitionTime and write again. These take
    /// precedence as the previous conditions (see
    /// [`LiveHub::hub_gateway_with`]): the hub is the only writer of its
    /// types, so its own last write is their newest state.
    pub written: Vec<Condition>,
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
            expected_clusters: annotation(gw, crate::inventory::EXPECTED_CLUSTERS_ANNOTATION),
            placement: annotation(gw, crate::inventory::PLACEMENT_ANNOTATION),
            uid: gw.metadata.uid.clone(),
            written: Vec::new(),
        }
    }

    /// Reads the answer to the hub's own status write: as
    /// [`LiveHub::from_gateway`], its hub-owned conditions also kept as
    /// [`LiveHub::written`].
    pub fn from_written(gw: &Gateway, field_manager: &str) -> Self {
        let mut live = Self::from_gateway(gw, field_manager);
        live.written = live
            .status
            .conditions
            .iter()
            .flatten()
            .filter(|c| live.owned.contains(&c.type_))
            .cloned()
            .collect();
        live
    }

    /// Keeps `before`'s [`LiveHub::written`] when this object is the same
    /// Gateway (same uid) and has none of its own: a watch event carries
    /// no memory of the hub's writes.
    pub fn carry_written(&mut self, before: &LiveHub) {
        if self.written.is_empty() && self.uid.is_some() && self.uid == before.uid {
            self.written = before.written.clone();
        }
    }

    /// Splits the live conditions into the hub's (for lastTransitionTime)
    /// and other writers' (kept, counted toward the 8). The managedFields
    /// decide where they can; otherwise the engine's rule for unknown
    /// ownership ([`HubGateway::from_existing`]).
    pub fn hub_gateway(&self, reports: &[ClusterReport<'_>]) -> HubGateway {
        let reported = super::reported_types(reports);
        self.hub_gateway_with(|t| reported.contains(t))
    }

    /// [`LiveHub::hub_gateway`] where `reported(type)` tells whether some
    /// cluster reports a condition type (see
    /// [`super::Incremental::reports_type`]).
    pub fn hub_gateway_with(&self, reported: impl Fn(&str) -> bool) -> HubGateway {
        let existing = self.status.conditions.clone().unwrap_or_default();
        let guess = HubGateway::from_existing_with(self.generation, &existing, reported);
        let guessed_ours: BTreeSet<&str> =
            guess.previous.iter().map(|c| c.type_.as_str()).collect();
        let (mut previous, foreign): (Vec<Condition>, Vec<Condition>) =
            existing.into_iter().partition(|c: &Condition| {
                self.owned.contains(&c.type_)
                    || (guessed_ours.contains(c.type_.as_str()) && !self.others.contains(&c.type_))
            });
        for c in &self.written {
            match previous.iter_mut().find(|p| p.type_ == c.type_) {
                Some(p) => *p = c.clone(),
                None => previous.push(c.clone()),
            }
        }
        HubGateway {
            generation: self.generation,
            previous,
            foreign,
        }
    }
}

fn annotation(gw: &Gateway, key: &str) -> Option<String> {
    gw.metadata.annotations.as_ref()?.get(key).cloned()
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::aggregate::Freshness;

    fn cond(type_: &str, reason: &str) -> Value {
        json!({"type": type_, "status": "True", "reason": reason, "message": "",
               "lastTransitionTime": "2026-11-23T10:00:00Z"})
    }

    fn key(type_: &str) -> String {
        format!("k:{}", json!({"type": type_}))
    }

    fn fields(types: &[&str], extra: Value) -> Value {
        let mut conds = serde_json::Map::new();
        for t in types {
            conds.insert(key(t), json!({}));
        }
        let mut status = json!({"f:conditions": conds});
        if let (Some(s), Some(e)) = (status.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        json!({"f:status": status})
    }

    /// A hub Gateway: gwhub owns Accepted, its addresses and a listener; a
    /// policy controller set example.com/Policy through the status
    /// subresource; the creator's CRD defaults came with the object.
    fn gateway() -> Gateway {
        serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "web", "namespace": "ns", "generation": 4, "managedFields": [
                {"manager": "kubectl", "operation": "Update", "apiVersion": "gateway.networking.k8s.io/v1",
                 "fieldsType": "FieldsV1", "fieldsV1": fields(&["Programmed"], json!({}))},
                {"manager": "gwhub", "operation": "Apply", "apiVersion": "gateway.networking.k8s.io/v1",
                 "fieldsType": "FieldsV1", "subresource": "status",
                 "fieldsV1": fields(&["Accepted"], json!({"f:addresses": {}, "f:listeners": {"k:{\"name\":\"a.http\"}": {}}}))},
                {"manager": "policy-controller", "operation": "Apply", "apiVersion": "gateway.networking.k8s.io/v1",
                 "fieldsType": "FieldsV1", "subresource": "status",
                 "fieldsV1": fields(&["example.com/Policy", "DNSReady"], json!({}))},
            ]},
            "spec": {"gatewayClassName": "c", "listeners": []},
            "status": {"conditions": [
                cond("Accepted", "TrueInAllClusters"), cond("Programmed", "Pending"),
                cond("example.com/Policy", "Attached"), cond("DNSReady", "Set"),
                cond("example.com/Stray", "TrueInAllClusters"), cond("example.com/Other", "Set"),
            ]}
        }))
        .unwrap()
    }

    #[test]
    fn from_gateway_reads_who_owns_what() {
        let live = LiveHub::from_gateway(&gateway(), "gwhub");
        assert_eq!(live.generation, 4);
        assert_eq!(live.owned, BTreeSet::from(["Accepted".to_owned()]));
        let others: BTreeSet<String> = ["example.com/Policy", "DNSReady"].map(str::to_owned).into();
        assert_eq!(live.others, others);
        assert!(live.owns_addresses && live.owns_listeners);
        // Another field manager's name: nothing is the hub's.
        let live = LiveHub::from_gateway(&gateway(), "someone-else");
        assert!(live.owned.is_empty() && !live.owns_addresses && !live.owns_listeners);
    }

    /// The hub's conditions: what it owns; else what the clusters report or
    /// the aggregation's reasons mark, unless another writer set that type
    /// through the status subresource. The rest is other writers'.
    #[test]
    fn hub_gateway_splits_the_hubs_conditions_from_other_writers() {
        let live = LiveHub::from_gateway(&gateway(), "gwhub");
        let reported = GatewayStatus {
            conditions: Some(vec![
                serde_json::from_value(cond("Programmed", "Programmed")).unwrap(),
                serde_json::from_value(cond("DNSReady", "Ready")).unwrap(),
            ]),
            ..GatewayStatus::default()
        };
        let reports = [ClusterReport {
            cluster: "east",
            status: &crate::aggregate::ReportedStatus::from(&reported),
            freshness: Freshness::Fresh,
        }];
        let cases: [(&[ClusterReport<'_>], &[&str]); 2] = [
            (&reports, &["Accepted", "Programmed", "example.com/Stray"]),
            // Nobody reports Programmed: the CRD default is not the hub's.
            (&[], &["Accepted", "example.com/Stray"]),
        ];
        for (reports, ours) in cases {
            let hub = live.hub_gateway(reports);
            assert_eq!(hub.generation, 4);
            let previous: Vec<&str> = hub.previous.iter().map(|c| c.type_.as_str()).collect();
            assert_eq!(previous, ours, "{} reports", reports.len());
            let all = hub.previous.len() + hub.foreign.len();
            assert_eq!(all, 6);
            assert!(
                hub.foreign
                    .iter()
                    .all(|c| !ours.contains(&c.type_.as_str()))
            );
        }
    }
}
