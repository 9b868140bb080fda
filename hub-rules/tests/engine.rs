//! Table tests of every aggregation rule of spec section 4.

use crate::support;

use gateway_api::apis::standard::gateways::{GatewayStatus, GatewayStatusListenersSupportedKinds};
use gwhub_hub_rules::aggregate::*;
use support::*;

#[test]
fn design_doc_example() {
    // The Kuadrant aggregation proposal's two spoke Gateways.
    let c1 = status(
        vec![],
        vec![ip("172.32.200.0"), ip("172.32.201.0")],
        vec![listener("api", 0, vec![]), listener("web", 1, vec![])],
    );
    let c2 = status(
        vec![],
        vec![ip("172.32.202.0"), ip("172.32.203.0")],
        vec![listener("api", 1, vec![]), listener("web", 1, vec![])],
    );
    let agg = run(&hub(1), &[fresh("cluster_2", &c2), fresh("cluster_1", &c1)]);
    assert_eq!(
        address_values(&agg),
        [
            "cluster_1/172.32.200.0",
            "cluster_1/172.32.201.0",
            "cluster_2/172.32.202.0",
            "cluster_2/172.32.203.0"
        ]
    );
    for a in agg.status.addresses.as_deref().unwrap() {
        assert_eq!(
            a.r#type.as_deref(),
            Some("kuadrant.io/MultiClusterIPAddress")
        );
    }
    assert!(listener_names(&agg).is_empty());
    let own = own(&agg);
    assert_eq!(
        (own.status.as_str(), own.reason.as_str()),
        ("False", "ValidationFailed")
    );
    let rule = "cluster name is not a DNS label (lowercase letters, digits and '-', at most 63 characters), so listener names cannot carry it";
    assert_eq!(
        own.message,
        format!(
            "cluster cluster_1: 2 listeners (api, web) left out: {rule}; cluster cluster_2: 2 listeners (api, web) left out: {rule}"
        )
    );
    assert_eq!(agg.omissions.len(), 2);
    assert_eq!(agg.omissions[0].cluster.as_deref(), Some("cluster_1"));
    assert_eq!(agg.omissions[0].item, Item::Listener);
    assert_eq!(agg.omissions[0].rule, Rule::ClusterNameNotDnsLabel);
    assert_eq!(agg.omissions[0].names, ["api", "web"]);
}

#[test]
fn true_in_all_clusters() {
    let s = status(
        vec![cond("Accepted", "True", "Accepted", "ok")],
        vec![ip("10.0.0.1")],
        vec![],
    );
    let agg = run(&hub(7), &[fresh("b", &s), fresh("a", &s)]);
    let c = find(&agg, "Accepted");
    assert_eq!(c.status, "True");
    assert_eq!(c.reason, "TrueInAllClusters");
    assert_eq!(c.message, "Accepted is True in all 2 clusters");
    assert_eq!(c.observed_generation, Some(7));
    assert_eq!(c.last_transition_time.0, now());
    let o = own(&agg);
    assert_eq!(
        (o.status.as_str(), o.reason.as_str()),
        ("True", "Aggregated")
    );
    assert_eq!(o.message, "Aggregated the status of 2 clusters");
    assert_eq!(o.observed_generation, Some(7));
    assert!(agg.omissions.is_empty());

    let one = run(&hub(1), &[fresh("a", &s)]);
    assert_eq!(
        find(&one, "Accepted").message,
        "Accepted is True in the only cluster"
    );
    assert_eq!(own(&one).message, "Aggregated the status of 1 cluster");
}

#[test]
fn fragments_for_every_way_of_not_being_true() {
    let with_msg = status(
        vec![cond(
            "Ready",
            "False",
            "Expired",
            "Listener certificate is expired",
        )],
        vec![],
        vec![],
    );
    let empty_msg = status(
        vec![cond("Ready", "Unknown", "Pending", "")],
        vec![],
        vec![],
    );
    let missing = status(vec![cond("Other", "True", "Fine", "")], vec![], vec![]);
    let ok = status(vec![cond("Ready", "True", "Ready", "")], vec![], vec![]);
    let no_status = GatewayStatus::default();
    let stale = ClusterReport {
        cluster: "e-stale",
        status: compact(&ok),
        freshness: Freshness::Stale {
            last_report: ts("2025-05-01T11:58:59.750Z"),
        },
    };
    let reports = [
        fresh("d-ok", &ok),
        stale,
        fresh("a-msg", &with_msg),
        fresh("c-missing", &missing),
        fresh("b-empty", &empty_msg),
        fresh("f-nostatus", &no_status),
    ];
    let agg = run(&hub(3), &reports);
    let ready = find(&agg, "Ready");
    assert_eq!(ready.status, "False");
    assert_eq!(ready.reason, "NotTrueInSomeClusters");
    assert_eq!(
        ready.message,
        "a-msg Listener certificate is expired; b-empty Ready is Unknown (Pending); \
         c-missing Ready not reported; e-stale status is stale: no report since 2025-05-01T11:58:59Z; \
         f-nostatus Ready not reported"
    );
    // A stale cluster is not True for any type, even one True everywhere else.
    let other = find(&agg, "Other");
    assert_eq!(
        other.message,
        "a-msg Other not reported; b-empty Other not reported; d-ok Other not reported; \
         e-stale status is stale: no report since 2025-05-01T11:58:59Z; f-nostatus Other not reported"
    );
    assert_eq!(own(&agg).reason, "Aggregated");
    assert_eq!(own(&agg).message, "Aggregated the status of 6 clusters");
}

#[test]
fn messages_are_capped_at_32768_characters() {
    let long = "x".repeat(100);
    let s = status(vec![cond("Ready", "False", "Bad", &long)], vec![], vec![]);
    let names: Vec<String> = (0..1000).map(|i| format!("cluster-{i:04}")).collect();
    let reports: Vec<_> = names.iter().map(|n| fresh(n, &s)).collect();
    let agg = run(&hub(1), &reports);
    let m = &find(&agg, "Ready").message;
    assert!(m.chars().count() <= 32768);
    // Each fragment is 12 + 1 + 100 = 113 characters plus "; ".
    let shown = m.matches(&long).count();
    assert!(shown > 250 && shown < 1000, "{shown}");
    assert!(
        m.ends_with(&format!("; and {} more clusters", 1000 - shown)),
        "{}",
        &m[m.len() - 60..]
    );
    assert!(m.starts_with("cluster-0000 xxx"));

    // One giant message is shortened, not dropped.
    let giant = status(
        vec![cond("Ready", "False", "Bad", &"y".repeat(32768))],
        vec![],
        vec![],
    );
    let agg = run(&hub(1), &[fresh("a", &giant), fresh("b", &s)]);
    let m = &find(&agg, "Ready").message;
    assert_eq!(m.chars().count(), 32768);
    assert!(m.starts_with("a yyy"));
    assert!(m.ends_with("...; and 1 more clusters"));
}

#[test]
fn transition_time_kept_while_status_unchanged() {
    let s = status(
        vec![
            cond("Accepted", "True", "A", ""),
            cond("Programmed", "False", "P", "no"),
        ],
        vec![ip("10.0.0.1")],
        vec![],
    );
    let reports = [fresh("a", &s)];
    let first = run(&hub(1), &reports);
    let mut previous = conditions(&first).to_vec();
    for c in &mut previous {
        c.last_transition_time.0 = ts("2024-01-01T00:00:00Z");
    }
    // Accepted stays True (time kept); Programmed flips (time moves).
    previous
        .iter_mut()
        .find(|c| c.type_ == "Programmed")
        .unwrap()
        .status = "True".into();
    let hub2 = HubGateway {
        generation: 2,
        previous,
        foreign: vec![],
    };
    let second = run(&hub2, &reports);
    assert_eq!(
        find(&second, "Accepted").last_transition_time.0,
        ts("2024-01-01T00:00:00Z")
    );
    assert_eq!(find(&second, "Accepted").observed_generation, Some(2));
    assert_eq!(find(&second, "Programmed").last_transition_time.0, now());
    assert_eq!(
        own(&second).last_transition_time.0,
        ts("2024-01-01T00:00:00Z")
    );
}

#[test]
fn invalid_condition_types_are_left_out_and_reported() {
    let s = status(
        vec![
            cond("Accepted", "True", "A", ""),
            cond("bad type", "True", "A", ""),
            cond("Odd", "True", "not a reason", ""),
        ],
        vec![ip("10.0.0.1")],
        vec![],
    );
    let agg = run(&hub(1), &[fresh("a", &s)]);
    assert!(conditions(&agg).iter().all(|c| c.type_ != "bad type"));
    // The reason is not copied to the hub, so an odd reason does not matter.
    assert_eq!(find(&agg, "Odd").status, "True");
    let o = own(&agg);
    assert_eq!(o.reason, "ValidationFailed");
    assert_eq!(
        o.message,
        "cluster a: 1 condition (bad type) left out: type does not match the condition type pattern or is longer than 316 characters"
    );
}

#[test]
fn address_types_values_and_cluster_names() {
    let s = status(
        vec![],
        vec![
            ip("10.0.0.1"),
            addr(None, "10.0.0.2"),
            addr(Some("Hostname"), "lb.example.com"),
            addr(Some("NamedAddress"), "my-lb"),
            addr(Some("IPAddress"), &"9".repeat(252)),
        ],
        vec![],
    );
    let agg = run(&hub(1), &[fresh("a", &s)]);
    let got: Vec<(String, String)> = agg
        .status
        .addresses
        .clone()
        .unwrap()
        .into_iter()
        .map(|a| (a.r#type.unwrap(), a.value))
        .collect();
    assert_eq!(
        got,
        [
            (
                "kuadrant.io/MultiClusterIPAddress".to_owned(),
                "a/10.0.0.1".to_owned()
            ),
            (
                "kuadrant.io/MultiClusterIPAddress".into(),
                "a/10.0.0.2".into()
            ),
            (
                "kuadrant.io/MultiClusterHostnameAddress".into(),
                "a/lb.example.com".into()
            ),
        ]
    );
    let m = &own(&agg).message;
    assert!(m.contains("cluster a: 1 address (my-lb) left out: address type \"NamedAddress\" has no multi-cluster address type"), "{m}");
    assert!(
        m.contains("left out: <cluster>/<value> is longer than 253 characters"),
        "{m}"
    );

    // The draft spelling by option.
    let opts = Options::with_hostname_address_type(HOSTNAME_ADDRESS_TYPE_DRAFT).unwrap();
    let agg = aggregate(&hub(1), &[fresh("a", &s)], &opts, now()).unwrap();
    assert_eq!(
        agg.status.addresses.unwrap()[2].r#type.as_deref(),
        Some("kuadrant.io/MultiClusterHostname")
    );
    assert!(Options::with_hostname_address_type("Hostname").is_err());
    assert!(Options::with_hostname_address_type("not a type").is_err());

    // Cluster names that cannot prefix a value.
    let one = status(vec![], vec![ip("10.0.0.1")], vec![]);
    let agg = run(
        &hub(1),
        &[fresh("a/b", &one), fresh("", &one), fresh("ok", &one)],
    );
    assert_eq!(address_values(&agg), ["ok/10.0.0.1"]);
    assert_eq!(agg.omissions.len(), 2);
    assert!(
        agg.omissions
            .iter()
            .all(|o| o.rule == Rule::ClusterNameNotAddressPrefix)
    );
    assert!(own(&agg).message.contains(
        "cluster a/b: 1 address (10.0.0.1) left out: cluster name is empty or contains '/'"
    ));
}

#[test]
fn sixteen_addresses_round_robin() {
    // 10 clusters of 3: every first, then the seconds of the first 6.
    let names: Vec<String> = (0..10).map(|i| format!("c{i}")).collect();
    let statuses: Vec<GatewayStatus> = (0..10)
        .map(|i| {
            status(
                vec![],
                (0..3).map(|j| ip(&format!("10.0.{i}.{j}"))).collect(),
                vec![],
            )
        })
        .collect();
    let mut reports: Vec<_> = names
        .iter()
        .zip(&statuses)
        .map(|(n, s)| fresh(n, s))
        .collect();
    reports.reverse();
    let agg = run(&hub(1), &reports);
    let got = address_values(&agg);
    assert_eq!(got.len(), 16);
    let mut want = Vec::new();
    for i in 0..10 {
        want.push(format!("c{i}/10.0.{i}.0"));
        if i < 6 {
            want.push(format!("c{i}/10.0.{i}.1"));
        }
    }
    assert_eq!(got, want);
    let left: usize = agg
        .omissions
        .iter()
        .filter(|o| o.item == Item::Address)
        .map(Omission::count)
        .sum();
    assert_eq!(left, 14);
    assert_eq!(
        own(&agg).message,
        "14 addresses left out: more than 16 addresses (the CRD's limit); kept round-robin over clusters"
    );
}

#[test]
fn sixty_four_listeners_round_robin() {
    let names: Vec<String> = (0..40).map(|i| format!("c{i:02}")).collect();
    let s = status(
        vec![],
        vec![ip("10.0.0.1")],
        vec![listener("a", 1, vec![]), listener("b", 2, vec![])],
    );
    let reports: Vec<_> = names.iter().map(|n| fresh(n, &s)).collect();
    let agg = run(&hub(1), &reports);
    let got = listener_names(&agg);
    assert_eq!(got.len(), 64);
    assert_eq!(&got[..3], ["c00.a", "c00.b", "c01.a"]);
    assert!(got.contains(&"c23.b".to_owned()) && !got.contains(&"c24.b".to_owned()));
    assert!(got.contains(&"c39.a".to_owned()));
    assert_eq!(
        own(&agg).message,
        "24 addresses left out: more than 16 addresses (the CRD's limit); kept round-robin over clusters; \
         16 listeners left out: more than 64 listeners (the CRD's limit); kept round-robin over clusters"
    );
}

#[test]
fn listener_names_conditions_and_kinds_are_validated() {
    let good = cond("Programmed", "True", "Programmed", "");
    let mut bad_gen = cond("Ready", "True", "Ready", "");
    bad_gen.observed_generation = Some(-1);
    let mut l = listener(
        "http",
        1,
        vec![
            good.clone(),
            good.clone(),
            cond("Bad Type", "True", "R", ""),
            cond("X", "Maybe", "R", ""),
            cond("Y", "True", "1R", ""),
            bad_gen,
        ],
    );
    l.supported_kinds
        .as_mut()
        .unwrap()
        .push(GatewayStatusListenersSupportedKinds {
            group: Some("Bad_Group".into()),
            kind: "HTTPRoute".into(),
        });
    l.supported_kinds
        .as_mut()
        .unwrap()
        .push(GatewayStatusListenersSupportedKinds {
            group: None,
            kind: "9Route".into(),
        });
    let long_cluster = "z".repeat(63);
    let s = status(
        vec![],
        vec![ip("10.0.0.1")],
        vec![
            l,
            listener("http", 0, vec![]),
            listener("Upper", 0, vec![]),
            listener(&"q".repeat(190), 0, vec![]),
        ],
    );
    let agg = run(&hub(1), &[fresh("a", &s), fresh(&long_cluster, &s)]);
    let names = listener_names(&agg);
    assert_eq!(
        names,
        [
            "a.http".to_owned(),
            format!("a.{}", "q".repeat(190)),
            format!("{long_cluster}.http")
        ]
    );
    let first = &agg.status.listeners.as_ref().unwrap()[0];
    assert_eq!(first.conditions, [good]);
    assert_eq!(first.supported_kinds.as_ref().unwrap().len(), 1);
    let rules: Vec<(Item, &Rule)> = agg
        .omissions
        .iter()
        .filter(|o| o.cluster.as_deref() == Some("a"))
        .map(|o| (o.item, &o.rule))
        .collect();
    assert!(rules.contains(&(Item::ListenerCondition, &Rule::DuplicateConditionType)));
    assert!(rules.contains(&(Item::Listener, &Rule::DuplicateListenerName)));
    assert!(rules.contains(&(Item::Listener, &Rule::InvalidListenerName)));
    let count = |item| {
        agg.omissions
            .iter()
            .filter(|o| o.cluster.as_deref() == Some("a") && o.item == item)
            .map(Omission::count)
            .sum::<usize>()
    };
    assert_eq!(count(Item::ListenerCondition), 5);
    assert_eq!(count(Item::SupportedKind), 2);
    // 63 + 1 + 190 = 254 > 253
    let m = &own(&agg).message;
    assert!(
        m.contains(&format!(
            "cluster {long_cluster}: 2 listeners ({long_cluster}.Upper, {long_cluster}.qqq"
        )),
        "{m}"
    );
    assert!(m.contains("is not a valid SectionName of at most 253 characters"));
}

#[test]
fn eight_conditions_own_first_then_accepted_programmed_then_by_name() {
    let types = [
        "Zeta",
        "Programmed",
        "Alpha",
        "Accepted",
        "Beta",
        "Gamma",
        "Delta",
        "Epsilon",
        "Eta",
    ];
    let s = status(
        types.iter().map(|t| cond(t, "True", "R", "")).collect(),
        vec![ip("10.0.0.1")],
        vec![],
    );
    let foreign = vec![
        cond("example.com/Policy", "True", "Applied", "x"),
        cond(OWN_CONDITION, "True", "Fake", ""),
    ];
    let h = HubGateway {
        generation: 1,
        previous: vec![],
        foreign,
    };
    let agg = run(&h, &[fresh("a", &s)]);
    let got: Vec<&str> = conditions(&agg).iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(
        got,
        [
            "Accepted",
            "Programmed",
            "Alpha",
            "Beta",
            "Delta",
            "Epsilon",
            OWN_CONDITION,
            "example.com/Policy"
        ]
    );
    assert_eq!(own(&agg).reason, "ValidationFailed");
    let m = &own(&agg).message;
    assert!(m.contains("1 condition of another writer (kuadrant.io/MultiClusterAggregated) left out: this type is the hub's own"), "{m}");
    assert!(
        m.contains(
            "3 conditions (Eta, Gamma, Zeta) left out: more than 8 in the list (the CRD's limit)"
        ),
        "{m}"
    );
}

#[test]
fn foreign_conditions_are_kept_and_win_their_type() {
    let s = status(
        vec![
            cond("Accepted", "True", "A", ""),
            cond("example.com/Policy", "False", "X", ""),
        ],
        vec![ip("10.0.0.1")],
        vec![],
    );
    let mine = cond(
        "example.com/Policy",
        "True",
        "Applied",
        "by policy controller",
    );
    let h = HubGateway {
        generation: 4,
        previous: vec![],
        foreign: vec![mine.clone()],
    };
    let agg = run(&h, &[fresh("a", &s)]);
    assert_eq!(find(&agg, "example.com/Policy"), &mine);
    assert!(own(&agg).message.contains("1 condition (example.com/Policy) left out: another writer sets this type on the hub Gateway"));

    // from_existing: reported and own types are the hub's, the rest foreign.
    let existing = vec![
        cond("Accepted", "False", "X", ""),
        cond(OWN_CONDITION, "True", "Aggregated", ""),
        cond("example.com/Other", "True", "Y", ""),
        cond("NoLongerReported", "False", REASON_NOT_TRUE_IN_SOME, ""),
    ];
    let h = HubGateway::from_existing(2, &existing, &[fresh("a", &s)]);
    assert_eq!(h.previous.len(), 3);
    assert_eq!(h.foreign, [existing[2].clone()]);
}

#[test]
fn no_clusters() {
    let h = HubGateway {
        generation: 2,
        previous: vec![],
        foreign: vec![cond("example.com/Policy", "True", "Applied", "")],
    };
    let agg = run(&h, &[]);
    let o = own(&agg);
    assert_eq!(
        (o.status.as_str(), o.reason.as_str(), o.message.as_str()),
        ("False", "NoClusters", "No cluster reports this Gateway")
    );
    assert_eq!(conditions(&agg).len(), 2);
    assert!(address_values(&agg).is_empty() && listener_names(&agg).is_empty());
}

#[test]
fn duplicate_cluster_is_an_error() {
    let s = GatewayStatus::default();
    let err = aggregate(
        &hub(1),
        &[fresh("a", &s), fresh("b", &s), fresh("a", &s)],
        &Options::default(),
        now(),
    )
    .unwrap_err();
    assert_eq!(err, AggregateError::DuplicateCluster("a".into()));
    assert_eq!(
        err.to_string(),
        "cluster \"a\" reported twice for the same Gateway"
    );
}

#[test]
fn order_of_reports_does_not_matter() {
    let statuses: Vec<GatewayStatus> = (0..5)
        .map(|i| {
            status(
                vec![cond(
                    "Ready",
                    if i % 2 == 0 { "True" } else { "False" },
                    "R",
                    &format!("m{i}"),
                )],
                vec![ip(&format!("10.0.0.{i}"))],
                vec![listener("l", i, vec![])],
            )
        })
        .collect();
    let names = ["e", "c", "a", "d", "b"];
    let mut reports: Vec<_> = names
        .iter()
        .zip(&statuses)
        .map(|(n, s)| fresh(n, s))
        .collect();
    let one = serde_json::to_string(&run(&hub(1), &reports).status).unwrap();
    reports.reverse();
    let two = serde_json::to_string(&run(&hub(1), &reports).status).unwrap();
    reports.swap(0, 3);
    let three = serde_json::to_string(&run(&hub(1), &reports).status).unwrap();
    assert_eq!(one, two);
    assert_eq!(one, three);
}

// ---- expected clusters (spec section 4, "Expected clusters") --------------

fn expect(clusters: &[(&str, bool)]) -> Expectation {
    Expectation::Clusters(
        clusters
            .iter()
            .map(|(name, known)| ExpectedCluster {
                name: (*name).to_owned(),
                known: *known,
            })
            .collect(),
    )
}

fn run_expected(reports: &[ClusterReport<'_>], expectation: &Expectation) -> Aggregation {
    aggregate_expected(
        &hub(1),
        reports,
        Some(expectation),
        &Options::default(),
        now(),
    )
    .unwrap()
}

/// Each expected cluster that does not report counts as not True for every
/// aggregated type, in cluster name order with the reporting clusters'
/// fragments; the hub's own condition counts N of M and names them.
#[test]
fn expected_clusters_that_do_not_report_are_named() {
    let ok = status(
        vec![
            cond("Accepted", "True", "Accepted", ""),
            cond("LoadBalancerReady", "True", "Ready", ""),
        ],
        vec![ip("10.0.0.1")],
        vec![],
    );
    let bad = status(
        vec![
            cond("Accepted", "True", "Accepted", ""),
            cond("LoadBalancerReady", "False", "NoIP", "no address yet"),
        ],
        vec![],
        vec![],
    );
    struct Case {
        name: &'static str,
        expected: Vec<(&'static str, bool)>,
        want_lb: (&'static str, &'static str),
        want_accepted: (&'static str, &'static str),
        want_own: &'static str,
    }
    let cases = [
        Case {
            name: "all expected report",
            expected: vec![("east", true), ("west", true)],
            want_lb: ("False", "west no address yet"),
            want_accepted: ("True", "Accepted is True in all 2 clusters"),
            want_own: "Aggregated the status of 2 of 2 expected clusters",
        },
        Case {
            name: "one never reported",
            expected: vec![("west", true), ("north", false), ("east", true)],
            want_lb: ("False", "north never reported; west no address yet"),
            want_accepted: ("False", "north never reported"),
            want_own: "Aggregated the status of 2 of 3 expected clusters; north never reported",
        },
        Case {
            name: "connected, Gateway absent, and never reported",
            expected: vec![("a", true), ("east", true), ("z", false), ("west", true)],
            want_lb: (
                "False",
                "a does not report this Gateway; west no address yet; z never reported",
            ),
            want_accepted: ("False", "a does not report this Gateway; z never reported"),
            want_own: "Aggregated the status of 2 of 4 expected clusters; a does not report this Gateway; z never reported",
        },
        Case {
            name: "a reporting cluster not expected is aggregated as before",
            expected: vec![("east", true), ("east", true)],
            want_lb: ("False", "west no address yet"),
            want_accepted: ("True", "Accepted is True in all 2 clusters"),
            want_own: "Aggregated the status of 1 of 1 expected cluster",
        },
        Case {
            name: "nothing expected",
            expected: vec![],
            want_lb: ("False", "west no address yet"),
            want_accepted: ("True", "Accepted is True in all 2 clusters"),
            want_own: "Aggregated the status of 0 of 0 expected clusters",
        },
    ];
    for c in cases {
        let reports = [fresh("west", &bad), fresh("east", &ok)];
        let agg = run_expected(&reports, &expect(&c.expected));
        let lb = find(&agg, "LoadBalancerReady");
        assert_eq!(
            (lb.status.as_str(), lb.message.as_str()),
            c.want_lb,
            "{}",
            c.name
        );
        let acc = find(&agg, "Accepted");
        assert_eq!(
            (acc.status.as_str(), acc.message.as_str()),
            c.want_accepted,
            "{}",
            c.name
        );
        if c.want_accepted.0 == "False" {
            assert_eq!(acc.reason, "NotTrueInSomeClusters", "{}", c.name);
        }
        let o = own(&agg);
        assert_eq!(
            (o.status.as_str(), o.reason.as_str(), o.message.as_str()),
            ("True", "Aggregated", c.want_own),
            "{}",
            c.name
        );
        assert!(agg.omissions.is_empty(), "{}", c.name);
    }
}

/// A stale expected cluster keeps its stale fragment; no cluster reporting
/// names the missing ones after NoClusters; an unreadable expectation is a
/// validation failure naming the problem.
#[test]
fn expected_clusters_stale_none_reporting_and_invalid() {
    let ok = status(vec![cond("Ready", "True", "Ready", "")], vec![], vec![]);
    let stale = ClusterReport {
        cluster: "east",
        status: compact(&ok),
        freshness: Freshness::Stale {
            last_report: ts("2025-05-01T11:58:59Z"),
        },
    };
    let agg = run_expected(&[stale], &expect(&[("east", true), ("north", false)]));
    assert_eq!(
        find(&agg, "Ready").message,
        "east status is stale: no report since 2025-05-01T11:58:59Z; north never reported"
    );

    let agg = run_expected(&[], &expect(&[("north", false), ("east", true)]));
    let o = own(&agg);
    assert_eq!(
        (o.status.as_str(), o.reason.as_str(), o.message.as_str()),
        (
            "False",
            "NoClusters",
            "No cluster reports this Gateway; east does not report this Gateway; north never reported"
        )
    );

    let why = "annotation gwhub.io/expected-clusters: label selector \"a in\": bad".to_owned();
    let agg = run_expected(&[fresh("east", &ok)], &Expectation::Invalid(why.clone()));
    let o = own(&agg);
    assert_eq!(
        (o.status.as_str(), o.reason.as_str(), o.message.as_str()),
        ("False", "ValidationFailed", why.as_str())
    );
    assert_eq!(find(&agg, "Ready").status, "True");
}

/// Without an expectation the output is exactly `aggregate`'s.
#[test]
fn no_expectation_is_plain_aggregate() {
    let ok = status(
        vec![cond("Ready", "True", "Ready", "")],
        vec![ip("10.0.0.1")],
        vec![],
    );
    let reports = [fresh("b", &ok), fresh("a", &ok)];
    let plain = run(&hub(1), &reports);
    let none = aggregate_expected(&hub(1), &reports, None, &Options::default(), now()).unwrap();
    assert_eq!(plain, none);
}
