use super::*;
use proptest::prelude::*;

fn host(s: &str) -> Hostname {
    Hostname::parse(s).unwrap()
}

/// A cluster's usable addresses from strings: IPs by family, the rest
/// hostnames.
fn u(addrs: &[&str]) -> Usable {
    let mut out = Usable::default();
    for a in addrs {
        match a.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V4(v4)) => out.v4.push(v4),
            Ok(std::net::IpAddr::V6(v6)) => out.v6.push(v6),
            Err(_) => out.hostnames.push(host(a)),
        }
    }
    out.v4.sort();
    out.v6.sort();
    out.hostnames.sort();
    out
}

fn fleet(spec: &[(&str, &[&str])]) -> BTreeMap<String, Usable> {
    spec.iter().map(|(c, a)| ((*c).to_owned(), u(a))).collect()
}

fn v4(s: &RecordSets) -> Vec<String> {
    match s.a.as_ref().map(|s| &s.data) {
        Some(RecordData::A(v)) => v.iter().map(ToString::to_string).collect(),
        _ => vec![],
    }
}

fn left(s: &RecordSets) -> Vec<String> {
    s.left_out.iter().map(ToString::to_string).collect()
}

#[test]
fn a_and_aaaa_sorted_and_deduplicated() {
    let h = host("shop.example.com");
    let s = build(
        &h,
        false,
        &fleet(&[
            ("west", &["192.0.2.20", "2001:db8::2"]),
            ("east", &["192.0.2.3", "192.0.2.20"]),
            ("north", &["2001:db8::1"]),
        ]),
        &RecordOptions {
            ttl_seconds: 60,
            ..RecordOptions::default()
        },
    );
    assert_eq!(v4(&s), ["192.0.2.3", "192.0.2.20"]);
    let a = s.a.as_ref().unwrap();
    assert_eq!(a.ttl_seconds, 60);
    assert_eq!(a.clusters, ["east", "west"]);
    assert_eq!(a.record_type(), RecordType::A);
    let aaaa = s.aaaa.as_ref().unwrap();
    assert_eq!(
        aaaa.data,
        RecordData::Aaaa(vec![
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap()
        ])
    );
    assert_eq!(aaaa.clusters, ["north", "west"]);
    assert!(s.cname.is_none());
    assert!(s.left_out.is_empty());
    assert_eq!(s.types(), BTreeSet::from([RecordType::A, RecordType::Aaaa]));
}

#[test]
fn cname_rules() {
    let h = host("shop.example.com");
    let single = RecordOptions::default();
    let weighted = RecordOptions {
        cname_routing: CnameRouting::Weighted,
        ..RecordOptions::default()
    };
    // Exactly one hostname-only cluster, no IP: one CNAME.
    let s = build(
        &h,
        false,
        &fleet(&[("east", &["lb-b.example.net", "lb-a.example.net"])]),
        &single,
    );
    let c = s.cname.as_ref().unwrap();
    assert_eq!(c.data, RecordData::Cname(host("lb-a.example.net")));
    assert_eq!(c.clusters, ["east"]);
    assert_eq!(s.types(), BTreeSet::from([RecordType::Cname]));
    // Beside an IP: left out, never a CNAME beside A/AAAA.
    let s = build(
        &h,
        false,
        &fleet(&[("east", &["lb.example.net"]), ("west", &["192.0.2.1"])]),
        &single,
    );
    assert!(s.cname.is_none());
    assert_eq!(v4(&s), ["192.0.2.1"]);
    assert_eq!(
        left(&s),
        [
            "east left out: it has only a hostname and other clusters have IPs (never a CNAME beside A/AAAA)"
        ]
    );
    // Weighted does not change that.
    assert!(
        build(
            &h,
            false,
            &fleet(&[("east", &["lb.example.net"]), ("west", &["2001:db8::1"])]),
            &weighted
        )
        .cname
        .is_none()
    );
    // A cluster with both an IP and a hostname is published by its IP.
    let s = build(
        &h,
        false,
        &fleet(&[("east", &["lb.example.net", "192.0.2.1"])]),
        &single,
    );
    assert!(s.cname.is_none() && s.left_out.is_empty());
    // Two hostname-only clusters: no CNAME, both named.
    let two = fleet(&[("east", &["a.example.net"]), ("west", &["b.example.net"])]);
    let s = build(&h, false, &two, &single);
    assert!(s.is_empty());
    let mut l = left(&s);
    l.sort();
    assert_eq!(
        l,
        [
            "east left out: 2 clusters have only a hostname (a CNAME needs exactly one)",
            "west left out: 2 clusters have only a hostname (a CNAME needs exactly one)",
        ]
    );
    // Weighted: one target per cluster, setIdentifier the cluster.
    let s = build(&h, false, &two, &weighted);
    let Some(RecordData::WeightedCname(targets)) = s.cname.as_ref().map(|c| &c.data) else {
        panic!("{s:?}");
    };
    type Row = (String, String, Vec<(String, String)>);
    let mut t: Vec<Row> = targets
        .iter()
        .map(|t| {
            (
                t.set_identifier.clone(),
                t.target.to_string(),
                t.provider_specific.clone(),
            )
        })
        .collect();
    t.sort();
    let w = vec![("aws/weight".to_owned(), "1".to_owned())];
    assert_eq!(
        t,
        [
            ("east".to_owned(), "a.example.net".to_owned(), w.clone()),
            ("west".to_owned(), "b.example.net".to_owned(), w),
        ]
    );
    // The zone apex never gets a CNAME.
    let s = build(
        &host("example.com"),
        true,
        &fleet(&[("east", &["lb.example.net"])]),
        &weighted,
    );
    assert!(s.is_empty());
    assert_eq!(
        left(&s),
        ["east left out: it has only a hostname and a CNAME cannot be at the zone apex"]
    );
}

#[test]
fn the_hash_is_pinned() {
    // FNV-1a 64 of "shop.example.com\0east" etc. through fmix64, checked
    // against an independent implementation: every replica and version
    // ranks clusters alike.
    let h = host("shop.example.com");
    assert_eq!(rendezvous_score(&h, "east"), 0xfd89_c982_70e2_228a);
    assert_ne!(
        rendezvous_score(&h, "east"),
        rendezvous_score(&host("api.example.com"), "east")
    );
    let order = ranked(&h, ["east", "west", "north", "south", "c1", "c2"]);
    assert_eq!(order, PINNED_ORDER);
}

const PINNED_ORDER: [&str; 6] = ["east", "north", "c1", "c2", "south", "west"];

#[test]
fn the_cap_keeps_the_highest_ranked_and_names_the_rest() {
    let h = host("shop.example.com");
    let clusters: Vec<String> = (0..40).map(|i| format!("c{i:02}")).collect();
    let addrs: Vec<String> = (0..40).map(|i| format!("192.0.2.{}", i + 1)).collect();
    let map: BTreeMap<String, Usable> = clusters
        .iter()
        .zip(&addrs)
        .map(|(c, a)| (c.clone(), u(&[a.as_str()])))
        .collect();
    let s = build(&h, false, &map, &RecordOptions::default());
    let a = s.a.as_ref().unwrap();
    assert_eq!(a.clusters.len(), 32);
    assert_eq!(v4(&s).len(), 32);
    assert_eq!(s.left_out.len(), 8);
    let order = ranked(&h, clusters.iter().map(String::as_str));
    let mut top: Vec<&str> = order[..32].to_vec();
    top.sort();
    assert_eq!(a.clusters, top);
    for l in &s.left_out {
        assert_eq!(l.why, LeftOutReason::OverCap { max: 32 });
        assert!(order[32..].contains(&l.cluster.as_str()));
    }
    assert!(left(&s)[0].ends_with("left out of A: at most 32 targets"));
    // Cut part way: the first cluster's first addresses.
    let s = build(
        &h,
        false,
        &fleet(&[("east", &["192.0.2.1", "192.0.2.2", "192.0.2.3"])]),
        &RecordOptions {
            max_targets: 2,
            ..RecordOptions::default()
        },
    );
    assert_eq!(v4(&s), ["192.0.2.1", "192.0.2.2"]);
    assert_eq!(
        left(&s),
        ["east: 2 of its 3 addresses in A: at most 2 targets"]
    );
    // Zero counts as one: never empty.
    let s = build(
        &h,
        false,
        &fleet(&[("east", &["192.0.2.1"])]),
        &RecordOptions {
            max_targets: 0,
            ..RecordOptions::default()
        },
    );
    assert_eq!(v4(&s), ["192.0.2.1"]);
    // A cluster whose addresses are all in already is served, not named.
    let s = build(
        &h,
        false,
        &fleet(&[("east", &["192.0.2.1"]), ("west", &["192.0.2.1"])]),
        &RecordOptions {
            max_targets: 1,
            ..RecordOptions::default()
        },
    );
    assert_eq!(s.a.as_ref().unwrap().clusters, ["east", "west"]);
    assert!(s.left_out.is_empty());
    // Weighted CNAMEs are capped per cluster too.
    let map: BTreeMap<String, Usable> = (0..5)
        .map(|i| (format!("c{i}"), u(&[format!("lb{i}.example.net").as_str()])))
        .collect();
    let s = build(
        &h,
        false,
        &map,
        &RecordOptions {
            max_targets: 3,
            cname_routing: CnameRouting::Weighted,
            ..RecordOptions::default()
        },
    );
    assert_eq!(s.cname.as_ref().unwrap().clusters.len(), 3);
    assert_eq!(s.left_out.len(), 2);
}

fn arb_fleet() -> impl Strategy<Value = BTreeMap<String, Vec<u8>>> {
    // Cluster -> last octets of its IPv4 addresses (shared octets are
    // shared addresses).
    proptest::collection::btree_map(
        (0u16..60).prop_map(|i| format!("c{i}")),
        proptest::collection::vec(1u8..80, 1..4),
        0..30,
    )
}

fn to_usable(f: &BTreeMap<String, Vec<u8>>) -> BTreeMap<String, Usable> {
    f.iter()
        .map(|(c, o)| {
            let mut v4: Vec<Ipv4Addr> = o.iter().map(|b| Ipv4Addr::new(192, 0, 2, *b)).collect();
            v4.sort();
            v4.dedup();
            (
                c.clone(),
                Usable {
                    v4,
                    ..Usable::default()
                },
            )
        })
        .collect()
}

proptest! {
    /// The cap's choice is stable: a cluster added that does not outrank
    /// a chosen one never evicts it, and removing a cluster that was not
    /// chosen changes nothing. Every set is within the cap, sorted and
    /// unique, and every cluster is either in it or named.
    #[test]
    fn the_cap_choice_is_stable_when_unrelated_clusters_change(
        f in arb_fleet(),
        extra in (0u16..60, proptest::collection::vec(1u8..80, 1..4)),
        max in 1usize..12,
    ) {
        let h = host("shop.example.com");
        let opts = RecordOptions { max_targets: max, ..RecordOptions::default() };
        let before = build(&h, false, &to_usable(&f), &opts);
        let chosen: Vec<String> = before.a.as_ref().map(|a| a.clusters.clone()).unwrap_or_default();
        let addrs = v4(&before);
        prop_assert!(addrs.len() <= max);
        let parsed: Vec<Ipv4Addr> = addrs.iter().map(|a| a.parse().unwrap()).collect();
        prop_assert!(parsed.windows(2).all(|w| w[0] < w[1]));
        for c in f.keys() {
            let named = before.left_out.iter().any(|l| &l.cluster == c);
            prop_assert!(chosen.contains(c) || named, "{c} neither chosen nor named");
        }
        // Add a cluster.
        let (i, octets) = extra;
        let added = format!("c{i}");
        if !f.contains_key(&added) {
            let mut g = f.clone();
            g.insert(added.clone(), octets);
            let after = build(&h, false, &to_usable(&g), &opts);
            let now: Vec<String> = after.a.as_ref().map(|a| a.clusters.clone()).unwrap_or_default();
            let score = |c: &str| (rendezvous_score(&h, c), std::cmp::Reverse(c.to_owned()));
            for c in &chosen {
                if !now.contains(c) {
                    prop_assert!(score(&added) > score(c), "{added} evicted {c} without outranking it");
                }
            }
        }
        // Remove a cluster that was not chosen.
        if let Some(out) = f.keys().find(|c| !chosen.contains(c)) {
            let mut g = f.clone();
            g.remove(out);
            let after = build(&h, false, &to_usable(&g), &opts);
            prop_assert_eq!(after.a, before.a);
        }
    }
}

/// Each kind of data as the text its outputs write.
#[test]
fn a_sets_targets_are_its_addresses_or_cname_targets() {
    let set = |data| RecordSet {
        host: host("app.example.com"),
        ttl_seconds: DEFAULT_TTL_SECONDS,
        data,
        clusters: vec!["east".to_owned()],
    };
    let weighted = |cluster: &str, target: &str| WeightedTarget {
        set_identifier: cluster.to_owned(),
        target: host(target),
        provider_specific: vec![],
    };
    let cases: [(RecordData, &[&str]); 6] = [
        (
            RecordData::A(vec![
                "10.0.0.2".parse().unwrap(),
                "10.0.0.1".parse().unwrap(),
            ]),
            &["10.0.0.2", "10.0.0.1"],
        ),
        (RecordData::A(vec![]), &[]),
        (
            RecordData::Aaaa(vec!["2001:db8:0:0::1".parse().unwrap()]),
            &["2001:db8::1"],
        ),
        (
            RecordData::Cname(host("LB.Example.com.")),
            &["lb.example.com"],
        ),
        (
            RecordData::WeightedCname(vec![
                weighted("west", "lb-west.example.com"),
                weighted("east", "lb-east.example.com"),
            ]),
            &["lb-west.example.com", "lb-east.example.com"],
        ),
        (RecordData::WeightedCname(vec![]), &[]),
    ];
    for (data, want) in cases {
        let got = set(data.clone()).targets();
        assert_eq!(got, want, "{data:?}");
    }
}
