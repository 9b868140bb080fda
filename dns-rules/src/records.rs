//! The record sets of one name, from its clusters' usable addresses: what
//! would be written, and every cluster left out with why (spec section 8,
//! "Record sets").
//!
//! - `A` from the IPv4 addresses, `AAAA` from the IPv6 ones, each sorted
//!   and de-duplicated, with the TTL passed in.
//! - Hostname-only clusters (a hostname, no IP): one `CNAME` only when
//!   exactly one cluster is hostname-only and none has an IP; otherwise
//!   they are left out and named. Never a CNAME beside A or AAAA.
//!   [`CnameRouting::Weighted`] (the `dnsendpoint` output's
//!   `--dns-cname-routing=weighted`): when no cluster has an IP, one CNAME
//!   target per hostname-only cluster, `setIdentifier` the cluster,
//!   `providerSpecific` `aws/weight: "1"`.
//! - At most `max_targets` targets per set, chosen by rendezvous hashing
//!   of (hostname, cluster): clusters in descending [`rendezvous_score`]
//!   order (ties by name) add their addresses not already in the set while
//!   there is room; a cluster cut part way is named with how many of its
//!   addresses made it, one with no room is named as left out. The clusters
//!   chosen therefore depend only on the clusters that outrank them:
//!   adding or removing a cluster that ranks below every chosen one never
//!   changes the choice.
//!
//! Decided here where the spec is silent:
//! - A CNAME at its zone's apex is never written (the apex holds SOA and
//!   NS, and a CNAME cannot sit beside other data): its clusters are left
//!   out and named.
//! - A hostname-only cluster with several hostnames is published with the
//!   first in sorted order (a CNAME has one target).
//! - `max_targets` below 1 counts as 1: a set is never empty.
//!
//! The hash: 64-bit FNV-1a ([`gwhub_model::cluster::fnv`], the workspace's
//! stable hash) over the UTF-8 bytes of `hostname`, a 0 byte, and the
//! cluster name, then MurmurHash3's 64-bit finaliser (fmix64), as
//! `hub-rules`' shards do: FNV-1a alone mixes its low bits poorly, and
//! every replica and version must rank clusters the same way, which
//! std's hasher does not promise.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use gwhub_model::cluster::fnv;

use crate::eligibility::Usable;
use crate::names::Hostname;

/// A record type fleet DNS writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecordType {
    A,
    Aaaa,
    Cname,
}

impl RecordType {
    pub const ALL: [RecordType; 3] = [RecordType::A, RecordType::Aaaa, RecordType::Cname];

    /// `A`, `AAAA` or `CNAME`.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordType::A => "A",
            RecordType::Aaaa => "AAAA",
            RecordType::Cname => "CNAME",
        }
    }
}

impl fmt::Display for RecordType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `--dns-cname-routing`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CnameRouting {
    /// One CNAME, only for exactly one hostname-only cluster.
    #[default]
    Single,
    /// One weighted CNAME target per hostname-only cluster (`dnsendpoint`).
    Weighted,
}

/// `--dns-ttl` default, seconds.
pub const DEFAULT_TTL_SECONDS: u32 = 30;
/// `--dns-max-targets` default.
pub const DEFAULT_MAX_TARGETS: usize = 32;
/// The `providerSpecific` pair every weighted target gets.
pub const WEIGHT_PROPERTY: (&str, &str) = ("aws/weight", "1");

/// How record sets are built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordOptions {
    pub ttl_seconds: u32,
    pub max_targets: usize,
    pub cname_routing: CnameRouting,
}

impl Default for RecordOptions {
    fn default() -> Self {
        RecordOptions {
            ttl_seconds: DEFAULT_TTL_SECONDS,
            max_targets: DEFAULT_MAX_TARGETS,
            cname_routing: CnameRouting::Single,
        }
    }
}

/// One weighted CNAME target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightedTarget {
    /// The cluster.
    pub set_identifier: String,
    pub target: Hostname,
    /// `[("aws/weight", "1")]`.
    pub provider_specific: Vec<(String, String)>,
}

/// A record set's data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordData {
    A(Vec<Ipv4Addr>),
    Aaaa(Vec<Ipv6Addr>),
    Cname(Hostname),
    /// In rendezvous order.
    WeightedCname(Vec<WeightedTarget>),
}

/// One record set: a name, a type, a TTL and its data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordSet {
    pub host: Hostname,
    pub ttl_seconds: u32,
    pub data: RecordData,
    /// The clusters whose addresses it holds, in name order.
    pub clusters: Vec<String>,
}

impl RecordSet {
    pub fn record_type(&self) -> RecordType {
        match self.data {
            RecordData::A(_) => RecordType::A,
            RecordData::Aaaa(_) => RecordType::Aaaa,
            RecordData::Cname(_) | RecordData::WeightedCname(_) => RecordType::Cname,
        }
    }

    /// The set's targets as text: its addresses, or its CNAME targets (in
    /// rendezvous order when weighted).
    pub fn targets(&self) -> Vec<String> {
        match &self.data {
            RecordData::A(v) => v.iter().map(ToString::to_string).collect(),
            RecordData::Aaaa(v) => v.iter().map(ToString::to_string).collect(),
            RecordData::Cname(h) => vec![h.to_string()],
            RecordData::WeightedCname(w) => w.iter().map(|t| t.target.to_string()).collect(),
        }
    }
}

/// Why a cluster is not (wholly) in a set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeftOutReason {
    /// Hostname-only while some cluster has an IP.
    BesideIp,
    /// Hostname-only, as are `clusters` others, with single CNAME routing.
    SeveralHostnameOnly { clusters: usize },
    /// Hostname-only, and the name is its zone's apex.
    CnameAtApex,
    /// No room under `max_targets`.
    OverCap { max: usize },
    /// Cut part way: `kept` of its `of` addresses are in the set.
    PartlyOverCap { kept: usize, of: usize, max: usize },
}

/// A cluster left out of a set, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftOut {
    pub cluster: String,
    pub record_type: RecordType,
    pub why: LeftOutReason,
}

impl fmt::Display for LeftOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.cluster;
        match &self.why {
            LeftOutReason::BesideIp => write!(
                f,
                "{c} left out: it has only a hostname and other clusters have IPs (never a CNAME beside A/AAAA)"
            ),
            LeftOutReason::SeveralHostnameOnly { clusters } => write!(
                f,
                "{c} left out: {clusters} clusters have only a hostname (a CNAME needs exactly one)"
            ),
            LeftOutReason::CnameAtApex => {
                write!(
                    f,
                    "{c} left out: it has only a hostname and a CNAME cannot be at the zone apex"
                )
            }
            LeftOutReason::OverCap { max } => {
                write!(
                    f,
                    "{c} left out of {}: at most {max} targets",
                    self.record_type
                )
            }
            LeftOutReason::PartlyOverCap { kept, of, max } => write!(
                f,
                "{c}: {kept} of its {of} addresses in {}: at most {max} targets",
                self.record_type
            ),
        }
    }
}

/// The record sets of one name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordSets {
    pub a: Option<RecordSet>,
    pub aaaa: Option<RecordSet>,
    pub cname: Option<RecordSet>,
    /// In record type order, then rendezvous order.
    pub left_out: Vec<LeftOut>,
}

impl RecordSets {
    pub fn get(&self, record_type: RecordType) -> Option<&RecordSet> {
        match record_type {
            RecordType::A => self.a.as_ref(),
            RecordType::Aaaa => self.aaaa.as_ref(),
            RecordType::Cname => self.cname.as_ref(),
        }
    }

    /// The types with a set.
    pub fn types(&self) -> BTreeSet<RecordType> {
        RecordType::ALL
            .into_iter()
            .filter(|t| self.get(*t).is_some())
            .collect()
    }

    /// Whether no set would be written.
    pub fn is_empty(&self) -> bool {
        self.types().is_empty()
    }
}

/// The rendezvous score of `cluster` for `host`: higher ranks first (see
/// the module docs for the hash).
pub fn rendezvous_score(host: &Hostname, cluster: &str) -> u64 {
    let mut h = fnv(host.as_str().bytes().chain([0u8]).chain(cluster.bytes()));
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

/// `clusters` in rendezvous order for `host`.
pub fn ranked<'c>(host: &Hostname, clusters: impl IntoIterator<Item = &'c str>) -> Vec<&'c str> {
    let mut v: Vec<(u64, &str)> = clusters
        .into_iter()
        .map(|c| (rendezvous_score(host, c), c))
        .collect();
    v.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    v.into_iter().map(|(_, c)| c).collect()
}

/// The record sets of `host` from `clusters` (cluster -> its usable
/// addresses); `apex`: the name is its zone's apex. See the module docs.
pub fn build(
    host: &Hostname,
    apex: bool,
    clusters: &BTreeMap<String, Usable>,
    options: &RecordOptions,
) -> RecordSets {
    let max = options.max_targets.max(1);
    let order = ranked(host, clusters.keys().map(String::as_str));
    let mut out = RecordSets::default();
    let set = |data, mut members: Vec<String>| {
        members.sort();
        RecordSet {
            host: host.clone(),
            ttl_seconds: options.ttl_seconds,
            data,
            clusters: members,
        }
    };
    let v4: Vec<(&str, &[Ipv4Addr])> = order
        .iter()
        .filter_map(|c| clusters.get(*c).map(|u| (*c, u.v4.as_slice())))
        .filter(|(_, a)| !a.is_empty())
        .collect();
    if let Some((addrs, members)) = capped(&v4, max, RecordType::A, &mut out.left_out) {
        out.a = Some(set(RecordData::A(addrs), members));
    }
    let v6: Vec<(&str, &[Ipv6Addr])> = order
        .iter()
        .filter_map(|c| clusters.get(*c).map(|u| (*c, u.v6.as_slice())))
        .filter(|(_, a)| !a.is_empty())
        .collect();
    if let Some((addrs, members)) = capped(&v6, max, RecordType::Aaaa, &mut out.left_out) {
        out.aaaa = Some(set(RecordData::Aaaa(addrs), members));
    }
    let named: Vec<(&str, &Hostname)> = order
        .iter()
        .filter_map(|c| clusters.get(*c).map(|u| (*c, u)))
        .filter(|(_, u)| !u.has_ip())
        .filter_map(|(c, u)| u.hostnames.first().map(|h| (c, h)))
        .collect();
    let any_ip = clusters.values().any(Usable::has_ip);
    let leave = |why: LeftOutReason| -> Vec<LeftOut> {
        named
            .iter()
            .map(|(c, _)| LeftOut {
                cluster: (*c).to_owned(),
                record_type: RecordType::Cname,
                why: why.clone(),
            })
            .collect()
    };
    match (named.as_slice(), options.cname_routing) {
        ([], _) => {}
        (_, _) if any_ip => out.left_out.extend(leave(LeftOutReason::BesideIp)),
        (_, _) if apex => out.left_out.extend(leave(LeftOutReason::CnameAtApex)),
        ([(c, target)], CnameRouting::Single) => {
            out.cname = Some(set(
                RecordData::Cname((*target).clone()),
                vec![(*c).to_owned()],
            ));
        }
        (many, CnameRouting::Single) => {
            out.left_out
                .extend(leave(LeftOutReason::SeveralHostnameOnly {
                    clusters: many.len(),
                }))
        }
        (all, CnameRouting::Weighted) => {
            let targets: Vec<WeightedTarget> = all
                .iter()
                .take(max)
                .map(|(c, target)| WeightedTarget {
                    set_identifier: (*c).to_owned(),
                    target: (*target).clone(),
                    provider_specific: vec![(
                        WEIGHT_PROPERTY.0.to_owned(),
                        WEIGHT_PROPERTY.1.to_owned(),
                    )],
                })
                .collect();
            let members = targets.iter().map(|t| t.set_identifier.clone()).collect();
            for (c, _) in all.iter().skip(max) {
                out.left_out.push(LeftOut {
                    cluster: (*c).to_owned(),
                    record_type: RecordType::Cname,
                    why: LeftOutReason::OverCap { max },
                });
            }
            out.cname = Some(set(RecordData::WeightedCname(targets), members));
        }
    }
    out
}

/// Up to `max` addresses from `ranked` clusters (see the module docs):
/// the addresses sorted, the clusters that contribute; `None` when there
/// are none.
fn capped<T: Ord + Copy>(
    ranked: &[(&str, &[T])],
    max: usize,
    record_type: RecordType,
    left_out: &mut Vec<LeftOut>,
) -> Option<(Vec<T>, Vec<String>)> {
    let mut chosen: BTreeSet<T> = BTreeSet::new();
    let mut members = Vec::new();
    for (cluster, addrs) in ranked {
        let new: Vec<T> = addrs
            .iter()
            .copied()
            .filter(|a| !chosen.contains(a))
            .collect();
        let room = max.saturating_sub(chosen.len());
        if new.is_empty() {
            // Every address already in: it is served.
            members.push((*cluster).to_owned());
            continue;
        }
        if room == 0 {
            left_out.push(LeftOut {
                cluster: (*cluster).to_owned(),
                record_type,
                why: LeftOutReason::OverCap { max },
            });
            continue;
        }
        let take = new.len().min(room);
        chosen.extend(new.iter().take(take).copied());
        members.push((*cluster).to_owned());
        if take < new.len() {
            left_out.push(LeftOut {
                cluster: (*cluster).to_owned(),
                record_type,
                why: LeftOutReason::PartlyOverCap {
                    kept: addrs.len() - (new.len() - take),
                    of: addrs.len(),
                    max,
                },
            });
        }
    }
    (!chosen.is_empty()).then(|| (chosen.into_iter().collect(), members))
}

#[cfg(test)]
mod tests;
