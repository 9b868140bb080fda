//! The reader pools' slots at run time (issue 35): the pure table of
//! [`gwhub_hub_rules::reader_slots`] behind a lock, with the connection
//! each slot is, so that an eviction the table decides closes it. One
//! pool per reader listener (its connections, [`crate::conn::incoming`])
//! and one for the Dashboard calls ([`DashboardCalls`], in `calls`).

use std::sync::Arc;

use gwhub_hub_rules::reader_slots::{Admission, Refusal, SlotId, Slots, Source};

use crate::conn_state::ConnState;

mod calls;

pub use calls::{
    CallCounters, CallPermit, CallRefused, DEFAULT_MAX_DASHBOARD_CALLS, DashboardCalls,
};

/// Default of `--max-dashboard-connections-per-address` and
/// `--max-dashboard-calls-per-address`: 0, an eighth of the pool
/// ([`gwhub_hub_rules::reader_slots::eighth`]: 64 connections -> 8 per
/// address, 256 calls -> 32), so eight addresses are needed to fill a
/// pool and a newcomer then still gets its fair share (spec section 5).
pub const DEFAULT_PER_ADDRESS: usize = 0;

/// What one address may hold of a pool of `max`: `per_address`, or an
/// eighth of `max` for 0.
pub fn per_address(per_address: usize, max: usize) -> usize {
    match per_address {
        0 => gwhub_hub_rules::reader_slots::eighth(max),
        n => n,
    }
}

/// One reader pool's [`Slots`], shared by the runtime: the connections
/// of a reader listener, or the Dashboard calls. What a slot is (the
/// connection to close when the table evicts it) is kept beside it.
#[derive(Debug)]
pub(crate) struct ReaderPool {
    inner: std::sync::Mutex<PoolInner>,
}

#[derive(Debug)]
struct PoolInner {
    slots: Slots,
    /// The connection of each slot (to close on eviction), once known.
    conns: std::collections::HashMap<SlotId, std::sync::Weak<ConnState>>,
}

impl ReaderPool {
    /// `capacity` slots, `per_source` from one address, `reserve` kept
    /// for authorized callers.
    pub(crate) fn new(capacity: usize, per_source: usize, reserve: usize) -> Arc<Self> {
        Arc::new(ReaderPool {
            inner: std::sync::Mutex::new(PoolInner {
                slots: Slots::new(capacity, per_source, reserve),
                conns: Default::default(),
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolInner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot for `ip` ([`Slots::admit`]), on `conn` when known; the
    /// connection of a slot evicted for it is closed (true: one was).
    pub(crate) fn admit(
        self: &Arc<Self>,
        ip: std::net::IpAddr,
        authorized: bool,
        conn: Option<&Arc<ConnState>>,
    ) -> Result<(PoolSlot, bool), Refusal> {
        let (id, victim, evicted) = {
            let mut inner = self.lock();
            let admission = inner.slots.admit(Source::of(ip), authorized)?;
            let evicted = matches!(admission, Admission::Evicting { .. });
            let victim = match admission {
                Admission::Admitted(_) => None,
                Admission::Evicting { evicted, .. } => inner.conns.remove(&evicted),
            };
            if let Some(c) = conn {
                inner.conns.insert(admission.id(), Arc::downgrade(c));
            }
            (admission.id(), victim, evicted)
        };
        if let Some(c) = victim.and_then(|w| w.upgrade()) {
            c.close();
        }
        Ok((
            PoolSlot {
                pool: self.clone(),
                id,
            },
            evicted,
        ))
    }

    /// Names `conn` as what `slot` is, for an eviction.
    pub(crate) fn attach(&self, slot: &PoolSlot, conn: &Arc<ConnState>) {
        let mut inner = self.lock();
        // Not if evicted meanwhile.
        if inner.slots.held(slot.id) {
            inner.conns.insert(slot.id, Arc::downgrade(conn));
        }
    }
}

/// One slot of a [`ReaderPool`], given back on drop.
#[derive(Debug)]
pub(crate) struct PoolSlot {
    pool: Arc<ReaderPool>,
    id: SlotId,
}

impl Drop for PoolSlot {
    fn drop(&mut self) {
        let mut inner = self.pool.lock();
        inner.slots.release(self.id);
        inner.conns.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn_state::ConnState;

    #[test]
    fn each_address_holds_at_most_its_share_and_evictions_close() {
        let pool = ReaderPool::new(4, 2, 0);
        let a: std::net::IpAddr = "10.0.0.1".parse().unwrap();
        let b: std::net::IpAddr = "10.0.0.2".parse().unwrap();
        let c: std::net::IpAddr = "10.0.0.3".parse().unwrap();
        let state = Arc::new(ConnState::default());
        let (a1, _) = pool.admit(a, true, Some(&state)).unwrap();
        let (_a2, _) = pool.admit(a, true, None).unwrap();
        assert!(matches!(
            pool.admit(a, true, None),
            Err(Refusal::Source { max: 2 })
        ));
        let (_b1, _) = pool.admit(b, true, None).unwrap();
        let (_b2, _) = pool.admit(b, true, None).unwrap();
        // Full; c (fair share 4/3 = 1) closes a's oldest, a1's connection.
        let (_c1, evicted) = pool.admit(c, true, None).unwrap();
        assert!(evicted);
        assert!(state.is_closed());
        drop(a1);
        drop((_a2, _b1, _b2, _c1));
        assert!(pool.lock().slots.is_empty());
        assert!(pool.lock().conns.is_empty());
    }
}
