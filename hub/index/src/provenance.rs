//! What a delta carries into the index about where it came from: the
//! [`Stamp`] of when its agent observed it. The ingest side makes one
//! ([`super::Index::stamp`]), the reports part hands it on with the changes
//! ([`super::Index::apply_stamped`]), and the aggregator keeps it until the status
//! write (`aggregator/provenance.rs`).
//!
//! It exists apart from all three so that the reports part does not name
//! the aggregator to pass one along.

use gwhub_hub_rules::aggregate::GatewayKey;

/// When an agent observed a delta's changes (its `observed_unix_millis`),
/// for the hub Gateways on the management cluster it changed: handed to
/// [`super::Index::apply_stamped`], it lands with the changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    pub(super) keys: Vec<GatewayKey>,
    pub(super) at: i64,
}
