//! The incremental aggregation against the engine it replaces: random
//! sequences of changes (clusters added, changed, removed, gone stale and
//! fresh again) applied to both, the same output after every step; and
//! table tests for the rules where keeping state is easy to get wrong.

use crate::support;

use std::collections::BTreeMap;

use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_hub_rules::aggregate::*;
use gwhub_model::Condition;
use proptest::prelude::*;
use support::strategies::{cluster_name, condition, gateway_status, gateway_status_sized};
use support::{cond, ip, listener, now, status, ts};

#[derive(Clone, Debug)]
enum Op {
    Set(usize, GatewayStatus),
    Remove(usize),
    Stale(usize, i64),
    Fresh(usize),
}

fn op(names: usize) -> impl Strategy<Value = Op> {
    let status = prop_oneof![
        3 => gateway_status(),
        1 => gateway_status_sized(12, 30),
    ];
    prop_oneof![
        6 => (0..names, status).prop_map(|(i, s)| Op::Set(i, s)),
        2 => (0..names).prop_map(Op::Remove),
        1 => (0..names, 0i64..3).prop_map(|(i, h)| Op::Stale(i, h)),
        1 => (0..names).prop_map(Op::Fresh),
    ]
}

/// The reference: every cluster's report, as the engine takes them.
#[derive(Default)]
struct Model(BTreeMap<String, (GatewayStatus, Freshness)>);

impl Model {
    fn reports(&self) -> Vec<ClusterReport<'_>> {
        self.0
            .iter()
            .map(|(c, (s, f))| ClusterReport {
                cluster: c,
                status: support::compact(s),
                freshness: *f,
            })
            .collect()
    }
}

fn stale(hours: i64) -> Freshness {
    Freshness::Stale {
        last_report: ts("2025-05-01T11:00:00Z") - jiff::SignedDuration::from_hours(hours),
    }
}

fn apply(op: &Op, names: &[String], model: &mut Model, inc: &mut Incremental) {
    match op {
        Op::Set(i, s) => {
            let name = &names[*i];
            let freshness = model.0.get(name).map_or(Freshness::Fresh, |(_, f)| *f);
            model.0.insert(name.clone(), (s.clone(), freshness));
            inc.set(name, ReportedStatus::from(s), freshness);
        }
        Op::Remove(i) => {
            model.0.remove(&names[*i]);
            inc.remove(&names[*i]);
        }
        Op::Stale(i, h) => {
            if let Some((_, f)) = model.0.get_mut(&names[*i]) {
                *f = stale(*h);
            }
            inc.set_freshness(&names[*i], stale(*h));
        }
        Op::Fresh(i) => {
            if let Some((_, f)) = model.0.get_mut(&names[*i]) {
                *f = Freshness::Fresh;
            }
            inc.set_freshness(&names[*i], Freshness::Fresh);
        }
    }
}

fn expectation(names: Vec<String>) -> impl Strategy<Value = Option<Expectation>> {
    let clusters = prop::collection::vec(
        (
            prop_oneof![
                3 => (0..names.len()).prop_map(move |i| names[i].clone()),
                1 => "[a-z]{1,4}",
            ],
            any::<bool>(),
        ),
        0..8,
    )
    .prop_map(|v| {
        Some(Expectation::Clusters(
            v.into_iter()
                .map(|(name, known)| ExpectedCluster { name, known })
                .collect(),
        ))
    });
    prop_oneof![
        3 => Just(None),
        2 => clusters,
        1 => Just(Some(Expectation::Invalid("label selector \"a=\" is not valid".into()))),
    ]
}

/// Cluster names, the changes, the hub Gateway's other writers' and
/// previous conditions, the expectation, the draft hostname type.
type Case = (
    Vec<String>,
    Vec<Op>,
    Vec<Condition>,
    Vec<Condition>,
    Option<Expectation>,
    bool,
);

fn case() -> impl Strategy<Value = Case> {
    prop::collection::btree_set(cluster_name(), 1..30).prop_flat_map(|names| {
        let names: Vec<String> = names.into_iter().collect();
        let n = names.len();
        (
            Just(names.clone()),
            prop::collection::vec(op(n), 1..60),
            prop::collection::vec(condition(), 0..4),
            prop::collection::vec(condition(), 0..3),
            expectation(names.clone()),
            any::<bool>(),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn incremental_matches_the_engine(
        (names, ops, foreign, previous, expectation, draft) in case(),
        generation in 0i64..5,
    ) {
        let options = if draft {
            Options::with_hostname_address_type(HOSTNAME_ADDRESS_TYPE_DRAFT).unwrap()
        } else {
            Options::default()
        };
        let hub = HubGateway { generation, previous, foreign };
        let mut model = Model::default();
        let mut inc = Incremental::new(options.clone());
        // The version, the hub Gateway's omissions and every omission
        // after the last step.
        type Last = (u64, Vec<Omission>, Vec<Omission>);
        let mut last: Option<Last> = None;
        for (step, op) in ops.iter().enumerate() {
            apply(op, &names, &mut model, &mut inc);
            let reports = model.reports();
            let want = aggregate_expected(&hub, &reports, expectation.as_ref(), &options, now()).unwrap();
            let got = inc.aggregate(&hub, expectation.as_ref(), now());
            prop_assert_eq!(&got.status, &want.status, "status after step {} ({:?})", step, op);
            prop_assert_eq!(&got.omissions, &want.omissions, "omissions after step {}", step);
            let lean = inc.aggregate_status(&hub, expectation.as_ref(), now());
            prop_assert_eq!(&lean.status, &want.status);
            prop_assert!(lean.omissions.is_empty());
            prop_assert_eq!(&inc.omissions(&hub, now()), &want.omissions);
            // The parts a reader keeps: the status, the hub Gateway's
            // omissions and the version, from which every omission follows.
            let parts = inc.aggregate_parts(&hub, expectation.as_ref(), now());
            prop_assert_eq!(&parts.aggregation.status, &want.status);
            prop_assert!(parts.aggregation.omissions.is_empty());
            prop_assert_eq!(&inc.omissions_with(&parts.hub_omissions), &want.omissions);
            // The same version and hub Gateway's omissions: the same
            // omissions.
            let version = inc.omissions_version();
            if let Some((v, h, o)) = &last && *v == version && *h == parts.hub_omissions {
                prop_assert_eq!(o, &want.omissions, "version kept after step {} ({:?})", step, op);
            }
            last = Some((version, parts.hub_omissions, want.omissions.clone()));
            prop_assert_eq!(inc.len(), reports.len());
            // The hub's split of its existing conditions agrees too.
            let existing: Vec<Condition> = hub.previous.iter().chain(&hub.foreign).cloned().collect();
            prop_assert_eq!(
                HubGateway::from_existing_with(generation, &existing, |t| inc.reports_type(t)),
                HubGateway::from_existing(generation, &existing, &reports)
            );
        }
    }
}

fn check(inc: &Incremental, model: &Model) -> Aggregation {
    let hub = support::hub(1);
    let want = aggregate(&hub, &model.reports(), &Options::default(), now()).unwrap();
    let got = inc.aggregate(&hub, None, now());
    assert_eq!(got.status, want.status);
    assert_eq!(got.omissions, want.omissions);
    got
}

fn set(model: &mut Model, inc: &mut Incremental, cluster: &str, s: GatewayStatus) {
    model
        .0
        .insert(cluster.to_owned(), (s.clone(), Freshness::Fresh));
    inc.set(cluster, ReportedStatus::from(s), Freshness::Fresh);
}

fn message(agg: &Aggregation, type_: &str) -> String {
    support::find(agg, type_).message.clone()
}

/// A type one cluster starts reporting is "not reported" by every other
/// cluster; it goes when its last reporter stops reporting it, also when
/// that reporter changes rather than leaves.
#[test]
fn a_new_type_names_every_other_cluster_and_goes_with_its_last_reporter() {
    let (mut model, mut inc) = (Model::default(), Incremental::new(Options::default()));
    let accepted = || status(vec![cond("Accepted", "True", "A", "")], vec![], vec![]);
    for c in ["a", "b", "c"] {
        set(&mut model, &mut inc, c, accepted());
    }
    let with_dns = status(
        vec![
            cond("Accepted", "True", "A", ""),
            cond("DNSReady", "True", "D", ""),
        ],
        vec![],
        vec![],
    );
    set(&mut model, &mut inc, "b", with_dns.clone());
    let agg = check(&inc, &model);
    assert_eq!(
        message(&agg, "DNSReady"),
        "a DNSReady not reported; c DNSReady not reported"
    );
    assert!(inc.reports_type("DNSReady"));
    // Another reporter, then the first one changes back: still reported.
    set(&mut model, &mut inc, "c", with_dns);
    set(&mut model, &mut inc, "b", accepted());
    let agg = check(&inc, &model);
    assert_eq!(
        message(&agg, "DNSReady"),
        "a DNSReady not reported; b DNSReady not reported"
    );
    // The last reporter leaves: the type goes.
    model.0.remove("c");
    inc.remove("c");
    let agg = check(&inc, &model);
    assert!(!inc.reports_type("DNSReady"));
    assert!(
        agg.status
            .conditions
            .unwrap()
            .iter()
            .all(|c| c.type_ != "DNSReady")
    );
}

/// Round-robin keeps every cluster's first address while there is room;
/// when a cluster keeping one leaves, the next one in name order keeps
/// its first instead, and second addresses give way to first ones.
#[test]
fn round_robin_follows_clusters_coming_and_going() {
    let (mut model, mut inc) = (Model::default(), Incremental::new(Options::default()));
    let two = |i: usize| {
        status(
            vec![],
            vec![ip(&format!("10.0.0.{i}")), ip(&format!("10.0.1.{i}"))],
            vec![],
        )
    };
    for i in 0..10 {
        set(&mut model, &mut inc, &format!("c{i:02}"), two(i));
    }
    let agg = check(&inc, &model);
    assert_eq!(agg.status.addresses.as_ref().unwrap().len(), 16);
    // Ten firsts, then six seconds (c00..c05).
    let values = support::address_values(&agg);
    assert!(values.contains(&"c05/10.0.1.5".to_owned()));
    assert!(!values.contains(&"c06/10.0.1.6".to_owned()));
    for i in 10..20 {
        set(&mut model, &mut inc, &format!("c{i:02}"), two(i));
    }
    let agg = check(&inc, &model);
    let values = support::address_values(&agg);
    assert!(values.iter().all(|v| v.contains("/10.0.0.")), "{values:?}");
    assert!(values.contains(&"c15/10.0.0.15".to_owned()));
    assert!(!values.contains(&"c16/10.0.0.16".to_owned()));
    model.0.remove("c03");
    inc.remove("c03");
    let agg = check(&inc, &model);
    assert!(support::address_values(&agg).contains(&"c16/10.0.0.16".to_owned()));
    let own = &support::own(&agg).message;
    assert!(own.contains("22 addresses left out: more than 16"), "{own}");
}

/// A stale cluster is not True for every type, whatever it reported, and
/// fresh again it counts its report again; listeners past 64 are counted.
#[test]
fn staleness_comes_and_goes_and_listeners_are_capped() {
    let (mut model, mut inc) = (Model::default(), Incremental::new(Options::default()));
    let many = |n: usize| {
        let ls = (0..n).map(|j| {
            listener(
                &format!("l{j}"),
                1,
                vec![cond("Programmed", "True", "P", "")],
            )
        });
        status(
            vec![cond("Accepted", "True", "A", "")],
            vec![],
            ls.collect(),
        )
    };
    for i in 0..10 {
        set(&mut model, &mut inc, &format!("c{i}"), many(8));
    }
    let at = ts("2025-05-01T10:00:00Z");
    model.0.get_mut("c4").unwrap().1 = Freshness::Stale { last_report: at };
    inc.set_freshness("c4", Freshness::Stale { last_report: at });
    let agg = check(&inc, &model);
    assert_eq!(
        message(&agg, "Accepted"),
        "c4 status is stale: no report since 2025-05-01T10:00:00Z"
    );
    assert_eq!(agg.status.listeners.as_ref().unwrap().len(), 64);
    model.0.get_mut("c4").unwrap().1 = Freshness::Fresh;
    inc.set_freshness("c4", Freshness::Fresh);
    let agg = check(&inc, &model);
    assert_eq!(
        message(&agg, "Accepted"),
        "Accepted is True in all 10 clusters"
    );
}

/// Thousands of not-True clusters: the message shows what fits and counts
/// the rest, as the engine does.
#[test]
fn long_messages_are_capped_and_counted() {
    let (mut model, mut inc) = (Model::default(), Incremental::new(Options::default()));
    for i in 0..3000 {
        let s = status(
            vec![cond(
                "Programmed",
                if i % 3 == 0 { "True" } else { "False" },
                "Pending",
                "",
            )],
            vec![],
            vec![],
        );
        set(&mut model, &mut inc, &format!("cluster-{i:05}"), s);
    }
    let agg = check(&inc, &model);
    let m = message(&agg, "Programmed");
    assert!(
        m.starts_with("cluster-00001 Programmed is False (Pending); cluster-00002"),
        "{}",
        &m[..80]
    );
    assert!(m.ends_with("more clusters"), "{}", &m[m.len() - 40..]);
}

/// An empty Gateway (every cluster removed) says NoClusters, as the
/// engine does with no reports.
#[test]
fn removing_every_cluster_leaves_no_clusters() {
    let (mut model, mut inc) = (Model::default(), Incremental::new(Options::default()));
    set(
        &mut model,
        &mut inc,
        "a",
        status(
            vec![cond("Accepted", "True", "A", "")],
            vec![ip("10.0.0.1")],
            vec![],
        ),
    );
    model.0.clear();
    inc.remove("a");
    assert!(inc.is_empty());
    let agg = check(&inc, &model);
    assert_eq!(support::own(&agg).reason, REASON_NO_CLUSTERS);
}

#[derive(Clone, Debug)]
enum FleetOp {
    Upsert(usize, usize, GatewayStatus),
    Delete(usize, usize),
    Snapshot(usize, Vec<(usize, GatewayStatus)>),
    Deregister(usize),
    Stale(usize),
    Fresh(usize),
}

fn fleet_op() -> impl Strategy<Value = FleetOp> {
    let (c, g) = (0..6usize, 0..3usize);
    prop_oneof![
        5 => (c.clone(), g.clone(), gateway_status()).prop_map(|(c, g, s)| FleetOp::Upsert(c, g, s)),
        2 => (c.clone(), g.clone()).prop_map(|(c, g)| FleetOp::Delete(c, g)),
        1 => (c.clone(), prop::collection::vec((g, gateway_status()), 0..3))
            .prop_map(|(c, v)| FleetOp::Snapshot(c, v)),
        1 => c.clone().prop_map(FleetOp::Deregister),
        1 => c.clone().prop_map(FleetOp::Stale),
        1 => c.prop_map(FleetOp::Fresh),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// A fleet keeping incremental aggregates keeps every Gateway's equal
    /// to the engine over the fleet's reports, whatever the changes.
    #[test]
    fn the_fleet_keeps_each_incremental_aggregate_current(ops in prop::collection::vec(fleet_op(), 1..40)) {
        let options = Options::default();
        let mut fleet = Fleet::with_incremental(options.clone());
        let cluster = |i: usize| format!("c{i}");
        let key = |i: usize| GatewayKey::new("ns", format!("g{i}"));
        let hub = support::hub(2);
        for op in &ops {
            match op {
                FleetOp::Upsert(c, g, s) => { fleet.upsert(&cluster(*c), key(*g), s.clone()); }
                FleetOp::Delete(c, g) => { fleet.delete(&cluster(*c), &key(*g)); }
                FleetOp::Snapshot(c, v) => {
                    fleet.replace_snapshot(&cluster(*c), v.iter().map(|(g, s)| (key(*g), s.clone())));
                }
                FleetOp::Deregister(c) => { fleet.deregister(&cluster(*c)); }
                FleetOp::Stale(c) => { fleet.mark_stale(&cluster(*c), ts("2025-05-01T11:00:00Z")); }
                FleetOp::Fresh(c) => { fleet.mark_fresh(&cluster(*c)); }
            }
            for g in 0..3 {
                let want = fleet.aggregate(&key(g), &hub, &options, now()).unwrap();
                match fleet.incremental(&key(g)) {
                    Some(inc) => {
                        let got = inc.aggregate(&hub, None, now());
                        prop_assert_eq!(&got.status, &want.status, "{:?}", op);
                        prop_assert_eq!(&got.omissions, &want.omissions);
                    }
                    None => prop_assert!(fleet.reports(&key(g)).is_empty(), "{:?}", op),
                }
            }
        }
    }
}

/// A condition flipping leaves the named omissions as they were, so a
/// reader keeping them need not list them again; an address more past the
/// limit changes them.
#[test]
fn the_omissions_version_moves_only_when_they_change() {
    let (mut model, mut inc) = (Model::default(), Incremental::new(Options::default()));
    let report = |ready: &str, addresses: usize| {
        status(
            vec![cond("Programmed", ready, "P", "")],
            (0..addresses).map(|j| ip(&format!("10.0.0.{j}"))).collect(),
            vec![],
        )
    };
    for i in 0..20 {
        set(&mut model, &mut inc, &format!("c{i:02}"), report("True", 2));
    }
    let before = check(&inc, &model).omissions;
    assert_eq!(before.len(), 20, "every cluster leaves addresses out");
    let version = inc.omissions_version();
    set(&mut model, &mut inc, "c07", report("False", 2));
    assert_eq!(check(&inc, &model).omissions, before);
    assert_eq!(inc.omissions_version(), version);
    set(&mut model, &mut inc, "c07", report("False", 3));
    assert_ne!(check(&inc, &model).omissions, before);
    assert_ne!(inc.omissions_version(), version);
}
