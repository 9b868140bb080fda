//! Property tests of the causes view: every not-ready entry is counted in
//! exactly one group, the groups do not depend on the input order, and a
//! message normalises the same whatever its numbers.

use std::collections::BTreeSet;

use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_hub_rules::aggregate::{ClusterReport, Freshness, GatewayKey, ReportedStatus};
use gwhub_hub_rules::causes::{ClusterFacts, Limits, Liveness, group, normalise};
use gwhub_model::Condition;
use proptest::prelude::*;

fn condition() -> impl Strategy<Value = Condition> {
    (
        prop_oneof![
            Just("Accepted"),
            Just("Programmed"),
            Just("LoadBalancerReady")
        ],
        prop_oneof![3 => Just("True"), 2 => Just("False"), 1 => Just("Unknown")],
        prop_oneof![
            Just("Pending"),
            Just("SyncLoadBalancerFailed"),
            Just("NotTrueInSomeClusters"),
            Just("")
        ],
        prop_oneof![
            Just("quota exceeded".to_owned()),
            "address 10\\.[0-9]{1,3}\\.0\\.1 lost",
            "[ -~]{0,20}",
        ],
    )
        .prop_map(|(t, s, r, m)| Condition {
            type_: t.to_owned(),
            status: s.to_owned(),
            reason: r.to_owned(),
            message: m,
            observed_generation: Some(1),
            last_transition_time: gwhub_model::time::k8s_time(jiff::Timestamp::UNIX_EPOCH),
        })
}

#[derive(Clone, Debug)]
struct Report {
    gateway: usize,
    cluster: usize,
    stale: bool,
    status: GatewayStatus,
}

fn report() -> impl Strategy<Value = Report> {
    (
        0usize..4,
        0usize..6,
        prop::bool::weighted(0.2),
        prop::option::of(prop::collection::vec(condition(), 0..4)),
    )
        .prop_map(|(gateway, cluster, stale, conditions)| Report {
            gateway,
            cluster,
            stale,
            status: GatewayStatus {
                conditions,
                ..GatewayStatus::default()
            },
        })
}

fn liveness() -> impl Strategy<Value = Liveness> {
    prop_oneof![
        Just(Liveness::Fresh),
        Just(Liveness::Stale),
        Just(Liveness::NeverReported)
    ]
}

const NAMES: [&str; 8] = ["east", "west", "central", "c-1", "c-2", "c-10", "x", "y"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_entry_is_counted_once_and_order_does_not_matter(
        reports in prop::collection::vec(report(), 0..30),
        facts in prop::collection::vec((0usize..8, liveness()), 0..8),
        hub in prop::collection::vec(prop::collection::vec(condition(), 0..3), 4),
        seed in any::<u64>(),
    ) {
        let keys: Vec<GatewayKey> =
            (0..4).map(|g| GatewayKey::new("ns", format!("gw-{g}"))).collect();
        // One report per (cluster, Gateway), as the fleet holds them.
        let mut taken = BTreeSet::new();
        let reports: Vec<Report> = reports
            .into_iter()
            .filter(|r| taken.insert((r.cluster, r.gateway)))
            .collect();
        let stale = Freshness::Stale { last_report: jiff::Timestamp::UNIX_EPOCH };
        let input: Vec<(&GatewayKey, ClusterReport<'_>)> = reports
            .iter()
            .map(|r| {
                (
                    &keys[r.gateway],
                    ClusterReport {
                        cluster: NAMES[r.cluster],
                        status: Box::leak(Box::new(ReportedStatus::from(&r.status))),
                        freshness: if r.stale { stale } else { Freshness::Fresh },
                    },
                )
            })
            .collect();
        let aggregated_status: Vec<GatewayStatus> = hub
            .iter()
            .map(|c| GatewayStatus { conditions: Some(c.clone()), ..GatewayStatus::default() })
            .collect();
        let aggregated: Vec<(&GatewayKey, &GatewayStatus)> =
            keys.iter().zip(&aggregated_status).collect();
        let mut named = BTreeSet::new();
        let clusters: Vec<ClusterFacts<'_>> = facts
            .iter()
            .filter(|(c, _)| named.insert(*c))
            .map(|&(c, liveness)| ClusterFacts { name: NAMES[c], liveness })
            .collect();

        // The not-ready (cluster, Gateway, type) entries, counted plainly.
        let mut want = BTreeSet::new();
        for r in &reports {
            let conditions = r.status.conditions.clone().unwrap_or_default();
            if r.stale || conditions.is_empty() {
                want.insert((r.cluster, r.gateway, String::new()));
                continue;
            }
            for c in conditions.iter().filter(|c| c.status != "True") {
                want.insert((r.cluster, r.gateway, c.type_.clone()));
            }
        }

        // And the hub's own: not True for a reason the clusters do not explain.
        for (g, conditions) in hub.iter().enumerate() {
            for c in conditions
                .iter()
                .filter(|c| c.status != "True" && c.reason != "NotTrueInSomeClusters")
            {
                want.insert((usize::MAX, g, c.type_.clone()));
            }
        }

        let all = Limits { groups: 1000, clusters: 1000, gateways: 1000 };
        let causes = group(&clusters, &input, &aggregated, all);
        prop_assert_eq!(causes.entries, want.len());
        prop_assert_eq!(causes.groups.iter().map(|g| g.entries).sum::<usize>(), want.len());
        for g in &causes.groups {
            prop_assert_eq!(g.clusters.len(), g.cluster_count);
            prop_assert!(g.cluster_count > 0 || g.gateway_count > 0);
            prop_assert!(g.gateway_count <= g.entries);
        }
        let affected: BTreeSet<&str> = causes
            .groups
            .iter()
            .flat_map(|g| g.clusters.iter().map(String::as_str))
            .collect();
        prop_assert_eq!(affected.len(), causes.affected_clusters);
        // Largest first.
        for w in causes.groups.windows(2) {
            prop_assert!(w[0].cluster_count >= w[1].cluster_count);
        }

        // Shuffled input, same answer.
        let mut shuffled = input.clone();
        let mut s = seed;
        for i in (1..shuffled.len()).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            shuffled.swap(i, (s >> 33) as usize % (i + 1));
        }
        let mut rev_clusters = clusters.clone();
        rev_clusters.reverse();
        let mut rev_aggregated = aggregated.clone();
        rev_aggregated.reverse();
        prop_assert_eq!(group(&rev_clusters, &shuffled, &rev_aggregated, all), causes.clone());

        // Capped: the same counts, fewer names.
        let small = group(&clusters, &input, &aggregated, Limits { groups: 2, clusters: 1, gateways: 1 });
        prop_assert_eq!(small.entries, causes.entries);
        prop_assert_eq!(small.groups.len() + small.more_groups, causes.groups.len());
        for (a, b) in small.groups.iter().zip(&causes.groups) {
            prop_assert_eq!(a.cluster_count, b.cluster_count);
            prop_assert_eq!(a.clusters.len() + a.more_clusters, b.cluster_count);
            prop_assert_eq!(a.gateways.len() + a.more_gateways, b.gateway_count);
        }
    }

    /// The numbers, addresses and the cluster's own name in a message do
    /// not split a cause.
    #[test]
    fn a_message_normalises_the_same_whatever_its_numbers(
        a in 0u32..100_000, b in 0u32..100_000,
        ip1 in (0u8..=255, 0u8..=255), ip2 in (0u8..=255, 0u8..=255),
        c1 in "[a-z]{3,8}(-[a-z0-9]{1,4})?", c2 in "[a-z]{3,8}(-[a-z0-9]{1,4})?",
    ) {
        let m = |n: u32, ip: (u8, u8), c: &str| format!(
            "Service ns/{c}-router: address 10.{}.{}.7 lost after {n} retries ({c}): Limit: {n}.0",
            ip.0, ip.1
        );
        prop_assert_eq!(normalise(&m(a, ip1, &c1), &c1), normalise(&m(b, ip2, &c2), &c2));
    }

    /// Normalising is idempotent and never panics on any text.
    #[test]
    fn normalising_is_idempotent(m in "\\PC{0,60}", c in "[a-z]{0,5}") {
        prop_assume!(!["n", "ip", "id", "name", "cluster"].contains(&c.as_str()));
        let once = normalise(&m, &c);
        prop_assert_eq!(normalise(&once, &c), once.clone());
    }
}
