//! Async waits on tokio's timer (feature `tokio`): thin methods over the bookings of
//! [`crate::reserve`] (direct GCRA) and of keyed limiters.
//!
//! Invariant: a wait books its turn in one compare-and-swap on its first poll and
//! holds the booking while it sleeps, so a wait dropped at any point takes nothing it
//! did not use: never polled, it booked nothing; dropped while asleep, its booking is
//! cancelled (given back if nothing was booked after it, as a [`Reservation`]'s drop
//! does). Jitter only delays a waiter past its own turn; it never moves the schedule.
//! Only algorithms that cannot book (see [`Algorithm::book`]) fall back to retrying,
//! which takes nothing unless admitted.

use core::hash::Hash;
use core::time::Duration;

use crate::reserve::wait_cap;
use crate::{Algorithm, Clock, Decision, Gcra, KeyedLimiter, RateLimiter, ReserveError, WaitError};

#[cfg(doc)]
use crate::Reservation;

impl<C: Clock> RateLimiter<Gcra, C> {
    /// Waits until one unit is admitted: [`until_ready_n`](Self::until_ready_n)`(1)`.
    pub async fn until_ready(&self) -> Result<(), ReserveError> {
        self.until_ready_with_jitter(1, Duration::ZERO).await
    }

    /// Waits until `cost` units are admitted, however long that is; a cost that can
    /// never fit (above the burst) is an error at once, waiting nothing.
    ///
    /// # Bound: no waiter starves
    ///
    /// The wait books its turn in one CAS ([`reserve`](Self::reserve)), so waiters are
    /// admitted in the order they booked: one that finds `u` units booked ahead of it
    /// (`u = ⌈(TAT − now) / T⌉`) is admitted at most `(u + n − B)⁺ · T` after it asked
    /// — later waiters only go behind it. `N` tasks asking for one unit each at once
    /// from a full limiter are admitted `B` at once, then the `k`-th (`k > B`) exactly
    /// `(k − B) · T` later: the `k`-th booking waits at most `k` emission intervals
    /// beyond the burst. And never more than `B + t / T` units in any interval `t`,
    /// waits and checks together. A wait never polled books nothing; dropped while it
    /// sleeps, its booking is cancelled as a [`Reservation`]'s drop does (given back
    /// if nothing was booked after it).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), portero::ReserveError> {
    /// use std::time::Duration;
    /// use portero::{Quota, RateLimiter};
    ///
    /// let provider = RateLimiter::gcra(Quota::per_second(100).unwrap());
    /// provider.until_ready_n(5).await?; // within the burst: at once
    /// assert!(provider.until_ready_n(101).await.is_err()); // can never fit
    /// # Ok(()) }
    /// ```
    pub async fn until_ready_n(&self, cost: u64) -> Result<(), ReserveError> {
        self.until_ready_with_jitter(cost, Duration::ZERO).await
    }

    /// [`until_ready_n`](Self::until_ready_n), and a waiter that has to wait at all
    /// also waits a uniformly random part of `jitter` past its turn ("full jitter":
    /// tasks woken by one turn do not all call the dependency at once). The turn, and
    /// the bound, are the same; each waiter is late by at most `jitter`.
    pub async fn until_ready_with_jitter(
        &self,
        cost: u64,
        jitter: Duration,
    ) -> Result<(), ReserveError> {
        let turn = self.reserve(cost, Duration::MAX)?;
        let wait = turn.wait_from(self.clock().now());
        if wait.is_zero() {
            turn.commit();
            return Ok(());
        }
        // The TAT this booking wrote is unique to it: waiters booked together draw apart.
        let mut seed = turn.admission.after().unwrap_or(0) ^ (self as *const Self as u64);
        tokio::time::sleep(wait.saturating_add(full_jitter(jitter, &mut seed))).await;
        // Dropped while asleep, `turn` is cancelled by its drop.
        turn.commit();
        Ok(())
    }
}

/// Waiting on a keyed limiter. For an algorithm that books ([`Algorithm::book`]:
/// GCRA, or an [`AnyAlgorithm`](crate::AnyAlgorithm) holding it) the wait books its
/// key's turn in the key's own word ([`KeyedLimiter::reserve_key_at`]): waiters of one
/// key are served first come, first served, with the bound of
/// [`RateLimiter::until_ready_n`] per key. Other algorithms retry: each try takes
/// nothing unless it is admitted, and between tries it sleeps the refusal's own
/// `retry_after` (never polling faster than the limiter can admit) plus, if asked, a
/// random part of `jitter`; there is no order among those waiters, so one can lose
/// every try to others and is bounded only by its `max_wait` (it then fails with
/// [`WaitError::TooLong`], never waits past it).
impl<K: Hash + ?Sized, A: Algorithm + Copy, C: Clock> KeyedLimiter<K, A, C> {
    /// Waits until `cost` units of `key` are admitted, at most `max_wait` in all;
    /// the admission, or why it could not be (a cost that can never fit is an error at
    /// once; a full table or a turn past `max_wait` too). A booking waiter that has to
    /// wait also waits a random part of `jitter` past its turn (never past
    /// `max_wait`).
    ///
    /// ```
    /// # async fn demo() {
    /// use std::time::Duration;
    /// use portero::{Gcra, KeyedLimiter, Quota};
    ///
    /// let per_tenant = KeyedLimiter::new(Gcra::new(Quota::per_second(100).unwrap()), 1_000);
    /// let d = per_tenant
    ///     .until_key_ready(&"acme", 1, Duration::from_secs(5), Duration::from_millis(10))
    ///     .await
    ///     .unwrap();
    /// assert!(d.is_allowed());
    /// # }
    /// ```
    pub async fn until_key_ready(
        &self,
        key: &K,
        cost: u64,
        max_wait: Duration,
        jitter: Duration,
    ) -> Result<Decision, WaitError> {
        let mut seed = self.clock().now() ^ (key as *const K as *const u8 as u64);
        let now = self.clock().now();
        if let Some(booked) = self.book_key(key, now, cost, wait_cap(max_wait)) {
            let turn = booked?;
            let wait = turn.wait_from(now);
            if !wait.is_zero() {
                seed ^= turn.ready_at();
                let pause = wait
                    .saturating_add(full_jitter(jitter, &mut seed))
                    .min(max_wait.max(wait));
                tokio::time::sleep(pause).await;
            }
            let ready_at = turn.ready_at();
            turn.commit();
            // What is left at the turn (later bookings counted): an admission.
            let left = self
                .peek_at(key, ready_at, 0)
                .unwrap_or_else(|_| Decision::never(self.algorithm().capacity()));
            let limit = self.algorithm().capacity();
            return Ok(Decision::admitted(
                limit,
                left.remaining(),
                left.reset_after_nanos(),
            ));
        }
        let started = tokio::time::Instant::now();
        loop {
            let d = self.check_n(key, cost).map_err(WaitError::Keyed)?;
            if d.is_allowed() {
                return Ok(d);
            }
            let pause = d
                .retry_after()
                .saturating_add(full_jitter(jitter, &mut seed));
            let waited = started.elapsed();
            if waited.saturating_add(d.retry_after()) > max_wait {
                return Err(WaitError::TooLong {
                    wait: waited.saturating_add(d.retry_after()),
                });
            }
            tokio::time::sleep(pause.min(max_wait.saturating_sub(waited))).await;
        }
    }
}

/// A random part of `bound` (SplitMix64 on `seed`): uniform in `[0, bound]`.
pub(crate) fn full_jitter(bound: Duration, seed: &mut u64) -> Duration {
    let bound = u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX);
    if bound == 0 {
        return Duration::ZERO;
    }
    *seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *seed;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    Duration::from_nanos(z % bound.saturating_add(1).max(1))
}
