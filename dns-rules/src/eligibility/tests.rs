use super::*;
use proptest::prelude::*;

use ConditionStatus::{False as F, True as T, Unknown as U};

fn host(s: &str) -> Hostname {
    Hostname::parse(s).unwrap()
}

fn ip(v: &str) -> Address {
    Address {
        address_type: AddressType::IpAddress,
        value: v.to_owned(),
    }
}

fn hostname(v: &str) -> Address {
    Address {
        address_type: AddressType::Hostname,
        value: v.to_owned(),
    }
}

fn listener(
    name: &str,
    hostname: Option<&str>,
    routes: i64,
    programmed: Option<ConditionStatus>,
) -> ListenerView {
    ListenerView {
        name: name.to_owned(),
        hostname: hostname.map(str::to_owned),
        attached_routes: routes,
        programmed,
    }
}

/// An eligible cluster: reports, fresh, ready, one listener `https` with a
/// route, one public IPv4.
fn good() -> ClusterView {
    ClusterView {
        cluster: "east".into(),
        reports_gateway: true,
        stale: false,
        revoked: false,
        member: None,
        expected: None,
        load_balancer_ready: Some(T),
        programmed: Some(T),
        listeners: vec![listener("https", Some("shop.example.com"), 1, Some(T))],
        addresses: vec![ip("192.0.2.10")],
    }
}

fn https() -> Vec<String> {
    vec!["https".to_owned()]
}

#[test]
fn every_rule_and_its_message() {
    type Edit = fn(&mut ClusterView);
    let cases: &[(&str, Edit, &str)] = &[
        ("revoked", |c| c.revoked = true, "revoked"),
        (
            "revoked before stale",
            |c| {
                c.revoked = true;
                c.stale = true;
            },
            "revoked",
        ),
        (
            "not a member",
            |c| c.member = Some(false),
            "not a member of the inventory",
        ),
        ("a member", |c| c.member = Some(true), ""),
        (
            "not expected",
            |c| c.expected = Some(false),
            "not expected: the Gateway names its expected clusters and this is not one",
        ),
        ("expected", |c| c.expected = Some(true), ""),
        (
            "not reporting",
            |c| c.reports_gateway = false,
            "does not report this Gateway",
        ),
        ("stale", |c| c.stale = true, "stale"),
        (
            "no LoadBalancerReady",
            |c| c.load_balancer_ready = None,
            "LoadBalancerReady is not reported (a Gateway without a LoadBalancer Service is never eligible)",
        ),
        (
            "LoadBalancerReady False",
            |c| c.load_balancer_ready = Some(F),
            "LoadBalancerReady is False",
        ),
        (
            "LoadBalancerReady Unknown",
            |c| c.load_balancer_ready = Some(U),
            "LoadBalancerReady is Unknown",
        ),
        (
            "Programmed False",
            |c| c.programmed = Some(F),
            "Programmed is False",
        ),
        ("Programmed Unknown passes", |c| c.programmed = Some(U), ""),
        (
            "Programmed not reported passes",
            |c| c.programmed = None,
            "",
        ),
        (
            "no route",
            |c| c.listeners[0].attached_routes = 0,
            "no listener with hostname shop.example.com has an attached route",
        ),
        (
            "listener not reported",
            |c| c.listeners.clear(),
            "no listener with hostname shop.example.com has an attached route and is programmed: https not reported",
        ),
        (
            "listener not programmed",
            |c| c.listeners[0].programmed = Some(F),
            "no listener with hostname shop.example.com has an attached route and is programmed: https Programmed is False",
        ),
        (
            "listener Programmed unknown passes",
            |c| c.listeners[0].programmed = None,
            "",
        ),
        (
            "listener reports another hostname",
            |c| c.listeners[0].hostname = Some("other.example.com".into()),
            "no listener with hostname shop.example.com has an attached route and is programmed: https has hostname \"other.example.com\" here",
        ),
        (
            "listener hostname without case or dot",
            |c| c.listeners[0].hostname = Some("SHOP.example.com.".into()),
            "",
        ),
        (
            "listener hostname not reported (older agent)",
            |c| c.listeners[0].hostname = None,
            "",
        ),
        ("no address", |c| c.addresses.clear(), "no address"),
        (
            "only unusable addresses",
            |c| {
                c.addresses = vec![
                    ip("127.0.0.1"),
                    ip("169.254.1.1"),
                    ip("0.0.0.0"),
                    ip("::1"),
                    ip("fe80::1"),
                    ip("::"),
                    ip("not-an-ip"),
                    Address {
                        address_type: AddressType::Other("example.com/Custom".into()),
                        value: "x".into(),
                    },
                ]
            },
            "no usable address: \"127.0.0.1\" is loopback; \"169.254.1.1\" is link-local; \"0.0.0.0\" is unspecified; \"::1\" is loopback; \"fe80::1\" is link-local; \"::\" is unspecified; \"not-an-ip\" is not an IP address; \"x\" is of a type other than IPAddress and Hostname",
        ),
        (
            "multicast and broadcast",
            |c| c.addresses = vec![ip("224.0.0.1"), ip("255.255.255.255"), ip("ff02::1")],
            "no usable address: \"224.0.0.1\" is multicast; \"255.255.255.255\" is broadcast; \"ff02::1\" is multicast",
        ),
        (
            "a hostname address is usable",
            |c| c.addresses = vec![hostname("lb.elb.example.net")],
            "",
        ),
        (
            "a wildcard hostname address is not",
            |c| c.addresses = vec![hostname("*.example.net")],
            "no usable address: \"*.example.net\" is a wildcard, not a hostname",
        ),
        (
            "an invalid hostname address is not",
            |c| c.addresses = vec![hostname("a_b.example.net")],
            "no usable address: \"a_b.example.net\" is not a valid hostname",
        ),
        (
            "the first rule wins",
            |c| {
                c.stale = true;
                c.load_balancer_ready = None;
                c.addresses.clear();
            },
            "stale",
        ),
    ];
    for (what, edit, want) in cases {
        let mut c = good();
        edit(&mut c);
        let got = assess(&c, &host("shop.example.com"), &https());
        match (got, *want) {
            (Ok(_), "") => {}
            (Ok(u), w) => panic!("{what}: eligible ({u:?}), want {w:?}"),
            (Err(e), "") => panic!("{what}: {e}"),
            (Err(e), w) => assert_eq!(e.to_string(), w, "{what}"),
        }
    }
}

#[test]
fn one_listener_of_the_hostname_is_enough() {
    let mut c = good();
    c.listeners = vec![
        listener("http", Some("shop.example.com"), 0, Some(T)),
        listener("https", Some("shop.example.com"), 2, Some(T)),
    ];
    let ls = vec!["http".to_owned(), "https".to_owned()];
    assert!(assess(&c, &host("shop.example.com"), &ls).is_ok());
    c.listeners[1].attached_routes = 0;
    assert_eq!(
        assess(&c, &host("shop.example.com"), &ls)
            .unwrap_err()
            .to_string(),
        "no listener with hostname shop.example.com has an attached route"
    );
    c.listeners[1].attached_routes = 2;
    c.listeners[1].programmed = Some(F);
    assert_eq!(
        assess(&c, &host("shop.example.com"), &ls)
            .unwrap_err()
            .to_string(),
        "no listener with hostname shop.example.com has an attached route and is programmed: http has no attached route; https Programmed is False"
    );
    assert_eq!(
        assess(&c, &host("shop.example.com"), &[])
            .unwrap_err()
            .to_string(),
        "the Gateway has no listener with hostname shop.example.com"
    );
}

#[test]
fn rule_four_per_record_type() {
    let h = host("shop.example.com");
    let mut c = good();
    c.addresses = vec![
        ip("192.0.2.10"),
        ip("192.0.2.10"),
        ip("192.0.2.9"),
        Address {
            address_type: AddressType::parse(None),
            value: "2001:db8::1".into(),
        },
        ip("::ffff:198.51.100.7"),
        hostname("203.0.113.5"),
    ];
    let u = assess(&c, &h, &https()).unwrap();
    let v4: Vec<String> = u.v4.iter().map(ToString::to_string).collect();
    assert_eq!(
        v4,
        ["192.0.2.9", "192.0.2.10", "198.51.100.7", "203.0.113.5"]
    );
    assert_eq!(u.v6, ["2001:db8::1".parse::<Ipv6Addr>().unwrap()]);
    assert!(eligible_for(&c, &h, &https(), RecordType::A).is_ok());
    assert!(eligible_for(&c, &h, &https(), RecordType::Aaaa).is_ok());
    assert_eq!(
        eligible_for(&c, &h, &https(), RecordType::Cname)
            .unwrap_err()
            .to_string(),
        "has an IP address: published by address, not by CNAME"
    );
    c.addresses = vec![ip("192.0.2.1")];
    assert_eq!(
        eligible_for(&c, &h, &https(), RecordType::Aaaa)
            .unwrap_err()
            .to_string(),
        "no address of family IPv6"
    );
    c.addresses = vec![ip("2001:db8::1")];
    assert_eq!(
        eligible_for(&c, &h, &https(), RecordType::A)
            .unwrap_err()
            .to_string(),
        "no address of family IPv4"
    );
    c.addresses = vec![hostname("LB.example.net.")];
    let u = eligible_for(&c, &h, &https(), RecordType::Cname).unwrap();
    assert_eq!(u.hostnames, [host("lb.example.net")]);
    assert_eq!(
        eligible_for(&c, &h, &https(), RecordType::A)
            .unwrap_err()
            .to_string(),
        "no address of family IPv4"
    );
    // An earlier rule still wins over rule 4.
    c.stale = true;
    assert_eq!(
        eligible_for(&c, &h, &https(), RecordType::A).unwrap_err(),
        Ineligible::Stale
    );
}

#[test]
fn statuses_and_types_parse() {
    assert_eq!(ConditionStatus::parse("True"), T);
    assert_eq!(ConditionStatus::parse("False"), F);
    assert_eq!(ConditionStatus::parse("true"), U);
    assert_eq!(ConditionStatus::parse(""), U);
    assert_eq!(
        AddressType::parse(Some("IPAddress")),
        AddressType::IpAddress
    );
    assert_eq!(AddressType::parse(Some("Hostname")), AddressType::Hostname);
    assert_eq!(
        AddressType::parse(Some("NamedAddress")),
        AddressType::Other("NamedAddress".into())
    );
}

#[test]
fn restricted_keeps_only_the_published_types() {
    let u = usable(&[
        ip("192.0.2.1"),
        ip("2001:db8::1"),
        hostname("lb.example.net"),
    ]);
    let a = u.restricted(|t| t == RecordType::A);
    assert_eq!(a.v4.len(), 1);
    assert!(a.v6.is_empty() && a.hostnames.is_empty());
    let c = u.restricted(|t| t == RecordType::Cname);
    assert!(c.check(RecordType::Cname).is_ok());
}

#[test]
fn long_lists_are_cut_in_messages() {
    let mut c = good();
    c.addresses = (0..20).map(|_| ip("127.0.0.1")).collect();
    let m = assess(&c, &host("shop.example.com"), &https())
        .unwrap_err()
        .to_string();
    assert!(m.ends_with("; and 12 more"), "{m}");
}

proptest! {
    /// Eligible iff every rule holds, whatever the mix; and an eligible
    /// cluster's addresses are all publishable, sorted and unique.
    #[test]
    fn eligible_exactly_when_every_rule_holds(
        flags in proptest::array::uniform6(any::<bool>()),
        member in proptest::option::of(any::<bool>()),
        expected in proptest::option::of(any::<bool>()),
        lb in proptest::option::of(0u8..3),
        routes in 0i64..3,
        addrs in proptest::collection::vec((0u8..3, any::<[u8; 4]>()), 0..5),
    ) {
        let status = |s: u8| [T, F, U][usize::from(s)];
        let mut c = good();
        c.revoked = flags[0];
        c.stale = flags[1];
        c.reports_gateway = flags[2];
        c.programmed = flags[3].then_some(F);
        c.listeners[0].programmed = flags[4].then_some(F);
        c.listeners[0].hostname = flags[5].then(|| "other.example.com".to_owned());
        c.member = member;
        c.expected = expected;
        c.load_balancer_ready = lb.map(status);
        c.listeners[0].attached_routes = routes;
        c.addresses = addrs
            .iter()
            .map(|(kind, b)| match kind {
                0 => ip(&Ipv4Addr::from(*b).to_string()),
                1 => ip(&Ipv6Addr::from([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, b[0], b[1], b[2], b[3]]).to_string()),
                _ => hostname(&format!("lb{}.example.net", b[0])),
            })
            .collect();
        let rules = !c.revoked && member != Some(false) && expected != Some(false)
            && c.reports_gateway && !c.stale && lb == Some(0) && !flags[3]
            && routes >= 1 && !flags[4] && !flags[5];
        let got = assess(&c, &host("shop.example.com"), &https());
        match got {
            Ok(u) => {
                prop_assert!(rules);
                prop_assert!(u.v4.windows(2).all(|w| w[0] < w[1]));
                prop_assert!(u.v6.windows(2).all(|w| w[0] < w[1]));
                for a in &u.v4 {
                    prop_assert!(!a.is_loopback() && !a.is_link_local() && !a.is_unspecified());
                }
                prop_assert!(u.has_ip() || !u.hostnames.is_empty());
            }
            Err(Ineligible::NoUsableAddress { .. }) => prop_assert!(rules),
            Err(_) => prop_assert!(!rules),
        }
    }
}

/// Each failure names the spec's rule it breaks and a word for it, for the
/// Dashboard's per-cluster verdicts.
#[test]
fn each_failure_names_its_rule() {
    type Edit = fn(&mut ClusterView);
    let cases: &[(Edit, u8, &str)] = &[
        (|c| c.revoked = true, 1, "Revoked"),
        (|c| c.member = Some(false), 1, "NotMember"),
        (|c| c.expected = Some(false), 1, "NotExpected"),
        (|c| c.reports_gateway = false, 1, "NotReporting"),
        (|c| c.stale = true, 1, "Stale"),
        (
            |c| c.load_balancer_ready = None,
            2,
            "LoadBalancerNotReported",
        ),
        (
            |c| c.load_balancer_ready = Some(F),
            2,
            "LoadBalancerNotReady",
        ),
        (|c| c.programmed = Some(F), 2, "NotProgrammed"),
        (
            |c| c.listeners[0].attached_routes = 0,
            3,
            "NoServingListener",
        ),
        (|c| c.listeners.clear(), 3, "NoServingListener"),
        (|c| c.addresses.clear(), 4, "NoUsableAddress"),
    ];
    for (edit, rule, code) in cases {
        let mut c = good();
        edit(&mut c);
        let e = assess(&c, &host("shop.example.com"), &https()).unwrap_err();
        assert_eq!((e.rule(), e.code()), (*rule, *code), "{e}");
    }
    let e = eligible_for(
        &good(),
        &host("shop.example.com"),
        &https(),
        RecordType::Aaaa,
    )
    .unwrap_err();
    assert_eq!((e.rule(), e.code()), (4, "NoAddressForType"));
}
