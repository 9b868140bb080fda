//! Gateway status equality that ignores condition transition times: two
//! statuses that differ only in time need no report and no API write.
//!
//! Two comparisons, for the two ways a status is compared:
//! - [`same_status`]: as reported, in order (the agent: a reordered list is
//!   a change the hub must see, since the hub keeps each cluster's order);
//! - [`same_applied_status`]: as a server-side apply leaves it (the hub's
//!   writer): listeners keyed by name and conditions by type, so order is
//!   not a change.

use std::collections::BTreeMap;

use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus, GatewayStatusListeners};

use crate::conditions::{Condition, same_ignoring_time};

/// Whether two Gateways report the same thing to the hub: identity,
/// generation and status, ignoring condition transition times. Walks both
/// without cloning: it runs on every change of every Gateway.
pub fn same_gateway(a: &Gateway, b: &Gateway) -> bool {
    let (ma, mb) = (&a.metadata, &b.metadata);
    ma.namespace == mb.namespace
        && ma.name == mb.name
        && ma.uid == mb.uid
        && ma.generation == mb.generation
        && match (&a.status, &b.status) {
            (None, None) => true,
            (Some(x), Some(y)) => same_status(x, y),
            _ => false,
        }
}

/// Whether two statuses are the same, in order, but for transition times
/// (an absent list equals an empty one).
pub fn same_status(x: &GatewayStatus, y: &GatewayStatus) -> bool {
    same_ignoring_time(or_empty(&x.conditions), or_empty(&y.conditions))
        && or_empty(&x.addresses) == or_empty(&y.addresses)
        && x.attached_listener_sets == y.attached_listener_sets
        && match (&x.listeners, &y.listeners) {
            (Some(lx), Some(ly)) => {
                lx.len() == ly.len()
                    && lx.iter().zip(ly).all(|(l, m)| {
                        l.name == m.name
                            && l.attached_routes == m.attached_routes
                            && or_empty(&l.supported_kinds) == or_empty(&m.supported_kinds)
                            && same_ignoring_time(&l.conditions, &m.conditions)
                    })
            }
            (lx, ly) => or_empty(lx).is_empty() && or_empty(ly).is_empty(),
        }
}

fn or_empty<T>(list: &Option<Vec<T>>) -> &[T] {
    list.as_deref().unwrap_or_default()
}

fn sorted_conditions(list: Option<&Vec<Condition>>) -> Vec<Condition> {
    let mut v = list.cloned().unwrap_or_default();
    v.sort_by(|a, b| a.type_.cmp(&b.type_));
    v
}

fn same_listeners(
    a: Option<&Vec<GatewayStatusListeners>>,
    b: Option<&Vec<GatewayStatusListeners>>,
) -> bool {
    let a = a.map(Vec::as_slice).unwrap_or_default();
    let b = b.map(Vec::as_slice).unwrap_or_default();
    let by_name = |l: &[GatewayStatusListeners]| -> BTreeMap<String, GatewayStatusListeners> {
        l.iter().map(|x| (x.name.clone(), x.clone())).collect()
    };
    let (a, b) = (by_name(a), by_name(b));
    a.len() == b.len()
        && a.iter().zip(&b).all(|((na, la), (nb, lb))| {
            na == nb
                && la.attached_routes == lb.attached_routes
                && la.supported_kinds.as_deref().unwrap_or_default()
                    == lb.supported_kinds.as_deref().unwrap_or_default()
                && same_ignoring_time(
                    &sorted_conditions(Some(&la.conditions)),
                    &sorted_conditions(Some(&lb.conditions)),
                )
        })
}

/// Whether applying `want` over `live` would change anything but times, with
/// listeners keyed by name and conditions by type (as server-side apply
/// merges them). Only the fields the hub writes (addresses, listeners,
/// conditions) count.
pub fn same_applied_status(live: &GatewayStatus, want: &GatewayStatus) -> bool {
    live.addresses.as_deref().unwrap_or_default() == want.addresses.as_deref().unwrap_or_default()
        && same_applied_listeners_and_conditions(live, want)
}

/// [`same_applied_status`] without the addresses.
pub fn same_applied_listeners_and_conditions(live: &GatewayStatus, want: &GatewayStatus) -> bool {
    same_listeners(live.listeners.as_ref(), want.listeners.as_ref())
        && same_ignoring_time(
            &sorted_conditions(live.conditions.as_ref()),
            &sorted_conditions(want.conditions.as_ref()),
        )
}
