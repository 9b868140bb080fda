//! Where a change came from, and the one entry that carries it with the
//! change: a delta lands with its [`Stamp`] (when its agent observed it,
//! the trace of its apply), each hub Gateway a change touched gets one
//! [`Pending`] entry until a pass takes it, and the pass hands the
//! [`Provenance`] of what it aggregated on with the view it publishes.
//!
//! Apart from the aggregator because these are rules, not state: how two
//! changes to one Gateway merge into one entry (the earliest observed time
//! wins, the first trace is kept, what was touched adds up). The
//! aggregator holds the entries (`aggregator.rs`, `Aggregator::pending`).

use std::collections::{BTreeMap, BTreeSet};

use gwhub_hub_rules::aggregate::GatewayKey;

/// What a delta carries into the index about where it came from: when its
/// agent observed it and the trace of its apply. Handed to
/// [`super::Index::apply_stamped`], it lands with the changes, under the
/// lock they land under, so the pass that reads them takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    pub(crate) provenance: Provenance,
}

impl Stamp {
    /// The stamp of a delta its agent observed at `observed_unix_millis`
    /// (0: unknown), applied in the current span (its trace, only with
    /// `--otlp-endpoint`); `None` when it carries neither.
    pub fn current(observed_unix_millis: i64) -> Option<Stamp> {
        let trace = gwhub_common::logging::traceparent();
        Self::of(observed_unix_millis, trace)
    }

    /// [`Stamp::current`] with the trace given.
    pub(crate) fn of(observed_unix_millis: i64, trace: String) -> Option<Stamp> {
        let provenance = Provenance {
            earliest_observed: (observed_unix_millis > 0).then_some(observed_unix_millis),
            trace: (!trace.is_empty()).then_some(trace),
        };
        (!provenance.is_empty()).then_some(Stamp { provenance })
    }
}

/// Where the changes a view carries came from: when agents observed the
/// earliest of them (unix milliseconds), and the W3C `traceparent` a span
/// that follows them continues.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Provenance {
    pub earliest_observed: Option<i64>,
    pub trace: Option<String>,
}

impl Provenance {
    /// Neither a time nor a trace.
    pub fn is_empty(&self) -> bool {
        self.earliest_observed.is_none() && self.trace.is_none()
    }

    /// Adds the provenance of changes that came after these: the earliest
    /// observed time wins, the first trace is kept.
    pub fn merge(&mut self, later: Provenance) {
        self.earliest_observed = match (self.earliest_observed, later.earliest_observed) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if self.trace.is_none() {
            self.trace = later.trace;
        }
    }
}

/// Which clusters' reports changed for a Gateway since its last pass: the
/// history then compares only those clusters' conditions, and the view is
/// patched with only their cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Touched {
    /// Only these clusters' reports changed (none: only the hub Gateway
    /// or its expectation did).
    Clusters(BTreeSet<String>),
    /// Anything may have changed (freshness, a cluster gone, the hub
    /// Gateway, the expectations).
    All,
}

impl Touched {
    /// What `cluster`'s change touched (`None`: no report changed).
    pub(crate) fn by(cluster: Option<&str>) -> Touched {
        Touched::Clusters(cluster.map(str::to_owned).into_iter().collect())
    }

    /// Both changes: every cluster either touched.
    fn merge(&mut self, later: Touched) {
        match (&mut *self, later) {
            (Touched::All, _) => {}
            (_, Touched::All) => *self = Touched::All,
            (Touched::Clusters(mine), Touched::Clusters(theirs)) => mine.extend(theirs),
        }
    }
}

/// One hub Gateway's change that no pass has read yet: what it touched and
/// where it came from. An entry is the Gateway's dirty mark: a Gateway
/// with one is re-aggregated by the next pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pending {
    pub(crate) touched: Touched,
    pub(crate) provenance: Provenance,
}

impl Pending {
    /// Adds a later change to this one.
    fn merge(&mut self, later: Pending) {
        self.touched.merge(later.touched);
        self.provenance.merge(later.provenance);
    }
}

/// Notes a change of `keys` into `pending`: what it touched and, when it
/// came with one, its stamp's provenance, merged into each key's entry.
pub(crate) fn note(
    pending: &mut BTreeMap<GatewayKey, Pending>,
    keys: impl IntoIterator<Item = GatewayKey>,
    touched: &Touched,
    stamp: Option<&Stamp>,
) {
    for key in keys {
        let change = Pending {
            touched: touched.clone(),
            provenance: stamp.map(|s| s.provenance.clone()).unwrap_or_default(),
        };
        match pending.get_mut(&key) {
            Some(entry) => entry.merge(change),
            None => {
                pending.insert(key, change);
            }
        }
    }
}

/// Moves the provenance of the entries in `pending` for the keys of
/// `taken` (changes that landed after `taken` was taken) into `taken`,
/// leaving what they touched for the next pass.
pub(crate) fn take_provenance(
    pending: &mut BTreeMap<GatewayKey, Pending>,
    taken: &mut BTreeMap<GatewayKey, Pending>,
) {
    for (key, entry) in taken.iter_mut() {
        if let Some(later) = pending.get_mut(key) {
            entry
                .provenance
                .merge(std::mem::take(&mut later.provenance));
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn key(n: &str) -> GatewayKey {
        GatewayKey::new("ns", n)
    }

    fn stamp(at: i64, trace: &str) -> Stamp {
        Stamp::of(at, trace.to_owned()).unwrap()
    }

    fn clusters(names: &[&str]) -> Touched {
        Touched::Clusters(names.iter().map(|n| (*n).to_owned()).collect())
    }

    /// A stamp carries what it knows: no time for 0 or less, no trace for
    /// an empty one, nothing at all for neither.
    #[test]
    fn a_stamp_carries_what_it_knows() {
        assert_eq!(Stamp::of(0, String::new()), None);
        assert_eq!(Stamp::of(-5, String::new()), None);
        let s = Stamp::of(0, "t".into()).unwrap();
        assert_eq!(s.provenance.earliest_observed, None);
        assert_eq!(s.provenance.trace.as_deref(), Some("t"));
        let s = Stamp::of(7, String::new()).unwrap();
        assert_eq!(s.provenance.earliest_observed, Some(7));
        assert_eq!(s.provenance.trace, None);
    }

    /// Changes of one Gateway merge into one entry: the earliest time
    /// wins, the first trace is kept, the touched clusters add up and
    /// anything (`All`) stays anything.
    #[test]
    fn changes_merge_into_one_entry() {
        type Changes = Vec<(Touched, Option<Stamp>)>;
        let cases: Vec<(&str, Changes, Pending)> = vec![
            (
                "earliest wins, first trace kept",
                vec![
                    (clusters(&["east"]), Some(stamp(5_000, "t1"))),
                    (clusters(&["west"]), Some(stamp(4_000, "t2"))),
                    (clusters(&["east"]), Some(stamp(6_000, ""))),
                ],
                Pending {
                    touched: clusters(&["east", "west"]),
                    provenance: Provenance {
                        earliest_observed: Some(4_000),
                        trace: Some("t1".into()),
                    },
                },
            ),
            (
                "an unstamped change keeps the stamp",
                vec![
                    (clusters(&[]), None),
                    (clusters(&["east"]), Some(stamp(0, "t2"))),
                    (clusters(&["east"]), Some(stamp(9, ""))),
                    (clusters(&[]), None),
                ],
                Pending {
                    touched: clusters(&["east"]),
                    provenance: Provenance {
                        earliest_observed: Some(9),
                        trace: Some("t2".into()),
                    },
                },
            ),
            (
                "anything stays anything",
                vec![
                    (clusters(&["east"]), None),
                    (Touched::All, None),
                    (clusters(&["west"]), None),
                ],
                Pending {
                    touched: Touched::All,
                    provenance: Provenance::default(),
                },
            ),
        ];
        for (name, changes, want) in cases {
            let mut pending = BTreeMap::new();
            for (touched, stamp) in &changes {
                note(&mut pending, [key("web")], touched, stamp.as_ref());
            }
            assert_eq!(pending.len(), 1, "{name}");
            assert_eq!(pending.get(&key("web")), Some(&want), "{name}");
        }
    }

    /// A pass takes what it read: the entries it took, then the
    /// provenance of the changes that landed before it read the fleet;
    /// what those touched stays for the next pass, and other Gateways'
    /// entries stay whole.
    #[test]
    fn a_pass_takes_the_provenance_of_what_it_read() {
        let mut pending = BTreeMap::new();
        note(
            &mut pending,
            [key("web")],
            &clusters(&["east"]),
            Some(&stamp(5_000, "t1")),
        );
        let mut taken = std::mem::take(&mut pending);
        // Landed after the take, before the pass read the fleet.
        note(
            &mut pending,
            [key("web")],
            &clusters(&["west"]),
            Some(&stamp(3_000, "t2")),
        );
        note(
            &mut pending,
            [key("api")],
            &clusters(&["west"]),
            Some(&stamp(1_000, "t3")),
        );
        take_provenance(&mut pending, &mut taken);
        let web = taken.get(&key("web")).unwrap();
        assert_eq!(web.touched, clusters(&["east"]));
        assert_eq!(
            web.provenance,
            Provenance {
                earliest_observed: Some(3_000),
                trace: Some("t1".into()),
            }
        );
        let left = pending.get(&key("web")).unwrap();
        assert_eq!(left.touched, clusters(&["west"]));
        assert!(left.provenance.is_empty());
        let api = pending.get(&key("api")).unwrap();
        assert_eq!(api.provenance.earliest_observed, Some(1_000));
        assert!(!taken.contains_key(&key("api")));
    }

    /// One step of the property below.
    #[derive(Clone, Debug)]
    enum Step {
        /// A change lands with a stamp of this time.
        Land(i64),
        /// A pass takes the entries (and opens), or reads the fleet and
        /// takes what landed meanwhile (and closes).
        Pass,
    }

    proptest::proptest! {
        /// However changes interleave with the two takes of passes, each
        /// stamp is taken by exactly the pass that reads its change (one
        /// that landed before the pass read the fleet), and a pass's time
        /// is the earliest of them.
        #[test]
        fn each_stamp_goes_to_the_pass_that_reads_it(
            steps in proptest::collection::vec(
                prop_oneof![(1..1_000i64).prop_map(Step::Land), Just(Step::Pass)],
                1..80,
            )
        ) {
            let mut pending = BTreeMap::new();
            // The pass under way (taken its entries, not read yet).
            let mut open: Option<BTreeMap<GatewayKey, Pending>> = None;
            // Times landed and not yet read by a pass.
            let mut unread: Vec<i64> = Vec::new();
            let mut landed = 0usize;
            let mut read = 0usize;
            for step in steps {
                match step {
                    Step::Land(at) => {
                        note(&mut pending, [key("web")], &clusters(&["east"]), Some(&stamp(at, "")));
                        unread.push(at);
                        landed += 1;
                    }
                    Step::Pass => match open.take() {
                        None => open = Some(std::mem::take(&mut pending)),
                        Some(mut taken) => {
                            take_provenance(&mut pending, &mut taken);
                            let got = taken.get(&key("web")).and_then(|p| p.provenance.earliest_observed);
                            let want = unread.iter().copied().min();
                            // A pass that took no entry reads nothing.
                            if taken.is_empty() {
                                prop_assert!(got.is_none());
                                continue;
                            }
                            prop_assert_eq!(got, want);
                            read += std::mem::take(&mut unread).len();
                            // What stays for the next pass carries no time.
                            prop_assert!(pending.values().all(|p| p.provenance.is_empty()));
                        }
                    },
                }
            }
            prop_assert_eq!(read + unread.len(), landed);
        }
    }
}
