//! Who holds a name on an authoritative server, and the RFC 2136 update
//! that changes it, as data (spec section 8, the `rfc2136` output). The
//! hub turns an [`UpdatePlan`] into one UPDATE message with its DNS
//! client; nothing here speaks DNS.
//!
//! The ownership record for H and a type is a TXT at `_gwhub-<type>.<H>`
//! (type in lower case; a leading `*` label written `_wildcard`), value
//! `heritage=gwhub,owner=<owner id>,gateway=<ns>/<name>`. Create requires
//! that no RRset of the type exists at H and no ownership TXT exists;
//! update and delete require that the ownership TXT exists with exactly the
//! value held (RFC 2136 "RRset exists (value dependent)"), so a name
//! another owner holds is never overwritten: the prerequisite fails.
//!
//! Decided here where the spec is silent:
//! - A TXT character-string holds at most 255 bytes and the value can be
//!   longer (a 253-character Gateway name): it is written as consecutive
//!   255-byte strings of one record ([`txt_strings`]) and read back
//!   concatenated, as SPF does.
//! - An owner id is 1 to 63 characters of ASCII letters, digits, `-`, `_`
//!   and `.` (the default, a namespace, always is): a `,` or `=` in it
//!   would make the value ambiguous.
//! - The ownership name is checked as DNS checks names: at most 253
//!   characters in all and 63 per label; too long is `Invalid`.
//! - A CNAME cannot live beside other data and a server silently ignores
//!   an add that would break that, so creating a CNAME also requires that
//!   no A and no AAAA RRset exists at H, and creating an A or AAAA that no
//!   CNAME does, except where this same update deletes that type as ours.
//! - Every deletion comes before every addition in the update section
//!   (a CNAME replaced by A must be gone before the A is added).
//! - An update or delete whose held value is not ours (another owner, or
//!   not gwhub's) is refused here too ([`PlanError::NotOurs`]).
//! - A read-back ownership record of ours that names another hub Gateway
//!   of ours (ownership moved between hub Gateways) is drift: the repair
//!   rewrites it, with the value found as the prerequisite.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use gwhub_model::GatewayKey;
use gwhub_model::limits::{MAX_DNS_LABEL_LEN, MAX_NAME_LEN};
use gwhub_model::text::quote_client_input;

use crate::eligibility::Usable;
use crate::names::Hostname;
use crate::records::{RecordData, RecordSet, RecordType};

/// The `heritage` every ownership record has.
pub const HERITAGE: &str = "gwhub";
/// The most bytes of one TXT character-string.
pub const MAX_TXT_STRING: usize = 255;
/// The longest owner id.
pub const MAX_OWNER_ID_LEN: usize = 63;

/// Why an ownership record or plan cannot be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OwnershipError {
    #[error("ownership record name {name} is {len} characters long, the limit is {MAX_NAME_LEN}")]
    NameTooLong { name: String, len: usize },
    #[error(
        "ownership record name {name}: label {label} is {len} characters long, the limit is {MAX_DNS_LABEL_LEN}"
    )]
    LabelTooLong {
        name: String,
        label: String,
        len: usize,
    },
    #[error(
        "owner id {}: 1 to {MAX_OWNER_ID_LEN} characters of letters, digits, '-', '_' and '.'",
        quote_client_input(.0)
    )]
    BadOwnerId(String),
}

/// Why an update plan cannot be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Invalid(#[from] OwnershipError),
    #[error("{0} is held by {1}: never overwritten")]
    NotOurs(RecordType, String),
    #[error("weighted CNAME targets are for the dnsendpoint output only")]
    Weighted,
    #[error("{0} changes twice in one update")]
    Twice(RecordType),
}

/// Our side of the ownership records: the owner id and the hub Gateway
/// that owns the name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ownership {
    owner_id: String,
    gateway: GatewayKey,
}

impl Ownership {
    pub fn new(owner_id: &str, gateway: GatewayKey) -> Result<Self, OwnershipError> {
        let ok = !owner_id.is_empty()
            && owner_id.len() <= MAX_OWNER_ID_LEN
            && owner_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !ok {
            return Err(OwnershipError::BadOwnerId(owner_id.to_owned()));
        }
        Ok(Ownership {
            owner_id: owner_id.to_owned(),
            gateway,
        })
    }

    pub fn owner_id(&self) -> &str {
        &self.owner_id
    }

    pub fn gateway(&self) -> &GatewayKey {
        &self.gateway
    }

    /// `heritage=gwhub,owner=<owner id>,gateway=<ns>/<name>`.
    pub fn value(&self) -> String {
        format!(
            "heritage={HERITAGE},owner={},gateway={}",
            self.owner_id, self.gateway
        )
    }
}

/// `_gwhub-<type>.<H>`, a leading `*` written `_wildcard`; `Invalid`
/// when longer than DNS allows.
pub fn ownership_name(host: &Hostname, record_type: RecordType) -> Result<String, OwnershipError> {
    let h = host.as_str();
    let rest = match h.strip_prefix('*') {
        Some(tail) if tail.is_empty() || tail.starts_with('.') => format!("_wildcard{tail}"),
        _ => h.to_owned(),
    };
    let name = format!(
        "_gwhub-{}.{rest}",
        record_type.as_str().to_ascii_lowercase()
    );
    // H's labels are at most 63 already, and ours 12 and 9; checked
    // anyway, as DNS would.
    if let Some(label) = name.split('.').find(|l| l.len() > MAX_DNS_LABEL_LEN) {
        return Err(OwnershipError::LabelTooLong {
            label: label.to_owned(),
            len: label.len(),
            name,
        });
    }
    if name.len() > MAX_NAME_LEN {
        return Err(OwnershipError::NameTooLong {
            len: name.len(),
            name,
        });
    }
    Ok(name)
}

/// `value` as the character-strings of one TXT record (at most 255 bytes
/// each, cut on character boundaries).
pub fn txt_strings(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in value.chars() {
        if cur.len() + c.len_utf8() > MAX_TXT_STRING {
            out.push(std::mem::take(&mut cur));
        }
        cur.push(c);
    }
    if !cur.is_empty() || out.is_empty() {
        out.push(cur);
    }
    out
}

/// Who an ownership TXT value says holds the name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// This hub (our owner id), for hub Gateway `gateway` (`ns/name`).
    Ours { gateway: String },
    /// Another gwhub (another owner id).
    OtherOwner {
        owner: String,
        gateway: Option<String>,
    },
    /// Not a gwhub ownership record.
    Foreign,
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Owner::Ours { gateway } => write!(f, "this hub for {}", quote_client_input(gateway)),
            Owner::OtherOwner { owner, .. } => {
                write!(f, "another owner ({})", quote_client_input(owner))
            }
            Owner::Foreign => f.write_str("a record that is not gwhub's"),
        }
    }
}

/// Parses an ownership TXT value (its strings concatenated): comma
/// separated `key=value` pairs in any order; `heritage` must be `gwhub`
/// and `owner` present, each once; unknown keys are allowed.
pub fn parse_owner(txt: &str, our_owner_id: &str) -> Owner {
    let (mut heritage, mut owner, mut gateway) = (None, None, None);
    for part in txt.trim().split(',') {
        let Some((k, v)) = part.split_once('=') else {
            return Owner::Foreign;
        };
        let slot = match k.trim() {
            "heritage" => &mut heritage,
            "owner" => &mut owner,
            "gateway" => &mut gateway,
            _ => continue,
        };
        if slot.replace(v.trim().to_owned()).is_some() {
            return Owner::Foreign;
        }
    }
    match (heritage.as_deref(), owner) {
        (Some(HERITAGE), Some(owner)) if owner == our_owner_id => Owner::Ours {
            gateway: gateway.unwrap_or_default(),
        },
        (Some(HERITAGE), Some(owner)) => Owner::OtherOwner { owner, gateway },
        _ => Owner::Foreign,
    }
}

/// A record type an update names (the ownership records are TXT).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DnsType {
    A,
    Aaaa,
    Cname,
    Txt,
}

impl From<RecordType> for DnsType {
    fn from(t: RecordType) -> Self {
        match t {
            RecordType::A => DnsType::A,
            RecordType::Aaaa => DnsType::Aaaa,
            RecordType::Cname => DnsType::Cname,
        }
    }
}

/// One record's data.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rdata {
    A(Ipv4Addr),
    Aaaa(Ipv6Addr),
    Cname(Hostname),
    /// The character-strings of one TXT record.
    Txt(Vec<String>),
}

/// The records of a set (a weighted set has none for RFC 2136).
pub fn rdata(set: &RecordSet) -> Result<Vec<Rdata>, PlanError> {
    Ok(match &set.data {
        RecordData::A(v) => v.iter().copied().map(Rdata::A).collect(),
        RecordData::Aaaa(v) => v.iter().copied().map(Rdata::Aaaa).collect(),
        RecordData::Cname(h) => vec![Rdata::Cname(h.clone())],
        RecordData::WeightedCname(_) => return Err(PlanError::Weighted),
    })
}

/// An RFC 2136 prerequisite.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Prerequisite {
    /// "RRset does not exist" (section 2.4.3).
    RrsetAbsent { name: String, rtype: DnsType },
    /// "RRset exists (value dependent)" (section 2.4.2).
    RrsetIs {
        name: String,
        rtype: DnsType,
        rdata: Vec<Rdata>,
    },
}

/// An RFC 2136 update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Update {
    /// "Delete an RRset" (section 2.5.2).
    DeleteRrset { name: String, rtype: DnsType },
    /// "Add to an RRset" (section 2.5.1).
    Add {
        name: String,
        ttl: u32,
        rdata: Rdata,
    },
}

/// One type's change of a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Not on the server: write it.
    Create(RecordSet),
    /// Ours on the server, with ownership value `held`: replace it.
    Update { set: RecordSet, held: String },
    /// Ours on the server, with ownership value `held`: delete it.
    Delete {
        record_type: RecordType,
        held: String,
    },
}

impl Change {
    fn record_type(&self) -> RecordType {
        match self {
            Change::Create(set) | Change::Update { set, .. } => set.record_type(),
            Change::Delete { record_type, .. } => *record_type,
        }
    }
}

/// One UPDATE message: for `zone`, the prerequisites, then the updates,
/// all of one name `host` (and its ownership records).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdatePlan {
    pub zone: String,
    pub host: String,
    pub prerequisites: Vec<Prerequisite>,
    pub updates: Vec<Update>,
}

/// The UPDATE for `host` in `zone` making `changes` (one per type at
/// most), as `ours` (see the module docs).
pub fn plan(
    zone: &str,
    host: &Hostname,
    ours: &Ownership,
    changes: &[Change],
) -> Result<UpdatePlan, PlanError> {
    one_per_type(changes)?;
    let deleted = |t: RecordType| {
        changes
            .iter()
            .any(|c| matches!(c, Change::Delete { record_type, .. } if *record_type == t))
    };
    let value = ours.value();
    let txt = Rdata::Txt(txt_strings(&value));
    let name = host.as_str().to_owned();
    let mut pre = Vec::new();
    let (mut deletes, mut adds) = (Vec::new(), Vec::new());
    for c in changes {
        let t = c.record_type();
        let owner_name = ownership_name(host, t)?;
        let rrset = |rtype: DnsType| Prerequisite::RrsetAbsent {
            name: name.clone(),
            rtype,
        };
        match c {
            Change::Create(set) => {
                pre.push(rrset(t.into()));
                pre.push(Prerequisite::RrsetAbsent {
                    name: owner_name.clone(),
                    rtype: DnsType::Txt,
                });
                let others: &[RecordType] = match t {
                    RecordType::Cname => &[RecordType::A, RecordType::Aaaa],
                    RecordType::A | RecordType::Aaaa => &[RecordType::Cname],
                };
                for o in others.iter().filter(|o| !deleted(**o)) {
                    pre.push(rrset((*o).into()));
                }
                adds.extend(rdata(set)?.into_iter().map(|r| Update::Add {
                    name: name.clone(),
                    ttl: set.ttl_seconds,
                    rdata: r,
                }));
                adds.push(Update::Add {
                    name: owner_name,
                    ttl: set.ttl_seconds,
                    rdata: txt.clone(),
                });
            }
            Change::Update { set, held } => {
                held_ours(t, held, ours)?;
                pre.push(held_prerequisite(&owner_name, held));
                deletes.push(Update::DeleteRrset {
                    name: name.clone(),
                    rtype: t.into(),
                });
                adds.extend(rdata(set)?.into_iter().map(|r| Update::Add {
                    name: name.clone(),
                    ttl: set.ttl_seconds,
                    rdata: r,
                }));
                if *held != value {
                    deletes.push(Update::DeleteRrset {
                        name: owner_name.clone(),
                        rtype: DnsType::Txt,
                    });
                    adds.push(Update::Add {
                        name: owner_name,
                        ttl: set.ttl_seconds,
                        rdata: txt.clone(),
                    });
                }
            }
            Change::Delete { held, .. } => {
                held_ours(t, held, ours)?;
                pre.push(held_prerequisite(&owner_name, held));
                deletes.push(Update::DeleteRrset {
                    name: name.clone(),
                    rtype: t.into(),
                });
                deletes.push(Update::DeleteRrset {
                    name: owner_name,
                    rtype: DnsType::Txt,
                });
            }
        }
    }
    deletes.extend(adds);
    Ok(UpdatePlan {
        zone: zone.to_owned(),
        host: host.as_str().to_owned(),
        prerequisites: pre,
        updates: deletes,
    })
}

/// Refuses changes naming one record type twice: an UPDATE changes each
/// type of a name at most once.
fn one_per_type(changes: &[Change]) -> Result<(), PlanError> {
    let mut seen = Vec::new();
    for c in changes {
        let t = c.record_type();
        if seen.contains(&t) {
            return Err(PlanError::Twice(t));
        }
        seen.push(t);
    }
    Ok(())
}

fn held_ours(t: RecordType, held: &str, ours: &Ownership) -> Result<(), PlanError> {
    match parse_owner(held, ours.owner_id()) {
        Owner::Ours { .. } => Ok(()),
        other => Err(PlanError::NotOurs(t, other.to_string())),
    }
}

fn held_prerequisite(owner_name: &str, held: &str) -> Prerequisite {
    Prerequisite::RrsetIs {
        name: owner_name.to_owned(),
        rtype: DnsType::Txt,
        rdata: vec![Rdata::Txt(txt_strings(held))],
    }
}

/// What a read-back found for one (name, type).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadBack {
    /// The RRset of the type at H.
    pub records: Vec<Rdata>,
    /// Its TTL, when there is one.
    pub ttl_seconds: Option<u32>,
    /// The TXT records at the ownership name, each its strings joined.
    pub txt: Vec<String>,
}

/// How a read-back stands against what should be published.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// Nothing of ours and nothing in the way.
    Absent,
    /// Ours and as it should be.
    Ours,
    /// Ours but not as it should be: `held` is the ownership value found
    /// (the repair's prerequisite).
    Drifted { held: String, why: String },
    /// Someone else's: a conflict, never overwritten.
    Foreign { why: String },
}

/// Classifies `found` for `record_type` against `expected` (the
/// set that should be published; `None`: none should).
pub fn classify(
    ours: &Ownership,
    record_type: RecordType,
    expected: Option<&RecordSet>,
    found: &ReadBack,
) -> Found {
    let [held] = found.txt.as_slice() else {
        return match (found.txt.len(), found.records.is_empty()) {
            (0, true) => Found::Absent,
            (0, false) => Found::Foreign {
                why: format!("{record_type} records exist without an ownership record"),
            },
            (n, _) => Found::Foreign {
                why: format!("{n} ownership records"),
            },
        };
    };
    match parse_owner(held, ours.owner_id()) {
        Owner::Ours { .. } => {}
        other => {
            return Found::Foreign {
                why: format!("held by {other}"),
            };
        }
    }
    let drift = |why: String| Found::Drifted {
        held: held.clone(),
        why,
    };
    if *held != ours.value() {
        return drift(format!(
            "the ownership record is {}",
            quote_client_input(held)
        ));
    }
    let Some(set) = expected else {
        return drift("published though nothing should be".to_owned());
    };
    let Ok(mut want) = rdata(set) else {
        return drift("a weighted set cannot be read back".to_owned());
    };
    want.sort();
    let mut got = found.records.clone();
    got.sort();
    got.dedup();
    if got != want {
        return drift(format!(
            "{} of {} records differ from the {} expected",
            got.len(),
            record_type,
            want.len()
        ));
    }
    if found.ttl_seconds.is_some_and(|t| t != set.ttl_seconds) {
        return drift(format!("TTL is not {}", set.ttl_seconds));
    }
    Found::Ours
}

/// The change that repairs `found` toward `expected` (`None`: nothing to
/// do, or a conflict that is never overwritten).
pub fn repair(
    found: &Found,
    record_type: RecordType,
    expected: Option<&RecordSet>,
) -> Option<Change> {
    match (found, expected) {
        (Found::Absent, Some(set)) => Some(Change::Create(set.clone())),
        (Found::Drifted { held, .. }, Some(set)) => Some(Change::Update {
            set: set.clone(),
            held: held.clone(),
        }),
        (Found::Drifted { held, .. }, None) => Some(Change::Delete {
            record_type,
            held: held.clone(),
        }),
        _ => None,
    }
}

/// The clusters a read-back record set publishes, to seed the
/// [`crate::Publisher`] of its (name, type) after a hub start or leader
/// change (spec section 8: a cluster in the published set stays without
/// the rise). The records do not say which cluster each is from, so:
/// - only a set whose single ownership record is ours (any of our hub
///   Gateways) is read as published by us; anything else seeds nothing;
/// - a record maps to every cluster whose usable addresses of the type
///   (`clusters`: from the clusters' current reports, and the addresses
///   this hub last published for them, so one cluster may come more than
///   once) have it: an A to the IPv4 addresses, an AAAA to the IPv6, a
///   CNAME to the hostnames;
/// - a record no cluster has (its cluster is silent, or its address
///   changed while another replica led) seeds nothing: that cluster rises
///   again like any other, and the record leaves at the next write of the
///   name.
pub fn published_clusters(
    ours: &Ownership,
    record_type: RecordType,
    found: &ReadBack,
    clusters: &[(String, Usable)],
) -> BTreeSet<String> {
    let [held] = found.txt.as_slice() else {
        return BTreeSet::new();
    };
    if !matches!(parse_owner(held, ours.owner_id()), Owner::Ours { .. }) {
        return BTreeSet::new();
    }
    let has = |u: &Usable, r: &Rdata| match (record_type, r) {
        (RecordType::A, Rdata::A(ip)) => u.v4.contains(ip),
        (RecordType::Aaaa, Rdata::Aaaa(ip)) => u.v6.contains(ip),
        (RecordType::Cname, Rdata::Cname(h)) => u.hostnames.contains(h),
        _ => false,
    };
    clusters
        .iter()
        .filter(|(_, u)| found.records.iter().any(|r| has(u, r)))
        .map(|(c, _)| c.clone())
        .collect()
}

/// What is known of one record type of a name before its update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Known {
    /// Written by this hub since it started (or since the last resync),
    /// with this hub's ownership value: the set as written.
    Written(RecordSet),
    /// Read back from the server and [`classify`]'d.
    Found(Found),
}

/// A name that cannot change because someone else holds one of the
/// record types it should have: a conflict, nothing of the name is
/// written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{record_type}: {why}: never overwritten")]
pub struct Held {
    pub record_type: RecordType,
    pub why: String,
}

/// The changes, one per record type at most, that make a name hold
/// `expected` (per type; a type absent from it should not be published),
/// from what is `known` of each type. They go into one [`plan`], so the
/// name changes as a whole or not at all.
///
/// - Written by us: unchanged -> nothing; another set -> update; no set
///   expected -> delete; the prerequisite is our own value.
/// - Read back: [`repair`] (absent -> create, drifted -> update or
///   delete, ours and current -> nothing).
/// - Someone else's where we want a set: [`Held`], no change at all for
///   the name. Someone else's where we want none: left alone.
/// - Not known at all: taken as absent (create; its prerequisites fail
///   if anything is there after all).
pub fn name_changes(
    ours: &Ownership,
    expected: &BTreeMap<RecordType, RecordSet>,
    known: &BTreeMap<RecordType, Known>,
) -> Result<Vec<Change>, Held> {
    let mut out = Vec::new();
    for t in RecordType::ALL {
        let want = expected.get(&t);
        let change = match known.get(&t) {
            Some(Known::Written(old)) => match want {
                Some(set) if set == old => None,
                Some(set) => Some(Change::Update {
                    set: set.clone(),
                    held: ours.value(),
                }),
                None => Some(Change::Delete {
                    record_type: t,
                    held: ours.value(),
                }),
            },
            Some(Known::Found(Found::Foreign { why })) => {
                if want.is_some() {
                    return Err(Held {
                        record_type: t,
                        why: why.clone(),
                    });
                }
                None
            }
            Some(Known::Found(found)) => repair(found, t, want),
            None => want.map(|set| Change::Create(set.clone())),
        };
        out.extend(change);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
