//! When a cluster enters and leaves a published record set: a state
//! machine per (name, record type), sans I/O. The caller tells it, at a
//! time in milliseconds it reads from its own clock, how every cluster it
//! knows for the name stands ([`Observation`]); the machine answers with
//! the set to publish ([`Action`]), why ([`Reason`]) and when it next
//! needs to be asked ([`Decision::wake_at_millis`]). It never reads a
//! clock and never writes anything.
//!
//! Rules (spec section 8, "Timing" and "No eligible cluster"):
//! - A published cluster that stops being eligible leaves at the next
//!   write. A cluster not published joins once it has been eligible
//!   continuously for `rise_millis` (default 10 s) since it was last seen
//!   not eligible, so a flapping cluster does not flap the record.
//! - A cluster eligible the first time a machine made by
//!   [`Publisher::new`] sees it joins at once: nothing says it flaps, and a
//!   new name or cluster should not wait. After a hub start or leader
//!   change ([`Publisher::after_start`]) the machine is seeded with the
//!   read-back set: a cluster in it stays without the rise, and leaves
//!   only on a fresh ineligible report ([`Observation::fresh`]: a report
//!   the caller knows to be current, e.g. received since the start) or
//!   after `stale_after_millis` of silence
//!   counted from the start. A cluster outside the read-back set rises
//!   even on first sight there: the previous leader may have been holding
//!   it back.
//! - A revoked or deleted cluster ([`Seen::Gone`], or a cluster no longer
//!   in the observations) leaves at once, whatever else holds: that write
//!   is not coalesced, and it is never kept.
//! - No cluster to publish (none eligible, or the eligible ones still
//!   rising): [`WhenNone::Keep`] (default) keeps the last published set
//!   and says so, [`WhenNone::Remove`] deletes the name. Nothing is ever
//!   published empty; a name never published is not created until some
//!   cluster can be; revoked and deleted clusters are never kept (if none
//!   is left, the name is deleted).
//! - Writes per name are coalesced: the first change starts a window of
//!   `coalesce_millis` (250 ms), changes within it join the same write, and
//!   the write is due at the window's end, so no change waits longer. An
//!   unchanged set is not written.
//!
//! Decided here where the spec is silent:
//! - Keep is for a name nobody serves. When this record type has no
//!   cluster but another type of the name has one ([`Input::other_types_served`]:
//!   an A set while only IPv6 clusters remain, or a CNAME's cluster while
//!   IP clusters appear), this type's set is deleted: a stale set must not
//!   answer beside a live one.
//! - While the only eligible clusters are rising, Keep keeps the last set
//!   (a stale answer for `rise` beats NXDOMAIN for `rise`); the risen
//!   cluster then replaces it.
//! - The machine sees eligibility only when asked: call [`Publisher::decide`]
//!   whenever a cluster's eligibility for the name may have changed, and at
//!   [`Publisher::next_decision_at`]. A flap between two calls is not seen.
//! - A cluster that drops out of the observations is remembered as not
//!   eligible for `stale_after + rise`, so coming back it rises.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// `--dns-rise` default.
pub const DEFAULT_RISE_MILLIS: i64 = 10_000;
/// `--stale-after` default.
pub const DEFAULT_STALE_AFTER_MILLIS: i64 = 60_000;
/// How long writes per name are coalesced at most.
pub const COALESCE_MILLIS: i64 = 250;

/// `--dns-when-none`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WhenNone {
    #[default]
    Keep,
    Remove,
}

/// The machine's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PublishConfig {
    pub rise_millis: i64,
    pub stale_after_millis: i64,
    pub coalesce_millis: i64,
    pub when_none: WhenNone,
}

impl Default for PublishConfig {
    fn default() -> Self {
        PublishConfig {
            rise_millis: DEFAULT_RISE_MILLIS,
            stale_after_millis: DEFAULT_STALE_AFTER_MILLIS,
            coalesce_millis: COALESCE_MILLIS,
            when_none: WhenNone::Keep,
        }
    }
}

/// How a cluster stands for the name and record type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Eligible (rules 1 to 4 for this type).
    Eligible,
    /// Not eligible (any rule, staleness included).
    Ineligible,
    /// Revoked, or its ClusterProfile deleted, or deregistered.
    Gone,
}

/// One cluster as the caller sees it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    pub cluster: String,
    pub seen: Seen,
    /// Whether it comes from a report known to be current (the hub: received
    /// since it started or took over, or over a stream open to it); only a
    /// seeded machine asks.
    pub fresh: bool,
}

/// One question to the machine.
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    pub now_millis: i64,
    /// Every cluster the hub knows for the name: reporting or expected.
    pub clusters: &'a [Observation],
    /// Whether another record type of the name has a set to publish now
    /// (see the module docs).
    pub other_types_served: bool,
}

/// What to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Write the set of these clusters (never empty).
    Publish(BTreeSet<String>),
    /// Delete the record set (and its ownership record).
    Delete,
    /// No write.
    Unchanged,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Publish(set) => {
                let names: Vec<&str> = set.iter().map(String::as_str).collect();
                write!(f, "publish {}", names.join(", "))
            }
            Action::Delete => f.write_str("delete"),
            Action::Unchanged => f.write_str("unchanged: no write"),
        }
    }
}

/// Why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The published set is what it should be.
    Current,
    /// The set changes: who joins and who leaves.
    Changed {
        joined: Vec<String>,
        left: Vec<String>,
    },
    /// A change waits for the coalescing window to end.
    Coalescing { due_millis: i64 },
    /// Never published, and no cluster can be yet.
    NotYetEligible,
    /// None to publish: the last set (these many clusters) is kept.
    KeptNoneEligible { kept: usize },
    /// None to publish: the name is deleted (`--dns-when-none=remove`).
    RemovedNoneEligible,
    /// None to publish and none of the published may be kept (revoked or
    /// deleted, or none was left): the name is deleted.
    NothingLeft,
    /// None for this type while another type serves the name: deleted.
    OtherTypeServes,
}

impl Reason {
    /// Whether it says the name was published and has no cluster to
    /// publish now (the condition's `NoneEligible`).
    pub fn none_eligible(&self) -> bool {
        matches!(
            self,
            Reason::KeptNoneEligible { .. } | Reason::RemovedNoneEligible | Reason::NothingLeft
        )
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Current => f.write_str("the published set is current"),
            Reason::Changed { joined, left } => {
                let mut parts = Vec::new();
                if !joined.is_empty() {
                    parts.push(format!("joined {}", joined.join(", ")));
                }
                if !left.is_empty() {
                    parts.push(format!("left {}", left.join(", ")));
                }
                f.write_str(&parts.join("; "))
            }
            Reason::Coalescing { due_millis } => {
                write!(f, "changed: the write is coalesced until {due_millis} ms")
            }
            Reason::NotYetEligible => f.write_str("not published: no cluster has been eligible yet"),
            Reason::KeptNoneEligible { kept } => write!(
                f,
                "no cluster is eligible: keeping the last published set of {kept} clusters (--dns-when-none=keep)"
            ),
            Reason::RemovedNoneEligible => {
                f.write_str("no cluster is eligible: the name is deleted (--dns-when-none=remove)")
            }
            Reason::NothingLeft => f.write_str(
                "no cluster is eligible and the published ones were revoked or deleted: the name is deleted",
            ),
            Reason::OtherTypeServes => f.write_str(
                "no cluster is eligible for this record type while another type serves the name: deleted",
            ),
        }
    }
}

/// The machine's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub action: Action,
    pub reason: Reason,
    /// Eligible clusters waiting out their rise, with when they may join.
    pub rising: Vec<(String, i64)>,
    /// When to ask again though nothing changed (a rise ends, a coalesced
    /// write is due, the read-back grace ends); `None`: only on a change.
    pub wake_at_millis: Option<i64>,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.action, self.reason)
    }
}

/// What the machine remembers of one cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Track {
    /// Seen not eligible (or absent) since it was first seen, or outside
    /// the read-back set of a seeded machine: it must rise to join.
    must_rise: bool,
    /// Since when it has been eligible without a break.
    eligible_since: Option<i64>,
    /// Since when it is missing from the observations.
    absent_since: Option<i64>,
}

/// The state machine of one (name, record type). See the module docs.
#[derive(Clone, Debug)]
pub struct Publisher {
    config: PublishConfig,
    published: Option<BTreeSet<String>>,
    ever_published: bool,
    /// Before the last write, for [`Publisher::write_failed`].
    before_write: Option<(Option<BTreeSet<String>>, bool)>,
    /// Seeded after a start: when it started.
    started_millis: Option<i64>,
    /// Read-back clusters not yet heard from freshly.
    seed: BTreeSet<String>,
    tracks: BTreeMap<String, Track>,
    pending_since: Option<i64>,
    wake_at: Option<i64>,
}

impl Publisher {
    /// A machine for a name that appeared while the hub runs (nothing
    /// published yet).
    pub fn new(config: PublishConfig) -> Self {
        Publisher {
            config,
            published: None,
            ever_published: false,
            before_write: None,
            started_millis: None,
            seed: BTreeSet::new(),
            tracks: BTreeMap::new(),
            pending_since: None,
            wake_at: None,
        }
    }

    /// A machine for a name after a hub start or leader change at
    /// `started_millis`, with the clusters the read-back found published
    /// (`None` or empty: the name is not published).
    pub fn after_start(
        config: PublishConfig,
        read_back: Option<BTreeSet<String>>,
        started_millis: i64,
    ) -> Self {
        let read_back = read_back.filter(|s| !s.is_empty());
        let mut p = Publisher::new(config);
        p.started_millis = Some(started_millis);
        if let Some(set) = read_back {
            p.seed = set.clone();
            p.published = Some(set);
            p.ever_published = true;
        }
        p
    }

    /// The set the machine takes as published (`None`: the name is not).
    pub fn published(&self) -> Option<&BTreeSet<String>> {
        self.published.as_ref()
    }

    /// When the last decision asked to be woken.
    pub fn next_decision_at(&self) -> Option<i64> {
        self.wake_at
    }

    /// The last write decided failed: the machine goes back to what was
    /// published before it, so the next decision decides the write again.
    pub fn write_failed(&mut self) {
        if let Some((published, ever)) = self.before_write.take() {
            self.published = published;
            self.ever_published = ever;
        }
    }

    /// Decides (see the module docs).
    pub fn decide(&mut self, input: &Input<'_>) -> Decision {
        let now = input.now_millis;
        let obs: BTreeMap<&str, &Observation> = input
            .clusters
            .iter()
            .map(|o| (o.cluster.as_str(), o))
            .collect();
        self.track(now, &obs);
        let window_open = self
            .started_millis
            .is_some_and(|s| now < s.saturating_add(self.config.stale_after_millis));
        self.seed.retain(|c| {
            obs.get(c.as_str())
                .is_none_or(|o| !o.fresh && o.seen != Seen::Gone)
        });
        let seed = &self.seed;
        let gone = |c: &str| match obs.get(c) {
            Some(o) => o.seen == Seen::Gone,
            None => !(seed.contains(c) && window_open),
        };
        let current = self.published.clone().unwrap_or_default();
        let stay: BTreeSet<String> = current
            .iter()
            .filter(|c| !gone(c))
            .filter(|c| {
                if seed.contains(c.as_str()) {
                    window_open
                } else {
                    obs.get(c.as_str())
                        .is_some_and(|o| o.seen == Seen::Eligible)
                }
            })
            .cloned()
            .collect();
        let (candidates, rising) = self.join(&current, stay, now);
        let (target, reason) = if !candidates.is_empty() {
            let joined: Vec<String> = candidates.difference(&current).cloned().collect();
            let left: Vec<String> = current.difference(&candidates).cloned().collect();
            let reason = if joined.is_empty() && left.is_empty() {
                Reason::Current
            } else {
                Reason::Changed { joined, left }
            };
            (Some(candidates), reason)
        } else if input.other_types_served {
            (None, Reason::OtherTypeServes)
        } else if !self.ever_published {
            (None, Reason::NotYetEligible)
        } else if self.config.when_none == WhenNone::Remove {
            (None, Reason::RemovedNoneEligible)
        } else {
            let kept: BTreeSet<String> = current.iter().filter(|c| !gone(c)).cloned().collect();
            if kept.is_empty() {
                (None, Reason::NothingLeft)
            } else {
                let n = kept.len();
                (Some(kept), Reason::KeptNoneEligible { kept: n })
            }
        };
        let urgent = current.iter().any(|c| gone(c));
        let mut decision = Decision {
            action: Action::Unchanged,
            reason,
            rising,
            wake_at_millis: None,
        };
        if target == self.published {
            self.pending_since = None;
        } else {
            let due = self
                .pending_since
                .get_or_insert(now)
                .saturating_add(self.config.coalesce_millis);
            if urgent || now >= due {
                self.write(target, &mut decision);
            } else {
                decision.reason = Reason::Coalescing { due_millis: due };
                decision.wake_at_millis = Some(due);
            }
        }
        self.wake_at = self.wake_at(now, window_open, &decision);
        decision.wake_at_millis = self.wake_at;
        decision
    }

    /// Who joins the published set now: `stay` and every cluster not
    /// published whose eligibility is old enough (past its rise when it
    /// must rise), and the rising ones still waiting, with when they join.
    fn join(
        &self,
        current: &BTreeSet<String>,
        stay: BTreeSet<String>,
        now: i64,
    ) -> (BTreeSet<String>, Vec<(String, i64)>) {
        let mut rising = Vec::new();
        let mut candidates = stay;
        for (c, t) in &self.tracks {
            if current.contains(c) {
                continue;
            }
            let Some(since) = t.eligible_since else {
                continue;
            };
            let joins_at = if t.must_rise {
                since.saturating_add(self.config.rise_millis)
            } else {
                since
            };
            if joins_at <= now {
                candidates.insert(c.clone());
            } else {
                rising.push((c.clone(), joins_at));
            }
        }
        (candidates, rising)
    }

    /// Takes `target` as published and says so in `decision`.
    fn write(&mut self, target: Option<BTreeSet<String>>, decision: &mut Decision) {
        let before = self.published.clone().unwrap_or_default();
        let after = target.clone().unwrap_or_default();
        for c in before.difference(&after) {
            // Whatever made it leave, coming back it rises.
            if let Some(t) = self.tracks.get_mut(c) {
                t.must_rise = true;
                t.eligible_since = None;
            }
            self.seed.remove(c);
        }
        self.before_write = Some((self.published.take(), self.ever_published));
        decision.action = match &target {
            Some(set) => {
                self.ever_published = true;
                Action::Publish(set.clone())
            }
            None => Action::Delete,
        };
        self.published = target;
        self.pending_since = None;
    }

    /// Updates what is remembered of each cluster from `obs`.
    fn track(&mut self, now: i64, obs: &BTreeMap<&str, &Observation>) {
        let seeded = self.started_millis.is_some();
        for (c, o) in obs {
            let in_seed = self.seed.contains(*c);
            let t = self.tracks.entry((*c).to_owned()).or_insert(Track {
                must_rise: seeded && !in_seed,
                eligible_since: None,
                absent_since: None,
            });
            t.absent_since = None;
            match o.seen {
                Seen::Eligible => {
                    t.eligible_since.get_or_insert(now);
                }
                Seen::Ineligible | Seen::Gone => {
                    t.must_rise = true;
                    t.eligible_since = None;
                }
            }
        }
        let forget_after = self
            .config
            .stale_after_millis
            .saturating_add(self.config.rise_millis);
        self.tracks.retain(|c, t| {
            if obs.contains_key(c.as_str()) {
                return true;
            }
            t.must_rise = true;
            t.eligible_since = None;
            let since = *t.absent_since.get_or_insert(now);
            now.saturating_sub(since) < forget_after
        });
    }

    /// The earliest time something changes without an observation.
    fn wake_at(&self, now: i64, window_open: bool, decision: &Decision) -> Option<i64> {
        let mut at = decision.wake_at_millis;
        let mut consider = |t: i64| {
            if t > now {
                at = Some(at.map_or(t, |a: i64| a.min(t)));
            }
        };
        for (_, joins_at) in &decision.rising {
            consider(*joins_at);
        }
        if window_open
            && !self.seed.is_empty()
            && let Some(s) = self.started_millis
        {
            consider(s.saturating_add(self.config.stale_after_millis));
        }
        at
    }
}

#[cfg(test)]
mod tests;
