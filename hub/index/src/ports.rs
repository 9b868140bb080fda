//! The index as each of its consumers above it sees it: one port per
//! consumer, holding the index and offering only what that consumer does
//! with it. The wiring (`gwhub-hub`) holds the [`Index`] and hands each
//! service its port: the agents' stream gets [`IngestPort`], the Dashboard
//! and the web page [`ReadPort`], fleet DNS [`DnsPort`]; on the management
//! cluster's side, the report store and liveness [`StorePort`], the status
//! writer [`StatusPort`], the fleet inventory [`InventoryPort`] and the
//! clusters' Events [`EventsPort`].
//!
//! It exists so that a consumer can be read and changed knowing only its
//! port: which calls it makes on the hub's state, and so which other
//! parts its changes can reach. A service handed a port cannot call what
//! the port does not offer (the index's other methods need an [`Index`],
//! which it is not given; `scripts/check-deps.sh` checks that the services
//! name none). Each method is the index's own, of the same name, so its
//! contract is documented there once: a port only chooses.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_dns_rules::DnsCondition;
use gwhub_hub_rules::aggregate::fleet::SharedReport;
use gwhub_hub_rules::aggregate::{GatewayKey, LiveHub};
use gwhub_hub_rules::history::Transition;
use gwhub_hub_rules::inventory::Placement;
use tokio::sync::{broadcast, watch};

use crate::{
    ApplyError, Change, ClusterGateway, ClusterRecord, ClusterSummary, ClusterTransition,
    ConnectError, DnsMode, GatewayView, Index, Labels, ListedCluster, ListenerHostnames, Session,
    Stamp, Superseded, Views,
};

/// Declares a port: its type, the [`Index`] method that makes it, and the
/// index's methods it offers, each delegated under its own name.
macro_rules! port {
    (
        $(#[$doc:meta])*
        $port:ident from $make:ident {
            $(fn $name:ident(&self $(, $arg:ident: $ty:ty)*) $(-> $ret:ty)?;)*
        }
    ) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $port(Index);

        impl $port {
            $(
                #[doc = concat!("[`Index::", stringify!($name), "`].")]
                pub fn $name(&self $(, $arg: $ty)*) $(-> $ret)? {
                    self.0.$name($($arg),*)
                }
            )*
        }

        impl Index {
            #[doc = concat!("The index as [`", stringify!($port), "`] offers it.")]
            pub fn $make(&self) -> $port {
                $port(self.clone())
            }
        }
    };
}

port! {
    /// What the agents' stream (`gwhub_api::grpc::ingest`) does with the
    /// index: a cluster's session, its reports (with its listeners'
    /// hostnames), and its liveness.
    IngestPort from ingest_port {
        fn connect(&self, cluster: &str, agent_version: &str) -> Result<Session, ConnectError>;
        fn disconnect(&self, session: &Session);
        fn touch(&self, session: &Session) -> bool;
        fn apply_stamped(
            &self,
            session: &Session,
            changes: Vec<Change>,
            stamp: Option<Stamp>
        ) -> Result<(), ApplyError>;
        fn replace_snapshot(
            &self,
            session: &Session,
            gateways: BTreeMap<GatewayKey, GatewayStatus>
        ) -> Result<(), Superseded>;
        fn replace_listener_hostnames(
            &self,
            cluster: &str,
            all: BTreeMap<GatewayKey, Vec<(String, String)>>
        );
        fn set_listener_hostnames(
            &self,
            cluster: &str,
            key: &GatewayKey,
            hostnames: Option<Vec<(String, String)>>
        );
        fn set_report_bytes(&self, session: &Session, bytes: u64);
    }
}

port! {
    /// What the readers' front ends (the Dashboard API and the web page, in
    /// `gwhub_api`) read: the published views, the history, the clusters
    /// and their reports. They change nothing.
    ReadPort from read_port {
        fn subscribe(&self) -> watch::Receiver<Views>;
        fn history(&self, key: &GatewayKey, limit: usize) -> Option<Vec<Transition>>;
        fn history_capacity(&self) -> usize;
        fn all_reports(
            &self,
            keep: impl Fn(&GatewayKey) -> bool
        ) -> Vec<(GatewayKey, SharedReport)>;
        fn cluster_reports(&self, key: &GatewayKey) -> Vec<ClusterGateway>;
        fn listed_clusters(&self) -> Vec<ListedCluster>;
        fn stale_after(&self) -> Duration;
    }
}

port! {
    /// What fleet DNS (`gwhub_dns`) does with the index: reads the views,
    /// the hub Gateways as the management cluster holds them, the clusters,
    /// and each cluster's report of a hub Gateway (with its listeners'
    /// hostnames), and writes back the `DNSPublished` condition and its
    /// mode.
    DnsPort from dns_port {
        fn subscribe(&self) -> watch::Receiver<Views>;
        fn subscribe_reports(&self) -> watch::Receiver<u64>;
        fn cluster_reports(&self, key: &GatewayKey) -> Vec<ClusterGateway>;
        fn live_hub(&self, key: &GatewayKey) -> Option<Arc<LiveHub>>;
        fn clusters(&self) -> Vec<ClusterSummary>;
        fn listener_hostnames(&self, cluster: &str, key: &GatewayKey) -> ListenerHostnames;
        fn set_dns_condition(&self, key: &GatewayKey, condition: Option<DnsCondition>) -> bool;
        fn set_dns_mode(&self, mode: DnsMode);
    }
}

port! {
    /// What the report store and the replicas' liveness records
    /// (`gwhub_k8s::store`, `gwhub_k8s::liveness`) do with the index: read
    /// each cluster's record to store it, import stored reports back, and
    /// follow who was seen where.
    StorePort from store_port {
        fn cluster_record(&self, cluster: &str) -> Option<ClusterRecord>;
        fn import_cluster(
            &self,
            cluster: &str,
            gateways: BTreeMap<GatewayKey, GatewayStatus>,
            last_report_millis: i64,
            last_seen_millis: i64
        ) -> bool;
        fn has_cluster(&self, cluster: &str) -> bool;
        fn deregister(&self, cluster: &str) -> bool;
        fn clusters(&self) -> Vec<ClusterSummary>;
        fn seen_elsewhere(&self, cluster: &str, seen_millis: i64);
        fn subscribe_reports(&self) -> watch::Receiver<u64>;
        fn subscribe_pruned(&self) -> broadcast::Receiver<String>;
        fn stale_after(&self) -> Duration;
    }
}

port! {
    /// What the hub Gateways' status writer (`gwhub_k8s::status_writer`)
    /// does with the index: keeps the live hub Gateways current, and reads
    /// the views aggregated with them.
    StatusPort from status_port {
        fn live_hub(&self, key: &GatewayKey) -> Option<Arc<LiveHub>>;
        fn live_hub_keys(&self) -> Vec<GatewayKey>;
        fn replace_live_hubs(&self, all: BTreeMap<GatewayKey, LiveHub>);
        fn set_live_hub(&self, key: GatewayKey, live: Option<LiveHub>) -> bool;
        fn set_live_hub_written(
            &self,
            key: GatewayKey,
            planned: &Arc<LiveHub>,
            written: LiveHub
        ) -> bool;
        fn subscribe(&self) -> watch::Receiver<Views>;
        fn subscribe_passes(&self) -> watch::Receiver<u64>;
        fn view(&self, key: &GatewayKey) -> Option<Arc<GatewayView>>;
    }
}

port! {
    /// What the fleet inventory's watches and the ClusterProfiles'
    /// condition (`gwhub_k8s::inventory`, `gwhub_k8s::reporting`) do with
    /// the index: keep the inventory and placements current, and read the
    /// clusters heard from.
    InventoryPort from inventory_port {
        fn replace_inventory(&self, all: BTreeMap<String, Labels>);
        fn upsert_inventory(&self, cluster: &str, labels: Labels);
        fn remove_from_inventory(&self, cluster: &str);
        fn replace_placements(&self, all: Vec<Placement>);
        fn set_placement(&self, namespace: &str, name: &str, placement: Option<Placement>);
        fn clusters(&self) -> Vec<ClusterSummary>;
    }
}

port! {
    /// What the clusters' Events (`gwhub_k8s::events`) read: their
    /// stale/fresh transitions.
    EventsPort from events_port {
        fn subscribe_transitions(&self) -> broadcast::Receiver<ClusterTransition>;
        fn stale_after(&self) -> Duration;
    }
}
