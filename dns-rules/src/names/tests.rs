use super::*;
use proptest::prelude::*;

fn key(s: &str) -> GatewayKey {
    let (ns, name) = s.split_once('/').unwrap();
    GatewayKey::new(ns, name)
}

fn gw(k: &str, created: i64, listeners: &[(&str, Option<&str>)]) -> HubGateway {
    HubGateway {
        key: key(k),
        created_millis: created,
        listeners: listeners
            .iter()
            .map(|(n, h)| HubListener {
                name: (*n).to_owned(),
                hostname: h.map(str::to_owned),
            })
            .collect(),
        has_clusters: true,
    }
}

fn host(s: &str) -> Hostname {
    Hostname::parse(s).unwrap()
}

#[test]
fn hostnames_are_normalised_and_checked() {
    let ok: &[(&str, &str)] = &[
        ("api.example.com", "api.example.com"),
        ("API.Example.COM.", "api.example.com"),
        ("*.apps.example.com", "*.apps.example.com"),
        ("x-1.example.com", "x-1.example.com"),
        ("1.2.3.4", "1.2.3.4"),
    ];
    for (raw, want) in ok {
        assert_eq!(Hostname::parse(raw).unwrap().as_str(), *want, "{raw}");
    }
    let long_label = format!("{}.example.com", "a".repeat(64));
    let long_name = format!("{}.com", vec!["a".repeat(63); 4].join("."));
    let bad: &[(&str, &str)] = &[
        ("", "the hostname is empty"),
        (".", "the hostname is empty"),
        ("a..b", "has an empty label"),
        ("a.b..", "has an empty label"),
        ("a.*.b", "'*' may only be the whole first label"),
        ("*x.b", "'*' may only be the whole first label"),
        (&long_label, "is 64 characters long, the limit is 63"),
        (&long_name, "259 characters long, the limit is 253"),
        ("-a.example.com", "label \"-a\" is not a DNS label"),
        ("a_b.example.com", "label \"a_b\" is not a DNS label"),
        ("é.example.com", "is not a DNS label"),
    ];
    for (raw, want) in bad {
        let e = Hostname::parse(raw).unwrap_err().to_string();
        assert!(e.contains(want), "{raw}: {e}");
    }
    assert!(host("*.a.b").is_wildcard());
    assert!(!host("a.b").is_wildcard());
    assert_eq!(
        parse_zone("*.example.com"),
        Err(HostnameError::WildcardZone)
    );
    assert_eq!(parse_zone("Example.com.").unwrap().as_str(), "example.com");
}

#[test]
fn zones_match_whole_labels() {
    let zones = ["example.com", "apps.example.com.", "Other.ORG"];
    let cases: &[(&str, Option<&str>)] = &[
        ("example.com", Some("example.com")),
        ("api.example.com", Some("example.com")),
        ("API.EXAMPLE.COM.", Some("example.com")),
        ("x.apps.example.com", Some("apps.example.com.")),
        ("*.apps.example.com", Some("apps.example.com.")),
        ("apps.example.com", Some("apps.example.com.")),
        ("a.other.org", Some("Other.ORG")),
        ("notexample.com", None),
        ("example.com.evil.net", None),
        ("com", None),
        ("", None),
    ];
    for (h, want) in cases {
        assert_eq!(zone_of(h, &zones), *want, "{h}");
        assert_eq!(in_zone(h, &zones), want.is_some(), "{h}");
    }
    // An empty or root zone matches nothing.
    assert!(!in_zone("a.example.com", &["", "."]));
    let none: [&str; 0] = [];
    assert!(!in_zone("a.example.com", &none));
}

#[test]
fn the_oldest_gateway_owns_a_name_then_ns_name() {
    let zones = ["example.com"];
    let gateways = [
        gw("b/web", 100, &[("https", Some("shop.example.com"))]),
        gw("a/web", 200, &[("https", Some("shop.example.com"))]),
        // Same time: "a-b/x" sorts before "a/x" as text.
        gw("a/x", 50, &[("h", Some("tie.example.com"))]),
        gw("a-b/x", 50, &[("h", Some("tie.example.com"))]),
    ];
    let got = fleet_names(&gateways, &zones);
    assert_eq!(got.names[&host("shop.example.com")].owner, key("b/web"));
    assert_eq!(got.names[&host("tie.example.com")].owner, key("a-b/x"));
    let conflicts: Vec<String> = got
        .conflicts
        .iter()
        .map(|c| format!("{}: {c}", c.gateway))
        .collect();
    assert_eq!(
        conflicts,
        [
            "a/web: shop.example.com is claimed by b/web (the oldest hub Gateway with it)",
            "a/x: tie.example.com is claimed by a-b/x (the oldest hub Gateway with it)",
        ]
    );
}

#[test]
fn names_table() {
    struct Case {
        what: &'static str,
        gateways: Vec<HubGateway>,
        names: &'static [(&'static str, &'static str, &'static [&'static str])],
        invalid: &'static [&'static str],
    }
    let mut silent = gw("ns/silent", 1, &[("h", Some("silent.example.com"))]);
    silent.has_clusters = false;
    let cases = [
        Case {
            what: "two listeners with one hostname: one name, both listeners",
            gateways: vec![gw(
                "ns/gw",
                1,
                &[
                    ("http", Some("a.example.com")),
                    ("https", Some("A.example.com.")),
                ],
            )],
            names: &[("a.example.com", "ns/gw", &["http", "https"])],
            invalid: &[],
        },
        Case {
            what: "no hostname, outside the zones: no name",
            gateways: vec![gw(
                "ns/gw",
                1,
                &[("any", None), ("out", Some("a.example.org"))],
            )],
            names: &[],
            invalid: &[],
        },
        Case {
            what: "a wildcard gives a wildcard name",
            gateways: vec![gw("ns/gw", 1, &[("w", Some("*.apps.example.com"))])],
            names: &[("*.apps.example.com", "ns/gw", &["w"])],
            invalid: &[],
        },
        Case {
            what: "invalid under a zone: named; invalid outside: ignored",
            gateways: vec![gw(
                "ns/gw",
                1,
                &[
                    ("bad", Some("a_b.example.com")),
                    ("elsewhere", Some("a_b.example.org")),
                ],
            )],
            names: &[],
            invalid: &["ns/gw bad \"a_b.example.com\": label \"a_b\" is not a DNS label"],
        },
        Case {
            what: "a Gateway without clusters has no names and claims none",
            gateways: vec![
                silent.clone(),
                gw("ns/young", 9, &[("h", Some("silent.example.com"))]),
            ],
            names: &[("silent.example.com", "ns/young", &["h"])],
            invalid: &[],
        },
    ];
    for c in cases {
        let got = fleet_names(&c.gateways, &["example.com"]);
        let names: Vec<(String, String, Vec<String>)> = got
            .names
            .values()
            .map(|n| (n.host.to_string(), n.owner.to_string(), n.listeners.clone()))
            .collect();
        let want: Vec<(String, String, Vec<String>)> = c
            .names
            .iter()
            .map(|(h, o, l)| {
                (
                    (*h).to_owned(),
                    (*o).to_owned(),
                    l.iter().map(|s| (*s).to_owned()).collect(),
                )
            })
            .collect();
        assert_eq!(names, want, "{}", c.what);
        let invalid: Vec<String> = got
            .invalid
            .iter()
            .map(|i| format!("{} {} {i}", i.gateway, i.listener))
            .collect();
        assert_eq!(invalid.len(), c.invalid.len(), "{}: {invalid:?}", c.what);
        for (g, w) in invalid.iter().zip(c.invalid) {
            assert!(g.starts_with(w), "{}: {g}", c.what);
        }
        assert!(got.conflicts.is_empty(), "{}", c.what);
    }
}

#[test]
fn apex_names_are_known() {
    let got = fleet_names(
        &[gw(
            "ns/gw",
            1,
            &[
                ("apex", Some("example.com")),
                ("sub", Some("a.example.com")),
            ],
        )],
        &["example.com."],
    );
    assert!(got.names[&host("example.com")].is_apex());
    assert!(!got.names[&host("a.example.com")].is_apex());
}

fn reported(k: &str, cluster: &str, listeners: &[(&str, Option<&str>)]) -> ReportedGateway {
    ReportedGateway {
        key: key(k),
        cluster: cluster.to_owned(),
        listeners: gw(k, 0, listeners).listeners,
    }
}

#[test]
fn without_kubernetes_names_come_from_the_clusters() {
    let reports = [
        reported(
            "ns/gw",
            "west",
            &[
                ("web", Some("Web.example.com")),
                ("api", Some("api-west.example.com")),
                ("old", None),
            ],
        ),
        reported(
            "ns/gw",
            "east",
            &[
                ("web", Some("web.example.com.")),
                ("api", Some("api-east.example.com")),
                ("old", None),
                ("out", Some("x.example.org")),
            ],
        ),
        // An older agent sends no hostname: it does not disagree.
        reported("ns/gw", "north", &[("web", None)]),
        reported("ns/other", "east", &[("web", Some("web.example.com"))]),
        // Disagreeing outside every zone: not ours, not named.
        reported("ns/far", "east", &[("x", Some("a.example.org"))]),
        reported("ns/far", "west", &[("x", Some("b.example.org"))]),
    ];
    let got = names_from_reports(&reports, &["example.com"]);
    let names: Vec<(String, String)> = got
        .names
        .values()
        .map(|n| (n.host.to_string(), n.owner.to_string()))
        .collect();
    assert_eq!(names, [("web.example.com".into(), "ns/gw".into())]);
    assert_eq!(got.conflicts.len(), 1);
    assert_eq!(got.conflicts[0].gateway, key("ns/other"));
    let d: Vec<String> = got.disagreements.iter().map(ToString::to_string).collect();
    assert_eq!(
        d,
        [
            "listener api of ns/gw: its clusters disagree on its hostname (east: \"api-east.example.com\", west: \"api-west.example.com\")"
        ]
    );
}

#[test]
fn a_disagreement_lists_a_bounded_number_of_clusters() {
    let reports: Vec<ReportedGateway> = (0..20)
        .map(|i| {
            let h = format!("h{i}.example.com");
            reported("ns/gw", &format!("c{i:02}"), &[("web", Some(h.as_str()))])
        })
        .collect();
    let got = names_from_reports(&reports, &["example.com"]);
    let d = got.disagreements[0].to_string();
    assert!(d.ends_with(", and 12 more)"), "{d}");
    assert!(got.names.is_empty());
}

proptest! {
    /// Every name has exactly one owner, the oldest claimant by
    /// (creationTimestamp, `ns/name`); every other claimant is told, and
    /// the answer does not depend on the order the Gateways come in.
    #[test]
    fn one_owner_per_name_whatever_the_order(
        gws in proptest::collection::vec((0u8..4, 0u8..3, 0i64..3, proptest::collection::vec(0u8..4, 1..3)), 1..8),
        rotate in 0usize..8,
    ) {
        let mut gateways: Vec<HubGateway> = Vec::new();
        for (ns, name, created, hosts) in &gws {
            let k = format!("ns{ns}/gw{name}");
            if gateways.iter().any(|g| g.key.to_string() == k) {
                continue;
            }
            let listeners: Vec<(String, Option<String>)> = hosts
                .iter()
                .map(|h| (format!("l{h}"), Some(format!("h{h}.example.com"))))
                .collect();
            let ls: Vec<(&str, Option<&str>)> =
                listeners.iter().map(|(n, h)| (n.as_str(), h.as_deref())).collect();
            gateways.push(gw(&k, *created, &ls));
        }
        let got = fleet_names(&gateways, &["example.com"]);
        let mut turned = gateways.clone();
        let n = turned.len();
        turned.rotate_left(rotate % n);
        prop_assert_eq!(&fleet_names(&turned, &["example.com"]), &got);
        for (h, name) in &got.names {
            let claimants: Vec<&HubGateway> = gateways
                .iter()
                .filter(|g| g.listeners.iter().any(|l| l.hostname.as_deref() == Some(h.as_str())))
                .collect();
            let oldest = claimants
                .iter()
                .min_by_key(|g| (g.created_millis, g.key.to_string()))
                .unwrap();
            prop_assert_eq!(&name.owner, &oldest.key);
            let told = got.conflicts.iter().filter(|c| &c.host == h).count();
            prop_assert_eq!(told, claimants.len() - 1);
        }
    }
}
