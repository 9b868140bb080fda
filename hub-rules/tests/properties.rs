//! Property tests over random fleets: the output always passes the CRD
//! checker, does not depend on input order, and accounts for every entry.

mod support;

use gateway_api::apis::standard::gateways::{
    GatewayStatus, GatewayStatusAddresses, GatewayStatusListeners,
    GatewayStatusListenersSupportedKinds,
};
use gwhub_hub_rules::aggregate::*;
use gwhub_model::Condition;
use proptest::prelude::*;
use support::{now, ts};

fn cluster_name() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-z][a-z0-9-]{0,8}[a-z0-9]",
        1 => "cluster_[0-9]{1,3}",
        1 => "[A-Z]{2,6}",
        1 => "[a-z]{1,3}\\.[a-z]{1,3}",
        1 => "[a-z]{1,3}/[a-z]{1,3}",
        1 => "[a-z]{60,70}",
        1 => Just(String::new()),
    ]
}

fn text(max: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[ -~]{0,40}",
        1 => (0..max).prop_map(|n| "m".repeat(n)),
    ]
}

fn condition() -> impl Strategy<Value = Condition> {
    let type_ = prop_oneof![
        Just("Accepted".to_owned()),
        Just("Programmed".to_owned()),
        Just("LoadBalancerReady".to_owned()),
        Just("example.com/Custom".to_owned()),
        "[A-Z][a-zA-Z]{0,8}",
        Just("bad type".to_owned()),
        Just("x".repeat(317)),
    ];
    let status = prop_oneof![
        4 => Just("True"),
        2 => Just("False"),
        1 => Just("Unknown"),
        1 => Just("Maybe"),
    ];
    let reason = prop_oneof![4 => "[A-Z][a-zA-Z]{0,10}", 1 => Just("1bad".to_owned()), 1 => Just(String::new())];
    let generation =
        prop_oneof![4 => (0i64..10).prop_map(Some), 1 => Just(None), 1 => Just(Some(-1))];
    (
        type_,
        status,
        reason,
        text(40_000),
        generation,
        0i64..2_000_000_000,
    )
        .prop_map(|(t, s, r, m, g, secs)| Condition {
            type_: t,
            status: s.to_owned(),
            reason: r,
            message: m,
            observed_generation: g,
            last_transition_time: gwhub_model::time::k8s_time(
                jiff::Timestamp::from_second(secs).unwrap(),
            ),
        })
}

fn address() -> impl Strategy<Value = GatewayStatusAddresses> {
    let type_ = prop_oneof![
        Just(None),
        Just(Some("IPAddress".to_owned())),
        Just(Some("Hostname".to_owned())),
        Just(Some("NamedAddress".to_owned())),
        Just(Some("example.com/Custom".to_owned())),
    ];
    let value = prop_oneof![
        6 => "10\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}",
        2 => "[a-z]{1,10}\\.example\\.com",
        1 => (240usize..260).prop_map(|n| "h".repeat(n)),
        1 => Just(String::new()),
    ];
    (type_, value).prop_map(|(t, v)| GatewayStatusAddresses {
        r#type: t,
        value: v,
    })
}

fn listener() -> impl Strategy<Value = GatewayStatusListeners> {
    let name = prop_oneof![
        6 => "[a-z][a-z0-9-]{0,6}[a-z0-9]",
        1 => Just("Bad_Name".to_owned()),
        1 => (180usize..260).prop_map(|n| "l".repeat(n)),
        1 => Just("http".to_owned()),
    ];
    let kind = (
        prop_oneof![
            Just(None),
            Just(Some("gateway.networking.k8s.io".to_owned())),
            Just(Some("Bad_Group".to_owned())),
            Just(Some(String::new()))
        ],
        prop_oneof![
            "[A-Z][a-zA-Z]{0,10}",
            Just("9Bad".to_owned()),
            Just("K".repeat(64))
        ],
    )
        .prop_map(|(group, kind)| GatewayStatusListenersSupportedKinds { group, kind });
    (
        name,
        any::<i32>(),
        prop::collection::vec(condition(), 0..10),
        prop::option::of(prop::collection::vec(kind, 0..10)),
    )
        .prop_map(|(name, attached_routes, conditions, supported_kinds)| {
            GatewayStatusListeners {
                attached_routes,
                conditions,
                name,
                supported_kinds,
            }
        })
}

fn gateway_status() -> impl Strategy<Value = GatewayStatus> {
    (
        prop::option::of(prop::collection::vec(condition(), 0..6)),
        prop::option::of(prop::collection::vec(address(), 0..4)),
        prop::option::of(prop::collection::vec(listener(), 0..4)),
    )
        .prop_map(|(conditions, addresses, listeners)| GatewayStatus {
            addresses,
            attached_listener_sets: None,
            conditions,
            listeners,
        })
}

#[derive(Debug, Clone)]
struct Member {
    name: String,
    status: GatewayStatus,
    stale: bool,
}

fn fleet() -> impl Strategy<Value = Vec<Member>> {
    prop::collection::vec(
        (cluster_name(), gateway_status(), prop::bool::weighted(0.1)),
        1..200,
    )
    .prop_map(|v| {
        let mut seen = std::collections::HashSet::new();
        v.into_iter()
            .filter(|(n, _, _)| seen.insert(n.clone()))
            .map(|(name, status, stale)| Member {
                name,
                status,
                stale,
            })
            .collect()
    })
}

fn reports(members: &[Member]) -> Vec<ClusterReport<'_>> {
    members
        .iter()
        .map(|m| ClusterReport {
            cluster: &m.name,
            status: &m.status,
            freshness: if m.stale {
                Freshness::Stale {
                    last_report: ts("2025-05-01T11:00:00Z"),
                }
            } else {
                Freshness::Fresh
            },
        })
        .collect()
}

/// Fisher-Yates with a small LCG, so the permutation comes from the seed.
fn shuffle<T>(v: &mut [T], mut seed: u64) {
    for i in (1..v.len()).rev() {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        v.swap(i, (seed >> 33) as usize % (i + 1));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn output_is_valid_deterministic_and_loses_nothing(
        members in fleet(),
        foreign in prop::collection::vec(condition(), 0..4),
        generation in 0i64..100,
        seed in any::<u64>(),
    ) {
        let hub = HubGateway { generation, previous: vec![], foreign };
        let opts = Options::default();
        let mut rs = reports(&members);
        let agg = aggregate(&hub, &rs, &opts, now()).unwrap();

        // 1. Every CRD rule.
        if let Err(e) = support::crd::check_status(&agg.status) {
            return Err(TestCaseError::fail(format!("CRD violation: {e}")));
        }

        // 2. Same output in any order.
        shuffle(&mut rs, seed);
        let again = aggregate(&hub, &rs, &opts, now()).unwrap();
        prop_assert_eq!(serde_json::to_string(&agg.status).unwrap(), serde_json::to_string(&again.status).unwrap());
        prop_assert_eq!(&agg.omissions, &again.omissions);

        // 3. Every address and listener is written or accounted for.
        let addresses = agg.status.addresses.as_deref().unwrap();
        let listeners = agg.status.listeners.as_deref().unwrap();
        for m in &members {
            let omitted = |item: Item| -> usize {
                agg.omissions.iter().filter(|o| o.cluster.as_deref() == Some(m.name.as_str()) && o.item == item).map(Omission::count).sum()
            };
            let written_a = addresses.iter().filter(|a| a.value.split_once('/').map(|(c, _)| c) == Some(m.name.as_str())).count();
            let written_l = listeners.iter().filter(|l| l.name.split_once('.').map(|(c, _)| c) == Some(m.name.as_str())).count();
            let input_a = m.status.addresses.as_ref().map_or(0, Vec::len);
            let input_l = m.status.listeners.as_ref().map_or(0, Vec::len);
            prop_assert_eq!(written_a + omitted(Item::Address), input_a, "addresses of {:?}", m.name);
            prop_assert_eq!(written_l + omitted(Item::Listener), input_l, "listeners of {:?}", m.name);
        }

        // 4. The own condition tells the truth about omissions.
        let own = agg.status.conditions.as_deref().unwrap().iter().find(|c| c.type_ == OWN_CONDITION).unwrap();
        if agg.omissions.is_empty() {
            prop_assert_eq!(own.reason.as_str(), REASON_AGGREGATED);
        } else {
            prop_assert_eq!(own.reason.as_str(), REASON_VALIDATION_FAILED);
            for o in &agg.omissions {
                if let Some(c) = &o.cluster {
                    let named = own.message.contains(&format!("cluster {c}: "))
                        || (matches!(o.rule, Rule::TooManyRoundRobin(_)) && own.message.contains("kept round-robin"))
                        || own.message.ends_with("more problems");
                    prop_assert!(named, "omission of {:?} not named", c);
                }
            }
        }

        // 5. Round-robin: a limit is only hit when the list is full, and then
        //    every cluster with a valid address keeps one if there are at
        //    most 16 such clusters.
        let by_limit = |item: Item| agg.omissions.iter().any(|o| o.item == item && matches!(o.rule, Rule::TooManyRoundRobin(_)));
        if by_limit(Item::Address) {
            prop_assert_eq!(addresses.len(), 16);
        }
        if by_limit(Item::Listener) {
            prop_assert_eq!(listeners.len(), 64);
        }
        let with_address: Vec<&str> = members.iter().map(|m| m.name.as_str()).filter(|n| {
            addresses.iter().any(|a| a.value.starts_with(&format!("{n}/")))
                || agg.omissions.iter().any(|o| o.cluster.as_deref() == Some(*n) && o.item == Item::Address && matches!(o.rule, Rule::TooManyRoundRobin(_)))
        }).collect();
        if with_address.len() <= 16 {
            for n in with_address {
                prop_assert!(addresses.iter().any(|a| a.value.starts_with(&format!("{n}/"))), "{} lost its only address", n);
            }
        }
    }
}
