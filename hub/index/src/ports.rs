//! The index as each of its consumers above it sees it: one port per
//! consumer, holding the index and offering only what that consumer does
//! with it. The wiring (`gwhub-hub`) holds the [`Index`] and hands each
//! service its port: the agents' stream gets [`IngestPort`], the Dashboard
//! and the web page [`ReadPort`], fleet DNS [`DnsPort`].
//!
//! It exists so that a consumer can be read and changed knowing only its
//! port: which calls it makes on the hub's state, and so which other
//! parts its changes can reach. A service handed a port cannot call what
//! the port does not offer (the index's other methods need an [`Index`],
//! which it is not given). Each method is the index's own, of the same
//! name: its contract is documented there once.

use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_dns_rules::DnsCondition;
use gwhub_hub_rules::aggregate::fleet::SharedReport;
use gwhub_hub_rules::aggregate::{GatewayKey, LiveHub};
use gwhub_hub_rules::history::Transition;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

use crate::{
    ApplyError, Change, ClusterGateway, ClusterSummary, ConnectError, DnsMode, Index,
    ListedCluster, ListenerHostnames, Session, Stamp, Superseded, Views,
};

/// What the agents' stream (`gwhub_api::grpc::ingest`) does with the
/// index: a cluster's session, its reports (with its listeners'
/// hostnames), and its liveness.
#[derive(Clone)]
pub struct IngestPort(Index);

impl IngestPort {
    /// [`Index::connect`].
    pub fn connect(&self, cluster: &str, agent_version: &str) -> Result<Session, ConnectError> {
        self.0.connect(cluster, agent_version)
    }

    /// [`Index::disconnect`].
    pub fn disconnect(&self, session: &Session) {
        self.0.disconnect(session);
    }

    /// [`Index::touch`].
    pub fn touch(&self, session: &Session) -> bool {
        self.0.touch(session)
    }

    /// [`Index::apply_stamped`].
    pub fn apply_stamped(
        &self,
        session: &Session,
        changes: Vec<Change>,
        stamp: Option<Stamp>,
    ) -> Result<(), ApplyError> {
        self.0.apply_stamped(session, changes, stamp)
    }

    /// [`Index::replace_snapshot`].
    pub fn replace_snapshot(
        &self,
        session: &Session,
        gateways: BTreeMap<GatewayKey, GatewayStatus>,
    ) -> Result<(), Superseded> {
        self.0.replace_snapshot(session, gateways)
    }

    /// [`Index::replace_listener_hostnames`].
    pub fn replace_listener_hostnames(
        &self,
        cluster: &str,
        all: BTreeMap<GatewayKey, Vec<(String, String)>>,
    ) {
        self.0.replace_listener_hostnames(cluster, all);
    }

    /// [`Index::set_listener_hostnames`].
    pub fn set_listener_hostnames(
        &self,
        cluster: &str,
        key: &GatewayKey,
        hostnames: Option<Vec<(String, String)>>,
    ) {
        self.0.set_listener_hostnames(cluster, key, hostnames);
    }

    /// [`Index::set_report_bytes`].
    pub fn set_report_bytes(&self, session: &Session, bytes: u64) {
        self.0.set_report_bytes(session, bytes);
    }
}

/// What the readers' front ends (the Dashboard API and the web page, in
/// `gwhub_api`) read: the published views, the history, the clusters.
/// They change nothing.
#[derive(Clone)]
pub struct ReadPort(Index);

impl ReadPort {
    /// [`Index::subscribe`].
    pub fn subscribe(&self) -> watch::Receiver<Views> {
        self.0.subscribe()
    }

    /// [`Index::history`].
    pub fn history(&self, key: &GatewayKey, limit: usize) -> Option<Vec<Transition>> {
        self.0.history(key, limit)
    }

    /// [`Index::history_capacity`].
    pub fn history_capacity(&self) -> usize {
        self.0.history_capacity()
    }

    /// [`Index::all_reports`].
    pub fn all_reports(
        &self,
        keep: impl Fn(&GatewayKey) -> bool,
    ) -> Vec<(GatewayKey, SharedReport)> {
        self.0.all_reports(keep)
    }

    /// [`Index::cluster_reports`].
    pub fn cluster_reports(&self, key: &GatewayKey) -> Vec<ClusterGateway> {
        self.0.cluster_reports(key)
    }

    /// [`Index::listed_clusters`].
    pub fn listed_clusters(&self) -> Vec<ListedCluster> {
        self.0.listed_clusters()
    }

    /// [`Index::stale_after`].
    pub fn stale_after(&self) -> Duration {
        self.0.stale_after()
    }
}

/// What fleet DNS (`gwhub_dns`) does with the index: reads the views, the
/// hub Gateways as the management cluster holds them, the clusters, and
/// each cluster's report of a hub Gateway (with its listeners'
/// hostnames), and writes back the `DNSPublished` condition and its mode.
#[derive(Clone)]
pub struct DnsPort(Index);

impl DnsPort {
    /// [`Index::subscribe`].
    pub fn subscribe(&self) -> watch::Receiver<Views> {
        self.0.subscribe()
    }

    /// [`Index::subscribe_reports`].
    pub fn subscribe_reports(&self) -> watch::Receiver<u64> {
        self.0.subscribe_reports()
    }

    /// [`Index::cluster_reports`].
    pub fn cluster_reports(&self, key: &GatewayKey) -> Vec<ClusterGateway> {
        self.0.cluster_reports(key)
    }

    /// [`Index::live_hub`].
    pub fn live_hub(&self, key: &GatewayKey) -> Option<Arc<LiveHub>> {
        self.0.live_hub(key)
    }

    /// [`Index::clusters`].
    pub fn clusters(&self) -> Vec<ClusterSummary> {
        self.0.clusters()
    }

    /// [`Index::listener_hostnames`].
    pub fn listener_hostnames(&self, cluster: &str, key: &GatewayKey) -> ListenerHostnames {
        self.0.listener_hostnames(cluster, key)
    }

    /// [`Index::set_dns_condition`].
    pub fn set_dns_condition(&self, key: &GatewayKey, condition: Option<DnsCondition>) -> bool {
        self.0.set_dns_condition(key, condition)
    }

    /// [`Index::set_dns_mode`].
    pub fn set_dns_mode(&self, mode: DnsMode) {
        self.0.set_dns_mode(mode);
    }
}

impl Index {
    /// The port of the agents' stream.
    pub fn ingest_port(&self) -> IngestPort {
        IngestPort(self.clone())
    }

    /// The port of the readers' front ends.
    pub fn read_port(&self) -> ReadPort {
        ReadPort(self.clone())
    }

    /// The port of fleet DNS.
    pub fn dns_port(&self) -> DnsPort {
        DnsPort(self.clone())
    }
}
