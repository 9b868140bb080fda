//! Property tests over random fleets: the output always passes the CRD
//! checker, does not depend on input order, and accounts for every entry.

use crate::support;

use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_hub_rules::aggregate::*;
use proptest::prelude::*;
use support::strategies::{cluster_name, condition, gateway_status};
use support::{compact, now, ts};

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
            status: compact(&m.status),
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
