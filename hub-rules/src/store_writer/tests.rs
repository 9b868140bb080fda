use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

fn config() -> Config {
    Config {
        debounce: ms(50),
        rewrite_every: ms(1000),
        writes_in_flight: 2,
        prunes_in_flight: 1,
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A report written whole for `rev`, laid out over `parts`.
fn whole(session: u64, rev: u64, parts: u32) -> Outcome {
    Outcome::Written(Written {
        session,
        report_rev: rev,
        parts,
        hashes: (0..parts).map(|i| Some(u64::from(i))).collect(),
        last_seen_millis: 1,
        final_seen: false,
    })
}

/// One step of the writer's life, for the race rules' table.
#[derive(Clone)]
enum Op {
    /// Cluster `a` streams here (report revision 1, session 1), is
    /// written at the first scan and the write ends with its report whole
    /// over this many parts: `Index`, `Next` (a write of `a`), `Done`.
    Stored(u32),
    /// What the index holds from now on: (cluster, connected, report
    /// revision, session).
    Index(&'static [(&'static str, bool, u64, u64)]),
    /// The clock (ms since the start).
    At(u64),
    /// Every cluster's last-seen in the index from now on (ms).
    Seen(i64),
    /// Scan if due, then the writes' (cluster, final last-seen due).
    NextFinal(&'static [(&'static str, bool)]),
    /// A write ended having written its head with what the index held.
    DoneHead(&'static str, u64),
    Changed,
    /// Scan if due, then the actions: writes as (cluster, the report
    /// revision known written for its stream, `None`: nothing known),
    /// deletes as (cluster, parts known written).
    Next(
        &'static [(&'static str, Option<u64>)],
        &'static [(&'static str, u32)],
    ),
    /// A write ended having written (report revision, parts) whole.
    Done(&'static str, u64, u32),
    /// A write ended having written nothing.
    Failed(&'static str),
    LostHead(&'static str),
    LostPart(&'static str, u32),
    Pruned(&'static str),
    Deleted(&'static str),
}

#[test]
fn the_race_rules() {
    use Op::*;
    let cases: &[(&str, &[Op])] = &[
        (
            "a change is written once",
            &[
                Index(&[("a", true, 1, 1)]),
                Next(&[("a", None)], &[]),
                Done("a", 1, 1),
                At(100),
                Next(&[], &[]),
                At(5000),
                Changed,
                Next(&[], &[]),
                At(5100),
                Next(&[], &[]),
            ],
        ),
        (
            "a burst of changes is one scan after the debounce",
            &[
                Next(&[], &[]),
                Index(&[("a", true, 1, 1)]),
                Changed,
                At(10),
                Changed,
                Next(&[], &[]),
                At(50),
                Next(&[("a", None)], &[]),
            ],
        ),
        (
            "a cluster changing during its write waits for it, then for its interval",
            &[
                Index(&[("a", true, 1, 1)]),
                Next(&[("a", None)], &[]),
                Index(&[("a", true, 2, 1)]),
                Changed,
                At(60),
                Next(&[], &[]),
                Done("a", 1, 1),
                At(120),
                Next(&[], &[]),
                At(1000),
                Next(&[("a", Some(1))], &[]),
            ],
        ),
        (
            "a failed write is retried",
            &[
                Index(&[("a", true, 1, 1)]),
                Next(&[("a", None)], &[]),
                Failed("a"),
                At(1000),
                Next(&[("a", None)], &[]),
            ],
        ),
        (
            "a head lost during the write is written again whole",
            &[
                Index(&[("a", true, 1, 1)]),
                Next(&[("a", None)], &[]),
                LostHead("a"),
                Done("a", 1, 1),
                At(1000),
                Next(&[("a", None)], &[]),
            ],
        ),
        (
            "a part lost during the write is written again",
            &[
                Index(&[("a", true, 1, 1)]),
                Next(&[("a", None)], &[]),
                LostPart("a", 1),
                Done("a", 1, 2),
                At(1000),
                Next(&[("a", Some(0))], &[]),
            ],
        ),
        (
            "a part lost while idle is written again; one beyond the layout is not",
            &[
                Stored(2),
                At(1000),
                LostPart("a", 2),
                Next(&[], &[]),
                LostPart("a", 1),
                Next(&[("a", Some(0))], &[]),
            ],
        ),
        (
            "a head lost while idle is written again whole",
            &[
                Stored(1),
                At(1000),
                LostHead("a"),
                Next(&[("a", None)], &[]),
            ],
        ),
        (
            "a new stream is not taken as written",
            &[
                Stored(1),
                Index(&[("a", true, 1, 2)]),
                At(1000),
                Changed,
                At(1050),
                Next(&[("a", None)], &[]),
            ],
        ),
        (
            "pruned during its write: deleted after it with what it wrote, not written meanwhile",
            &[
                Index(&[("a", true, 1, 1)]),
                Next(&[("a", None)], &[]),
                Pruned("a"),
                Index(&[]),
                Next(&[], &[]),
                Done("a", 1, 3),
                Next(&[], &[("a", 3)]),
                // Back (another stream) while its report is deleted.
                Index(&[("a", true, 5, 2)]),
                At(2000),
                Changed,
                At(2050),
                Next(&[], &[]),
                Deleted("a"),
                Next(&[("a", None)], &[]),
            ],
        ),
        (
            "pruned while idle: deleted at once with the parts written",
            &[
                Stored(2),
                Pruned("a"),
                Index(&[]),
                Next(&[], &[("a", 2)]),
                Deleted("a"),
                At(2000),
                Next(&[], &[]),
            ],
        ),
        (
            "pruned while waiting for its write: not written",
            &[
                Index(&[("a", true, 1, 1), ("b", true, 1, 1), ("c", true, 1, 1)]),
                Next(&[("a", None), ("b", None)], &[]),
                Pruned("c"),
                Index(&[("a", true, 1, 1), ("b", true, 1, 1)]),
                Next(&[], &[("c", 0)]),
                Done("a", 1, 1),
                Next(&[], &[]),
            ],
        ),
        (
            "at most `writes_in_flight` at once, oldest change first",
            &[
                Index(&[("b", true, 1, 1)]),
                Next(&[("b", None)], &[]),
                Failed("b"),
                Index(&[("a", true, 1, 1), ("b", true, 1, 1), ("c", true, 1, 1)]),
                At(1000),
                Changed,
                At(1050),
                Next(&[("a", None), ("b", None)], &[]),
                Done("a", 1, 1),
                Next(&[("c", None)], &[]),
            ],
        ),
        (
            "a connected cluster is not rewritten for liveness",
            &[
                Stored(1),
                Seen(5_000),
                At(5_000),
                Changed,
                At(5_100),
                Next(&[], &[]),
                Seen(60_000),
                At(60_000),
                Next(&[], &[]),
            ],
        ),
        (
            "a cluster that left gets its last-seen once, not again as others vouch for it",
            &[
                Stored(1),
                Seen(4_000),
                Index(&[("a", false, 1, 1)]),
                At(4_000),
                Changed,
                At(4_100),
                NextFinal(&[("a", true)]),
                DoneHead("a", 1),
                // Another replica's heartbeat moves its last-seen on.
                Seen(9_000),
                At(9_000),
                Changed,
                At(9_100),
                Next(&[], &[]),
            ],
        ),
        (
            "a failed last-seen write is retried",
            &[
                Stored(1),
                Seen(4_000),
                Index(&[("a", false, 1, 1)]),
                At(4_000),
                Changed,
                At(4_100),
                NextFinal(&[("a", true)]),
                Failed("a"),
                At(5_200),
                NextFinal(&[("a", true)]),
            ],
        ),
        (
            "a cluster that left with its last-seen written already: nothing",
            &[
                Stored(1),
                Index(&[("a", false, 1, 1)]),
                At(4_000),
                Changed,
                At(4_100),
                Next(&[], &[]),
                Seen(9_000),
                Changed,
                At(4_200),
                Next(&[], &[]),
            ],
        ),
        (
            "a cluster never streamed here is another replica's to write",
            &[Index(&[("a", false, 1, 1)]), Next(&[], &[])],
        ),
        (
            "a cluster that left keeps its last change",
            &[
                Stored(1),
                Index(&[("a", false, 2, 1)]),
                At(1000),
                Changed,
                At(1050),
                Next(&[("a", Some(1))], &[]),
            ],
        ),
    ];
    for (name, ops) in cases {
        let t0 = Instant::now();
        let mut now = t0;
        let mut w = Writer::new(config(), t0);
        let mut index: &[(&str, bool, u64, u64)] = &[];
        let mut seen: i64 = 1;
        let scan = |w: &mut Writer, now: Instant, index: &[(&str, bool, u64, u64)], seen: i64| {
            if w.scan_due(now) {
                let clusters = index
                    .iter()
                    .map(|(name, connected, report_rev, session)| Cluster {
                        name: name.to_string(),
                        connected: *connected,
                        report_rev: *report_rev,
                        session: *session,
                        last_seen_millis: seen,
                    })
                    .collect();
                w.scan(now, clusters, |_| None);
            }
        };
        let session = |index: &[(&str, bool, u64, u64)], c: &str| {
            index.iter().find(|e| e.0 == c).map_or(1, |e| e.3)
        };
        let ops = ops.iter().flat_map(|op| match op {
            Stored(parts) => vec![
                Index(&[("a", true, 1, 1)]),
                Next(&[("a", None)], &[]),
                Done("a", 1, *parts),
            ],
            op => vec![op.clone()],
        });
        for (step, op) in ops.enumerate() {
            match &op {
                Stored(_) => unreachable!("expanded above"),
                Index(i) => index = i,
                At(t) => now = t0 + ms(*t),
                Changed => w.changed(now),
                Seen(t) => seen = *t,
                NextFinal(writes) => {
                    scan(&mut w, now, index, seen);
                    let got: Vec<(String, bool)> = w
                        .next(now)
                        .writes
                        .iter()
                        .map(|w| (w.cluster.clone(), w.final_seen_due))
                        .collect();
                    let want: Vec<(String, bool)> =
                        writes.iter().map(|(c, f)| (c.to_string(), *f)).collect();
                    assert_eq!(got, want, "{name}: step {step}: writes");
                }
                DoneHead(c, rev) => {
                    let outcome = Outcome::Written(Written {
                        session: session(index, c),
                        report_rev: *rev,
                        parts: 1,
                        hashes: vec![Some(0)],
                        last_seen_millis: seen,
                        final_seen: true,
                    });
                    w.write_ended(now, c, outcome)
                }
                Next(writes, deletes) => {
                    scan(&mut w, now, index, seen);
                    let got = w.next(now);
                    let got_writes: Vec<(String, Option<u64>)> = got
                        .writes
                        .iter()
                        .map(|w| (w.cluster.clone(), w.written.as_ref().map(|w| w.report_rev)))
                        .collect();
                    let want: Vec<(String, Option<u64>)> =
                        writes.iter().map(|(c, r)| (c.to_string(), *r)).collect();
                    assert_eq!(got_writes, want, "{name}: step {step}: writes");
                    let want: Vec<(String, u32)> =
                        deletes.iter().map(|(c, n)| (c.to_string(), *n)).collect();
                    assert_eq!(got.deletes, want, "{name}: step {step}: deletes");
                }
                Done(c, rev, parts) => {
                    w.write_ended(now, c, whole(session(index, c), *rev, *parts))
                }
                Failed(c) => w.write_ended(now, c, Outcome::Nothing),
                LostHead(c) => w.lost(now, [Lost::Cluster(c.to_string())]),
                LostPart(c, p) => w.lost(now, [Lost::Part(c.to_string(), *p)]),
                Pruned(c) => w.pruned(c),
                Deleted(c) => w.deletion_done(now, c),
            }
        }
    }
}

/// Each case: the hashes known written (`None`: nothing for this stream),
/// the new layout's hashes, whether the final last-seen is due, which objects
/// fail -> the parts written (the head last), the outcome's (report
/// revision, hashes), the stale parts.
#[test]
fn a_pass_writes_what_changed_parts_first_the_head_last() {
    type Case = (
        &'static str,
        Option<&'static [Option<u64>]>,
        &'static [u64],
        bool,
        &'static [u32],
        Option<&'static [u32]>,
        Option<(u64, &'static [Option<u64>])>,
        (u32, u32),
    );
    let cases: &[Case] = &[
        (
            "new: everything, head last",
            None,
            &[10, 11, 12],
            false,
            &[],
            Some(&[1, 2, 0]),
            Some((7, &[Some(10), Some(11), Some(12)])),
            (3, 3),
        ),
        (
            "unchanged: nothing",
            Some(&[Some(10), Some(11)]),
            &[10, 11],
            false,
            &[],
            None,
            None,
            (2, 2),
        ),
        (
            "unchanged but its stream ended: the head alone, for its last-seen",
            Some(&[Some(10), Some(11)]),
            &[10, 11],
            true,
            &[],
            Some(&[0]),
            Some((7, &[Some(10), Some(11)])),
            (2, 2),
        ),
        (
            "one part changed: that part alone",
            Some(&[Some(10), Some(11), Some(12)]),
            &[10, 21, 12],
            false,
            &[],
            Some(&[1]),
            Some((7, &[Some(10), Some(21), Some(12)])),
            (3, 3),
        ),
        (
            "a part lost: written again",
            Some(&[Some(10), None]),
            &[10, 11],
            false,
            &[],
            Some(&[1]),
            Some((7, &[Some(10), Some(11)])),
            (2, 2),
        ),
        (
            "a part fails: the head waits, the revision is not whole",
            Some(&[Some(10), Some(11), Some(12)]),
            &[20, 21, 12],
            false,
            &[1],
            Some(&[1]),
            Some((0, &[Some(10), None, Some(12)])),
            (3, 3),
        ),
        (
            "relaid and a part fails: nothing known written",
            Some(&[Some(10), Some(11)]),
            &[20, 21, 22, 23],
            false,
            &[2],
            Some(&[1, 2, 3]),
            None,
            (4, 4),
        ),
        (
            "relaid over fewer parts: the parts beyond are stale",
            Some(&[Some(10), Some(11), Some(12), Some(13)]),
            &[20, 21],
            false,
            &[],
            Some(&[1, 0]),
            Some((7, &[Some(20), Some(21)])),
            (2, 4),
        ),
        (
            "the head fails: not whole",
            None,
            &[10],
            false,
            &[0],
            Some(&[0]),
            None,
            (1, 1),
        ),
    ];
    for (name, known, new, refresh, fail, want_writes, want_outcome, stale) in cases {
        let written = known.map(|h| Written {
            session: 1,
            report_rev: 3,
            parts: h.len() as u32,
            hashes: h.to_vec(),
            last_seen_millis: 5,
            final_seen: false,
        });
        let pass = Pass::new(written.as_ref(), 1, 7, 9, new.to_vec(), *refresh);
        let Some(mut pass) = pass else {
            assert_eq!(*want_writes, None, "{name}");
            continue;
        };
        let mut wrote = Vec::new();
        for p in pass.parts_to_write() {
            wrote.push(p);
            pass.part_written(p, !fail.contains(&p));
        }
        if pass.head_due() {
            wrote.push(0);
            pass.head_written(!fail.contains(&0));
        }
        assert_eq!(Some(wrote.as_slice()), *want_writes, "{name}");
        assert_eq!(
            (pass.stale_parts().start, pass.stale_parts().end),
            *stale,
            "{name}"
        );
        match (pass.outcome(), want_outcome) {
            (Outcome::Written(w), Some((rev, hashes))) => {
                assert_eq!(w.report_rev, *rev, "{name}");
                assert_eq!(w.hashes, hashes.to_vec(), "{name}");
                assert_eq!(w.parts, new.len() as u32, "{name}");
                let head = !fail.contains(&0) && wrote.contains(&0);
                assert_eq!(w.last_seen_millis, if head { 9 } else { 5 }, "{name}");
                assert_eq!(w.final_seen, head && *refresh, "{name}");
            }
            (Outcome::Nothing, None) => {}
            (got, want) => panic!("{name}: {got:?}, want {want:?}"),
        }
    }
}

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

/// One thing that happens around the writer, for the simulation.
#[derive(Clone, Debug)]
enum Ev {
    /// The cluster reports a change to one part (and maybe a new layout).
    Change(usize, usize, Option<usize>),
    /// A new stream (a reconnect, or back after it was pruned).
    Connect(usize),
    Disconnect(usize),
    /// `--insecure-prune-after` forgets a cluster that left.
    Prune(usize),
    /// Someone deletes a connected cluster's head, or a part; `true`:
    /// right after its write in flight lands (the writer hears of it
    /// before that write ends).
    LoseHead(usize, bool),
    LosePart(usize, u32, bool),
    /// The i-th write in flight ends; bit k set: object k fails.
    EndWrite(usize, u8),
    EndDelete(usize),
    /// The importer hands the writer what it saw deleted.
    Deliver,
    Advance(u64),
    Tick,
}

fn event() -> impl Strategy<Value = Ev> {
    let c = 0..NAMES.len();
    prop_oneof![
        4 => (c.clone(), 0..4usize, proptest::option::weighted(0.2, 1..4usize))
            .prop_map(|(c, p, n)| Ev::Change(c, p, n)),
        1 => c.clone().prop_map(Ev::Connect),
        1 => c.clone().prop_map(Ev::Disconnect),
        1 => c.clone().prop_map(Ev::Prune),
        1 => (c.clone(), any::<bool>()).prop_map(|(c, late)| Ev::LoseHead(c, late)),
        2 => (c.clone(), 1..3u32, any::<bool>()).prop_map(|(c, p, late)| Ev::LosePart(c, p, late)),
        4 => (0..4usize, proptest::bits::u8::masked(0b1111))
            .prop_map(|(i, m)| Ev::EndWrite(i, if m & 0b11 == 0b11 { m } else { 0 })),
        2 => (0..2usize).prop_map(Ev::EndDelete),
        2 => Just(Ev::Deliver),
        3 => (0..1500u64).prop_map(Ev::Advance),
        1 => Just(Ev::Tick),
    ]
}

/// A cluster as the simulated index holds it.
#[derive(Clone, Debug)]
struct SimCluster {
    session: u64,
    rev: u64,
    connected: bool,
    last_seen: i64,
    /// One content per part (the layout's count).
    contents: Vec<u64>,
}

impl SimCluster {
    fn hashes(&self) -> Vec<u64> {
        let n = self.contents.len() as u64;
        self.contents
            .iter()
            .enumerate()
            .map(|(i, c)| c.wrapping_mul(31).wrapping_add(i as u64 * 7 + n * 1000))
            .collect()
    }
}

/// A stored object: (the count it was written for, its hash).
type Obj = (u32, u64);

/// A write in flight: what it writes, taken from the index when it
/// started (`None`: the cluster was gone; `Err(rev)`: nothing to write).
struct Flight {
    cluster: String,
    pass: Option<Result<Pass, u64>>,
    /// Parts deleted right after its objects land.
    lose_after: Vec<u32>,
    /// Its stream and whether it is to write the final last-seen.
    session: u64,
    final_seen_due: bool,
}

/// The writer, an index, a store and the I/O between them, run on
/// events; every step checks the invariants.
struct Sim {
    t0: Instant,
    now: u64,
    w: Writer,
    index: BTreeMap<String, SimCluster>,
    store: BTreeMap<(String, u32), Obj>,
    writes: Vec<Flight>,
    deletes: Vec<String>,
    /// What the importer saw deleted, not handed to the writer yet.
    lost: BTreeSet<Lost>,
    /// Pruned, deletion not started / running.
    awaiting: BTreeSet<String>,
    deleting: BTreeSet<String>,
    /// Pruned and deleted, not back since: nothing of them may be stored.
    gone: BTreeSet<String>,
    next_session: u64,
    next_rev: u64,
    /// The streams whose final last-seen was written.
    finals: BTreeSet<(String, u64)>,
}

impl Sim {
    /// Every cluster streaming here, its report over two parts.
    fn new() -> Sim {
        let t0 = Instant::now();
        let index = NAMES
            .iter()
            .zip(1..)
            .map(|(n, i)| {
                let c = SimCluster {
                    session: i,
                    rev: i,
                    connected: true,
                    last_seen: 0,
                    contents: vec![0, 0],
                };
                (n.to_string(), c)
            })
            .collect();
        Sim {
            t0,
            now: 0,
            w: Writer::new(config(), t0),
            index,
            store: BTreeMap::new(),
            writes: Vec::new(),
            deletes: Vec::new(),
            lost: BTreeSet::new(),
            awaiting: BTreeSet::new(),
            deleting: BTreeSet::new(),
            gone: BTreeSet::new(),
            next_session: 10,
            next_rev: 10,
            finals: BTreeSet::new(),
        }
    }

    fn at(&self) -> Instant {
        self.t0 + ms(self.now)
    }

    fn wall(&self) -> i64 {
        1_700_000_000_000 + self.now as i64
    }

    fn seed(&self, cluster: &str) -> Option<Seed> {
        let (n, _) = *self.store.get(&(cluster.to_owned(), 0))?;
        let hashes = (0..n)
            .map(|i| {
                self.store
                    .get(&(cluster.to_owned(), i))
                    .filter(|(count, _)| *count == n)
                    .map(|(_, h)| *h)
            })
            .collect();
        Some(Seed {
            parts: n,
            hashes,
            last_seen_millis: 0,
        })
    }

    /// Scans if due and starts what the writer says, checking the rules.
    fn drive(&mut self) {
        let now = self.at();
        if self.w.scan_due(now) {
            let clusters = self
                .index
                .iter()
                .map(|(name, c)| Cluster {
                    name: name.clone(),
                    connected: c.connected,
                    report_rev: c.rev,
                    session: c.session,
                    last_seen_millis: c.last_seen,
                })
                .collect();
            let seeds: BTreeMap<String, Seed> = NAMES
                .iter()
                .filter_map(|n| Some((n.to_string(), self.seed(n)?)))
                .collect();
            self.w.scan(now, clusters, |c| seeds.get(c).cloned());
        }
        let actions = self.w.next(now);
        for (cluster, _) in actions.deletes {
            assert!(
                !self.writes.iter().any(|f| f.cluster == cluster),
                "a deletion of {cluster} started while its write is in flight"
            );
            assert!(self.awaiting.remove(&cluster), "{cluster} deleted unpruned");
            assert!(
                self.deleting.insert(cluster.clone()),
                "{cluster} deleted twice at once"
            );
            self.deletes.push(cluster);
        }
        assert!(self.deletes.len() <= config().prunes_in_flight);
        for write in actions.writes {
            let c = write.cluster.clone();
            assert!(
                !self.writes.iter().any(|f| f.cluster == c),
                "two writes of {c} in flight"
            );
            // (A write picked before a reconnect is for the ended stream.)
            let streaming = self
                .index
                .get(&c)
                .is_some_and(|sc| sc.connected && sc.session == write.session);
            assert!(
                !(streaming && write.final_seen_due),
                "{c} written for its last-seen while its stream is on"
            );
            assert!(
                !self.awaiting.contains(&c) && !self.deleting.contains(&c),
                "{c} written while its deletion waits or runs"
            );
            let pass = self.index.get(&c).map(|sc| {
                Pass::new(
                    write.written.as_ref(),
                    write.session,
                    sc.rev,
                    sc.last_seen,
                    sc.hashes(),
                    write.final_seen_due,
                )
                .ok_or(sc.rev)
            });
            self.writes.push(Flight {
                cluster: c,
                pass,
                lose_after: Vec::new(),
                session: write.session,
                final_seen_due: write.final_seen_due,
            });
        }
        assert!(self.writes.len() <= config().writes_in_flight);
        let in_flight: BTreeSet<&str> = self.w.in_flight().collect();
        let ours: BTreeSet<&str> = self.writes.iter().map(|f| f.cluster.as_str()).collect();
        assert_eq!(in_flight, ours);
        for g in &self.gone {
            assert!(
                !self.store.keys().any(|(c, _)| c == g),
                "pruned {g} re-created in the store"
            );
        }
    }

    fn end_write(&mut self, i: usize, fail: u8) {
        if self.writes.is_empty() {
            return;
        }
        let Flight {
            cluster,
            pass,
            lose_after,
            session,
            final_seen_due,
        } = self.writes.remove(i % self.writes.len());
        let outcome = match pass {
            None => Outcome::Nothing,
            Some(Err(rev)) => Outcome::Rev(rev),
            Some(Ok(mut pass)) => {
                let n = pass.parts();
                let fails = |p: u32| p < 8 && fail & (1 << p) != 0;
                // What it writes was taken when it started.
                let hashes = pass.new.clone();
                for p in pass.parts_to_write() {
                    let ok = !fails(p);
                    if ok {
                        self.store
                            .insert((cluster.clone(), p), (n, hashes[p as usize]));
                    }
                    pass.part_written(p, ok);
                }
                if pass.head_due() {
                    let ok = !fails(0);
                    if ok {
                        self.store.insert((cluster.clone(), 0), (n, hashes[0]));
                        if final_seen_due {
                            assert!(
                                self.finals.insert((cluster.clone(), session)),
                                "{cluster}'s last-seen written twice for one stream"
                            );
                        }
                    }
                    pass.head_written(ok);
                }
                if pass.head_is_written() {
                    let stale: Vec<u32> = self
                        .store
                        .keys()
                        .filter(|(c, p)| *c == cluster && *p >= n)
                        .map(|(_, p)| *p)
                        .chain(pass.stale_parts())
                        .collect();
                    for p in stale {
                        if self.store.remove(&(cluster.clone(), p)).is_some() {
                            self.lost.insert(Lost::Part(cluster.clone(), p));
                        }
                    }
                }
                pass.outcome()
            }
        };
        for p in lose_after {
            self.store.remove(&(cluster.clone(), p));
        }
        self.w.write_ended(self.at(), &cluster, outcome);
    }

    fn end_delete(&mut self, i: usize) {
        if self.deletes.is_empty() {
            return;
        }
        let cluster = self.deletes.remove(i % self.deletes.len());
        self.deleting.remove(&cluster);
        // Only while still gone (a cluster back keeps its report).
        if !self.index.contains_key(&cluster) {
            self.store.retain(|(c, _), _| *c != cluster);
            self.gone.insert(cluster.clone());
        }
        self.w.deletion_done(self.at(), &cluster);
    }

    /// Deletes cluster `c`'s part `p` now, or (`late`) right after its
    /// write in flight lands; whether anything is (to be) deleted.
    fn lose(&mut self, c: usize, p: u32, late: bool) -> bool {
        if late && let Some(f) = self.writes.iter_mut().find(|f| f.cluster == NAMES[c]) {
            f.lose_after.push(p);
            return true;
        }
        self.store.remove(&(NAMES[c].to_owned(), p)).is_some()
    }

    fn deliver(&mut self) {
        let now = self.at();
        if !self.lost.is_empty() {
            self.w.lost(now, std::mem::take(&mut self.lost));
        }
    }

    fn step(&mut self, ev: &Ev) {
        let now = self.at();
        match *ev {
            Ev::Change(c, part, layout) => {
                let wall = self.wall();
                if let Some(sc) = self.index.get_mut(NAMES[c])
                    && sc.connected
                {
                    if let Some(n) = layout {
                        sc.contents.resize(n, 0);
                    }
                    let k = part % sc.contents.len();
                    sc.contents[k] = sc.contents[k].wrapping_add(1);
                    sc.rev = self.next_rev;
                    sc.last_seen = wall;
                    self.next_rev += 1;
                    self.w.changed(now);
                }
            }
            Ev::Connect(c) => {
                let wall = self.wall();
                let sc = self
                    .index
                    .entry(NAMES[c].to_owned())
                    .or_insert_with(|| SimCluster {
                        session: 0,
                        rev: 0,
                        connected: false,
                        last_seen: 0,
                        contents: vec![0],
                    });
                sc.session = self.next_session;
                sc.connected = true;
                sc.rev = self.next_rev;
                sc.last_seen = wall;
                self.next_session += 1;
                self.next_rev += 1;
                self.gone.remove(NAMES[c]);
                self.w.changed(now);
            }
            Ev::Disconnect(c) => {
                let wall = self.wall();
                if let Some(sc) = self.index.get_mut(NAMES[c]) {
                    // Its last heartbeat, after its last report.
                    if sc.connected {
                        sc.last_seen = wall;
                    }
                    sc.connected = false;
                    self.w.changed(now);
                }
            }
            Ev::Prune(c) => {
                if self.index.get(NAMES[c]).is_some_and(|sc| !sc.connected) {
                    self.index.remove(NAMES[c]);
                    self.awaiting.insert(NAMES[c].to_owned());
                    self.w.pruned(NAMES[c]);
                }
            }
            Ev::LoseHead(c, late) => {
                if self.index.get(NAMES[c]).is_some_and(|sc| sc.connected) && self.lose(c, 0, late)
                {
                    self.lost.insert(Lost::Cluster(NAMES[c].to_owned()));
                }
            }
            Ev::LosePart(c, p, late) => {
                if self.lose(c, p, late) {
                    self.lost.insert(Lost::Part(NAMES[c].to_owned(), p));
                }
            }
            Ev::EndWrite(i, fail) => self.end_write(i, fail),
            Ev::EndDelete(i) => self.end_delete(i),
            Ev::Deliver => self.deliver(),
            Ev::Advance(d) => self.now += d,
            Ev::Tick => self.w.tick(now),
        }
        self.drive();
    }

    /// No more changes, every write succeeds: the store ends up holding
    /// every connected cluster's latest report, laid out as it is now.
    fn settle(&mut self) {
        for _ in 0..40 {
            self.deliver();
            self.now += 1500;
            self.w.tick(self.at());
            self.drive();
            while !self.writes.is_empty() {
                self.end_write(0, 0);
                self.drive();
            }
            while !self.deletes.is_empty() {
                self.end_delete(0);
                self.drive();
            }
        }
        assert!(self.lost.is_empty() && self.writes.is_empty() && self.deletes.is_empty());
        for (name, sc) in &self.index {
            if !sc.connected {
                continue;
            }
            let hashes = sc.hashes();
            let n = hashes.len() as u32;
            let stored: Vec<(u32, Obj)> = self
                .store
                .iter()
                .filter(|((c, _), _)| c == name)
                .map(|((_, p), o)| (*p, *o))
                .collect();
            let want: Vec<(u32, Obj)> = hashes
                .iter()
                .enumerate()
                .map(|(i, h)| (i as u32, (n, *h)))
                .collect();
            assert_eq!(
                stored, want,
                "{name}'s latest report is not what the store holds"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Over random event sequences: never two writes of one cluster in
    /// flight, no deletion beside a write of its cluster and no write of a
    /// cluster whose deletion waits or runs, a pruned cluster never
    /// re-created by a late write, no write of a connected cluster for its
    /// liveness, a stream's final last-seen written at most once, and once
    /// writes complete, every change of a connected cluster persisted.
    #[test]
    fn the_writer_keeps_its_invariants(events in proptest::collection::vec(event(), 1..80)) {
        let mut sim = Sim::new();
        sim.drive();
        for ev in &events {
            sim.step(ev);
        }
        sim.settle();
    }
}

/// The pipeline follows the budget (Little's law at the expected round
/// trip), within its floor and cap; no budget or a nonsense one: the cap.
#[test]
fn writes_in_flight_follow_the_budget() {
    let table: &[(f64, usize)] = &[
        (0.0, MAX_WRITES_IN_FLIGHT),
        (-1.0, MAX_WRITES_IN_FLIGHT),
        (f64::NAN, MAX_WRITES_IN_FLIGHT),
        (f64::INFINITY, MAX_WRITES_IN_FLIGHT),
        (0.5, MIN_WRITES_IN_FLIGHT),
        (5.0, MIN_WRITES_IN_FLIGHT),
        (16.0, 16),
        (16.5, 17),
        (50.0, 50),
        (100.0, 100),
        (128.0, 128),
        (1000.0, MAX_WRITES_IN_FLIGHT),
    ];
    for &(qps, want) in table {
        assert_eq!(writes_in_flight(qps), want, "qps {qps}");
    }
}
