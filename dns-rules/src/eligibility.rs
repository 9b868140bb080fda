//! Whether a cluster's Gateway instance may answer for a name: spec
//! section 8's four rules, each failure named so the Dashboard and
//! `gwhubctl dns plan` can say why a cluster is not in a record.
//!
//! Cluster C is eligible for hostname H of hub Gateway G when it passes,
//! in this order (the first failure is the answer):
//! 1. it is not revoked, is a member of the inventory (when there is one),
//!    is expected (when G names expected clusters), reports G and is not
//!    stale. The spec lists these as one rule; the order here puts the
//!    lasting cause first (a revoked cluster is usually silent too, and
//!    "revoked" is what an operator needs to read);
//! 2. its G has `LoadBalancerReady` True (not reported: never eligible, a
//!    Gateway without a LoadBalancer Service has no address to publish),
//!    and `Programmed` not False where reported (Unknown passes);
//! 3. one of G's listeners with hostname H has, in C's status,
//!    `attachedRoutes` >= 1 and `Programmed` not False, and C reports that
//!    listener's hostname as H or not at all (compared without case or
//!    trailing dot);
//! 4. C has a usable address: an IP that is not loopback, link-local or
//!    unspecified (nor multicast or the IPv4 broadcast address, which no
//!    load balancer answers on; the spec does not list them), or a
//!    hostname (for CNAME handling). Which family a record needs is
//!    [`Usable::check`]: A needs an IPv4, AAAA an IPv6, CNAME a hostname
//!    and no IP at all (a cluster with an IP is published by address).
//!
//! Addresses: type `IPAddress` or none is an IP; `Hostname` is a hostname,
//! unless its value parses as an IP, which is then used as that IP (some
//! controllers write IPs there). An IPv4-mapped IPv6 address
//! (`::ffff:192.0.2.1`) counts as its IPv4 address. Other types are not
//! used. An address that is not usable is kept in [`Usable::ignored`] with
//! why, so "no usable address" can say what was found.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use gwhub_model::text::quote_client_input;

use crate::names::Hostname;
use crate::records::RecordType;

/// A reported condition's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    /// `True` and `False` as written; anything else is Unknown.
    pub fn parse(s: &str) -> Self {
        match s {
            "True" => ConditionStatus::True,
            "False" => ConditionStatus::False,
            _ => ConditionStatus::Unknown,
        }
    }
}

impl fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        })
    }
}

/// A reported address's type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddressType {
    /// `IPAddress`, or no type.
    IpAddress,
    Hostname,
    Other(String),
}

impl AddressType {
    /// From `status.addresses[].type`.
    pub fn parse(t: Option<&str>) -> Self {
        match t {
            None | Some("IPAddress") => AddressType::IpAddress,
            Some("Hostname") => AddressType::Hostname,
            Some(other) => AddressType::Other(other.to_owned()),
        }
    }
}

/// One of a cluster's `status.addresses`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address {
    pub address_type: AddressType,
    pub value: String,
}

/// One of a cluster's `status.listeners`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerView {
    pub name: String,
    /// The hostname the cluster's Gateway spec has for it (the report's
    /// optional field; `None` from older agents).
    pub hostname: Option<String>,
    pub attached_routes: i64,
    /// The listener's `Programmed` condition, when reported.
    pub programmed: Option<ConditionStatus>,
}

/// One cluster as the rules see it for one hub Gateway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterView {
    pub cluster: String,
    /// Whether it reports the Gateway (an expected cluster may not).
    pub reports_gateway: bool,
    pub stale: bool,
    pub revoked: bool,
    /// In the inventory? `None`: there is no inventory.
    pub member: Option<bool>,
    /// One of the Gateway's expected clusters? `None`: the Gateway names
    /// no expected clusters.
    pub expected: Option<bool>,
    pub load_balancer_ready: Option<ConditionStatus>,
    pub programmed: Option<ConditionStatus>,
    pub listeners: Vec<ListenerView>,
    pub addresses: Vec<Address>,
}

/// An address rule 4 does not use, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IgnoredAddress {
    pub value: String,
    pub why: &'static str,
}

impl fmt::Display for IgnoredAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is {}", quote_client_input(&self.value), self.why)
    }
}

/// What an eligible cluster can be published with: its usable addresses,
/// each list sorted and de-duplicated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usable {
    pub v4: Vec<Ipv4Addr>,
    pub v6: Vec<Ipv6Addr>,
    pub hostnames: Vec<Hostname>,
    pub ignored: Vec<IgnoredAddress>,
}

impl Usable {
    /// Whether it has an IP of either family.
    pub fn has_ip(&self) -> bool {
        !self.v4.is_empty() || !self.v6.is_empty()
    }

    /// Rule 4 for one record type.
    pub fn check(&self, record_type: RecordType) -> Result<(), Ineligible> {
        let ok = match record_type {
            RecordType::A => !self.v4.is_empty(),
            RecordType::Aaaa => !self.v6.is_empty(),
            RecordType::Cname => !self.hostnames.is_empty() && !self.has_ip(),
        };
        if ok {
            Ok(())
        } else {
            Err(Ineligible::NoAddressForType {
                record_type,
                has_ip: self.has_ip(),
            })
        }
    }

    /// The same with only the addresses of the record types `keep` says
    /// (e.g. a cluster published as A but not yet as AAAA).
    pub fn restricted(&self, keep: impl Fn(RecordType) -> bool) -> Usable {
        Usable {
            v4: if keep(RecordType::A) {
                self.v4.clone()
            } else {
                Vec::new()
            },
            v6: if keep(RecordType::Aaaa) {
                self.v6.clone()
            } else {
                Vec::new()
            },
            hostnames: if keep(RecordType::Cname) {
                self.hostnames.clone()
            } else {
                Vec::new()
            },
            ignored: Vec::new(),
        }
    }
}

/// Why a listener of the hostname does not make the cluster eligible.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenerProblem {
    NotReported,
    NoAttachedRoutes,
    NotProgrammed,
    OtherHostname(String),
}

impl fmt::Display for ListenerProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenerProblem::NotReported => f.write_str("not reported"),
            ListenerProblem::NoAttachedRoutes => f.write_str("has no attached route"),
            ListenerProblem::NotProgrammed => f.write_str("Programmed is False"),
            ListenerProblem::OtherHostname(h) => {
                write!(f, "has hostname {} here", quote_client_input(h))
            }
        }
    }
}

/// The first rule a cluster fails (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Ineligible {
    #[error("revoked")]
    Revoked,
    #[error("not a member of the inventory")]
    NotMember,
    #[error("not expected: the Gateway names its expected clusters and this is not one")]
    NotExpected,
    #[error("does not report this Gateway")]
    NotReporting,
    #[error("stale")]
    Stale,
    #[error(
        "LoadBalancerReady is not reported (a Gateway without a LoadBalancer Service is never eligible)"
    )]
    LoadBalancerNotReported,
    #[error("LoadBalancerReady is {0}")]
    LoadBalancerNotReady(ConditionStatus),
    #[error("Programmed is False")]
    NotProgrammed,
    #[error("{}", listeners_message(.host, .problems))]
    NoListener {
        host: Hostname,
        /// Per listener of the hostname, in spec order.
        problems: Vec<(String, ListenerProblem)>,
    },
    #[error("{}", no_address_message(.ignored))]
    NoUsableAddress { ignored: Vec<IgnoredAddress> },
    #[error("{}", type_message(*.record_type, *.has_ip))]
    NoAddressForType {
        record_type: RecordType,
        has_ip: bool,
    },
}

/// How many ignored addresses or listeners a message lists.
impl Ineligible {
    /// The spec's rule (section 8, 1 to 4) it fails, for the Dashboard and
    /// `gwhubctl dns plan`.
    pub fn rule(&self) -> u8 {
        match self {
            Ineligible::Revoked
            | Ineligible::NotMember
            | Ineligible::NotExpected
            | Ineligible::NotReporting
            | Ineligible::Stale => 1,
            Ineligible::LoadBalancerNotReported
            | Ineligible::LoadBalancerNotReady(_)
            | Ineligible::NotProgrammed => 2,
            Ineligible::NoListener { .. } => 3,
            Ineligible::NoUsableAddress { .. } | Ineligible::NoAddressForType { .. } => 4,
        }
    }

    /// A machine-readable word for it (the message is [`fmt::Display`]).
    pub fn code(&self) -> &'static str {
        match self {
            Ineligible::Revoked => "Revoked",
            Ineligible::NotMember => "NotMember",
            Ineligible::NotExpected => "NotExpected",
            Ineligible::NotReporting => "NotReporting",
            Ineligible::Stale => "Stale",
            Ineligible::LoadBalancerNotReported => "LoadBalancerNotReported",
            Ineligible::LoadBalancerNotReady(_) => "LoadBalancerNotReady",
            Ineligible::NotProgrammed => "NotProgrammed",
            Ineligible::NoListener { .. } => "NoServingListener",
            Ineligible::NoUsableAddress { .. } => "NoUsableAddress",
            Ineligible::NoAddressForType { .. } => "NoAddressForType",
        }
    }
}

const MAX_LISTED: usize = 8;

fn listeners_message(host: &Hostname, problems: &[(String, ListenerProblem)]) -> String {
    if problems.is_empty() {
        return format!("the Gateway has no listener with hostname {host}");
    }
    if problems
        .iter()
        .all(|(_, p)| *p == ListenerProblem::NoAttachedRoutes)
    {
        return format!("no listener with hostname {host} has an attached route");
    }
    let mut parts: Vec<String> = problems
        .iter()
        .take(MAX_LISTED)
        .map(|(l, p)| format!("{l} {p}"))
        .collect();
    if problems.len() > MAX_LISTED {
        parts.push(format!("and {} more", problems.len() - MAX_LISTED));
    }
    format!(
        "no listener with hostname {host} has an attached route and is programmed: {}",
        parts.join("; ")
    )
}

fn no_address_message(ignored: &[IgnoredAddress]) -> String {
    if ignored.is_empty() {
        return "no address".to_owned();
    }
    let mut parts: Vec<String> = ignored
        .iter()
        .take(MAX_LISTED)
        .map(ToString::to_string)
        .collect();
    if ignored.len() > MAX_LISTED {
        parts.push(format!("and {} more", ignored.len() - MAX_LISTED));
    }
    format!("no usable address: {}", parts.join("; "))
}

fn type_message(record_type: RecordType, has_ip: bool) -> &'static str {
    match (record_type, has_ip) {
        (RecordType::A, _) => "no address of family IPv4",
        (RecordType::Aaaa, _) => "no address of family IPv6",
        (RecordType::Cname, true) => "has an IP address: published by address, not by CNAME",
        (RecordType::Cname, false) => "no hostname address",
    }
}

/// Rules 1 to 4 for `cluster` and hostname `host` of a hub Gateway whose
/// listeners with that hostname are `listeners` (names, spec order; see
/// [`crate::FleetName::listeners`]). Rule 4 asks for a usable address of
/// any family; [`Usable::check`] then asks for a record type's.
pub fn assess(
    cluster: &ClusterView,
    host: &Hostname,
    listeners: &[String],
) -> Result<Usable, Ineligible> {
    // Rule 1.
    if cluster.revoked {
        return Err(Ineligible::Revoked);
    }
    if cluster.member == Some(false) {
        return Err(Ineligible::NotMember);
    }
    if cluster.expected == Some(false) {
        return Err(Ineligible::NotExpected);
    }
    if !cluster.reports_gateway {
        return Err(Ineligible::NotReporting);
    }
    if cluster.stale {
        return Err(Ineligible::Stale);
    }
    // Rule 2.
    match cluster.load_balancer_ready {
        Some(ConditionStatus::True) => {}
        None => return Err(Ineligible::LoadBalancerNotReported),
        Some(other) => return Err(Ineligible::LoadBalancerNotReady(other)),
    }
    if cluster.programmed == Some(ConditionStatus::False) {
        return Err(Ineligible::NotProgrammed);
    }
    // Rule 3.
    let mut problems = Vec::new();
    let mut any = false;
    for name in listeners {
        match listener_problem(cluster, name, host) {
            None => {
                any = true;
                break;
            }
            Some(p) => problems.push((name.clone(), p)),
        }
    }
    if !any {
        return Err(Ineligible::NoListener {
            host: host.clone(),
            problems,
        });
    }
    // Rule 4.
    let usable = usable(&cluster.addresses);
    if usable.v4.is_empty() && usable.v6.is_empty() && usable.hostnames.is_empty() {
        return Err(Ineligible::NoUsableAddress {
            ignored: usable.ignored,
        });
    }
    Ok(usable)
}

/// [`assess`], then rule 4 for `record_type`.
pub fn eligible_for(
    cluster: &ClusterView,
    host: &Hostname,
    listeners: &[String],
    record_type: RecordType,
) -> Result<Usable, Ineligible> {
    let usable = assess(cluster, host, listeners)?;
    usable.check(record_type)?;
    Ok(usable)
}

fn listener_problem(cluster: &ClusterView, name: &str, host: &Hostname) -> Option<ListenerProblem> {
    let Some(l) = cluster.listeners.iter().find(|l| l.name == name) else {
        return Some(ListenerProblem::NotReported);
    };
    if let Some(h) = l.hostname.as_deref() {
        let same = Hostname::parse(h).is_ok_and(|h| h == *host);
        if !same {
            return Some(ListenerProblem::OtherHostname(h.to_owned()));
        }
    }
    if l.attached_routes < 1 {
        return Some(ListenerProblem::NoAttachedRoutes);
    }
    if l.programmed == Some(ConditionStatus::False) {
        return Some(ListenerProblem::NotProgrammed);
    }
    None
}

/// Sorts a cluster's addresses into what rule 4 uses and what it ignores.
pub fn usable(addresses: &[Address]) -> Usable {
    let mut out = Usable::default();
    for a in addresses {
        let ip = a.value.parse::<IpAddr>().ok();
        let result = match (&a.address_type, ip) {
            (AddressType::IpAddress | AddressType::Hostname, Some(ip)) => {
                ip_usable(ip).map(|ip| match ip {
                    IpAddr::V4(v4) => out.v4.push(v4),
                    IpAddr::V6(v6) => out.v6.push(v6),
                })
            }
            (AddressType::IpAddress, None) => Err("not an IP address"),
            (AddressType::Hostname, None) => match Hostname::parse(&a.value) {
                Ok(h) if h.is_wildcard() => Err("a wildcard, not a hostname"),
                Ok(h) => {
                    out.hostnames.push(h);
                    Ok(())
                }
                Err(_) => Err("not a valid hostname"),
            },
            (AddressType::Other(_), _) => Err("of a type other than IPAddress and Hostname"),
        };
        if let Err(why) = result {
            out.ignored.push(IgnoredAddress {
                value: a.value.clone(),
                why,
            });
        }
    }
    out.v4.sort_unstable();
    out.v4.dedup();
    out.v6.sort_unstable();
    out.v6.dedup();
    out.hostnames.sort();
    out.hostnames.dedup();
    out
}

/// `ip` as published (an IPv4-mapped IPv6 address as IPv4), or why not.
fn ip_usable(ip: IpAddr) -> Result<IpAddr, &'static str> {
    let ip = ip.to_canonical();
    if ip.is_unspecified() {
        return Err("unspecified");
    }
    if ip.is_loopback() {
        return Err("loopback");
    }
    if ip.is_multicast() {
        return Err("multicast");
    }
    match ip {
        IpAddr::V4(v4) if v4.is_link_local() => Err("link-local"),
        IpAddr::V4(v4) if v4.is_broadcast() => Err("broadcast"),
        IpAddr::V6(v6) if v6.is_unicast_link_local() => Err("link-local"),
        _ => Ok(ip),
    }
}

#[cfg(test)]
mod tests;
