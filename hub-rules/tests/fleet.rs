//! The fleet index returns exactly the Gateways to re-aggregate.

use crate::support;

use gwhub_hub_rules::aggregate::fleet::Affected;
use gwhub_hub_rules::aggregate::*;
use support::*;

fn key(n: &str) -> GatewayKey {
    GatewayKey::new("ns", n)
}

fn keys(v: &[&str]) -> Affected {
    v.iter().map(|n| key(n)).collect()
}

fn one(i: u8) -> gateway_api::apis::standard::gateways::GatewayStatus {
    status(
        vec![cond("Accepted", "True", "A", "")],
        vec![ip(&format!("10.0.0.{i}"))],
        vec![],
    )
}

#[test]
fn upsert_and_delete() {
    let mut f = Fleet::new();
    assert_eq!(f.upsert("west", key("g1"), one(1)), keys(&["g1"]));
    assert_eq!(f.upsert("east", key("g1"), one(2)), keys(&["g1"]));
    // Same report again: nothing to do.
    assert_eq!(f.upsert("east", key("g1"), one(2)), keys(&[]));
    assert_eq!(f.upsert("east", key("g2"), one(3)), keys(&["g2"]));
    let reports = f.reports(&key("g1"));
    let names: Vec<&str> = reports.iter().map(|r| r.cluster).collect();
    assert_eq!(names, ["east", "west"]);
    assert_eq!(f.delete("east", &key("g1")), keys(&["g1"]));
    assert_eq!(f.delete("east", &key("g1")), keys(&[]));
    assert_eq!(f.delete("nobody", &key("g1")), keys(&[]));
    assert_eq!(f.reports(&key("g1")).len(), 1);
    assert_eq!(f.delete("west", &key("g1")), keys(&["g1"]));
    assert!(f.reports(&key("g1")).is_empty());
    assert_eq!(f.gateway_keys().cloned().collect::<Vec<_>>(), [key("g2")]);
}

#[test]
fn snapshot_replaces_only_what_changed() {
    let mut f = Fleet::new();
    f.upsert("east", key("keep"), one(1));
    f.upsert("east", key("change"), one(2));
    f.upsert("east", key("gone"), one(3));
    f.upsert("west", key("gone"), one(4));
    let affected = f.replace_snapshot(
        "east",
        [
            (key("keep"), one(1)),
            (key("change"), one(9)),
            (key("new"), one(5)),
        ],
    );
    assert_eq!(affected, keys(&["change", "gone", "new"]));
    assert_eq!(f.reports(&key("gone")).len(), 1);
    assert_eq!(
        f.replace_snapshot("east", []),
        keys(&["change", "keep", "new"])
    );
    assert!(f.reports(&key("keep")).is_empty());
    let clusters: Vec<_> = f.clusters().collect();
    assert_eq!(
        clusters,
        [("east", Freshness::Fresh, 0), ("west", Freshness::Fresh, 1)]
    );
}

#[test]
fn deregister_and_staleness() {
    let mut f = Fleet::new();
    f.upsert("east", key("a"), one(1));
    f.upsert("east", key("b"), one(2));
    f.upsert("west", key("b"), one(3));
    f.upsert("west", key("c"), one(4));
    let since = ts("2025-05-01T11:00:00Z");
    assert_eq!(f.mark_stale("west", since), keys(&["b", "c"]));
    assert_eq!(f.mark_stale("west", since), keys(&[]));
    let agg = f
        .aggregate(&key("b"), &hub(1), &Options::default(), now())
        .unwrap();
    assert_eq!(
        find(&agg, "Accepted").message,
        "west status is stale: no report since 2025-05-01T11:00:00Z"
    );
    // A stale cluster's addresses stay until it is deregistered.
    assert_eq!(address_values(&agg), ["east/10.0.0.2", "west/10.0.0.3"]);
    // New reports from a stale cluster keep its freshness until marked.
    f.upsert("west", key("d"), one(5));
    assert_eq!(
        f.reports(&key("d"))[0].freshness,
        Freshness::Stale { last_report: since }
    );
    assert_eq!(f.mark_fresh("west"), keys(&["b", "c", "d"]));
    assert_eq!(f.reports(&key("b"))[1].freshness, Freshness::Fresh);
    assert_eq!(f.deregister("west"), keys(&["b", "c", "d"]));
    assert_eq!(f.deregister("west"), keys(&[]));
    assert_eq!(f.gateway_keys().count(), 2);
    let agg = f
        .aggregate(&key("b"), &hub(1), &Options::default(), now())
        .unwrap();
    assert_eq!(address_values(&agg), ["east/10.0.0.2"]);
}

#[test]
fn reading_one_gateway_touches_only_its_clusters() {
    // 500 clusters each with its own Gateway plus one shared by three: the
    // shared Gateway's reports are exactly its three clusters, and changing
    // one cluster affects only that cluster's Gateways.
    let mut f = Fleet::new();
    for i in 0..500 {
        f.upsert(&format!("c{i:03}"), key(&format!("own-{i}")), one(1));
    }
    for c in ["c100", "c007", "c499"] {
        f.upsert(c, key("shared"), one(2));
    }
    let reports = f.reports(&key("shared"));
    assert_eq!(
        reports.iter().map(|r| r.cluster).collect::<Vec<_>>(),
        ["c007", "c100", "c499"]
    );
    assert_eq!(f.mark_stale("c007", now()), keys(&["own-7", "shared"]));
    assert_eq!(f.upsert("c008", key("own-8"), one(3)), keys(&["own-8"]));
}
