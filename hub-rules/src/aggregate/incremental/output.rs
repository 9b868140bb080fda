//! Reading an [`Incremental`]: the aggregated status and its omissions,
//! built from what is kept (each cluster's share of the addresses and
//! listeners, the fragments the messages show), never from a pass over the
//! fleet. Kept apart from the bookkeeping in the parent module, which
//! changes what is kept and never reads an output.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use gateway_api::apis::standard::gateways::{
    GatewayStatus, GatewayStatusAddresses, GatewayStatusListeners,
};
use gwhub_model::Condition;
use jiff::Timestamp;

use super::super::limits::{MAX_ADDRESSES, MAX_LISTENERS};
use super::super::omissions::{Item, Omission, Omissions, limit_fragment};
use super::super::{
    Absence, Aggregation, Expectation, HubGateway, addresses, close_conditions, conditions,
    listeners, own_summary, plan_conditions, read_expectation,
};
use super::{Incremental, Part, Parts};

/// The parts of an output that depend on the hub Gateway.
struct Output {
    aggregation: Aggregation,
    hub_omissions: Omissions,
}

impl Incremental {
    /// The aggregated status, exactly `super::aggregate_expected`'s over
    /// the same reports, with its omissions (listing them costs their
    /// number: past a limit, about one per cluster).
    pub fn aggregate(
        &self,
        hub: &HubGateway,
        expectation: Option<&Expectation>,
        now: Timestamp,
    ) -> Aggregation {
        let out = self.output(hub, expectation, now);
        let omissions = self.materialize(&out.hub_omissions.0);
        Aggregation {
            omissions,
            ..out.aggregation
        }
    }

    /// [`Incremental::aggregate_status`] and the omissions the hub Gateway
    /// makes: with [`Incremental::omissions_version`], what a reader needs
    /// to tell whether the omissions changed, and
    /// ([`Incremental::omissions_with`]) to list them when they did.
    pub fn aggregate_parts(
        &self,
        hub: &HubGateway,
        expectation: Option<&Expectation>,
        now: Timestamp,
    ) -> Parts {
        let out = self.output(hub, expectation, now);
        Parts {
            aggregation: out.aggregation,
            hub_omissions: out.hub_omissions.0,
        }
    }

    /// Every omission, as [`Incremental::aggregate`] lists them, given the
    /// hub Gateway's ([`Parts::hub_omissions`]).
    pub fn omissions_with(&self, hub_omissions: &[Omission]) -> Vec<Omission> {
        self.materialize(hub_omissions)
    }

    /// [`Incremental::aggregate`] without the omissions (an empty list):
    /// costs the output, not the fleet. The own condition still counts and
    /// names them.
    pub fn aggregate_status(
        &self,
        hub: &HubGateway,
        expectation: Option<&Expectation>,
        now: Timestamp,
    ) -> Aggregation {
        self.output(hub, expectation, now).aggregation
    }

    /// The omissions of [`Incremental::aggregate`] for `hub`, alone.
    pub fn omissions(&self, hub: &HubGateway, now: Timestamp) -> Vec<Omission> {
        let out = self.output(hub, None, now);
        self.materialize(&out.hub_omissions.0)
    }

    /// The status and the hub Gateway's omissions, from what is kept: the
    /// outline every reader shares.
    fn output(
        &self,
        hub: &HubGateway,
        expectation: Option<&Expectation>,
        now: Timestamp,
    ) -> Output {
        let (expected, absent, invalid) =
            read_expectation(expectation, |name| self.clusters.contains_key(name));
        let mut hub_omissions = Omissions::default();
        let types: BTreeSet<&str> = self.types.keys().map(String::as_str).collect();
        let (foreign, kept_types) = plan_conditions(hub, &types, &mut hub_omissions);

        let mut scratch = Omissions::default();
        let address_kept = self.addresses.kept();
        let out_addresses = self.kept_addresses(&address_kept, &mut scratch);
        let listener_kept = self.listeners.kept();
        let (out_listeners, built_omissions) = self.kept_listeners(&listener_kept, &mut scratch);

        let reports = self.clusters.len();
        let mut out_conditions = Vec::with_capacity(kept_types.len() + foreign.len() + 1);
        self.type_conditions(&mut out_conditions, kept_types, &absent, reports, hub, now);

        let kept_total = |kept: &BTreeMap<&str, usize>| kept.values().sum::<usize>();
        let address_limit = self
            .addresses
            .total
            .saturating_sub(kept_total(&address_kept));
        let listener_limit = self
            .listeners
            .total
            .saturating_sub(kept_total(&listener_kept));
        let built_groups: usize = built_omissions.iter().map(|(_, o)| o.len()).sum();
        let count = self.groups
            + hub_omissions.0.len()
            + built_groups
            + usize::from(address_limit > 0)
            + usize::from(listener_limit > 0);
        let limits = [
            (Item::Address, MAX_ADDRESSES, address_limit),
            (Item::Listener, MAX_LISTENERS, listener_limit),
        ];
        let fragments = self.own_fragments(&hub_omissions, &built_omissions, limits);
        let summary = own_summary(reports, expected, &absent, invalid, count, fragments);
        close_conditions(&mut out_conditions, summary, foreign, hub, now);

        Output {
            aggregation: Aggregation {
                status: GatewayStatus {
                    addresses: Some(out_addresses),
                    attached_listener_sets: None,
                    conditions: Some(out_conditions),
                    listeners: Some(out_listeners),
                },
                omissions: Vec::new(),
            },
            hub_omissions,
        }
    }

    /// The addresses the round-robin selection keeps: each cluster's first
    /// valid ones, as many as its share, in cluster order.
    fn kept_addresses(
        &self,
        address_kept: &BTreeMap<&str, usize>,
        scratch: &mut Omissions,
    ) -> Vec<GatewayStatusAddresses> {
        let mut out_addresses = Vec::with_capacity(MAX_ADDRESSES);
        for (&cluster, &keep) in address_kept {
            let Some(part) = self.clusters.get(cluster) else {
                continue;
            };
            let valid = addresses::valid(cluster, &part.status, &self.options, scratch);
            for (a, type_) in valid.iter().take(keep) {
                out_addresses.push(addresses::build(cluster, a, type_));
            }
        }
        out_addresses
    }

    /// The listeners the round-robin selection keeps (each cluster's first
    /// valid ones, as many as its share, in cluster order), and per
    /// cluster the omissions building them made.
    fn kept_listeners<'k>(
        &self,
        listener_kept: &BTreeMap<&'k str, usize>,
        scratch: &mut Omissions,
    ) -> (Vec<GatewayStatusListeners>, Vec<(&'k str, Vec<Omission>)>) {
        let mut out_listeners: Vec<GatewayStatusListeners> = Vec::with_capacity(MAX_LISTENERS);
        let mut built_omissions = Vec::new();
        for (&cluster, &keep) in listener_kept {
            let Some(part) = self.clusters.get(cluster) else {
                continue;
            };
            let mut built = Omissions::default();
            for l in listeners::valid(cluster, &part.status, scratch)
                .into_iter()
                .take(keep)
            {
                out_listeners.push(listeners::build(cluster, l, &mut built));
            }
            if !built.0.is_empty() {
                built_omissions.push((cluster, built.0));
            }
        }
        (out_listeners, built_omissions)
    }

    /// One condition per kept valid type, pushed to `out`: its summary
    /// over the clusters where it is not True and those expected but
    /// absent, merged in cluster order.
    fn type_conditions(
        &self,
        out: &mut Vec<Condition>,
        kept_types: Vec<&str>,
        absent: &[(&str, Absence)],
        reports: usize,
        hub: &HubGateway,
        now: Timestamp,
    ) {
        let generation = hub.generation.max(0);
        for t in kept_types {
            let Some(state) = self.types.get(t) else {
                continue;
            };
            let fragments = Merge::new(
                state
                    .not_true
                    .iter()
                    .map(|(c, f)| (c.as_str(), Cow::Borrowed(f.as_str()))),
                absent
                    .iter()
                    .map(|(c, why)| (*c, Cow::Owned(conditions::absence_fragment(c, *why)))),
            );
            let count = state.not_true.len() + absent.len();
            let s = conditions::summary(t, reports, fragments, count);
            out.push(conditions::to_condition(
                t,
                s.status,
                s.reason,
                s.message,
                generation,
                &hub.previous,
                now,
            ));
        }
    }

    /// The fragments of the own condition's message, in the engine's
    /// order: the clusters' own omissions of conditions, the hub
    /// Gateway's, the clusters' own of addresses and listeners, those
    /// building the kept listeners made, then each limit that left
    /// entries out.
    fn own_fragments<'a>(
        &'a self,
        hub_omissions: &'a Omissions,
        built_omissions: &'a [(&'a str, Vec<Omission>)],
        limits: [(Item, usize, usize); 2],
    ) -> impl Iterator<Item = String> + 'a {
        let own = move |set: &'a BTreeSet<String>, pick: fn(&Part) -> &Vec<Omission>| {
            set.iter()
                .filter_map(move |c| self.clusters.get(c))
                .flat_map(move |p| pick(p).iter())
                .map(Omission::to_string)
        };
        own(&self.condition_omitters, |p| &p.condition_omissions)
            .chain(hub_omissions.0.iter().map(Omission::to_string))
            .chain(own(&self.address_omitters, |p| &p.address_omissions))
            .chain(own(&self.listener_omitters, |p| &p.listener_omissions))
            .chain(
                built_omissions
                    .iter()
                    .flat_map(|(_, o)| o.iter())
                    .map(Omission::to_string),
            )
            .chain(
                limits
                    .into_iter()
                    .filter(|(_, _, n)| *n > 0)
                    .map(|(item, max, n)| limit_fragment(item, max, n)),
            )
    }

    /// Every omission, in the engine's order, from what is kept: no entry
    /// is looked at again.
    fn materialize(&self, hub_omissions: &[Omission]) -> Vec<Omission> {
        let mut all: Vec<Omission> = Vec::new();
        let own =
            |all: &mut Vec<Omission>, set: &BTreeSet<String>, pick: fn(&Part) -> &Vec<Omission>| {
                for part in set.iter().filter_map(|c| self.clusters.get(c)) {
                    all.extend(pick(part).iter().cloned());
                }
            };
        own(&mut all, &self.condition_omitters, |p| {
            &p.condition_omissions
        });
        all.extend(hub_omissions.iter().cloned());
        own(&mut all, &self.address_omitters, |p| &p.address_omissions);
        all.extend(self.address_limit.values().cloned());
        own(&mut all, &self.listener_omitters, |p| &p.listener_omissions);
        all.extend(self.listener_tail.values().flatten().cloned());
        all
    }
}

/// Two lists of `(cluster, fragment)` in cluster order, merged.
struct Merge<A: Iterator, B: Iterator> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
}

impl<'c, A, B> Merge<A, B>
where
    A: Iterator<Item = (&'c str, Cow<'c, str>)>,
    B: Iterator<Item = (&'c str, Cow<'c, str>)>,
{
    fn new(a: A, b: B) -> Self {
        Merge {
            a: a.peekable(),
            b: b.peekable(),
        }
    }
}

impl<'c, A, B> Iterator for Merge<A, B>
where
    A: Iterator<Item = (&'c str, Cow<'c, str>)>,
    B: Iterator<Item = (&'c str, Cow<'c, str>)>,
{
    type Item = Cow<'c, str>;

    fn next(&mut self) -> Option<Cow<'c, str>> {
        let take_a = match (self.a.peek(), self.b.peek()) {
            (Some((a, _)), Some((b, _))) => a <= b,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let next = if take_a { self.a.next() } else { self.b.next() };
        next.map(|(_, f)| f)
    }
}
