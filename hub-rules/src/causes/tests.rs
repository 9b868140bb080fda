use super::*;
use crate::aggregate::ReportedStatus;
use serde_json::json;

#[test]
fn messages_normalise() {
    let cases: &[(&str, &str, &str)] = &[
        ("", "east", ""),
        (
            "waiting for the load balancer",
            "east",
            "waiting for the load balancer",
        ),
        (
            "  two   spaces\tand\nlines  ",
            "east",
            "two spaces and lines",
        ),
        // The cluster's own name, as a whole word only.
        (
            "router-east-lb in east failed",
            "east",
            "router-<cluster>-lb in <cluster> failed",
        ),
        (
            "region us-east1, easterly",
            "east",
            "region us-<id>, easterly",
        ),
        ("cluster a failed", "", "cluster a failed"),
        // Numbers, IDs and addresses.
        ("Error 403: Limit: 8.0", "x", "Error <n>: Limit: <n>.<n>"),
        ("address 203.0.113.10 lost.", "x", "address <ip> lost."),
        (
            "dial 10.0.0.1:6443 and 10.0.0.0/16",
            "x",
            "dial <ip> and <ip>",
        ),
        ("peer fd00::1 down", "x", "peer <ip> down"),
        (
            "uid 123e4567-e89b-12d3-a456-426614174000 gone",
            "x",
            "uid <id> gone",
        ),
        ("lb deadbeef01 and 0x1f2e3d4c", "x", "lb <id> and <id>"),
        ("pod gateway-7d9f8b6c4-xk2lp", "x", "pod gateway-<id>-<id>"),
        (
            "i-0abc123 at 2026-11-24T00:00:00Z",
            "x",
            "i-<id> at <n>-<n>-<id>:<n>:<id>",
        ),
        // Quoted names, keeping their quotes; apostrophes are not quotes.
        (
            "Service \"router-east\" not found",
            "east",
            "Service \"<name>\" not found",
        ),
        (
            "Quota 'IN_USE_ADDRESSES' exceeded",
            "x",
            "Quota '<name>' exceeded",
        ),
        ("can't find `svc-1`", "x", "can't find `<name>`"),
        (
            "the cluster's lb isn't there",
            "x",
            "the cluster's lb isn't there",
        ),
        (
            "an \"unterminated quote 42",
            "x",
            "an \"unterminated quote <n>",
        ),
        ("empty \"\" quotes", "x", "empty \"\" quotes"),
        // The placeholder character itself cannot fake a cluster.
        ("a \u{e000} b", "x", "a \u{fffd} b"),
    ];
    for (message, cluster, want) in cases {
        assert_eq!(
            normalise(message, cluster),
            *want,
            "{message:?} in {cluster}"
        );
    }
}

fn status(conditions: &[(&str, &str, &str, &str)]) -> GatewayStatus {
    serde_json::from_value(json!({
        "conditions": conditions.iter().map(|(t, s, r, m)| json!({
            "type": t, "status": s, "reason": r, "message": m,
            "lastTransitionTime": "2026-11-24T00:00:00Z",
        })).collect::<Vec<_>>(),
    }))
    .unwrap()
}

fn quota(cluster: &str, ip: &str) -> GatewayStatus {
    status(&[
        ("Accepted", "True", "Accepted", ""),
        (
            "LoadBalancerReady",
            "False",
            "SyncLoadBalancerFailed",
            &format!(
                "Service openshift-ingress/gw-{cluster} has no address {ip}: Error 403: QUOTA_EXCEEDED - Quota 'IN_USE_ADDRESSES' exceeded. Limit: 8.0"
            ),
        ),
    ])
}

#[test]
fn the_same_failure_in_many_clusters_is_one_group() {
    let k1 = GatewayKey::new("ns", "a");
    let k2 = GatewayKey::new("ns", "b");
    let names: Vec<String> = (0..37).map(|i| format!("c-{i:03}")).collect();
    let statuses: Vec<ReportedStatus> = names
        .iter()
        .enumerate()
        .map(|(i, n)| ReportedStatus::from(quota(n, &format!("10.0.{i}.1"))))
        .collect();
    let ok = ReportedStatus::from(status(&[("Accepted", "True", "Accepted", "")]));
    let empty = ReportedStatus::default();
    let stale_at = jiff::Timestamp::UNIX_EPOCH;
    let mut reports: Vec<(&GatewayKey, ClusterReport<'_>)> = names
        .iter()
        .zip(&statuses)
        .map(|(n, s)| {
            (
                &k1,
                ClusterReport {
                    cluster: n,
                    status: s,
                    freshness: Freshness::Fresh,
                },
            )
        })
        .collect();
    reports.push((
        &k2,
        ClusterReport {
            cluster: "c-000",
            status: &statuses[0],
            freshness: Freshness::Fresh,
        },
    ));
    reports.push((
        &k2,
        ClusterReport {
            cluster: "ok",
            status: &ok,
            freshness: Freshness::Fresh,
        },
    ));
    reports.push((
        &k2,
        ClusterReport {
            cluster: "bare",
            status: &empty,
            freshness: Freshness::Fresh,
        },
    ));
    reports.push((
        &k1,
        ClusterReport {
            cluster: "old",
            status: &statuses[1],
            freshness: Freshness::Stale {
                last_report: stale_at,
            },
        },
    ));
    reports.push((
        &k2,
        ClusterReport {
            cluster: "old",
            status: &ok,
            freshness: Freshness::Stale {
                last_report: stale_at,
            },
        },
    ));
    let clusters = [
        ClusterFacts {
            name: "old",
            liveness: Liveness::Stale,
        },
        ClusterFacts {
            name: "silent",
            liveness: Liveness::Stale,
        },
        ClusterFacts {
            name: "new",
            liveness: Liveness::NeverReported,
        },
        ClusterFacts {
            name: "ok",
            liveness: Liveness::Fresh,
        },
    ];
    let limits = Limits {
        groups: 10,
        clusters: 5,
        gateways: 1,
    };
    let causes = group(&clusters, &reports, &[], limits);
    let top = &causes.groups[0];
    assert_eq!(top.kind, CauseKind::Condition);
    assert_eq!(
        (top.condition_type.as_str(), top.reason.as_str()),
        ("LoadBalancerReady", "SyncLoadBalancerFailed")
    );
    assert_eq!(
        top.message,
        "Service openshift-ingress/gw-<cluster> has no address <ip>: Error <n>: QUOTA_EXCEEDED - Quota '<name>' exceeded. Limit: <n>.<n>"
    );
    assert!(
        top.example
            .starts_with("Service openshift-ingress/gw-c-000 has no address 10.0.0.1:")
    );
    assert_eq!(
        (top.cluster_count, top.gateway_count, top.entries),
        (37, 2, 38)
    );
    assert_eq!(top.clusters, ["c-000", "c-001", "c-002", "c-003", "c-004"]);
    assert_eq!(top.more_clusters, 32);
    assert_eq!(
        (top.gateways.clone(), top.more_gateways),
        (vec!["ns/a".to_owned()], 1)
    );
    let rest: Vec<(CauseKind, usize, usize, Vec<String>)> = causes.groups[1..]
        .iter()
        .map(|g| (g.kind, g.cluster_count, g.entries, g.clusters.clone()))
        .collect();
    assert_eq!(
        rest,
        [
            (
                CauseKind::Stale,
                2,
                2,
                vec!["old".to_owned(), "silent".to_owned()]
            ),
            (CauseKind::NoConditions, 1, 1, vec!["bare".to_owned()]),
            (CauseKind::NeverReported, 1, 0, vec!["new".to_owned()]),
        ]
    );
    assert_eq!(causes.more_groups, 0);
    assert_eq!(causes.cluster_count, 37 + 5);
    assert_eq!(causes.affected_clusters, 37 + 4);
    assert_eq!(causes.entries, 38 + 2 + 1);

    let one = group(
        &clusters,
        &reports,
        &[],
        Limits {
            groups: 1,
            ..limits
        },
    );
    assert_eq!((one.groups.len(), one.more_groups), (1, 3));
    assert_eq!(one.entries, causes.entries);
}

/// The hub's own problems are causes with no cluster; an aggregated
/// condition the clusters' causes explain is not one twice.
#[test]
fn the_hubs_own_problems_are_causes() {
    let a = GatewayKey::new("ns", "a");
    let b = GatewayKey::new("ns", "b");
    let left_out = status(&[
        (
            "kuadrant.io/MultiClusterAggregated",
            "False",
            "ValidationFailed",
            "2 addresses left out (too_many)",
        ),
        (
            "Programmed",
            "False",
            "NotTrueInSomeClusters",
            "east: Pending",
        ),
        ("Accepted", "True", "TrueInAllClusters", ""),
    ]);
    let also = status(&[(
        "kuadrant.io/MultiClusterAggregated",
        "False",
        "ValidationFailed",
        "3 addresses left out (too_many)",
    )]);
    let causes = group(&[], &[], &[(&b, &also), (&a, &left_out)], Limits::default());
    assert_eq!(causes.groups.len(), 1, "{causes:?}");
    let g = &causes.groups[0];
    assert_eq!(
        (g.kind, g.reason.as_str()),
        (CauseKind::Hub, "ValidationFailed")
    );
    assert_eq!(g.message, "<n> addresses left out (too_many)");
    assert_eq!(g.example, "2 addresses left out (too_many)");
    assert_eq!((g.cluster_count, g.gateway_count, g.entries), (0, 2, 2));
    assert!(g.clusters.is_empty());
    assert_eq!(causes.affected_clusters, 0);
    assert_eq!(causes.entries, 2);
}

#[test]
fn the_view_serialises_as_the_page_reads_it() {
    let causes = group(
        &[ClusterFacts {
            name: "s",
            liveness: Liveness::Stale,
        }],
        &[],
        &[],
        Limits::default(),
    );
    let v = serde_json::to_value(&causes).unwrap();
    assert_eq!(
        v,
        json!({
            "groups": [{
                "kind": "stale", "type": "", "reason": "Stale",
                "message": STALE_MESSAGE, "example": STALE_MESSAGE,
                "clusterCount": 1, "gatewayCount": 0, "entries": 0,
                "clusters": ["s"], "moreClusters": 0,
                "gateways": [], "moreGateways": 0,
            }],
            "moreGroups": 0, "clusterCount": 1, "affectedClusters": 1, "entries": 0,
        })
    );
}
