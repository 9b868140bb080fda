//! Who writes which of our condition types on a Gateway, read from its
//! `metadata.managedFields`, and what the agent therefore writes
//! (`--write-local-status=auto|true|false`). Pure: managedFields in, a
//! [`Plan`] out.
//!
//! From OpenShift 4.22 the ingress operator writes `LoadBalancerReady` and
//! both `DNSReady`s itself (a JSON merge patch of the whole condition lists,
//! an `Update` entry in managedFields). In `auto` the agent writes a type
//! only while no other field manager owns any field of it, so the two never
//! fight; where another manager owns it the agent streams the live condition.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use serde_json::Value;

use crate::conditions::{DNS_MANAGED, GATEWAY_TYPES, LISTENER_TYPES};

/// `--write-local-status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WriteMode {
    /// Write a type only while no other field manager writes it.
    #[default]
    Auto,
    /// Always write our types (`true`).
    Always,
    /// Never write; compute and stream only (`false`).
    Never,
}

impl FromStr for WriteMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "true" => Ok(Self::Always),
            "false" => Ok(Self::Never),
            other => Err(format!("{other:?} is not one of auto, true, false")),
        }
    }
}

impl fmt::Display for WriteMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Always => "true",
            Self::Never => "false",
        })
    }
}

/// One condition slot: a type in `status.conditions` (`listener: None`) or
/// in a listener's conditions.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Slot {
    pub listener: Option<String>,
    pub type_: String,
}

/// The condition slots owned (any field of the entry) by `me` and by every
/// other manager, over `Apply` and `Update` entries alike.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ownership {
    pub ours: BTreeSet<Slot>,
    pub others: BTreeSet<Slot>,
}

impl Ownership {
    /// Reads `entries` (a Gateway's managedFields). Status paths start at
    /// `f:status`, with or without a `subresource: status` field (API servers
    /// before 1.22 have none); entries without fieldsV1 are ignored.
    pub fn of(entries: &[ManagedFieldsEntry], me: &str) -> Self {
        let mut own = Self::default();
        for e in entries {
            let Some(status) = e.fields_v1.as_ref().and_then(|f| f.0.get("f:status")) else {
                continue;
            };
            let target = if e.manager.as_deref() == Some(me) {
                &mut own.ours
            } else {
                &mut own.others
            };
            for type_ in condition_keys(status) {
                target.insert(Slot {
                    listener: None,
                    type_,
                });
            }
            if let Some(Value::Object(listeners)) = status.get("f:listeners") {
                for (key, fields) in listeners {
                    let Some(name) = key_value(key, "name") else {
                        continue;
                    };
                    for type_ in condition_keys(fields) {
                        target.insert(Slot {
                            listener: Some(name.clone()),
                            type_,
                        });
                    }
                }
            }
        }
        own
    }

    fn others_own(&self, listener_level: bool, type_: &str) -> bool {
        self.others
            .iter()
            .any(|s| s.listener.is_some() == listener_level && s.type_ == type_)
    }
}

/// The condition types keyed under `fields["f:conditions"]`.
fn condition_keys(fields: &Value) -> Vec<String> {
    match fields.get("f:conditions") {
        Some(Value::Object(m)) => m.keys().filter_map(|k| key_value(k, "type")).collect(),
        _ => Vec::new(),
    }
}

/// `k:{"type":"DNSReady"}` -> `DNSReady` for `field` = `type`.
fn key_value(key: &str, field: &str) -> Option<String> {
    let json = key.strip_prefix("k:")?;
    let v: Value = serde_json::from_str(json).ok()?;
    v.get(field)?.as_str().map(str::to_owned)
}

/// What the agent does on one Gateway.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Whether the agent sends status writes at all.
    pub write: bool,
    /// Our `status.conditions` types the agent computes (and writes when
    /// `write`); other types of ours are left as they are live.
    pub gateway: Vec<&'static str>,
    /// Our listener condition types likewise.
    pub listener: Vec<&'static str>,
    /// Listeners whose `DNSManaged` the agent wrote before: removed.
    pub retire: BTreeSet<String>,
    /// Slots of a type another manager took over in which we still own
    /// fields: applied as they are live, since leaving them out of our apply
    /// would delete the fields only we own and break the entry.
    pub carry: BTreeSet<Slot>,
}

/// How a Gateway is handled, for the metric and the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum GatewayMode {
    /// The agent writes every condition type of ours.
    Write,
    /// Another manager writes some of the types; the agent writes the rest.
    Partial,
    /// The agent writes nothing and streams only.
    Stream,
}

impl GatewayMode {
    pub const ALL: [Self; 3] = [Self::Write, Self::Partial, Self::Stream];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Partial => "partial",
            Self::Stream => "stream",
        }
    }
}

impl Plan {
    /// Computes and writes everything (`compute`'s view, `true`), removing
    /// only the `DNSManaged`s `own` says the agent wrote.
    pub fn everything(own: &Ownership) -> Self {
        plan(WriteMode::Always, own)
    }

    pub fn mode(&self) -> GatewayMode {
        let all = GATEWAY_TYPES.len() + LISTENER_TYPES.len();
        let written = if self.write {
            self.gateway.len() + self.listener.len()
        } else {
            0
        };
        match written {
            0 => GatewayMode::Stream,
            n if n == all => GatewayMode::Write,
            _ => GatewayMode::Partial,
        }
    }
}

/// The decision: per condition type, whether the agent computes it over the
/// live one (and writes it unless `Never`). `Always` takes every type; `Auto`
/// and `Never` leave a type to another manager that owns any field of it
/// anywhere on the Gateway (so the hub is sent what that writer wrote).
pub fn plan(mode: WriteMode, own: &Ownership) -> Plan {
    let yield_to_others = mode != WriteMode::Always;
    let gateway: Vec<&'static str> = GATEWAY_TYPES
        .iter()
        .copied()
        .filter(|t| !(yield_to_others && own.others_own(false, t)))
        .collect();
    let listener: Vec<&'static str> = LISTENER_TYPES
        .iter()
        .copied()
        .filter(|t| !(yield_to_others && own.others_own(true, t)))
        .collect();
    let write = mode != WriteMode::Never;
    let retire = own
        .ours
        .iter()
        .filter(|s| s.type_ == DNS_MANAGED)
        .filter_map(|s| s.listener.clone())
        .collect();
    let carry = if write {
        own.ours
            .iter()
            .filter(|s| match &s.listener {
                None => {
                    GATEWAY_TYPES.contains(&s.type_.as_str())
                        && !gateway.contains(&s.type_.as_str())
                }
                Some(_) => {
                    LISTENER_TYPES.contains(&s.type_.as_str())
                        && !listener.contains(&s.type_.as_str())
                }
            })
            .cloned()
            .collect()
    } else {
        BTreeSet::new()
    };
    Plan {
        write,
        gateway,
        listener,
        retire,
        carry,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1;
    use serde_json::json;

    use super::*;

    const ME: &str = "gwhub-agent";

    fn entry(
        manager: &str,
        operation: &str,
        subresource: Option<&str>,
        fields: Value,
    ) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some(operation.into()),
            subresource: subresource.map(Into::into),
            api_version: Some("gateway.networking.k8s.io/v1".into()),
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(FieldsV1(fields)),
            time: None,
        }
    }

    fn gw_cond(types: &[&str]) -> Value {
        let conds: serde_json::Map<String, Value> = types
            .iter()
            .map(|t| {
                (
                    format!("k:{{\"type\":\"{t}\"}}"),
                    json!({".": {}, "f:message": {}}),
                )
            })
            .collect();
        json!({"f:status": {"f:conditions": conds}})
    }

    fn listener_cond(listener: &str, types: &[&str]) -> Value {
        let conds: serde_json::Map<String, Value> = types
            .iter()
            .map(|t| {
                (
                    format!("k:{{\"type\":\"{t}\"}}"),
                    json!({".": {}, "f:status": {}}),
                )
            })
            .collect();
        json!({"f:status": {"f:listeners": {format!("k:{{\"name\":\"{listener}\"}}"): {
            ".": {}, "f:name": {}, "f:conditions": conds}}}})
    }

    fn slot(listener: Option<&str>, t: &str) -> Slot {
        Slot {
            listener: listener.map(Into::into),
            type_: t.into(),
        }
    }

    #[test]
    fn write_mode_parses_the_flag_values() {
        assert_eq!("auto".parse(), Ok(WriteMode::Auto));
        assert_eq!("true".parse(), Ok(WriteMode::Always));
        assert_eq!("false".parse(), Ok(WriteMode::Never));
        assert!(
            "yes"
                .parse::<WriteMode>()
                .unwrap_err()
                .contains("auto, true, false")
        );
    }

    #[test]
    fn ownership_reads_apply_and_update_entries_with_or_without_subresource() {
        let entries = [
            entry(ME, "Apply", Some("status"), gw_cond(&["LoadBalancerReady"])),
            entry(
                "ingress-operator",
                "Update",
                None,
                gw_cond(&["DNSReady", "Accepted"]),
            ),
            entry(
                "istio",
                "Apply",
                Some("status"),
                listener_cond("http", &["Programmed"]),
            ),
            entry(
                ME,
                "Apply",
                Some("status"),
                listener_cond("http", &["DNSManaged", "DNSReady"]),
            ),
            entry("kubectl", "Update", None, json!({"f:spec": {}})),
        ];
        let own = Ownership::of(&entries, ME);
        assert_eq!(
            own.ours,
            [
                slot(None, "LoadBalancerReady"),
                slot(Some("http"), "DNSManaged"),
                slot(Some("http"), "DNSReady")
            ]
            .into_iter()
            .collect()
        );
        assert_eq!(
            own.others,
            [
                slot(None, "Accepted"),
                slot(None, "DNSReady"),
                slot(Some("http"), "Programmed")
            ]
            .into_iter()
            .collect()
        );
    }

    /// The decision table: managedFields -> which types the agent writes.
    #[test]
    fn plan_table() {
        let lb = "LoadBalancerReady";
        let dns = "DNSReady";
        struct Case {
            name: &'static str,
            mode: WriteMode,
            entries: Vec<ManagedFieldsEntry>,
            gateway: Vec<&'static str>,
            listener: Vec<&'static str>,
            write: bool,
            mode_label: GatewayMode,
        }
        let operator_all = || {
            vec![
                entry(
                    "ingress-operator",
                    "Update",
                    Some("status"),
                    gw_cond(&[lb, dns]),
                ),
                entry(
                    "ingress-operator",
                    "Update",
                    Some("status"),
                    listener_cond("a", &[dns]),
                ),
            ]
        };
        let cases = vec![
            Case {
                name: "no managedFields: auto writes everything",
                mode: WriteMode::Auto,
                entries: vec![],
                gateway: vec![lb, dns],
                listener: vec![dns],
                write: true,
                mode_label: GatewayMode::Write,
            },
            Case {
                name: "only we and Istio write: auto writes everything",
                mode: WriteMode::Auto,
                entries: vec![
                    entry(ME, "Apply", Some("status"), gw_cond(&[lb, dns])),
                    entry(
                        "pilot-discovery",
                        "Apply",
                        Some("status"),
                        gw_cond(&["Accepted", "Programmed"]),
                    ),
                ],
                gateway: vec![lb, dns],
                listener: vec![dns],
                write: true,
                mode_label: GatewayMode::Write,
            },
            Case {
                name: "4.22 operator writes all three: auto streams only",
                mode: WriteMode::Auto,
                entries: operator_all(),
                gateway: vec![],
                listener: vec![],
                write: true,
                mode_label: GatewayMode::Stream,
            },
            Case {
                name: "operator writes only LoadBalancerReady (Apply): partial",
                mode: WriteMode::Auto,
                entries: vec![entry("ingress-operator", "Apply", None, gw_cond(&[lb]))],
                gateway: vec![dns],
                listener: vec![dns],
                write: true,
                mode_label: GatewayMode::Partial,
            },
            Case {
                name: "listener DNSReady on another listener counts for the type",
                mode: WriteMode::Auto,
                entries: vec![entry(
                    "ingress-operator",
                    "Update",
                    None,
                    listener_cond("b", &[dns]),
                )],
                gateway: vec![lb, dns],
                listener: vec![],
                write: true,
                mode_label: GatewayMode::Partial,
            },
            Case {
                name: "true writes regardless",
                mode: WriteMode::Always,
                entries: operator_all(),
                gateway: vec![lb, dns],
                listener: vec![dns],
                write: true,
                mode_label: GatewayMode::Write,
            },
            Case {
                name: "false never writes, computes the types nobody else writes",
                mode: WriteMode::Never,
                entries: vec![entry("ingress-operator", "Update", None, gw_cond(&[lb]))],
                gateway: vec![dns],
                listener: vec![dns],
                write: false,
                mode_label: GatewayMode::Stream,
            },
        ];
        for c in cases {
            let p = plan(c.mode, &Ownership::of(&c.entries, ME));
            assert_eq!(p.gateway, c.gateway, "{}", c.name);
            assert_eq!(p.listener, c.listener, "{}", c.name);
            assert_eq!(p.write, c.write, "{}", c.name);
            assert_eq!(p.mode(), c.mode_label, "{}", c.name);
        }
    }

    #[test]
    fn retires_our_dns_managed_and_carries_our_share_of_taken_over_types() {
        let entries = [
            entry(
                ME,
                "Apply",
                Some("status"),
                gw_cond(&["LoadBalancerReady", "DNSReady"]),
            ),
            entry(
                ME,
                "Apply",
                Some("status"),
                listener_cond("a", &["DNSManaged", "DNSReady"]),
            ),
            entry("ingress-operator", "Update", None, gw_cond(&["DNSReady"])),
            entry("other", "Update", None, listener_cond("b", &["DNSManaged"])),
        ];
        let p = plan(WriteMode::Auto, &Ownership::of(&entries, ME));
        assert_eq!(p.retire, ["a".to_owned()].into_iter().collect());
        assert_eq!(p.carry, [slot(None, "DNSReady")].into_iter().collect());
        assert_eq!(p.gateway, vec!["LoadBalancerReady"]);
        assert_eq!(p.listener, vec!["DNSReady"]);
        let never = plan(WriteMode::Never, &Ownership::of(&entries, ME));
        assert!(never.carry.is_empty());
    }
}
