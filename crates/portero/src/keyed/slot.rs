//! The slot word of a keyed table: one 128-bit atomic, the key's fingerprint in the
//! high half and its algorithm's state word in the low half.
//!
//! ```text
//!  127                          64 63                            0
//! +--------------------------------+--------------------------------+
//! | key fingerprint (0 = empty)    | the algorithm's state word     |
//! +--------------------------------+--------------------------------+
//! ```
//!
//! Invariant: a slot changes only by a compare-and-swap over both halves at once, so
//! an update computed for one key can never land in a slot that another key took over
//! in between (the ABA that a 64-bit CAS over the state alone would allow).

pub(crate) use crate::sync::AtomicU128 as Slot;

/// A slot word from a fingerprint and a state.
#[inline]
pub(crate) fn pack(tag: u64, state: u64) -> u128 {
    ((tag as u128) << 64) | state as u128
}

/// `(fingerprint, state)` of a slot word.
#[inline]
pub(crate) fn unpack(word: u128) -> (u64, u64) {
    ((word >> 64) as u64, word as u64)
}
