//! `/api/events`: the page's Server-Sent Events stream, apart from the
//! one-shot answers because it lives on: one task per page, a Dashboard
//! call's budgets, the index's watch channel, keep-alives and the
//! reader's recheck.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::http;

use gwhub_hub_rules::listing::Filter;
use gwhub_hub_rules::read_access::Visibility;

use super::{Change, ClusterView, Fleet, GatewayName, GatewayRow, State, error, visible_clusters};
use crate::authz::Reader;
use crate::index::GatewayView;
use crate::read::{Diff, Sent, diff, undecided};
use crate::reader_pool::CallPermit;

/// A comment line on an idle event stream this often: proxies keep it
/// open, and a page that went away is noticed. It goes through the
/// stream's one-event channel like any event (not axum's `KeepAlive`,
/// which is written only while the body is polled): a page that stopped
/// reading leaves it there, and is dropped after `--watch-send-timeout`
/// even when nothing changes.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// Rows of one event at most (as [`row_weight`] counts them): a larger
/// snapshot goes as a `snapshot` event and `change` events, so a page's
/// stream holds a bounded event whatever the fleet weighs.
const EVENT_PAGE_BYTES: usize = 256 * 1024;

/// About the size of the JSON of `v`'s [`GatewayRow`].
fn row_weight(v: &GatewayView) -> usize {
    128 + v.key.namespace.len()
        + v.key.name.len()
        + v.cells.iter().map(|c| 64 + c.cluster.len()).sum::<usize>()
        + v.lean
            .missing_clusters
            .iter()
            .map(|m| 48 + m.cluster.len())
            .sum::<usize>()
}

/// What [`State::stream`] keeps between two events of one page.
struct PageState {
    /// What the page was sent, per hub Gateway.
    sent: Sent,
    /// Whether the next event is the first (`snapshot`).
    snapshot: bool,
    /// The clusters of the page's last event.
    last_clusters: Option<Vec<ClusterView>>,
}

impl State {
    /// A Server-Sent Events stream of the matching hub Gateways.
    pub(super) fn events(
        self: Arc<Self>,
        conn: Option<crate::conn_state::ConnInfo>,
        filter: Filter,
        reader: Reader,
    ) -> Response {
        // A call of the Dashboard's budgets: the total, the client
        // address's share and the connection's, counted in
        // gwhub_dashboard_calls.
        // Authorized already (the reader was decided before).
        let permit = match self
            .streams
            .admit(conn.as_ref(), true, self.max_streams_per_connection)
        {
            Ok(p) => p,
            Err(e) => return error(http::StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
        };
        let conn = conn.map(|c| c.state);
        // One event in flight, as for WatchGateways: while the page is
        // slow, changes coalesce in the watch channel, not here.
        let (tx, rx) = mpsc::channel::<Event>(1);
        let state = self.clone();
        tokio::spawn(state.stream(permit, tx, filter, reader, conn));
        Sse::new(ReceiverStream::new(rx).map(Ok::<_, Infallible>)).into_response()
    }

    /// The page's task: an event per change of what it sees (a page of
    /// rows at a time), keep-alives while idle, until the page goes, its
    /// reader is no longer valid, or the hub shuts down.
    async fn stream(
        self: Arc<Self>,
        _permit: CallPermit,
        tx: mpsc::Sender<Event>,
        filter: Filter,
        mut reader: Reader,
        conn: Option<Arc<crate::conn_state::ConnState>>,
    ) {
        let mut views = self.index.subscribe();
        let shutdown = self.shutdown.clone();
        let mut page = PageState {
            sent: HashMap::new(),
            snapshot: true,
            last_clusters: None,
        };
        let mut keepalive = tokio::time::interval(KEEPALIVE);
        keepalive.reset();
        loop {
            // As WatchGateways: new namespaces decided before sent; a
            // reader no longer valid loses the stream (the page
            // reconnects and is asked for a token).
            let missing = undecided(&views.borrow_and_update(), &filter, reader.visibility());
            if reader
                .decide(missing.iter().map(String::as_str))
                .await
                .is_err()
            {
                return;
            }
            let d = diff(
                &views.borrow(),
                &mut page.sent,
                false,
                &filter,
                reader.visibility(),
            );
            let Ok((event, more)) = self.next_event(d, &mut page, reader.visibility()) else {
                return;
            };
            if let Some(event) = event
                && !self.send(&tx, event, conn.as_deref()).await
            {
                return;
            }
            if more {
                continue;
            }
            tokio::select! {
                r = views.changed() => if r.is_err() { return },
                _ = keepalive.tick() => {
                    // Also picks up a cluster connecting or going
                    // away without any Gateway changing.
                    if !self.send(&tx, Event::default().comment("keep-alive"), conn.as_deref()).await {
                        return;
                    }
                }
                _ = crate::authz::until(reader.recheck_at()) => {
                    if reader.recheck().await.is_err() {
                        return;
                    }
                }
                _ = tx.closed() => return,
                _ = shutdown.cancelled() => return,
            }
        }
    }

    /// The event the page gets next for diff `d`: at most
    /// [`EVENT_PAGE_BYTES`] of rows (the rest follow as changes, diffed
    /// again against the views of then, when the second value says there
    /// are more), or none when nothing it sees changed. `Err` when the
    /// event cannot be encoded (the stream ends; the page reconnects).
    fn next_event(
        &self,
        mut d: Diff,
        page: &mut PageState,
        visibility: &Visibility,
    ) -> Result<(Option<Event>, bool), ()> {
        let rows = d.take_page(&mut page.sent, EVENT_PAGE_BYTES, |v, _| row_weight(v));
        let more = !d.upserted.is_empty();
        let clusters = visible_clusters(&self.index, visibility);
        let event = if page.snapshot
            || !rows.is_empty()
            || !d.deleted.is_empty()
            || page.last_clusters.as_ref() != Some(&clusters)
        {
            let gateways: Vec<GatewayRow<'_>> =
                rows.iter().map(|(v, _)| GatewayRow::of(v)).collect();
            let event = if page.snapshot {
                Event::default().event("snapshot").json_data(Fleet {
                    clusters: &clusters,
                    gateways,
                    stale_after_millis: self.stale_after_millis(),
                })
            } else {
                let deleted: Vec<GatewayName<'_>> = d
                    .deleted
                    .iter()
                    .map(|r| GatewayName {
                        namespace: &r.namespace,
                        name: &r.name,
                    })
                    .collect();
                Event::default().event("change").json_data(Change {
                    clusters: &clusters,
                    upserted: gateways,
                    deleted,
                })
            };
            let Ok(event) = event else {
                // Cannot happen (the views are plain data); the
                // page reconnects and starts over.
                tracing::warn!("cannot encode a web page event");
                return Err(());
            };
            page.snapshot = false;
            page.last_clusters = Some(clusters);
            Some(event)
        } else {
            None
        };
        drop((d, rows));
        Ok((event, more))
    }

    /// Hands `event` to the page's connection, or gives up on a page that
    /// took nothing for `--watch-send-timeout` (closing its connection).
    async fn send(
        &self,
        tx: &mpsc::Sender<Event>,
        event: Event,
        conn: Option<&crate::conn_state::ConnState>,
    ) -> bool {
        // Sooner while others are refused for a full pool.
        let since = tokio::time::Instant::now();
        let sent = tokio::select! {
            r = tx.send(event) => Ok(r),
            () = self.streams.stalled(since, self.send_timeout) => Err(()),
        };
        match sent {
            Ok(Ok(())) => true,
            Ok(Err(_)) => false,
            Err(()) => {
                self.streams.counters().watchers_dropped.inc();
                tracing::warn!(timeout = ?self.send_timeout, "dropping a web page that takes no events (--watch-send-timeout)");
                if let Some(c) = conn {
                    c.close();
                }
                false
            }
        }
    }
}
