//! The controller's state per fleet DNS name, sans I/O: one round takes the
//! hub Gateways and each owner's [`ClusterView`]s at a time in ms, runs the
//! rules (`gwhub_dns_rules`: names, eligibility, record sets, a
//! [`Publisher`] per record type) and returns the writes due ([`Job`]), the
//! conditions per hub Gateway and the [`DnsView`]. The outputs' answers
//! come back through [`Names::written`].
//!
//! Decided here where the spec is silent:
//! - A name first seen within `--stale-after` of the start (or leader
//!   change) gets [`Publisher::after_start`] with what was read back
//!   (nothing: its clusters rise, as the previous leader may have held them
//!   back); a name appearing later gets [`Publisher::new`] (joins at once).
//! - The sets written are built again from the published clusters'
//!   addresses, remembered from their last report, so a cluster kept
//!   (`--dns-when-none=keep`, the read-back grace) keeps its addresses
//!   while its report says it is not eligible or it is silent.
//! - A failed write puts every publisher of the name back
//!   ([`Publisher::write_failed`]); the name is tried again after the
//!   output's backoff (1 s doubling to 5 min, the status writer's).

use std::collections::{BTreeMap, BTreeSet};

use gwhub_dns_rules::{
    ClusterView, FleetName, FleetNames, Hostname, Ineligible, Input, NameState, NameStatus,
    Observation, Publisher, Reason, RecordSet, RecordSets, RecordType, Seen, Usable, assess, build,
    dns_published, usable,
};
use gwhub_hub_rules::aggregate::GatewayKey;

use super::config::DnsConfig;
use super::{ClusterVerdict, DnsView, LastWrite, NameView, Verdict};

/// A record type's set as written, keyed by type.
pub(super) type Sets = BTreeMap<RecordType, RecordSet>;

/// One name's write: the sets to publish now (empty: delete the name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    pub host: String,
    pub zone: String,
    pub owner: GatewayKey,
    pub sets: Sets,
    /// The sets last written (what the output holds, as far as known).
    pub previous: Sets,
    /// Per record type, the clusters published (the read-back seeds).
    pub clusters: BTreeMap<RecordType, BTreeSet<String>>,
    /// Each published cluster's addresses in these sets (remembered to
    /// recognise the records at the read-back after this replica's next
    /// leader change; see `Names::published_addresses`).
    pub addresses: BTreeMap<String, Usable>,
}

/// What an output answered for a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Written,
    /// Held by someone else: never overwritten.
    Conflict(String),
    Failed(String),
}

struct Entry {
    name: FleetName,
    publishers: BTreeMap<RecordType, Publisher>,
    /// Each cluster's usable addresses at its last report.
    last_usable: BTreeMap<String, Usable>,
    written: Sets,
    /// Each cluster in `written` with its addresses there, once this
    /// term wrote the name (`None`: not yet; [`Names::published_addresses`]
    /// then keeps what an earlier term remembered).
    written_addresses: Option<BTreeMap<String, Usable>>,
    ever_published: bool,
    reasons: BTreeMap<RecordType, Reason>,
    problem: Option<Outcome>,
    /// A failed write is tried again at this time.
    retry_at: Option<i64>,
    view: NameView,
}

/// The names of the fleet ([`gwhub_dns_rules::fleet_names`], or
/// [`gwhub_dns_rules::names_from_reports`] without Kubernetes), with each
/// owner's clusters.
pub(super) struct Round<'a> {
    pub now_millis: i64,
    pub names: &'a FleetNames,
    /// Per hub Gateway with names, its clusters (see `clusters::views`).
    pub clusters: &'a dyn Fn(&GatewayKey) -> Vec<ClusterView>,
    /// Clusters whose report is fresh: arrived since the start, or from a
    /// stream open on this replica.
    pub fresh: &'a dyn Fn(&str) -> bool,
}

/// What a round decided.
#[derive(Debug, Default)]
pub(super) struct Decided {
    pub jobs: Vec<Job>,
    /// Per hub Gateway that claims names: its condition (`None`: remove).
    pub conditions: BTreeMap<GatewayKey, Option<gwhub_dns_rules::DnsCondition>>,
    pub view: DnsView,
    /// When to run again though nothing changed.
    pub wake_at_millis: Option<i64>,
}

/// Per name, each cluster a replica published with its addresses
/// ([`Names::published_addresses`]).
pub(super) type Remembered = BTreeMap<String, BTreeMap<String, Usable>>;

/// Every name's state (see the module docs).
pub(super) struct Names {
    config: DnsConfig,
    started_millis: i64,
    /// Read back at the start: per name and type, the clusters published.
    seeds: BTreeMap<String, BTreeMap<RecordType, BTreeSet<String>>>,
    /// What the replica's earlier terms published, per name (kept for the
    /// names this term has not written yet).
    earlier: Remembered,
    entries: BTreeMap<String, Entry>,
    /// Names gone from the fleet whose delete has not succeeded yet.
    leaving: BTreeMap<String, Job>,
    /// Hub Gateways that had a condition last round.
    conditioned: BTreeSet<GatewayKey>,
    /// Per (name, published cluster): since when it is seen not eligible
    /// (for `gwhub_dns_removal_seconds`).
    ineligible_since: BTreeMap<(String, String), i64>,
}

impl Names {
    pub(super) fn new(
        config: DnsConfig,
        started_millis: i64,
        seeds: BTreeMap<String, BTreeMap<RecordType, BTreeSet<String>>>,
        earlier: Remembered,
    ) -> Self {
        Names {
            config,
            started_millis,
            seeds,
            earlier,
            entries: BTreeMap::new(),
            leaving: BTreeMap::new(),
            conditioned: BTreeSet::new(),
            ineligible_since: BTreeMap::new(),
        }
    }

    fn publisher(&self, host: &str, t: RecordType, now: i64) -> Publisher {
        let cfg = self.config.publish;
        if let Some(seed) = self.seeds.get(host) {
            return Publisher::after_start(cfg, seed.get(&t).cloned(), self.started_millis);
        }
        if now < self.started_millis.saturating_add(cfg.stale_after_millis) {
            Publisher::after_start(cfg, None, self.started_millis)
        } else {
            Publisher::new(cfg)
        }
    }

    /// One round (see the module docs).
    pub(super) fn round(&mut self, r: &Round<'_>) -> Decided {
        let fleet = r.names;
        let mut out = Decided::default();
        let mut wake = Wake::default();
        let mut by_owner: BTreeMap<GatewayKey, Vec<NameStatus>> = BTreeMap::new();
        for (host, name) in &fleet.names {
            let Some(state) = self.name_round(r, host, name, &mut out, &mut wake) else {
                continue;
            };
            by_owner
                .entry(name.owner.clone())
                .or_default()
                .push(NameStatus {
                    host: host.as_str().to_owned(),
                    state,
                });
        }
        self.forget_gone(fleet);
        out.jobs.extend(self.leaving.values().cloned());
        unpublished_claims(fleet, &mut by_owner);
        let claimed: BTreeSet<GatewayKey> = by_owner.keys().cloned().collect();
        for gone in self.conditioned.difference(&claimed) {
            out.conditions.insert(gone.clone(), None);
        }
        for (key, names) in by_owner {
            out.conditions.insert(key, dns_published(&names));
        }
        self.conditioned = claimed;
        out.view.dry_run = self.config.dry_run;
        out.view.enabled = true;
        out.view.outputs = self.config.outputs();
        out.wake_at_millis = wake.0;
        out
    }

    /// One name's part of a round: its clusters assessed, its publishers
    /// asked, its write (into `out`) if one is due and its view. Returns
    /// the name's state for its owner's condition.
    fn name_round(
        &mut self,
        r: &Round<'_>,
        host: &Hostname,
        name: &FleetName,
        out: &mut Decided,
        wake: &mut Wake,
    ) -> Option<NameState> {
        let now = r.now_millis;
        let host_s = host.as_str().to_owned();
        self.leaving.remove(&host_s);
        self.ensure_entry(&host_s, name, now);
        let e = self.entries.get_mut(&host_s)?;
        e.name = name.clone();
        let views = (r.clusters)(&name.owner);
        let assessed = e.assess(&views, host, name);
        for c in e.written.values().flat_map(|s| s.clusters.iter()) {
            let k = (host_s.clone(), c.clone());
            match assessed.verdicts.get(c) {
                Some(None) => {
                    self.ineligible_since.remove(&k);
                }
                _ => {
                    self.ineligible_since.entry(k).or_insert(now);
                }
            }
        }
        let apex = name.is_apex();
        let desired = build(host, apex, &assessed.eligible, &self.config.records);
        let coalescing = e.decide(r, &views, &assessed.results, &desired.types(), wake);
        let members = e.published_members();
        let to_write = sets_of(&build(host, apex, &members, &self.config.records));
        let retry_due = e.retry_at.is_none_or(|t| now >= t);
        wake.at(e.retry_at.filter(|t| *t > now));
        if !coalescing && retry_due && to_write != e.written {
            // Each write with every cluster's inputs and verdict, for
            // tracing a record that changed when no one expected it
            // (`RUST_LOG=gwhub_dns=debug`).
            tracing::debug!(
                host = %host_s,
                clusters = ?views
                    .iter()
                    .map(|v| (&v.cluster, v.stale, v.reports_gateway, &v.addresses, assessed.verdicts.get(&v.cluster)))
                    .collect::<Vec<_>>(),
                to_write = ?targets(&to_write),
                written = ?targets(&e.written),
                "fleet DNS: a write is due"
            );
            out.jobs.push(Job {
                host: host_s.clone(),
                zone: name.zone.clone(),
                owner: name.owner.clone(),
                clusters: to_write
                    .iter()
                    .map(|(t, s)| (*t, s.clusters.iter().cloned().collect()))
                    .collect(),
                sets: to_write,
                previous: e.written.clone(),
                addresses: members,
            });
        }
        let state = state_of(e);
        e.view = e.view_of(name, &desired, assessed.verdicts, &state);
        out.view.names.insert(host_s, e.view.clone());
        Some(state)
    }

    /// Starts keeping `host` (with a publisher per record type) when it is
    /// new to the fleet.
    fn ensure_entry(&mut self, host: &str, name: &FleetName, now: i64) {
        if self.entries.contains_key(host) {
            return;
        }
        let publishers = RecordType::ALL
            .into_iter()
            .map(|t| (t, self.publisher(host, t, now)))
            .collect();
        self.entries.insert(
            host.to_owned(),
            Entry {
                name: name.clone(),
                publishers,
                last_usable: BTreeMap::new(),
                written: Sets::new(),
                written_addresses: None,
                ever_published: false,
                reasons: BTreeMap::new(),
                problem: None,
                retry_at: None,
                view: NameView::default(),
            },
        );
    }

    /// Names gone from the fleet: deleted with what was written (their
    /// jobs wait in `leaving` until a delete succeeds).
    fn forget_gone(&mut self, fleet: &FleetNames) {
        let gone: Vec<String> = self
            .entries
            .keys()
            .filter(|h| !fleet.names.keys().any(|n| n.as_str() == h.as_str()))
            .cloned()
            .collect();
        for host in gone {
            if let Some(e) = self.entries.remove(&host)
                && !e.written.is_empty()
            {
                self.leaving.insert(
                    host.clone(),
                    Job {
                        host: host.clone(),
                        zone: e.name.zone.clone(),
                        owner: e.name.owner.clone(),
                        sets: Sets::new(),
                        previous: e.written,
                        clusters: BTreeMap::new(),
                        addresses: BTreeMap::new(),
                    },
                );
            }
        }
    }

    /// `view` (this round's) with what the writes since changed: each
    /// name's published sets, state and last write.
    pub(super) fn refresh(&self, view: &mut DnsView) {
        for (host, v) in &mut view.names {
            if let Some(e) = self.entries.get(host) {
                let state = state_of(e);
                v.published = targets(&e.written);
                v.state = state.reason().to_owned();
                v.state_message = state.detail();
                v.last_write = e.view.last_write.clone();
            }
        }
    }

    /// Per name, each cluster in its written sets with its addresses
    /// there: kept by the controller when this replica stops leading, to
    /// map the records read back at its next leader change to clusters
    /// whose addresses have changed since (they stay without the rise).
    /// A name this term has not written keeps what the earlier terms
    /// remembered: a term cut short before its first write (the Lease
    /// lost again during the read-back, found under load) must not forget
    /// the clusters in the records.
    pub(super) fn published_addresses(&self) -> Remembered {
        let mut out = self.earlier.clone();
        for (host, e) in &self.entries {
            match &e.written_addresses {
                None => {}
                Some(a) if a.is_empty() => {
                    out.remove(host);
                }
                Some(a) => {
                    out.insert(host.clone(), a.clone());
                }
            }
        }
        out
    }

    /// Forgets what was written (`--dns-resync`): the next round writes
    /// every name again, and the outputs read back and repair first.
    pub(super) fn forget_written(&mut self) {
        for e in self.entries.values_mut() {
            e.written.clear();
        }
    }

    /// An output's answer to `job` at `now`; `retry_in`: the backoff after a
    /// failure. Returns, for each cluster the write removed after it was
    /// seen not eligible, how long that took (ms).
    pub(super) fn written(
        &mut self,
        job: &Job,
        outcome: Outcome,
        now: i64,
        retry_in_millis: i64,
    ) -> Vec<i64> {
        let mut removals = Vec::new();
        if outcome == Outcome::Written {
            let kept: BTreeSet<&String> =
                job.sets.values().flat_map(|s| s.clusters.iter()).collect();
            for c in job.previous.values().flat_map(|s| s.clusters.iter()) {
                if !kept.contains(c)
                    && let Some(t) = self.ineligible_since.remove(&(job.host.clone(), c.clone()))
                {
                    removals.push(now - t);
                }
            }
        }
        if job.sets.is_empty() && !self.entries.contains_key(&job.host) {
            if outcome == Outcome::Written {
                self.leaving.remove(&job.host);
                self.earlier.remove(&job.host);
                self.ineligible_since.retain(|(h, _), _| *h != job.host);
            }
            return removals;
        }
        let Some(e) = self.entries.get_mut(&job.host) else {
            return removals;
        };
        let (result, message) = match &outcome {
            Outcome::Written => ("ok", String::new()),
            Outcome::Conflict(who) => ("conflict", who.clone()),
            Outcome::Failed(why) => ("error", why.clone()),
        };
        e.view.last_write = Some(LastWrite {
            at_millis: now,
            result: result.to_owned(),
            message,
        });
        match outcome {
            Outcome::Written => {
                e.written = job.sets.clone();
                e.written_addresses = Some(job.addresses.clone());
                e.problem = None;
                e.retry_at = None;
            }
            other => {
                for p in e.publishers.values_mut() {
                    p.write_failed();
                }
                e.problem = Some(other);
                e.retry_at = Some(now.saturating_add(retry_in_millis));
            }
        }
        removals
    }
}

/// The earliest time a round asked to run again at.
#[derive(Default)]
struct Wake(Option<i64>);

impl Wake {
    fn at(&mut self, t: Option<i64>) {
        if let Some(t) = t {
            self.0 = Some(self.0.map_or(t, |w: i64| w.min(t)));
        }
    }
}

/// A name's clusters as the eligibility rules judged them this round.
struct Assessed {
    /// The eligible clusters with their usable addresses.
    eligible: BTreeMap<String, Usable>,
    /// Each cluster's verdict (`None`: eligible).
    verdicts: BTreeMap<String, Option<Verdict>>,
    results: BTreeMap<String, Result<Usable, Ineligible>>,
}

impl Entry {
    /// Judges each of the name's clusters (spec section 8's rules),
    /// remembering the addresses of those that report its Gateway.
    fn assess(&mut self, views: &[ClusterView], host: &Hostname, name: &FleetName) -> Assessed {
        let mut eligible: BTreeMap<String, Usable> = BTreeMap::new();
        let mut verdicts: BTreeMap<String, Option<Verdict>> = BTreeMap::new();
        let mut results = BTreeMap::new();
        for v in views {
            if v.reports_gateway {
                self.last_usable
                    .insert(v.cluster.clone(), usable(&v.addresses));
            }
            let res = assess(v, host, &name.listeners);
            verdicts.insert(
                v.cluster.clone(),
                res.as_ref().err().map(|e| Verdict {
                    rule: e.rule(),
                    code: e.code().to_owned(),
                    message: e.to_string(),
                }),
            );
            if let Ok(u) = &res {
                eligible.insert(v.cluster.clone(), u.clone());
            }
            results.insert(v.cluster.clone(), res);
        }
        Assessed {
            eligible,
            verdicts,
            results,
        }
    }

    /// Asks each record type's publisher which clusters to publish now;
    /// returns whether one of them is coalescing (no write this round).
    fn decide(
        &mut self,
        r: &Round<'_>,
        views: &[ClusterView],
        results: &BTreeMap<String, Result<Usable, Ineligible>>,
        desired_types: &BTreeSet<RecordType>,
        wake: &mut Wake,
    ) -> bool {
        let mut coalescing = false;
        for t in RecordType::ALL {
            let obs: Vec<Observation> = views
                .iter()
                .map(|v| Observation {
                    cluster: v.cluster.clone(),
                    seen: match results.get(&v.cluster) {
                        Some(Ok(u)) if u.check(t).is_ok() => Seen::Eligible,
                        _ => Seen::Ineligible,
                    },
                    fresh: (r.fresh)(&v.cluster),
                })
                .collect();
            let Some(p) = self.publishers.get_mut(&t) else {
                continue;
            };
            let d = p.decide(&Input {
                now_millis: r.now_millis,
                clusters: &obs,
                other_types_served: desired_types.iter().any(|o| *o != t),
            });
            coalescing |= matches!(d.reason, Reason::Coalescing { .. });
            wake.at(d.wake_at_millis);
            self.reasons.insert(t, d.reason);
        }
        coalescing
    }

    /// The clusters to write: the published ones with the addresses of
    /// the types each is published in.
    fn published_members(&mut self) -> BTreeMap<String, Usable> {
        let mut published: BTreeMap<RecordType, BTreeSet<String>> = BTreeMap::new();
        for (t, p) in &self.publishers {
            if let Some(set) = p.published() {
                published.insert(*t, set.clone());
            }
        }
        self.ever_published |= !published.is_empty();
        let mut members: BTreeMap<String, Usable> = BTreeMap::new();
        for c in published.values().flatten() {
            if let Some(u) = self.last_usable.get(c) {
                let u = u.restricted(|t| published.get(&t).is_some_and(|s| s.contains(c)));
                members.insert(c.clone(), u);
            }
        }
        members
    }

    /// The name's view after this round.
    fn view_of(
        &self,
        name: &FleetName,
        desired: &RecordSets,
        verdicts: BTreeMap<String, Option<Verdict>>,
        state: &NameState,
    ) -> NameView {
        NameView {
            zone: name.zone.clone(),
            owner: Some(name.owner.clone()),
            published: targets(&self.written),
            desired: targets(&sets_of(desired)),
            clusters: verdicts
                .into_iter()
                .map(|(cluster, ineligible)| ClusterVerdict {
                    cluster,
                    ineligible,
                })
                .collect(),
            reasons: self
                .reasons
                .iter()
                .map(|(t, r)| format!("{t}: {r}"))
                .collect(),
            state: state.reason().to_owned(),
            state_message: state.detail(),
            last_write: self.view.last_write.clone(),
        }
    }
}

/// The names the fleet claims but does not publish (a conflict, an
/// invalid hostname), under their hub Gateways' conditions.
fn unpublished_claims(fleet: &FleetNames, by_owner: &mut BTreeMap<GatewayKey, Vec<NameStatus>>) {
    for c in &fleet.conflicts {
        by_owner
            .entry(c.gateway.clone())
            .or_default()
            .push(NameStatus {
                host: c.host.to_string(),
                state: NameState::Conflict(format!(
                    "claimed by {} (the oldest hub Gateway with it)",
                    c.owner
                )),
            });
    }
    for i in &fleet.invalid {
        by_owner
            .entry(i.gateway.clone())
            .or_default()
            .push(NameStatus {
                host: i.hostname.clone(),
                state: NameState::Invalid(i.error.to_string()),
            });
    }
}

fn sets_of(s: &RecordSets) -> Sets {
    RecordType::ALL
        .into_iter()
        .filter_map(|t| s.get(t).map(|set| (t, set.clone())))
        .collect()
}

/// Each set's targets as text, by type name.
pub(super) fn targets(sets: &Sets) -> BTreeMap<String, Vec<String>> {
    sets.iter()
        .map(|(t, s)| (t.as_str().to_owned(), s.targets()))
        .collect()
}

fn state_of(e: &Entry) -> NameState {
    match &e.problem {
        Some(Outcome::Conflict(who)) => return NameState::Conflict(who.clone()),
        Some(Outcome::Failed(why)) => return NameState::WriteFailed(why.clone()),
        _ => {}
    }
    if e.ever_published && desired_none(e) && e.reasons.values().any(Reason::none_eligible) {
        let kept = e
            .reasons
            .values()
            .any(|r| matches!(r, Reason::KeptNoneEligible { .. }));
        return NameState::NoneEligible { kept };
    }
    if e.written.is_empty() && !e.ever_published {
        return NameState::NotYetPublished;
    }
    NameState::Published
}

/// Whether no record type of the name has an eligible cluster now.
fn desired_none(e: &Entry) -> bool {
    e.reasons.values().all(|r| {
        matches!(
            r,
            Reason::KeptNoneEligible { .. }
                | Reason::RemovedNoneEligible
                | Reason::NothingLeft
                | Reason::OtherTypeServes
                | Reason::NotYetEligible
        )
    })
}

#[cfg(test)]
mod tests;
