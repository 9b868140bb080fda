//! [`DnsView`]: what fleet DNS knows, per hostname, for the Dashboard API
//! (`ListDnsNames`), `gwhubctl dns plan` / `get dns` and the web page
//! (published on a `tokio::sync::watch` by the controller, read by the
//! Dashboard and the page).
//!
//! It lives in the index, beside the other published views, because it is
//! plain data that its readers (gRPC, the page) share with its writer (the
//! DNS controller): the readers then name only the index, never fleet DNS.

use std::collections::BTreeMap;

use gwhub_hub_rules::aggregate::GatewayKey;

/// Fleet DNS as the controller last decided it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DnsView {
    /// Per hostname.
    pub names: BTreeMap<String, NameView>,
    /// Whether fleet DNS is configured on this hub (`--dns-zone`).
    pub enabled: bool,
    /// The outputs written (`dnsendpoint`, `rfc2136`).
    pub outputs: Vec<String>,
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
    /// Per cluster, in name order.
    pub clusters: Vec<ClusterVerdict>,
    /// What the publishers said last, per record type (e.g. keeping the
    /// last set).
    pub reasons: Vec<String>,
    /// The name's state in a word (`Published`, `NotYetPublished`,
    /// `NoneEligible`, `WriteFailed`, `Conflict`).
    pub state: String,
    /// What the word leaves to say (why a write failed, who holds it).
    pub state_message: String,
    /// The last write of the name, if one was made since this replica
    /// leads.
    pub last_write: Option<LastWrite>,
}

/// One cluster's eligibility for a name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterVerdict {
    pub cluster: String,
    /// `None`: eligible; else the first rule it fails.
    pub ineligible: Option<Verdict>,
}

/// The first rule a cluster fails for a name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Spec section 8's rule, 1 to 4.
    pub rule: u8,
    /// A word for it (`LoadBalancerNotReady`, `Stale`, ...).
    pub code: String,
    pub message: String,
}

/// The last write of a name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LastWrite {
    pub at_millis: i64,
    /// `ok`, `conflict` or `error` (the metrics' `result`); a dry run's
    /// writes are `ok` (nothing was sent).
    pub result: String,
    pub message: String,
}
