//! What is not ready across the fleet, grouped by cause: the web page's
//! "Problems by cause" view (`/api/causes`).
//!
//! At 1,000 clusters a grid of cells cannot say that 37 clusters fail with
//! the same quota message; a list of causes with counts can. A cause is
//! `(kind, condition type, reason, normalised message)`:
//!
//! - every Gateway condition of a fresh cluster's report that is not
//!   `True` is one entry of the cause `(condition, type, reason,
//!   normalise(message))` (a type listed twice in one report counts once);
//! - a fresh report with no Gateway condition at all is one entry of
//!   [`CauseKind::NoConditions`];
//! - every report of a stale cluster is one entry of [`CauseKind::Stale`]
//!   (its conditions are old news: the cause to fix is the silence), and a
//!   stale cluster reporting nothing is still counted as a cluster;
//! - a cluster that never reported is a cluster of
//!   [`CauseKind::NeverReported`] (no entries: it has no Gateways);
//! - an aggregated condition of a hub Gateway that is not `True` for a
//!   reason of the hub's own (anything but `NotTrueInSomeClusters`, which
//!   the clusters' causes explain: e.g. the hub's `MultiClusterAggregated`
//!   when something was left out) is one entry of [`CauseKind::Hub`], with
//!   no cluster.
//!
//! [`normalise`] makes the same cause in different clusters one string.
//! Pure and deterministic: the groups do not depend on the order of the
//! input, and the entries of all groups add up to the not-ready entries.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use gateway_api::apis::standard::gateways::GatewayStatus;

use crate::aggregate::constants::REASON_NOT_TRUE_IN_SOME;
use crate::aggregate::{ClusterReport, Freshness, GatewayKey};

/// How much one answer lists (counts are always exact).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Groups listed, largest first.
    pub groups: usize,
    /// Cluster names listed per group (the page filters by them, so
    /// generous: a whole 1,000-cluster fleet).
    pub clusters: usize,
    /// Hub Gateway names listed per group.
    pub gateways: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            groups: 100,
            clusters: 1000,
            gateways: 20,
        }
    }
}

/// A cluster's liveness as the causes see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    Fresh,
    /// Nothing heard within `--stale-after`.
    Stale,
    /// Known to the hub but no report yet.
    NeverReported,
}

/// One known cluster (clusters that only appear in reports are taken
/// from the reports' freshness).
#[derive(Clone, Copy, Debug)]
pub struct ClusterFacts<'a> {
    pub name: &'a str,
    pub liveness: Liveness,
}

/// What kind of cause a group is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum CauseKind {
    /// A reported Gateway condition that is not True.
    Condition,
    /// The cluster is stale: nothing heard within `--stale-after`.
    Stale,
    /// The cluster is known but never reported.
    NeverReported,
    /// A fresh report with no Gateway condition.
    NoConditions,
    /// An aggregated condition the hub itself made not True.
    Hub,
}

/// One cause and who has it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CauseGroup {
    pub kind: CauseKind,
    /// The condition type ("" unless [`CauseKind::Condition`]).
    #[serde(rename = "type")]
    pub condition_type: String,
    pub reason: String,
    /// The normalised message (see [`normalise`]).
    pub message: String,
    /// One message as a cluster wrote it (from the first cluster by name).
    pub example: String,
    /// Distinct clusters with this cause.
    pub cluster_count: usize,
    /// Distinct hub Gateways with this cause.
    pub gateway_count: usize,
    /// `(cluster, Gateway, condition type)` entries.
    pub entries: usize,
    /// The clusters, by name, at most [`Limits::clusters`].
    pub clusters: Vec<String>,
    /// Clusters not listed.
    pub more_clusters: usize,
    /// The hub Gateways (`namespace/name`), at most [`Limits::gateways`].
    pub gateways: Vec<String>,
    pub more_gateways: usize,
}

/// Every cause, largest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Causes {
    pub groups: Vec<CauseGroup>,
    /// Groups not listed (past [`Limits::groups`]).
    pub more_groups: usize,
    /// Clusters looked at.
    pub cluster_count: usize,
    /// Clusters with at least one cause.
    pub affected_clusters: usize,
    /// Entries of all groups, listed or not.
    pub entries: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    kind: CauseKind,
    condition_type: String,
    reason: String,
    message: String,
}

#[derive(Default)]
struct Acc<'a> {
    /// The least hub Gateway of a [`CauseKind::Hub`] cause, with its raw message.
    hub_example: Option<(&'a GatewayKey, &'a str)>,
    clusters: BTreeSet<&'a str>,
    gateways: BTreeSet<&'a GatewayKey>,
    entries: usize,
    /// The least (cluster, Gateway) with its raw message.
    example: Option<(&'a str, &'a GatewayKey, &'a str)>,
}

impl<'a> Acc<'a> {
    fn add_hub(&mut self, key: &'a GatewayKey, raw: &'a str) {
        self.gateways.insert(key);
        self.entries += 1;
        if self.hub_example.is_none_or(|(k, _)| key < k) {
            self.hub_example = Some((key, raw));
        }
    }

    fn add(&mut self, cluster: &'a str, key: Option<&'a GatewayKey>, raw: &'a str) {
        self.clusters.insert(cluster);
        if let Some(key) = key {
            self.gateways.insert(key);
            self.entries += 1;
            if self.example.is_none_or(|(c, k, _)| (cluster, key) < (c, k)) {
                self.example = Some((cluster, key, raw));
            }
        }
    }
}

const STALE_MESSAGE: &str = "no report or heartbeat within --stale-after";
const NEVER_MESSAGE: &str = "known to the hub, no report yet";
const NO_CONDITIONS_MESSAGE: &str = "the report has no Gateway conditions";

fn special(kind: CauseKind) -> Key {
    let (reason, message) = match kind {
        CauseKind::Stale => ("Stale", STALE_MESSAGE),
        CauseKind::NeverReported => ("NeverReported", NEVER_MESSAGE),
        CauseKind::NoConditions => ("NoConditions", NO_CONDITIONS_MESSAGE),
        CauseKind::Condition | CauseKind::Hub => ("", ""),
    };
    Key {
        kind,
        condition_type: String::new(),
        reason: reason.to_owned(),
        message: message.to_owned(),
    }
}

/// Groups what is not ready by cause. `clusters` are the known clusters;
/// `reports` each cluster's report of each hub Gateway, `aggregated` each
/// hub Gateway's aggregated status (any order).
pub fn group<'a>(
    clusters: &[ClusterFacts<'a>],
    reports: &[(&'a GatewayKey, ClusterReport<'a>)],
    aggregated: &[(&'a GatewayKey, &'a GatewayStatus)],
    limits: Limits,
) -> Causes {
    let mut acc: BTreeMap<Key, Acc<'a>> = BTreeMap::new();
    let mut all: BTreeSet<&str> = BTreeSet::new();
    for c in clusters {
        all.insert(c.name);
        match c.liveness {
            Liveness::Fresh => {}
            Liveness::Stale => acc
                .entry(special(CauseKind::Stale))
                .or_default()
                .add(c.name, None, ""),
            Liveness::NeverReported => acc
                .entry(special(CauseKind::NeverReported))
                .or_default()
                .add(c.name, None, ""),
        }
    }
    add_reports(&mut acc, &mut all, reports);
    add_hub_conditions(&mut acc, aggregated);
    let affected: BTreeSet<&str> = acc
        .values()
        .flat_map(|a| a.clusters.iter().copied())
        .collect();
    let entries = acc.values().map(|a| a.entries).sum();
    let mut groups: Vec<(Key, Acc<'a>)> = acc.into_iter().collect();
    // Largest first; ties by key, so the order is the input's never.
    groups.sort_by(|(ka, a), (kb, b)| {
        (b.clusters.len(), b.gateways.len(), b.entries)
            .cmp(&(a.clusters.len(), a.gateways.len(), a.entries))
            .then_with(|| ka.cmp(kb))
    });
    let more_groups = groups.len().saturating_sub(limits.groups);
    let groups = groups
        .into_iter()
        .take(limits.groups)
        .map(|(k, a)| to_group(k, a, limits))
        .collect();
    Causes {
        groups,
        more_groups,
        cluster_count: all.len(),
        affected_clusters: affected.len(),
        entries,
    }
}

/// Adds each cluster's report of each hub Gateway: a stale report is one
/// entry of the stale cause, a report with no Gateway condition one of
/// [`CauseKind::NoConditions`], and every condition not `True` (a type
/// counted once per report) one of its normalised cause.
fn add_reports<'a>(
    acc: &mut BTreeMap<Key, Acc<'a>>,
    all: &mut BTreeSet<&'a str>,
    reports: &[(&'a GatewayKey, ClusterReport<'a>)],
) {
    let mut seen: BTreeSet<(&str, &GatewayKey, &str)> = BTreeSet::new();
    for (key, r) in reports {
        all.insert(r.cluster);
        if matches!(r.freshness, Freshness::Stale { .. }) {
            if seen.insert((r.cluster, key, "")) {
                acc.entry(special(CauseKind::Stale))
                    .or_default()
                    .add(r.cluster, Some(key), "");
            }
            continue;
        }
        let conditions = r.status.conditions();
        if conditions.is_empty() {
            if seen.insert((r.cluster, key, "")) {
                acc.entry(special(CauseKind::NoConditions))
                    .or_default()
                    .add(r.cluster, Some(key), "");
            }
            continue;
        }
        for c in conditions {
            if c.status() == "True" || !seen.insert((r.cluster, key, c.type_())) {
                continue;
            }
            let k = Key {
                kind: CauseKind::Condition,
                condition_type: c.type_().to_owned(),
                reason: c.reason().to_owned(),
                message: normalise(c.message(), r.cluster),
            };
            acc.entry(k)
                .or_default()
                .add(r.cluster, Some(key), c.message());
        }
    }
}

/// Adds each hub Gateway's aggregated conditions that are not `True` for
/// a reason of the hub's own (a type counted once per hub Gateway).
fn add_hub_conditions<'a>(
    acc: &mut BTreeMap<Key, Acc<'a>>,
    aggregated: &[(&'a GatewayKey, &'a GatewayStatus)],
) {
    let mut seen_hub: BTreeSet<(&GatewayKey, &str)> = BTreeSet::new();
    for (key, status) in aggregated {
        for c in status.conditions.iter().flatten() {
            if c.status == "True"
                || c.reason == REASON_NOT_TRUE_IN_SOME
                || !seen_hub.insert((key, c.type_.as_str()))
            {
                continue;
            }
            let k = Key {
                kind: CauseKind::Hub,
                condition_type: c.type_.clone(),
                reason: c.reason.clone(),
                message: normalise(&c.message, ""),
            };
            acc.entry(k).or_default().add_hub(key, &c.message);
        }
    }
}

/// One cause's group as shown: its example message (the least entry's raw
/// message, or the fixed message of a special cause), and its clusters and
/// hub Gateways up to the limits with how many more there are.
fn to_group(k: Key, a: Acc<'_>, limits: Limits) -> CauseGroup {
    CauseGroup {
        kind: k.kind,
        example: match k.kind {
            CauseKind::Condition => a.example.map(|(_, _, m)| m.to_owned()).unwrap_or_default(),
            CauseKind::Hub => a.hub_example.map(|(_, m)| m.to_owned()).unwrap_or_default(),
            _ => k.message.clone(),
        },
        condition_type: k.condition_type,
        reason: k.reason,
        message: k.message,
        cluster_count: a.clusters.len(),
        gateway_count: a.gateways.len(),
        entries: a.entries,
        clusters: a
            .clusters
            .iter()
            .take(limits.clusters)
            .map(|c| (*c).to_owned())
            .collect(),
        more_clusters: a.clusters.len().saturating_sub(limits.clusters),
        gateways: a
            .gateways
            .iter()
            .take(limits.gateways)
            .map(|g| g.to_string())
            .collect(),
        more_gateways: a.gateways.len().saturating_sub(limits.gateways),
    }
}

/// Stands in for the cluster's own name in a normalised message.
const CLUSTER: char = '\u{e000}';

/// A condition message with what differs between clusters for the same
/// cause replaced by placeholders, so the messages group:
///
/// 1. the cluster's own name, where it is a whole word (not next to a
///    letter or digit), becomes `<cluster>`;
/// 2. a quoted string (`"..."`, `` `...` ``, or `'...'` opening after
///    white space or `([{:=,"` and closing before white space or
///    `.,;:)]}!?"`, so an apostrophe is no quote) becomes `"<name>"` (in
///    its own quotes);
/// 3. of each word (a run of ASCII letters, digits and `-_.:/`, without
///    trailing punctuation) that holds a digit: a UUID or a hex string of
///    8 or more characters becomes `<id>`, an IPv4 or IPv6 address (with
///    a `:port` or `/prefix`) `<ip>`; otherwise each of its parts between
///    `-_.:/` that holds a digit becomes `<n>` (digits only) or `<id>`;
/// 4. runs of white space become one space; the ends are trimmed.
///
/// Words without a digit stay as they are: reasons, kinds and most
/// resource names in a message are the same in every cluster.
pub fn normalise(message: &str, cluster: &str) -> String {
    let marked = mark_cluster(message, cluster);
    let chars: Vec<char> = marked.chars().collect();
    let mut out = String::with_capacity(message.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if let Some(end) = quoted(&chars, i) {
            out.push(c);
            out.push_str("<name>");
            out.push(chars[end]);
            i = end + 1;
        } else if is_word_char(c) {
            let start = i;
            while i < chars.len() && is_word_char(chars[i]) {
                i += 1;
            }
            let mut end = i;
            while end > start && matches!(chars[end - 1], '.' | ':' | '/' | '-' | '_') {
                end -= 1;
            }
            let word: String = chars[start..end].iter().collect();
            out.push_str(&word_placeholder(&word));
            out.extend(&chars[end..i]);
        } else if c.is_whitespace() {
            if !out.is_empty() && !out.ends_with(' ') {
                out.push(' ');
            }
            i += 1;
        } else if c == CLUSTER {
            out.push_str("<cluster>");
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out.truncate(out.trim_end().len());
    out
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '/')
}

/// `message` with each whole-word occurrence of `cluster` as [`CLUSTER`]
/// (and any [`CLUSTER`] it held as U+FFFD).
fn mark_cluster(message: &str, cluster: &str) -> String {
    let message = message.replace(CLUSTER, "\u{fffd}");
    if cluster.is_empty() {
        return message;
    }
    let mut out = String::with_capacity(message.len());
    let mut rest = message.as_str();
    let mut before: Option<char> = None;
    while let Some(at) = rest.find(cluster) {
        let prev = rest[..at].chars().next_back().or(before);
        let next = rest[at + cluster.len()..].chars().next();
        let boundary = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric());
        out.push_str(&rest[..at]);
        if boundary(prev) && boundary(next) {
            out.push(CLUSTER);
            before = Some(CLUSTER);
            rest = &rest[at + cluster.len()..];
        } else {
            // Not a whole word: keep its first character, look again after it.
            let first = rest[at..].chars().next().unwrap_or(CLUSTER);
            out.push(first);
            before = Some(first);
            rest = &rest[at + first.len_utf8()..];
        }
    }
    out.push_str(rest);
    out
}

/// Where the quoted string opening at `i` closes, if it is one.
fn quoted(chars: &[char], i: usize) -> Option<usize> {
    let q = chars[i];
    match q {
        '"' | '`' => {
            let end = i + 1 + chars[i + 1..].iter().position(|&c| c == q)?;
            (end > i + 1).then_some(end)
        }
        // An apostrophe is not a quote: a single quote opens after white
        // space or an opening mark and closes before white space or a
        // closing mark.
        '\'' => {
            if i > 0 && !(chars[i - 1].is_whitespace() || "([{:=,\"".contains(chars[i - 1])) {
                return None;
            }
            (i + 2..chars.len()).find(|&j| {
                chars[j] == '\''
                    && chars
                        .get(j + 1)
                        .is_none_or(|&c| c.is_whitespace() || ".,;:)]}!?\"".contains(c))
            })
        }
        _ => None,
    }
}

fn word_placeholder(word: &str) -> Cow<'_, str> {
    if !word.bytes().any(|b| b.is_ascii_digit()) {
        return Cow::Borrowed(word);
    }
    if is_uuid(word) || is_hex_id(word) {
        return Cow::Borrowed("<id>");
    }
    if is_ip(word) {
        return Cow::Borrowed("<ip>");
    }
    let mut out = String::new();
    for part in word.split_inclusive(['-', '_', '.', ':', '/']) {
        let (body, sep) = match part.char_indices().last() {
            Some((at, '-' | '_' | '.' | ':' | '/')) => part.split_at(at),
            _ => (part, ""),
        };
        if body.bytes().any(|b| b.is_ascii_digit()) {
            if body.bytes().all(|b| b.is_ascii_digit()) {
                out.push_str("<n>");
            } else {
                out.push_str("<id>");
            }
        } else {
            out.push_str(body);
        }
        out.push_str(sep);
    }
    Cow::Owned(out)
}

fn is_uuid(w: &str) -> bool {
    let parts: Vec<&str> = w.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn is_hex_id(w: &str) -> bool {
    let w = w.strip_prefix("0x").unwrap_or(w);
    w.len() >= 8 && w.bytes().all(|b| b.is_ascii_hexdigit())
}

fn is_ip(w: &str) -> bool {
    let addr = w.split_once('/').map_or(w, |(a, _)| a);
    let v4 = |a: &str| {
        let parts: Vec<&str> = a.split('.').collect();
        parts.len() == 4
            && parts
                .iter()
                .all(|p| (1..=3).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
    };
    let v4_port = |a: &str| match a.rsplit_once(':') {
        Some((h, p)) => v4(h) && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()),
        None => false,
    };
    let v6 = |a: &str| {
        a.matches(':').count() >= 2
            && a.bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
    };
    v4(addr) || v4_port(addr) || v6(addr)
}

#[cfg(test)]
mod tests;
