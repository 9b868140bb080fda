//! Unit tests of `aggregator`, in their own file so the module itself reads in
//! one sitting.

use std::collections::BTreeMap;
use std::time::Duration;

use gateway_api::apis::standard::gateways::{
    GatewayStatus, GatewayStatusAddresses, GatewayStatusListeners,
};
use proptest::prelude::*;

use super::*;
use crate::view::omission_to_proto;
use crate::{Change, IndexConfig, Session};

/// A report: Programmed or not, `addresses` addresses, `listeners`
/// listeners (one with a condition the CRD rejects when `bad`), so a
/// few clusters cross the 16-address and 64-listener limits.
#[derive(Clone, Debug)]
struct Report {
    ready: bool,
    addresses: usize,
    listeners: usize,
    bad: bool,
}

fn report() -> impl Strategy<Value = Report> {
    (any::<bool>(), 0..6usize, 0..14usize, any::<bool>()).prop_map(
        |(ready, addresses, listeners, bad)| Report {
            ready,
            addresses,
            listeners,
            bad,
        },
    )
}

fn status(r: &Report) -> GatewayStatus {
    let now = Timestamp::UNIX_EPOCH;
    let c = |t: &str, s: &str| gwhub_model::conditions::new(t, s, "Reason", "", Some(1), now);
    GatewayStatus {
        addresses: Some(
            (0..r.addresses)
                .map(|j| GatewayStatusAddresses {
                    r#type: Some("IPAddress".into()),
                    value: format!("10.0.0.{j}"),
                })
                .collect(),
        ),
        attached_listener_sets: None,
        conditions: Some(vec![
            c("Accepted", "True"),
            c("Programmed", if r.ready { "True" } else { "False" }),
        ]),
        listeners: Some(
            (0..r.listeners)
                .map(|j| GatewayStatusListeners {
                    attached_routes: 1,
                    conditions: vec![c(
                        "Programmed",
                        if r.bad && j == 0 { "Maybe" } else { "True" },
                    )],
                    name: format!("l{j}"),
                    supported_kinds: None,
                })
                .collect(),
        ),
    }
}

#[derive(Clone, Debug)]
enum Op {
    Upsert(usize, usize, Report),
    Delete(usize, usize),
    Snapshot(usize, Vec<(usize, Report)>),
    /// The Gateway re-aggregated from every cluster's report.
    All(usize),
    /// The cluster goes stale (`true`) or fresh again.
    Stale(usize, bool),
    /// The hub Gateway is on the management cluster with this
    /// generation (`None`: it is not); after every pass its status is
    /// the view's, as the status writer's answers leave it.
    Live(usize, Option<i64>),
}

fn op() -> impl Strategy<Value = Op> {
    let (c, g) = (0..6usize, 0..2usize);
    prop_oneof![
        6 => (c.clone(), g.clone(), report()).prop_map(|(c, g, r)| Op::Upsert(c, g, r)),
        2 => (c.clone(), g.clone()).prop_map(|(c, g)| Op::Delete(c, g)),
        1 => (c, prop::collection::vec((g.clone(), report()), 0..3))
            .prop_map(|(c, v)| Op::Snapshot(c, v)),
        1 => g.clone().prop_map(Op::All),
        1 => (0..6usize, any::<bool>()).prop_map(|(c, s)| Op::Stale(c, s)),
        1 => (g, prop::option::of(1..4i64)).prop_map(|(g, l)| Op::Live(g, l)),
    ]
}

fn key(g: usize) -> GatewayKey {
    GatewayKey::new("ns", format!("g{g}"))
}

fn apply(index: &Index, sessions: &[Session], op: &Op) {
    match op {
        Op::Upsert(c, g, r) => index
            .apply(&sessions[*c], vec![Change::Upsert(key(*g), status(r))])
            .unwrap(),
        Op::Delete(c, g) => index
            .apply(&sessions[*c], vec![Change::Delete(key(*g))])
            .unwrap(),
        Op::Snapshot(c, v) => {
            let all: BTreeMap<GatewayKey, GatewayStatus> =
                v.iter().map(|(g, r)| (key(*g), status(r))).collect();
            index.replace_snapshot(&sessions[*c], all).unwrap();
        }
        Op::All(g) => index.mark_dirty(BTreeSet::from([key(*g)])),
        Op::Stale(c, stale) => {
            // As the staleness sweep and a returning stream do.
            let name = sessions[*c].cluster();
            let affected = {
                let mut held = Held::nothing();
                let mut fleet = index.inner.reports.write(held.proof());
                match stale {
                    true => fleet.mark_stale(name, Timestamp::UNIX_EPOCH),
                    false => fleet.mark_fresh(name),
                }
            };
            index.mark_dirty_by(name, affected);
        }
        Op::Live(g, None) => {
            index.set_live_hub(key(*g), None);
        }
        Op::Live(g, Some(generation)) => {
            let status = index
                .view(&key(*g))
                .map(|v| v.aggregation.status.clone())
                .unwrap_or_default();
            index.set_live_hub(key(*g), Some(written(*generation, status)));
        }
    }
}

/// The hub Gateway as a status write of `status` leaves it.
fn written(generation: i64, status: GatewayStatus) -> LiveHub {
    LiveHub {
        generation,
        owned: status
            .conditions
            .iter()
            .flatten()
            .map(|c| c.type_.clone())
            .collect(),
        status,
        owns_addresses: true,
        owns_listeners: true,
        ..LiveHub::default()
    }
}

/// A condition flipping in one cluster makes a new view that shares
/// the cluster list, the omissions and their encodings with the old.
#[test]
fn a_new_view_shares_what_the_change_left_as_it_was() {
    let index = Index::new(IndexConfig::new(
        Options::default(),
        Duration::from_secs(3600),
    ));
    let sessions: Vec<Session> = (0..10)
        .map(|i| index.connect(&format!("c{i}"), "test").unwrap())
        .collect();
    let report = |ready| Report {
        ready,
        addresses: 3,
        listeners: 8,
        bad: false,
    };
    for s in &sessions {
        apply(
            &index,
            std::slice::from_ref(s),
            &Op::Upsert(0, 0, report(true)),
        );
    }
    assert!(index.aggregate_dirty());
    let before = index.view(&key(0)).unwrap();
    let encoded = before.encoded().clone();
    assert!(!before.omissions.is_empty());
    apply(&index, &sessions, &Op::Upsert(4, 0, report(false)));
    assert!(index.aggregate_dirty());
    let after = index.view(&key(0)).unwrap();
    assert_ne!(after.revision(), before.revision());
    assert_ne!(after.aggregation.status, before.aggregation.status);
    assert!(Arc::ptr_eq(&after.clusters, &before.clusters));
    assert!(Arc::ptr_eq(&after.omissions, &before.omissions));
    assert_eq!(after.omissions_revision, before.omissions_revision);
    let now = after.encoded();
    assert_eq!(now.clusters.as_ptr(), encoded.clusters.as_ptr());
    assert_eq!(now.omissions.as_ptr(), encoded.omissions.as_ptr());
    assert_ne!(now.base, encoded.base);
    assert_eq!(
        after.cells.get("c4").unwrap().health,
        gwhub_hub_rules::listing::Health::NotReady
    );
    assert_eq!(
        before.cells.get("c4").unwrap().health,
        gwhub_hub_rules::listing::Health::Ready
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Views patched from the changed clusters are the views built
    /// from every cluster's report: the cells, the cluster list, the
    /// status and the omissions the engine gives, whatever the
    /// changes; a pass over every report then changes nothing.
    #[test]
    fn a_patched_view_is_the_view_built_from_scratch(ops in prop::collection::vec(op(), 1..40)) {
        let options = Options::default();
        let index = Index::new(IndexConfig::new(options.clone(), Duration::from_secs(3600)));
        let sessions: Vec<Session> = (0..6)
            .map(|i| index.connect(&format!("c{i}"), "test").unwrap())
            .collect();
        for (step, op) in ops.iter().enumerate() {
            apply(&index, &sessions, op);
            index.aggregate_dirty();
            for g in 0..2 {
                // The status writer's answer: the view written.
                if let (Some(live), Some(view)) = (index.live_hub(&key(g)), index.view(&key(g))) {
                    let status = view.aggregation.status.clone();
                    index.set_live_hub(key(g), Some(written(live.generation, status)));
                    index.aggregate_dirty();
                }
            }
            for g in 0..2 {
                let key = key(g);
                let shared = index.inner.reports.read(Held::nothing().proof()).reports_shared(&key);
                let live = index.live_hub(&key);
                let Some(view) = index.view(&key) else {
                    prop_assert!(shared.is_empty(), "no view after step {} ({:?})", step, op);
                    continue;
                };
                if shared.is_empty() && live.is_some() {
                    // Aggregated for the writer alone (NoClusters).
                    prop_assert!(view.clusters.is_empty());
                    continue;
                }
                prop_assert!(!shared.is_empty());
                prop_assert_eq!(&view.cells, &Cells::of(&shared), "cells after step {} ({:?})", step, op);
                let names: Vec<String> = shared.iter().map(|r| r.cluster.clone()).collect();
                prop_assert_eq!(&view.clusters[..], &names[..]);
                // The engine over every report, with the live hub
                // Gateway, or the view's own conditions as the
                // previous ones (as a pass has them).
                let hub = match &live {
                    Some(live) => live.hub_gateway(&index.inner.reports.read(Held::nothing().proof()).reports(&key)),
                    None => HubGateway {
                        generation: NO_KUBE_GENERATION,
                        previous: view.aggregation.status.conditions.clone().unwrap_or_default(),
                        foreign: Vec::new(),
                    },
                };
                let want = index
                    .inner
                    .reports
                    .read(Held::nothing().proof())
                    .aggregate(&key, &hub, &options, Timestamp::now())
                    .unwrap();
                prop_assert_eq!(&view.aggregation.status, &want.status);
                let omissions: Vec<_> = want.omissions.iter().map(omission_to_proto).collect();
                prop_assert_eq!(&view.omissions[..], &omissions[..], "omissions after step {} ({:?})", step, op);
                prop_assert!(view.same_omissions(&want.omissions));
                // A pass over every report finds nothing to change.
                index.mark_dirty(BTreeSet::from([key.clone()]));
                prop_assert!(!index.aggregate_dirty(), "a full pass changed step {} ({:?})", step, op);
            }
        }
    }
}
