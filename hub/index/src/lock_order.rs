//! The index's lock order, in types: an aggregation pass's lock
//! (`Aggregator::passes`), then every known cluster (`Sessions::lock`),
//! then the fleet of reports (`Reports::read`, `Reports::write`).
//!
//! Each of those locks is taken with a [`Proof`] of what is held, of a
//! level before its own, and its guard hands out the proof of its own
//! level for the next lock. A proof borrows the operation's root
//! ([`Held`]) for as long as anything taken with it lives. So the compiler
//! refuses a lock taken out of order (there is no `Before` for it) and a
//! lock of the order taken from the root while another is held (the root
//! is borrowed). An operation makes its root at its entry
//! ([`Held::nothing`]); a helper that takes one of these locks takes the
//! caller's proof instead of making a root of its own.
//!
//! What the compiler does not check: that a root is made only where an
//! operation starts. `scripts/check-deps.sh` checks that every
//! `Held::nothing()` outside tests is the first statement of its function;
//! a function that holds one of these guards calls no function that makes
//! a root of its own (they all start a public operation of the index).
//!
//! The other locks of the index are leaves: each is taken alone or inside
//! the ones above, and nothing is taken while it is held (the pending
//! entries, the live hub Gateways, the inventory, the history, the
//! hostnames, the DNS conditions, one cluster's session slot; the slot is
//! moved on only with the fleet's write guard in hand, which its methods
//! take as proof: see `sessions.rs`).

use std::marker::PhantomData;

/// The root of an operation's locks: nothing of the order held. Its
/// [`Held::proof`] borrows it for as long as what the proof takes lives.
pub(crate) struct Held(());

/// Proof that the locks up to level `L` are held (or, for [`Nothing`],
/// none), valid for `'a`: as long as a guard taken with it lives, the
/// root it came from stays borrowed, so no lock of the order can be
/// taken from the root again, and none of a lower level from the guard.
pub(crate) struct Proof<'a, L>(PhantomData<(&'a mut (), L)>);

impl<L> Clone for Proof<'_, L> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<L> Copy for Proof<'_, L> {}

/// No lock of the order is held.
pub(crate) enum Nothing {}
/// An aggregation pass's lock is held.
pub(crate) enum Passes {}
/// Every known cluster is locked.
pub(crate) enum Clusters {}
/// The fleet is locked (to read or write).
pub(crate) enum Fleet {}

/// A lock of level `M` may be taken while level `Self` is held.
pub(crate) trait Before<M> {}
impl Before<Passes> for Nothing {}
impl Before<Clusters> for Nothing {}
impl Before<Clusters> for Passes {}
impl Before<Fleet> for Nothing {}
impl Before<Fleet> for Passes {}
impl Before<Fleet> for Clusters {}

impl Held {
    /// At the start of an operation: nothing held yet.
    pub(crate) fn nothing() -> Self {
        Held(())
    }

    /// The proof that nothing is held, borrowing the root for `'a`.
    pub(crate) fn proof(&mut self) -> Proof<'_, Nothing> {
        Proof(PhantomData)
    }
}

impl<'a, L> Proof<'a, L> {
    /// The proof a guard of level `M`, taken with this one, hands out
    /// for the next lock.
    pub(crate) fn then<M>(self) -> Proof<'a, M>
    where
        L: Before<M>,
    {
        Proof(PhantomData)
    }
}
