//! Limits over many words: a limiter per key (user, API key, IP, tenant) in a
//! fixed-size table that a flood of keys cannot grow, the exact log per key, stacks,
//! named policies and stripes.
//!
//! This layer stands on the one-word algorithms ([`crate::algorithm`]) and the
//! foundations; the waits ([`crate::wait`]) and nothing else stand on it.
//!
//! # Layout
//!
//! The table is an array of 16-byte slots, grouped in buckets of 8 slots (two cache
//! lines), plus one 64-bit hint word per bucket holding the low byte of each
//! slot's fingerprint, so a lookup loads one hint word and then, almost always, only
//! the one slot it wants. Each slot is one 128-bit atomic word:
//!
//! ```text
//!  127                          64 63                            0
//! +--------------------------------+--------------------------------+
//! | key fingerprint (0 = empty)    | the algorithm's state word     |
//! +--------------------------------+--------------------------------+
//! ```
//!
//! A key's fingerprint is its 64-bit `ahash` under a seed drawn at run time (keys are
//! attacker-controlled: no fixed seed, no HashDoS). Every key has two candidate buckets
//! (two-choice hashing), so buckets overflow only when the whole table is nearly full.
//!
//! - **Checking an existing key** scans its buckets without locks, then runs the
//!   algorithm's transition and publishes it with one 128-bit compare-and-swap over
//!   fingerprint *and* state. Because the CAS covers the fingerprint, a slot that was
//!   reclaimed and reused by another key in between can never receive this key's update.
//!   Nothing is allocated. A caller that keeps a key's [`Fingerprint`] and [`SlotHint`]
//!   (the JavaScript binding does, for hot keys) skips the hashing and the scan: the
//!   slot named is compared with the fingerprint like any slot the scan finds.
//! - **Inserting** takes the two buckets' insert locks (1-byte spin locks, held for a
//!   few loads), rescans, and claims an empty slot with the new key *and its first
//!   decision* in one CAS. The locks only order inserts among themselves, so a key can
//!   never be inserted twice; checks never wait for them.
//! - **Bounded memory.** At most `max_keys` keys are held; the table has
//!   `⌈1.8 · max_keys⌉` slots rounded up to a bucket (≈ 31 bytes per key at capacity,
//!   hints and locks included).
//!   A key whose state is back to full carries no information: dropping it changes no
//!   decision at or after that time. Such keys are reclaimed lazily by inserts that
//!   find no room, and by [`KeyedLimiter::sweep`].
//! - **When every key is still active**, the [`Overflow`] policy decides.
//!
//! Keys are identified by their 64-bit fingerprint: two keys whose fingerprints collide
//! share one state, which can only make both stricter, never admit more. With `n` keys
//! the chance of any collision is about `n² / 2^65` (1 in 37 million at a million
//! keys), and the run-time seed keeps anyone from aiming for one.

//!
//! The parts: `limiter` (the API), `table` (buckets, hints, lookup, insert, the
//! overflow policy, eviction, sweep), the slot word and its CAS (`slot`), the bucket
//! insert locks (`locks`) and the key's identity (`fingerprint`); keyed reservations
//! and waits stand one layer up, in [`crate::wait`]. All synchronisation comes from the
//! crate's one loom shim.
//!
//! Beside the table, this folder holds the other limits over many words: the exact
//! log per key ([`log`]), stacks of limits checked all or none ([`stack`]), a table
//! of named keyed limits ([`policies`], feature `std`) and one hot limit spread over
//! stripes ([`striped`], feature `std`).

#[cfg(feature = "alloc")]
pub(crate) mod fingerprint;
#[cfg(feature = "alloc")]
pub(crate) mod limiter;
#[cfg(feature = "alloc")]
mod locks;
#[cfg(feature = "alloc")]
pub mod log;
#[cfg(feature = "std")]
pub mod policies;
#[cfg(feature = "alloc")]
mod slot;
pub mod stack;
#[cfg(feature = "std")]
pub mod striped;
#[cfg(feature = "alloc")]
pub(crate) mod table;

/// The hasher keyed limiters use (`ahash`), re-exported so callers can seed it.
#[cfg(feature = "alloc")]
pub use ahash::RandomState;
#[cfg(feature = "alloc")]
pub use {
    fingerprint::{Fingerprint, SlotHint},
    limiter::{KeyedLimit, KeyedLimiter},
    table::Overflow,
};
