//! [`DnsView`]: what fleet DNS knows, per hostname, for the Dashboard API,
//! `gwhubctl dns plan` / `get dns` and the web page (published on a
//! `tokio::sync::watch` by the controller).

use std::collections::BTreeMap;

use gwhub_hub_rules::aggregate::GatewayKey;

/// Fleet DNS as the controller last decided it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DnsView {
    /// Per hostname.
    pub names: BTreeMap<String, NameView>,
    /// Whether this replica writes DNS (the leader, past the restart gate).
    pub writing: bool,
    pub dry_run: bool,
}

/// One hostname.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NameView {
    pub zone: String,
    /// The hub Gateway that owns it.
    pub owner: Option<GatewayKey>,
    /// Per record type (`A`, `AAAA`, `CNAME`): the targets last written.
    pub published: BTreeMap<String, Vec<String>>,
    /// Per record type: the targets the rules want now (before rise and
    /// coalescing).
    pub desired: BTreeMap<String, Vec<String>>,
    /// Per cluster (in name order): `None` eligible, else the first rule
    /// it fails.
    pub clusters: Vec<(String, Option<String>)>,
    /// What the publishers said last (e.g. keeping the last set).
    pub reasons: Vec<String>,
    /// The condition state of the name (`Published`, `WriteFailed: ...`).
    pub state: String,
}
