//! Re-aggregation of one hub Gateway as its fleet grows: the cost the hub
//! pays on every report that touches the Gateway.

use std::hint::black_box;

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

criterion_group!(benches, bench);
criterion_main!(benches);
