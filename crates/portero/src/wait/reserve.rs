//! Waiting instead of refusing, for the calling side (an SMS provider billing per
//! message, a partner API with a hard quota): a [`Reservation`] books a GCRA slot now
//! and says when it may be used.
//!
//! # Bound: first come, first served
//!
//! A reservation of `n` units at `now` is the request as if it arrived at the first
//! instant it conforms: `ready_at = max(now, TAT + n·T − B·T)`, and the TAT moves on
//! exactly as an admission's would (`TAT ← max(TAT, now) + n·T`), in the same one
//! compare-and-swap. So reservations are served in the order their CAS landed, and a
//! waiter that booked after `u` units were booked ahead of it (the burst spent) is
//! ready at most `(u + n)·T` after it booked — no waiter starves because others keep
//! winning the word, and what is admitted over any interval is still at most
//! `B + t / T`, reservations and checks together (they are one schedule).
//!
//! A reservation that would wait longer than its `max_wait` books nothing; one that
//! cannot ever fit (a cost above the burst) is an error at once. Cancelling — or
//! dropping it unused, as a cancelled task does — gives its units back by the rule
//! every refund follows ([`admission`](crate::admission)): all of them while nothing
//! was booked or admitted after it and no other refund moved the limiter since;
//! otherwise, once no later booking's turn is still ahead, the part of its debt that
//! still lies after the cancel, less what other refunds of slots ahead of its own
//! gave back since (the refund ledger and its log of places: in any order, no more
//! than a twin that never booked it); and nothing while a later waiter's turn is
//! still to come (that waiter was told its instant, after this slot). Never an
//! over-admission of the instants waiters actually start at. Checked by a loom model
//! and property tests.
//!
//! # Waiting without tokio (`no_std`, an edge runtime, another executor)
//!
//! [`reserve_at`](RateLimiter::reserve_at) takes the time and returns the instant:
//! book, sleep on whatever timer the platform has until
//! [`ready_at`](Reservation::ready_at), then [`commit`](Reservation::commit). With the
//! `tokio` feature, [`Reservation::ready`] and `RateLimiter::until_ready` do the
//! sleeping. Here the "timer" is a manual clock:
//!
//! ```
//! use core::time::Duration;
//! use portero::{Clock, ManualClock, Quota, RateLimiter};
//!
//! let clock = ManualClock::new();
//! let limiter = RateLimiter::gcra(Quota::per_second(10)?.with_burst(1)?).with_clock(&clock);
//! let mut sent_at = Vec::new();
//! for _ in 0..3 {
//!     let turn = limiter.reserve_at(clock.now(), 1, Duration::from_secs(1))?;
//!     clock.set(turn.ready_at()); // the platform's sleep until the turn
//!     turn.commit();
//!     sent_at.push(clock.now());
//! }
//! assert_eq!(sent_at, [0, 100_000_000, 200_000_000]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use core::time::Duration;

use crate::admission::{Admission, Unstamped};
use crate::algorithm::gcra::Gcra;
use crate::algorithm::limiter::RateLimiter;
use crate::clock::Clock;
use crate::decision::CheckError;
use crate::word::Transition;

/// The longest `max_wait` a reservation takes (2^61 ns, about 73 years): it keeps
/// every booked TAT, and every sum formed with it, inside a `u64`.
pub const MAX_WAIT_NANOS: u64 = 1 << 61;

/// Why nothing was booked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReserveError {
    /// The cost can never fit, or the time is out of range.
    Check(CheckError),
    /// The slot would be ready only after `max_wait`: it is this far away.
    TooLong {
        /// How long the request would have had to wait.
        wait: Duration,
    },
}

impl core::fmt::Display for ReserveError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Check(e) => e.fmt(f),
            Self::TooLong { wait } => {
                write!(f, "the slot is {wait:?} away, beyond the wait allowed")
            }
        }
    }
}

impl core::error::Error for ReserveError {}

/// A booked slot of a GCRA limiter: its units are charged, usable from
/// [`ready_at`](Self::ready_at). See the [module docs](self) for the bound.
#[derive(Debug)]
#[must_use = "dropping a reservation cancels it"]
pub struct Reservation<'a, C: Clock> {
    // The limiter to give back to; `None` once used or cancelled. (No flag beside it:
    // the reservation moves into the future that awaits it, and copying a flag's byte
    // store as part of a word stalls the store buffer, a fifth of an admitted wait.)
    limiter: Option<Handle<'a, C>>,
    ready_at: u64,
    // What the booking took and wrote: a cancel gives it back as a refund would.
    // (Unstamped: the limiter beside it says whose word it is, and a word less moves
    // with the reservation.)
    admission: Unstamped,
}

/// The limiter a reservation gives back to: borrowed, or shared (a reservation that
/// moves into a task).
#[derive(Debug)]
enum Handle<'a, C> {
    Borrowed(&'a RateLimiter<Gcra, C>),
    #[cfg(feature = "alloc")]
    Shared(alloc::sync::Arc<RateLimiter<Gcra, C>>),
}

impl<C> core::ops::Deref for Handle<'_, C> {
    type Target = RateLimiter<Gcra, C>;

    fn deref(&self) -> &RateLimiter<Gcra, C> {
        match self {
            Self::Borrowed(l) => l,
            #[cfg(feature = "alloc")]
            Self::Shared(l) => l,
        }
    }
}

impl<C: Clock> RateLimiter<Gcra, C> {
    /// [`reserve`](Self::reserve) for a shared limiter: the reservation keeps the
    /// limiter alive and may move to another task.
    #[cfg(feature = "alloc")]
    pub fn reserve_owned(
        self: &alloc::sync::Arc<Self>,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Reservation<'static, C>, ReserveError> {
        let now = self.clock().now();
        let note = self.refunds_note();
        let (ready_at, before, after) = self.book(now, cost, max_wait)?;
        Ok(Reservation {
            limiter: Some(Handle::Shared(self.clone())),
            ready_at,
            admission: Admission::of_word(now, cost, before, after, note.total)
                .placed_if(self.refunds_placed(&note))
                .unstamped(),
        })
    }

    /// Books `cost` units now, to be used when the reservation is ready.
    #[inline(always)]
    pub fn reserve(
        &self,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Reservation<'_, C>, ReserveError> {
        self.reserve_at(self.clock().now(), cost, max_wait)
    }

    /// Books `cost` units at `now` (ns): ready at once if they fit, or at the first
    /// instant they do, unless that is more than `max_wait` away (capped at
    /// [`MAX_WAIT_NANOS`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use portero::{Quota, RateLimiter};
    ///
    /// // 10 per second, no burst beyond one: five callers book one slot each.
    /// let limiter = RateLimiter::gcra(Quota::per_second(10)?.with_burst(1)?);
    /// let minute = Duration::from_secs(60);
    /// let slots: Vec<u64> = (0..5)
    ///     .map(|_| limiter.reserve_at(0, 1, minute).map(|r| { let at = r.ready_at(); r.commit(); at }))
    ///     .collect::<Result<_, _>>()?;
    /// assert_eq!(slots, [0, 100_000_000, 200_000_000, 300_000_000, 400_000_000]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline(always)]
    pub fn reserve_at(
        &self,
        now: u64,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Reservation<'_, C>, ReserveError> {
        let note = self.refunds_note();
        let (ready_at, before, after) = self.book(now, cost, max_wait)?;
        Ok(Reservation {
            limiter: Some(Handle::Borrowed(self)),
            ready_at,
            admission: Admission::of_word(now, cost, before, after, note.total)
                .placed_if(self.refunds_placed(&note))
                .unstamped(),
        })
    }

    /// The booking's CAS: when it is ready, the TAT it found and the one it wrote.
    #[inline(always)]
    fn book(
        &self,
        now: u64,
        cost: u64,
        max_wait: Duration,
    ) -> Result<(u64, u64, u64), ReserveError> {
        let gcra = *self.algorithm();
        crate::decision::check_range(now, cost, gcra.quota().burst())
            .map_err(ReserveError::Check)?;
        let max_wait = wait_cap(max_wait);
        let booked = self.state.apply(|tat| {
            let (ready_at, after) = gcra.booking(tat, now, cost);
            if ready_at - now > max_wait {
                let wait = Duration::from_nanos(ready_at - now);
                return Err(ReserveError::TooLong { wait });
            }
            // Within the wait cap: TAT + n·T ≤ now + B·T + max_wait < 2^64.
            Ok(Transition::write((ready_at, tat, after), after))
        })?;
        Ok(booked)
    }
}

/// `max_wait` in nanoseconds, capped at [`MAX_WAIT_NANOS`] (in `u64`: every wait
/// reads it, and the 128-bit `as_nanos` costs a division).
#[inline]
pub(crate) fn wait_cap(max_wait: Duration) -> u64 {
    max_wait
        .as_secs()
        .checked_mul(1_000_000_000)
        .and_then(|ns| ns.checked_add(u64::from(max_wait.subsec_nanos())))
        .map_or(MAX_WAIT_NANOS, |ns| ns.min(MAX_WAIT_NANOS))
}

impl<'a, C: Clock> Reservation<'a, C> {
    turn_accessors!();

    /// Gives the units back (see the [module docs](self)), at the limiter's own time;
    /// returns whether anything was given back (nothing, when the whole slot already
    /// lies behind the limiter's time).
    pub fn cancel(mut self) -> bool {
        self.give_back(None)
    }

    /// [`cancel`](Self::cancel) at `now` on the caller's axis (the axis it was booked
    /// on, no earlier than any check since).
    pub fn cancel_at(mut self, now: u64) -> bool {
        self.give_back(Some(now))
    }

    /// Gives back once: the reservation is done after it.
    fn give_back(&mut self, now: Option<u64>) -> bool {
        self.limiter.take().is_some_and(|limiter| {
            // A word already paid off (at or before now) had nothing ahead to give
            // back, even where the undo rewinds it further into the past.
            limiter
                .refund_with(&self.admission.admission(), now)
                .is_some_and(|(before, after)| {
                    after != before && before > now.unwrap_or_else(|| limiter.clock().now())
                })
        })
    }

    /// Marks the units used: nothing is given back.
    #[inline]
    fn mark_done(&mut self) {
        self.limiter = None;
    }

    /// Waits (tokio's timer) until the units may be used, then uses them. Dropped
    /// while waiting (a cancelled task), the reservation is cancelled.
    #[cfg(feature = "tokio")]
    #[inline]
    pub fn ready(self) -> Ready<'a, C> {
        // Nothing decided here: the timer, if any, is made at the first poll. A branch
        // here would need the reservation in memory before it moves into the future,
        // and that copy of a freshly written struct stalls the store buffer (a fifth
        // of an admitted wait).
        Ready {
            reservation: self,
            sleep: None,
        }
    }
}

#[cfg(feature = "tokio")]
impl<C: Clock> Reservation<'_, C> {
    /// The timer of a slot still ahead (out of line: the ready path stays short).
    #[cold]
    fn sleep_until_ready(&self) -> Option<core::pin::Pin<alloc::boxed::Box<tokio::time::Sleep>>> {
        let now = self.limiter.as_ref().map_or(0, |l| l.clock().now());
        let wait = self.wait_from(now);
        (!wait.is_zero()).then(|| alloc::boxed::Box::pin(tokio::time::sleep(wait)))
    }
}

/// The future of [`Reservation::ready`]: resolves when the slot may be used.
#[cfg(feature = "tokio")]
#[derive(Debug)]
#[must_use = "a future does nothing unless awaited"]
pub struct Ready<'a, C: Clock> {
    // Committed in place when ready (a move of the reservation costs more than the
    // rest of an admitted wait); dropped before that, it cancels.
    reservation: Reservation<'a, C>,
    // Only when the slot is still ahead: a timer is boxed, since a wait dwarfs it.
    sleep: Option<core::pin::Pin<alloc::boxed::Box<tokio::time::Sleep>>>,
}

#[cfg(feature = "tokio")]
impl<C: Clock> core::future::Future for Ready<'_, C> {
    type Output = ();

    #[inline]
    fn poll(
        mut self: core::pin::Pin<&mut Self>,
        cx: &mut core::task::Context<'_>,
    ) -> core::task::Poll<()> {
        let this = &mut *self;
        if this.sleep.is_none() {
            // Ready at the booking's own `now` (the common case under the rate): no
            // second clock read and no timer.
            if this.reservation.ready_at > this.reservation.admission.at() {
                this.sleep = this.reservation.sleep_until_ready();
            }
        }
        if let Some(sleep) = this.sleep.as_mut() {
            if sleep.as_mut().poll(cx).is_pending() {
                return core::task::Poll::Pending;
            }
        }
        this.reservation.mark_done();
        core::task::Poll::Ready(())
    }
}

impl<C: Clock> Drop for Reservation<'_, C> {
    #[inline]
    fn drop(&mut self) {
        self.give_back(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::quota::Quota;

    const MS: u64 = 1_000_000;

    fn limiter() -> RateLimiter<Gcra, ManualClock> {
        let q = Quota::per_second(10).unwrap().with_burst(2).unwrap();
        RateLimiter::new(Gcra::new(q)).with_clock(ManualClock::new())
    }

    #[test]
    fn slots_come_first_come_first_served_at_exact_instants() {
        let l = limiter();
        let long = Duration::from_secs(10);
        let at: Vec<u64> = (0..5)
            .map(|_| {
                let r = l.reserve_at(0, 1, long).unwrap();
                let t = r.ready_at();
                r.commit();
                t
            })
            .collect();
        assert_eq!(
            at,
            [0, 0, 100 * MS, 200 * MS, 300 * MS],
            "burst 2, then 1 per 100 ms"
        );
        // A check meets the same schedule: nothing left until 400 ms.
        assert!(!l.check_at(350 * MS, 1).unwrap().is_allowed());
        assert!(l.check_at(400 * MS, 1).unwrap().is_allowed());
    }

    #[test]
    fn too_long_and_too_costly_book_nothing() {
        let l = limiter();
        for _ in 0..2 {
            l.reserve_at(0, 1, Duration::ZERO).unwrap().commit();
        }
        assert_eq!(
            l.reserve_at(0, 1, Duration::from_millis(50)).unwrap_err(),
            ReserveError::TooLong {
                wait: Duration::from_millis(100)
            }
        );
        assert!(matches!(
            l.reserve_at(0, 3, Duration::MAX),
            Err(ReserveError::Check(CheckError::CostExceedsCapacity { .. }))
        ));
        assert!(matches!(
            l.reserve_at(u64::MAX, 1, Duration::MAX),
            Err(ReserveError::Check(CheckError::TimeOutOfRange { .. }))
        ));
        // Nothing was booked by the refusals: the next slot is still at 100 ms.
        assert_eq!(
            l.reserve_at(0, 1, Duration::MAX).unwrap().ready_at(),
            100 * MS
        );
    }

    #[test]
    fn a_cancel_behind_a_waiting_turn_gives_back_nothing() {
        let l = limiter();
        let long = Duration::from_secs(10);
        let first = l.reserve_at(0, 2, long).unwrap();
        let second = l.reserve_at(0, 1, long).unwrap();
        assert_eq!(second.ready_at(), 100 * MS);
        assert!(second.cancel(), "the last booking: given back");
        let third = l.reserve_at(0, 1, long).unwrap();
        assert_eq!(third.ready_at(), 100 * MS, "the same slot again");
        // A booking after it, its turn still ahead: the slot stays unused.
        assert!(!first.cancel());
        drop(third); // dropped unused: given back, it was the last
        assert_eq!(l.reserve_at(0, 1, long).unwrap().ready_at(), 100 * MS);
    }

    /// The timer is made at the first poll: a future made for a slot still ahead and
    /// dropped before it is polled cancels (the units come back), and one polled
    /// after its slot has passed resolves at once and uses its units.
    #[cfg(all(feature = "tokio", not(target_os = "wasi")))]
    #[tokio::test(start_paused = true)]
    async fn a_ready_future_waits_from_its_first_poll_and_cancels_unpolled() {
        let l = limiter();
        let long = Duration::from_secs(10);
        for _ in 0..2 {
            l.reserve_at(0, 1, long).unwrap().commit();
        }
        let unpolled = l.reserve_at(0, 1, long).unwrap().ready();
        drop(unpolled);
        let ahead = l.reserve_at(0, 1, long).unwrap();
        assert_eq!(
            ahead.ready_at(),
            100 * MS,
            "the dropped future's slot again"
        );
        let start = tokio::time::Instant::now();
        ahead.ready().await;
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(100),
            "woke at its slot"
        );
        let late = l.reserve_at(0, 1, long).unwrap();
        assert_eq!(late.ready_at(), 200 * MS);
        let pending = late.ready();
        l.clock().set(300 * MS); // the slot passed before the first poll
        let (start, word) = (tokio::time::Instant::now(), l.state_word());
        pending.await;
        assert_eq!(start.elapsed(), Duration::ZERO, "no wait for a slot behind");
        assert_eq!(l.state_word(), word, "used, not given back");
    }

    #[test]
    fn a_wait_is_measured_from_the_booking_and_a_cancel_says_what_it_did() {
        let l = limiter();
        let later = 1_000 * MS;
        for _ in 0..2 {
            l.reserve_at(later, 1, Duration::ZERO).unwrap().commit();
        }
        // Booked at 1 s, the next slot is 100 ms away: too long for 50 ms, and said so.
        let e = l
            .reserve_at(later, 1, Duration::from_millis(50))
            .unwrap_err();
        assert_eq!(
            e,
            ReserveError::TooLong {
                wait: Duration::from_millis(100)
            }
        );
        assert_eq!(
            e.to_string(),
            "the slot is 100ms away, beyond the wait allowed"
        );
        let turn = l.reserve_at(later, 1, Duration::from_millis(100)).unwrap();
        assert!(turn.cancel_at(later), "the last booking: given back");
        let behind = l.reserve_at(later, 1, Duration::from_secs(1)).unwrap();
        assert!(
            !behind.cancel_at(2_000 * MS),
            "its slot already behind: nothing"
        );
    }

    /// Ready when booked means ready at the booking's own time, whatever the
    /// limiter's clock says: a slot booked at a caller's time ahead of the clock, free
    /// then, is not slept towards.
    #[cfg(all(feature = "tokio", not(target_os = "wasi")))]
    #[tokio::test(start_paused = true)]
    async fn a_slot_free_at_its_booking_is_ready_at_once_whatever_the_clock() {
        let l = limiter(); // its clock stands at 0
        let turn = l.reserve_at(500 * MS, 1, Duration::from_secs(10)).unwrap();
        assert_eq!(turn.ready_at(), 500 * MS);
        let start = tokio::time::Instant::now();
        turn.ready().await;
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[test]
    fn absurd_waits_and_times_never_overflow() {
        let l = limiter();
        let near_end = crate::quota::MAX_TIME_NANOS;
        for _ in 0..1_000 {
            match l.reserve_at(near_end, 2, Duration::MAX) {
                Ok(r) => r.commit(),
                Err(ReserveError::TooLong { .. }) => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert!(!l.check_at(near_end, 1).unwrap().is_allowed());
    }
}
