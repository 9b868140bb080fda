//! `gwhub.v1.Dashboard`: read-only views of the index. Every read clones
//! pre-encoded Gateways out of the current `watch` value; nothing waits on
//! ingest.

use std::collections::HashMap;
use std::pin::Pin;

use futures::Stream;
use gwhub_proto::v1;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::aggregate::GatewayKey;
use crate::index::{Index, Views};

pub struct DashboardService {
    index: Index,
    shutdown: watch::Receiver<bool>,
}

impl DashboardService {
    /// `shutdown` turning true ends every watch.
    pub fn new(index: Index, shutdown: watch::Receiver<bool>) -> Self {
        DashboardService { index, shutdown }
    }

    pub fn into_server(self) -> v1::dashboard_server::DashboardServer<Self> {
        v1::dashboard_server::DashboardServer::new(self)
    }
}

fn millis_to_secs(ms: i64) -> i64 {
    ms.div_euclid(1000)
}

/// The next watch message: everything whose revision differs from what the
/// client last got, and what disappeared. `sent` is updated.
fn diff(
    views: &Views,
    sent: &mut HashMap<GatewayKey, u64>,
    snapshot: bool,
) -> v1::WatchGatewaysResponse {
    let mut upserted = Vec::new();
    for (key, view) in &views.gateways {
        if sent.get(key) != Some(&view.revision()) {
            sent.insert(key.clone(), view.revision());
            upserted.push(view.proto.clone());
        }
    }
    let mut deleted = Vec::new();
    if sent.len() > views.gateways.len() {
        sent.retain(|key, _| {
            let keep = views.gateways.contains_key(key);
            if !keep {
                deleted.push(v1::GatewayRef {
                    namespace: key.namespace.clone(),
                    name: key.name.clone(),
                });
            }
            keep
        });
        deleted.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    }
    v1::WatchGatewaysResponse {
        snapshot,
        upserted,
        deleted,
    }
}

#[tonic::async_trait]
impl v1::dashboard_server::Dashboard for DashboardService {
    async fn list_gateways(
        &self,
        _: Request<v1::ListGatewaysRequest>,
    ) -> Result<Response<v1::ListGatewaysResponse>, Status> {
        let gateways = self
            .index
            .subscribe()
            .borrow()
            .gateways
            .values()
            .map(|v| v.proto.clone())
            .collect();
        Ok(Response::new(v1::ListGatewaysResponse { gateways }))
    }

    async fn get_gateway(
        &self,
        request: Request<v1::GetGatewayRequest>,
    ) -> Result<Response<v1::GetGatewayResponse>, Status> {
        let r = request.into_inner();
        let key = GatewayKey::new(r.namespace, r.name);
        let view = self.index.subscribe().borrow().gateways.get(&key).cloned();
        let Some(view) = view else {
            return Err(Status::not_found(format!(
                "no cluster reports Gateway {key}"
            )));
        };
        let clusters = self
            .index
            .cluster_reports(&key)
            .into_iter()
            .map(|c| v1::ClusterGatewayStatus {
                cluster: c.cluster,
                stale: c.stale,
                last_report_time: millis_to_secs(c.last_seen_millis),
                status: Some(c.status),
            })
            .collect();
        Ok(Response::new(v1::GetGatewayResponse {
            gateway: Some(view.proto.clone()),
            clusters,
        }))
    }

    type WatchGatewaysStream =
        Pin<Box<dyn Stream<Item = Result<v1::WatchGatewaysResponse, Status>> + Send + 'static>>;

    async fn watch_gateways(
        &self,
        _: Request<v1::WatchGatewaysRequest>,
    ) -> Result<Response<Self::WatchGatewaysStream>, Status> {
        let mut views = self.index.subscribe();
        let mut shutdown = self.shutdown.clone();
        // One message in flight: while the client is slow, changes coalesce
        // in the watch channel instead of queueing here.
        let (tx, rx) = mpsc::channel(1);
        tokio::spawn(async move {
            let mut sent = HashMap::new();
            let mut snapshot = true;
            loop {
                let msg = diff(&views.borrow_and_update(), &mut sent, snapshot);
                if snapshot || !msg.upserted.is_empty() || !msg.deleted.is_empty() {
                    snapshot = false;
                    tokio::select! {
                        r = tx.send(Ok(msg)) => if r.is_err() { return },
                        _ = crate::grpc::shutting_down(&mut shutdown) => break,
                    }
                }
                tokio::select! {
                    r = views.changed() => if r.is_err() { break },
                    _ = tx.closed() => return,
                    _ = crate::grpc::shutting_down(&mut shutdown) => break,
                }
            }
            let _ = tx
                .send(Err(Status::unavailable("the hub is shutting down")))
                .await;
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn list_clusters(
        &self,
        _: Request<v1::ListClustersRequest>,
    ) -> Result<Response<v1::ListClustersResponse>, Status> {
        let clusters = self
            .index
            .clusters()
            .into_iter()
            .map(|c| v1::ClusterInfo {
                name: c.name,
                connected: c.connected,
                stale: c.stale,
                last_report_time: millis_to_secs(c.last_report_millis),
                gateway_count: u32::try_from(c.gateway_count).unwrap_or(u32::MAX),
                last_seen_time: millis_to_secs(c.last_seen_millis),
                agent_version: c.agent_version,
            })
            .collect();
        Ok(Response::new(v1::ListClustersResponse { clusters }))
    }
}
