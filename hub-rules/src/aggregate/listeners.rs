//! `status.listeners`: every cluster listener as `<cluster>.<listener>` with
//! its attachedRoutes, supportedKinds and conditions.

use gateway_api::apis::standard::gateways::GatewayStatusListeners;
use gwhub_model::Condition;

use super::ClusterReport;
use super::compact::{ReportedCondition, ReportedListener, ReportedStatus};
use super::limits::{
    MAX_CONDITIONS, MAX_LISTENERS, MAX_SECTION_NAME, MAX_SUPPORTED_KINDS, is_dns_label,
    is_section_name, reported_condition_problem, round_robin, supported_kind_problem,
};
use super::omissions::{Item, Omissions, Rule};

/// The hub's listeners from `reports` (in cluster order), at most 64.
pub fn aggregate(
    reports: &[ClusterReport<'_>],
    omissions: &mut Omissions,
) -> Vec<GatewayStatusListeners> {
    // Validate names first and build only the listeners that are kept.
    let per_cluster: Vec<Vec<&ReportedListener>> = reports
        .iter()
        .map(|r| valid(r.cluster, r.status, omissions))
        .collect();
    let lens: Vec<usize> = per_cluster.iter().map(Vec::len).collect();
    let kept = round_robin(&lens, MAX_LISTENERS);
    let mut out = Vec::with_capacity(MAX_LISTENERS);
    for ((r, list), keep) in reports.iter().zip(per_cluster).zip(kept) {
        for l in &list[..keep] {
            out.push(build(r.cluster, l, omissions));
        }
        for l in &list[keep..] {
            omissions.push(
                Some(r.cluster),
                Item::Listener,
                full_name(r.cluster, l),
                Rule::TooManyRoundRobin(MAX_LISTENERS),
            );
        }
    }
    out
}

pub(crate) fn full_name(cluster: &str, l: &ReportedListener) -> String {
    format!("{cluster}.{}", l.name)
}

/// The hub's copy of a kept listener, without what the CRD would reject.
pub(crate) fn build(
    cluster: &str,
    l: &ReportedListener,
    omissions: &mut Omissions,
) -> GatewayStatusListeners {
    let name = full_name(cluster, l);
    let conditions = valid_conditions(cluster, &name, &l.conditions, omissions);
    // Always present (an empty list where the cluster reported none): before
    // Gateway API v1.5 the CRD requires supportedKinds in every listener
    // entry, and a management cluster may run v1.2.1 (OpenShift 4.19/4.20)
    // while a workload cluster's controller on v1.5 omits it.
    let mut supported_kinds = Vec::new();
    {
        let out = &mut supported_kinds;
        for k in l.supported_kinds() {
            let label = format!("{name}:{}", k.kind);
            if let Some(why) = supported_kind_problem(k) {
                omissions.push(
                    Some(cluster),
                    Item::SupportedKind,
                    label,
                    Rule::InvalidSupportedKind(why),
                );
            } else if out.len() >= MAX_SUPPORTED_KINDS {
                omissions.push(
                    Some(cluster),
                    Item::SupportedKind,
                    label,
                    Rule::TooMany(MAX_SUPPORTED_KINDS),
                );
            } else {
                out.push(k.to_kind());
            }
        }
    }
    GatewayStatusListeners {
        attached_routes: l.attached_routes,
        conditions,
        name,
        supported_kinds: Some(supported_kinds),
    }
}

/// A listener's conditions the CRD accepts: valid, one per type, at most 8.
fn valid_conditions(
    cluster: &str,
    listener: &str,
    conditions: &[ReportedCondition],
    omissions: &mut Omissions,
) -> Vec<Condition> {
    let mut out: Vec<Condition> = Vec::new();
    for c in conditions {
        let label = format!("{listener}:{}", c.type_());
        let cluster = Some(cluster);
        if let Some(why) = reported_condition_problem(c) {
            omissions.push(
                cluster,
                Item::ListenerCondition,
                label,
                Rule::InvalidCondition(why),
            );
        } else if out.iter().any(|o| o.type_ == c.type_()) {
            omissions.push(
                cluster,
                Item::ListenerCondition,
                label,
                Rule::DuplicateConditionType,
            );
        } else if out.len() >= MAX_CONDITIONS {
            omissions.push(
                cluster,
                Item::ListenerCondition,
                label,
                Rule::TooMany(MAX_CONDITIONS),
            );
        } else {
            out.push(c.to_condition());
        }
    }
    out
}

/// `cluster`'s listeners the hub can write (valid, unique names), in
/// order; the others go to `omissions`.
pub(crate) fn valid<'a>(
    cluster: &str,
    status: &'a ReportedStatus,
    omissions: &mut Omissions,
) -> Vec<&'a ReportedListener> {
    let listeners = status.listeners();
    let name = cluster;
    let cluster = Some(cluster);
    let mut valid = Vec::new();
    if !is_dns_label(name) {
        for l in listeners {
            omissions.push(
                cluster,
                Item::Listener,
                l.name.to_string(),
                Rule::ClusterNameNotDnsLabel,
            );
        }
        return valid;
    }
    for l in listeners {
        // A DNS label, a dot and a SectionName make a SectionName.
        let full_len = name.len() + 1 + l.name.len();
        if !(is_section_name(&l.name) && full_len <= MAX_SECTION_NAME) {
            omissions.push(
                cluster,
                Item::Listener,
                full_name(name, l),
                Rule::InvalidListenerName,
            );
        } else if valid.iter().any(|v: &&ReportedListener| v.name == l.name) {
            // A linear scan: a cluster has a few listeners (at most 64),
            // and a hash set per cluster per aggregation cost more.
            omissions.push(
                cluster,
                Item::Listener,
                full_name(name, l),
                Rule::DuplicateListenerName,
            );
        } else {
            valid.push(l);
        }
    }
    valid
}
