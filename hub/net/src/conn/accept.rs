//! The accept loop of a listener: connections taken within its limits
//! (`--max-connections`, a reader's share per address), the one idle
//! longest evicted when full, and the accept errors backed off. Apart from
//! the connection's own plumbing (its state, calls and idle timer), which
//! runs for each connection after this hands it over.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use gwhub_hub_rules::reader_slots::Refusal;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use super::{Conn, ConnLimits, ListenerCounters, Open, PoolSlot, ReaderPool, wrap};

/// Pause after a failed `accept` (out of file descriptors, ...).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(200);
/// How often reaching `--max-connections` is logged, at most.
const SATURATED_LOG_EVERY: Duration = Duration::from_secs(60);
/// Accepts connections on `listener` within `limits`, forever. `name`
/// (ingest, dashboard) goes into the logs.
pub fn incoming(
    listener: TcpListener,
    limits: ConnLimits,
    counters: Arc<ListenerCounters>,
    name: &'static str,
) -> impl Stream<Item = Result<Conn, io::Error>> + Send + 'static {
    let slots = Arc::new(Semaphore::new(
        limits.max_connections.clamp(1, Semaphore::MAX_PERMITS),
    ));
    let last_warned: Option<tokio::time::Instant> = None;
    // Connections are not authorized yet: no reserve.
    let pool = limits
        .max_per_address
        .map(|per| ReaderPool::new(limits.max_connections, per, 0));
    let open = Arc::new(Open::default());
    futures::stream::unfold(
        (listener, slots, limits, counters, last_warned),
        move |(listener, slots, limits, counters, mut last_warned)| {
            let pool = pool.clone();
            let open = open.clone();
            async move {
                loop {
                    let (tcp, remote) = accept(&listener, &counters, name).await;
                    let Ok(mut address) = place(pool.as_ref(), &open, &counters, name, remote)
                    else {
                        continue;
                    };
                    // A reader listener: any wait below is for a
                    // connection evicted above to close.
                    let evicting = pool.is_some();
                    let permit = match slots.clone().try_acquire_owned() {
                        Ok(p) => p,
                        Err(_) => {
                            saturated(evicting, &open, &counters, &limits, name, &mut last_warned);
                            slots.clone().acquire_owned().await.ok()?
                        }
                    };
                    if let (Some(pool), None) = (&pool, &address) {
                        // Room now: what closed gave its slot back.
                        match pool.admit(remote.ip(), true, None) {
                            Ok((slot, _)) => address = Some(slot),
                            Err(_) => continue,
                        }
                    }
                    let _ = tcp.set_nodelay(true);
                    let mut conn = wrap(tcp, remote, permit, &limits, &counters);
                    if let (Some(pool), Some(slot)) = (&pool, &address) {
                        pool.attach(slot, &conn.info.state);
                    }
                    conn._address = address;
                    open.add(&conn.info.state, limits.max_connections);
                    return Some((Ok(conn), (listener, slots, limits, counters, last_warned)));
                }
            }
        },
    )
}

/// The next connection on `listener`; a failed accept (out of file
/// descriptors, typically) is counted, logged and retried after
/// [`ACCEPT_BACKOFF`] instead of spinning on a core.
async fn accept(
    listener: &TcpListener,
    counters: &ListenerCounters,
    name: &'static str,
) -> (TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(e) => {
                counters.accept_errors.inc();
                // Out of file descriptors, typically: back off
                // instead of spinning on a core.
                tracing::warn!(listener = name, error = %e, backoff = ?ACCEPT_BACKOFF, "cannot accept a connection");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

/// A reader's place among its address's (on a reader listener, with a
/// `pool`): past its share closed at once, the listener slot kept for the
/// next client; when full, one holding less than its fair share closes
/// the oldest of the address holding most. `Err`: close the connection.
fn place(
    pool: Option<&Arc<ReaderPool>>,
    open: &Open,
    counters: &ListenerCounters,
    name: &'static str,
    remote: SocketAddr,
) -> Result<Option<PoolSlot>, ()> {
    let Some(pool) = pool else {
        return Ok(None);
    };
    match pool.admit(remote.ip(), true, None) {
        Ok((slot, evicted)) => {
            if evicted {
                counters.saturated.inc();
                counters.evicted_fair.inc();
            }
            Ok(Some(slot))
        }
        Err(Refusal::Source { max }) => {
            tracing::debug!(listener = name, %remote, max, "closing a connection past its address's share");
            Err(())
        }
        // Full, and this address has its fair share:
        // an idle connection makes room, or it is
        // closed (the accept loop never waits on it:
        // others may be below their share).
        Err(Refusal::Full { .. }) => {
            counters.saturated.inc();
            if !open.evict_idlest() {
                tracing::debug!(listener = name, %remote, "closing a connection: the listener is full and its address holds its fair share");
                return Err(());
            }
            counters.evicted.inc();
            Ok(None)
        }
    }
}

/// The listener is at its connection limit: counted, the connection idle
/// longest evicted (unless a reader listener's [`place`] did), and a
/// warning logged once a minute at most (`last_warned`).
fn saturated(
    evicting: bool,
    open: &Open,
    counters: &ListenerCounters,
    limits: &ConnLimits,
    name: &'static str,
    last_warned: &mut Option<tokio::time::Instant>,
) {
    // A reader listener counted and evicted above.
    if !evicting {
        counters.saturated.inc();
    }
    let evicted = !evicting && open.evict_idlest();
    if evicted {
        counters.evicted.inc();
    }
    // Once a minute at most: an attacker cycling
    // connections must not flood the log.
    let now = tokio::time::Instant::now();
    if last_warned.is_none_or(|t| now.duration_since(t) >= SATURATED_LOG_EVERY) {
        *last_warned = Some(now);
        tracing::warn!(
            listener = name,
            max = limits.max_connections,
            evicted,
            "connection limit reached; closing the connection idle longest (or the oldest of the address holding most), or waiting for one to close"
        );
    }
}
