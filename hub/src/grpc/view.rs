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
    let unchanged = old.filter(|o| o.aggregation.omissions == aggregation.omissions);
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
    };
    let omissions = match unchanged {
        Some(o) => o.omissions.clone(),
        None => aggregation
            .omissions
            .iter()
            .map(omission_to_proto)
            .collect(),
    };
    GatewayView {
        key,
        aggregation,
        lean,
        omissions,
        omissions_revision,
        foreign,
        not_ready,
        cells,
        aggregated_with: Mutex::new(live),
    }
}

impl GatewayView {
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
