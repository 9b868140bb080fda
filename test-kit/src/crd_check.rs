//! A checker of the Gateway CRD's status schema (gateway-api v1.5.1,
//! `gateway.networking.k8s.io_gateways.yaml`), written from the schema with
//! its regular expressions copied verbatim and independent of the production
//! validation code, so the two can catch each other's mistakes.

use std::collections::HashSet;
use std::sync::LazyLock;

use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_model::Condition;
use regex::Regex;

fn re(p: &str) -> Regex {
    Regex::new(p).unwrap()
}

static ADDRESS_TYPE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^Hostname|IPAddress|NamedAddress|[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9\/\-._~%!$&'()*+,;=:]+$",
    )
});
static HOSTNAME_VALUE: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
});
static SECTION_NAME: LazyLock<Regex> =
    LazyLock::new(|| re(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"));
static GROUP: LazyLock<Regex> =
    LazyLock::new(|| re(r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"));
static KIND: LazyLock<Regex> = LazyLock::new(|| re(r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$"));
static CONDITION_TYPE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
    )
});
static REASON: LazyLock<Regex> = LazyLock::new(|| re(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"));

fn len(s: &str) -> usize {
    s.chars().count()
}

fn check(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(what()) }
}

/// Checks a metav1.Condition list (maxItems 8, map keyed by type).
pub fn check_conditions(at: &str, list: &[Condition]) -> Result<(), String> {
    check(list.len() <= 8, || {
        format!("{at}: {} conditions > 8", list.len())
    })?;
    let mut types = HashSet::new();
    for c in list {
        let at = format!("{at}[{}]", c.type_);
        check(types.insert(&c.type_), || format!("{at}: duplicate type"))?;
        check(
            len(&c.type_) <= 316 && CONDITION_TYPE.is_match(&c.type_),
            || format!("{at}: bad type"),
        )?;
        check(
            ["True", "False", "Unknown"].contains(&c.status.as_str()),
            || format!("{at}: bad status {:?}", c.status),
        )?;
        check(
            (1..=1024).contains(&len(&c.reason)) && REASON.is_match(&c.reason),
            || format!("{at}: bad reason {:?}", c.reason),
        )?;
        check(len(&c.message) <= 32768, || {
            format!("{at}: message of {} characters", len(&c.message))
        })?;
        check(c.observed_generation.is_none_or(|g| g >= 0), || {
            format!("{at}: negative observedGeneration")
        })?;
    }
    Ok(())
}

/// Checks a Gateway status against every rule of the CRD's status schema.
pub fn check_status(s: &GatewayStatus) -> Result<(), String> {
    let addresses = s.addresses.as_deref().unwrap_or_default();
    check(addresses.len() <= 16, || {
        format!("{} addresses > 16", addresses.len())
    })?;
    for a in addresses {
        let t = a.r#type.as_deref().unwrap_or("IPAddress");
        check(
            (1..=253).contains(&len(t)) && ADDRESS_TYPE.is_match(t),
            || format!("address type {t:?}"),
        )?;
        check((1..=253).contains(&len(&a.value)), || {
            format!("address value {:?} length", a.value)
        })?;
        check(
            t != "IPAddress" || a.value.parse::<std::net::IpAddr>().is_ok(),
            || format!("IPAddress value {:?}", a.value),
        )?;
        check(t != "Hostname" || HOSTNAME_VALUE.is_match(&a.value), || {
            format!("Hostname value {:?}", a.value)
        })?;
    }
    check_conditions("conditions", s.conditions.as_deref().unwrap_or_default())?;
    let listeners = s.listeners.as_deref().unwrap_or_default();
    check(listeners.len() <= 64, || {
        format!("{} listeners > 64", listeners.len())
    })?;
    let mut names = HashSet::new();
    for l in listeners {
        check(names.insert(&l.name), || {
            format!("duplicate listener {}", l.name)
        })?;
        check(
            (1..=253).contains(&len(&l.name)) && SECTION_NAME.is_match(&l.name),
            || format!("listener name {:?}", l.name),
        )?;
        check_conditions(&format!("listener {}", l.name), &l.conditions)?;
        let kinds = l.supported_kinds.as_deref().unwrap_or_default();
        check(kinds.len() <= 8, || {
            format!("listener {}: supportedKinds > 8", l.name)
        })?;
        for k in kinds {
            if let Some(g) = &k.group {
                check(len(g) <= 253 && GROUP.is_match(g), || {
                    format!("group {g:?}")
                })?;
            }
            check(
                (1..=63).contains(&len(&k.kind)) && KIND.is_match(&k.kind),
                || format!("kind {:?}", k.kind),
            )?;
        }
    }
    Ok(())
}
