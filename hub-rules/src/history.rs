//! Status history rules: which condition changes of a hub Gateway (its
//! aggregated conditions and each cluster's report of it) count as a
//! transition, and the bounded ring of the last transitions kept per hub
//! Gateway. Pure: the caller gives the time and the conditions.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use gateway_api::apis::standard::gateways::GatewayStatus;

use crate::aggregate::ReportedStatus;

/// Default of `gwhub serve --gateway-history`: transitions kept per hub
/// Gateway.
pub const DEFAULT_CAPACITY: usize = 64;
/// Largest `--gateway-history`.
pub const MAX_CAPACITY: usize = 1024;
/// Longest message a transition keeps (bytes, cut at a character
/// boundary and ended with "..."): a bound on the ring's memory, since
/// aggregated messages join many clusters' messages.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// Where a condition lives: the cluster ("" for the hub Gateway's own
/// aggregated conditions) and the condition type.
pub type Slot = (String, String);

/// A condition as far as a transition is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    pub status: String,
    pub reason: String,
    pub message: String,
}

/// Every condition of a hub Gateway and of its clusters' reports.
pub type Conditions = BTreeMap<Slot, State>;

/// One change of one condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    pub time_millis: i64,
    /// "" for the hub Gateway's aggregated condition.
    pub cluster: String,
    pub condition_type: String,
    /// `None` when the condition went away.
    pub now: Option<State>,
    /// `(status, reason)` before; `None` when the condition is new.
    pub before: Option<(String, String)>,
}

/// The conditions the history follows: the hub Gateway's aggregated ones
/// (cluster "") and each cluster's report's Gateway conditions (listener
/// conditions are summed up in the Gateway's own, e.g. `DNSReady`).
pub fn conditions<'a>(
    aggregated: &GatewayStatus,
    reports: impl IntoIterator<Item = (&'a str, &'a ReportedStatus)>,
) -> Conditions {
    let mut all = Conditions::new();
    let mut add = |cluster: &str, type_: &str, status: &str, reason: &str, message: &str| {
        all.insert(
            (cluster.to_owned(), type_.to_owned()),
            State {
                status: status.to_owned(),
                reason: reason.to_owned(),
                message: message.to_owned(),
            },
        );
    };
    for c in aggregated.conditions.iter().flatten() {
        add("", &c.type_, &c.status, &c.reason, &c.message);
    }
    for (cluster, status) in reports {
        for c in status.conditions() {
            add(cluster, c.type_(), c.status(), c.reason(), c.message());
        }
    }
    all
}

/// `message` cut to [`MAX_MESSAGE_BYTES`].
pub fn cut(message: &str) -> String {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message.to_owned();
    }
    let mut end = MAX_MESSAGE_BYTES - 3;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &message[..end])
}

/// Each condition's status and reason as last recorded, in slot order:
/// cluster, type, status, reason. The strings are shared through the
/// ring's [`Pool`], so what repeats across a fleet (a cluster's name in each
/// of its slots, the types, statuses and reasons every cluster reports) is
/// kept once per hub Gateway, and an entry is four pointers.
#[derive(Clone, Debug, Default)]
pub struct Last(Box<[[Arc<str>; 4]]>);

impl Last {
    /// `conditions`' status and reason of each slot, with strings from `pool`.
    pub fn new(conditions: &Conditions, pool: &mut Pool) -> Self {
        Last(
            conditions
                .iter()
                .map(|((cluster, type_), s)| {
                    [
                        pool.get(cluster),
                        pool.get(type_),
                        pool.get(&s.status),
                        pool.get(&s.reason),
                    ]
                })
                .collect(),
        )
    }

    /// The status and reason of `(cluster, type_)`, if recorded.
    pub fn get(&self, cluster: &str, type_: &str) -> Option<(&str, &str)> {
        let at = self
            .0
            .binary_search_by(|e| (&*e[0], &*e[1]).cmp(&(cluster, type_)))
            .ok()?;
        let e = &self.0[at];
        Some((&*e[2], &*e[3]))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Shared strings: one `Arc<str>` per distinct text in use. [`Pool::sweep`]
/// frees the ones nothing else holds any more (a cluster that stopped
/// reporting, a reason no cluster gives now), so it never outgrows what is
/// in use.
#[derive(Clone, Debug, Default)]
pub struct Pool(BTreeSet<Arc<str>>);

impl Pool {
    /// The shared copy of `text`.
    pub fn get(&mut self, text: &str) -> Arc<str> {
        if let Some(s) = self.0.get(text) {
            return s.clone();
        }
        let s: Arc<str> = Arc::from(text);
        self.0.insert(s.clone());
        s
    }

    /// Frees the strings only the pool holds.
    pub fn sweep(&mut self) {
        self.0.retain(|s| Arc::strong_count(s) > 1);
    }

    /// [`Pool::sweep`] of `dropped` alone: strings a holder let go of,
    /// freed if only the pool holds them now.
    pub fn release(&mut self, mut dropped: Vec<Arc<str>>) {
        dropped.sort_unstable_by_key(|s| Arc::as_ptr(s).cast::<u8>());
        dropped.dedup_by(|a, b| Arc::ptr_eq(a, b));
        for s in dropped {
            // This copy and the pool's.
            if Arc::strong_count(&s) == 2 {
                self.0.remove(&*s);
            }
        }
    }

    /// Distinct strings held.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What counts as a transition from `before` to `after`: a condition whose
/// status or reason changed, that appeared, or that went away (a change of
/// message alone is not one: aggregated messages name report ages and
/// would fill the ring). In slot order.
pub fn transitions(before: &Last, after: &Conditions, time_millis: i64) -> Vec<Transition> {
    let mut out = Vec::new();
    for ((cluster, type_), now) in after {
        let old = before.get(cluster, type_);
        if old.is_some_and(|(s, r)| s == now.status && r == now.reason) {
            continue;
        }
        out.push(Transition {
            time_millis,
            cluster: cluster.clone(),
            condition_type: type_.clone(),
            now: Some(State {
                message: cut(&now.message),
                ..now.clone()
            }),
            before: old.map(|(s, r)| (s.to_owned(), r.to_owned())),
        });
    }
    // Both in slot order: walk them together.
    let mut present = after.keys().peekable();
    for e in &before.0 {
        let slot = (&*e[0], &*e[1]);
        while present
            .peek()
            .is_some_and(|(c, t)| (c.as_str(), t.as_str()) < slot)
        {
            present.next();
        }
        if present
            .peek()
            .is_some_and(|(c, t)| (c.as_str(), t.as_str()) == slot)
        {
            continue;
        }
        out.push(Transition {
            time_millis,
            cluster: slot.0.to_owned(),
            condition_type: slot.1.to_owned(),
            now: None,
            before: Some((e[2].to_string(), e[3].to_string())),
        });
    }
    out
}

/// The last transitions of one hub Gateway, at most `capacity`.
#[derive(Clone, Debug, Default)]
pub struct Ring {
    entries: VecDeque<Transition>,
    /// Each condition's status and reason as last recorded.
    last: Last,
    /// The strings of `last`.
    pool: Pool,
}

impl Ring {
    /// Records the transitions from the last recorded conditions to `now`;
    /// the oldest entries beyond `capacity` are dropped. Returns how many
    /// transitions were recorded.
    pub fn record(&mut self, now: &Conditions, time_millis: i64, capacity: usize) -> usize {
        let ts = transitions(&self.last, now, time_millis);
        let n = ts.len();
        if n == 0 {
            return 0;
        }
        self.last = Last::new(now, &mut self.pool);
        self.pool.sweep();
        // Only the newest `capacity` can stay: the ring never grows past
        // them (a first report of 1,000 clusters is thousands at once).
        self.entries
            .extend(ts.into_iter().skip(n.saturating_sub(capacity)));
        while self.entries.len() > capacity {
            self.entries.pop_front();
        }
        n
    }

    /// [`Ring::record`] for a change confined to `clusters`: `now` holds
    /// the hub Gateway's own conditions (cluster "") and those clusters'
    /// only, every other slot is as last recorded. Records exactly what
    /// `record` would with every slot, at the cost of these clusters'
    /// slots (and moving the other slots' pointers), not a pass over
    /// every cluster's conditions.
    pub fn record_clusters(
        &mut self,
        now: &Conditions,
        clusters: &BTreeSet<&str>,
        time_millis: i64,
        capacity: usize,
    ) -> usize {
        let mut covered: BTreeSet<&str> = clusters.clone();
        covered.insert("");
        covered.extend(now.keys().map(|(c, _)| c.as_str()));
        // Each covered cluster's slots in `last` (sorted by cluster, type).
        let ranges: Vec<(usize, usize)> = covered
            .iter()
            .map(|c| {
                let from = self.last.0.partition_point(|e| &*e[0] < *c);
                let to = from + self.last.0[from..].partition_point(|e| &*e[0] == *c);
                (from, to)
            })
            .collect();
        let mut ts = Vec::new();
        for ((cluster, type_), state) in now {
            let old = self.last.get(cluster, type_);
            if old.is_some_and(|(s, r)| s == state.status && r == state.reason) {
                continue;
            }
            ts.push(Transition {
                time_millis,
                cluster: cluster.clone(),
                condition_type: type_.clone(),
                now: Some(State {
                    message: cut(&state.message),
                    ..state.clone()
                }),
                before: old.map(|(s, r)| (s.to_owned(), r.to_owned())),
            });
        }
        for &(from, to) in &ranges {
            for e in &self.last.0[from..to] {
                if now.contains_key(&(e[0].to_string(), e[1].to_string())) {
                    continue;
                }
                ts.push(Transition {
                    time_millis,
                    cluster: e[0].to_string(),
                    condition_type: e[1].to_string(),
                    now: None,
                    before: Some((e[2].to_string(), e[3].to_string())),
                });
            }
        }
        let n = ts.len();
        if n == 0 {
            return 0;
        }
        // The covered clusters' slots replaced, from the last range back so
        // the earlier ranges stay where they are.
        let mut last = std::mem::take(&mut self.last.0).into_vec();
        // The strings the replaced slots held: only those can be left to
        // the pool alone (a sweep of the whole pool would be a pass over
        // every cluster's name).
        let mut dropped: Vec<Arc<str>> = Vec::new();
        for (cluster, &(from, to)) in covered.iter().zip(&ranges).rev() {
            let slots: Vec<[Arc<str>; 4]> = now
                .range((cluster.to_string(), String::new())..)
                .take_while(|((c, _), _)| c.as_str() == *cluster)
                .map(|((c, t), s)| {
                    [
                        self.pool.get(c),
                        self.pool.get(t),
                        self.pool.get(&s.status),
                        self.pool.get(&s.reason),
                    ]
                })
                .collect();
            match last.get_mut(from..to) {
                // As many slots as before (the usual change: statuses
                // flip): replaced in place, the others not moved.
                Some(old) if old.len() == slots.len() => {
                    for (old, new) in old.iter_mut().zip(slots) {
                        dropped.extend(std::mem::replace(old, new));
                    }
                }
                _ => dropped.extend(last.splice(from..to, slots).flatten()),
            }
        }
        self.last = Last(last.into_boxed_slice());
        self.pool.release(dropped);
        self.entries
            .extend(ts.into_iter().skip(n.saturating_sub(capacity)));
        while self.entries.len() > capacity {
            self.entries.pop_front();
        }
        n
    }

    pub fn latest(&self, limit: usize) -> Vec<Transition> {
        let skip = match limit {
            0 => 0,
            n => self.entries.len().saturating_sub(n),
        };
        self.entries.iter().skip(skip).cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(status: &str, reason: &str) -> State {
        State {
            status: status.into(),
            reason: reason.into(),
            message: format!("{reason} message"),
        }
    }

    fn conds(list: &[(&str, &str, &str, &str)]) -> Conditions {
        list.iter()
            .map(|(c, t, s, r)| ((c.to_string(), t.to_string()), st(s, r)))
            .collect()
    }

    fn short(ts: &[Transition]) -> Vec<String> {
        ts.iter()
            .map(|t| {
                let before = t
                    .before
                    .as_ref()
                    .map(|(s, r)| format!("{s}/{r}"))
                    .unwrap_or("-".into());
                let now = t
                    .now
                    .as_ref()
                    .map(|s| format!("{}/{}", s.status, s.reason))
                    .unwrap_or("-".into());
                format!("{}:{} {before}->{now}", t.cluster, t.condition_type)
            })
            .collect()
    }

    #[test]
    fn conditions_of_the_hub_gateway_and_each_cluster() {
        let status = |list: &[(&str, &str)]| -> GatewayStatus {
            serde_json::from_value(serde_json::json!({
                "conditions": list.iter().map(|(t, s)| serde_json::json!({
                    "type": t, "status": s, "reason": "R", "message": "M",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                })).collect::<Vec<_>>(),
            }))
            .unwrap()
        };
        let hub = status(&[("Programmed", "False")]);
        let east = ReportedStatus::from(status(&[("Programmed", "True"), ("DNSReady", "False")]));
        let none = ReportedStatus::default();
        let got = conditions(&hub, [("east", &east), ("west", &none)]);
        let slots: Vec<(&str, &str, &str)> = got
            .iter()
            .map(|((c, t), s)| (c.as_str(), t.as_str(), s.status.as_str()))
            .collect();
        assert_eq!(
            slots,
            [
                ("", "Programmed", "False"),
                ("east", "DNSReady", "False"),
                ("east", "Programmed", "True"),
            ]
        );
    }

    #[test]
    fn what_counts_as_a_transition() {
        type Case<'a> = (
            &'a [(&'a str, &'a str, &'a str, &'a str)],
            &'a [(&'a str, &'a str, &'a str, &'a str)],
            &'a [&'a str],
        );
        let cases: &[Case<'_>] = &[
            (&[], &[], &[]),
            (
                &[],
                &[("", "Accepted", "True", "TrueInAllClusters")],
                &[":Accepted -->True/TrueInAllClusters"],
            ),
            (
                &[(
                    "east",
                    "LoadBalancerReady",
                    "True",
                    "LoadBalancerProvisioned",
                )],
                &[(
                    "east",
                    "LoadBalancerReady",
                    "False",
                    "SyncLoadBalancerFailed",
                )],
                &[
                    "east:LoadBalancerReady True/LoadBalancerProvisioned->False/SyncLoadBalancerFailed",
                ],
            ),
            // Same status, other reason: a transition.
            (
                &[("west", "DNSReady", "False", "NoZones")],
                &[("west", "DNSReady", "False", "FailedZones")],
                &["west:DNSReady False/NoZones->False/FailedZones"],
            ),
            // Unchanged: nothing.
            (
                &[("west", "DNSReady", "False", "NoZones")],
                &[("west", "DNSReady", "False", "NoZones")],
                &[],
            ),
            // Gone.
            (
                &[("central", "Programmed", "True", "Programmed")],
                &[],
                &["central:Programmed True/Programmed->-"],
            ),
            // Per cluster: only the cluster that changed.
            (
                &[
                    ("east", "Accepted", "True", "Accepted"),
                    ("west", "Accepted", "True", "Accepted"),
                ],
                &[
                    ("east", "Accepted", "True", "Accepted"),
                    ("west", "Accepted", "False", "Invalid"),
                ],
                &["west:Accepted True/Accepted->False/Invalid"],
            ),
        ];
        for (before, after, want) in cases {
            let before = Last::new(&conds(before), &mut Pool::default());
            let got = transitions(&before, &conds(after), 7);
            assert_eq!(short(&got), *want, "{before:?} -> {after:?}");
            assert!(got.iter().all(|t| t.time_millis == 7));
        }
    }

    #[test]
    fn message_change_alone_is_not_a_transition_and_messages_are_cut() {
        let mut ring = Ring::default();
        let mut c = conds(&[("", "Accepted", "True", "TrueInAllClusters")]);
        assert_eq!(ring.record(&c, 1, 8), 1);
        c.values_mut().for_each(|s| s.message = "other".into());
        assert_eq!(ring.record(&c, 2, 8), 0);
        let long = "é".repeat(MAX_MESSAGE_BYTES);
        c.values_mut().for_each(|s| {
            s.status = "False".into();
            s.message = long.clone();
        });
        assert_eq!(ring.record(&c, 3, 8), 1);
        let last = ring.latest(1);
        let m = &last[0].now.as_ref().unwrap().message;
        assert!(
            m.len() <= MAX_MESSAGE_BYTES && m.ends_with("..."),
            "{}",
            m.len()
        );
        assert_eq!(cut("short"), "short");
    }

    /// The last recorded conditions share their strings, and a string no
    /// condition uses any more (a cluster gone, a reason no longer given)
    /// is freed, so the pool never outgrows what is in use.
    #[test]
    fn recorded_strings_are_shared_and_freed_when_unused() {
        let mut ring = Ring::default();
        let many: Vec<(String, &str, &str, &str)> = (0..50)
            .flat_map(|i| {
                ["Accepted", "Programmed"].map(|t| (format!("cluster-{i}"), t, "True", t))
            })
            .collect();
        let list: Vec<(&str, &str, &str, &str)> = many
            .iter()
            .map(|(c, t, s, r)| (c.as_str(), *t, *s, *r))
            .collect();
        assert_eq!(ring.record(&conds(&list), 1, 8), 100);
        assert_eq!(ring.last.len(), 100);
        assert_eq!(ring.len(), 8);
        assert!(ring.entries.capacity() < 100, "{}", ring.entries.capacity());
        // 50 cluster names, 2 types (also the reasons), "True".
        assert_eq!(ring.pool.len(), 53);
        let e = &ring.last.0[0];
        let same = ring
            .last
            .0
            .iter()
            .filter(|f| Arc::ptr_eq(&f[2], &e[2]))
            .count();
        assert_eq!(same, 100, "one shared \"True\"");
        assert_eq!(
            ring.last.get("cluster-7", "Programmed"),
            Some(("True", "Programmed"))
        );

        // One cluster left, with a new reason: the rest is freed.
        ring.record(
            &conds(&[("cluster-3", "Accepted", "False", "Invalid")]),
            2,
            8,
        );
        assert_eq!(ring.last.len(), 1);
        let left: Vec<&str> = ring.pool.0.iter().map(|s| &**s).collect();
        assert_eq!(left, ["Accepted", "False", "Invalid", "cluster-3"]);
        assert_eq!(ring.last.get("cluster-4", "Accepted"), None);
        // Every string the pool holds is in use.
        assert!(ring.pool.0.iter().all(|s| Arc::strong_count(s) > 1));
    }

    #[test]
    fn the_ring_keeps_the_newest_within_its_capacity() {
        let mut ring = Ring::default();
        for i in 0..10 {
            let status = if i % 2 == 0 { "True" } else { "False" };
            ring.record(&conds(&[("east", "Programmed", status, "R")]), i, 4);
        }
        assert_eq!(ring.len(), 4);
        let times: Vec<i64> = ring.latest(0).iter().map(|t| t.time_millis).collect();
        assert_eq!(times, [6, 7, 8, 9]);
        let times: Vec<i64> = ring.latest(2).iter().map(|t| t.time_millis).collect();
        assert_eq!(times, [8, 9]);
        assert_eq!(ring.latest(100).len(), 4);
    }

    /// Recording only the changed clusters' slots records exactly what
    /// recording every slot does: the same transitions, in the same order,
    /// and the same last state after, over a sequence of changes (a
    /// condition changing, appearing, going; a cluster coming and going).
    #[test]
    fn recording_changed_clusters_is_recording_all() {
        let clusters = ["a", "b", "c", "d"];
        let types = ["Accepted", "Programmed", "Ready"];
        let statuses = [("True", "Ok"), ("False", "Bad"), ("Unknown", "Pending")];
        let mut all = Conditions::new();
        let mut full = Ring::default();
        let mut partial = Ring::default();
        let mut seed = 7u64;
        let mut next = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        for step in 0..400i64 {
            // The hub's own condition and one or two clusters change.
            let mut changed: BTreeSet<&str> = BTreeSet::new();
            for _ in 0..1 + next(2) {
                let cluster = clusters[next(clusters.len())];
                changed.insert(cluster);
                let type_ = types[next(types.len())];
                let slot = (cluster.to_owned(), type_.to_owned());
                match next(5) {
                    0 => {
                        all.remove(&slot);
                    }
                    1 => all.retain(|(c, _), _| c != cluster),
                    _ => {
                        let (s, r) = statuses[next(statuses.len())];
                        all.insert(slot, st(s, r));
                    }
                }
            }
            let (s, r) = statuses[next(statuses.len())];
            all.insert((String::new(), "Ready".to_owned()), st(s, r));
            let now: Conditions = all
                .iter()
                .filter(|((c, _), _)| c.is_empty() || changed.contains(c.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let a = full.record(&all, step, 16);
            let b = partial.record_clusters(&now, &changed, step, 16);
            assert_eq!(a, b, "step {step}");
            assert_eq!(full.latest(0), partial.latest(0), "step {step}");
            assert_eq!(full.last.0, partial.last.0, "step {step}");
            let pool = |r: &Ring| r.pool.0.iter().map(|s| s.to_string()).collect::<Vec<_>>();
            assert_eq!(pool(&full), pool(&partial), "step {step}");
        }
    }
}
