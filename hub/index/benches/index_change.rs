//! The hub's cost of one cluster's change to one hub Gateway, as the index
//! pays it: the changed report ingested (`Index::apply`), the aggregation
//! pass over the dirty Gateway (`Index::aggregate_dirty`), and the view it
//! publishes read back, with 100, 1,000, 3,500 and 10,000 clusters
//! reporting the Gateway (`gwhub_test_kit::bench_fleet`'s fleet, as in
//! `hub-rules/benches/aggregate.rs`, whose `one_cluster_change` is the
//! engine's own part; this adds what the index does around it: history,
//! cells, cluster list, comparison with the old view, the view's building).
//! `growing`: every tenth cluster is not Programmed (the summaries grow
//! with the fleet, to the message cap); `fixed20`: 20 are, at every size.

use std::collections::{BTreeMap, BTreeSet};
use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_hub_rules::aggregate::{GatewayKey, LiveHub, Options};
use gwhub_index::{Change, Index, IndexConfig, Session};
use gwhub_test_kit::bench_fleet::{NotReady, changing, fleet, variants};
use jiff::Timestamp;

const SIZES: [usize; 4] = [100, 1000, 3500, 10_000];

/// An index with `n` clusters reporting `key`, aggregated, and the
/// clusters that take turns changing with their two reports.
fn filled(
    n: usize,
    not_ready: NotReady,
    key: &GatewayKey,
    now: Timestamp,
) -> (Index, Vec<(Session, [GatewayStatus; 2])>) {
    let index = Index::new(IndexConfig::new(
        Options::default(),
        Duration::from_secs(3600),
    ));
    let mut sessions: BTreeMap<usize, Session> = BTreeMap::new();
    for (i, name, status) in fleet(n, not_ready, now) {
        let session = index.connect(&name, "bench").unwrap();
        index
            .replace_snapshot(&session, BTreeMap::from([(key.clone(), status)]))
            .unwrap();
        sessions.insert(i, session);
    }
    index.aggregate_dirty();
    let changing = changing(n)
        .map(|i| (sessions[&i].clone(), variants(i, n, not_ready, now)))
        .collect();
    (index, changing)
}

/// The hub Gateway as a status write's answer leaves it: `status` applied,
/// the hub owning its conditions, addresses and listeners.
fn written(status: &GatewayStatus) -> LiveHub {
    LiveHub {
        generation: 1,
        status: status.clone(),
        owned: status
            .conditions
            .iter()
            .flatten()
            .map(|c| c.type_.clone())
            .collect::<BTreeSet<_>>(),
        owns_addresses: true,
        owns_listeners: true,
        ..LiveHub::default()
    }
}

/// One cluster's change (its Programmed condition flips; 16 clusters
/// spread over the fleet take turns), ingested, aggregated and published
/// (`change`: no hub Gateway on a management cluster, `--no-kube`'s path);
/// and (`change_and_write`) with a live hub Gateway, then the status
/// write's answer installed as the live hub Gateway and aggregated again,
/// as the status writer leaves it after each write.
fn one_cluster_change(c: &mut Criterion) {
    let now = Timestamp::now();
    let key = GatewayKey::new("openshift-ingress", "public");
    let mut group = c.benchmark_group("index_one_cluster_change");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for not_ready in [NotReady::EveryTenth, NotReady::Fixed(20)] {
        let label = not_ready.label();
        for n in SIZES {
            // Filled when the benchmark runs, and only then: a filtered run
            // (`cargo bench -- <name>`, or a test run's one benchmark per
            // process) fills its own fleet, not every size's.
            let mut state = None;
            let mut step = 0usize;
            group.bench_with_input(
                BenchmarkId::new(format!("change/{label}"), n),
                &n,
                |b, _| {
                    let (index, changing) =
                        &*state.get_or_insert_with(|| filled(n, not_ready, &key, now));
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
                },
            );
            drop(state);
            let mut state = None;
            let mut step = 0usize;
            group.bench_with_input(
                BenchmarkId::new(format!("change_and_write/{label}"), n),
                &n,
                |b, _| {
                    let (index, changing) = &*state.get_or_insert_with(|| {
                        let (index, changing) = filled(n, not_ready, &key, now);
                        let status = index.view(&key).unwrap().aggregation.status.clone();
                        index.set_live_hub(key.clone(), Some(written(&status)));
                        index.aggregate_dirty();
                        (index, changing)
                    });
                    b.iter(|| {
                        let (session, variants) = &changing[step % 16];
                        let status = variants[(step / 16 + 1) % 2].clone();
                        step += 1;
                        index
                            .apply(session, vec![Change::Upsert(key.clone(), status)])
                            .unwrap();
                        assert!(index.aggregate_dirty());
                        let view = index.view(&key).unwrap();
                        index.set_live_hub(key.clone(), Some(written(&view.aggregation.status)));
                        index.aggregate_dirty();
                        black_box(view)
                    })
                },
            );
        }
    }
    group.finish();
}

criterion_group!(benches, one_cluster_change);
criterion_main!(benches);
