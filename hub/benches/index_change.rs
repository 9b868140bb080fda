//! The hub's cost of one cluster's change to one hub Gateway, as the index
//! pays it: the changed report ingested (`Index::apply`), the aggregation
//! pass over the dirty Gateway (`Index::aggregate_dirty`), and the view it
//! publishes read back, with 100, 1,000 and 10,000 clusters reporting the
//! Gateway. The engine's own part is `one_cluster_change` in
//! `hub-rules/benches/aggregate.rs`; this adds what the index does around
//! it (history, cells, cluster list, comparison with the old view, the
//! view's building).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use gateway_api::apis::standard::gateways::{
    GatewayStatus, GatewayStatusAddresses, GatewayStatusListeners,
    GatewayStatusListenersSupportedKinds,
};
use gwhub_hub::index::{Change, Index, IndexConfig, Session};
use gwhub_hub_rules::aggregate::{GatewayKey, Options};
use gwhub_model::conditions::new;
use jiff::Timestamp;

/// A cluster's report, as in `hub-rules/benches/aggregate.rs`: two
/// addresses, three conditions, four listeners; every tenth cluster is
/// not Programmed.
fn cluster_status(i: usize, now: Timestamp) -> GatewayStatus {
    let c = |t: &str, s: &str, m: &str| new(t, s, "Reason", m, Some(1), now);
    let ready = if i.is_multiple_of(10) {
        "False"
    } else {
        "True"
    };
    GatewayStatus {
        addresses: Some(
            (0..2)
                .map(|j| GatewayStatusAddresses {
                    r#type: Some("IPAddress".into()),
                    value: format!("10.{}.{}.{j}", i / 256, i % 256),
                })
                .collect(),
        ),
        attached_listener_sets: None,
        conditions: Some(vec![
            c("Accepted", "True", "Resource accepted"),
            c("Programmed", ready, "Resource programmed"),
            c(
                "LoadBalancerReady",
                ready,
                "The LoadBalancer service is pending",
            ),
        ]),
        listeners: Some(
            ["http", "https", "grpc", "admin"]
                .iter()
                .map(|l| GatewayStatusListeners {
                    attached_routes: 2,
                    conditions: vec![c("Programmed", "True", ""), c("DNSReady", "True", "ok")],
                    name: (*l).into(),
                    supported_kinds: Some(vec![GatewayStatusListenersSupportedKinds {
                        group: Some("gateway.networking.k8s.io".into()),
                        kind: "HTTPRoute".into(),
                    }]),
                })
                .collect(),
        ),
    }
}

/// `status` with its Programmed condition flipped.
fn flipped(mut status: GatewayStatus) -> GatewayStatus {
    for c in status.conditions.iter_mut().flatten() {
        if c.type_ == "Programmed" {
            c.status = if c.status == "True" { "False" } else { "True" }.into();
        }
    }
    status
}

/// One cluster's change (its Programmed condition flips; 16 clusters
/// spread over the fleet take turns), ingested, aggregated and published.
fn one_cluster_change(c: &mut Criterion) {
    let now = Timestamp::now();
    let key = GatewayKey::new("openshift-ingress", "public");
    let mut group = c.benchmark_group("index_one_cluster_change");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for n in [100usize, 1000, 10_000] {
        let index = Index::new(IndexConfig::new(
            Options::default(),
            Duration::from_secs(3600),
        ));
        let mut sessions: Vec<Session> = Vec::with_capacity(n);
        for i in 0..n {
            let session = index.connect(&format!("cluster-{i:05}"), "bench").unwrap();
            index
                .replace_snapshot(
                    &session,
                    BTreeMap::from([(key.clone(), cluster_status(i, now))]),
                )
                .unwrap();
            sessions.push(session);
        }
        index.aggregate_dirty();
        let changing: Vec<(&Session, [GatewayStatus; 2])> = (0..16)
            .map(|j| {
                let i = j * n / 16 + 1;
                let a = cluster_status(i, now);
                let b = flipped(a.clone());
                (&sessions[i], [a, b])
            })
            .collect();
        let mut step = 0usize;
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                let (session, variants) = &changing[step % 16];
                let status = variants[(step / 16 + 1) % 2].clone();
                step += 1;
                index
                    .apply(session, vec![Change::Upsert(key.clone(), status)])
                    .unwrap();
                assert!(index.aggregate_dirty());
                black_box(index.view(&key).unwrap())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, one_cluster_change);
criterion_main!(benches);
