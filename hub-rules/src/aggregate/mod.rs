//! The hub's aggregation engine: the reports of a hub Gateway's clusters in,
//! the hub Gateway's status out. Pure (no I/O, no clock, no async), so the
//! gRPC runtime, the CLI and the tests all get byte-identical results for the
//! same inputs, whatever order the reports arrived in.

pub mod addresses;
pub mod compact;
pub mod conditions;
pub mod constants;
pub mod fleet;
pub mod incremental;
pub mod limits;
pub mod listeners;
pub mod live;
pub mod omissions;

use std::collections::BTreeSet;

use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_model::Condition;
use jiff::Timestamp;

pub use compact::{Interner, ReportedStatus};
pub use constants::*;
pub use fleet::{Fleet, GatewayKey};
pub use incremental::{Incremental, Parts};
pub use live::LiveHub;
pub use omissions::{Item, Omission, Omissions, Rule};

use limits::{MAX_CONDITIONS, condition_problem, is_condition_type};

/// Whether a cluster's report can be trusted as current.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Freshness {
    Fresh,
    /// No report or heartbeat for too long; `last_report` is named in every
    /// aggregated condition so operators know how old the data is.
    Stale {
        last_report: Timestamp,
    },
}

/// One cluster's view of the Gateway, borrowed so re-aggregation copies
/// nothing but the output.
#[derive(Clone, Copy, Debug)]
pub struct ClusterReport<'a> {
    pub cluster: &'a str,
    /// The compact form the hub keeps (see [`compact`]).
    pub status: &'a ReportedStatus,
    pub freshness: Freshness,
}

/// What the hub Gateway already carries.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HubGateway {
    /// `metadata.generation`, written as every condition's observedGeneration.
    pub generation: i64,
    /// The conditions the hub wrote last time (for lastTransitionTime).
    pub previous: Vec<Condition>,
    /// Other writers' conditions on the hub Gateway: kept as they are and
    /// counted toward the 8.
    pub foreign: Vec<Condition>,
}

impl HubGateway {
    /// Splits a hub Gateway's existing conditions when the caller cannot tell
    /// whose they are (the CLI, reading a file): a condition of the hub's own
    /// type or of a type the clusters report is the hub's; any other type is
    /// another writer's. A condition with one of the aggregation's reasons
    /// (`TrueInAllClusters`, `NotTrueInSomeClusters`) is the hub's too, so a
    /// type no cluster reports any more drops out instead of lingering as
    /// another writer's.
    pub fn from_existing(
        generation: i64,
        existing: &[Condition],
        reports: &[ClusterReport<'_>],
    ) -> Self {
        let reported = reported_types(reports);
        Self::from_existing_with(generation, existing, |t| reported.contains(t))
    }

    /// [`HubGateway::from_existing`] where `reported(type)` tells whether
    /// some cluster reports a condition type (see
    /// [`Incremental::reports_type`]).
    pub fn from_existing_with(
        generation: i64,
        existing: &[Condition],
        reported: impl Fn(&str) -> bool,
    ) -> Self {
        let (previous, foreign) = existing.iter().cloned().partition(|c| {
            c.type_ == OWN_CONDITION
                || reported(c.type_.as_str())
                || c.reason == REASON_TRUE_IN_ALL
                || c.reason == REASON_NOT_TRUE_IN_SOME
        });
        HubGateway {
            generation,
            previous,
            foreign,
        }
    }
}

/// Every Gateway-level condition type any of `reports` carries.
pub(crate) fn reported_types<'a>(reports: &[ClusterReport<'a>]) -> BTreeSet<&'a str> {
    reports
        .iter()
        .flat_map(|r| r.status.conditions())
        .map(|c| c.type_())
        .collect()
}

/// Choices an operator can make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Address type written for cluster `Hostname` addresses.
    pub hostname_address_type: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            hostname_address_type: HOSTNAME_ADDRESS_TYPE.to_owned(),
        }
    }
}

impl Options {
    /// Options with another hostname address type (e.g. the draft spelling
    /// [`HOSTNAME_ADDRESS_TYPE_DRAFT`]); it must be a domain-prefixed type the
    /// CRD accepts.
    pub fn with_hostname_address_type(type_: &str) -> Result<Self, AggregateError> {
        if limits::is_multi_cluster_address_type(type_) {
            Ok(Options {
                hostname_address_type: type_.to_owned(),
            })
        } else {
            Err(AggregateError::HostnameAddressType(type_.to_owned()))
        }
    }
}

/// The aggregated status and everything left out of it.
#[derive(Clone, Debug, PartialEq)]
pub struct Aggregation {
    pub status: GatewayStatus,
    /// Also named in the hub's own condition; kept structured for the
    /// Dashboard API.
    pub omissions: Vec<Omission>,
}

/// Inputs the engine refuses rather than guess about.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AggregateError {
    #[error("cluster {0:?} reported twice for the same Gateway")]
    DuplicateCluster(String),
    #[error(
        "hostname address type {0:?} is not a domain-prefixed address type (like {HOSTNAME_ADDRESS_TYPE})"
    )]
    HostnameAddressType(String),
}

/// Why an expected cluster does not report the Gateway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Absence {
    /// The hub never heard of the cluster (no stream, nothing stored).
    NeverReported,
    /// The cluster is known to the hub but does not report this Gateway.
    GatewayAbsent,
}

/// A cluster the hub Gateway expects (see [`Expectation`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedCluster {
    pub name: String,
    /// Whether the hub knows the cluster (connected now or before, or its
    /// report stored): decides the fragment when it does not report the
    /// Gateway.
    pub known: bool,
}

impl ExpectedCluster {
    fn absence(&self) -> Absence {
        match self.known {
            true => Absence::GatewayAbsent,
            false => Absence::NeverReported,
        }
    }
}

/// What a hub Gateway expects of the fleet (`gwhub.io/expected-clusters`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expectation {
    /// These clusters (any order; a name twice counts once).
    Clusters(Vec<ExpectedCluster>),
    /// The expectation cannot be read (an invalid selector): the problem,
    /// named in the hub's own condition.
    Invalid(String),
}

/// The expected clusters that do not report (`reports(name)` is false),
/// with why, in name order.
fn missing(expected: &[ExpectedCluster], reports: impl Fn(&str) -> bool) -> Vec<(&str, Absence)> {
    let mut out: Vec<(&str, Absence)> = expected
        .iter()
        .filter(|e| !reports(&e.name))
        .map(|e| (e.name.as_str(), e.absence()))
        .collect();
    out.sort_by(|a, b| a.0.cmp(b.0));
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

/// An expected cluster that does not report the hub Gateway, as the
/// Dashboard lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MissingCluster {
    pub cluster: String,
    /// The hub does not know the cluster at all (see
    /// [`ExpectedCluster::known`]).
    pub never_reported: bool,
}

/// For the Dashboard: the expected clusters that do not report the hub
/// Gateway (see `missing`) and the `reporting` ones it does not expect,
/// each in name order; both empty without a list of expected clusters.
pub fn missing_and_unexpected(
    expectation: Option<&Expectation>,
    reporting: &[String],
) -> (Vec<MissingCluster>, Vec<String>) {
    let Some(Expectation::Clusters(expected)) = expectation else {
        return (Vec::new(), Vec::new());
    };
    let reporting: BTreeSet<&str> = reporting.iter().map(String::as_str).collect();
    let expected_names: BTreeSet<&str> = expected.iter().map(|e| e.name.as_str()).collect();
    let missing = missing(expected, |name| reporting.contains(name))
        .into_iter()
        .map(|(name, absence)| MissingCluster {
            cluster: name.to_owned(),
            never_reported: absence == Absence::NeverReported,
        })
        .collect();
    let unexpected = reporting
        .into_iter()
        .filter(|c| !expected_names.contains(c))
        .map(str::to_owned)
        .collect();
    (missing, unexpected)
}

/// What an expectation means for the output: the number of expected
/// clusters, the missing ones (see [`missing`]) and the problem reading it.
#[allow(clippy::type_complexity)]
fn read_expectation(
    expectation: Option<&Expectation>,
    reports: impl Fn(&str) -> bool,
) -> (Option<usize>, Vec<(&str, Absence)>, Option<String>) {
    match expectation {
        None => (None, Vec::new(), None),
        Some(Expectation::Clusters(e)) => {
            let mut names: Vec<&str> = e.iter().map(|c| c.name.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            (Some(names.len()), missing(e, reports), None)
        }
        Some(Expectation::Invalid(why)) => (None, Vec::new(), Some(why.clone())),
    }
}

/// Aggregates the reports of a hub Gateway's clusters into its status.
///
/// `reports` may come in any order; a cluster named twice is an error.
pub fn aggregate(
    hub: &HubGateway,
    reports: &[ClusterReport<'_>],
    options: &Options,
    now: Timestamp,
) -> Result<Aggregation, AggregateError> {
    aggregate_expected(hub, reports, None, options, now)
}

/// [`aggregate`] for a hub Gateway that expects clusters: each expected
/// cluster that does not report counts as not True for every aggregated
/// type (`<cluster> never reported`, `<cluster> does not report this
/// Gateway`), and the hub's own condition counts `N of M expected
/// clusters` and names the missing ones. With `None`, exactly
/// [`aggregate`].
pub fn aggregate_expected(
    hub: &HubGateway,
    reports: &[ClusterReport<'_>],
    expectation: Option<&Expectation>,
    options: &Options,
    now: Timestamp,
) -> Result<Aggregation, AggregateError> {
    let mut reports = reports.to_vec();
    reports.sort_by(|a, b| a.cluster.cmp(b.cluster));
    if let Some(w) = reports.windows(2).find(|w| w[0].cluster == w[1].cluster) {
        return Err(AggregateError::DuplicateCluster(w[0].cluster.to_owned()));
    }
    let reports = &reports[..];
    let (expected, absent, invalid) = read_expectation(expectation, |name| {
        reports.binary_search_by(|r| r.cluster.cmp(name)).is_ok()
    });
    let mut omissions = Omissions::default();

    // Gateway-level condition types; invalid ones cannot be written.
    let mut types: BTreeSet<&str> = BTreeSet::new();
    for r in reports {
        types.extend(condition_types(r.cluster, r.status, &mut omissions));
    }
    let (foreign, kept) = plan_conditions(hub, &types, &mut omissions);

    let addresses = addresses::aggregate(reports, options, &mut omissions);
    let listeners = listeners::aggregate(reports, &mut omissions);

    let generation = hub.generation.max(0);
    let mut out_conditions = Vec::with_capacity(kept.len() + foreign.len() + 1);
    for t in kept {
        let s = conditions::summarize_expected(t, reports, &absent);
        out_conditions.push(conditions::to_condition(
            t,
            s.status,
            s.reason,
            s.message,
            generation,
            &hub.previous,
            now,
        ));
    }
    let fragments = omissions.fragments();
    let (status, reason, message) = own_summary(
        reports.len(),
        expected,
        &absent,
        invalid,
        fragments.len(),
        fragments,
    );
    close_conditions(
        &mut out_conditions,
        (status, reason, message),
        foreign,
        hub,
        now,
    );

    Ok(Aggregation {
        status: GatewayStatus {
            addresses: Some(addresses),
            attached_listener_sets: None,
            conditions: Some(out_conditions),
            listeners: Some(listeners),
        },
        omissions: omissions.0,
    })
}

/// The Gateway-level condition types `cluster` reports that can be written
/// (possibly repeated); the others go to `omissions`, one entry per type.
pub(crate) fn condition_types<'a>(
    cluster: &str,
    status: &'a ReportedStatus,
    omissions: &mut Omissions,
) -> Vec<&'a str> {
    let mut valid = Vec::new();
    let mut bad = BTreeSet::new();
    for c in status.conditions() {
        if is_condition_type(c.type_()) {
            valid.push(c.type_());
        } else if bad.insert(c.type_()) {
            let why = Rule::InvalidCondition(
                "type does not match the condition type pattern or is longer than 316 characters"
                    .into(),
            );
            omissions.push(Some(cluster), Item::Condition, c.type_().to_owned(), why);
        }
    }
    valid
}

/// Which of other writers' conditions are kept (valid, one per type, never
/// the hub's own) and which aggregated `types` get a condition, in output
/// order: Accepted, Programmed, then by name, within the 8 the CRD allows.
pub(crate) fn plan_conditions<'h, 't>(
    hub: &'h HubGateway,
    types: &BTreeSet<&'t str>,
    omissions: &mut Omissions,
) -> (Vec<&'h Condition>, Vec<&'t str>) {
    let mut foreign: Vec<&Condition> = Vec::new();
    for c in &hub.foreign {
        let rule = if c.type_ == OWN_CONDITION {
            Some(Rule::OwnType)
        } else if let Some(why) = condition_problem(c) {
            Some(Rule::InvalidCondition(why))
        } else if foreign.iter().any(|f| f.type_ == c.type_) {
            Some(Rule::DuplicateConditionType)
        } else if foreign.len() >= MAX_CONDITIONS - 1 {
            Some(Rule::TooMany(MAX_CONDITIONS))
        } else {
            None
        };
        match rule {
            Some(rule) => omissions.push(None, Item::ForeignCondition, c.type_.clone(), rule),
            None => foreign.push(c),
        }
    }

    // Priority: Accepted, Programmed, then by name; the own condition and
    // other writers' conditions take their slots first.
    let mut ordered: Vec<&str> = Vec::with_capacity(types.len());
    for p in PRIORITY_TYPES {
        if let Some(t) = types.get(p) {
            ordered.push(*t);
        }
    }
    ordered.extend(
        types
            .iter()
            .copied()
            .filter(|t| !PRIORITY_TYPES.contains(t)),
    );
    let mut budget = MAX_CONDITIONS - 1 - foreign.len();
    let mut kept = Vec::new();
    for t in ordered {
        if t == OWN_CONDITION {
            omissions.push(None, Item::Condition, t.to_owned(), Rule::OwnType);
        } else if foreign.iter().any(|f| f.type_ == t) {
            omissions.push(
                None,
                Item::Condition,
                t.to_owned(),
                Rule::TypeOwnedByOtherWriter,
            );
        } else if budget == 0 {
            omissions.push(
                None,
                Item::Condition,
                t.to_owned(),
                Rule::TooMany(MAX_CONDITIONS),
            );
        } else {
            budget -= 1;
            kept.push(t);
        }
    }
    (foreign, kept)
}

/// Ends a hub Gateway's conditions the same way in the full and the
/// incremental aggregation: the hub's own condition from its summary
/// `(status, reason, message)`, then the other writers' conditions as
/// they are.
pub(crate) fn close_conditions(
    out: &mut Vec<Condition>,
    (status, reason, message): (&'static str, &'static str, String),
    foreign: Vec<&Condition>,
    hub: &HubGateway,
    now: jiff::Timestamp,
) {
    out.push(conditions::to_condition(
        OWN_CONDITION,
        status,
        reason,
        message,
        hub.generation.max(0),
        &hub.previous,
        now,
    ));
    out.extend(foreign.into_iter().cloned());
}

/// The hub's own condition's status, reason and message over `reports`
/// reporting clusters: `fragments` yields the `count` omission fragments
/// in order (taken lazily, only as far as the message shows).
pub(crate) fn own_summary(
    reports: usize,
    expected: Option<usize>,
    absent: &[(&str, Absence)],
    invalid: Option<String>,
    count: usize,
    fragments: impl IntoIterator<Item = String>,
) -> (&'static str, &'static str, String) {
    let absent_fragments = || {
        absent
            .iter()
            .map(|(c, why)| conditions::absence_fragment(c, *why))
    };
    let count = count + usize::from(invalid.is_some());
    let fragments = invalid.into_iter().chain(fragments);
    let max = limits::MAX_MESSAGE;
    if reports == 0 {
        let all = std::iter::once("No cluster reports this Gateway".to_owned())
            .chain(absent_fragments())
            .chain(fragments);
        let n = 1 + absent.len() + count;
        (
            "False",
            REASON_NO_CLUSTERS,
            conditions::cap_join_iter(all, n, MORE_PROBLEMS, max),
        )
    } else if count > 0 {
        (
            "False",
            REASON_VALIDATION_FAILED,
            conditions::cap_join_iter(fragments, count, MORE_PROBLEMS, max),
        )
    } else if let Some(m) = expected {
        let n = m - absent.len();
        let noun = if m == 1 { "cluster" } else { "clusters" };
        let all = std::iter::once(format!(
            "Aggregated the status of {n} of {m} expected {noun}"
        ))
        .chain(absent_fragments());
        (
            "True",
            REASON_AGGREGATED,
            conditions::cap_join_iter(all, 1 + absent.len(), MORE_CLUSTERS, max),
        )
    } else {
        let noun = if reports == 1 { "cluster" } else { "clusters" };
        (
            "True",
            REASON_AGGREGATED,
            format!("Aggregated the status of {reports} {noun}"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expected(names: &[(&str, bool)]) -> Expectation {
        Expectation::Clusters(
            names
                .iter()
                .map(|(name, known)| ExpectedCluster {
                    name: (*name).to_owned(),
                    known: *known,
                })
                .collect(),
        )
    }

    #[test]
    fn missing_and_unexpected_clusters_in_name_order() {
        let invalid = Expectation::Invalid("bad selector".to_owned());
        let both = expected(&[("west", true), ("north", false), ("east", true)]);
        let twice = expected(&[("b", false), ("a", true), ("b", true)]);
        // (expectation, reporting, missing (name, never reported), unexpected)
        type Case<'a> = (
            Option<&'a Expectation>,
            &'a [&'a str],
            &'a [(&'a str, bool)],
            &'a [&'a str],
        );
        let cases: [Case<'_>; 6] = [
            (None, &["east"], &[], &[]),
            (Some(&invalid), &["east"], &[], &[]),
            (Some(&both), &["east", "west", "north"], &[], &[]),
            (
                Some(&both),
                &["south", "east", "a"],
                &[("north", true), ("west", false)],
                &["a", "south"],
            ),
            (
                Some(&both),
                &[],
                &[("east", false), ("north", true), ("west", false)],
                &[],
            ),
            // A name expected twice is missing once, as first listed.
            (Some(&twice), &["c"], &[("a", false), ("b", true)], &["c"]),
        ];
        for (expectation, reporting, missing, unexpected) in cases {
            let reporting: Vec<String> = reporting.iter().map(|c| (*c).to_owned()).collect();
            let (got_missing, got_unexpected) = missing_and_unexpected(expectation, &reporting);
            let want: Vec<MissingCluster> = missing
                .iter()
                .map(|(cluster, never_reported)| MissingCluster {
                    cluster: (*cluster).to_owned(),
                    never_reported: *never_reported,
                })
                .collect();
            assert_eq!(got_missing, want, "{expectation:?} {reporting:?}");
            assert_eq!(got_unexpected, unexpected, "{expectation:?} {reporting:?}");
        }
    }
}
