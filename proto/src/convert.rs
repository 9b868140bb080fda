//! Wire types <-> Gateway API types, validating on the way in.
//!
//! Decoding takes messages by value so strings move instead of being copied
//! (ingest speed). Empty and absent lists are the same on the wire; decoding
//! yields `None` for an empty optional list, so a re-report of the same
//! status compares equal.

use std::fmt;

use gateway_api::apis::standard::gateways as api;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::v1;
use gwhub_model::limits::*;
pub use gwhub_model::names::NameRule;
use gwhub_model::text::quote_client_input;

/// Why a message was refused: the field path and the rule it broke.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct Invalid {
    /// E.g. `listeners[2].conditions[0].message`; prefixed by callers.
    pub path: String,
    pub problem: Problem,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    Empty,
    TooLong {
        len: usize,
        max: usize,
    },
    TooMany {
        len: usize,
        max: usize,
    },
    /// A condition status other than True, False or Unknown.
    BadConditionStatus(String),
    BadTime(i64),
    /// Not a Kubernetes name of the given rule (a namespace is a DNS-1123
    /// label, a Gateway name a DNS-1123 subdomain).
    NotKubernetesName {
        value: String,
        rule: NameRule,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Empty => f.write_str("must not be empty"),
            Problem::TooLong { len, max } => {
                write!(f, "{len} characters long, the limit is {max}")
            }
            Problem::TooMany { len, max } => write!(f, "{len} entries, the limit is {max}"),
            Problem::BadConditionStatus(s) => {
                write!(
                    f,
                    "condition status {} is not True, False or Unknown",
                    quote_client_input(s)
                )
            }
            Problem::BadTime(s) => write!(f, "{s} is not a unix time between years 0000 and 9999"),
            Problem::NotKubernetesName { value, rule } => {
                write!(
                    f,
                    "{} is not a valid Kubernetes name: it must be {rule}",
                    quote_client_input(value)
                )
            }
        }
    }
}

impl Invalid {
    pub fn new(path: impl Into<String>, problem: Problem) -> Self {
        Invalid {
            path: path.into(),
            problem,
        }
    }

    /// Prefixes the path with the enclosing field (only built on error).
    pub fn within(mut self, outer: impl fmt::Display) -> Self {
        self.path = if self.path.is_empty() {
            outer.to_string()
        } else {
            format!("{outer}.{}", self.path)
        };
        self
    }
}

type Result<T> = std::result::Result<T, Invalid>;

/// 0000-01-01T00:00:00Z: the earliest time Kubernetes can write.
const EARLIEST_TIME: i64 = -62_167_219_200;

/// Checks a string's length (in characters, as the CRDs' maxLength) and,
/// if `required`, that it is set.
pub fn check_str(field: &str, s: &str, max: usize, required: bool) -> Result<()> {
    if required && s.is_empty() {
        return Err(Invalid::new(field, Problem::Empty));
    }
    // The CRDs' maxLength counts characters, not bytes.
    if s.len() > max {
        let len = s.chars().count();
        if len > max {
            return Err(Invalid::new(field, Problem::TooLong { len, max }));
        }
    }
    Ok(())
}

/// Checks a reported Gateway's namespace and name against the Kubernetes
/// name rules (they become object names on the hub cluster).
pub fn check_gateway_names(namespace: &str, name: &str) -> Result<()> {
    check_str("namespace", namespace, MAX_NAME_LEN, true)?;
    check_str("name", name, MAX_NAME_LEN, true)?;
    for (field, value, rule) in [
        ("namespace", namespace, NameRule::Dns1123Label),
        ("name", name, NameRule::Dns1123Subdomain),
    ] {
        if !rule.allows(value) {
            return Err(Invalid::new(
                field,
                Problem::NotKubernetesName {
                    value: value.to_owned(),
                    rule,
                },
            ));
        }
    }
    Ok(())
}

/// Checks a list's length.
pub fn check_count(field: &str, len: usize, max: usize) -> Result<()> {
    if len > max {
        return Err(Invalid::new(field, Problem::TooMany { len, max }));
    }
    Ok(())
}

/// A cluster's Gateway, decoded.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub generation: i64,
    pub status: api::GatewayStatus,
    /// `(listener, hostname)` for each reported listener whose Gateway
    /// spec has a hostname (the report's optional field; older agents
    /// send none), in the report's order.
    pub listener_hostnames: Vec<(String, String)>,
}

/// Decodes and validates one reported Gateway. Errors name the Gateway.
pub fn report_from_proto(r: v1::GatewayReport) -> Result<Report> {
    check_gateway_names(&r.namespace, &r.name)?;
    let who = || format!("Gateway {}/{}", r.namespace, r.name);
    check_str("uid", &r.uid, MAX_UID_LEN, false).map_err(|e| e.within(who()))?;
    let mut listener_hostnames = Vec::new();
    for (i, l) in r.status.iter().flat_map(|s| s.listeners.iter()).enumerate() {
        if let Some(h) = &l.hostname {
            check_str("hostname", h, MAX_NAME_LEN, false)
                .map_err(|e| e.within(format!("{}: status: listeners[{i}]", who())))?;
            listener_hostnames.push((l.name.clone(), h.clone()));
        }
    }
    let status = match r.status {
        Some(s) => status_from_proto(s).map_err(|e| e.within(format!("{}: status", who())))?,
        None => api::GatewayStatus::default(),
    };
    Ok(Report {
        namespace: r.namespace,
        name: r.name,
        uid: r.uid,
        generation: r.generation,
        status,
        listener_hostnames,
    })
}

/// Decodes and validates a [`v1::GatewayRef`] (a delete).
pub fn ref_from_proto(r: v1::GatewayRef) -> Result<(String, String)> {
    check_gateway_names(&r.namespace, &r.name)?;
    Ok((r.namespace, r.name))
}

/// Encodes one Gateway for the wire.
pub fn report_to_proto(
    namespace: &str,
    name: &str,
    uid: &str,
    generation: i64,
    status: &api::GatewayStatus,
) -> Result<v1::GatewayReport> {
    Ok(v1::GatewayReport {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        uid: uid.to_owned(),
        generation,
        status: Some(status_to_proto(status)?),
    })
}

fn none_if_empty<T>(v: Vec<T>) -> Option<Vec<T>> {
    if v.is_empty() { None } else { Some(v) }
}

/// Decodes and validates a status.
///
/// Every list is decoded into a vector of exactly its length: prost grows
/// repeated fields by doubling (capacity 4 for 2 entries) and collecting
/// in place would keep that capacity, and the hub keeps every cluster's
/// status for as long as the cluster reports it.
pub fn status_from_proto(s: v1::GatewayStatus) -> Result<api::GatewayStatus> {
    check_count("conditions", s.conditions.len(), MAX_CONDITIONS)?;
    check_count("addresses", s.addresses.len(), MAX_ADDRESSES)?;
    check_count("listeners", s.listeners.len(), MAX_LISTENERS)?;
    Ok(api::GatewayStatus {
        conditions: none_if_empty(conditions_from_proto(s.conditions)?),
        addresses: none_if_empty(exact(s.addresses, |i, a| {
            address_from_proto(a).map_err(|e| e.within(format!("addresses[{i}]")))
        })?),
        listeners: none_if_empty(exact(s.listeners, |i, l| {
            listener_from_proto(l).map_err(|e| e.within(format!("listeners[{i}]")))
        })?),
        attached_listener_sets: s.attached_listener_sets,
    })
}

/// `list` converted by `f` (given each entry's index) into a vector of
/// exactly `list.len()` entries; the first error ends it.
fn exact<T, U>(list: Vec<T>, mut f: impl FnMut(usize, T) -> Result<U>) -> Result<Vec<U>> {
    let mut out = Vec::with_capacity(list.len());
    for (i, item) in list.into_iter().enumerate() {
        out.push(f(i, item)?);
    }
    Ok(out)
}

/// Encodes a status; fails only on a condition status the API would reject.
pub fn status_to_proto(s: &api::GatewayStatus) -> Result<v1::GatewayStatus> {
    Ok(v1::GatewayStatus {
        conditions: conditions_to_proto(s.conditions.as_deref().unwrap_or_default())?,
        addresses: s
            .addresses
            .iter()
            .flatten()
            .map(|a| v1::GatewayAddress {
                r#type: a.r#type.clone(),
                value: a.value.clone(),
            })
            .collect(),
        listeners: s
            .listeners
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, l)| {
                Ok(v1::ListenerStatus {
                    name: l.name.clone(),
                    attached_routes: l.attached_routes,
                    supported_kinds: l
                        .supported_kinds
                        .iter()
                        .flatten()
                        .map(|k| v1::RouteGroupKind {
                            group: k.group.clone(),
                            kind: k.kind.clone(),
                        })
                        .collect(),
                    conditions: conditions_to_proto(&l.conditions)
                        .map_err(|e| e.within(format!("listeners[{i}]")))?,
                    hostname: None,
                })
            })
            .collect::<Result<_>>()?,
        attached_listener_sets: s.attached_listener_sets,
    })
}

fn address_from_proto(a: v1::GatewayAddress) -> Result<api::GatewayStatusAddresses> {
    if let Some(t) = &a.r#type {
        check_str("type", t, MAX_ADDRESS_TYPE_LEN, true)?;
    }
    check_str("value", &a.value, MAX_NAME_LEN, true)?;
    Ok(api::GatewayStatusAddresses {
        r#type: a.r#type,
        value: a.value,
    })
}

fn listener_from_proto(l: v1::ListenerStatus) -> Result<api::GatewayStatusListeners> {
    check_str("name", &l.name, MAX_NAME_LEN, true)?;
    check_count(
        "supportedKinds",
        l.supported_kinds.len(),
        MAX_SUPPORTED_KINDS,
    )?;
    check_count("conditions", l.conditions.len(), MAX_CONDITIONS)?;
    let supported_kinds = exact(l.supported_kinds, |i, k| {
        let at = || format!("supportedKinds[{i}]");
        if let Some(g) = &k.group {
            check_str("group", g, MAX_NAME_LEN, false).map_err(|e| e.within(at()))?;
        }
        check_str("kind", &k.kind, MAX_KIND_LEN, true).map_err(|e| e.within(at()))?;
        Ok(api::GatewayStatusListenersSupportedKinds {
            group: k.group,
            kind: k.kind,
        })
    })?;
    Ok(api::GatewayStatusListeners {
        name: l.name,
        attached_routes: l.attached_routes,
        supported_kinds: none_if_empty(supported_kinds),
        conditions: conditions_from_proto(l.conditions)?,
    })
}

/// Decodes and validates a condition list (its count is checked by callers).
pub fn conditions_from_proto(list: Vec<v1::Condition>) -> Result<Vec<Condition>> {
    exact(list, |i, c| {
        condition_from_proto(c).map_err(|e| e.within(format!("conditions[{i}]")))
    })
}

/// Encodes a condition list.
pub fn conditions_to_proto(list: &[Condition]) -> Result<Vec<v1::Condition>> {
    list.iter()
        .enumerate()
        .map(|(i, c)| condition_to_proto(c).map_err(|e| e.within(format!("conditions[{i}]"))))
        .collect()
}

/// A wire `ConditionStatus` as Kubernetes spells it (`True`, `False`,
/// `Unknown`); `None` for an unset or unknown enum value.
pub fn status_word(status: i32) -> Option<&'static str> {
    match v1::ConditionStatus::try_from(status) {
        Ok(v1::ConditionStatus::True) => Some("True"),
        Ok(v1::ConditionStatus::False) => Some("False"),
        Ok(v1::ConditionStatus::Unknown) => Some("Unknown"),
        _ => None,
    }
}

/// Decodes and validates one condition.
pub fn condition_from_proto(c: v1::Condition) -> Result<Condition> {
    check_str("type", &c.r#type, MAX_CONDITION_TYPE_LEN, true)?;
    check_str("reason", &c.reason, MAX_REASON_LEN, false)?;
    check_str("message", &c.message, MAX_CONDITION_MESSAGE_LEN, false)?;
    let Some(status) = status_word(c.status) else {
        return Err(Invalid::new(
            "status",
            Problem::BadConditionStatus(format!("enum value {}", c.status)),
        ));
    };
    // Kubernetes writes times with a four-digit year: before year 0 the
    // API server would refuse the hub Gateway's whole status.
    let time = Timestamp::from_second(c.last_transition_time)
        .ok()
        .filter(|t| t.as_second() >= EARLIEST_TIME)
        .ok_or_else(|| {
            Invalid::new(
                "lastTransitionTime",
                Problem::BadTime(c.last_transition_time),
            )
        })?;
    Ok(Condition {
        type_: c.r#type,
        status: status.to_owned(),
        reason: c.reason,
        message: c.message,
        observed_generation: c.observed_generation,
        last_transition_time: Time(time),
    })
}

/// Encodes one condition (sub-second precision is dropped, as the API does).
pub fn condition_to_proto(c: &Condition) -> Result<v1::Condition> {
    let status = match c.status.as_str() {
        "True" => v1::ConditionStatus::True,
        "False" => v1::ConditionStatus::False,
        "Unknown" => v1::ConditionStatus::Unknown,
        other => {
            return Err(Invalid::new(
                "status",
                Problem::BadConditionStatus(other.to_owned()),
            ));
        }
    };
    Ok(v1::Condition {
        r#type: c.type_.clone(),
        status: status as i32,
        reason: c.reason.clone(),
        message: c.message.clone(),
        observed_generation: c.observed_generation,
        last_transition_time: c.last_transition_time.0.as_second(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(t: &str, s: &str, secs: i64) -> Condition {
        Condition {
            type_: t.into(),
            status: s.into(),
            reason: "R".into(),
            message: format!("{t} is {s}"),
            observed_generation: Some(3),
            last_transition_time: Time(Timestamp::from_second(secs).unwrap()),
        }
    }

    fn sample() -> api::GatewayStatus {
        api::GatewayStatus {
            addresses: Some(vec![
                api::GatewayStatusAddresses {
                    r#type: Some("IPAddress".into()),
                    value: "10.0.0.1".into(),
                },
                api::GatewayStatusAddresses {
                    r#type: None,
                    value: "10.0.0.2".into(),
                },
            ]),
            attached_listener_sets: Some(2),
            conditions: Some(vec![
                cond("Accepted", "True", 100),
                cond("Programmed", "False", 200),
                cond("LoadBalancerReady", "Unknown", 300),
            ]),
            listeners: Some(vec![api::GatewayStatusListeners {
                attached_routes: 4,
                conditions: vec![cond("DNSReady", "True", 400)],
                name: "https".into(),
                supported_kinds: Some(vec![api::GatewayStatusListenersSupportedKinds {
                    group: Some("gateway.networking.k8s.io".into()),
                    kind: "HTTPRoute".into(),
                }]),
            }]),
        }
    }

    #[test]
    fn status_round_trips() {
        let s = sample();
        let p = status_to_proto(&s).unwrap();
        assert_eq!(status_from_proto(p.clone()).unwrap(), s);
        assert_eq!(
            status_to_proto(&status_from_proto(p.clone()).unwrap()).unwrap(),
            p
        );
    }

    /// A decoded status keeps no spare capacity, however the wire lists
    /// grew while decoding (the hub keeps every cluster's status).
    #[test]
    fn decoded_lists_have_exactly_their_length() {
        let mut p = status_to_proto(&sample()).unwrap();
        p.conditions.reserve(13);
        p.addresses.reserve(7);
        p.listeners.reserve(5);
        p.listeners[0].conditions.reserve(3);
        p.listeners[0].supported_kinds.reserve(3);
        let s = status_from_proto(p).unwrap();
        let conditions = s.conditions.unwrap();
        let addresses = s.addresses.unwrap();
        let listeners = s.listeners.unwrap();
        assert_eq!(conditions.capacity(), conditions.len());
        assert_eq!(addresses.capacity(), addresses.len());
        assert_eq!(listeners.capacity(), listeners.len());
        let kinds = listeners[0].supported_kinds.as_ref().unwrap();
        assert_eq!(kinds.capacity(), kinds.len());
        assert_eq!(
            listeners[0].conditions.capacity(),
            listeners[0].conditions.len()
        );
    }
    #[test]
    fn empty_lists_decode_as_absent() {
        let s = api::GatewayStatus {
            addresses: Some(vec![]),
            conditions: Some(vec![]),
            listeners: Some(vec![api::GatewayStatusListeners {
                name: "http".into(),
                supported_kinds: Some(vec![]),
                ..Default::default()
            }]),
            attached_listener_sets: None,
        };
        let back = status_from_proto(status_to_proto(&s).unwrap()).unwrap();
        assert_eq!(back.addresses, None);
        assert_eq!(back.conditions, None);
        assert_eq!(back.listeners.unwrap()[0].supported_kinds, None);
    }

    #[test]
    fn report_round_trips() {
        let p = report_to_proto("ns", "gw", "uid-1", 7, &sample()).unwrap();
        let r = report_from_proto(p).unwrap();
        assert_eq!(
            (r.namespace.as_str(), r.name.as_str(), r.uid.as_str()),
            ("ns", "gw", "uid-1")
        );
        assert_eq!(r.generation, 7);
        assert_eq!(r.status, sample());
        assert!(r.listener_hostnames.is_empty());
    }

    /// The listener hostname (fleet DNS) is optional: older agents send
    /// none; one longer than a DNS name is refused.
    #[test]
    fn listener_hostnames_are_optional_and_bounded() {
        let mut p = report_to_proto("ns", "gw", "uid-1", 7, &sample()).unwrap();
        let listeners = &mut p.status.as_mut().unwrap().listeners;
        assert!(!listeners.is_empty());
        let name = listeners[0].name.clone();
        listeners[0].hostname = Some("app.fleet.test".into());
        let r = report_from_proto(p.clone()).unwrap();
        assert_eq!(r.listener_hostnames, [(name, "app.fleet.test".to_owned())]);
        p.status.as_mut().unwrap().listeners[0].hostname = Some("a".repeat(254));
        let e = report_from_proto(p).unwrap_err().to_string();
        assert!(e.contains("hostname"), "{e}");
    }

    #[test]
    fn kubernetes_name_rules() {
        use NameRule::*;
        let long_label = "a".repeat(64);
        let long_name = format!("{}.{}", "a".repeat(200), "b".repeat(53));
        for (rule, s, ok) in [
            (Dns1123Label, "openshift-ingress", true),
            (Dns1123Label, "a", true),
            (Dns1123Label, "0ns", true),
            (Dns1123Label, &"a".repeat(63), true),
            (Dns1123Label, &long_label, false),
            (Dns1123Label, "x/y", false),
            (Dns1123Label, "Upper", false),
            (Dns1123Label, "-a", false),
            (Dns1123Label, "a-", false),
            (Dns1123Label, "a.b", false),
            (Dns1123Label, "", false),
            (Dns1123Label, "a\u{1b}[2J", false),
            (Dns1123Subdomain, "gw.example-1", true),
            (Dns1123Subdomain, &"a".repeat(100), true),
            (Dns1123Subdomain, &long_name, false),
            (Dns1123Subdomain, "a..b", false),
            (Dns1123Subdomain, ".a", false),
            (Dns1123Subdomain, "x/y", false),
            (Dns1123Subdomain, "a_b", false),
            (Dns1123Subdomain, "a.-b", false),
        ] {
            assert_eq!(rule.allows(s), ok, "{rule:?} {s:?}");
        }
        let e = check_gateway_names("x/y", "gw").unwrap_err();
        assert_eq!(e.path, "namespace");
        assert!(e.to_string().contains("DNS-1123 label"), "{e}");
        let e = check_gateway_names("ns", "Gw").unwrap_err();
        assert_eq!(e.path, "name");
        assert!(e.to_string().contains("DNS-1123 subdomain"), "{e}");
    }

    #[test]
    fn errors_name_the_field() {
        let mut p = report_to_proto("ns", "gw", "", 1, &sample()).unwrap();
        p.status.as_mut().unwrap().listeners[0].conditions[0].message = "x".repeat(40_000);
        let e = report_from_proto(p).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Gateway ns/gw: status.listeners[0].conditions[0].message: 40000 characters long, the limit is 32768"
        );
        // The limit counts characters, as the API server does: 32,768
        // two-byte characters pass, one more does not.
        let mut p = report_to_proto("ns", "gw", "", 1, &sample()).unwrap();
        p.status.as_mut().unwrap().conditions[0].message = "é".repeat(32_768);
        assert!(report_from_proto(p.clone()).is_ok());
        p.status.as_mut().unwrap().conditions[0].message.push('é');
        assert_eq!(
            report_from_proto(p).unwrap_err().to_string(),
            "Gateway ns/gw: status.conditions[0].message: 32769 characters long, the limit is 32768"
        );

        // A time Kubernetes cannot write (year -1) would fail the hub's
        // status write for every cluster.
        let mut p = report_to_proto("ns", "gw", "", 1, &sample()).unwrap();
        p.status.as_mut().unwrap().conditions[0].last_transition_time = -62_167_219_201;
        assert_eq!(
            report_from_proto(p.clone()).unwrap_err().to_string(),
            "Gateway ns/gw: status.conditions[0].lastTransitionTime: -62167219201 is not a unix time between years 0000 and 9999"
        );
        p.status.as_mut().unwrap().conditions[0].last_transition_time = -62_167_219_200;
        assert!(report_from_proto(p).is_ok());

        let mut p = report_to_proto("ns", "gw", "", 1, &sample()).unwrap();
        let c = p.status.as_ref().unwrap().conditions[0].clone();
        p.status.as_mut().unwrap().conditions = vec![c; 9];
        let e = report_from_proto(p).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Gateway ns/gw: status.conditions: 9 entries, the limit is 8"
        );

        let mut p = report_to_proto("ns", "gw", "", 1, &sample()).unwrap();
        p.status.as_mut().unwrap().conditions[1].status = 42;
        assert!(
            report_from_proto(p)
                .unwrap_err()
                .to_string()
                .contains("status.conditions[1].status")
        );

        let p = report_to_proto("", "gw", "", 1, &sample()).unwrap();
        assert_eq!(
            report_from_proto(p).unwrap_err().to_string(),
            "namespace: must not be empty"
        );
    }

    #[test]
    fn bad_status_string_is_refused_on_encode() {
        let mut s = sample();
        s.conditions.as_mut().unwrap()[0].status = "Maybe".into();
        let e = status_to_proto(&s).unwrap_err();
        assert!(e.to_string().contains("conditions[0].status"), "{e}");
    }

    #[test]
    fn descriptor_set_is_embedded() {
        assert!(!crate::v1::FILE_DESCRIPTOR_SET.is_empty());
    }
}
