//! Keyed reservations: a waiter books its turn on its key's state word with the same
//! compare-and-swap over (fingerprint, state) that a check uses, for algorithms whose
//! state is a schedule ([`Algorithm::book`]: GCRA, and [`AnyAlgorithm`] holding it).
//!
//! Invariant: a booking changes a slot only by that one CAS, from exactly the state
//! it was computed on, and a cancel only as a refund does (one CAS over the key and
//! the state it loaded); the bound is stated on [`KeyedReservation`].

use core::hash::Hash;
use core::time::Duration;

use crate::admission::Admission;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::Algorithm;
use crate::clock::Clock;
use crate::decision::KeyedError;
use crate::keyed::limiter::KeyedLimiter;
use crate::word::Transition;

#[cfg(doc)]
use crate::algorithm::any::AnyAlgorithm;

/// A booked turn of one key of a [`KeyedLimiter`]: its units are charged, usable from
/// [`ready_at`](Self::ready_at). Dropped unused, it is cancelled.
///
/// # Bound
///
/// The booking is GCRA's reservation on the key's word (see [`crate::wait::reserve`]):
/// `ready_at = max(now, TAT + n·T − B·T)`, `TAT ← max(TAT, now) + n·T`, in one CAS.
/// So waiters on one key are served in the order their CAS landed, and a waiter that
/// finds `u` units booked ahead of it (`u = ⌈(TAT − now) / T⌉`) is ready at most
/// `(u + n − B)⁺ · T` after it booked — later bookings only go behind it — while the
/// key admits at most `B + t / T` over any interval `t`, bookings and checks together.
///
/// What the table adds, and what it costs:
/// - a key with a booking outstanding is not idle (its TAT is past every booked
///   `ready_at`), so a sweep or an insert never reclaims it before its waiters' turns;
/// - an eviction ([`Overflow::EvictSoonestFull`](crate::keyed::table::Overflow)) or a
///   [`reset`](crate::keyed::limiter::KeyedLimiter::reset) forgets the key as for checks, but the
///   bookings made stand (each waiter still wakes at its instant): on top of the
///   key's limit, up to its burst **plus the units booked on it and not yet due** may
///   be admitted — an eviction's documented price, larger by the bookings outstanding
///   (keep `max_wait` short, or the table large enough not to evict, where it matters);
/// - a booking that finds the key not held is an ordinary admission (a fresh state
///   always fits: `n ≤ B`), ready at once, and is given back like any other;
/// - cancelling gives the units back as a refund does ([`admission`](crate::admission)):
///   all of them while the slot still holds exactly what this booking wrote, nothing
///   while a later booking's turn is still ahead, otherwise the part of its debt that
///   lies after the cancel (never more).
///
/// Other algorithms (token bucket, windows, leaky buckets, calendar quotas) do not
/// book: their waits retry (see `until_key_ready`), with no order among waiters.
#[must_use = "dropping a reservation cancels it"]
pub struct KeyedReservation<'a, K: ?Sized, A: Algorithm + Copy, C: Clock> {
    limiter: &'a KeyedLimiter<K, A, C>,
    tag: u64,
    ready_at: u64,
    // What the booking took and wrote (`None`: nothing to give back).
    admission: Option<Admission>,
    done: bool,
}

impl<K: ?Sized, A: Algorithm + Copy, C: Clock> core::fmt::Debug for KeyedReservation<'_, K, A, C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KeyedReservation")
            .field("ready_at", &self.ready_at)
            .finish_non_exhaustive()
    }
}

/// Why a keyed wait or booking ended without an admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitError {
    /// The limiter refused outright: a cost that can never fit, a full table, a time
    /// out of range.
    Keyed(KeyedError),
    /// The turn would come after the wait allowed (nothing was booked).
    TooLong {
        /// How long the caller would have waited in all.
        wait: Duration,
    },
}

impl core::fmt::Display for WaitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Keyed(e) => e.fmt(f),
            Self::TooLong { wait } => {
                write!(f, "admitted only after {wait:?}, beyond the wait allowed")
            }
        }
    }
}

impl core::error::Error for WaitError {}

impl<K: Hash + ?Sized, C: Clock> KeyedLimiter<K, Gcra, C> {
    /// Books `cost` units of `key` at `now` (ns): ready at once if they fit, or at the
    /// first instant they do, unless that is more than `max_wait` away (nothing is
    /// booked then). The runtime-agnostic keyed wait: sleep on any timer until
    /// [`ready_at`](KeyedReservation::ready_at), then
    /// [`commit`](KeyedReservation::commit).
    ///
    /// ```
    /// use std::time::Duration;
    /// use portero::{Gcra, KeyedLimiter, ManualClock, Quota};
    ///
    /// let q = Quota::per_second(10)?.with_burst(1)?; // T = 100 ms
    /// let per_user = KeyedLimiter::with_clock(Gcra::new(q), 100, ManualClock::new());
    /// let minute = Duration::from_secs(60);
    /// let turns: Vec<u64> = (0..3)
    ///     .map(|_| per_user.reserve_key_at("ann", 0, 1, minute).map(|r| { let at = r.ready_at(); r.commit(); at }))
    ///     .collect::<Result<_, _>>()?;
    /// assert_eq!(turns, [0, 100_000_000, 200_000_000]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_key_at(
        &self,
        key: &K,
        now: u64,
        cost: u64,
        max_wait: Duration,
    ) -> Result<KeyedReservation<'_, K, Gcra, C>, WaitError> {
        let max_wait = crate::wait::reserve::wait_cap(max_wait);
        // GCRA always books: `None` cannot come back.
        self.book_key(key, now, cost, max_wait)
            .unwrap_or(Err(WaitError::TooLong {
                wait: Duration::MAX,
            }))
    }

    /// [`reserve_key_at`](Self::reserve_key_at) the clock's now.
    pub fn reserve_key(
        &self,
        key: &K,
        cost: u64,
        max_wait: Duration,
    ) -> Result<KeyedReservation<'_, K, Gcra, C>, WaitError> {
        self.reserve_key_at(key, self.clock().now(), cost, max_wait)
    }
}

impl<K: Hash + ?Sized, A: Algorithm + Copy, C: Clock> KeyedLimiter<K, A, C> {
    /// A booking of `cost` units of `key` at `now`, at most `max_wait` ns away; `None`
    /// if the algorithm does not book.
    pub(crate) fn book_key(
        &self,
        key: &K,
        now: u64,
        cost: u64,
        max_wait: u64,
    ) -> Option<Result<KeyedReservation<'_, K, A, C>, WaitError>> {
        let a = self.algorithm.load();
        let fresh = a.initial_state();
        // The range checks, and whether this algorithm books at all.
        if let Err(e) = a.decide(fresh, now, cost) {
            return Some(Err(WaitError::Keyed(e.into())));
        }
        a.book(fresh, now, cost)?;
        let p = self.table.probe(self.fingerprint(key));
        let note = self.table.ledger(p.tag()).note();
        loop {
            let booked = self.table.update_with(p, |state| {
                let Some((ready_at, after)) = a.book(state, now, cost) else {
                    return Err(None);
                };
                if ready_at - now > max_wait {
                    let wait = Duration::from_nanos(ready_at - now);
                    return Err(Some(WaitError::TooLong { wait }));
                }
                Ok(Transition::write((ready_at, state, after), after))
            });
            let booked = match booked {
                Ok(booked) => booked,
                Err(e) => return e.map(Err),
            };
            let (ready_at, wrote) = match booked {
                Some((ready_at, before, after)) => (ready_at, Some((before, after))),
                // Not held: a fresh state admits at once; if another insert won the
                // key meanwhile and this check was refused, book on its state.
                None => match self.insert_tag(&a, p.tag(), now, cost) {
                    Ok((d, wrote)) if d.is_allowed() => (now, wrote),
                    Ok(_) => continue,
                    Err(e) => return Some(Err(WaitError::Keyed(e))),
                },
            };
            let placed = self.table.ledger(p.tag()).placed(&note);
            let admission = wrote.map(|(before, after)| {
                Admission::of_word(now, cost, before, after, note.total).placed_if(placed)
            });
            return Some(Ok(KeyedReservation {
                limiter: self,
                tag: p.tag(),
                ready_at,
                done: admission.is_none(),
                admission,
            }));
        }
    }
}

impl<K: ?Sized, A: Algorithm + Copy, C: Clock> KeyedReservation<'_, K, A, C> {
    turn_accessors!();

    /// Gives the units back by the rule every refund follows
    /// ([`admission`](crate::admission)), at the limiter's own time: all of them while
    /// the key's slot still holds what this booking wrote, nothing while a later
    /// booking's turn is still ahead, otherwise the part of its debt that lies after
    /// the cancel. Returns whether anything was given back.
    pub fn cancel(mut self) -> bool {
        let gave = self.give_back();
        self.done = true;
        gave
    }

    /// Marks the units used: nothing is given back.
    fn mark_done(&mut self) {
        self.done = true;
    }

    fn give_back(&self) -> bool {
        let Some(admission) = self.admission.as_ref().filter(|_| !self.done) else {
            return false;
        };
        let a = self.limiter.algorithm.load();
        let clock = &self.limiter.clock;
        self.limiter
            .table
            .refund(&a, self.tag, admission, || clock.now())
            .is_some_and(|(state, next)| next != state)
    }
}

impl<K: ?Sized, A: Algorithm + Copy, C: Clock> Drop for KeyedReservation<'_, K, A, C> {
    fn drop(&mut self) {
        if !self.done {
            self.give_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::quota::Quota;

    const MS: u64 = 1_000_000;

    fn keyed() -> KeyedLimiter<str, Gcra, ManualClock> {
        let q = Quota::per_second(10).unwrap().with_burst(2).unwrap();
        KeyedLimiter::with_clock(Gcra::new(q), 10, ManualClock::new())
    }

    #[test]
    fn turns_of_one_key_come_in_booking_order_at_exact_instants() {
        let k = keyed();
        let long = Duration::from_secs(10);
        let at: Vec<u64> = (0..5)
            .map(|_| {
                let r = k.reserve_key_at("a", 0, 1, long).unwrap();
                let t = r.ready_at();
                r.commit();
                t
            })
            .collect();
        assert_eq!(at, [0, 0, 100 * MS, 200 * MS, 300 * MS]);
        // Another key has its own schedule; checks meet this one's.
        assert_eq!(k.reserve_key_at("b", 0, 2, long).unwrap().ready_at(), 0);
        assert!(!k.check_at("a", 350 * MS, 1).unwrap().is_allowed());
        assert!(k.check_at("a", 400 * MS, 1).unwrap().is_allowed());
    }

    #[test]
    fn refusals_book_nothing_and_a_cancel_behind_a_waiting_turn_gives_nothing() {
        let k = keyed();
        let long = Duration::from_secs(10);
        k.reserve_key_at("a", 0, 2, long).unwrap().commit(); // inserts the key
        assert_eq!(
            k.reserve_key_at("a", 0, 1, Duration::from_millis(50))
                .unwrap_err(),
            WaitError::TooLong {
                wait: Duration::from_millis(100)
            }
        );
        assert!(matches!(
            k.reserve_key_at("a", 0, 3, long),
            Err(WaitError::Keyed(KeyedError::Check(_)))
        ));
        let first = k.reserve_key_at("a", 0, 1, long).unwrap();
        let second = k.reserve_key_at("a", 0, 1, long).unwrap();
        assert_eq!((first.ready_at(), second.ready_at()), (100 * MS, 200 * MS));
        // A booking after it, its turn still ahead: the slot stays unused.
        assert!(!first.cancel());
        drop(second); // the last booking: given back
        assert_eq!(
            k.reserve_key_at("a", 0, 1, long).unwrap().ready_at(),
            200 * MS
        );
    }

    #[test]
    fn a_key_with_a_booking_outstanding_is_not_swept() {
        let k = keyed();
        let long = Duration::from_secs(10);
        for _ in 0..3 {
            k.reserve_key_at("a", 0, 1, long).unwrap().commit();
        }
        // The last turn is at 100 ms; the key is full again at 300 ms.
        assert_eq!(k.sweep_at(250 * MS), 0);
        assert_eq!(k.sweep_at(300 * MS), 1);
    }
}
