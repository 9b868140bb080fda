//! The fleet inventory, pure: the SIG-Multicluster `ClusterProfile` and
//! `PlacementDecision` types (`multicluster.x-k8s.io/v1alpha1`, KEP-4322)
//! the hub reads its fleet and placements from, Kubernetes label selectors
//! (the `gwhub.io/expected-clusters` annotation) parsed and matched, and
//! the inventory's decisions: which agent may stream, which clusters a hub
//! Gateway expects (by selector, or by `gwhub.io/placement`).
//!
//! It exists apart from the hub runtime (which watches the ClusterProfiles
//! and asks these rules) so the rules are table-tested without an API
//! server, and tests and tools can name the type and generate its CRD.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The annotation on a hub Gateway naming its expected clusters: a label
/// selector over the inventory's ClusterProfiles (`""` selects all).
pub const EXPECTED_CLUSTERS_ANNOTATION: &str = "gwhub.io/expected-clusters";

/// The annotation on a hub Gateway naming a PlacementDecision in its
/// namespace (by name, or by its [`DECISION_KEY_LABEL`], all slices) whose
/// clusters it expects.
pub const PLACEMENT_ANNOTATION: &str = "gwhub.io/placement";

/// The label that ties the slices of one scheduling decision together.
pub const DECISION_KEY_LABEL: &str = "multicluster.x-k8s.io/decision-key";

/// A cluster of the fleet as its manager publishes it. The hub reads only
/// its name (the cluster's name) and labels (for selectors).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "multicluster.x-k8s.io",
    version = "v1alpha1",
    kind = "ClusterProfile",
    plural = "clusterprofiles",
    namespaced,
    status = "ClusterProfileStatus",
    doc = "ClusterProfile represents a single cluster in a multi-cluster deployment."
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileSpec {
    /// Human-readable name of the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// The cluster manager that owns this ClusterProfile.
    pub cluster_manager: ClusterManager,
}

/// Who manages a ClusterProfile.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct ClusterManager {
    /// The name of the cluster manager.
    pub name: String,
}

/// The cluster manager the hub publishes a ClusterProfile as when a join
/// finds none (spec section 7): `spec.clusterManager.name` and the
/// [`CLUSTER_MANAGER_LABEL`].
pub const HUB_MANAGER: &str = "gwhub";

/// The label naming a ClusterProfile's cluster manager (KEP-4322).
pub const CLUSTER_MANAGER_LABEL: &str = "x-k8s.io/cluster-manager";

impl ClusterProfile {
    /// The ClusterProfile a join publishes for `cluster` in `namespace`
    /// (the inventory's), with the hub as its cluster manager.
    pub fn for_join(cluster: &str, namespace: &str) -> ClusterProfile {
        let mut profile = ClusterProfile::new(
            cluster,
            ClusterProfileSpec {
                display_name: Some(cluster.to_owned()),
                cluster_manager: ClusterManager {
                    name: HUB_MANAGER.to_owned(),
                },
            },
        );
        profile.metadata.namespace = Some(namespace.to_owned());
        profile.metadata.labels =
            Some([(CLUSTER_MANAGER_LABEL.to_owned(), HUB_MANAGER.to_owned())].into());
        profile
    }

    /// Whether the hub published it (label and spec both name the hub): only
    /// those carry the hub's own status; other managers' are only read.
    pub fn managed_by_hub(&self) -> bool {
        self.spec.cluster_manager.name == HUB_MANAGER
            && self
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(CLUSTER_MANAGER_LABEL))
                .is_some_and(|m| m == HUB_MANAGER)
    }
}

/// The status condition the hub keeps on the ClusterProfiles it published
/// (and on no other): whether the cluster's agent reports to the hub.
pub const REPORTING_CONDITION: &str = "gwhub.io/Reporting";

/// What the hub knows of a cluster's reports, for [`reporting`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heard {
    /// Its agent never connected (no report known to the hub).
    Never,
    /// It reports, fresh.
    Fresh,
    /// Its last report or heartbeat, at this time (Unix milliseconds), is
    /// older than `--stale-after`.
    Stale { last_seen_millis: i64 },
}

/// The [`REPORTING_CONDITION`] for a cluster the hub has `heard` of, whose
/// ClusterProfile exists since `listed_since`, with its transition time
/// `now` (see `gwhub_model::conditions::carry_transition_time`). Its
/// message changes only with the state, so it is written only on a change.
pub fn reporting(
    heard: Heard,
    listed_since: Option<jiff::Timestamp>,
    observed_generation: Option<i64>,
    now: jiff::Timestamp,
) -> Condition {
    let (status, reason, message) = match heard {
        Heard::Fresh => (
            "True",
            "Streaming",
            "the cluster's agent reports to the hub".to_owned(),
        ),
        Heard::Stale { last_seen_millis } => (
            "False",
            "Stale",
            match jiff::Timestamp::from_millisecond(last_seen_millis) {
                Ok(t) if last_seen_millis > 0 => {
                    format!("no report or heartbeat from the cluster's agent since {t}")
                }
                _ => "no report or heartbeat from the cluster's agent".to_owned(),
            },
        ),
        Heard::Never => (
            "False",
            "NeverConnected",
            match listed_since {
                Some(t) => format!(
                    "the cluster's agent never connected to the hub (in the inventory since {t})"
                ),
                None => "the cluster's agent never connected to the hub".to_owned(),
            },
        ),
    };
    gwhub_model::conditions::new(
        REPORTING_CONDITION,
        status,
        reason,
        message,
        observed_generation,
        now,
    )
}

/// What the cluster manager reports of the cluster (the hub reads none of
/// it; kept so objects round-trip).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileStatus {
    /// The cluster's conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// The cluster's Kubernetes version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<ClusterVersion>,
}

/// The Kubernetes version of a cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ClusterVersion {
    /// The Kubernetes version of the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<String>,
}

/// The clusters a scheduler chose at a point in time (one slice of up to
/// 100). Its fields sit at the top level, not under `spec`, so it is
/// written out rather than derived.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlacementDecision {
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The chosen clusters.
    #[serde(default)]
    pub decisions: Vec<ClusterDecision>,
    /// The scheduler that made the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_name: Option<String>,
}

/// One chosen cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDecision {
    pub cluster_profile_ref: ClusterProfileRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A ClusterProfile by name (its namespace defaults to the decision's).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ClusterProfileRef {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl kube::Resource for PlacementDecision {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "PlacementDecision".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "multicluster.x-k8s.io".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1alpha1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "placementdecisions".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl PlacementDecision {
    /// Its CRD, written out with the type (its fields are top-level, which
    /// the derive does not do); `tests/tests/crd_pin.rs` pins it to
    /// upstream.
    pub fn crd() -> serde_json::Value {
        let string = || serde_json::json!({"type": "string"});
        serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "placementdecisions.multicluster.x-k8s.io"},
            "spec": {
                "group": "multicluster.x-k8s.io",
                "names": {"kind": "PlacementDecision", "plural": "placementdecisions",
                          "singular": "placementdecision"},
                "scope": "Namespaced",
                "versions": [{
                    "name": "v1alpha1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {
                        "description": "PlacementDecision publishes the set of clusters chosen by a scheduler at a point in time.",
                        "type": "object",
                        "required": ["decisions"],
                        "properties": {
                            "apiVersion": string(),
                            "kind": string(),
                            "metadata": {"type": "object"},
                            "decisions": {
                                "type": "array", "minItems": 0, "maxItems": 100,
                                "items": {
                                    "type": "object",
                                    "required": ["clusterProfileRef"],
                                    "properties": {
                                        "clusterProfileRef": {
                                            "type": "object",
                                            "required": ["name"],
                                            "properties": {"name": string(), "namespace": string()}
                                        },
                                        "reason": string()
                                    }
                                }
                            },
                            "schedulerName": string()
                        }
                    }}
                }]
            }
        })
    }
}

/// What the hub keeps of one PlacementDecision slice.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    pub namespace: String,
    pub name: String,
    /// Its [`DECISION_KEY_LABEL`], if any.
    pub decision_key: Option<String>,
    /// The chosen clusters (ClusterProfile names).
    pub clusters: BTreeSet<String>,
}

impl Placement {
    /// What the hub keeps of `d`.
    pub fn of(d: &PlacementDecision) -> Placement {
        Placement {
            namespace: d.metadata.namespace.clone().unwrap_or_default(),
            name: d.metadata.name.clone().unwrap_or_default(),
            decision_key: d
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(DECISION_KEY_LABEL))
                .cloned(),
            clusters: d
                .decisions
                .iter()
                .map(|c| c.cluster_profile_ref.name.clone())
                .collect(),
        }
    }
}

/// The clusters `gwhub.io/placement: <reference>` on a hub Gateway in
/// `namespace` expects: those of the PlacementDecision of that name there
/// and of every slice labelled with it as decision key; `None` if there is
/// no such PlacementDecision.
pub fn placed_clusters<'a>(
    placements: impl IntoIterator<Item = &'a Placement>,
    namespace: &str,
    reference: &str,
) -> Option<BTreeSet<String>> {
    let mut found = false;
    let mut clusters = BTreeSet::new();
    for p in placements {
        if p.namespace == namespace
            && (p.name == reference || p.decision_key.as_deref() == Some(reference))
        {
            found = true;
            clusters.extend(p.clusters.iter().cloned());
        }
    }
    found.then_some(clusters)
}

// ---- label selectors -------------------------------------------------------

/// One requirement of a label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// `key`
    Exists(String),
    /// `!key`
    Absent(String),
    /// `key=value`, `key==value`
    Equals(String, String),
    /// `key!=value` (also matches where `key` is absent)
    NotEquals(String, String),
    /// `key in (a,b)`
    In(String, BTreeSet<String>),
    /// `key notin (a,b)` (also matches where `key` is absent)
    NotIn(String, BTreeSet<String>),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::Absent(k) => !labels.contains_key(k),
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => !labels.get(k).is_some_and(|v| vs.contains(v)),
        }
    }
}

/// A Kubernetes label selector in its string form
/// (`a=b,c!=d,e in (x,y),f notin (z),!g,h`); the empty selector selects
/// everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector(pub Vec<Requirement>);

/// A selector that does not parse, naming the requirement and the problem.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("label selector {selector:?}: {requirement:?}: {problem}")]
pub struct SelectorError {
    pub selector: String,
    pub requirement: String,
    pub problem: RequirementProblem,
}

/// Why one requirement of a selector does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequirementProblem {
    #[error("empty requirement (a stray ',')")]
    Empty,
    /// A key or value that is not a label's: the rule it breaks.
    #[error("{0}")]
    Label(String),
    #[error("expected one of '=', '==', '!=', 'in', 'notin' after key {0:?}")]
    NoOperator(String),
    #[error("expected a parenthesised list of values, like (a,b)")]
    NoList,
    #[error("the list of values is empty")]
    EmptyList,
}

/// Most characters of a label value; a key's name part has the same limit.
const MAX_LABEL_VALUE: usize = 63;

fn label_value_problem(v: &str) -> Option<String> {
    if v.chars().count() > MAX_LABEL_VALUE {
        return Some(format!(
            "value {v:?} is longer than {MAX_LABEL_VALUE} characters"
        ));
    }
    let ok_chars = v
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    let ends_ok = |c: Option<u8>| c.is_none_or(|c| c.is_ascii_alphanumeric());
    if !ok_chars || !ends_ok(v.bytes().next()) || !ends_ok(v.bytes().last()) {
        return Some(format!(
            "value {v:?} is not a label value (letters, digits, '-', '_', '.', starting and ending with a letter or digit)"
        ));
    }
    None
}

fn label_key_problem(k: &str) -> Option<String> {
    let name = match k.split_once('/') {
        Some((prefix, name)) => {
            let prefix_ok = !prefix.is_empty()
                && prefix.len() <= 253
                && prefix.bytes().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'-' | b'.')
                });
            if !prefix_ok {
                return Some(format!("key {k:?} has an invalid prefix (a DNS subdomain)"));
            }
            name
        }
        None => k,
    };
    if name.is_empty() {
        return Some(format!("key {k:?} has an empty name"));
    }
    label_value_problem(name).map(|_| {
        format!(
            "key {k:?} is not a label key (a name of at most {MAX_LABEL_VALUE} letters, digits, '-', '_', '.', optionally prefixed by a DNS subdomain and '/')"
        )
    })
}

/// Splits `s` at the commas outside parentheses.
fn split_terms(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_requirement(term: &str) -> Result<Requirement, RequirementProblem> {
    let check = |problem: Option<String>, s: &str| match problem {
        Some(p) => Err(RequirementProblem::Label(p)),
        None => Ok(s.to_owned()),
    };
    let check_key = |k: &str| check(label_key_problem(k), k);
    let check_value = |v: &str| check(label_value_problem(v), v);
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Requirement::Absent(check_key(key.trim())?));
    }
    if let Some((k, v)) = term.split_once("!=") {
        return Ok(Requirement::NotEquals(
            check_key(k.trim())?,
            check_value(v.trim())?,
        ));
    }
    if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return Ok(Requirement::Equals(
            check_key(k.trim())?,
            check_value(v.trim())?,
        ));
    }
    let Some(at) = term.find(|c: char| c.is_whitespace() || c == '(') else {
        return Ok(Requirement::Exists(check_key(term)?));
    };
    let key = check_key(&term[..at])?;
    let rest = term[at..].trim_start();
    let (negated, rest) = if let Some(r) = rest.strip_prefix("notin") {
        (true, r)
    } else if let Some(r) = rest.strip_prefix("in") {
        (false, r)
    } else {
        return Err(RequirementProblem::NoOperator(key));
    };
    let Some(list) = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
    else {
        return Err(RequirementProblem::NoList);
    };
    let values = list
        .split(',')
        .map(|v| check_value(v.trim()))
        .collect::<Result<BTreeSet<String>, _>>()?;
    if list.trim().is_empty() {
        return Err(RequirementProblem::EmptyList);
    }
    Ok(match negated {
        true => Requirement::NotIn(key, values),
        false => Requirement::In(key, values),
    })
}

impl Selector {
    /// Parses a selector's string form; the empty string selects everything.
    pub fn parse(s: &str) -> Result<Selector, SelectorError> {
        if s.trim().is_empty() {
            return Ok(Selector::default());
        }
        split_terms(s)
            .into_iter()
            .map(|term| {
                let term = term.trim();
                if term.is_empty() {
                    return Err(SelectorError {
                        selector: s.to_owned(),
                        requirement: term.to_owned(),
                        problem: RequirementProblem::Empty,
                    });
                }
                parse_requirement(term).map_err(|problem| SelectorError {
                    selector: s.to_owned(),
                    requirement: term.to_owned(),
                    problem,
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Selector)
    }

    /// Whether `labels` meet every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| r.matches(labels))
    }
}

// ---- the inventory's decisions --------------------------------------------

/// `--inventory-mode`: what the hub does with an agent outside the inventory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Refuse it (`PERMISSION_DENIED`).
    #[default]
    Enforce,
    /// Admit it and flag it (Dashboard, logs).
    Observe,
}

/// The fleet as the hub knows it: the ClusterProfiles of one namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inventory {
    pub namespace: String,
    pub mode: Mode,
    /// Whether the first full list is in (before it, nobody can be told
    /// apart from a stranger).
    pub synced: bool,
    /// Each ClusterProfile's name and labels.
    pub clusters: BTreeMap<String, BTreeMap<String, String>>,
}

/// How an agent's stream was admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admitted {
    /// The cluster is in the inventory.
    Member,
    /// Outside the inventory, admitted by `--inventory-mode=observe`.
    Outside,
}

/// Why an agent's stream was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The inventory's first list is not in yet: try again soon.
    #[error(
        "the fleet inventory (ClusterProfiles in namespace {namespace:?}) is not loaded yet; reconnect shortly"
    )]
    NotLoaded { namespace: String },
    /// Not in the inventory, and the hub enforces it.
    #[error(
        "cluster {cluster:?} is not in the fleet inventory: no ClusterProfile {cluster:?} in namespace {namespace:?}"
    )]
    Outside { cluster: String, namespace: String },
    /// Its ClusterProfile was deleted while it streamed.
    #[error(
        "cluster {cluster:?} left the fleet inventory: its ClusterProfile in namespace {namespace:?} was deleted"
    )]
    Removed { cluster: String, namespace: String },
}

impl Inventory {
    /// An empty inventory of `namespace`, not yet listed.
    pub fn new(namespace: impl Into<String>, mode: Mode) -> Self {
        Inventory {
            namespace: namespace.into(),
            mode,
            synced: false,
            clusters: BTreeMap::new(),
        }
    }

    pub fn contains(&self, cluster: &str) -> bool {
        self.clusters.contains_key(cluster)
    }

    /// Whether an agent for `cluster` may stream.
    pub fn admit(&self, cluster: &str) -> Result<Admitted, Refusal> {
        if !self.synced {
            return Err(Refusal::NotLoaded {
                namespace: self.namespace.clone(),
            });
        }
        match (self.contains(cluster), self.mode) {
            (true, _) => Ok(Admitted::Member),
            (false, Mode::Observe) => Ok(Admitted::Outside),
            (false, Mode::Enforce) => Err(Refusal::Outside {
                cluster: cluster.to_owned(),
                namespace: self.namespace.clone(),
            }),
        }
    }

    /// The clusters `selector` selects, in name order.
    pub fn select(&self, selector: &Selector) -> Vec<&str> {
        self.clusters
            .iter()
            .filter(|(_, labels)| selector.matches(labels))
            .map(|(name, _)| name.as_str())
            .collect()
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Enforce => "enforce",
            Mode::Observe => "observe",
        })
    }
}

/// An inventory mode that is neither `enforce` nor `observe`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("inventory mode {0:?} is neither \"enforce\" nor \"observe\"")]
pub struct UnknownMode(pub String);

impl std::str::FromStr for Mode {
    type Err = UnknownMode;
    fn from_str(s: &str) -> Result<Self, UnknownMode> {
        match s {
            "enforce" => Ok(Mode::Enforce),
            "observe" => Ok(Mode::Observe),
            other => Err(UnknownMode(other.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_joins_profile_names_the_hub_and_only_such_profiles_are_the_hubs() {
        let p = ClusterProfile::for_join("east", "fleet");
        assert_eq!(p.metadata.name.as_deref(), Some("east"));
        assert_eq!(p.metadata.namespace.as_deref(), Some("fleet"));
        assert_eq!(p.spec.cluster_manager.name, "gwhub");
        assert_eq!(p.spec.display_name.as_deref(), Some("east"));
        assert!(p.managed_by_hub());
        // Another manager's, or the hub's name in only one of the two
        // places: not the hub's.
        let mut other = p.clone();
        other.spec.cluster_manager.name = "ocm".into();
        assert!(!other.managed_by_hub());
        let mut unlabelled = p.clone();
        unlabelled.metadata.labels = None;
        assert!(!unlabelled.managed_by_hub());
    }

    #[test]
    fn reporting_says_streaming_stale_since_or_never_connected() {
        let now = jiff::Timestamp::from_second(2_000_000_000).unwrap();
        let since = jiff::Timestamp::from_second(1_900_000_000).unwrap();
        let c = reporting(Heard::Fresh, Some(since), Some(3), now);
        assert_eq!(c.type_, "gwhub.io/Reporting");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "Streaming")
        );
        assert_eq!(c.observed_generation, Some(3));
        let c = reporting(
            Heard::Stale {
                last_seen_millis: 1_950_000_000_000,
            },
            Some(since),
            None,
            now,
        );
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "Stale"));
        assert!(c.message.contains("since 2031-10-17T"), "{}", c.message);
        let c = reporting(Heard::Never, Some(since), None, now);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "NeverConnected")
        );
        assert!(c.message.contains("since 2030-03-17T"), "{}", c.message);
        // The message does not move with the clock: no rewrite while
        // nothing changes.
        let later = jiff::Timestamp::from_second(2_000_000_100).unwrap();
        assert_eq!(
            reporting(Heard::Never, Some(since), None, later).message,
            c.message
        );
    }
}
