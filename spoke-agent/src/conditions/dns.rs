//! `DNSManaged` and `DNSReady` for one listener hostname (spec §2), with the
//! reasons and messages the OpenShift ingress operator's gateway-status
//! controller writes (`pkg/resources/status`), so the two writers agree.

use crate::openshift::{DNS, DNSManagementPolicy, DNSRecord, DNSZone, DNSZoneStatus};

use super::{DNS_MANAGED, DNS_READY, Verdict};

/// Platforms whose DNS the ingress operator manages (it has a provider for
/// them; AlibabaCloud for releases that still ship that provider). On any
/// other platform (`None`, `BareMetal`, `VSphere`, `OpenStack`, `Nutanix`,
/// `External`, ...) DNS records cannot be managed.
pub const DNS_PLATFORMS: &[&str] = &["AWS", "Azure", "GCP", "IBMCloud", "PowerVS", "AlibabaCloud"];

/// Reason for both conditions on a platform without DNS management (the
/// operator has no string for this case; chosen to read like its others).
pub const REASON_UNSUPPORTED_PLATFORM: &str = "UnsupportedPlatform";

/// The DNSRecord condition type that says whether a zone has the record.
pub const PUBLISHED: &str = "Published";

/// The hostname as matched: trailing dots trimmed (`*.apps.example.com.` and
/// `*.apps.example.com` name the same record).
pub fn normalize_hostname(hostname: &str) -> &str {
    hostname.trim_end_matches('.')
}

/// Whether DNS can be managed on `platform` (an Infrastructure platform type).
pub fn platform_supports_dns(platform: &str) -> bool {
    DNS_PLATFORMS.contains(&platform)
}

/// `DNSManaged` for a listener with a hostname.
pub fn dns_managed(platform: &str, dns: &DNS) -> Verdict {
    if !platform_supports_dns(platform) {
        return Verdict::new(
            DNS_MANAGED,
            "False",
            REASON_UNSUPPORTED_PLATFORM,
            format!("DNS management is not supported on this platform: {platform}."),
        );
    }
    if dns.zones().is_empty() {
        return no_dns_zones(DNS_MANAGED);
    }
    Verdict::new(
        DNS_MANAGED,
        "True",
        "Normal",
        "DNS management is supported and zones are specified in the cluster DNS config.",
    )
}

fn no_dns_zones(type_: &'static str) -> Verdict {
    Verdict::new(
        type_,
        "False",
        "NoDNSZones",
        "No DNS zones are defined in the cluster dns config.",
    )
}

/// `DNSReady` for a listener with a hostname whose DNSRecord (matched by
/// [`normalize_hostname`]) is `record`. The first rule of spec §2 that
/// applies wins.
pub fn dns_ready(platform: &str, dns: &DNS, record: Option<&DNSRecord>) -> Verdict {
    // 1. platform
    if !platform_supports_dns(platform) {
        return Verdict::new(
            DNS_READY,
            "False",
            REASON_UNSUPPORTED_PLATFORM,
            format!("DNS records cannot be managed on this platform: {platform}."),
        );
    }
    // 2. NoDNSZones
    let configured = dns.zones();
    if configured.is_empty() {
        return no_dns_zones(DNS_READY);
    }
    // 3. RecordNotFound
    let Some(record) = record else {
        return Verdict::new(
            DNS_READY,
            "False",
            "RecordNotFound",
            "The wildcard record resource was not found.",
        );
    };
    // 4. UnmanagedDNS
    if record.spec.dns_management_policy == DNSManagementPolicy::Unmanaged {
        return Verdict::new(
            DNS_READY,
            "Unknown",
            "UnmanagedDNS",
            "The DNS management policy is set to Unmanaged.",
        );
    }
    // 5. NoZones: only zones the cluster DNS config still names count, so a
    // zone removed from the config cannot keep a listener failing.
    let zones: Vec<&DNSZoneStatus> = record
        .status
        .iter()
        .flat_map(|s| &s.zones)
        .filter(|z| configured.contains(&&z.dns_zone))
        .collect();
    if zones.is_empty() {
        return Verdict::new(
            DNS_READY,
            "False",
            "NoZones",
            "The record isn't present in any zones.",
        );
    }
    let mut failed = Vec::new();
    let mut unknown = Vec::new();
    for zone in zones {
        let published = zone.conditions.iter().find(|c| c.type_ == PUBLISHED);
        match published {
            Some(c) if c.status == "True" => {}
            Some(c) if c.status == "False" => {
                failed.push(zone_entry(&zone.dns_zone, detail(&c.message, &c.reason)))
            }
            Some(c) => unknown.push(zone_entry(&zone.dns_zone, detail(&c.message, &c.reason))),
            None => unknown.push(zone_entry(
                &zone.dns_zone,
                Some("no Published condition reported"),
            )),
        }
    }
    // 6. FailedZones beats 7. UnknownZones
    if !failed.is_empty() {
        return Verdict::new(
            DNS_READY,
            "False",
            "FailedZones",
            format!(
                "The record failed to provision in some zones: [{}]",
                failed.join(", ")
            ),
        );
    }
    if !unknown.is_empty() {
        return Verdict::new(
            DNS_READY,
            "False",
            "UnknownZones",
            format!(
                "Provisioning of the record is in an unknown state in some zones: [{}]",
                unknown.join(", ")
            ),
        );
    }
    // 8.
    Verdict::new(
        DNS_READY,
        "True",
        "NoFailedZones",
        "The record is provisioned in all reported zones.",
    )
}

/// The provider's explanation: its message, else its reason.
fn detail<'a>(message: &'a str, reason: &'a str) -> Option<&'a str> {
    [message.trim(), reason.trim()]
        .into_iter()
        .find(|s| !s.is_empty())
}

/// One zone in a FailedZones/UnknownZones message: `<zone>: <provider message>`.
fn zone_entry(zone: &DNSZone, detail: Option<&str>) -> String {
    let label = zone_label(zone);
    match detail {
        Some(d) => format!("{label}: {d}"),
        None => label,
    }
}

/// A zone as users find it: its id, or where it has none its tags, printed
/// the way the ingress operator prints them (`map[Name:mycluster-int]`).
pub fn zone_label(zone: &DNSZone) -> String {
    if !zone.id.is_empty() {
        return zone.id.clone();
    }
    let tags: Vec<String> = zone.tags.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    format!("map[{}]", tags.join(" "))
}
