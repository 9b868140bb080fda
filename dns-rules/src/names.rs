//! Which names fleet DNS publishes, and which hub Gateway owns each.
//!
//! Spec section 8, "Names": every hostname H of a listener in the
//! `spec.listeners` of a hub Gateway that has a reporting or expected
//! cluster, where H lies under a `--dns-zone`. One hub Gateway owns H: the
//! oldest by creationTimestamp, then by `ns/name`; every other one claiming
//! H gets a [`Conflict`] naming the owner. Without Kubernetes the names are
//! the hostnames the clusters report per listener ([`names_from_reports`]).
//!
//! Decided here where the spec is silent:
//! - "by `ns/name`" compares the text `ns/name` byte by byte, as the spec
//!   writes it (so `a-b/x` comes before `a/x`), not namespace then name.
//! - A hostname is compared without case and without one trailing dot
//!   (DNS is case-insensitive; `example.com.` is `example.com`).
//! - A zone that is empty (or only `.`) matches nothing: publishing into
//!   the root zone is never what an operator meant. [`parse_zone`] refuses
//!   it, and a wildcard zone, so the command line can say so.
//! - A hostname under a zone that is not a valid DNS name (a label over 63
//!   characters, a `*` that is not the whole first label, ...) is not
//!   published: it is named as [`InvalidName`], and the hub Gateway's
//!   condition says `Invalid`. One outside every zone is not ours and is
//!   ignored, valid or not.
//! - When H lies under several zones, the longest (most specific) one is
//!   H's zone: an RFC 2136 update goes to the zone that holds the name.
//! - A listener without a hostname gives no name (it answers every host).
//! - Without Kubernetes there is no creationTimestamp: `ns/name` alone
//!   decides, and a listener no cluster reports a hostname for (older
//!   agents) gives no name.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use gwhub_model::GatewayKey;
use gwhub_model::limits::{MAX_DNS_LABEL_LEN, MAX_NAME_LEN};
use gwhub_model::names::NameRule;
use gwhub_model::text::quote_client_input;

/// A DNS name as fleet DNS uses it: lower case, without a trailing dot, at
/// most 253 characters of labels of at most 63 (`[a-z0-9-]`, not starting
/// or ending with `-`); the first label may be `*` (a wildcard name).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Hostname(String);

/// Why a string is not a [`Hostname`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HostnameError {
    #[error("the hostname is empty")]
    Empty,
    #[error("{len} characters long, the limit is {MAX_NAME_LEN}")]
    TooLong { len: usize },
    #[error("has an empty label")]
    EmptyLabel,
    #[error("label {} is {len} characters long, the limit is {MAX_DNS_LABEL_LEN}", quote_client_input(.label))]
    LabelTooLong { label: String, len: usize },
    #[error(
        "label {} is not a DNS label (letters, digits and '-', starting and ending with a letter or digit)",
        quote_client_input(.0)
    )]
    BadLabel(String),
    #[error("'*' may only be the whole first label")]
    BadWildcard,
    #[error("a zone may not be a wildcard")]
    WildcardZone,
}

impl Hostname {
    /// Checks and normalises `s`: ASCII lower case, one trailing dot
    /// dropped, then the rule above.
    pub fn parse(s: &str) -> Result<Self, HostnameError> {
        let norm = normalize(s);
        if norm.is_empty() {
            return Err(HostnameError::Empty);
        }
        if norm.len() > MAX_NAME_LEN {
            return Err(HostnameError::TooLong { len: norm.len() });
        }
        for (i, label) in norm.split('.').enumerate() {
            if label.is_empty() {
                return Err(HostnameError::EmptyLabel);
            }
            if label == "*" && i == 0 {
                continue;
            }
            if label.contains('*') {
                return Err(HostnameError::BadWildcard);
            }
            if label.len() > MAX_DNS_LABEL_LEN {
                return Err(HostnameError::LabelTooLong {
                    label: label.to_owned(),
                    len: label.len(),
                });
            }
            if !NameRule::Dns1123Label.allows(label) {
                return Err(HostnameError::BadLabel(label.to_owned()));
            }
        }
        Ok(Hostname(norm))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the first label is `*`.
    pub fn is_wildcard(&self) -> bool {
        self.0 == "*" || self.0.starts_with("*.")
    }
}

impl fmt::Display for Hostname {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Hostname {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// `s` as names are compared: trimmed, one trailing dot dropped, ASCII
/// lower case.
fn normalize(s: &str) -> String {
    let s = s.trim();
    s.strip_suffix('.').unwrap_or(s).to_ascii_lowercase()
}

/// A `--dns-zone` value: a [`Hostname`] that is not a wildcard.
pub fn parse_zone(s: &str) -> Result<Hostname, HostnameError> {
    let zone = Hostname::parse(s)?;
    if zone.as_str().split('.').any(|l| l == "*") {
        return Err(HostnameError::WildcardZone);
    }
    Ok(zone)
}

/// Whether `host` lies under one of `zones` (see [`zone_of`]).
pub fn in_zone<Z: AsRef<str>>(host: &str, zones: &[Z]) -> bool {
    zone_of(host, zones).is_some()
}

/// The zone `host` lies under: a suffix match on whole labels, without
/// case and ignoring a trailing dot on either side (the zone itself
/// counts: its apex). The longest matching zone, as written in `zones`;
/// `None` when it lies under none. `*.apps.example.com` lies under
/// `apps.example.com` and `example.com`.
pub fn zone_of<'z, Z: AsRef<str>>(host: &str, zones: &'z [Z]) -> Option<&'z str> {
    let host = normalize(host);
    zones
        .iter()
        .map(AsRef::as_ref)
        .filter(|z| {
            let zone = normalize(z);
            !zone.is_empty()
                && (host == zone
                    || (host.len() > zone.len()
                        && host.ends_with(&zone)
                        && host.as_bytes().get(host.len() - zone.len() - 1) == Some(&b'.')))
        })
        .max_by_key(|z| normalize(z).len())
}

/// A hub Gateway as the names need it (from its spec and metadata).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubGateway {
    pub key: GatewayKey,
    /// `metadata.creationTimestamp`, ms since the epoch.
    pub created_millis: i64,
    /// `spec.listeners`, in order.
    pub listeners: Vec<HubListener>,
    /// Whether it has a reporting or an expected cluster; without one it
    /// has no names (and claims none).
    pub has_clusters: bool,
}

/// One of a hub Gateway's `spec.listeners`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubListener {
    pub name: String,
    pub hostname: Option<String>,
}

/// A name fleet DNS publishes, with its owning hub Gateway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetName {
    pub host: Hostname,
    /// The `--dns-zone` it lies under (the longest), as configured.
    pub zone: String,
    pub owner: GatewayKey,
    /// The owner's listeners with this hostname, in spec order: a cluster
    /// is eligible for the name through any of them.
    pub listeners: Vec<String>,
}

impl FleetName {
    /// Whether the name is its zone's apex (no CNAME may live there).
    pub fn is_apex(&self) -> bool {
        normalize(&self.zone) == self.host.as_str()
    }
}

/// A hub Gateway that claims a name another owns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub gateway: GatewayKey,
    pub host: Hostname,
    pub owner: GatewayKey,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is claimed by {} (the oldest hub Gateway with it)",
            self.host, self.owner
        )
    }
}

/// A hostname under a zone that is not a valid DNS name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidName {
    pub gateway: GatewayKey,
    pub listener: String,
    pub hostname: String,
    pub error: HostnameError,
}

impl fmt::Display for InvalidName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", quote_client_input(&self.hostname), self.error)
    }
}

/// A listener (without Kubernetes) whose clusters report different
/// hostnames: left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disagreement {
    pub gateway: GatewayKey,
    pub listener: String,
    /// `(cluster, hostname)` of every cluster that reports one, in cluster
    /// order.
    pub hostnames: Vec<(String, String)>,
}

/// How many clusters a [`Disagreement`]'s message lists.
const MAX_LISTED: usize = 8;

impl fmt::Display for Disagreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "listener {} of {}: its clusters disagree on its hostname (",
            self.listener, self.gateway
        )?;
        for (i, (cluster, host)) in self.hostnames.iter().take(MAX_LISTED).enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{cluster}: {}", quote_client_input(host))?;
        }
        if self.hostnames.len() > MAX_LISTED {
            write!(f, ", and {} more", self.hostnames.len() - MAX_LISTED)?;
        }
        f.write_str(")")
    }
}

/// Every name, owner, conflict and problem of the fleet's hub Gateways.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetNames {
    pub names: BTreeMap<Hostname, FleetName>,
    /// In hostname order, then by claiming Gateway.
    pub conflicts: Vec<Conflict>,
    /// In Gateway order, then listener order.
    pub invalid: Vec<InvalidName>,
    /// Without Kubernetes only.
    pub disagreements: Vec<Disagreement>,
}

/// The fleet's names from its hub Gateways (see the module docs).
pub fn fleet_names<Z: AsRef<str>>(gateways: &[HubGateway], zones: &[Z]) -> FleetNames {
    // host -> (claimant order key, claimant, zone, listeners)
    type Claims<'g> =
        BTreeMap<Hostname, BTreeMap<(i64, String), (&'g GatewayKey, String, Vec<String>)>>;
    let mut claims: Claims<'_> = BTreeMap::new();
    let mut out = FleetNames::default();
    let mut ordered: Vec<&HubGateway> = gateways.iter().filter(|g| g.has_clusters).collect();
    ordered.sort_by_key(|g| (g.key.to_string(), g.created_millis));
    ordered.dedup_by(|a, b| a.key == b.key);
    for g in ordered {
        for l in &g.listeners {
            let Some(raw) = l.hostname.as_deref() else {
                continue;
            };
            let Some(zone) = zone_of(raw, zones) else {
                continue;
            };
            let host = match Hostname::parse(raw) {
                Ok(h) => h,
                Err(error) => {
                    out.invalid.push(InvalidName {
                        gateway: g.key.clone(),
                        listener: l.name.clone(),
                        hostname: raw.to_owned(),
                        error,
                    });
                    continue;
                }
            };
            let entry = claims
                .entry(host)
                .or_default()
                .entry((g.created_millis, g.key.to_string()))
                .or_insert_with(|| (&g.key, zone.to_owned(), Vec::new()));
            entry.2.push(l.name.clone());
        }
    }
    for (host, claimants) in claims {
        let mut it = claimants.into_values();
        let Some((owner, zone, listeners)) = it.next() else {
            continue;
        };
        for (other, _, _) in it {
            out.conflicts.push(Conflict {
                gateway: other.clone(),
                host: host.clone(),
                owner: owner.clone(),
            });
        }
        out.names.insert(
            host.clone(),
            FleetName {
                host,
                zone,
                owner: owner.clone(),
                listeners,
            },
        );
    }
    out
}

/// One cluster's report of a Gateway, as the names need it without
/// Kubernetes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportedGateway {
    pub key: GatewayKey,
    pub cluster: String,
    /// Its listeners in the cluster's order, each with the hostname its
    /// Gateway's spec has (`None`: not reported, an older agent).
    pub listeners: Vec<HubListener>,
}

/// The fleet's names without Kubernetes: per Gateway key and listener
/// name, the hostname its clusters report, when they agree (compared
/// without case and trailing dot). A listener whose clusters disagree is
/// left out and named in [`FleetNames::disagreements`] when one of its
/// hostnames lies under a zone. Ownership as [`fleet_names`], every
/// Gateway created at the same time (so `ns/name` decides).
pub fn names_from_reports<Z: AsRef<str>>(reports: &[ReportedGateway], zones: &[Z]) -> FleetNames {
    // key -> (listeners in first-seen order, listener -> cluster -> hostname).
    type Hosts<'r> = BTreeMap<&'r str, BTreeMap<&'r str, &'r str>>;
    let mut by_key: BTreeMap<&GatewayKey, (Vec<&str>, Hosts<'_>)> = BTreeMap::new();
    let mut sorted: Vec<&ReportedGateway> = reports.iter().collect();
    sorted.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    for r in sorted {
        let (order, listeners) = by_key.entry(&r.key).or_default();
        for l in &r.listeners {
            if !listeners.contains_key(l.name.as_str()) {
                order.push(&l.name);
            }
            let hosts = listeners.entry(&l.name).or_default();
            if let Some(h) = l.hostname.as_deref() {
                hosts.insert(&r.cluster, h);
            }
        }
    }
    let mut gateways = Vec::new();
    let mut disagreements = Vec::new();
    for (key, (order, mut listeners)) in by_key {
        let mut hub = HubGateway {
            key: key.clone(),
            created_millis: 0,
            listeners: Vec::new(),
            has_clusters: true,
        };
        for name in order {
            let hosts = listeners.remove(name).unwrap_or_default();
            let distinct: BTreeSet<String> = hosts.values().map(|h| normalize(h)).collect();
            match distinct.len() {
                0 => {}
                1 => hub.listeners.push(HubListener {
                    name: name.to_owned(),
                    hostname: hosts.values().next().map(|h| (*h).to_owned()),
                }),
                _ => {
                    if hosts.values().any(|h| in_zone(h, zones)) {
                        disagreements.push(Disagreement {
                            gateway: key.clone(),
                            listener: name.to_owned(),
                            hostnames: hosts
                                .iter()
                                .map(|(c, h)| ((*c).to_owned(), (*h).to_owned()))
                                .collect(),
                        });
                    }
                }
            }
        }
        gateways.push(hub);
    }
    let mut out = fleet_names(&gateways, zones);
    out.disagreements = disagreements;
    out
}

#[cfg(test)]
mod tests;
