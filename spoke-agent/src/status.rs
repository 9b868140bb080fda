//! Merging the agent's conditions into a Gateway's status without touching
//! anything another writer owns (Istio: `Accepted`/`Programmed`, listeners'
//! `attachedRoutes` and `supportedKinds`, `addresses`), plus the no-op check
//! and the server-side-apply body the runtime sends.

use std::collections::HashMap;
use std::fmt;

use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus, GatewayStatusListeners};
use gwhub_common::conditions::{self, Condition, MAX_CONDITIONS};
use jiff::Timestamp;
use serde_json::{Value, json};

use crate::conditions::{DNS_READY, GATEWAY_TYPES, LISTENER_TYPES, Verdict};

/// The CRD's limit on `status.listeners`.
pub const MAX_LISTENERS: usize = 64;

/// The agent's conditions for one Gateway, computed but not yet merged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Desired {
    /// `metadata.generation`, written as every condition's `observedGeneration`.
    pub generation: Option<i64>,
    /// Gateway-level conditions (`LoadBalancerReady`).
    pub gateway: Vec<Verdict>,
    /// Every spec listener in spec order with its conditions; an empty list
    /// (a listener without hostname) means "none of ours here".
    pub listeners: Vec<(String, Vec<Verdict>)>,
}

/// Something the agent could not do or had to decide; the runtime raises an
/// Event and a metric for each, `compute` prints them as warnings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// A condition list already holds [`MAX_CONDITIONS`] entries of other
    /// writers, so ours was skipped (`listener: None` for `status.conditions`).
    NoRoomForCondition {
        listener: Option<String>,
        condition_type: String,
    },
    /// `status.listeners` already has [`MAX_LISTENERS`] entries, so no entry
    /// could be added for this listener.
    NoRoomForListener { listener: String },
    /// Several DNSRecords have the listener's hostname; `used` decided.
    DuplicateDNSRecords {
        hostname: String,
        used: String,
        ignored: Vec<String>,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::NoRoomForCondition {
                listener: None,
                condition_type,
            } => write!(
                f,
                "no room for condition {condition_type} in status.conditions: the list already has {MAX_CONDITIONS} conditions (the CRD's limit)"
            ),
            Problem::NoRoomForCondition {
                listener: Some(l),
                condition_type,
            } => write!(
                f,
                "no room for condition {condition_type} in the conditions of listener {l}: the list already has {MAX_CONDITIONS} conditions (the CRD's limit)"
            ),
            Problem::NoRoomForListener { listener } => write!(
                f,
                "no room for a status entry for listener {listener}: status.listeners already has {MAX_LISTENERS} entries (the CRD's limit)"
            ),
            Problem::DuplicateDNSRecords {
                hostname,
                used,
                ignored,
            } => write!(
                f,
                "several DNSRecords for hostname {hostname}: using {used}, ignoring {}",
                ignored.join(", ")
            ),
        }
    }
}

/// Preference when a list has room for only some of our conditions:
/// `DNSReady` says more than `DNSManaged`.
fn priority(type_: &str) -> u8 {
    u8::from(type_ != DNS_READY)
}

/// Makes `ours` the agent's conditions in `list`: our types not in `ours`
/// are removed, present ones updated in place (transition time kept while
/// the status is unchanged), missing ones appended while there is room.
fn apply_ours(
    list: &mut Vec<Condition>,
    our_types: &[&str],
    ours: Vec<Condition>,
    listener: Option<&str>,
    problems: &mut Vec<Problem>,
) {
    list.retain(|c| {
        !our_types.contains(&c.type_.as_str()) || ours.iter().any(|o| o.type_ == c.type_)
    });
    let (present, missing): (Vec<_>, Vec<_>) = ours
        .into_iter()
        .partition(|o| conditions::find(list, &o.type_).is_some());
    for c in present {
        conditions::set(list, c);
    }
    let room = MAX_CONDITIONS.saturating_sub(list.len());
    let mut by_priority: Vec<usize> = (0..missing.len()).collect();
    by_priority.sort_by_key(|&i| priority(&missing[i].type_));
    let chosen: Vec<usize> = by_priority.iter().copied().take(room).collect();
    for (i, c) in missing.into_iter().enumerate() {
        if chosen.contains(&i) {
            list.push(c);
        } else {
            problems.push(Problem::NoRoomForCondition {
                listener: listener.map(str::to_owned),
                condition_type: c.type_,
            });
        }
    }
}

/// Merges `desired` into `current`: only our condition types change;
/// another writer's conditions, listeners, addresses and fields stay as they
/// are. A spec listener with conditions but no status entry gets one
/// (`attachedRoutes: 0`, which the CRD requires; `supportedKinds` is optional
/// and left to the Gateway controller). Our conditions are removed from
/// listeners without hostname and from entries of listeners no longer in the
/// spec. Returns the status and what could not be written.
pub fn merge(
    current: Option<&GatewayStatus>,
    desired: &Desired,
    now: Timestamp,
) -> (GatewayStatus, Vec<Problem>) {
    let mut status = current.cloned().unwrap_or_default();
    let mut problems = Vec::new();
    let to_conditions = |vs: &[Verdict]| -> Vec<Condition> {
        vs.iter()
            .map(|v| v.to_condition(desired.generation, now))
            .collect()
    };

    let had_conditions = status.conditions.is_some();
    let mut list = status.conditions.take().unwrap_or_default();
    apply_ours(
        &mut list,
        GATEWAY_TYPES,
        to_conditions(&desired.gateway),
        None,
        &mut problems,
    );
    status.conditions = (had_conditions || !list.is_empty()).then_some(list);

    let spec: HashMap<&str, &[Verdict]> = desired
        .listeners
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_slice()))
        .collect();
    let had_listeners = status.listeners.is_some();
    let mut listeners = status.listeners.take().unwrap_or_default();
    for entry in &mut listeners {
        let ours = spec
            .get(entry.name.as_str())
            .map(|v| to_conditions(v))
            .unwrap_or_default();
        apply_ours(
            &mut entry.conditions,
            LISTENER_TYPES,
            ours,
            Some(&entry.name),
            &mut problems,
        );
    }
    for (name, verdicts) in &desired.listeners {
        if verdicts.is_empty() || listeners.iter().any(|l| &l.name == name) {
            continue;
        }
        if listeners.len() >= MAX_LISTENERS {
            problems.push(Problem::NoRoomForListener {
                listener: name.clone(),
            });
            continue;
        }
        let mut conds = Vec::new();
        apply_ours(
            &mut conds,
            LISTENER_TYPES,
            to_conditions(verdicts),
            Some(name),
            &mut problems,
        );
        listeners.push(GatewayStatusListeners {
            name: name.clone(),
            attached_routes: 0,
            conditions: conds,
            supported_kinds: None,
        });
    }
    status.listeners = (had_listeners || !listeners.is_empty()).then_some(listeners);
    (status, problems)
}

/// Whether writing `desired` over `current` changes anything but transition
/// times; a `false` means no API write is needed.
pub fn needs_write(current: &GatewayStatus, desired: &GatewayStatus) -> bool {
    let conds = |s: &GatewayStatus| s.conditions.clone().unwrap_or_default();
    if !conditions::same_ignoring_time(&conds(current), &conds(desired)) {
        return true;
    }
    let (a, b) = (
        current.listeners.as_deref().unwrap_or_default(),
        desired.listeners.as_deref().unwrap_or_default(),
    );
    let listeners_same = a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.name == y.name
                && x.attached_routes == y.attached_routes
                && x.supported_kinds == y.supported_kinds
                && conditions::same_ignoring_time(&x.conditions, &y.conditions)
        });
    if !listeners_same {
        return true;
    }
    let rest = |s: &GatewayStatus| GatewayStatus {
        conditions: None,
        listeners: None,
        ..s.clone()
    };
    rest(current) != rest(desired)
}

/// The body of the server-side apply (field manager `gwhub-agent`, status
/// subresource) that writes `desired`'s conditions of ours and nothing else:
///
/// ```yaml
/// apiVersion: gateway.networking.k8s.io/v1
/// kind: Gateway
/// metadata: {name, namespace}
/// status:
///   conditions: [LoadBalancerReady]
///   listeners: [{name, attachedRoutes, conditions: [DNSManaged, DNSReady]}]
/// ```
///
/// `status.conditions` and `listeners[].conditions` are list maps keyed by
/// `type`, and `status.listeners` a list map keyed by `name`, so applying our
/// entries leaves other managers' entries alone; omitting a type we applied
/// before removes it (a listener that lost its hostname is simply left out).
/// `addresses` and `supportedKinds` are atomic lists: they are never included,
/// since including them would take them over.
///
/// `attachedRoutes` is included with the value the Gateway already has (0
/// for an entry we create): the CRD requires it in every listener item, and
/// the apiserver validates the merged object, so an entry we create without
/// it would be rejected, and if we were its only owner, leaving it out later
/// would delete it. Applying the live value makes us a co-owner without a
/// conflict; if the Gateway controller changes it in between, the apply fails
/// with a conflict (never forced) and the runtime recomputes from the fresh
/// object.
pub fn apply_patch(gateway: &Gateway, desired: &GatewayStatus) -> Value {
    let ours = |list: &[Condition], types: &[&str]| -> Vec<Value> {
        list.iter()
            .filter(|c| types.contains(&c.type_.as_str()))
            .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
            .collect()
    };
    let mut status = serde_json::Map::new();
    let gw_conds = ours(
        desired.conditions.as_deref().unwrap_or_default(),
        GATEWAY_TYPES,
    );
    if !gw_conds.is_empty() {
        status.insert("conditions".into(), Value::Array(gw_conds));
    }
    let listeners: Vec<Value> = desired
        .listeners
        .iter()
        .flatten()
        .filter_map(|l| {
            let conds = ours(&l.conditions, LISTENER_TYPES);
            (!conds.is_empty()).then(|| {
                json!({"name": l.name, "attachedRoutes": l.attached_routes, "conditions": conds})
            })
        })
        .collect();
    if !listeners.is_empty() {
        status.insert("listeners".into(), Value::Array(listeners));
    }
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {
            "name": gateway.metadata.name,
            "namespace": crate::scope::namespace_of(&gateway.metadata),
        },
        "status": Value::Object(status),
    })
}
