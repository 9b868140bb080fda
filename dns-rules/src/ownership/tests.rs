use super::*;
use proptest::prelude::*;

fn host(s: &str) -> Hostname {
    Hostname::parse(s).unwrap()
}

fn ours() -> Ownership {
    Ownership::new("gwhub-system", GatewayKey::new("shop", "web")).unwrap()
}

const VALUE: &str = "heritage=gwhub,owner=gwhub-system,gateway=shop/web";

fn a_set(h: &str, ips: &[&str]) -> RecordSet {
    RecordSet {
        host: host(h),
        ttl_seconds: 30,
        data: RecordData::A(ips.iter().map(|i| i.parse().unwrap()).collect()),
        clusters: vec!["east".into()],
    }
}

fn cname_set(h: &str, target: &str) -> RecordSet {
    RecordSet {
        host: host(h),
        ttl_seconds: 30,
        data: RecordData::Cname(host(target)),
        clusters: vec!["east".into()],
    }
}

#[test]
fn ownership_names_and_values() {
    let cases: &[(&str, RecordType, &str)] = &[
        (
            "shop.example.com",
            RecordType::A,
            "_gwhub-a.shop.example.com",
        ),
        (
            "shop.example.com",
            RecordType::Aaaa,
            "_gwhub-aaaa.shop.example.com",
        ),
        (
            "shop.example.com",
            RecordType::Cname,
            "_gwhub-cname.shop.example.com",
        ),
        (
            "*.apps.example.com",
            RecordType::A,
            "_gwhub-a._wildcard.apps.example.com",
        ),
    ];
    for (h, t, want) in cases {
        assert_eq!(ownership_name(&host(h), *t).unwrap(), *want);
    }
    assert_eq!(ours().value(), VALUE);
    // A 253-character name leaves no room for the ownership labels.
    let long = format!(
        "{}.{}.example.com",
        "b".repeat(49),
        vec!["a".repeat(63); 3].join(".")
    );
    assert_eq!(long.len(), 253);
    let h = host(&long);
    let e = ownership_name(&h, RecordType::Cname)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("ownership record name _gwhub-cname."), "{e}");
    assert!(e.ends_with("characters long, the limit is 253"), "{e}");
    let e = plan(
        "example.com",
        &h,
        &ours(),
        &[Change::Create(cname_set(h.as_str(), "lb.example.net"))],
    )
    .unwrap_err();
    assert!(
        matches!(e, PlanError::Invalid(OwnershipError::NameTooLong { .. })),
        "{e}"
    );
}

#[test]
fn owner_ids_are_checked() {
    for ok in ["gwhub-system", "hub_1.prod", &"x".repeat(63)] {
        assert!(
            Ownership::new(ok, GatewayKey::new("a", "b")).is_ok(),
            "{ok}"
        );
    }
    for bad in ["", "a,b", "a=b", "a b", &"x".repeat(64), "é"] {
        let e = Ownership::new(bad, GatewayKey::new("a", "b")).unwrap_err();
        assert!(e.to_string().contains("1 to 63 characters"), "{bad}: {e}");
    }
}

#[test]
fn txt_values_are_parsed() {
    let cases: &[(&str, Owner)] = &[
        (
            VALUE,
            Owner::Ours {
                gateway: "shop/web".into(),
            },
        ),
        (
            "gateway=other/gw,owner=gwhub-system,heritage=gwhub",
            Owner::Ours {
                gateway: "other/gw".into(),
            },
        ),
        (
            "heritage=gwhub,owner=gwhub-system,gateway=shop/web,future=1",
            Owner::Ours {
                gateway: "shop/web".into(),
            },
        ),
        (
            "heritage=gwhub,owner=hub-b,gateway=shop/web",
            Owner::OtherOwner {
                owner: "hub-b".into(),
                gateway: Some("shop/web".into()),
            },
        ),
        (
            "heritage=external-dns,external-dns/owner=default",
            Owner::Foreign,
        ),
        ("v=spf1 -all", Owner::Foreign),
        ("heritage=gwhub", Owner::Foreign),
        ("heritage=gwhub,owner=a,owner=gwhub-system", Owner::Foreign),
        ("", Owner::Foreign),
    ];
    for (txt, want) in cases {
        assert_eq!(parse_owner(txt, "gwhub-system"), *want, "{txt}");
    }
}

#[test]
fn long_values_are_split_into_character_strings() {
    let gw = GatewayKey::new("n".repeat(63), "g".repeat(253));
    let o = Ownership::new(&"o".repeat(63), gw).unwrap();
    let v = o.value();
    let parts = txt_strings(&v);
    assert!(parts.len() > 1);
    assert!(parts.iter().all(|p| p.len() <= 255));
    assert_eq!(parts.concat(), v);
    assert_eq!(txt_strings(""), [""]);
    assert_eq!(txt_strings("short"), ["short"]);
}

#[test]
fn create_update_and_delete_plans() {
    let h = host("shop.example.com");
    let txt = Rdata::Txt(vec![VALUE.to_owned()]);
    let a = |s: &str| Rdata::A(s.parse().unwrap());
    let absent = |name: &str, rtype| Prerequisite::RrsetAbsent {
        name: name.to_owned(),
        rtype,
    };
    let del = |name: &str, rtype| Update::DeleteRrset {
        name: name.to_owned(),
        rtype,
    };
    let add = |name: &str, rdata| Update::Add {
        name: name.to_owned(),
        ttl: 30,
        rdata,
    };
    // Create: nothing of the type, no ownership record, no CNAME in the way.
    let p = plan(
        "example.com",
        &h,
        &ours(),
        &[Change::Create(a_set(
            "shop.example.com",
            &["192.0.2.1", "192.0.2.2"],
        ))],
    )
    .unwrap();
    assert_eq!(p.zone, "example.com");
    assert_eq!(
        p.prerequisites,
        [
            absent("shop.example.com", DnsType::A),
            absent("_gwhub-a.shop.example.com", DnsType::Txt),
            absent("shop.example.com", DnsType::Cname),
        ]
    );
    assert_eq!(
        p.updates,
        [
            add("shop.example.com", a("192.0.2.1")),
            add("shop.example.com", a("192.0.2.2")),
            add("_gwhub-a.shop.example.com", txt.clone()),
        ]
    );
    // Update: exactly our ownership value; the set is replaced.
    let p = plan(
        "example.com",
        &h,
        &ours(),
        &[Change::Update {
            set: a_set("shop.example.com", &["192.0.2.3"]),
            held: VALUE.to_owned(),
        }],
    )
    .unwrap();
    let held = |v: &str| Prerequisite::RrsetIs {
        name: "_gwhub-a.shop.example.com".into(),
        rtype: DnsType::Txt,
        rdata: vec![Rdata::Txt(vec![v.to_owned()])],
    };
    assert_eq!(p.prerequisites, [held(VALUE)]);
    assert_eq!(
        p.updates,
        [
            del("shop.example.com", DnsType::A),
            add("shop.example.com", a("192.0.2.3"))
        ]
    );
    // Ownership moved between our hub Gateways: the old value is the
    // prerequisite and the record is rewritten.
    let old = "heritage=gwhub,owner=gwhub-system,gateway=shop/old";
    let p = plan(
        "example.com",
        &h,
        &ours(),
        &[Change::Update {
            set: a_set("shop.example.com", &["192.0.2.3"]),
            held: old.to_owned(),
        }],
    )
    .unwrap();
    assert_eq!(p.prerequisites, [held(old)]);
    assert_eq!(
        p.updates,
        [
            del("shop.example.com", DnsType::A),
            del("_gwhub-a.shop.example.com", DnsType::Txt),
            add("shop.example.com", a("192.0.2.3")),
            add("_gwhub-a.shop.example.com", txt.clone()),
        ]
    );
    // Delete: the set and its ownership record.
    let p = plan(
        "example.com",
        &h,
        &ours(),
        &[Change::Delete {
            record_type: RecordType::A,
            held: VALUE.to_owned(),
        }],
    )
    .unwrap();
    assert_eq!(p.prerequisites, [held(VALUE)]);
    assert_eq!(
        p.updates,
        [
            del("shop.example.com", DnsType::A),
            del("_gwhub-a.shop.example.com", DnsType::Txt)
        ]
    );
}

#[test]
fn a_cname_replaced_by_a_is_deleted_first_in_one_update() {
    let h = host("shop.example.com");
    let cname_value = VALUE.to_owned();
    let p = plan(
        "example.com",
        &h,
        &ours(),
        &[
            Change::Create(a_set("shop.example.com", &["192.0.2.1"])),
            Change::Delete {
                record_type: RecordType::Cname,
                held: cname_value,
            },
        ],
    )
    .unwrap();
    // No "CNAME absent" prerequisite: ours goes in the same update.
    assert!(!p.prerequisites.contains(&Prerequisite::RrsetAbsent {
        name: "shop.example.com".into(),
        rtype: DnsType::Cname,
    }));
    let first_add = p
        .updates
        .iter()
        .position(|u| matches!(u, Update::Add { .. }))
        .unwrap();
    assert!(p.updates[..first_add].contains(&Update::DeleteRrset {
        name: "shop.example.com".into(),
        rtype: DnsType::Cname,
    }));
    // Creating a CNAME asks that no A or AAAA is there.
    let p = plan(
        "example.com",
        &h,
        &ours(),
        &[Change::Create(cname_set(
            "shop.example.com",
            "lb.example.net",
        ))],
    )
    .unwrap();
    for t in [DnsType::A, DnsType::Aaaa] {
        assert!(p.prerequisites.contains(&Prerequisite::RrsetAbsent {
            name: "shop.example.com".into(),
            rtype: t,
        }));
    }
}

#[test]
fn plans_refuse_what_is_not_ours() {
    let h = host("shop.example.com");
    let e = plan(
        "example.com",
        &h,
        &ours(),
        &[Change::Delete {
            record_type: RecordType::A,
            held: "heritage=gwhub,owner=hub-b,gateway=shop/web".into(),
        }],
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "A is held by another owner (\"hub-b\"): never overwritten"
    );
    let weighted = RecordSet {
        data: RecordData::WeightedCname(vec![]),
        ..cname_set("shop.example.com", "lb.example.net")
    };
    assert_eq!(
        plan("example.com", &h, &ours(), &[Change::Create(weighted)]).unwrap_err(),
        PlanError::Weighted
    );
    let twice = [
        Change::Create(a_set("shop.example.com", &["192.0.2.1"])),
        Change::Delete {
            record_type: RecordType::A,
            held: VALUE.into(),
        },
    ];
    assert_eq!(
        plan("example.com", &h, &ours(), &twice).unwrap_err(),
        PlanError::Twice(RecordType::A)
    );
}

#[test]
fn read_backs_are_classified() {
    let want = a_set("shop.example.com", &["192.0.2.1", "192.0.2.2"]);
    let rb = |records: &[&str], ttl: Option<u32>, txt: &[&str]| ReadBack {
        records: records
            .iter()
            .map(|r| Rdata::A(r.parse().unwrap()))
            .collect(),
        ttl_seconds: ttl,
        txt: txt.iter().map(|t| (*t).to_owned()).collect(),
    };
    let drifted = |why: &str| Found::Drifted {
        held: VALUE.into(),
        why: why.into(),
    };
    let cases: Vec<(&str, Option<&RecordSet>, ReadBack, Found)> = vec![
        (
            "nothing there",
            Some(&want),
            rb(&[], None, &[]),
            Found::Absent,
        ),
        (
            "nothing there, nothing wanted",
            None,
            rb(&[], None, &[]),
            Found::Absent,
        ),
        (
            "ours and right, in any order",
            Some(&want),
            rb(&["192.0.2.2", "192.0.2.1"], Some(30), &[VALUE]),
            Found::Ours,
        ),
        (
            "ours, records differ",
            Some(&want),
            rb(&["192.0.2.1"], Some(30), &[VALUE]),
            drifted("1 of A records differ from the 2 expected"),
        ),
        (
            "ours, TTL differs",
            Some(&want),
            rb(&["192.0.2.1", "192.0.2.2"], Some(300), &[VALUE]),
            drifted("TTL is not 30"),
        ),
        (
            "ours, records gone",
            Some(&want),
            rb(&[], None, &[VALUE]),
            drifted("0 of A records differ from the 2 expected"),
        ),
        (
            "ours, nothing wanted",
            None,
            rb(&["192.0.2.1"], Some(30), &[VALUE]),
            drifted("published though nothing should be"),
        ),
        (
            "records without an ownership record",
            Some(&want),
            rb(&["192.0.2.9"], Some(30), &[]),
            Found::Foreign {
                why: "A records exist without an ownership record".into(),
            },
        ),
        (
            "another owner",
            Some(&want),
            rb(
                &["192.0.2.9"],
                Some(30),
                &["heritage=gwhub,owner=hub-b,gateway=x/y"],
            ),
            Found::Foreign {
                why: "held by another owner (\"hub-b\")".into(),
            },
        ),
        (
            "not gwhub's",
            Some(&want),
            rb(&[], None, &["v=spf1 -all"]),
            Found::Foreign {
                why: "held by a record that is not gwhub's".into(),
            },
        ),
        (
            "two ownership records",
            Some(&want),
            rb(&[], None, &[VALUE, "heritage=gwhub,owner=hub-b"]),
            Found::Foreign {
                why: "2 ownership records".into(),
            },
        ),
    ];
    for (what, expected, found, want_found) in cases {
        let got = classify(&ours(), RecordType::A, expected, &found);
        assert_eq!(got, want_found, "{what}");
    }
    // Ours for another of our hub Gateways: drift, repaired with that value.
    let old = "heritage=gwhub,owner=gwhub-system,gateway=shop/old";
    let got = classify(
        &ours(),
        RecordType::A,
        Some(&want),
        &rb(&["192.0.2.1", "192.0.2.2"], Some(30), &[old]),
    );
    assert!(
        matches!(&got, Found::Drifted { held, .. } if held == old),
        "{got:?}"
    );
    assert_eq!(
        repair(&got, RecordType::A, Some(&want)),
        Some(Change::Update {
            set: want.clone(),
            held: old.into()
        })
    );
}

#[test]
fn repairs() {
    let want = a_set("shop.example.com", &["192.0.2.1"]);
    let drift = Found::Drifted {
        held: VALUE.into(),
        why: String::new(),
    };
    let foreign = Found::Foreign { why: String::new() };
    assert_eq!(
        repair(&Found::Absent, RecordType::A, Some(&want)),
        Some(Change::Create(want.clone()))
    );
    assert_eq!(repair(&Found::Absent, RecordType::A, None), None);
    assert_eq!(repair(&Found::Ours, RecordType::A, Some(&want)), None);
    assert_eq!(
        repair(&drift, RecordType::A, None),
        Some(Change::Delete {
            record_type: RecordType::A,
            held: VALUE.into()
        })
    );
    assert_eq!(repair(&foreign, RecordType::A, Some(&want)), None);
    assert_eq!(repair(&foreign, RecordType::A, None), None);
}

fn aaaa_set(h: &str, ips: &[&str]) -> RecordSet {
    RecordSet {
        host: host(h),
        ttl_seconds: 30,
        data: RecordData::Aaaa(ips.iter().map(|i| i.parse().unwrap()).collect()),
        clusters: vec!["east".into()],
    }
}

#[test]
fn a_names_changes_come_from_what_is_known_of_each_type() {
    use std::collections::BTreeMap;
    const H: &str = "shop.example.com";
    let a1 = a_set(H, &["192.0.2.1"]);
    let a2 = a_set(H, &["192.0.2.2"]);
    let v6 = aaaa_set(H, &["2001:db8::1"]);
    let cn = cname_set(H, "lb.example.net");
    let old = "heritage=gwhub,owner=gwhub-system,gateway=shop/old";
    let drifted = |held: &str| {
        Known::Found(Found::Drifted {
            held: held.into(),
            why: String::new(),
        })
    };
    let foreign = || {
        Known::Found(Found::Foreign {
            why: "held by another owner (\"hub-b\")".into(),
        })
    };
    let sets = |v: &[&RecordSet]| -> BTreeMap<RecordType, RecordSet> {
        v.iter().map(|s| (s.record_type(), (*s).clone())).collect()
    };
    let update = |set: &RecordSet, held: &str| Change::Update {
        set: set.clone(),
        held: held.into(),
    };
    let delete = |record_type, held: &str| Change::Delete {
        record_type,
        held: held.into(),
    };
    type Case = (
        &'static str,
        BTreeMap<RecordType, RecordSet>,
        Vec<(RecordType, Known)>,
        Result<Vec<Change>, Held>,
    );
    let cases: Vec<Case> = vec![
        (
            "written and unchanged: nothing",
            sets(&[&a1]),
            vec![(RecordType::A, Known::Written(a1.clone()))],
            Ok(vec![]),
        ),
        (
            "written, another set: update with our value",
            sets(&[&a2]),
            vec![(RecordType::A, Known::Written(a1.clone()))],
            Ok(vec![update(&a2, VALUE)]),
        ),
        (
            "A and AAAA change together: both in one list",
            sets(&[&a2, &v6]),
            vec![
                (RecordType::A, Known::Written(a1.clone())),
                (RecordType::Aaaa, Known::Found(Found::Absent)),
            ],
            Ok(vec![update(&a2, VALUE), Change::Create(v6.clone())]),
        ),
        (
            "A to CNAME: the A deleted, the CNAME created",
            sets(&[&cn]),
            vec![(RecordType::A, Known::Written(a1.clone()))],
            Ok(vec![
                delete(RecordType::A, VALUE),
                Change::Create(cn.clone()),
            ]),
        ),
        (
            "read back as ours and current: nothing",
            sets(&[&a1]),
            vec![(RecordType::A, Known::Found(Found::Ours))],
            Ok(vec![]),
        ),
        (
            "read back drifted (moved between our hub Gateways): update with the value found",
            sets(&[&a1]),
            vec![(RecordType::A, drifted(old))],
            Ok(vec![update(&a1, old)]),
        ),
        (
            "read back ours where nothing should be: delete",
            sets(&[&a1]),
            vec![
                (RecordType::A, Known::Found(Found::Ours)),
                (RecordType::Aaaa, drifted(VALUE)),
            ],
            Ok(vec![delete(RecordType::Aaaa, VALUE)]),
        ),
        (
            "someone else's where we want a set: the whole name is held",
            sets(&[&a2, &v6]),
            vec![
                (RecordType::A, Known::Written(a1.clone())),
                (RecordType::Aaaa, foreign()),
            ],
            Err(Held {
                record_type: RecordType::Aaaa,
                why: "held by another owner (\"hub-b\")".into(),
            }),
        ),
        (
            "someone else's where we want none: left alone",
            sets(&[&a1]),
            vec![
                (RecordType::A, Known::Found(Found::Absent)),
                (RecordType::Cname, foreign()),
            ],
            Ok(vec![Change::Create(a1.clone())]),
        ),
        (
            "not known: created (its prerequisites guard it)",
            sets(&[&a1]),
            vec![],
            Ok(vec![Change::Create(a1.clone())]),
        ),
        (
            "the name goes: every type written is deleted",
            sets(&[]),
            vec![
                (RecordType::A, Known::Written(a1.clone())),
                (RecordType::Aaaa, Known::Written(v6.clone())),
            ],
            Ok(vec![
                delete(RecordType::A, VALUE),
                delete(RecordType::Aaaa, VALUE),
            ]),
        ),
    ];
    for (what, expected, known, want) in cases {
        let known: BTreeMap<RecordType, Known> = known.into_iter().collect();
        let got = name_changes(&ours(), &expected, &known);
        assert_eq!(got, want, "{what}");
        // Whatever the changes, they make one plan.
        if let Ok(changes) = got {
            let p = plan("example.com", &host(H), &ours(), &changes).unwrap();
            assert_eq!(p.host, H, "{what}");
        }
    }
}

#[test]
fn read_back_records_map_to_the_clusters_that_have_their_addresses() {
    use std::collections::BTreeSet;
    let u = |v4: &[&str], v6: &[&str], names: &[&str]| Usable {
        v4: v4.iter().map(|i| i.parse().unwrap()).collect(),
        v6: v6.iter().map(|i| i.parse().unwrap()).collect(),
        hostnames: names.iter().map(|h| host(h)).collect(),
        ignored: vec![],
    };
    // "east" twice: its current addresses and those it had when this hub
    // last published it (before its address changed).
    let clusters: Vec<(String, Usable)> = [
        ("east", u(&["192.0.2.1"], &["2001:db8::1"], &[])),
        ("west", u(&["192.0.2.2"], &[], &[])),
        ("shared", u(&["192.0.2.2"], &[], &[])),
        ("elb", u(&[], &[], &["lb.example.net"])),
        ("east", u(&["192.0.2.9"], &[], &[])),
    ]
    .into_iter()
    .map(|(c, u)| (c.to_owned(), u))
    .collect();
    let a = |s: &str| Rdata::A(s.parse().unwrap());
    let rb = |records: Vec<Rdata>, txt: &[&str]| ReadBack {
        records,
        ttl_seconds: Some(30),
        txt: txt.iter().map(|t| t.to_string()).collect(),
    };
    let other_gw = "heritage=gwhub,owner=gwhub-system,gateway=shop/old";
    let theirs = "heritage=gwhub,owner=hub-b,gateway=shop/web";
    let cases: Vec<(&str, RecordType, ReadBack, &[&str])> = vec![
        (
            "each address to its cluster",
            RecordType::A,
            rb(vec![a("192.0.2.1")], &[VALUE]),
            &["east"],
        ),
        (
            "an address two clusters share: both",
            RecordType::A,
            rb(vec![a("192.0.2.1"), a("192.0.2.2")], &[VALUE]),
            &["east", "shared", "west"],
        ),
        (
            "an address no cluster has now: nobody",
            RecordType::A,
            rb(vec![a("192.0.2.1"), a("198.51.100.7")], &[VALUE]),
            &["east"],
        ),
        (
            "an address a cluster had when this hub published it: that cluster",
            RecordType::A,
            rb(vec![a("192.0.2.9")], &[VALUE]),
            &["east"],
        ),
        (
            "AAAA to the IPv6 addresses",
            RecordType::Aaaa,
            rb(vec![Rdata::Aaaa("2001:db8::1".parse().unwrap())], &[VALUE]),
            &["east"],
        ),
        (
            "CNAME to the hostnames",
            RecordType::Cname,
            rb(vec![Rdata::Cname(host("lb.example.net"))], &[VALUE]),
            &["elb"],
        ),
        (
            "ours for another of our hub Gateways: still ours",
            RecordType::A,
            rb(vec![a("192.0.2.2")], &[other_gw]),
            &["shared", "west"],
        ),
        (
            "another owner's: nothing",
            RecordType::A,
            rb(vec![a("192.0.2.1")], &[theirs]),
            &[],
        ),
        (
            "no ownership record: nothing",
            RecordType::A,
            rb(vec![a("192.0.2.1")], &[]),
            &[],
        ),
        (
            "two ownership records: nothing",
            RecordType::A,
            rb(vec![a("192.0.2.1")], &[VALUE, other_gw]),
            &[],
        ),
        ("nothing there", RecordType::A, ReadBack::default(), &[]),
    ];
    for (what, t, found, want) in cases {
        let want: BTreeSet<String> = want.iter().map(|c| c.to_string()).collect();
        assert_eq!(
            published_clusters(&ours(), t, &found, &clusters),
            want,
            "{what}"
        );
    }
}

#[test]
fn a_held_name_says_which_type_and_why() {
    let e = Held {
        record_type: RecordType::Aaaa,
        why: "held by another owner (\"hub-b\")".into(),
    };
    assert_eq!(
        e.to_string(),
        "AAAA: held by another owner (\"hub-b\"): never overwritten"
    );
}

proptest! {
    /// Any mix of what is known and what is wanted makes one plan (or a
    /// conflict only where someone else holds a type we want), and that
    /// plan touches nothing but the name and its ownership records.
    #[test]
    fn name_changes_make_one_plan_of_the_name_only(
        want in proptest::collection::vec(0u8..4, 3),
        know in proptest::collection::vec(0u8..6, 3),
    ) {
        use std::collections::BTreeMap;
        const H: &str = "shop.example.com";
        let choice = [
            (RecordType::A, a_set(H, &["192.0.2.1"]), a_set(H, &["192.0.2.9"])),
            (RecordType::Aaaa, aaaa_set(H, &["2001:db8::1"]), aaaa_set(H, &["2001:db8::9"])),
            (RecordType::Cname, cname_set(H, "lb.example.net"), cname_set(H, "old.example.net")),
        ];
        let mut expected = BTreeMap::new();
        let mut known = BTreeMap::new();
        let mut held_wanted = false;
        for (i, (t, new, old)) in choice.iter().enumerate() {
            let wanted = match want[i] {
                0 | 1 => None,
                2 => Some(new.clone()),
                _ => Some(old.clone()),
            };
            let k = match know[i] {
                0 => None,
                1 => Some(Known::Written(old.clone())),
                2 => Some(Known::Found(Found::Absent)),
                3 => Some(Known::Found(Found::Ours)),
                4 => Some(Known::Found(Found::Drifted { held: VALUE.into(), why: String::new() })),
                _ => Some(Known::Found(Found::Foreign { why: "x".into() })),
            };
            held_wanted |= wanted.is_some() && know[i] == 5;
            if let Some(w) = wanted { expected.insert(*t, w); }
            if let Some(k) = k { known.insert(*t, k); }
        }
        match name_changes(&ours(), &expected, &known) {
            Err(_) => prop_assert!(held_wanted),
            Ok(changes) => {
                prop_assert!(!held_wanted);
                let p = plan("example.com", &host(H), &ours(), &changes).unwrap();
                let ok = |n: &str| n == H || (n.starts_with("_gwhub-") && n.ends_with(".shop.example.com"));
                for u in &p.updates {
                    let n = match u { Update::DeleteRrset { name, .. } | Update::Add { name, .. } => name };
                    prop_assert!(ok(n), "{n}");
                }
                for pre in &p.prerequisites {
                    let n = match pre { Prerequisite::RrsetAbsent { name, .. } | Prerequisite::RrsetIs { name, .. } => name };
                    prop_assert!(ok(n), "{n}");
                }
            }
        }
    }
}

proptest! {
    /// Our value always parses back as ours, with its Gateway; another
    /// owner id never does; the strings always join back to the value.
    #[test]
    fn values_round_trip(
        owner in "[a-z0-9][a-z0-9._-]{0,62}",
        other in "[a-z0-9]{1,20}",
        ns in "[a-z0-9]{1,63}",
        name in "[a-z0-9]{1,253}",
    ) {
        let o = Ownership::new(&owner, GatewayKey::new(ns.clone(), name.clone())).unwrap();
        let v = o.value();
        prop_assert_eq!(parse_owner(&v, &owner), Owner::Ours { gateway: format!("{ns}/{name}") });
        if other != owner {
            let is_other = matches!(parse_owner(&v, &other), Owner::OtherOwner { .. });
            prop_assert!(is_other);
        }
        let parts = txt_strings(&v);
        prop_assert!(parts.iter().all(|p| p.len() <= MAX_TXT_STRING));
        prop_assert_eq!(parts.concat(), v);
    }
}
