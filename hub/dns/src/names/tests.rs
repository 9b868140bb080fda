use std::collections::BTreeMap;
use std::time::Duration;

use gwhub_dns_rules::{
    Address, AddressType, ClusterView, ConditionStatus, HubGateway, HubListener, ListenerView,
};

use super::*;
use crate::config::{DnsFlags, OutputKind};

fn config() -> DnsConfig {
    DnsFlags {
        zones: vec!["fleet.test".into()],
        outputs: vec![OutputKind::Dnsendpoint],
        ttl: Duration::from_secs(30),
        max_targets: 32,
        rise: Duration::from_secs(1),
        resync: Duration::from_secs(300),
        ..DnsFlags::default()
    }
    .check("gwhub-system", Duration::from_secs(60))
    .unwrap()
    .unwrap()
}

fn key() -> GatewayKey {
    GatewayKey::new("ns", "web")
}

fn hub() -> Vec<HubGateway> {
    vec![HubGateway {
        key: key(),
        created_millis: 0,
        listeners: vec![HubListener {
            name: "http".into(),
            hostname: Some("app.fleet.test".into()),
        }],
        has_clusters: true,
    }]
}

fn cluster(i: u8, ready: bool) -> ClusterView {
    ClusterView {
        cluster: format!("c{i}"),
        reports_gateway: true,
        stale: false,
        revoked: false,
        member: None,
        expected: None,
        load_balancer_ready: Some(if ready {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        }),
        programmed: Some(ConditionStatus::True),
        listeners: vec![ListenerView {
            name: "http".into(),
            hostname: None,
            attached_routes: 1,
            programmed: None,
        }],
        addresses: vec![Address {
            address_type: AddressType::IpAddress,
            value: format!("192.0.2.{i}"),
        }],
    }
}

fn round(names: &mut Names, now: i64, clusters: Vec<ClusterView>) -> Decided {
    let fleet = gwhub_dns_rules::fleet_names(&hub(), &["fleet.test"]);
    let views = move |_: &GatewayKey| clusters.clone();
    let fresh = |_: &str| true;
    names.round(&Round {
        now_millis: now,
        names: &fleet,
        clusters: &views,
        fresh: &fresh,
    })
}

/// A round at `now`, and again at its wake time while it writes nothing
/// (the 250 ms coalescing, a rise): the jobs and when they came.
fn settle(names: &mut Names, now: i64, clusters: Vec<ClusterView>) -> (Decided, i64) {
    let mut at = now;
    for _ in 0..8 {
        let d = round(names, at, clusters.clone());
        match d.wake_at_millis {
            Some(w) if d.jobs.is_empty() => at = w.max(at + 1),
            _ => return (d, at),
        }
    }
    panic!("no write");
}

fn a(job: &Job) -> Vec<String> {
    targets(&job.sets).get("A").cloned().unwrap_or_default()
}

/// A new name's clusters join once they have risen (the start window);
/// one that is no longer eligible leaves at the next write; a failed write
/// says WriteFailed and is tried again after the backoff.
#[test]
fn names_follow_their_eligible_clusters() {
    // Long after the start: a new name joins at once.
    let mut names = Names::new(config(), -1_000_000, BTreeMap::new(), Remembered::new());
    let (d, _) = settle(&mut names, 0, vec![cluster(1, true), cluster(2, true)]);
    let [job] = d.jobs.as_slice() else {
        panic!("{:?}", d.jobs)
    };
    assert_eq!(a(job), ["192.0.2.1", "192.0.2.2"]);
    names.written(job, Outcome::Written, 0, 0);
    // Decided before the write: not yet published means True too.
    assert_eq!(d.conditions[&key()].as_ref().unwrap().status, "True");
    let d = round(&mut names, 1_000, vec![cluster(1, true), cluster(2, true)]);
    assert!(d.jobs.is_empty());
    assert_eq!(d.conditions[&key()].as_ref().unwrap().reason, "Published");

    // c2 goes: (coalesced, then) written without it.
    let (d, due) = settle(&mut names, 2_000, vec![cluster(1, true), cluster(2, false)]);
    let [job] = d.jobs.as_slice() else {
        panic!("{:?}", d.jobs)
    };
    assert_eq!(a(job), ["192.0.2.1"]);
    let removals = names.written(job, Outcome::Failed("boom".into()), due, 1_000);
    assert!(removals.is_empty());
    let d = round(
        &mut names,
        due + 10,
        vec![cluster(1, true), cluster(2, false)],
    );
    assert!(d.jobs.is_empty(), "retried only after the backoff");
    assert_eq!(d.conditions[&key()].as_ref().unwrap().reason, "WriteFailed");
    let d = round(
        &mut names,
        due + 1_000,
        vec![cluster(1, true), cluster(2, false)],
    );
    let [job] = d.jobs.as_slice() else {
        panic!("{:?}", d.jobs)
    };
    assert_eq!(a(job), ["192.0.2.1"]);
    let removals = names.written(job, Outcome::Written, due + 1_000, 0);
    assert_eq!(removals, [due + 1_000 - 2_000]);
}

/// After a start the read-back set is kept without the rise; a name that
/// leaves the fleet is deleted with what was written.
#[test]
fn read_back_sets_are_kept_and_gone_names_deleted() {
    let seeds = BTreeMap::from([(
        "app.fleet.test".to_owned(),
        BTreeMap::from([(RecordType::A, ["c1".to_owned()].into())]),
    )]);
    let mut names = Names::new(config(), 0, seeds, Remembered::new());
    let (d, _) = settle(&mut names, 10, vec![cluster(1, true)]);
    let [job] = d.jobs.as_slice() else {
        panic!("{:?}", d.jobs)
    };
    assert_eq!(a(job), ["192.0.2.1"]);
    names.written(job, Outcome::Written, 10, 0);
    let fleet = gwhub_dns_rules::FleetNames::default();
    let views = |_: &GatewayKey| Vec::new();
    let fresh = |_: &str| true;
    let d = names.round(&Round {
        now_millis: 5_000,
        names: &fleet,
        clusters: &views,
        fresh: &fresh,
    });
    let [job] = d.jobs.as_slice() else {
        panic!("{:?}", d.jobs)
    };
    assert!(job.sets.is_empty() && !job.previous.is_empty());
    assert_eq!(d.conditions.get(&key()), Some(&None));
}

/// What a replica remembers of the addresses it published survives a term
/// that wrote nothing (the Lease lost again before the first write, found
/// under load: c1's old records then matched no cluster and c1 left and
/// came back), and follows the writes of the term that made them.
#[test]
fn remembered_addresses_outlive_a_term_that_wrote_nothing() {
    let mut first = Names::new(config(), -1_000_000, BTreeMap::new(), Remembered::new());
    let (d, _) = settle(&mut first, 0, vec![cluster(1, true), cluster(2, true)]);
    let [job] = d.jobs.as_slice() else {
        panic!("{:?}", d.jobs)
    };
    first.written(job, Outcome::Written, 0, 0);
    let remembered = first.published_addresses();
    let clusters = |r: &Remembered| -> Vec<String> {
        r.get("app.fleet.test")
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    };
    assert_eq!(clusters(&remembered), ["c1", "c2"]);

    // A term cut short: a round, no write.
    let mut cut = Names::new(config(), 0, BTreeMap::new(), remembered.clone());
    let _ = round(&mut cut, 10, vec![cluster(1, true), cluster(2, true)]);
    assert_eq!(cut.published_addresses(), remembered);

    // A term that writes the name without c2: c2 is no longer remembered.
    let mut next = Names::new(config(), -1_000_000, BTreeMap::new(), remembered);
    let (d, _) = settle(&mut next, 20, vec![cluster(1, true), cluster(2, false)]);
    let [job] = d.jobs.as_slice() else {
        panic!("{:?}", d.jobs)
    };
    next.written(job, Outcome::Written, 20, 0);
    assert_eq!(clusters(&next.published_addresses()), ["c1"]);
}
