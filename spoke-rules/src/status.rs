//! Merging the agent's conditions into a Gateway's status without touching
//! anything another writer owns (Istio: `Accepted`/`Programmed`, listeners'
//! `attachedRoutes` and `supportedKinds`, `addresses`), plus the no-op check
//! and the server-side-apply body the runtime sends.

use std::collections::HashMap;
use std::fmt;

use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus};
use gwhub_model::conditions::{self, Condition, MAX_CONDITIONS};
use jiff::Timestamp;
use serde_json::{Value, json};

use crate::conditions::{DNS_MANAGED, DNS_READY, Verdict, dns};
use crate::ownership::{Plan, Slot};

/// The agent's conditions for one Gateway, computed but not yet merged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Desired {
    /// `metadata.generation`, written as every condition's `observedGeneration`.
    pub generation: Option<i64>,
    /// Gateway-level conditions (`LoadBalancerReady`). The Gateway-level
    /// `DNSReady` is not given here: [`merge`] derives it from the listener
    /// `DNSReady`s the merged status carries (a `DNSReady` given here is
    /// ignored).
    pub gateway: Vec<Verdict>,
    /// The listeners with a status entry, by name, with their conditions; an
    /// empty list (a listener without hostname, an entry of a listener no
    /// longer in the spec) means "none of ours here". The agent never
    /// creates a listener entry.
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
    for c in missing {
        if list.len() < MAX_CONDITIONS {
            list.push(c);
        } else {
            problems.push(Problem::NoRoomForCondition {
                listener: listener.map(str::to_owned),
                condition_type: c.type_,
            });
        }
    }
}

/// Merges `desired` into `current`: only the condition types `plan` gives
/// the agent change (plus the `DNSManaged`s it retires); the Gateway-level
/// `DNSReady` is computed after the listeners are merged, from the listener
/// `DNSReady`s present then (spec §2: "present only while at least one
/// listener carries DNSReady"); another writer's
/// conditions, listeners, addresses and fields stay as they are. Listener
/// entries are never created. Returns the status and what could not be
/// written.
pub fn merge(
    current: Option<&GatewayStatus>,
    desired: &Desired,
    plan: &Plan,
    now: Timestamp,
) -> (GatewayStatus, Vec<Problem>) {
    let mut status = current.cloned().unwrap_or_default();
    let mut problems = Vec::new();
    let to_conditions = |vs: &[Verdict], types: &[&str]| -> Vec<Condition> {
        vs.iter()
            .filter(|v| types.contains(&v.type_))
            .map(|v| v.to_condition(desired.generation, now))
            .collect()
    };

    let ours: HashMap<&str, &[Verdict]> = desired
        .listeners
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_slice()))
        .collect();
    let mut listener_problems = Vec::new();
    for entry in status.listeners.iter_mut().flatten() {
        let mut types = plan.listener.clone();
        if plan.retire.contains(&entry.name) {
            types.push(DNS_MANAGED);
        }
        let conds = ours
            .get(entry.name.as_str())
            .map(|v| to_conditions(v, &plan.listener))
            .unwrap_or_default();
        apply_ours(
            &mut entry.conditions,
            &types,
            conds,
            Some(&entry.name),
            &mut listener_problems,
        );
    }

    // The Gateway-level DNSReady sums up the listener DNSReadys the merged
    // status actually carries: one skipped for lack of room does not count.
    let mut gateway_level: Vec<Verdict> = desired
        .gateway
        .iter()
        .filter(|v| v.type_ != DNS_READY)
        .cloned()
        .collect();
    gateway_level.extend(dns::gateway_dns_ready(
        status
            .listeners
            .iter()
            .flatten()
            .filter_map(|l| conditions::find(&l.conditions, DNS_READY))
            .map(|c| c.status.as_str()),
    ));
    let had_conditions = status.conditions.is_some();
    let mut list = status.conditions.take().unwrap_or_default();
    apply_ours(
        &mut list,
        &plan.gateway,
        to_conditions(&gateway_level, &plan.gateway),
        None,
        &mut problems,
    );
    status.conditions = (had_conditions || !list.is_empty()).then_some(list);
    problems.extend(listener_problems);
    (status, problems)
}

/// Whether writing `desired` over `current` changes anything but transition
/// times; a `false` means no API write is needed.
pub fn needs_write(current: &GatewayStatus, desired: &GatewayStatus) -> bool {
    !gwhub_model::status::same_status(current, desired)
}

/// The body of the server-side apply (field manager `gwhub-agent`, status
/// subresource) that writes the condition types `plan` gives the agent and
/// nothing else:
///
/// ```yaml
/// apiVersion: gateway.networking.k8s.io/v1
/// kind: Gateway
/// metadata: {name, namespace}
/// status:
///   conditions: [LoadBalancerReady, DNSReady]
///   listeners: [{name, attachedRoutes, conditions: [DNSReady]}]
/// ```
///
/// `status.conditions` and `listeners[].conditions` are list maps keyed by
/// `type`, and `status.listeners` a list map keyed by `name`, so applying our
/// entries leaves other managers' entries alone; omitting a type we applied
/// before removes it (a listener that lost its hostname is simply left out;
/// so is a `DNSManaged` an earlier agent wrote). `addresses` and
/// `supportedKinds` are atomic lists: they are never included, since
/// including them would take them over. Only listeners that have a status
/// entry are included (the agent never creates one: before Gateway API v1.5
/// an entry needs `supportedKinds`, which only the Gateway's controller knows).
///
/// `attachedRoutes` is included with the value the Gateway already has: the
/// CRD requires it in every listener item and the apiserver validates the
/// applied entry, so leaving it out would be refused. Applying the live
/// value makes us a co-owner without a conflict; if the Gateway controller
/// changes it in between, the apply fails with a conflict (never forced) and
/// the runtime recomputes from the fresh object.
///
/// The slots of `plan.carry` (a type another manager took over, in which we
/// still own fields) are applied as they are in `desired` (the live value),
/// so the fields only we own are not deleted from under the other writer.
pub fn apply_patch(gateway: &Gateway, desired: &GatewayStatus, plan: &Plan) -> Value {
    let carried = |listener: Option<&str>, t: &str| {
        plan.carry.contains(&Slot {
            listener: listener.map(str::to_owned),
            type_: t.to_owned(),
        })
    };
    let ours = |list: &[Condition], types: &[&str], listener: Option<&str>| -> Vec<Value> {
        list.iter()
            .filter(|c| types.contains(&c.type_.as_str()) || carried(listener, &c.type_))
            .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
            .collect()
    };
    let mut status = serde_json::Map::new();
    let gw_conds = ours(
        desired.conditions.as_deref().unwrap_or_default(),
        &plan.gateway,
        None,
    );
    if !gw_conds.is_empty() {
        status.insert("conditions".into(), Value::Array(gw_conds));
    }
    let listeners: Vec<Value> = desired
        .listeners
        .iter()
        .flatten()
        .filter_map(|l| {
            let conds = ours(&l.conditions, &plan.listener, Some(&l.name));
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
