//! A structured fleet of cluster reports through the hub's aggregation
//! engine, checking what the property tests check: the output passes the CRD
//! checker (16 addresses, 64 listeners, 8 conditions, patterns), does not
//! depend on the order of the reports, equals what the fleet bookkeeping
//! produces, and accounts for every address and listener.
#![no_main]

mod common;

use arbitrary::Arbitrary;
use common::*;
use gateway_api::apis::standard::gateways::{
    GatewayStatus, GatewayStatusAddresses, GatewayStatusListeners,
    GatewayStatusListenersSupportedKinds,
};
use gwhub_hub_rules::aggregate::*;
use gwhub_model::Condition;
use libfuzzer_sys::fuzz_target;

const CLUSTERS: &[&str] = &[
    "east",
    "west",
    "central",
    "c1",
    "c2",
    "c3",
    "cluster_1",
    "UPPER",
    "a.b",
    "a/b",
    "",
    "x-very-long-cluster-name-that-is-longer-than-a-dns-label-allows-at-all-xx",
];
const ADDRESS_TYPES: &[&str] = &[
    "IPAddress",
    "Hostname",
    "NamedAddress",
    "example.com/Custom",
    "",
];
const ADDRESS_VALUES: &[&str] = &[
    "10.0.0.1",
    "10.0.0.2",
    "lb.example.com",
    "Bad_Host",
    "",
    "::1",
];
const LISTENER_NAMES: &[&str] = &["http", "https", "api", "Bad_Name", "a.b", ""];
const KINDS: &[&str] = &["HTTPRoute", "GRPCRoute", "9Bad", ""];
const GROUPS: &[&str] = &["gateway.networking.k8s.io", "", "Bad_Group"];

#[derive(Arbitrary, Debug)]
struct Cond {
    type_: Text,
    status: Text,
    reason: Text,
    message: Text,
    generation: Option<i8>,
    time: u32,
}

impl Cond {
    fn build(&self) -> Condition {
        Condition {
            type_: self.type_.pick(CONDITION_TYPES),
            status: self.status.pick(STATUSES),
            reason: self.reason.pick(REASONS),
            message: self.message.pick(MESSAGES),
            observed_generation: self.generation.map(i64::from),
            last_transition_time: gwhub_model::time::k8s_time(
                jiff::Timestamp::from_second(i64::from(self.time)).unwrap(),
            ),
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Listener {
    name: Text,
    attached_routes: i32,
    conditions: Vec<Cond>,
    kinds: Option<Vec<(Option<Text>, Text)>>,
}

#[derive(Arbitrary, Debug)]
struct Member {
    name: Text,
    stale: bool,
    conditions: Option<Vec<Cond>>,
    addresses: Option<Vec<(Option<Text>, Text)>>,
    listeners: Option<Vec<Listener>>,
    /// Repeat the listeners this many times (to pass 64 quickly).
    repeat: u8,
}

impl Member {
    fn status(&self) -> GatewayStatus {
        let listeners = self.listeners.as_ref().map(|ls| {
            let one: Vec<GatewayStatusListeners> = ls
                .iter()
                .map(|l| GatewayStatusListeners {
                    name: l.name.pick(LISTENER_NAMES),
                    attached_routes: l.attached_routes,
                    conditions: l.conditions.iter().take(12).map(Cond::build).collect(),
                    supported_kinds: l.kinds.as_ref().map(|ks| {
                        ks.iter()
                            .take(12)
                            .map(|(g, k)| GatewayStatusListenersSupportedKinds {
                                group: g.as_ref().map(|g| g.pick(GROUPS)),
                                kind: k.pick(KINDS),
                            })
                            .collect()
                    }),
                })
                .collect();
            let n = usize::from(self.repeat % 24) + 1;
            (0..n)
                .flat_map(|i| {
                    one.iter().map(move |l| GatewayStatusListeners {
                        name: if i == 0 {
                            l.name.clone()
                        } else {
                            format!("{}{i}", l.name)
                        },
                        ..l.clone()
                    })
                })
                .collect()
        });
        GatewayStatus {
            addresses: self.addresses.as_ref().map(|a| {
                a.iter()
                    .take(40)
                    .map(|(t, v)| GatewayStatusAddresses {
                        r#type: t.as_ref().map(|t| t.pick(ADDRESS_TYPES)),
                        value: v.pick(ADDRESS_VALUES),
                    })
                    .collect()
            }),
            attached_listener_sets: None,
            conditions: self
                .conditions
                .as_ref()
                .map(|c| c.iter().take(12).map(Cond::build).collect()),
            listeners,
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    members: Vec<Member>,
    foreign: Vec<Cond>,
    previous: Vec<Cond>,
    generation: u8,
    draft_hostname_type: bool,
    from_existing: bool,
    seed: u64,
}

fn shuffle<T>(v: &mut [T], mut seed: u64) {
    for i in (1..v.len()).rev() {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        v.swap(i, (seed >> 33) as usize % (i + 1));
    }
}

fuzz_target!(|input: Input| {
    let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
    let stale_since = jiff::Timestamp::from_second(1_799_990_000).unwrap();
    let mut members: Vec<(String, GatewayStatus, bool)> = input
        .members
        .iter()
        .take(80)
        .map(|m| (m.name.pick(CLUSTERS), m.status(), m.stale))
        .collect();
    // A cluster named twice is refused, never guessed about.
    let mut names: Vec<String> = members.iter().map(|(n, _, _)| n.clone()).collect();
    names.sort_unstable();
    let duplicate = names
        .windows(2)
        .find(|w| w[0] == w[1])
        .map(|w| w[0].clone());
    if let Some(name) = duplicate {
        let compact: Vec<ReportedStatus> =
            members.iter().map(|(_, s, _)| ReportedStatus::from(s)).collect();
        let reports: Vec<ClusterReport<'_>> = members
            .iter()
            .zip(&compact)
            .map(|((cluster, _, _), status)| ClusterReport {
                cluster,
                status,
                freshness: Freshness::Fresh,
            })
            .collect();
        let hub = HubGateway::default();
        assert_eq!(
            aggregate(&hub, &reports, &Options::default(), now),
            Err(AggregateError::DuplicateCluster(name))
        );
        let mut seen = std::collections::BTreeSet::new();
        members.retain(|(n, _, _)| seen.insert(n.clone()));
    }
    let compact: Vec<ReportedStatus> =
        members.iter().map(|(_, s, _)| ReportedStatus::from(s)).collect();
    let mut reports: Vec<ClusterReport<'_>> = members
        .iter()
        .zip(&compact)
        .map(|((name, _, stale), status)| ClusterReport {
            cluster: name,
            status,
            freshness: if *stale {
                Freshness::Stale {
                    last_report: stale_since,
                }
            } else {
                Freshness::Fresh
            },
        })
        .collect();
    let generation = i64::from(input.generation);
    let hub = if input.from_existing {
        let existing: Vec<Condition> = input
            .previous
            .iter()
            .chain(&input.foreign)
            .take(12)
            .map(Cond::build)
            .collect();
        HubGateway::from_existing(generation, &existing, &reports)
    } else {
        HubGateway {
            generation,
            previous: input.previous.iter().take(12).map(Cond::build).collect(),
            foreign: input.foreign.iter().take(12).map(Cond::build).collect(),
        }
    };
    let options = if input.draft_hostname_type {
        Options::with_hostname_address_type(HOSTNAME_ADDRESS_TYPE_DRAFT).unwrap()
    } else {
        Options::default()
    };

    let agg = aggregate(&hub, &reports, &options, now).expect("distinct clusters aggregate");

    // Every CRD rule, including the 16 / 64 / 8 limits.
    if let Err(e) = crd::check_status(&agg.status) {
        panic!("CRD violation: {e}");
    }
    let addresses = agg.status.addresses.as_deref().unwrap_or_default();
    let listeners = agg.status.listeners.as_deref().unwrap_or_default();
    assert!(addresses.len() <= 16);
    assert!(listeners.len() <= 64);
    assert!(agg.status.conditions.as_ref().is_some_and(|c| c.len() <= 8));
    assert!(listeners.iter().all(|l| l.conditions.len() <= 8));

    // Deterministic: any order, and the fleet bookkeeping, give the same.
    shuffle(&mut reports, input.seed);
    let again = aggregate(&hub, &reports, &options, now).unwrap();
    assert_eq!(agg, again, "output depends on the order of the reports");
    let key = GatewayKey::new("openshift-ingress", "gw");
    let mut fleet = Fleet::new();
    for (name, status, stale) in &members {
        fleet.upsert(name, key.clone(), status.clone());
        if *stale {
            fleet.mark_stale(name, stale_since);
        }
    }
    let via_fleet = fleet.aggregate(&key, &hub, &options, now).unwrap();
    assert_eq!(agg, via_fleet, "the fleet aggregates differently");

    // Every address and listener is written or accounted for.
    for (name, status, _) in &members {
        let omitted = |item: Item| -> usize {
            agg.omissions
                .iter()
                .filter(|o| o.cluster.as_deref() == Some(name.as_str()) && o.item == item)
                .map(Omission::count)
                .sum()
        };
        let written_a = addresses
            .iter()
            .filter(|a| a.value.split_once('/').map(|(c, _)| c) == Some(name.as_str()))
            .count();
        let written_l = listeners
            .iter()
            .filter(|l| l.name.split_once('.').map(|(c, _)| c) == Some(name.as_str()))
            .count();
        assert_eq!(
            written_a + omitted(Item::Address),
            status.addresses.as_ref().map_or(0, Vec::len),
            "addresses of {name:?}"
        );
        assert_eq!(
            written_l + omitted(Item::Listener),
            status.listeners.as_ref().map_or(0, Vec::len),
            "listeners of {name:?}"
        );
    }
});
