//! `DNSReady` for one listener hostname and the Gateway-level `DNSReady`
//! that sums the listeners up (spec §2), with the statuses, reasons and
//! messages the OpenShift ingress operator's gateway-status controller
//! writes (`pkg/resources/status`), so the two writers agree.

use std::fmt::Write as _;

use crate::openshift::{DNS, DNSManagementPolicy, DNSRecord, DNSZone};

use super::{DNS_READY, Verdict};

/// The DNSRecord condition type that says whether a zone has the record.
pub const PUBLISHED: &str = "Published";
/// The zone tag the operator matches zones by when ids are absent.
pub const ZONE_NAME_TAG: &str = "Name";

/// The hostname as matched: one trailing dot trimmed (`*.apps.example.com.`
/// and `*.apps.example.com` name the same record), as the operator does
/// (Go's `strings.TrimSuffix(h, ".")`); `a.b..` stays `a.b.`, so it does
/// not match `a.b`.
pub(crate) fn normalize_hostname(hostname: &str) -> &str {
    hostname.strip_suffix('.').unwrap_or(hostname)
}

/// Whether two zones are the same: the same non-empty `id`, or the same
/// non-empty `Name` tag.
pub(crate) fn zones_match(a: &DNSZone, b: &DNSZone) -> bool {
    (!a.id.is_empty() && a.id == b.id) || name_tag(a).is_some_and(|n| Some(n) == name_tag(b))
}

fn name_tag(z: &DNSZone) -> Option<&str> {
    z.tags
        .get(ZONE_NAME_TAG)
        .map(String::as_str)
        .filter(|s| !s.is_empty())
}

/// Whether `zone` is the DNS config's publicZone or privateZone.
pub(crate) fn zone_in_config(dns: &DNS, zone: &DNSZone) -> bool {
    dns.zones().into_iter().any(|z| zones_match(zone, z))
}

/// A list of zones as Go's `%v` prints a `[]configv1.DNSZone`, which is how
/// the operator writes them into messages: `[{Z1 map[]} { map[Name:priv]}]`
/// (struct fields in order, separated by a space; map keys sorted).
pub(crate) fn render_zones(zones: &[&DNSZone]) -> String {
    let mut out = String::from("[");
    for (i, z) in zones.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let _ = write!(out, "{{{} map[", z.id);
        for (j, (k, v)) in z.tags.iter().enumerate() {
            if j > 0 {
                out.push(' ');
            }
            let _ = write!(out, "{k}:{v}");
        }
        out.push_str("]}");
    }
    out.push(']');
    out
}

/// `DNSReady` for a listener with a hostname whose DNSRecord (matched by
/// `normalize_hostname`) is `record`. The first rule of spec §2 that
/// applies wins.
pub fn dns_ready(dns: &DNS, record: Option<&DNSRecord>) -> Verdict {
    // 1. NoDNSZones
    if dns.zones().is_empty() {
        return Verdict::new(
            DNS_READY,
            "False",
            "NoDNSZones",
            "No DNS zones are defined in the cluster dns config.",
        );
    }
    // 2. RecordNotFound
    let Some(record) = record else {
        return Verdict::new(
            DNS_READY,
            "False",
            "RecordNotFound",
            "The wildcard record resource was not found.",
        );
    };
    // 3. UnmanagedDNS
    if record.spec.dns_management_policy == DNSManagementPolicy::Unmanaged {
        return Verdict::new(
            DNS_READY,
            "Unknown",
            "UnmanagedDNS",
            "The DNS management policy is set to Unmanaged.",
        );
    }
    // 4. NoZones: the record's status names no zone at all.
    let zones = record
        .status
        .as_ref()
        .map(|s| s.zones.as_slice())
        .unwrap_or_default();
    if zones.is_empty() {
        return Verdict::new(
            DNS_READY,
            "False",
            "NoZones",
            "The record isn't present in any zones.",
        );
    }
    // 5. Every Published condition of every configured zone counts.
    let mut failed = Vec::new();
    let mut unknown = Vec::new();
    for zone in zones {
        if !zone_in_config(dns, &zone.dns_zone) {
            continue;
        }
        for c in zone.conditions.iter().filter(|c| c.type_ == PUBLISHED) {
            match c.status.as_str() {
                "False" => failed.push(&zone.dns_zone),
                "Unknown" => unknown.push(&zone.dns_zone),
                _ => {}
            }
        }
    }
    if !failed.is_empty() {
        return Verdict::new(
            DNS_READY,
            "False",
            "FailedZones",
            format!(
                "The record failed to provision in some zones: {}",
                render_zones(&failed)
            ),
        );
    }
    if !unknown.is_empty() {
        return Verdict::new(
            DNS_READY,
            "False",
            "UnknownZones",
            format!(
                "Provisioning of the record is in an unknown state in some zones: {}",
                render_zones(&unknown)
            ),
        );
    }
    Verdict::new(
        DNS_READY,
        "True",
        "NoFailedZones",
        "The record is provisioned in all reported zones.",
    )
}

/// The Gateway-level `DNSReady` given the statuses of the listener-level
/// `DNSReady`s the Gateway carries: `None` (no condition) when no listener
/// carries one.
pub(crate) fn gateway_dns_ready<'a>(
    listeners: impl IntoIterator<Item = &'a str>,
) -> Option<Verdict> {
    let mut any = false;
    let mut all_true = true;
    for status in listeners {
        any = true;
        all_true &= status == "True";
    }
    if !any {
        return None;
    }
    Some(if all_true {
        Verdict::new(
            DNS_READY,
            "True",
            "AllListenersReady",
            "All the listeners have DNS ready",
        )
    } else {
        Verdict::new(
            DNS_READY,
            "False",
            "SomeListenersNotReady",
            "One or more listeners have DNS provisioning issues",
        )
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn zone(id: &str, tags: &[(&str, &str)]) -> DNSZone {
        DNSZone {
            id: id.into(),
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    #[test]
    fn zones_render_as_go_prints_them() {
        let a = zone("Z1", &[]);
        let b = zone("", &[("Name", "priv")]);
        let c = zone("x", &[("b", "2"), ("a", "1")]);
        assert_eq!(render_zones(&[&a, &b]), "[{Z1 map[]} { map[Name:priv]}]");
        assert_eq!(render_zones(&[&c]), "[{x map[a:1 b:2]}]");
        assert_eq!(render_zones(&[]), "[]");
    }

    #[test]
    fn normalize_hostname_trims_one_trailing_dot() {
        let cases = [
            ("a.b", "a.b"),
            ("a.b.", "a.b"),
            ("a.b..", "a.b."),
            ("*.apps.example.com.", "*.apps.example.com"),
            (".", ""),
            ("..", "."),
            ("", ""),
        ];
        for (input, want) in cases {
            assert_eq!(normalize_hostname(input), want, "{input:?}");
        }
        // Listener and record hostnames match when equal after trimming.
        let pairs = [
            ("a.b", "a.b.", true),
            ("a.b.", "a.b.", true),
            ("a.b..", "a.b", false),
            ("a.b", "a.b..", false),
            ("a.b..", "a.b.", false),
            ("a.b..", "a.b..", true),
        ];
        for (listener, record, want) in pairs {
            assert_eq!(
                normalize_hostname(listener) == normalize_hostname(record),
                want,
                "{listener:?} vs {record:?}"
            );
        }
    }

    #[test]
    fn zones_match_by_non_empty_id_or_name_tag() {
        let cases = [
            (zone("Z1", &[]), zone("Z1", &[]), true),
            (zone("", &[]), zone("", &[]), false),
            (
                zone("", &[("Name", "n")]),
                zone("other", &[("Name", "n")]),
                true,
            ),
            (zone("", &[("Name", "")]), zone("", &[("Name", "")]), false),
            (zone("", &[("x", "n")]), zone("", &[("x", "n")]), false),
            (zone("Z1", &[]), zone("Z2", &[]), false),
        ];
        for (a, b, want) in cases {
            assert_eq!(zones_match(&a, &b), want, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn gateway_level_sums_up_listeners() {
        assert_eq!(gateway_dns_ready([]), None);
        assert_eq!(
            gateway_dns_ready(["True"]).unwrap().reason,
            "AllListenersReady"
        );
        assert_eq!(
            gateway_dns_ready(["True", "False"]).unwrap().reason,
            "SomeListenersNotReady"
        );
        assert_eq!(gateway_dns_ready(["Unknown"]).unwrap().status, "False");
    }
}
