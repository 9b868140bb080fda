use super::*;
use proptest::prelude::*;

use Seen::{Eligible as E, Gone as G, Ineligible as I};

fn obs(spec: &[(&str, Seen)]) -> Vec<Observation> {
    spec.iter()
        .map(|(c, s)| Observation {
            cluster: (*c).to_owned(),
            seen: *s,
            fresh: true,
        })
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

/// Rise 10 s, stale-after 60 s, no coalescing (tested on its own).
fn cfg(when_none: WhenNone) -> PublishConfig {
    PublishConfig {
        coalesce_millis: 0,
        when_none,
        ..PublishConfig::default()
    }
}

fn at(p: &mut Publisher, now: i64, spec: &[(&str, Seen)]) -> Decision {
    let o = obs(spec);
    p.decide(&Input {
        now_millis: now,
        clusters: &o,
        other_types_served: false,
    })
}

fn published(names: &[&str]) -> Action {
    Action::Publish(set(names))
}

#[test]
fn defaults_are_the_specs() {
    let c = PublishConfig::default();
    assert_eq!(c.rise_millis, 10_000);
    assert_eq!(c.stale_after_millis, 60_000);
    assert_eq!(c.coalesce_millis, 250);
    assert_eq!(c.when_none, WhenNone::Keep);
}

#[test]
fn a_name_is_created_only_when_a_cluster_is_eligible() {
    let mut p = Publisher::new(cfg(WhenNone::Keep));
    let d = at(&mut p, 0, &[("east", I), ("west", I)]);
    assert_eq!(d.action, Action::Unchanged);
    assert_eq!(d.reason, Reason::NotYetEligible);
    assert_eq!(d.wake_at_millis, None);
    assert_eq!(
        d.to_string(),
        "unchanged: no write: not published: no cluster has been eligible yet"
    );
    assert_eq!(p.published(), None);
    // Seen ineligible first: it rises even for a new name.
    let d = at(&mut p, 1_000, &[("east", E), ("west", I)]);
    assert_eq!(d.action, Action::Unchanged);
    assert_eq!(d.rising, [("east".to_owned(), 11_000)]);
    assert_eq!(d.wake_at_millis, Some(11_000));
    let d = at(&mut p, 11_000, &[("east", E), ("west", I)]);
    assert_eq!(d.action, published(&["east"]));
    assert_eq!(d.to_string(), "publish east: joined east");
}

#[test]
fn first_sight_joins_at_once_and_leaving_is_at_the_next_write() {
    let mut p = Publisher::new(cfg(WhenNone::Keep));
    let d = at(&mut p, 0, &[("east", E), ("west", E)]);
    assert_eq!(d.action, published(&["east", "west"]));
    let d = at(&mut p, 1, &[("east", E), ("west", E)]);
    assert_eq!(d.action, Action::Unchanged);
    assert_eq!(d.reason, Reason::Current);
    assert_eq!(
        d.to_string(),
        "unchanged: no write: the published set is current"
    );
    let d = at(&mut p, 2, &[("east", E), ("west", I)]);
    assert_eq!(d.action, published(&["east"]));
    assert_eq!(
        d.reason,
        Reason::Changed {
            joined: vec![],
            left: vec!["west".into()]
        }
    );
    // Back: it rises, and a break restarts the rise.
    let d = at(&mut p, 1_000, &[("east", E), ("west", E)]);
    assert_eq!(d.rising, [("west".to_owned(), 11_000)]);
    at(&mut p, 5_000, &[("east", E), ("west", I)]);
    let d = at(&mut p, 6_000, &[("east", E), ("west", E)]);
    assert_eq!(d.rising, [("west".to_owned(), 16_000)]);
    assert_eq!(
        at(&mut p, 15_999, &[("east", E), ("west", E)]).action,
        Action::Unchanged
    );
    assert_eq!(
        at(&mut p, 16_000, &[("east", E), ("west", E)]).action,
        published(&["east", "west"])
    );
}

#[test]
fn when_none_keep_keeps_and_remove_deletes() {
    let mut keep = Publisher::new(cfg(WhenNone::Keep));
    at(&mut keep, 0, &[("east", E), ("west", E)]);
    let d = at(&mut keep, 1, &[("east", I), ("west", I)]);
    assert_eq!(d.action, Action::Unchanged);
    assert_eq!(d.reason, Reason::KeptNoneEligible { kept: 2 });
    assert!(d.reason.none_eligible());
    assert_eq!(
        d.to_string(),
        "unchanged: no write: no cluster is eligible: keeping the last published set of 2 clusters (--dns-when-none=keep)"
    );
    assert_eq!(keep.published(), Some(&set(&["east", "west"])));

    let mut remove = Publisher::new(cfg(WhenNone::Remove));
    at(&mut remove, 0, &[("east", E)]);
    let d = at(&mut remove, 1, &[("east", I)]);
    assert_eq!(d.action, Action::Delete);
    assert_eq!(d.reason, Reason::RemovedNoneEligible);
    assert_eq!(remove.published(), None);
    // Deleted stays deleted, and says why.
    let d = at(&mut remove, 2, &[("east", I)]);
    assert_eq!(d.action, Action::Unchanged);
    assert_eq!(d.reason, Reason::RemovedNoneEligible);
}

#[test]
fn revoked_and_deleted_clusters_leave_at_once_and_are_never_kept() {
    let mut p = Publisher::new(PublishConfig::default());
    at(&mut p, 0, &[("a", E), ("b", E), ("c", E)]);
    at(&mut p, 250, &[("a", E), ("b", E), ("c", E)]);
    assert_eq!(p.published(), Some(&set(&["a", "b", "c"])));
    // All ineligible: kept (after the window).
    at(&mut p, 1_000, &[("a", I), ("b", I), ("c", I)]);
    assert_eq!(p.published(), Some(&set(&["a", "b", "c"])));
    // a revoked: out at once, not after 250 ms; the rest still kept.
    let d = at(&mut p, 2_000, &[("a", G), ("b", I), ("c", I)]);
    assert_eq!(d.action, published(&["b", "c"]));
    assert_eq!(d.reason, Reason::KeptNoneEligible { kept: 2 });
    // b's ClusterProfile deleted: gone from the observations.
    let d = at(&mut p, 2_001, &[("a", G), ("c", I)]);
    assert_eq!(d.action, published(&["c"]));
    // c revoked: nothing left, the name goes.
    let d = at(&mut p, 2_002, &[("a", G), ("c", G)]);
    assert_eq!(d.action, Action::Delete);
    assert_eq!(d.reason, Reason::NothingLeft);
    // Eligible while others are gone: published, the gone ones out.
    let mut p = Publisher::new(PublishConfig::default());
    at(&mut p, 0, &[("a", E), ("b", E)]);
    at(&mut p, 250, &[("a", E), ("b", E)]);
    let d = at(&mut p, 300, &[("a", E), ("b", G)]);
    assert_eq!(d.action, published(&["a"]));
}

#[test]
fn writes_are_coalesced_for_at_most_250_ms() {
    let mut p = Publisher::new(PublishConfig::default());
    let d = at(&mut p, 1_000, &[("a", E)]);
    assert_eq!(d.action, Action::Unchanged);
    assert_eq!(d.reason, Reason::Coalescing { due_millis: 1_250 });
    assert_eq!(d.wake_at_millis, Some(1_250));
    assert_eq!(p.next_decision_at(), Some(1_250));
    // A second change joins the same write; the due time does not move.
    let d = at(&mut p, 1_200, &[("a", E), ("b", E)]);
    assert_eq!(d.reason, Reason::Coalescing { due_millis: 1_250 });
    let d = at(&mut p, 1_250, &[("a", E), ("b", E)]);
    assert_eq!(d.action, published(&["a", "b"]));
    assert_eq!(d.wake_at_millis, None);
    // A change undone within the window is never written.
    at(&mut p, 2_000, &[("a", E), ("b", I)]);
    let d = at(&mut p, 2_100, &[("a", E), ("b", E)]);
    assert_eq!(d.action, Action::Unchanged);
    assert_eq!(d.reason, Reason::Current);
    assert_eq!(d.wake_at_millis, None);
}

#[test]
fn another_type_serving_the_name_deletes_instead_of_keeping() {
    let mut p = Publisher::new(cfg(WhenNone::Keep));
    at(&mut p, 0, &[("v4", E)]);
    let o = obs(&[("v4", I)]);
    let d = p.decide(&Input {
        now_millis: 1,
        clusters: &o,
        other_types_served: true,
    });
    assert_eq!(d.action, Action::Delete);
    assert_eq!(d.reason, Reason::OtherTypeServes);
    assert!(!d.reason.none_eligible());
}

#[test]
fn keep_holds_the_last_set_while_the_only_eligible_cluster_rises() {
    let mut p = Publisher::new(cfg(WhenNone::Keep));
    at(&mut p, 0, &[("old", E), ("new", I)]);
    let d = at(&mut p, 1_000, &[("old", I), ("new", E)]);
    assert_eq!(d.action, Action::Unchanged);
    assert_eq!(d.reason, Reason::KeptNoneEligible { kept: 1 });
    assert_eq!(d.rising, [("new".to_owned(), 11_000)]);
    let d = at(&mut p, 11_000, &[("old", I), ("new", E)]);
    assert_eq!(d.action, published(&["new"]));
    // With remove, the name goes meanwhile.
    let mut p = Publisher::new(cfg(WhenNone::Remove));
    at(&mut p, 0, &[("old", E), ("new", I)]);
    assert_eq!(
        at(&mut p, 1_000, &[("old", I), ("new", E)]).action,
        Action::Delete
    );
    assert_eq!(
        at(&mut p, 11_000, &[("old", I), ("new", E)]).action,
        published(&["new"])
    );
}

fn stored(spec: &[(&str, Seen, bool)]) -> Vec<Observation> {
    spec.iter()
        .map(|(c, s, fresh)| Observation {
            cluster: (*c).to_owned(),
            seen: *s,
            fresh: *fresh,
        })
        .collect()
}

fn at_stored(p: &mut Publisher, now: i64, spec: &[(&str, Seen, bool)]) -> Decision {
    let o = stored(spec);
    p.decide(&Input {
        now_millis: now,
        clusters: &o,
        other_types_served: false,
    })
}

#[test]
fn after_a_start_the_read_back_set_stays_until_fresh_news_or_silence() {
    let start = 100_000;
    let mut p =
        Publisher::after_start(cfg(WhenNone::Keep), Some(set(&["a", "b", "c", "d"])), start);
    // a: stored report says ineligible (not fresh); b: not known at all;
    // c: fresh ineligible; d: fresh eligible; e: outside, eligible.
    let d = at_stored(
        &mut p,
        start + 10,
        &[
            ("a", I, false),
            ("c", I, true),
            ("d", E, true),
            ("e", E, true),
        ],
    );
    assert_eq!(d.action, published(&["a", "b", "d"]));
    assert_eq!(d.rising, [("e".to_owned(), start + 10_010)]);
    // The grace ends at start + stale-after: the next wake after e's rise.
    assert_eq!(d.wake_at_millis, Some(start + 10_010));
    let d = at_stored(
        &mut p,
        start + 10_010,
        &[
            ("a", I, false),
            ("c", I, true),
            ("d", E, true),
            ("e", E, true),
        ],
    );
    assert_eq!(d.action, published(&["a", "b", "d", "e"]));
    assert_eq!(d.wake_at_millis, Some(start + 60_000));
    // Silence for stale-after from the start: a and b leave.
    let d = at_stored(
        &mut p,
        start + 60_000,
        &[
            ("a", I, false),
            ("c", I, true),
            ("d", E, true),
            ("e", E, true),
        ],
    );
    assert_eq!(d.action, published(&["d", "e"]));
    assert_eq!(d.wake_at_millis, None);
}

#[test]
fn a_read_back_cluster_revoked_leaves_at_once() {
    let mut p = Publisher::after_start(PublishConfig::default(), Some(set(&["a", "b"])), 0);
    let d = at_stored(&mut p, 5, &[("a", G, false), ("b", I, false)]);
    assert_eq!(d.action, published(&["b"]));
    // Read back absent: a new name's clusters rise after a start.
    let mut p = Publisher::after_start(cfg(WhenNone::Keep), None, 0);
    let d = at_stored(&mut p, 5, &[("a", E, true)]);
    assert_eq!(d.action, Action::Unchanged);
    assert_eq!(d.reason, Reason::NotYetEligible);
    assert_eq!(d.rising, [("a".to_owned(), 10_005)]);
}

#[test]
fn a_failed_write_is_decided_again() {
    let mut p = Publisher::new(cfg(WhenNone::Keep));
    assert_eq!(at(&mut p, 0, &[("a", E)]).action, published(&["a"]));
    p.write_failed();
    assert_eq!(p.published(), None);
    assert_eq!(at(&mut p, 1, &[("a", E)]).action, published(&["a"]));
    assert_eq!(at(&mut p, 2, &[("a", E)]).action, Action::Unchanged);
}

#[test]
fn a_cluster_back_in_the_observations_rises() {
    let mut p = Publisher::new(cfg(WhenNone::Keep));
    at(&mut p, 0, &[("a", E), ("b", E)]);
    // b drops out of the observations (reports the Gateway deleted).
    assert_eq!(at(&mut p, 1, &[("a", E)]).action, published(&["a"]));
    let d = at(&mut p, 2, &[("a", E), ("b", E)]);
    assert_eq!(d.action, Action::Unchanged);
    assert_eq!(d.rising, [("b".to_owned(), 10_002)]);
    // Forgotten after stale-after + rise: then it is a first sight again.
    at(&mut p, 3, &[("a", E)]);
    at(&mut p, 3 + 70_000, &[("a", E)]);
    assert_eq!(
        at(&mut p, 3 + 70_001, &[("a", E), ("b", E)]).action,
        published(&["a", "b"])
    );
}

/// One step of a simulated fleet: time passes, each of four clusters is
/// eligible, not eligible, gone or absent (3).
type Step = (i64, [u8; 4]);

fn steps() -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec((0i64..4_000, proptest::array::uniform4(0u8..4)), 1..40)
}

fn observe(states: &[u8; 4]) -> Vec<Observation> {
    states
        .iter()
        .enumerate()
        .filter(|(_, s)| **s < 3)
        .map(|(i, s)| Observation {
            cluster: format!("c{i}"),
            seen: [E, I, G][usize::from(*s)],
            fresh: true,
        })
        .collect()
}

proptest! {
    /// Never published empty; a revoked, deleted or absent cluster is
    /// never in the published set; outside a coalescing window the set
    /// holds only eligible clusters, except that Keep may hold (part of)
    /// the set published before when none is eligible.
    #[test]
    fn published_is_eligible_or_a_kept_earlier_set(
        steps in steps(),
        remove in any::<bool>(),
        coalesce in prop_oneof![Just(0i64), Just(250i64)],
    ) {
        let when_none = if remove { WhenNone::Remove } else { WhenNone::Keep };
        let mut p = Publisher::new(PublishConfig { coalesce_millis: coalesce, when_none, ..PublishConfig::default() });
        let mut now = 0;
        for (dt, states) in steps {
            now += dt;
            let o = observe(&states);
            let before = p.published().cloned();
            let d = p.decide(&Input { now_millis: now, clusters: &o, other_types_served: false });
            if let Action::Publish(s) = &d.action {
                prop_assert!(!s.is_empty());
            }
            let Some(published) = p.published() else { continue };
            prop_assert!(!published.is_empty());
            let seen = |c: &str| o.iter().find(|x| x.cluster == c).map(|x| x.seen);
            for c in published {
                prop_assert!(!matches!(seen(c), Some(G) | None), "{c} gone but published");
            }
            if matches!(d.reason, Reason::Coalescing { .. }) {
                continue;
            }
            let eligible = published.iter().all(|c| seen(c) == Some(E));
            if !eligible {
                prop_assert!(!remove);
                prop_assert!(matches!(d.reason, Reason::KeptNoneEligible { .. }), "{:?}", d.reason);
                let before = before.unwrap_or_default();
                prop_assert!(published.is_subset(&before));
            }
        }
    }

    /// A cluster enters only on first sight or after `rise` of being
    /// eligible at every decision since it was last seen otherwise.
    #[test]
    fn a_cluster_enters_only_after_its_rise(steps in steps()) {
        let mut p = Publisher::new(cfg(WhenNone::Keep));
        let mut now = 0;
        // Per cluster: ever seen not eligible, since when eligible, since
        // when absent (forgotten after stale-after + rise).
        let mut bad = [false; 4];
        let mut since: [Option<i64>; 4] = [None; 4];
        let mut absent: [Option<i64>; 4] = [None; 4];
        let mut known = [false; 4];
        let forgotten = |absent: Option<i64>, now: i64| absent.is_some_and(|a| now - a >= 70_000);
        for (dt, states) in steps {
            now += dt;
            let before = p.published().cloned().unwrap_or_default();
            let o = observe(&states);
            p.decide(&Input { now_millis: now, clusters: &o, other_types_served: false });
            for (i, s) in states.iter().enumerate() {
                if *s == 3 {
                    absent[i].get_or_insert(now);
                    if forgotten(absent[i], now) {
                        bad[i] = false;
                    }
                } else {
                    absent[i] = None;
                }
                if *s == 0 {
                    since[i].get_or_insert(now);
                } else {
                    since[i] = None;
                }
                let c = format!("c{i}");
                let entered = p.published().is_some_and(|s| s.contains(&c)) && !before.contains(&c);
                if entered && bad[i] {
                    let s = since[i].unwrap_or(now);
                    prop_assert!(now - s >= 10_000, "{c} entered after {} ms", now - s);
                }
                // Absent before it was ever seen is not seeing it.
                if *s == 1 || *s == 2 || (*s == 3 && known[i] && !forgotten(absent[i], now)) {
                    bad[i] = true;
                }
                if *s < 3 {
                    known[i] = true;
                } else if forgotten(absent[i], now) {
                    known[i] = false;
                }
            }
        }
    }

    /// A cluster flapping faster than `rise` (eligible runs shorter than
    /// 10 s, first seen not eligible) never enters.
    #[test]
    fn a_flapping_cluster_never_enters(
        runs in proptest::collection::vec((1i64..9_999, 1i64..20_000), 1..30),
        step in 1i64..2_000,
    ) {
        let mut p = Publisher::new(cfg(WhenNone::Keep));
        let mut now = 0;
        at(&mut p, now, &[("steady", E), ("flap", I)]);
        for (up, down) in runs {
            let end = now + up;
            while now < end {
                at(&mut p, now, &[("steady", E), ("flap", E)]);
                prop_assert!(!p.published().is_some_and(|s| s.contains("flap")));
                now += step.min(end - now).max(1);
            }
            now = end + down;
            at(&mut p, end, &[("steady", E), ("flap", I)]);
            prop_assert!(!p.published().is_some_and(|s| s.contains("flap")));
        }
    }

    /// After a start, a read-back cluster with neither fresh news nor a
    /// revocation stays until stale-after from the start.
    #[test]
    fn the_read_back_set_stays_through_the_grace(
        steps in steps(),
        remove in any::<bool>(),
    ) {
        let when_none = if remove { WhenNone::Remove } else { WhenNone::Keep };
        let start = 1_000;
        let mut p = Publisher::after_start(cfg(when_none), Some(set(&["c0", "c1"])), start);
        let mut now = start;
        let mut gone_seen = [false; 2];
        for (dt, states) in steps {
            now += dt;
            // c0 and c1 report nothing fresh; c2 and c3 do.
            let o: Vec<Observation> = observe(&states)
                .into_iter()
                .map(|mut x| { x.fresh = x.cluster != "c0" && x.cluster != "c1"; x })
                .collect();
            p.decide(&Input { now_millis: now, clusters: &o, other_types_served: false });
            for (i, gone) in gone_seen.iter_mut().enumerate() {
                if states[i] == 2 {
                    *gone = true;
                }
                let c = format!("c{i}");
                if now < start + 60_000 && !*gone {
                    prop_assert!(p.published().is_some_and(|s| s.contains(&c)), "{c} left at {now}");
                }
            }
        }
    }
}
