//! The status writer's decisions, without the API calls: what to apply
//! onto a hub Gateway, what to clear first, and whether a write would change
//! anything but times ([`plan`], [`clear_patch`]). The hub's status writer
//! (`gwhub_k8s::status_writer`) executes them.

use std::collections::BTreeSet;

use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus};
use gwhub_model::Condition;
use gwhub_model::status::same_applied_listeners_and_conditions;
use serde_json::{Value, json};

use crate::aggregate::LiveHub;

/// Whether applying `want` the way the status writer applies it would
/// change nothing but times over `live`. An empty address list is left out
/// of the apply: `status.addresses` is an atomic list, so applying `[]`
/// would take it over (and empty it) on a Gateway in scope that no cluster
/// reports, maybe a real one; left out, it releases what the hub wrote
/// before. So an empty list changes something only where the hub owns the
/// live one. Listeners are keyed by name: applying `[]` removes only the
/// hub's entries (when those were all, the list is first set empty, see
/// the status writer).
fn apply_is_noop(live: &LiveHub, want: &GatewayStatus) -> bool {
    let want_addresses = want.addresses.as_deref().unwrap_or_default();
    let addresses_same = if want_addresses.is_empty() {
        !live.owns_addresses
    } else {
        live.status.addresses.as_deref().unwrap_or_default() == want_addresses
    };
    addresses_same && same_applied_listeners_and_conditions(&live.status, want)
}

/// What the writer does for one hub Gateway.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// Applying would change nothing but times.
    Noop,
    Write(Write),
}

/// A write: first clear what apply cannot remove validly, then apply.
#[derive(Clone, Debug, PartialEq)]
pub struct Write {
    /// The hub's last listener entries go: set the list empty first.
    pub clear_listeners: bool,
    /// Condition types on the hub Gateway that are not other writers' and
    /// that the hub does not write (any more), removed first.
    pub drop_conditions: BTreeSet<String>,
    /// The server-side apply body (field manager `gwhub`).
    pub apply: Value,
}

impl Write {
    pub fn clears(&self) -> bool {
        self.clear_listeners || !self.drop_conditions.is_empty()
    }
}

/// What writing `want` (the published aggregation, other writers'
/// conditions of types `foreign` among its conditions) onto `live` takes.
///
/// Other writers' conditions are not sent; an empty address list is left
/// out (see `apply_is_noop`); the listeners are always sent (keyed by name,
/// `[]` removes only the hub's entries). Server-side apply cannot leave the
/// status valid when the hub stops writing something it wrote: its last
/// listener entries leave the list null, and a condition whose entry the
/// CRD defaulted at creation (so another manager co-owns its key) is left as
/// a bare `type`, both of which the CRD refuses, failing the whole write.
/// So those are cleared first ([`clear_patch`]).
pub fn plan(live: &LiveHub, want: &GatewayStatus, foreign: &BTreeSet<String>) -> Plan {
    if apply_is_noop(live, want) {
        return Plan::Noop;
    }
    let listeners = want.listeners.clone().unwrap_or_default();
    let clear_listeners = live.owns_listeners && listeners.is_empty();
    let own: Vec<&Condition> = want
        .conditions
        .iter()
        .flatten()
        .filter(|c| !foreign.contains(&c.type_))
        .collect();
    // Every condition on the live object that is not another writer's is
    // the hub's (see `LiveHub::hub_gateway`): one it no longer writes goes,
    // including a CRD default it never took over (left, it would count
    // toward the 8 and get the write refused).
    let drop_conditions = live
        .status
        .conditions
        .iter()
        .flatten()
        .map(|c| &c.type_)
        .filter(|t| !foreign.contains(*t) && !own.iter().any(|c| c.type_ == **t))
        .cloned()
        .collect();
    let mut body = serde_json::Map::new();
    if let Some(addresses) = want.addresses.as_ref().filter(|a| !a.is_empty()) {
        body.insert("addresses".into(), json!(addresses));
    }
    body.insert("listeners".into(), json!(listeners));
    body.insert("conditions".into(), json!(own));
    Plan::Write(Write {
        clear_listeners,
        drop_conditions,
        apply: json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "status": body,
        }),
    })
}

/// The merge patch that clears, on the fresh object `fresh`, what the apply
/// cannot remove validly (see [`plan`]): the listener list set empty if
/// `listeners`, the conditions of `dropped` types removed. Guarded by the
/// object's resourceVersion. `None`: nothing to clear.
pub fn clear_patch(fresh: &Gateway, listeners: bool, dropped: &BTreeSet<String>) -> Option<Value> {
    let conditions = fresh
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let kept: Vec<&Condition> = conditions
        .iter()
        .filter(|c| !dropped.contains(&c.type_))
        .collect();
    let mut status = serde_json::Map::new();
    if listeners {
        status.insert("listeners".into(), json!([]));
    }
    if kept.len() != conditions.len() {
        status.insert("conditions".into(), json!(kept));
    }
    if status.is_empty() {
        return None;
    }
    Some(json!({
        "metadata": {"resourceVersion": fresh.metadata.resource_version},
        "status": status,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(v: Value) -> GatewayStatus {
        serde_json::from_value(v).unwrap()
    }

    fn cond(type_: &str, status: &str, time: &str) -> Value {
        json!({"type": type_, "status": status, "reason": "R", "message": "",
               "observedGeneration": 1, "lastTransitionTime": time})
    }

    const T1: &str = "2026-11-23T10:00:00Z";
    const T2: &str = "2026-11-23T11:00:00Z";

    fn listener(name: &str) -> Value {
        json!({"name": name, "attachedRoutes": 1, "supportedKinds": [], "conditions": []})
    }

    fn live(status: Value, owned: &[&str], owns_addresses: bool, owns_listeners: bool) -> LiveHub {
        LiveHub {
            generation: 1,
            status: self::status(status),
            owned: owned.iter().map(|t| (*t).to_owned()).collect(),
            others: BTreeSet::new(),
            owns_addresses,
            owns_listeners,
            ..LiveHub::default()
        }
    }

    fn types(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|t| (*t).to_owned()).collect()
    }

    fn write(plan: Plan) -> Write {
        match plan {
            Plan::Write(w) => w,
            Plan::Noop => panic!("expected a write"),
        }
    }

    #[test]
    fn plan_is_a_noop_when_only_times_differ() {
        let addr = json!([{"type": "kuadrant.io/MultiClusterIPAddress", "value": "a/10.0.0.1"}]);
        let on_live = live(
            json!({"addresses": addr, "listeners": [listener("a.http")],
                   "conditions": [cond("Accepted", "True", T1), cond("x.io/Foreign", "True", T1)]}),
            &["Accepted"],
            true,
            true,
        );
        let want = status(json!({"addresses": addr, "listeners": [listener("a.http")],
            "conditions": [cond("Accepted", "True", T2), cond("x.io/Foreign", "True", T1)]}));
        assert_eq!(plan(&on_live, &want, &types(&["x.io/Foreign"])), Plan::Noop);

        // No addresses wanted: nothing to do unless the hub owns the live ones.
        let bare = status(json!({"listeners": [listener("a.http")],
            "conditions": [cond("Accepted", "True", T1), cond("x.io/Foreign", "True", T1)]}));
        let mut not_ours = on_live.clone();
        not_ours.owns_addresses = false;
        assert_eq!(
            plan(&not_ours, &bare, &types(&["x.io/Foreign"])),
            Plan::Noop
        );
        let w = write(plan(&on_live, &bare, &types(&["x.io/Foreign"])));
        assert!(w.apply["status"].get("addresses").is_none(), "{}", w.apply);
        assert!(!w.clears());
    }

    #[test]
    fn plan_applies_only_the_hubs_conditions() {
        let on_live = live(
            json!({"conditions": [cond("x.io/Foreign", "True", T1)]}),
            &[],
            false,
            false,
        );
        let want = status(json!({"listeners": [listener("a.http")],
            "conditions": [cond("Accepted", "True", T2), cond("x.io/Foreign", "True", T1)]}));
        let w = write(plan(&on_live, &want, &types(&["x.io/Foreign"])));
        assert_eq!(
            w.apply,
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "status": {
                "listeners": [listener("a.http")],
                "conditions": [cond("Accepted", "True", T2)],
            }})
        );
        assert_eq!(
            w,
            Write {
                clear_listeners: false,
                drop_conditions: BTreeSet::new(),
                apply: w.apply.clone()
            }
        );
    }

    #[test]
    fn plan_clears_what_apply_cannot_remove() {
        // (live owned types, hub owns listeners, wanted listeners, wanted
        // condition types) -> (clear listeners, dropped types)
        type Case<'a> = (
            &'a [&'a str],
            bool,
            &'a [&'a str],
            &'a [&'a str],
            bool,
            &'a [&'a str],
        );
        let cases: &[Case] = &[
            (&["Accepted"], true, &[], &["Accepted"], true, &[]),
            (
                &["Accepted"],
                false,
                &[],
                &["Programmed"],
                false,
                &["Accepted"],
            ),
            (
                &["Accepted", "Programmed"],
                true,
                &["a.http"],
                &["Accepted"],
                false,
                &["Programmed"],
            ),
            (
                &[],
                false,
                &["a.http"],
                &["Accepted", "Programmed"],
                false,
                &[],
            ),
            // A CRD default the hub never wrote, not another writer's.
            (&[], false, &[], &["Accepted"], false, &["Programmed"]),
        ];
        for (owned, owns_listeners, want_l, want_c, clear, dropped) in cases {
            let mut live_conds: Vec<Value> = owned.iter().map(|t| cond(t, "True", T1)).collect();
            if owned.is_empty() {
                live_conds.push(cond("Programmed", "Unknown", T1));
            }
            live_conds.push(cond("x.io/Foreign", "True", T1));
            let live_l: Vec<Value> = if *owns_listeners {
                vec![listener("a.http")]
            } else {
                vec![]
            };
            let on_live = live(
                json!({"listeners": live_l, "conditions": live_conds}),
                owned,
                false,
                *owns_listeners,
            );
            let want = status(json!({
                "listeners": want_l.iter().map(|l| listener(l)).collect::<Vec<_>>(),
                "conditions": want_c.iter().map(|t| cond(t, "False", T2)).collect::<Vec<_>>(),
            }));
            let w = write(plan(&on_live, &want, &types(&["x.io/Foreign"])));
            let case = format!("{owned:?} {owns_listeners} {want_l:?} {want_c:?}");
            assert_eq!(w.clear_listeners, *clear, "{case}");
            assert_eq!(w.drop_conditions, types(dropped), "{case}");
            assert_eq!(w.clears(), *clear || !dropped.is_empty(), "{case}");
        }
    }

    #[test]
    fn clear_patch_keeps_other_conditions_and_guards_the_version() {
        let mut gw: Gateway = serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "web", "namespace": "ns", "resourceVersion": "42"},
            "spec": {"gatewayClassName": "c", "listeners": []},
            "status": {"conditions": [cond("Accepted", "Unknown", T1), cond("x.io/Foreign", "True", T1)]}
        }))
        .unwrap();
        assert_eq!(clear_patch(&gw, false, &BTreeSet::new()), None);
        assert_eq!(clear_patch(&gw, false, &types(&["Programmed"])), None);
        assert_eq!(
            clear_patch(&gw, false, &types(&["Accepted"])),
            Some(json!({"metadata": {"resourceVersion": "42"},
                        "status": {"conditions": [cond("x.io/Foreign", "True", T1)]}}))
        );
        assert_eq!(
            clear_patch(&gw, true, &BTreeSet::new()),
            Some(json!({"metadata": {"resourceVersion": "42"}, "status": {"listeners": []}}))
        );
        gw.status = None;
        assert_eq!(
            clear_patch(&gw, true, &types(&["Accepted"])),
            Some(json!({"metadata": {"resourceVersion": "42"}, "status": {"listeners": []}}))
        );
    }
}
