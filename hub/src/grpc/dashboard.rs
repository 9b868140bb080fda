//! `gwhub.v1.Dashboard`: read-only views of the index. Every read clones
//! pre-encoded Gateways out of the current `watch` value; nothing waits on
//! ingest.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use gwhub_proto::v1;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::aggregate::GatewayKey;
use crate::index::{GatewayView, Index, Views};

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

/// What a watcher was last sent of one Gateway: its revision and its
/// omissions' revision.
type Sent = HashMap<GatewayKey, (u64, u64)>;

/// The next watch message: everything whose revision differs from what the
/// client last got, and what disappeared. With `lean`, a Gateway whose
/// omissions the client already has goes without them
/// (`omissions_unchanged`). `sent` is updated.
///
/// Only `Arc`s are taken while `views` is borrowed (the watch channel's
/// lock); the messages are cloned by [`Diff::into_response`] after it.
fn diff(views: &Views, sent: &mut Sent, snapshot: bool, lean: bool) -> Diff {
    let mut upserted = Vec::new();
    for (key, view) in &views.gateways {
        let last = sent.get(key).copied();
        if last.map(|(r, _)| r) == Some(view.revision()) {
            continue;
        }
        let now = (view.revision(), view.omissions_revision);
        match last {
            Some((_, o)) if lean && o == view.omissions_revision => {
                upserted.push((view.clone(), true));
            }
            Some(_) => upserted.push((view.clone(), false)),
            None => {
                upserted.push((view.clone(), false));
                sent.insert(key.clone(), now);
                continue;
            }
        }
        if let Some(s) = sent.get_mut(key) {
            *s = now;
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
    Diff {
        snapshot,
        upserted,
        deleted,
    }
}

/// A watch message before its Gateways are cloned out of their views.
struct Diff {
    snapshot: bool,
    /// Each view, and whether to send it without its omissions.
    upserted: Vec<(Arc<GatewayView>, bool)>,
    deleted: Vec<v1::GatewayRef>,
}

impl Diff {
    fn is_empty(&self) -> bool {
        self.upserted.is_empty() && self.deleted.is_empty()
    }

    fn into_response(self) -> v1::WatchGatewaysResponse {
        v1::WatchGatewaysResponse {
            snapshot: self.snapshot,
            upserted: self
                .upserted
                .into_iter()
                .map(|(view, lean)| match lean {
                    true => view.lean.clone(),
                    false => view.full(),
                })
                .collect(),
            deleted: self.deleted,
        }
    }
}

#[tonic::async_trait]
impl v1::dashboard_server::Dashboard for DashboardService {
    async fn list_gateways(
        &self,
        _: Request<v1::ListGatewaysRequest>,
    ) -> Result<Response<v1::ListGatewaysResponse>, Status> {
        // Clone the messages after letting go of the watch channel's lock.
        let views: Vec<Arc<GatewayView>> = self
            .index
            .subscribe()
            .borrow()
            .gateways
            .values()
            .cloned()
            .collect();
        let gateways = views.iter().map(|v| v.full()).collect();
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
            gateway: Some(view.full()),
            clusters,
        }))
    }

    type WatchGatewaysStream =
        Pin<Box<dyn Stream<Item = Result<v1::WatchGatewaysResponse, Status>> + Send + 'static>>;

    async fn watch_gateways(
        &self,
        request: Request<v1::WatchGatewaysRequest>,
    ) -> Result<Response<Self::WatchGatewaysStream>, Status> {
        let lean = request.into_inner().omit_unchanged_omissions;
        let mut views = self.index.subscribe();
        let mut shutdown = self.shutdown.clone();
        // One message in flight: while the client is slow, changes coalesce
        // in the watch channel instead of queueing here.
        let (tx, rx) = mpsc::channel(1);
        tokio::spawn(async move {
            let mut sent = HashMap::new();
            let mut snapshot = true;
            loop {
                let d = diff(&views.borrow_and_update(), &mut sent, snapshot, lean);
                if snapshot || !d.is_empty() {
                    snapshot = false;
                    let msg = d.into_response();
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
