//! Re-aggregation of one hub Gateway as its fleet grows: the cost the hub
//! pays on every report that touches the Gateway, with the engine over
//! every cluster and with the incremental aggregate (one cluster's change
//! applied, then the output).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use gateway_api::apis::standard::gateways::{
    GatewayStatus, GatewayStatusAddresses, GatewayStatusListeners,
    GatewayStatusListenersSupportedKinds,
};
use gwhub_hub_rules::aggregate::{Fleet, GatewayKey, HubGateway, Options};
use gwhub_model::conditions::new;
use jiff::Timestamp;

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

fn bench(c: &mut Criterion) {
    let now: Timestamp = "2025-05-01T12:00:00Z".parse().unwrap();
    let key = GatewayKey::new("openshift-ingress", "public");
    let hub = HubGateway {
        generation: 1,
        ..HubGateway::default()
    };
    let options = Options::default();
    let mut group = c.benchmark_group("reaggregate_one_gateway");
    for n in [10usize, 100, 1000] {
        let mut fleet = Fleet::new();
        for i in 0..n {
            fleet.upsert(
                &format!("cluster-{i:04}"),
                key.clone(),
                cluster_status(i, now),
            );
        }
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| black_box(fleet.aggregate(&key, &hub, &options, now).unwrap()))
        });
    }
    group.finish();
}

/// One cluster's change (its Programmed condition flips), then the hub
/// Gateway's output: the engine over every cluster (`engine`), the
/// incremental aggregate's status (`incremental`), and its status with
/// every omission named (`incremental_with_omissions`: past 16 addresses
/// and 64 listeners each cluster's are named, a pass over the clusters).
fn one_cluster_change(c: &mut Criterion) {
    let now: Timestamp = "2025-05-01T12:00:00Z".parse().unwrap();
    let key = GatewayKey::new("openshift-ingress", "public");
    let hub = HubGateway {
        generation: 1,
        ..HubGateway::default()
    };
    let options = Options::default();
    let mut group = c.benchmark_group("one_cluster_change");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for n in [100usize, 1000, 3500, 10_000] {
        // 16 clusters spread over the fleet take turns changing, each
        // between its report and the report with Programmed flipped.
        let changing: Vec<(String, [Arc<GatewayStatus>; 2])> = (0..16)
            .map(|j| {
                let i = j * n / 16 + 1;
                let a = cluster_status(i, now);
                let mut b = a.clone();
                for c in b.conditions.iter_mut().flatten() {
                    if c.type_ == "Programmed" {
                        c.status = if c.status == "True" { "False" } else { "True" }.into();
                    }
                }
                (format!("cluster-{i:05}"), [Arc::new(a), Arc::new(b)])
            })
            .collect();
        let fill = |fleet: &mut Fleet| {
            for i in 0..n {
                fleet.upsert(
                    &format!("cluster-{i:05}"),
                    key.clone(),
                    cluster_status(i, now),
                );
            }
        };
        let mut step = 0usize;
        let mut change = |fleet: &mut Fleet| {
            let (cluster, variants) = &changing[step % 16];
            let status = variants[(step / 16 + 1) % 2].clone();
            step += 1;
            fleet.upsert(cluster, key.clone(), status);
        };
        let mut engine = Fleet::new();
        fill(&mut engine);
        group.bench_with_input(BenchmarkId::new("engine", n), &n, |b, _| {
            b.iter(|| {
                change(&mut engine);
                black_box(engine.aggregate(&key, &hub, &options, now).unwrap())
            })
        });
        drop(engine);
        let mut fleet = Fleet::with_incremental(options.clone());
        fill(&mut fleet);
        group.bench_with_input(BenchmarkId::new("incremental", n), &n, |b, _| {
            b.iter(|| {
                change(&mut fleet);
                let inc = fleet.incremental(&key).unwrap();
                black_box(inc.aggregate_status(&hub, None, now))
            })
        });
        group.bench_with_input(
            BenchmarkId::new("incremental_with_omissions", n),
            &n,
            |b, _| {
                b.iter(|| {
                    change(&mut fleet);
                    let inc = fleet.incremental(&key).unwrap();
                    black_box(inc.aggregate(&hub, None, now))
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench, one_cluster_change);
criterion_main!(benches);
