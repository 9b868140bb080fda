//! Status shards (`--status-shards`): replicas share the hub Gateways'
//! status writing, one holder per shard Lease, a fair share each, and a
//! replica killed without releasing has its shards taken over within a
//! Lease duration plus slack.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus};
use gwhub_hub::kube_hub::KubeHub;
use gwhub_k8s::metrics::Metrics;
use gwhub_test_kit::install::management;
use gwhub_test_kit::wait::until_named;
use kube::Client;
use kube::api::Api;

use crate::support::hub_agent::Agent;
use crate::support::hub_fixtures::{
    HUB_NS, NS, cluster_status, create_hub_gateway, find, wait_status,
};
use crate::support::kube_hub::kube_hub;
use gwhub_test_kit::wait::WAIT;

const SHARDS: u32 = 8;

/// The Lease duration [`crate::support::kube_hub::lease`] gives the
/// replicas.
const LEASE: Duration = Duration::from_secs(4);

/// A replica writing the status of its share of [`SHARDS`] shards.
async fn start_sharded(client: &Client, identity: &str) -> KubeHub {
    kube_hub(client)
        .identity(identity)
        .options(|o| o.status_shards = SHARDS)
        .start()
        .await
}

/// Each shard Lease's holder (empty: none).
async fn shard_holders(client: &Client) -> Vec<String> {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), HUB_NS);
    let mut out = Vec::new();
    for s in 0..SHARDS {
        let holder = leases
            .get_opt(&format!("gwhub-shard-{s}"))
            .await
            .unwrap()
            .and_then(|l| l.spec?.holder_identity)
            .unwrap_or_default();
        out.push(holder);
    }
    out
}

/// The shards each replica writes, once they are spread: every shard
/// written by exactly one replica, which holds its Lease, and every
/// replica holding between floor and ceil of shards / replicas.
async fn spread(client: &Client, replicas: &[(&str, &KubeHub)]) -> Vec<BTreeSet<u32>> {
    let n = replicas.len() as u32;
    let (floor, ceil) = (SHARDS / n, SHARDS.div_ceil(n));
    let deadline = Instant::now() + WAIT;
    loop {
        let held: Vec<BTreeSet<u32>> = replicas
            .iter()
            .map(|(_, hub)| match &*hub.writes.borrow() {
                gwhub_k8s::shards::Writes::Shards { held, .. } => (**held).clone(),
                // Before its first round.
                gwhub_k8s::shards::Writes::Nothing => BTreeSet::new(),
                gwhub_k8s::shards::Writes::All => panic!("not sharded"),
            })
            .collect();
        let holders = shard_holders(client).await;
        let disjoint = held.iter().map(BTreeSet::len).sum::<usize>()
            == held.iter().flatten().collect::<BTreeSet<_>>().len();
        let all = held.iter().flatten().count() == SHARDS as usize;
        let fair = held
            .iter()
            .all(|h| (floor..=ceil).contains(&(h.len() as u32)));
        let leases_agree = replicas
            .iter()
            .zip(&held)
            .all(|((id, _), h)| h.iter().all(|s| holders[*s as usize] == *id));
        // Written shards are a subset of the held Leases at all times.
        assert!(disjoint, "a shard written by two replicas: {held:?}");
        if all && fair && leases_agree {
            return held;
        }
        assert!(
            Instant::now() < deadline,
            "shards not spread: written {held:?}, Lease holders {holders:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// With `--status-shards`, two and then three replicas share the hub
/// Gateways' status writing: every shard Lease has one holder, each
/// replica writes a fair share, every hub Gateway is written (by the
/// replica holding its shard: each replica writes some), and a replica
/// killed without releasing has its shards taken over and its hub
/// Gateways written within a Lease duration plus slack.
#[tokio::test]
async fn status_writing_is_sharded_over_replicas_and_survives_a_kill() {
    let Some((_fleet, client, as_hub)) =
        management("status_writing_is_sharded_over_replicas_and_survives_a_kill").await
    else {
        return;
    };
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NS);
    // Names covering every shard, so every replica has hub Gateways.
    let mut names: Vec<String> = Vec::new();
    let mut covered = BTreeSet::new();
    for i in 0.. {
        let name = format!("gw-{i}");
        if covered.insert(gwhub_hub_rules::shards::shard_of(NS, &name, SHARDS)) {
            names.push(name);
        }
        if covered.len() == SHARDS as usize {
            break;
        }
    }
    for name in &names {
        create_hub_gateway(&gateways, name).await;
    }
    let shard = |name: &str| gwhub_hub_rules::shards::shard_of(NS, name, SHARDS);
    let report = |programmed: bool| -> Vec<(&str, &str, GatewayStatus)> {
        names
            .iter()
            .map(|n| (NS, n.as_str(), cluster_status(&["10.0.0.1"], programmed)))
            .collect()
    };
    let all_programmed = |want: &'static str| {
        let (gateways, names) = (gateways.clone(), names.clone());
        async move {
            for name in &names {
                wait_status(&gateways, name, want, |s| {
                    find(s, "Programmed").is_some_and(|c| c.status == want)
                })
                .await;
            }
        }
    };

    // Two replicas: 4 shards each.
    let a = start_sharded(&as_hub, "a").await;
    let mut agent = Agent::connect(a.hub.ingest_addr, "cluster-a").await;
    agent.snapshot(&report(true)).await;
    let b = start_sharded(&as_hub, "b").await;
    let held = spread(&client, &[("a", &a), ("b", &b)]).await;
    eprintln!("two replicas write shards {held:?}");
    all_programmed("True").await;
    let before = [&a, &b].map(|h| Metrics::get(&h.metrics.status_writes));
    agent.snapshot(&report(false)).await;
    all_programmed("False").await;
    for (i, hub) in [&a, &b].iter().enumerate() {
        assert!(
            Metrics::get(&hub.metrics.status_writes) > before[i],
            "replica {i} wrote none of its hub Gateways"
        );
        // The gauge follows the shards the replica writes now: on a loaded
        // machine a Lease renewed late is let go and taken again, so the
        // set `spread` saw may have moved since.
        let held_now = || match &*hub.writes.borrow() {
            gwhub_k8s::shards::Writes::Shards { held, .. } => held.len() as u64,
            _ => 0,
        };
        until_named(
            &format!("replica {i}'s gwhub_status_shards_held never matched its shards"),
            WAIT,
            || async { (hub.metrics.status_shards_held.get(), held_now()) },
            |(gauge, held)| gauge == held && *held > 0,
        )
        .await;
    }

    // A third replica: the others give shards up to it.
    let c = start_sharded(&as_hub, "c").await;
    let held = spread(&client, &[("a", &a), ("b", &b), ("c", &c)]).await;
    eprintln!("three replicas write shards {held:?}");
    assert!(!held[2].is_empty());
    let before = Metrics::get(&c.metrics.status_writes);
    agent.snapshot(&report(true)).await;
    all_programmed("True").await;
    assert!(
        Metrics::get(&c.metrics.status_writes) > before,
        "the third replica wrote none of its hub Gateways"
    );
    assert_eq!(Metrics::get(&c.metrics.status_write_errors), 0);

    // Killed (its tasks aborted, nothing released): its shards' hub
    // Gateways are written by the others once its Leases expire.
    let orphans: Vec<&String> = names
        .iter()
        .filter(|n| held[2].contains(&shard(n)))
        .collect();
    assert!(!orphans.is_empty());
    drop(c);
    let killed = Instant::now();
    agent.snapshot(&report(false)).await;
    for name in &orphans {
        wait_status(&gateways, name, "written after the kill", |s| {
            find(s, "Programmed").is_some_and(|c| c.status == "False")
        })
        .await;
    }
    let took = killed.elapsed();
    eprintln!(
        "status shards: a killed replica's hub Gateways written {took:?} after the kill (Lease {LEASE:?})"
    );
    assert!(
        took < LEASE + Duration::from_secs(5),
        "takeover took {took:?} with a {LEASE:?} Lease"
    );
    let held = spread(&client, &[("a", &a), ("b", &b)]).await;
    eprintln!("after the kill: {held:?}");
    all_programmed("False").await;
    drop(agent);
    let leaving = Instant::now();
    b.shutdown().await.unwrap();
    // Released on the way out, and b's heartbeat marked ended: the last
    // replica takes every shard at once, not a Lease later.
    let held = spread(&client, &[("a", &a)]).await;
    assert_eq!(held[0].len(), SHARDS as usize);
    let took = leaving.elapsed();
    eprintln!("status shards: a graceful leave handed over in {took:?} (Lease {LEASE:?})");
    assert!(
        took < LEASE,
        "a graceful leave handed over in {took:?}, not before a {LEASE:?} Lease"
    );
    a.shutdown().await.unwrap();
}
