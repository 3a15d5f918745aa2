//! Waiting instead of refusing: reservations that book a turn and say when, waits in
//! line on tokio's timer, keyed waits, and streams whose items wait their turn.
//!
//! | what | where | takes a unit |
//! |---|---|---|
//! | book an instant now, sleep on any timer, then commit | [`reserve`] (GCRA) | when booked; a cancel gives it back by the refund rule |
//! | book a key's turn | `KeyedLimiter::reserve_key` (GCRA keys) | the same, on the key's word |
//! | wait in line, first come first served (`until_ready*`, feature `tokio`) | `RateLimiter`, `SlidingLog` | only when admitted: a dropped wait held nothing |
//! | wait for a key (`until_key_ready`, feature `tokio`) | `KeyedLimiter` | booked (GCRA) or only when admitted (the others) |
//! | a stream whose items wait their turn (feature `tokio`) | [`stream`] | booked per item |
//!
//! This layer stands on the keyed limits ([`crate::keyed`]), the one-word algorithms
//! ([`crate::algorithm`]) and the foundations; the limiters below it carry only their
//! [`WaitLine`], opaque, so they never import a wait.
//!
//! # The line (`RateLimiter::until_ready*`, `SlidingLog::until_ready_within`)
//!
//! Invariant: a waiter takes nothing until it is admitted. Waiters stand in one line
//! per limiter, first come, first served (tokio's fair mutex): the one at its head
//! checks the limiter when it wakes, on the limiter's own clock, and sleeps the
//! refusal's `retry_after` between checks; the others wait behind it. So
//!
//! - a wait dropped anywhere in the line (a caller's timeout, a cancelled task) leaves
//!   no dead turn: it held nothing, and the next waiter moves up at once;
//! - every start is checked at the instant it happens, so whatever the limiter
//!   promises about instants (GCRA's `B + t/T` in any interval `t`, the exact log's
//!   `N` in any window `W`) holds for the real send times — a timer that fires late
//!   only makes a waiter later, never early;
//! - waiters that stay are admitted in the order they joined, and a newcomer after
//!   everyone left waits only what the quota says;
//! - a wait admitted at once is one check (no booking, no second clock read).
//!
//! Checks made without waiting are not in the line and can take a unit the head was
//! about to take (it then sleeps again). Reservations ([`reserve`]) are another
//! thing: they book an instant up front and say when; a reservation cancelled while
//! later ones are booked leaves its turn unused (see its docs).
//!
//! Only algorithms that cannot book (see [`Algorithm::book`](crate::algorithm::Algorithm::book)) use retries for keyed
//! waits; keyed GCRA waits book their key's turn (see `KeyedLimiter::until_key_ready`).

// What every booked turn (a reservation, a keyed reservation) answers, defined once:
// a type with `ready_at: u64` and a `mark_done` (a turn not done is cancelled on drop).
macro_rules! turn_accessors {
    () => {
        /// When the units may be used (ns on the limiter's clock).
        pub fn ready_at(&self) -> u64 {
            self.ready_at
        }

        /// How long from `now` (ns) until the units may be used (zero if they may now).
        pub fn wait_from(&self, now: u64) -> core::time::Duration {
            core::time::Duration::from_nanos(self.ready_at.saturating_sub(now))
        }

        /// Uses the units (at or after [`ready_at`](Self::ready_at): the booking says
        /// when, the caller keeps to it).
        #[inline]
        pub fn commit(mut self) {
            self.mark_done();
        }
    };
}

#[cfg(feature = "tokio")]
mod in_line;
#[cfg(feature = "alloc")]
pub(crate) mod keyed;
pub mod reserve;
#[cfg(feature = "tokio")]
pub mod stream;

#[cfg(feature = "alloc")]
pub use keyed::{KeyedReservation, WaitError};
#[cfg(feature = "tokio")]
pub use {
    crate::wait_line::WaitLine,
    in_line::{until_admitted, UntilAdmitted, WaitAnswer, Waitable},
};
