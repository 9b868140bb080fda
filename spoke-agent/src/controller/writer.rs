//! The one status writer: a queue with one entry per Gateway (the newest
//! result wins, so it is bounded by the number of Gateways) drained by a
//! single task that server-side applies our conditions.

use std::sync::Arc;

use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus};
use gwhub_common::{Backoff, CoalescingQueue};
use kube::api::{Api, Patch, PatchParams};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::FIELD_MANAGER;
use super::cache::{Cache, Dirty, Touch};
use super::metrics::Metrics;
use crate::status;

/// A computed status waiting to be applied.
#[derive(Debug)]
pub(crate) struct Pending {
    /// The merged status we expect the Gateway to have after the apply.
    pub(crate) desired: GatewayStatus,
    /// The apply body ([`status::apply_patch`]).
    pub(crate) patch: Value,
    /// Take the fields over from other managers (`--write-local-status=true`:
    /// the user asked the agent to write whoever else writes them).
    pub(crate) force: bool,
}

/// Gateways (by name) with a status to write: a newer status replaces a
/// queued one.
pub(crate) type WriteQueue = CoalescingQueue<String, Pending>;

/// What the writer needs.
pub(crate) struct Writer {
    pub(crate) api: Api<Gateway>,
    pub(crate) namespace: String,
    pub(crate) queue: Arc<WriteQueue>,
    pub(crate) gateways: Arc<Cache<Gateway>>,
    pub(crate) dirty: Arc<Dirty>,
    pub(crate) metrics: Arc<Metrics>,
    /// Delay before a failed write's Gateway is evaluated again: `retry`,
    /// doubling per consecutive failure of the same Gateway.
    pub(crate) backoff: Backoff<String>,
}

impl Writer {
    /// Writes queued statuses until `shutdown`.
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        loop {
            while let Some((name, pending)) = self.queue.pop_first() {
                if shutdown.is_cancelled() {
                    return;
                }
                self.write(&name, pending, &shutdown).await;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = self.queue.notified() => {}
            }
        }
    }

    #[tracing::instrument(name = "local_status_write", skip_all, fields(gateway = %format!("{}/{name}", self.namespace)))]
    async fn write(&self, name: &str, pending: Pending, shutdown: &CancellationToken) {
        // The live object may already carry this result (our previous write
        // came back through the watch after the evaluation was queued).
        let Some(live) = self.gateways.get(&self.namespace, name) else {
            return;
        };
        let current = live.status.clone().unwrap_or_default();
        if !status::needs_write(&current, &pending.desired) {
            Metrics::bump(&self.metrics.skipped_writes);
            return;
        }
        // Not forced (unless `true`): a conflict means another manager
        // changed a field we co-own (attachedRoutes); we re-evaluate from the
        // fresh object.
        let mut params = PatchParams::apply(FIELD_MANAGER);
        params.force = pending.force;
        match self
            .api
            .patch_status(name, &params, &Patch::Apply(&pending.patch))
            .await
        {
            Ok(_) => {
                self.backoff.succeeded(&name.to_owned());
                Metrics::bump(&self.metrics.writes);
                tracing::debug!("status applied");
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                Metrics::bump(&self.metrics.write_conflicts);
                tracing::info!(
                    message = %s.message,
                    "status apply conflicted with another writer; re-evaluating from the fresh object"
                );
                self.retry_later(name, shutdown);
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {
                self.backoff.succeeded(&name.to_owned());
                tracing::debug!("Gateway gone before its status was written");
            }
            Err(e) => {
                Metrics::bump(&self.metrics.write_errors);
                tracing::warn!(
                    error = %e,
                    "status apply failed; retrying"
                );
                self.retry_later(name, shutdown);
            }
        }
    }

    fn retry_later(&self, name: &str, shutdown: &CancellationToken) {
        let delay = self.backoff.failed(&name.to_owned());
        self.dirty
            .touch_after(Touch::Gateway(name.to_owned()), delay, shutdown);
    }
}
