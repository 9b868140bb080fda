//! The hub's index of every cluster's latest report, shaped so a change
//! touches only the Gateways it affects: every operation returns the keys to
//! re-aggregate, and reading one Gateway's reports costs linear in its
//! clusters. Reports are kept in the compact form ([`ReportedStatus`], its
//! strings shared fleet-wide). Pure data; the runtime wraps it in a lock.

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use gateway_api::apis::standard::gateways::GatewayStatus;
use jiff::Timestamp;

use super::compact::{Interner, ReportedStatus};
use super::{
    AggregateError, Aggregation, ClusterReport, Freshness, HubGateway, Incremental, Options,
};

pub use gwhub_model::GatewayKey;

/// Keys whose aggregated status may have changed.
pub type Affected = BTreeSet<GatewayKey>;

/// Statuses are shared (`Arc`), so a runtime can take a Gateway's reports
/// out from under its lock without copying them.
#[derive(Clone, Debug, PartialEq)]
struct Entry {
    status: Arc<ReportedStatus>,
    freshness: Freshness,
}

/// One cluster's report of a Gateway, owned (see [`Fleet::reports_shared`]).
#[derive(Clone, Debug)]
pub struct SharedReport {
    pub cluster: String,
    pub status: Arc<ReportedStatus>,
    pub freshness: Freshness,
}

impl SharedReport {
    pub fn as_report(&self) -> ClusterReport<'_> {
        ClusterReport {
            cluster: &self.cluster,
            status: &self.status,
            freshness: self.freshness,
        }
    }
}

#[derive(Clone, Debug)]
struct ClusterState {
    freshness: Freshness,
    gateways: BTreeSet<GatewayKey>,
}

/// Per hub Gateway, per cluster (in name order), the latest report.
#[derive(Clone, Debug, Default)]
pub struct Fleet {
    gateways: BTreeMap<GatewayKey, BTreeMap<String, Entry>>,
    clusters: BTreeMap<String, ClusterState>,
    /// Per Gateway, its [`Incremental`] aggregate, kept by every change
    /// (see [`Fleet::with_incremental`]).
    incremental: Option<Incrementals>,
    /// Shares the strings the reports repeat.
    interner: Interner,
}

#[derive(Clone, Debug)]
struct Incrementals {
    options: Options,
    gateways: BTreeMap<GatewayKey, Incremental>,
}

impl Fleet {
    pub fn new() -> Self {
        Self::default()
    }

    /// A fleet that also keeps each Gateway's [`Incremental`] aggregate
    /// (with `options`) up to date, so a change costs the changed
    /// cluster's part rather than a pass over the Gateway's clusters.
    pub fn with_incremental(options: Options) -> Self {
        Fleet {
            incremental: Some(Incrementals {
                options,
                gateways: BTreeMap::new(),
            }),
            ..Self::default()
        }
    }

    /// `key`'s incremental aggregate: `None` when the fleet keeps none
    /// ([`Fleet::new`]) or no cluster reports `key`.
    pub fn incremental(&self, key: &GatewayKey) -> Option<&Incremental> {
        self.incremental.as_ref()?.gateways.get(key)
    }

    /// Keeps `key`'s incremental aggregate: `cluster` reports `entry`, or
    /// (`None`) no longer reports `key`.
    fn track(&mut self, key: &GatewayKey, cluster: &str, entry: Option<&Entry>) {
        let Some(inc) = &mut self.incremental else {
            return;
        };
        match entry {
            Some(e) => {
                if !inc.gateways.contains_key(key) {
                    inc.gateways
                        .insert(key.clone(), Incremental::new(inc.options.clone()));
                }
                if let Some(g) = inc.gateways.get_mut(key) {
                    g.set(cluster, e.status.clone(), e.freshness);
                }
            }
            None => {
                if let Some(g) = inc.gateways.get_mut(key) {
                    g.remove(cluster);
                    if g.is_empty() {
                        inc.gateways.remove(key);
                    }
                }
            }
        }
    }

    /// Registers `cluster` if it is new; copies its name only then (every
    /// delta comes through here).
    fn register(&mut self, cluster: &str) {
        if !self.clusters.contains_key(cluster) {
            self.clusters.insert(
                cluster.to_owned(),
                ClusterState {
                    freshness: Freshness::Fresh,
                    gateways: BTreeSet::new(),
                },
            );
        }
    }

    /// Records `cluster`'s status of `key` (registering the cluster if new).
    /// Affects `key` unless the status is unchanged. Copies the key and the
    /// cluster name only when they are new; keeps the status compact.
    pub fn upsert(
        &mut self,
        cluster: &str,
        key: GatewayKey,
        status: impl Borrow<GatewayStatus>,
    ) -> Affected {
        self.register(cluster);
        let Some(state) = self.clusters.get_mut(cluster) else {
            return Affected::new();
        };
        let freshness = state.freshness;
        if !state.gateways.contains(&key) {
            state.gateways.insert(key.clone());
        }
        let next = Entry {
            status: Arc::new(self.interner.status(status.borrow())),
            freshness,
        };
        if !self.gateways.contains_key(&key) {
            self.gateways.insert(key.clone(), BTreeMap::new());
        }
        let Some(per_cluster) = self.gateways.get_mut(&key) else {
            return Affected::new();
        };
        match per_cluster.get_mut(cluster) {
            Some(e) if *e == next => return Affected::new(),
            Some(e) => *e = next.clone(),
            None => {
                per_cluster.insert(cluster.to_owned(), next.clone());
            }
        }
        self.track(&key, cluster, Some(&next));
        Affected::from([key])
    }

    /// The Gateways `cluster` reports, if it is known.
    pub fn cluster_gateways(&self, cluster: &str) -> Option<&BTreeSet<GatewayKey>> {
        self.clusters.get(cluster).map(|s| &s.gateways)
    }

    /// `cluster` no longer has Gateway `key`.
    pub fn delete(&mut self, cluster: &str, key: &GatewayKey) -> Affected {
        let Some(state) = self.clusters.get_mut(cluster) else {
            return Affected::new();
        };
        if !state.gateways.remove(key) {
            return Affected::new();
        }
        if let Some(per_cluster) = self.gateways.get_mut(key) {
            per_cluster.remove(cluster);
            if per_cluster.is_empty() {
                self.gateways.remove(key);
            }
        }
        self.track(key, cluster, None);
        Affected::from([key.clone()])
    }

    /// Replaces everything `cluster` reports with a complete snapshot:
    /// Gateways missing from it are deleted. Affects only what changed.
    pub fn replace_snapshot(
        &mut self,
        cluster: &str,
        snapshot: impl IntoIterator<Item = (GatewayKey, GatewayStatus)>,
    ) -> Affected {
        let snapshot: BTreeMap<GatewayKey, GatewayStatus> = snapshot.into_iter().collect();
        let old: Vec<GatewayKey> = self
            .clusters
            .get(cluster)
            .map(|s| {
                s.gateways
                    .iter()
                    .filter(|k| !snapshot.contains_key(k))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        let mut affected = Affected::new();
        for key in old {
            affected.extend(self.delete(cluster, &key));
        }
        self.register(cluster);
        for (key, status) in snapshot {
            affected.extend(self.upsert(cluster, key, status));
        }
        affected
    }

    /// Forgets `cluster` entirely; its Gateways drop out of the aggregation.
    pub fn deregister(&mut self, cluster: &str) -> Affected {
        let Some(state) = self.clusters.remove(cluster) else {
            return Affected::new();
        };
        for key in &state.gateways {
            if let Some(per_cluster) = self.gateways.get_mut(key) {
                per_cluster.remove(cluster);
                if per_cluster.is_empty() {
                    self.gateways.remove(key);
                }
            }
            self.track(key, cluster, None);
        }
        state.gateways
    }

    /// Marks `cluster` stale since `last_report` (or fresh again); affects its
    /// Gateways when the freshness changed.
    pub(crate) fn set_freshness(&mut self, cluster: &str, freshness: Freshness) -> Affected {
        self.register(cluster);
        let Some(state) = self.clusters.get_mut(cluster) else {
            return Affected::new();
        };
        if state.freshness == freshness {
            return Affected::new();
        }
        state.freshness = freshness;
        let keys = state.gateways.clone();
        for key in &keys {
            if let Some(e) = self.gateways.get_mut(key).and_then(|m| m.get_mut(cluster)) {
                e.freshness = freshness;
            }
            if let Some(g) = self
                .incremental
                .as_mut()
                .and_then(|inc| inc.gateways.get_mut(key))
            {
                g.set_freshness(cluster, freshness);
            }
        }
        keys
    }

    /// Shorthand for `Fleet::set_freshness` with [`Freshness::Stale`].
    pub fn mark_stale(&mut self, cluster: &str, last_report: Timestamp) -> Affected {
        self.set_freshness(cluster, Freshness::Stale { last_report })
    }

    /// Shorthand for `Fleet::set_freshness` with [`Freshness::Fresh`].
    pub fn mark_fresh(&mut self, cluster: &str) -> Affected {
        self.set_freshness(cluster, Freshness::Fresh)
    }

    /// The reports of `key`'s clusters, in cluster name order.
    pub fn reports(&self, key: &GatewayKey) -> Vec<ClusterReport<'_>> {
        self.gateways
            .get(key)
            .map(|m| {
                m.iter()
                    .map(|(cluster, e)| ClusterReport {
                        cluster,
                        status: &e.status,
                        freshness: e.freshness,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// [`Fleet::reports`], owned: cheap (the statuses are shared), so a
    /// caller can aggregate after letting go of a lock around the fleet.
    pub fn reports_shared(&self, key: &GatewayKey) -> Vec<SharedReport> {
        self.gateways
            .get(key)
            .map(|m| {
                m.iter()
                    .map(|(cluster, e)| SharedReport {
                        cluster: cluster.clone(),
                        status: e.status.clone(),
                        freshness: e.freshness,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `cluster`'s report of `key`, owned, if it reports it.
    pub fn report_shared(&self, cluster: &str, key: &GatewayKey) -> Option<SharedReport> {
        let e = self.gateways.get(key)?.get(cluster)?;
        Some(SharedReport {
            cluster: cluster.to_owned(),
            status: e.status.clone(),
            freshness: e.freshness,
        })
    }

    /// `cluster`'s status of `key`, if it reports it (in the compact form;
    /// [`ReportedStatus::to_status`] gives the full one).
    pub fn status(&self, cluster: &str, key: &GatewayKey) -> Option<&Arc<ReportedStatus>> {
        self.gateways.get(key)?.get(cluster).map(|e| &e.status)
    }

    /// Aggregates one hub Gateway from its clusters' reports.
    pub fn aggregate(
        &self,
        key: &GatewayKey,
        hub: &HubGateway,
        options: &Options,
        now: Timestamp,
    ) -> Result<Aggregation, AggregateError> {
        super::aggregate(hub, &self.reports(key), options, now)
    }

    /// Every Gateway some cluster reports.
    pub fn gateway_keys(&self) -> impl Iterator<Item = &GatewayKey> {
        self.gateways.keys()
    }

    /// Every known cluster with its freshness and number of Gateways.
    pub fn clusters(&self) -> impl Iterator<Item = (&str, Freshness, usize)> {
        self.clusters
            .iter()
            .map(|(n, s)| (n.as_str(), s.freshness, s.gateways.len()))
    }
}
