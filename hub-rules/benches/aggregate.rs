//! Re-aggregation of one hub Gateway as its fleet grows: the cost the hub
//! pays on every report that touches the Gateway, with the engine over
//! every cluster and with the incremental aggregate (one cluster's change
//! applied, then the output); and the cost of a status write around it
//! (the plan, the apply body's encoding, the answer read back). The fleet
//! is `gwhub_test_kit::bench_fleet`'s, shared with
//! `hub/index/benches/index_change.rs`.

use std::collections::BTreeSet;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus};
use gwhub_hub_rules::aggregate::{Fleet, GatewayKey, HubGateway, LiveHub, Options};
use gwhub_hub_rules::status_plan::{Plan, plan};
use gwhub_test_kit::bench_fleet::{NotReady, changing, cluster_name, fleet, variants};
use jiff::Timestamp;
use serde_json::json;

const SIZES: [usize; 4] = [100, 1000, 3500, 10_000];
/// Not-True clusters in the fixed-output variant.
const FIXED: NotReady = NotReady::Fixed(20);

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
        let mut f = Fleet::new();
        for (_, name, status) in fleet(n, NotReady::EveryTenth, now) {
            f.upsert(&name, key.clone(), status);
        }
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| black_box(f.aggregate(&key, &hub, &options, now).unwrap()))
        });
    }
    group.finish();
}

/// The changes a bench makes, in turn: 16 clusters spread over the fleet,
/// each between its report and the report with Programmed flipped.
struct Changes {
    changing: Vec<(String, [Arc<GatewayStatus>; 2])>,
    step: usize,
}

impl Changes {
    fn new(n: usize, not_ready: NotReady, now: Timestamp) -> Self {
        let changing = changing(n)
            .map(|i| {
                let [a, b] = variants(i, n, not_ready, now);
                (cluster_name(i), [Arc::new(a), Arc::new(b)])
            })
            .collect();
        Changes { changing, step: 0 }
    }

    /// Applies the next change to `fleet`.
    fn next(&mut self, fleet: &mut Fleet, key: &GatewayKey) {
        let (cluster, variants) = &self.changing[self.step % 16];
        let status = variants[(self.step / 16 + 1) % 2].clone();
        self.step += 1;
        fleet.upsert(cluster, key.clone(), status);
    }
}

/// One cluster's change (its Programmed condition flips), then the hub
/// Gateway's output: the engine over every cluster (`engine`), the
/// incremental aggregate's status (`incremental`), and its status with
/// every omission named (`incremental_with_omissions`: past 16 addresses
/// and 64 listeners each cluster's are named, a pass over the clusters).
/// `growing`: every tenth cluster is not Programmed, so the summaries grow
/// with the fleet (to the message cap); `fixed20`: 20 are, at every size.
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
    for not_ready in [NotReady::EveryTenth, FIXED] {
        let label = not_ready.label();
        for n in SIZES {
            let fill = |f: &mut Fleet| {
                for (_, name, status) in fleet(n, not_ready, now) {
                    f.upsert(&name, key.clone(), status);
                }
            };
            // Each fleet is filled when its benchmark runs, and only then:
            // a filtered run (`cargo bench -- <name>`, or a test run's one
            // benchmark per process) fills its own, not every size's.
            if n <= 3500 || not_ready == NotReady::EveryTenth {
                let mut state = None;
                group.bench_with_input(
                    BenchmarkId::new(format!("engine/{label}"), n),
                    &n,
                    |b, _| {
                        let (engine, changes) = state.get_or_insert_with(|| {
                            let mut engine = Fleet::new();
                            fill(&mut engine);
                            (engine, Changes::new(n, not_ready, now))
                        });
                        b.iter(|| {
                            changes.next(engine, &key);
                            black_box(engine.aggregate(&key, &hub, &options, now).unwrap())
                        })
                    },
                );
            }
            let mut state = None;
            let mut incremental = || {
                let mut inc = Fleet::with_incremental(options.clone());
                fill(&mut inc);
                (inc, Changes::new(n, not_ready, now))
            };
            group.bench_with_input(
                BenchmarkId::new(format!("incremental/{label}"), n),
                &n,
                |b, _| {
                    let (inc, changes) = state.get_or_insert_with(&mut incremental);
                    b.iter(|| {
                        changes.next(inc, &key);
                        let g = inc.incremental(&key).unwrap();
                        black_box(g.aggregate_status(&hub, None, now))
                    })
                },
            );
            if not_ready == NotReady::EveryTenth {
                group.bench_with_input(
                    BenchmarkId::new(format!("incremental_with_omissions/{label}"), n),
                    &n,
                    |b, _| {
                        let (inc, changes) = state.get_or_insert_with(&mut incremental);
                        b.iter(|| {
                            changes.next(inc, &key);
                            let g = inc.incremental(&key).unwrap();
                            black_box(g.aggregate(&hub, None, now))
                        })
                    },
                );
            }
        }
    }
    group.finish();
}

/// The answer to a status write as the API server gives it back: the hub
/// Gateway with `status`, field manager `gwhub` owning what it applied.
fn answer(key: &GatewayKey, status: &GatewayStatus) -> Vec<u8> {
    let mut conditions = serde_json::Map::new();
    for c in status.conditions.iter().flatten() {
        conditions.insert(format!("k:{}", json!({"type": c.type_})), json!({}));
    }
    let mut listeners = serde_json::Map::new();
    for l in status.listeners.iter().flatten() {
        listeners.insert(format!("k:{}", json!({"name": l.name})), json!({}));
    }
    let gw = json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": key.name, "namespace": key.namespace, "generation": 1,
            "managedFields": [{"manager": "gwhub", "operation": "Apply",
                "apiVersion": "gateway.networking.k8s.io/v1", "fieldsType": "FieldsV1",
                "subresource": "status", "fieldsV1": {"f:status": {
                    "f:conditions": conditions, "f:addresses": {}, "f:listeners": listeners}}}]},
        "spec": {"gatewayClassName": "c", "listeners": []},
        "status": status,
    });
    serde_json::to_vec(&gw).unwrap()
}

/// What the hub does per status write besides the aggregation: the plan
/// against the live hub Gateway (the last write's answer), the apply
/// body's encoding, and the answer decoded and read (`LiveHub`). Over the
/// statuses one cluster's changes give in turn (computed beforehand).
fn status_write(c: &mut Criterion) {
    let now: Timestamp = "2025-05-01T12:00:00Z".parse().unwrap();
    let key = GatewayKey::new("openshift-ingress", "public");
    let hub = HubGateway {
        generation: 1,
        ..HubGateway::default()
    };
    let options = Options::default();
    let mut group = c.benchmark_group("status_write");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for not_ready in [NotReady::EveryTenth, FIXED] {
        let label = not_ready.label();
        for n in SIZES {
            // Made when the benchmark runs, and only then (see above).
            let prepare = || {
                let mut f = Fleet::with_incremental(options.clone());
                for (_, name, status) in fleet(n, not_ready, now) {
                    f.upsert(&name, key.clone(), status);
                }
                let mut changes = Changes::new(n, not_ready, now);
                // The statuses repeat every 32 changes.
                let wants: Vec<GatewayStatus> = (0..32)
                    .map(|_| {
                        changes.next(&mut f, &key);
                        let g = f.incremental(&key).unwrap();
                        g.aggregate_status(&hub, None, now).status
                    })
                    .collect();
                let answers: Vec<Vec<u8>> = wants.iter().map(|w| answer(&key, w)).collect();
                let lives: Vec<LiveHub> = answers
                    .iter()
                    .map(|a| LiveHub::from_gateway(&serde_json::from_slice(a).unwrap(), "gwhub"))
                    .collect();
                (wants, answers, lives)
            };
            let mut state = None;
            let foreign = BTreeSet::new();
            let mut step = 0usize;
            group.bench_with_input(BenchmarkId::new(label.as_str(), n), &n, |b, _| {
                let (wants, answers, lives) = &*state.get_or_insert_with(prepare);
                b.iter(|| {
                    let live = &lives[(step + 31) % 32];
                    let Plan::Write(write) = plan(live, &wants[step % 32], &foreign) else {
                        panic!("every change changes the status");
                    };
                    let body = serde_json::to_vec(&write.apply).unwrap();
                    let gw: Gateway = serde_json::from_slice(&answers[step % 32]).unwrap();
                    step += 1;
                    black_box((body, LiveHub::from_gateway(&gw, "gwhub")))
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench, one_cluster_change, status_write);
criterion_main!(benches);
