//! The one-word algorithms, and [`RateLimiter`](limiter::RateLimiter), which runs any of
//! them over one atomic word and a clock.
//!
//! Each algorithm is a pure transition over a 64-bit word ([`Algorithm`]): it holds
//! only its configuration, the caller holds the word. Which one for which job:
//!
//! | algorithm | admits | state |
//! |---|---|---|
//! | [`gcra`] | `B + t/T` in any interval `t`: a smooth rate with bursts | the theoretical arrival time |
//! | [`token_bucket`] | the same bound, counted as tokens (`remaining` = tokens left) | tokens and their time |
//! | [`fixed_window`] | `N` per window, reset at its edge (`2N` across an edge) | count and window index |
//! | [`sliding_counter`] | about `N` in any window, weighting the previous window | two counts and an index |
//! | [`leaky_bucket`] | a meter (like GCRA) or a queue that delays instead of refusing | the level's time |
//! | [`calendar`] | `N` per day or month on the civil calendar | count and period index |
//! | [`sliding_log`] | exactly `N` in any window (`L` timestamps behind a mutex) | a ring of instants |
//!
//! [`any`] chooses one at run time by name; [`from_quota`] builds every one of them
//! from a [`Quota`](crate::quota::Quota).
//!
//! This layer stands on the foundations at the crate root (the word, the clock, the
//! quota, the decision, the admission); the keyed limits, the waits and the overload
//! primitives stand on it, and nothing here imports them.

use crate::admission::Admission;
use crate::decision::CheckError;
use crate::word::Transition;

pub mod any;
pub mod calendar;
pub(crate) mod charge;
pub mod fixed_window;
pub mod from_quota;
pub mod gcra;
pub mod kept;
pub mod leaky_bucket;
pub mod limiter;
pub mod sliding_counter;
#[cfg(feature = "std")]
pub mod sliding_log;
pub mod token_bucket;

/// A rate-limiting algorithm as a pure transition over one 64-bit state word.
///
/// Implementations hold only immutable configuration; all mutable state is the `u64`
/// passed in. `decide` must be a pure function of its arguments (it is retried under
/// contention) and must return [`Transition::keep`] for rejections, so that a rejection
/// never writes.
pub trait Algorithm {
    /// The state of a limiter that has admitted nothing yet.
    fn initial_state(&self) -> u64 {
        0
    }

    /// The most units one request may cost; larger costs are
    /// [`CheckError::CostExceedsCapacity`].
    fn capacity(&self) -> u64;

    /// Decides a request of `cost` units at time `now` (nanoseconds) given `state`.
    fn decide(&self, state: u64, now: u64, cost: u64) -> Result<Transition, CheckError>;

    /// The state after giving back what `admission` took, at `now` (no earlier than
    /// the admission), when the word has changed since that admission wrote it.
    /// `None` if this algorithm cannot give units back (the default).
    ///
    /// Callers go through [`Admission::give_back`], which restores the word the
    /// admission found while the word still holds what it wrote, and calls this
    /// otherwise: so this method only decides what can still be the admission's once
    /// other requests came in between.
    ///
    /// Contract: applied to any state reached after that admission, with `now` no
    /// earlier than any check applied since, the result must never admit more than if
    /// the request had not been admitted at all (the [`admission`](crate::admission)
    /// module states the rule each algorithm here follows, and how much less it may
    /// give back).
    fn refund(&self, state: u64, admission: &Admission, now: u64) -> Option<u64> {
        let _ = (state, admission, now);
        None
    }

    /// The state after taking `cost` units at `now` whether or not they fit: a
    /// request's real cost settled after it was admitted on an estimate (tokens a
    /// model call used), charged into debt past the burst — later requests wait it
    /// out. `None` (the default): this algorithm cannot take units after the fact.
    ///
    /// Contract: pure; the result never admits more, at any later time and cost,
    /// than `state` would after an admission of `cost` at `now` (were it to fit).
    /// A schedule moves on by `cost·T` (at most 146 years of debt); a window counts
    /// the units in the window current at `now` (its debt ends with that window, up
    /// to what its count's bits hold), and a window placed by its first request is
    /// never opened by a charge (the admission opened it; once it has ended, the
    /// units are gone with it).
    fn charge(&self, state: u64, now: u64, cost: u64) -> Option<u64> {
        let _ = (state, now, cost);
        None
    }

    /// Books `cost` units at `now` for a request that will wait for its turn, if this
    /// algorithm's state is a schedule (GCRA's is): `Some((ready_at, next))`, the
    /// first instant the units conform and the state with them charged as an admission
    /// at that instant leaves it. `None` (the default): it cannot book, and waiters
    /// retry instead. Called only for a `cost` and `now` that [`decide`](Self::decide)
    /// accepts.
    ///
    /// Contract: pure; `ready_at ≥ now`, with `ready_at = now` exactly when `decide`
    /// would admit; and `next` never admits more than that admission would.
    fn book(&self, state: u64, now: u64, cost: u64) -> Option<(u64, u64)> {
        let _ = (state, now, cost);
        None
    }
}

// Giving an admission back is the algorithm's call, so it lives beside the trait; the
// bookkeeping of what the admission took stays with `Admission`.
impl Admission {
    /// The state after giving this admission back to `algorithm` at `now` (see the
    /// [module docs](crate::admission) for the rule): the undo while nothing happened since,
    /// otherwise the algorithm's own [`refund`](Algorithm::refund). `None` if the
    /// algorithm gives nothing back at all.
    ///
    /// Without the word's refund ledger this cannot tell whether another refund
    /// moved the word since, so it assumes one did (the limiters here keep theirs):
    /// no undo, and a schedule gives nothing back. Less back, never more.
    pub fn give_back<A: Algorithm + ?Sized>(
        &self,
        algorithm: &A,
        state: u64,
        now: u64,
    ) -> Option<u64> {
        self.give_back_ledgered(algorithm, state, now, None)
            .map(|(next, _)| next)
    }

    /// [`give_back`](Self::give_back), knowing the word's refund ledger now
    /// (`ledger`, read under the ledger's lock): the state after, and whether it is
    /// the exact undo.
    pub(crate) fn give_back_ledgered<A: Algorithm + ?Sized>(
        &self,
        algorithm: &A,
        state: u64,
        now: u64,
        ledger: Option<crate::admission::Seen>,
    ) -> Option<(u64, bool)> {
        self.give_back_with(state, now, ledger, |seen, now| {
            algorithm.refund(state, seen, now)
        })
    }
}
