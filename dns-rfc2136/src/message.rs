//! The requests: what the caller asks for ([`RecordSet`], [`Owner`],
//! [`Expect`]) checked and turned into one RFC 2136 UPDATE message each
//! (prerequisites and updates), or a plain query for a read. Kept apart from
//! the network so every prerequisite can be checked without a server.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use hickory_proto::op::{Message, MessageType, OpCode, Query, UpdateMessage};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, TXT};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};

use gwhub_dns_rules::{DnsType, Prerequisite, Rdata, Update, UpdatePlan};

use crate::error::Error;

/// The longest character-string a TXT record holds (RFC 1035 3.3).
const TXT_CHUNK: usize = 255;

/// The record types fleet DNS publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RType {
    /// IPv4 addresses.
    A,
    /// IPv6 addresses.
    Aaaa,
    /// One canonical name (a hostname-typed load balancer).
    Cname,
}

impl RType {
    /// `A`, `AAAA` or `CNAME`.
    pub fn as_str(self) -> &'static str {
        match self {
            RType::A => "A",
            RType::Aaaa => "AAAA",
            RType::Cname => "CNAME",
        }
    }

    pub(crate) fn wire(self) -> RecordType {
        match self {
            RType::A => RecordType::A,
            RType::Aaaa => RecordType::AAAA,
            RType::Cname => RecordType::CNAME,
        }
    }
}

impl fmt::Display for RType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a publish expects to find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Nothing: no record set of the type at the name and no ownership
    /// record; otherwise a conflict.
    Create,
    /// Our ownership record, with exactly our value; otherwise a conflict.
    Update,
}

/// One record set to publish: A and AAAA values are IP addresses, a CNAME
/// has exactly one value, a hostname. Values are de-duplicated; none is
/// [`Error::Invalid`] (a set is never published empty: delete it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordSet {
    /// The owner name (`app.example.com`, `*.apps.example.com`).
    pub name: String,
    /// The type.
    pub rtype: RType,
    /// The TTL in seconds.
    pub ttl: u32,
    /// The values.
    pub values: Vec<String>,
}

/// The ownership record of a record set: a TXT RRset at `txt_name` holding
/// exactly one record, `txt_value` (computed by the caller, e.g.
/// `_gwhub-a.app.example.com` / `heritage=gwhub,owner=...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// Where the TXT record lives.
    pub txt_name: String,
    /// Its value (split in 255-byte strings on the wire, joined on reading).
    pub txt_value: String,
}

/// A name checked to be a DNS name (fully qualified).
pub(crate) fn name(what: &str, text: &str) -> Result<Name, Error> {
    if text.is_empty() || !text.is_ascii() {
        return Err(Error::Invalid(format!(
            "{what} {text:?} is not a DNS name (empty or not ASCII; give IDNs as punycode)"
        )));
    }
    let mut n = Name::from_ascii(text)
        .map_err(|e| Error::Invalid(format!("{what} {text:?} is not a DNS name: {e}")))?;
    n.set_fqdn(true);
    // Name::from_ascii checks the label lengths; the whole name's wire form
    // must also fit in 255 octets (RFC 1035 2.3.4).
    if n.len() > 255 {
        return Err(Error::Invalid(format!(
            "{what} {text:?} is longer than a DNS name may be (255 octets)"
        )));
    }
    Ok(n)
}

/// `child` checked to lie in `zone`.
fn in_zone(zone: &Name, what: &str, text: &str) -> Result<Name, Error> {
    let n = name(what, text)?;
    if !zone.zone_of(&n) {
        return Err(Error::Invalid(format!(
            "{what} {text:?} is not in zone {}",
            display(zone)
        )));
    }
    Ok(n)
}

/// A name as people write it: no trailing dot.
pub(crate) fn display(n: &Name) -> String {
    let s = n.to_ascii();
    match s.strip_suffix('.') {
        Some(t) if !t.is_empty() => t.to_owned(),
        _ => s,
    }
}

/// The checked parts of an UPDATE.
#[derive(Debug)]
pub(crate) struct Checked {
    pub(crate) zone: Name,
    pub(crate) name: Name,
    pub(crate) txt_name: Name,
}

/// The checked parts, and the ownership record's TXT data.
fn check_owner(zone: &str, name_text: &str, owner: &Owner) -> Result<(Checked, RData), Error> {
    let zone = name("zone", zone)?;
    let n = in_zone(&zone, "name", name_text)?;
    let txt_name = in_zone(&zone, "ownership record name", &owner.txt_name)?;
    if owner.txt_value.is_empty() {
        return Err(Error::Invalid(format!(
            "the ownership record of {name_text} has an empty value"
        )));
    }
    Ok((
        Checked {
            zone,
            name: n,
            txt_name,
        },
        txt_rdata(&owner.txt_value),
    ))
}

/// The TXT RDATA for a value: 255-byte strings (the value is split the
/// same way every time, so a value-dependent prerequisite matches it).
fn txt_rdata(value: &str) -> RData {
    let mut chunks = Vec::new();
    let mut rest = value;
    while !rest.is_empty() {
        let mut end = rest.len().min(TXT_CHUNK);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let (head, tail) = rest.split_at(end);
        chunks.push(head.to_owned());
        rest = tail;
    }
    RData::TXT(TXT::new(chunks))
}

fn values(set: &RecordSet) -> Result<Vec<RData>, Error> {
    let bad = |v: &str, e: String| {
        Error::Invalid(format!(
            "{} value {v:?} of {} is not {e}",
            set.rtype, set.name
        ))
    };
    let mut out = Vec::new();
    for v in &set.values {
        let v = v.trim();
        let rdata = match set.rtype {
            RType::A => RData::A(A(v
                .parse::<Ipv4Addr>()
                .map_err(|_| bad(v, "an IPv4 address".into()))?)),
            RType::Aaaa => RData::AAAA(AAAA(
                v.parse::<Ipv6Addr>()
                    .map_err(|_| bad(v, "an IPv6 address".into()))?,
            )),
            RType::Cname => {
                let target = name("CNAME target", v)?;
                RData::CNAME(CNAME(target))
            }
        };
        if !out.contains(&rdata) {
            out.push(rdata);
        }
    }
    if out.is_empty() {
        return Err(Error::Invalid(format!(
            "{} {} has no values (a set is never published empty: delete it)",
            set.name, set.rtype
        )));
    }
    if set.rtype == RType::Cname && out.len() > 1 {
        return Err(Error::Invalid(format!(
            "{} CNAME has {} targets: a CNAME has exactly one",
            set.name,
            out.len()
        )));
    }
    out.sort_by_key(|r| r.to_string());
    Ok(out)
}

/// An UPDATE message for `zone` with its zone section.
fn update(zone: &Name) -> Message {
    let mut m = Message::query();
    m.metadata.op_code = OpCode::Update;
    m.metadata.message_type = MessageType::Query;
    m.metadata.recursion_desired = false;
    m.add_zone(Query::query(zone.clone(), RecordType::SOA));
    m
}

/// An empty-RDATA record of `class` (RFC 2136 2.4.1, 2.4.3, 2.4.5, 2.5.2).
fn empty(name: &Name, rtype: RecordType, class: DNSClass) -> Record {
    let mut r = Record::update0(name.clone(), 0, rtype);
    r.dns_class = class;
    r
}

/// RRset does not exist (2.4.3).
fn nxrrset(name: &Name, rtype: RecordType) -> Record {
    empty(name, rtype, DNSClass::NONE)
}

/// Delete an RRset (2.5.2).
fn delete_rrset(name: &Name, rtype: RecordType) -> Record {
    empty(name, rtype, DNSClass::ANY)
}

/// RRset exists with exactly these RDATAs (value dependent, 2.4.2).
fn exactly(name: &Name, rdata: &RData) -> Record {
    Record::from_rdata(name.clone(), 0, rdata.clone())
}

/// The types that may not stand beside `rtype` at the same name: a server
/// silently ignores an A added beside a CNAME, and a CNAME added beside
/// anything else (RFC 2136 3.4.2.2), so those must be prerequisites too or
/// an update "succeeds" without taking effect.
fn exclusive_of(rtype: RType) -> &'static [RecordType] {
    match rtype {
        RType::A | RType::Aaaa => &[RecordType::CNAME],
        RType::Cname => &[RecordType::A, RecordType::AAAA],
    }
}

/// The UPDATE that publishes `set` in `zone` under `owner`.
///
/// Create: prerequisites that no `set.rtype` RRset is at the name (for a
/// CNAME: that the name is not in use at all), no CNAME beside an A/AAAA,
/// and no TXT RRset at the owner name; then the records and the TXT are
/// added. Update: prerequisites that the TXT RRset is exactly our value and
/// nothing conflicting with the type is at the name; then the type's RRset
/// is deleted and the new records added (the TXT stays as it is).
pub(crate) fn publish(
    zone: &str,
    set: &RecordSet,
    owner: &Owner,
    expect: Expect,
) -> Result<(Message, Checked), Error> {
    let (c, txt) = check_owner(zone, &set.name, owner)?;
    let rdatas = values(set)?;
    let rtype = set.rtype.wire();
    let mut m = update(&c.zone);
    match expect {
        Expect::Create => {
            if set.rtype == RType::Cname {
                // Name is not in use (2.4.5): no RR of any type at the name.
                m.add_pre_requisite(empty(&c.name, RecordType::ANY, DNSClass::NONE));
            } else {
                m.add_pre_requisite(nxrrset(&c.name, rtype));
                for other in exclusive_of(set.rtype) {
                    m.add_pre_requisite(nxrrset(&c.name, *other));
                }
            }
            m.add_pre_requisite(nxrrset(&c.txt_name, RecordType::TXT));
            for r in &rdatas {
                m.add_update(Record::from_rdata(c.name.clone(), set.ttl, r.clone()));
            }
            m.add_update(Record::from_rdata(c.txt_name.clone(), set.ttl, txt.clone()));
        }
        Expect::Update => {
            m.add_pre_requisite(exactly(&c.txt_name, &txt));
            for other in exclusive_of(set.rtype) {
                m.add_pre_requisite(nxrrset(&c.name, *other));
            }
            m.add_update(delete_rrset(&c.name, rtype));
            for r in &rdatas {
                m.add_update(Record::from_rdata(c.name.clone(), set.ttl, r.clone()));
            }
        }
    }
    Ok((m, c))
}

/// The UPDATE that deletes the `rtype` RRset at `name` and its ownership
/// TXT, with the prerequisite that the TXT is exactly our value.
pub(crate) fn delete(
    zone: &str,
    name: &str,
    rtype: RType,
    owner: &Owner,
) -> Result<(Message, Checked), Error> {
    let (c, txt) = check_owner(zone, name, owner)?;
    let mut m = update(&c.zone);
    m.add_pre_requisite(exactly(&c.txt_name, &txt));
    m.add_update(delete_rrset(&c.name, rtype.wire()));
    m.add_update(delete_rrset(&c.txt_name, RecordType::TXT));
    Ok((m, c))
}

/// The UPDATE message of a whole-name plan (`gwhub_dns_rules::plan`):
/// its prerequisites and updates as they are, every name checked to lie in
/// the plan's zone. The checked parts name the plan's host; its ownership
/// record name is the first one the plan names (for the words of a
/// conflict).
pub(crate) fn from_plan(plan: &UpdatePlan) -> Result<(Message, Checked), Error> {
    let zone = name("zone", &plan.zone)?;
    let host = in_zone(&zone, "name", &plan.host)?;
    let mut m = update(&zone);
    let mut txt_name = None;
    for p in &plan.prerequisites {
        let record = match p {
            Prerequisite::RrsetAbsent { name, rtype } => {
                nxrrset(&in_zone(&zone, "name", name)?, wire(*rtype))
            }
            Prerequisite::RrsetIs { name, rdata, .. } => {
                let n = in_zone(&zone, "name", name)?;
                let [one] = rdata.as_slice() else {
                    return Err(Error::Invalid(format!(
                        "the prerequisite on {name} names {} records: one is checked",
                        rdata.len()
                    )));
                };
                let r = exactly(&n, &wire_rdata(one)?);
                txt_name.get_or_insert(n);
                r
            }
        };
        m.add_pre_requisite(record);
    }
    if plan.updates.is_empty() {
        return Err(Error::Invalid(format!(
            "the update of {} changes nothing",
            plan.host
        )));
    }
    for u in &plan.updates {
        let record = match u {
            Update::DeleteRrset { name, rtype } => {
                delete_rrset(&in_zone(&zone, "name", name)?, wire(*rtype))
            }
            Update::Add { name, ttl, rdata } => {
                let n = in_zone(&zone, "name", name)?;
                if matches!(rdata, Rdata::Txt(_)) {
                    txt_name.get_or_insert(n.clone());
                }
                Record::from_rdata(n, *ttl, wire_rdata(rdata)?)
            }
        };
        m.add_update(record);
    }
    let txt_name = txt_name.unwrap_or_else(|| host.clone());
    Ok((
        m,
        Checked {
            zone,
            name: host,
            txt_name,
        },
    ))
}

fn wire(t: DnsType) -> RecordType {
    match t {
        DnsType::A => RecordType::A,
        DnsType::Aaaa => RecordType::AAAA,
        DnsType::Cname => RecordType::CNAME,
        DnsType::Txt => RecordType::TXT,
    }
}

fn wire_rdata(r: &Rdata) -> Result<RData, Error> {
    Ok(match r {
        Rdata::A(a) => RData::A(A(*a)),
        Rdata::Aaaa(a) => RData::AAAA(AAAA(*a)),
        Rdata::Cname(h) => RData::CNAME(CNAME(name("CNAME target", h.as_str())?)),
        Rdata::Txt(strings) => RData::TXT(TXT::new(strings.clone())),
    })
}

/// A plain (non-recursive) query.
pub(crate) fn query(name: &Name, rtype: RecordType) -> Message {
    let mut m = Message::query();
    m.metadata.recursion_desired = false;
    m.add_query(Query::query(name.clone(), rtype));
    m
}

/// A record's value as [`crate::ReadBack`] gives it: an address, or a name
/// without its trailing dot.
pub(crate) fn value(rdata: &RData) -> Option<String> {
    match rdata {
        RData::A(a) => Some(a.0.to_string()),
        RData::AAAA(a) => Some(a.0.to_string()),
        RData::CNAME(c) => Some(display(&c.0)),
        _ => None,
    }
}

/// A TXT record's strings joined (as [`txt_rdata`] split them).
pub(crate) fn txt_value(rdata: &RData) -> Option<String> {
    match rdata {
        RData::TXT(t) => Some(
            t.txt_data
                .iter()
                .map(|s| String::from_utf8_lossy(s))
                .collect(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(name: &str, rtype: RType, values: &[&str]) -> RecordSet {
        RecordSet {
            name: name.into(),
            rtype,
            ttl: 30,
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    fn owner(txt_name: &str) -> Owner {
        Owner {
            txt_name: txt_name.into(),
            txt_value: "heritage=gwhub,owner=gwhub-system,gateway=ns/gw".into(),
        }
    }

    /// `NAME CLASS TYPE TTL RDATA` per record, the way a reader checks them.
    fn show(records: &[Record]) -> Vec<String> {
        records
            .iter()
            .map(|r| {
                let data = match &r.data {
                    RData::Update0(_) => String::new(),
                    d => format!(" {d}"),
                };
                format!(
                    "{} {} {} {}{}",
                    r.name,
                    r.dns_class,
                    r.record_type(),
                    r.ttl,
                    data
                )
            })
            .collect()
    }

    #[test]
    fn create_requires_nothing_there_and_adds_records_and_owner() {
        let (m, _) = publish(
            "fleet.test",
            &set(
                "app.fleet.test",
                RType::A,
                &["192.0.2.2", "192.0.2.1", "192.0.2.2"],
            ),
            &owner("_gwhub-a.app.fleet.test"),
            Expect::Create,
        )
        .unwrap();
        assert_eq!(m.metadata.op_code, OpCode::Update);
        assert_eq!(m.zones()[0].name().to_ascii(), "fleet.test.");
        assert_eq!(m.zones()[0].query_type(), RecordType::SOA);
        assert_eq!(
            show(m.prerequisites()),
            [
                "app.fleet.test. NONE A 0",
                "app.fleet.test. NONE CNAME 0",
                "_gwhub-a.app.fleet.test. NONE TXT 0",
            ]
        );
        assert_eq!(
            show(m.updates()),
            [
                "app.fleet.test. IN A 30 192.0.2.1",
                "app.fleet.test. IN A 30 192.0.2.2",
                "_gwhub-a.app.fleet.test. IN TXT 30 heritage=gwhub,owner=gwhub-system,gateway=ns/gw",
            ]
        );
    }

    #[test]
    fn a_cname_is_created_only_where_the_name_is_unused() {
        let (m, _) = publish(
            "fleet.test.",
            &set("lb.fleet.test", RType::Cname, &["abc.elb.example.com"]),
            &owner("_gwhub-cname.lb.fleet.test"),
            Expect::Create,
        )
        .unwrap();
        assert_eq!(
            show(m.prerequisites()),
            [
                "lb.fleet.test. NONE ANY 0",
                "_gwhub-cname.lb.fleet.test. NONE TXT 0",
            ]
        );
        assert_eq!(
            show(m.updates())[0],
            "lb.fleet.test. IN CNAME 30 abc.elb.example.com."
        );
        let (m, _) = publish(
            "fleet.test.",
            &set("lb.fleet.test", RType::Cname, &["new.elb.example.com"]),
            &owner("_gwhub-cname.lb.fleet.test"),
            Expect::Update,
        )
        .unwrap();
        assert_eq!(
            show(m.prerequisites())[1..],
            ["lb.fleet.test. NONE A 0", "lb.fleet.test. NONE AAAA 0"]
        );
    }

    #[test]
    fn update_and_delete_require_exactly_our_owner_record() {
        let (m, _) = publish(
            "fleet.test",
            &set("*.apps.fleet.test", RType::Aaaa, &["2001:db8::1"]),
            &owner("_gwhub-aaaa._wildcard.apps.fleet.test"),
            Expect::Update,
        )
        .unwrap();
        assert_eq!(
            show(m.prerequisites()),
            [
                "_gwhub-aaaa._wildcard.apps.fleet.test. IN TXT 0 heritage=gwhub,owner=gwhub-system,gateway=ns/gw",
                "*.apps.fleet.test. NONE CNAME 0",
            ]
        );
        assert_eq!(
            show(m.updates()),
            [
                "*.apps.fleet.test. ANY AAAA 0",
                "*.apps.fleet.test. IN AAAA 30 2001:db8::1",
            ]
        );
        let (m, _) = delete(
            "fleet.test",
            "app.fleet.test",
            RType::A,
            &owner("_gwhub-a.app.fleet.test"),
        )
        .unwrap();
        assert_eq!(show(m.prerequisites()).len(), 1);
        assert_eq!(
            show(m.updates()),
            [
                "app.fleet.test. ANY A 0",
                "_gwhub-a.app.fleet.test. ANY TXT 0",
            ]
        );
        // The message encodes and decodes as an UPDATE.
        let bytes = m.to_vec().unwrap();
        let back = Message::from_vec(&bytes).unwrap();
        assert_eq!(back.prerequisites().len(), 1);
        assert_eq!(back.updates().len(), 2);
    }

    #[test]
    fn a_whole_name_plan_is_one_message_as_planned() {
        use gwhub_dns_rules::{Change, Hostname, Ownership, RecordData, RecordSet as Set, plan};
        use gwhub_model::GatewayKey;
        let host = Hostname::parse("app.fleet.test").unwrap();
        let ours = Ownership::new("gwhub-system", GatewayKey::new("ns", "gw")).unwrap();
        let value = ours.value();
        let cname = Set {
            host: host.clone(),
            ttl_seconds: 30,
            data: RecordData::Cname(Hostname::parse("lb.example.net").unwrap()),
            clusters: vec!["east".into()],
        };
        let p = plan(
            "fleet.test",
            &host,
            &ours,
            &[
                Change::Delete {
                    record_type: gwhub_dns_rules::RecordType::A,
                    held: value,
                },
                Change::Create(cname),
            ],
        )
        .unwrap();
        let (m, c) = from_plan(&p).unwrap();
        assert_eq!(display(&c.name), "app.fleet.test");
        assert_eq!(display(&c.txt_name), "_gwhub-a.app.fleet.test");
        assert_eq!(
            show(m.prerequisites()),
            [
                "_gwhub-a.app.fleet.test. IN TXT 0 heritage=gwhub,owner=gwhub-system,gateway=ns/gw",
                "app.fleet.test. NONE CNAME 0",
                "_gwhub-cname.app.fleet.test. NONE TXT 0",
                "app.fleet.test. NONE AAAA 0",
            ]
        );
        assert_eq!(
            show(m.updates()),
            [
                "app.fleet.test. ANY A 0",
                "_gwhub-a.app.fleet.test. ANY TXT 0",
                "app.fleet.test. IN CNAME 30 lb.example.net.",
                "_gwhub-cname.app.fleet.test. IN TXT 30 heritage=gwhub,owner=gwhub-system,gateway=ns/gw",
            ]
        );
        let back = Message::from_vec(&m.to_vec().unwrap()).unwrap();
        assert_eq!(back.updates().len(), 4);
        // A name outside the zone, or nothing to do, is not sent.
        let mut outside = p.clone();
        outside.zone = "other.test".into();
        assert_eq!(from_plan(&outside).unwrap_err().label(), "invalid");
        let mut empty = p;
        empty.updates.clear();
        assert_eq!(from_plan(&empty).unwrap_err().label(), "invalid");
    }

    #[test]
    fn a_long_owner_value_is_split_the_same_way_every_time() {
        let long = "x".repeat(600);
        let RData::TXT(t) = txt_rdata(&long) else {
            panic!("TXT")
        };
        let lens: Vec<_> = t.txt_data.iter().map(|s| s.len()).collect();
        assert_eq!(lens, [255, 255, 90]);
        assert_eq!(txt_value(&RData::TXT(t)).unwrap(), long);
    }

    #[test]
    fn what_cannot_be_sent_is_invalid() {
        let o = owner("_gwhub-a.app.fleet.test");
        let inv = |zone: &str, s: RecordSet, o: &Owner| {
            let e = publish(zone, &s, o, Expect::Create).unwrap_err();
            assert_eq!(e.label(), "invalid", "{e}");
            e.to_string()
        };
        let e = inv(
            "fleet.test",
            set("app.other.test", RType::A, &["192.0.2.1"]),
            &o,
        );
        assert!(e.contains("not in zone fleet.test"), "{e}");
        let e = inv(
            "fleet.test",
            set("app.fleet.test", RType::A, &["192.0.2.1"]),
            &owner("_gwhub-a.app.other.test"),
        );
        assert!(e.contains("ownership record name"), "{e}");
        let e = inv(
            "fleet.test",
            set("app.fleet.test", RType::A, &["2001:db8::1"]),
            &o,
        );
        assert!(e.contains("not an IPv4 address"), "{e}");
        let e = inv(
            "fleet.test",
            set("app.fleet.test", RType::Aaaa, &["192.0.2.1"]),
            &o,
        );
        assert!(e.contains("not an IPv6 address"), "{e}");
        let e = inv("fleet.test", set("app.fleet.test", RType::A, &[]), &o);
        assert!(e.contains("never published empty"), "{e}");
        let e = inv(
            "fleet.test",
            set("app.fleet.test", RType::Cname, &["a.example", "b.example"]),
            &o,
        );
        assert!(e.contains("exactly one"), "{e}");
        let long = format!("{}.fleet.test", "a".repeat(64));
        let e = inv("fleet.test", set(&long, RType::A, &["192.0.2.1"]), &o);
        assert!(e.contains("not a DNS name"), "{e}");
        let deep = format!("{}fleet.test", "abcdefghi.".repeat(25));
        let e = inv("fleet.test", set(&deep, RType::A, &["192.0.2.1"]), &o);
        assert!(e.contains("DNS name"), "{e}");
        let e = inv(
            "fleet.test",
            set("bücher.fleet.test", RType::A, &["192.0.2.1"]),
            &o,
        );
        assert!(e.contains("punycode"), "{e}");
        let mut empty_owner = o.clone();
        empty_owner.txt_value.clear();
        let e = inv(
            "fleet.test",
            set("app.fleet.test", RType::A, &["192.0.2.1"]),
            &empty_owner,
        );
        assert!(e.contains("empty value"), "{e}");
    }
}
