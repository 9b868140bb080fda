//! The one watch-event loop of both runtimes: a `kube` watcher's events
//! with each (re-)list delivered whole once it is complete, so a consumer
//! replaces its view in one step and never sees half a list.

use futures::{Stream, StreamExt};
use kube::runtime::watcher::{Error, Event};
use tokio_util::sync::CancellationToken;

/// What a watch reports.
#[derive(Debug)]
pub enum Change<K> {
    /// A complete (re-)list: every object that exists now. A re-list may
    /// follow missed deletes and changes.
    Listed(Vec<K>),
    /// An object created or changed.
    Applied(K),
    /// An object deleted.
    Deleted(K),
    /// The watch failed; the watcher (with its backoff) resumes by itself.
    Failed(Error),
}

/// `events` (a `kube::runtime::watcher` stream, with its backoff) as
/// [`Change`]s, until it ends or `shutdown` is cancelled.
pub fn changes<K, S>(events: S, shutdown: CancellationToken) -> impl Stream<Item = Change<K>> + Send
where
    K: Send,
    S: Stream<Item = Result<Event<K>, Error>> + Send,
{
    // Objects of a list in progress.
    let mut listing: Option<Vec<K>> = None;
    events
        .take_until(shutdown.cancelled_owned())
        .filter_map(move |event| {
            let change = match event {
                Err(e) => Some(Change::Failed(e)),
                Ok(Event::Init) => {
                    listing = Some(Vec::new());
                    None
                }
                Ok(Event::InitApply(k)) => {
                    listing.get_or_insert_default().push(k);
                    None
                }
                Ok(Event::InitDone) => Some(Change::Listed(listing.take().unwrap_or_default())),
                Ok(Event::Apply(k)) => Some(Change::Applied(k)),
                Ok(Event::Delete(k)) => Some(Change::Deleted(k)),
            };
            std::future::ready(change)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lists_are_delivered_whole_and_changes_as_they_come() {
        let events = futures::stream::iter([
            Ok(Event::Init),
            Ok(Event::InitApply("a")),
            Ok(Event::InitApply("b")),
            Ok(Event::InitDone),
            Ok(Event::Apply("c")),
            Ok(Event::Delete("a")),
            Ok(Event::Init),
            Ok(Event::InitApply("b")),
            Ok(Event::InitDone),
            Ok(Event::Init),
            Ok(Event::InitDone),
        ]);
        let got: Vec<String> = changes(events, CancellationToken::new())
            .map(|c| format!("{c:?}"))
            .collect()
            .await;
        assert_eq!(
            got,
            [
                r#"Listed(["a", "b"])"#,
                r#"Applied("c")"#,
                r#"Deleted("a")"#,
                r#"Listed(["b"])"#,
                "Listed([])",
            ]
        );
    }

    #[tokio::test]
    async fn shutdown_ends_the_changes() {
        let shutdown = CancellationToken::new();
        shutdown.cancel();
        let pending = futures::stream::pending::<Result<Event<&str>, Error>>();
        let mut changes = std::pin::pin!(changes(pending, shutdown));
        assert!(changes.next().await.is_none());
    }
}
