//! Liveness out of the per-cluster store, the pure half: what a hub
//! replica's liveness record holds and how it is encoded, and what every
//! replica takes from the others' records as each cluster's last-seen.
//!
//! Refreshing each connected cluster's `ClusterReport` head to move its
//! `lastSeenTime` forward cost one API write per cluster per refresh
//! (117 writes/s at 3,500 clusters). Instead, a connected cluster is seen
//! "now" for as long as the replica serving it is alive: each replica
//! keeps one record of the clusters it serves (a set, rewritten only when
//! the set changes) and one heartbeat (a Lease it renews every few
//! seconds). A cluster's last-seen, for every other replica, is the latest
//! heartbeat of a replica whose record lists it; its `ClusterReport` gets
//! its last-seen only when its stream ends. So liveness costs API writes
//! in proportion to replicas, connects and disconnects, never to the fleet.
//!
//! The record: ConfigMaps labelled [`LABEL`], key [`CLUSTERS_KEY`] one
//! line per cluster, `<name> <connected since, ms since the epoch>`, in
//! name order. A line is at most [`MAX_LINE_BYTES`] (a 253-character
//! name, a space, a 20-digit number, a newline); a ConfigMap's data is
//! limited to 1 MiB (etcd takes a 1.5 MiB request), so a chunk holds
//! [`CHUNK_BUDGET_BYTES`] of lines, at least
//! `CHUNK_BUDGET_BYTES / MAX_LINE_BYTES` = 921,600 / 275 = 3,351 clusters
//! of the longest names (a 20-character name and a 13-digit time take 35
//! bytes: 26,331 a chunk), and a record of `n` served clusters needs at
//! most `ceil(n / 3,351)` chunks: 10,000 clusters fit in 3 chunks whatever
//! their names, in one with names up to 75 characters.

use std::collections::{BTreeMap, BTreeSet};

use gwhub_model::limits::MAX_CLUSTER_NAME_LEN;

/// The label on every replica's liveness objects (Lease and ConfigMaps):
/// `kubectl get leases,configmaps -l gwhub.io/liveness`.
pub const LABEL: &str = "gwhub.io/liveness";
/// [`LABEL`]'s value.
pub const LABEL_VALUE: &str = "replica";
/// The annotation a replica's heartbeat Lease gets when its process ends
/// gracefully: no longer alive, though its last beat still dates its
/// record's clusters.
pub const ENDED_ANNOTATION: &str = "gwhub.io/ended";
/// The ConfigMap key naming the replica (its identity, the Lease's holder).
pub const REPLICA_KEY: &str = "replica";
/// The ConfigMap key holding the chunk's index (0: the first).
pub const CHUNK_KEY: &str = "chunk";
/// The ConfigMap key holding how many chunks the record has.
pub const CHUNKS_KEY: &str = "chunks";
/// The ConfigMap key holding the served clusters, one line each.
pub const CLUSTERS_KEY: &str = "clusters";

/// The longest line: a name, a space, an `i64` in decimal, a newline.
pub const MAX_LINE_BYTES: usize = MAX_CLUSTER_NAME_LEN + 1 + 20 + 1;
/// The lines one chunk holds at most, leaving room within a ConfigMap's
/// 1 MiB for the other keys and the metadata.
pub const CHUNK_BUDGET_BYTES: usize = 900 * 1024;

/// A process's liveness identity: its replica's (the Lease election's
/// identity) with the process's start (ms), so a process restarted under
/// the same identity (a container's pid 1 in the same pod) reads its
/// predecessor's record as another replica's, not as its own.
pub fn process_identity(replica: &str, started_millis: i64) -> String {
    format!("{replica}@{started_millis}")
}

/// The replica a liveness identity belongs to ([`process_identity`]
/// undone; an identity without a start is its own replica).
pub fn replica_of(identity: &str) -> &str {
    match identity.rsplit_once('@') {
        Some((replica, started))
            if !started.is_empty() && started.bytes().all(|b| b.is_ascii_digit() || b == b'-') =>
        {
            replica
        }
        _ => identity,
    }
}

/// The name of a replica's Lease (chunk 0) and of its record's chunks: the
/// identity made a DNS subdomain (lowercase; anything else `-`), bounded,
/// with a hash of the identity so two identities never share objects.
pub fn object_name(identity: &str, chunk: u32) -> String {
    let clean = gwhub_model::cluster::dns_safe(identity, 180);
    let hash = gwhub_model::cluster::fnv(identity.bytes()) as u32;
    let base = format!("gwhub-replica-{clean}-{hash:08x}");
    if chunk == 0 {
        base
    } else {
        format!("{base}-{chunk}")
    }
}

/// The served clusters (name -> connected since, ms) as chunks of lines,
/// each within `budget` bytes, in name order; at least one (empty) chunk.
pub fn encode(served: &BTreeMap<String, i64>, budget: usize) -> Vec<String> {
    let mut chunks = vec![String::new()];
    for (name, since) in served {
        let line = format!("{name} {since}\n");
        let fits = chunks
            .last()
            .is_some_and(|c| c.is_empty() || c.len() + line.len() <= budget);
        if !fits {
            chunks.push(String::new());
        }
        if let Some(c) = chunks.last_mut() {
            c.push_str(&line);
        }
    }
    chunks
}

/// One chunk's lines back; lines that are not `<name> <ms>` are counted
/// in the second value and skipped.
pub fn decode(text: &str) -> (BTreeMap<String, i64>, usize) {
    let mut out = BTreeMap::new();
    let mut bad = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let parsed = line
            .split_once(' ')
            .and_then(|(n, t)| Some((n, t.trim().parse::<i64>().ok()?)))
            .filter(|(n, _)| !n.is_empty() && n.len() <= MAX_CLUSTER_NAME_LEN);
        match parsed {
            Some((n, t)) => {
                out.insert(n.to_owned(), t);
            }
            None => bad += 1,
        }
    }
    (out, bad)
}

/// One stored chunk of a replica's record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// How many chunks the record had when this one was written.
    pub chunks: u32,
    pub served: BTreeMap<String, i64>,
}

/// The clusters a replica's record lists: the chunks written for the
/// count chunk 0 names (a chunk written for another count is from a
/// rewrite in progress or left over, and does not count). `None`: no
/// chunk 0.
pub fn assemble(chunks: &BTreeMap<u32, Chunk>) -> Option<BTreeSet<String>> {
    let n = chunks.get(&0)?.chunks.max(1);
    Some(
        chunks
            .iter()
            .filter(|(i, c)| **i < n && c.chunks.max(1) == n)
            .flat_map(|(_, c)| c.served.keys().cloned())
            .collect(),
    )
}

/// One replica as the others see it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replica {
    /// Its heartbeat (the Lease's renewTime, ms); `None`: no Lease seen.
    pub heartbeat_millis: Option<i64>,
    /// The clusters its record lists (`None`: no record seen).
    pub served: Option<BTreeSet<String>>,
}

/// Each cluster's last-seen by the replicas' records: the latest heartbeat
/// of a replica that lists it, leaving out replica `own` (this process,
/// which knows its own clusters first hand). A replica without a heartbeat
/// or a record vouches for nothing. Whether that is stale is the index's
/// rule (`now - last_seen >= --stale-after`), as for a cluster heard here.
pub fn last_seen(replicas: &BTreeMap<String, Replica>, own: &str) -> BTreeMap<String, i64> {
    let mut out: BTreeMap<String, i64> = BTreeMap::new();
    for (identity, r) in replicas {
        if identity == own {
            continue;
        }
        let (Some(beat), Some(served)) = (r.heartbeat_millis, &r.served) else {
            continue;
        };
        for cluster in served {
            let e = out.entry(cluster.clone()).or_insert(beat);
            *e = (*e).max(beat);
        }
    }
    out
}

/// The ended replicas whose objects may go: heartbeat older than
/// `retention_millis` (so not a live replica's hiccup), and every cluster
/// their record lists seen as late elsewhere: in a record with a later
/// heartbeat (this replica's too), or in its stored report (`stored`: its
/// `lastSeenTime`, ms; `None`: no report, the cluster was deregistered).
/// Until then the record is the only word on when its clusters were last
/// seen, and stays. A replica without a heartbeat is left alone (a new
/// one writes its record before its first renewal).
pub fn collectable(
    replicas: &BTreeMap<String, Replica>,
    own: &str,
    now_millis: i64,
    retention_millis: i64,
    stored: impl Fn(&str) -> Option<i64>,
) -> Vec<String> {
    replicas
        .iter()
        .filter(|(id, _)| id.as_str() != own)
        .filter_map(|(id, r)| {
            let beat = r.heartbeat_millis?;
            if now_millis.saturating_sub(beat) < retention_millis {
                return None;
            }
            let others = |c: &str| {
                replicas
                    .iter()
                    .filter(|(o, _)| *o != id)
                    .filter(|(_, o)| o.served.as_ref().is_some_and(|s| s.contains(c)))
                    .filter_map(|(_, o)| o.heartbeat_millis)
                    .max()
            };
            let redundant = r.served.iter().flatten().all(|c| {
                stored(c).is_none_or(|t| t >= beat) || others(c).is_some_and(|t| t > beat)
            });
            redundant.then(|| id.clone())
        })
        .collect()
}

/// What this replica's record is to list: the clusters streaming here and
/// not stale here (`(name, connected, stale)`), each with when it was
/// first listed (kept from `before`, else `now_millis`).
pub fn served(
    clusters: impl IntoIterator<Item = (String, bool, bool)>,
    before: &BTreeMap<String, i64>,
    now_millis: i64,
) -> BTreeMap<String, i64> {
    clusters
        .into_iter()
        .filter(|(_, connected, stale)| *connected && !*stale)
        .map(|(name, _, _)| {
            let since = before.get(&name).copied().unwrap_or(now_millis);
            (name, since)
        })
        .collect()
}

/// What a restarted hub still waits for before it writes hub Gateway
/// status: the clusters a replica no longer alive served (a crashed or
/// ended process, this one's previous incarnation among them) that are
/// not back yet. Until they are, its view of them is the store's, which
/// lags the ingest (at 10,000 clusters some were not even stored yet):
/// writing status from it would show a shape the fleet never had.
///
/// A replica is alive when it has beaten after this process started
/// (`started_millis`) and has not ended (`ended`): a process killed just
/// before this one started still has a recent heartbeat, but never a
/// later one. A cluster a dead replica's record lists is awaited until
/// it is back: it reported to this process (`heard_here`), or a live
/// replica's record lists it (it reconnected there; its report reaches
/// this replica through the store with the store's usual lag, as in
/// steady state), or it has gone stale anyway (its last-seen, the latest
/// beat of a replica listing it, is `stale_after_millis` old: showing it
/// stale is the truth). Nothing is awaited once `stale_after_millis`
/// has passed since the start: every beat before it is stale by then, so
/// this bounds the wait whatever the records say (or if they never list).
///
/// Not covered: a cluster that connected to the dead process after its
/// last record write (records are rewritten at most every 2 s) is not
/// awaited, and one back on a live replica is not awaited until that
/// replica's fresh report is stored (the store's lag in steady state).
/// The gate is global, not per hub Gateway: which hub Gateways a missing
/// cluster reports is what the lagging store does not know.
pub fn awaited(
    replicas: &BTreeMap<String, Replica>,
    ended: &BTreeSet<String>,
    own: &str,
    started_millis: i64,
    now_millis: i64,
    stale_after_millis: i64,
    heard_here: impl Fn(&str) -> bool,
) -> BTreeSet<String> {
    if now_millis.saturating_sub(started_millis) >= stale_after_millis {
        return BTreeSet::new();
    }
    let alive = |id: &str, r: &Replica| {
        id != own && !ended.contains(id) && r.heartbeat_millis.is_some_and(|b| b > started_millis)
    };
    let mut served_alive: BTreeSet<&str> = BTreeSet::new();
    // Cluster -> the latest beat of a dead replica listing it.
    let mut dead: BTreeMap<&str, i64> = BTreeMap::new();
    for (id, r) in replicas.iter().filter(|(id, _)| id.as_str() != own) {
        let Some(served) = &r.served else { continue };
        if alive(id, r) {
            served_alive.extend(served.iter().map(String::as_str));
            continue;
        }
        // Without a heartbeat a record vouches for nothing (as in
        // [`last_seen`]): its clusters were not fresh anywhere.
        let Some(beat) = r.heartbeat_millis else {
            continue;
        };
        for c in served {
            let e = dead.entry(c.as_str()).or_insert(beat);
            *e = (*e).max(beat);
        }
    }
    dead.into_iter()
        .filter(|(c, _)| !served_alive.contains(c))
        .filter(|(_, beat)| now_millis.saturating_sub(*beat) < stale_after_millis)
        .filter(|(c, _)| !heard_here(c))
        .map(|(c, _)| c.to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_identity_names_its_replica() {
        let id = process_identity("hub-a@pod", 1_764_000_000_000);
        assert_eq!(id, "hub-a@pod@1764000000000");
        assert_eq!(replica_of(&id), "hub-a@pod");
        assert_eq!(replica_of("hub-a"), "hub-a");
        assert_eq!(replica_of("hub-a@"), "hub-a@");
        assert_eq!(replica_of("hub-a@b"), "hub-a@b");
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    /// A replica as a table row: identity, heartbeat, served clusters.
    type Row<'a> = (&'a str, Option<i64>, Option<&'a [&'a str]>);

    fn replicas_of(rows: &[Row<'_>]) -> BTreeMap<String, Replica> {
        rows.iter()
            .map(|(id, beat, served)| {
                (
                    id.to_string(),
                    Replica {
                        heartbeat_millis: *beat,
                        served: served.map(set),
                    },
                )
            })
            .collect()
    }

    #[test]
    fn last_seen_is_the_latest_heartbeat_of_a_replica_listing_the_cluster() {
        type Case = (
            &'static str,
            &'static [(&'static str, Option<i64>, Option<&'static [&'static str]>)],
            &'static [(&'static str, i64)],
        );
        let cases: &[Case] = &[
            ("no replicas: nothing", &[], &[]),
            (
                "one live replica vouches for its clusters",
                &[("b", Some(100), Some(&["east", "west"]))],
                &[("east", 100), ("west", 100)],
            ),
            (
                "a cluster listed twice (it moved): the later heartbeat",
                &[
                    ("b", Some(100), Some(&["east"])),
                    ("c", Some(300), Some(&["east", "north"])),
                ],
                &[("east", 300), ("north", 300)],
            ),
            (
                "this replica's own record is left out",
                &[
                    ("a", Some(900), Some(&["east"])),
                    ("b", Some(100), Some(&["west"])),
                ],
                &[("west", 100)],
            ),
            (
                "no Lease or no record: vouches for nothing",
                &[
                    ("b", None, Some(&["east"])),
                    ("c", Some(100), None),
                    ("d", Some(50), Some(&[])),
                ],
                &[],
            ),
            (
                "a dead replica's clusters keep its last heartbeat (they go stale by it)",
                &[("b", Some(10), Some(&["east"]))],
                &[("east", 10)],
            ),
        ];
        for (name, replicas, want) in cases {
            let replicas = replicas_of(replicas);
            let want: BTreeMap<String, i64> =
                want.iter().map(|(c, t)| (c.to_string(), *t)).collect();
            assert_eq!(last_seen(&replicas, "a"), want, "{name}");
        }
    }

    #[test]
    fn an_ended_replicas_record_goes_once_nothing_depends_on_it() {
        type Case = (
            &'static str,
            &'static [(&'static str, Option<i64>, Option<&'static [&'static str]>)],
            &'static [(&'static str, i64)],
            &'static [&'static str],
        );
        // now 1000, retention 100; stored lastSeenTimes; "gone" has no report.
        let cases: &[Case] = &[
            (
                "live replicas stay",
                &[("b", Some(950), Some(&["east"]))],
                &[("east", 0)],
                &[],
            ),
            (
                "ended, its cluster's report older: the record is its only word",
                &[("b", Some(100), Some(&["east"]))],
                &[("east", 50)],
                &[],
            ),
            (
                "ended, its cluster's report as late (written at its disconnect)",
                &[("b", Some(100), Some(&["east"]))],
                &[("east", 100)],
                &["b"],
            ),
            (
                "ended, its cluster served since by a live replica",
                &[
                    ("b", Some(100), Some(&["east"])),
                    ("c", Some(990), Some(&["east"])),
                ],
                &[("east", 50)],
                &["b"],
            ),
            (
                "ended, its cluster served since by this replica",
                &[
                    ("b", Some(100), Some(&["east"])),
                    ("a", Some(990), Some(&["east"])),
                ],
                &[("east", 50)],
                &["b"],
            ),
            (
                "ended, listing nothing, or a deregistered cluster",
                &[
                    ("b", Some(100), Some(&[])),
                    ("c", Some(100), None),
                    ("d", Some(100), Some(&["gone"])),
                ],
                &[],
                &["b", "c", "d"],
            ),
            (
                "no heartbeat (a new replica before its first renewal), or this one: left",
                &[("b", None, Some(&[])), ("a", Some(1), Some(&[]))],
                &[],
                &[],
            ),
        ];
        for (name, replicas, stored, want) in cases {
            let replicas = replicas_of(replicas);
            let stored: BTreeMap<&str, i64> = stored.iter().copied().collect();
            let got = collectable(&replicas, "a", 1000, 100, |c| stored.get(c).copied());
            assert_eq!(got, want.to_vec(), "{name}");
        }
    }

    #[test]
    fn the_record_lists_connected_fresh_clusters_since_first_listed() {
        let before = BTreeMap::from([("east".to_string(), 5)]);
        let got = served(
            [
                ("east".to_string(), true, false),
                ("west".to_string(), true, false),
                ("gone".to_string(), false, false),
                ("silent".to_string(), true, true),
            ],
            &before,
            42,
        );
        let want = BTreeMap::from([("east".to_string(), 5), ("west".to_string(), 42)]);
        assert_eq!(got, want);
    }

    #[test]
    fn records_round_trip_and_skip_bad_lines() {
        let served: BTreeMap<String, i64> = (0..50)
            .map(|i| (format!("cluster-{i}"), 1_700_000_000_000 + i))
            .collect();
        let chunks = encode(&served, CHUNK_BUDGET_BYTES);
        assert_eq!(chunks.len(), 1);
        assert_eq!(decode(&chunks[0]), (served, 0));
        assert_eq!(encode(&BTreeMap::new(), 100), vec![String::new()]);
        let (got, bad) = decode("east 12\nnonsense\nwest x\n\n north 3\nsouth 4");
        let want = BTreeMap::from([("east".to_string(), 12), ("south".to_string(), 4)]);
        assert_eq!((got, bad), (want, 3));
    }

    /// The bound in the module doc: 10,000 of the longest names fit in 3
    /// chunks, each within a ConfigMap's 1 MiB; chunks reassemble whole.
    #[test]
    fn ten_thousand_longest_names_fit_in_three_chunks() {
        let served: BTreeMap<String, i64> = (0..10_000)
            .map(|i| {
                let name = format!("{i:05}{}", "x".repeat(MAX_CLUSTER_NAME_LEN - 5));
                (name, i64::MAX)
            })
            .collect();
        let chunks = encode(&served, CHUNK_BUDGET_BYTES);
        assert_eq!(chunks.len(), 3);
        assert_eq!(
            CHUNK_BUDGET_BYTES / MAX_LINE_BYTES,
            3_351,
            "the module doc's figure"
        );
        let n = chunks.len() as u32;
        let mut stored = BTreeMap::new();
        for (i, c) in chunks.iter().enumerate() {
            assert!(c.len() <= CHUNK_BUDGET_BYTES && c.len() < 1024 * 1024);
            let (got, bad) = decode(c);
            assert_eq!(bad, 0);
            stored.insert(
                i as u32,
                Chunk {
                    chunks: n,
                    served: got,
                },
            );
        }
        let names: BTreeSet<String> = served.keys().cloned().collect();
        assert_eq!(assemble(&stored), Some(names.clone()));
        // A chunk left from another count does not count; no chunk 0: no record.
        stored.insert(
            3,
            Chunk {
                chunks: 4,
                served: BTreeMap::from([("stray".to_string(), 1)]),
            },
        );
        assert_eq!(assemble(&stored), Some(names));
        stored.remove(&0);
        assert_eq!(assemble(&stored), None);
    }

    #[test]
    fn object_names_are_dns_names_and_distinct() {
        let a = object_name("Hub-Pod_17", 0);
        assert!(a.starts_with("gwhub-replica-hub-pod-17-"), "{a}");
        assert_ne!(a, object_name("hub-pod-17", 0));
        assert_eq!(object_name("Hub-Pod_17", 2), format!("{a}-2"));
        let long = object_name(&"a".repeat(400), 7);
        assert!(long.len() <= 253, "{}", long.len());
        assert!(
            long.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
    }
    #[test]
    fn a_restarted_hub_awaits_the_dead_replicas_clusters_until_back() {
        type Case = (
            &'static str,
            &'static [(&'static str, Option<i64>, Option<&'static [&'static str]>)],
            &'static [&'static str],
            &'static [&'static str],
            i64,
            &'static [&'static str],
        );
        // This process "a" started at 1000, stale-after 100; rows are
        // (replica, heartbeat, record), then ended replicas, clusters
        // heard here, now, and what is awaited.
        let cases: &[Case] = &[
            (
                "nothing recorded: nothing awaited",
                &[],
                &[],
                &[],
                1010,
                &[],
            ),
            (
                "the killed predecessor (beat before the start): its clusters",
                &[("old", Some(990), Some(&["east", "west"]))],
                &[],
                &[],
                1010,
                &["east", "west"],
            ),
            (
                "one reported here: the other still awaited",
                &[("old", Some(990), Some(&["east", "west"]))],
                &[],
                &["east"],
                1010,
                &["west"],
            ),
            (
                "all reported here: caught up",
                &[("old", Some(990), Some(&["east", "west"]))],
                &[],
                &["east", "west"],
                1010,
                &[],
            ),
            (
                "one listed by a live replica (beat after the start): back there",
                &[
                    ("old", Some(990), Some(&["east", "west"])),
                    ("b", Some(1005), Some(&["west"])),
                ],
                &[],
                &[],
                1010,
                &["east"],
            ),
            (
                "a replica that has not beaten since the start is not alive yet",
                &[
                    ("old", Some(990), Some(&["east"])),
                    ("b", Some(995), Some(&["east"])),
                ],
                &[],
                &[],
                1010,
                &["east"],
            ),
            (
                "an ended replica is not alive, even beating after the start",
                &[("b", Some(1005), Some(&["east"]))],
                &["b"],
                &[],
                1010,
                &["east"],
            ),
            (
                "stale anyway (last beat stale-after ago): not awaited",
                &[
                    ("old", Some(990), Some(&["east"])),
                    ("older", Some(920), Some(&["west"])),
                ],
                &[],
                &[],
                1020,
                &["east"],
            ),
            (
                "listed by two dead replicas: the later beat dates it",
                &[
                    ("old", Some(990), Some(&["east"])),
                    ("older", Some(900), Some(&["east"])),
                ],
                &[],
                &[],
                1050,
                &["east"],
            ),
            (
                "no heartbeat or no record: vouches for nothing",
                &[("old", None, Some(&["east"])), ("older", Some(990), None)],
                &[],
                &[],
                1010,
                &[],
            ),
            (
                "this process's own record is not a dead replica's",
                &[("a", Some(1005), Some(&["east"]))],
                &[],
                &[],
                1010,
                &[],
            ),
            (
                "stale-after since the start: nothing awaited, whatever the clocks",
                &[("old", Some(1099), Some(&["east"]))],
                &[],
                &[],
                1100,
                &[],
            ),
        ];
        for (name, replicas, ended, heard, now, want) in cases {
            let replicas = replicas_of(replicas);
            let ended = set(ended);
            let heard = set(heard);
            let got = awaited(&replicas, &ended, "a", 1000, *now, 100, |c| {
                heard.contains(c)
            });
            assert_eq!(got, set(want), "{name}");
        }
    }

    proptest::proptest! {
        /// The wait ends: never past stale-after since the start, never
        /// for a cluster heard here or served by a live replica, and only
        /// for clusters some record lists.
        #[test]
        fn the_wait_is_bounded_and_only_for_clusters_not_back(
            rows in proptest::collection::vec(
                (0u8..4, proptest::option::of(800i64..1200), proptest::collection::btree_set(0u8..6, 0..4), proptest::bool::ANY),
                0..6,
            ),
            heard in proptest::collection::btree_set(0u8..6, 0..3),
            now in 1000i64..1300,
        ) {
            let mut replicas = BTreeMap::new();
            let mut ended = BTreeSet::new();
            for (id, beat, served, gone) in &rows {
                let id = format!("r{id}");
                if *gone {
                    ended.insert(id.clone());
                }
                replicas.insert(id, Replica {
                    heartbeat_millis: *beat,
                    served: Some(served.iter().map(|c| format!("c{c}")).collect()),
                });
            }
            let heard: BTreeSet<String> = heard.iter().map(|c| format!("c{c}")).collect();
            let got = awaited(&replicas, &ended, "r0", 1000, now, 100, |c| heard.contains(c));
            if now >= 1100 {
                proptest::prop_assert!(got.is_empty());
            }
            for c in &got {
                proptest::prop_assert!(!heard.contains(c));
                let listed_live = replicas.iter().any(|(id, r)| {
                    id != "r0" && !ended.contains(id)
                        && r.heartbeat_millis.is_some_and(|b| b > 1000)
                        && r.served.as_ref().is_some_and(|s| s.contains(c))
                });
                proptest::prop_assert!(!listed_live);
                let listed = replicas.iter().any(|(id, r)| {
                    id != "r0" && r.served.as_ref().is_some_and(|s| s.contains(c))
                });
                proptest::prop_assert!(listed);
            }
        }
    }
}
