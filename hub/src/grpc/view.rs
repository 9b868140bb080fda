//! The Dashboard's encoding of the index's views: an aggregated hub
//! Gateway and what was left out of it, as `gwhub.v1` messages. The index
//! builds each view once when it publishes it, so every watcher shares the
//! encoded form.

use std::collections::BTreeSet;
use std::sync::Arc;

use gwhub_proto::{convert, v1};
use parking_lot::Mutex;

use crate::aggregate::{Aggregation, GatewayKey, LiveHub, Omission};
use crate::index::{Cell, GatewayView};

/// Encodes a changed view; its revision is set when it is published
/// ([`GatewayView::set_revision`]). Omissions equal to `old`'s keep their
/// revision, so watchers that have them are not sent them again.
pub(crate) fn build_view(
    key: GatewayKey,
    aggregation: Aggregation,
    foreign: BTreeSet<String>,
    clusters: Vec<String>,
    cells: Vec<Cell>,
    old: Option<&GatewayView>,
    live: Option<Arc<LiveHub>>,
) -> GatewayView {
    let not_ready = crate::listing::not_ready(
        aggregation
            .status
            .conditions
            .iter()
            .flatten()
            .map(|c| c.status.as_str()),
    );
    let status = convert::status_to_proto(&aggregation.status).unwrap_or_else(|e| {
        tracing::error!(gateway = %key, error = %e, "aggregated status does not encode");
        v1::GatewayStatus::default()
    });
    // Unchanged omissions are copied from the old view, not formatted again.
    let unchanged = old.filter(|o| o.same_omissions(&aggregation.omissions));
    // 0: changed, set to the view's revision on publishing.
    let omissions_revision = unchanged.map_or(0, |o| o.omissions_revision);
    let lean = v1::AggregatedGateway {
        namespace: key.namespace.clone(),
        name: key.name.clone(),
        status: Some(status),
        clusters,
        omissions: Vec::new(),
        revision: 0,
        omissions_unchanged: true,
        // Set by the aggregation pass, which knows the expectation.
        missing_clusters: Vec::new(),
        unexpected_clusters: Vec::new(),
    };
    let omissions = match unchanged {
        Some(o) => o.omissions.clone(),
        None => aggregation
            .omissions
            .iter()
            .map(omission_to_proto)
            .collect(),
    };
    // Kept once, encoded (see `GatewayView::aggregation`): at 1,000
    // clusters a hub Gateway leaves out thousands of listeners and addresses.
    let Aggregation {
        status,
        omissions: engine_omissions,
    } = aggregation;
    // A new vector: collecting in place would keep the omissions' larger one.
    let mut omission_rules = Vec::with_capacity(engine_omissions.len());
    omission_rules.extend(
        engine_omissions
            .into_iter()
            .map(|o| (o.rule, o.cluster.is_some())),
    );
    GatewayView {
        key,
        aggregation: Aggregation {
            status,
            omissions: Vec::new(),
        },
        lean,
        omissions,
        omission_rules,
        omissions_revision,
        foreign,
        not_ready,
        cells,
        missing: Vec::new(),
        aggregated_with: Mutex::new(live),
    }
}

impl GatewayView {
    /// Whether the engine's `omissions` are the ones this view encodes.
    /// Exact: an omission is its cluster, item, names and rule, and its
    /// message is made of them alone; item codes are distinct.
    pub(crate) fn same_omissions(&self, omissions: &[Omission]) -> bool {
        self.omissions.len() == omissions.len()
            && self.omission_rules.len() == omissions.len()
            && self
                .omissions
                .iter()
                .zip(&self.omission_rules)
                .zip(omissions)
                .all(|((encoded, (rule, has_cluster)), o)| {
                    *has_cluster == o.cluster.is_some()
                        && encoded.cluster == o.cluster.as_deref().unwrap_or_default()
                        && encoded.item == o.item.code()
                        && *rule == o.rule
                        && encoded.names == o.names
                })
    }

    pub(crate) fn set_revision(&mut self, revision: u64) {
        self.lean.revision = revision;
        if self.omissions_revision == 0 {
            self.omissions_revision = revision;
        }
    }
}

/// The engine's omission as the Dashboard API spells it.
pub(crate) fn omission_to_proto(o: &Omission) -> v1::Omission {
    v1::Omission {
        cluster: o.cluster.clone().unwrap_or_default(),
        item: o.item.code().to_owned(),
        names: o.names.clone(),
        rule: o.rule.code().to_owned(),
        message: o.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use gateway_api::apis::standard::gateways::GatewayStatus;

    use super::*;
    use crate::aggregate::{Item, Rule};

    fn omission(cluster: Option<&str>, item: Item, names: &[&str], rule: Rule) -> Omission {
        Omission {
            cluster: cluster.map(str::to_owned),
            item,
            names: names.iter().map(|n| (*n).to_owned()).collect(),
            rule,
        }
    }

    fn view(omissions: Vec<Omission>) -> GatewayView {
        let aggregation = Aggregation {
            status: GatewayStatus::default(),
            omissions,
        };
        let key = GatewayKey::new("ns", "web");
        build_view(
            key,
            aggregation,
            BTreeSet::new(),
            Vec::new(),
            Vec::new(),
            None,
            None,
        )
    }

    /// The view keeps its omissions once, encoded, and still tells exactly
    /// whether a new aggregation left out the same: any field differing
    /// (also a rule's detail, a cluster of "" against none) is a change.
    #[test]
    fn omissions_are_kept_once_and_compared_exactly() {
        let base = || {
            vec![
                omission(
                    Some("east"),
                    Item::Listener,
                    &["east.a", "east.b"],
                    Rule::TooManyRoundRobin(64),
                ),
                omission(None, Item::Condition, &["X"], Rule::TooMany(8)),
            ]
        };
        let v = view(base());
        assert!(v.aggregation.omissions.is_empty());
        assert_eq!(v.omission_rules.capacity(), 2);
        assert_eq!(v.omissions.len(), 2);
        assert!(v.same_omissions(&base()));
        type Change = fn(&mut Vec<Omission>);
        let changed: [Change; 9] = [
            |o| o[0].cluster = Some("west".into()),
            |o| o[1].cluster = Some(String::new()),
            |o| o[0].item = Item::Address,
            |o| {
                o[0].names.pop();
            },
            |o| o[0].names[1] = "east.c".into(),
            |o| o[0].rule = Rule::TooManyRoundRobin(16),
            |o| o[1].rule = Rule::InvalidCondition("x".into()),
            |o| {
                o.pop();
            },
            |o| o.reverse(),
        ];
        for (i, change) in changed.iter().enumerate() {
            let mut o = base();
            change(&mut o);
            assert!(!v.same_omissions(&o), "change {i}");
            // What is published for it differs too.
            let encoded: Vec<v1::Omission> = o.iter().map(omission_to_proto).collect();
            assert_ne!(encoded, v.omissions, "change {i}");
        }
        assert!(view(Vec::new()).same_omissions(&[]));
    }
}
