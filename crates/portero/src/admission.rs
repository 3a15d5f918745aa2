//! Giving an admission back: what a check that took units wrote, and the one rule
//! by which every refund, cancel and drop returns them.
//!
//! # The contract
//!
//! A limiter `A` admits a request `X` and later gives it back; its twin `B` sees every
//! request `A` admitted except `X` (and except any other request given back). After
//! the refund, `A` must never admit a request that `B` would refuse, at any time and
//! any cost. Giving back *less* than `X` took is allowed; giving back more is an
//! over-admission.
//!
//! # The rule
//!
//! 1. **Nothing since.** While the state word still holds exactly what `X`'s own update
//!    wrote ([`Admission::undo`]), the word goes back to what `X` found: `A` is `B`
//!    again, exactly. (A word that came back to that value through other requests and
//!    their refunds is, for every algorithm here, a state those requests left no trace
//!    in: units are interchangeable.)
//! 2. **Something since.** Each algorithm gives back what can still be `X`'s
//!    ([`Algorithm::refund`]):
//!    - a schedule (GCRA, token bucket, leaky meter: the state is the instant the
//!      debt is paid off) gives back the part of `X`'s debt that lies after the
//!      refund's time: `min(n·T, W − now)`, where `W` is the instant `X`'s update
//!      wrote. Later admissions could have absorbed only debt that was already being
//!      paid off, so what lies ahead is still owed to `X`. **Shortfall:** at most the
//!      time between `X`'s admission and the refund (the part of `X`'s debt that
//!      drained meanwhile while later requests were queued behind it); none when the
//!      refund comes at `X`'s own time. And nothing while a booking's turn is still
//!      ahead (the word more than `B·T` past the refund's time, which no check can
//!      leave): a waiter booked behind `X` was told its instant, and the slot `X`
//!      freed before it cannot be handed to anyone without letting a start squeeze in
//!      next to that instant. So the bound holds for the instants requests actually
//!      start at, waits included.
//!    - a window count (fixed windows, calendar quotas, the sliding window counter)
//!      gives `X`'s units back to the window that counted them while it is still
//!      counted (the current or, for the sliding counter, the previous window), and
//!      nothing once it is gone: exact, since those windows do not move — except for
//!      a request that *opened* its window: where a window opens at its first
//!      request, the window lies where `X` put it, and an aligned window opened over
//!      the previous window's counts made checks dated back into that window (time
//!      going backwards) count in `X`'s; neither can be made as if `X` had never come,
//!      so such an opener gives nothing back once others came since. **Shortfall:**
//!      at most one request's units per window.
//!    - a queue ([`LeakyQueue`](crate::LeakyQueue)) gives back nothing: the requests
//!      behind `X` were told when they leave, and the freed slot lies between them.
//!
//! # Time
//!
//! The refund's time must be no earlier than any check the limiter applied since
//! `X`; a limiter refunding on its own clock reads it after it loads the word, which
//! guarantees that for a clock that never goes back. A refund dated earlier than a
//! check since by `δ` can give back up to `δ` of time debt too much; the time used is
//! never earlier than `X`'s own.

use crate::limiter::Algorithm;
use crate::quota::Quota;

/// What one admission took and wrote, for giving it back (a stack whose later limit
/// refuses, a reservation cancelled, a request dropped while it waited).
///
/// ```
/// use portero::{Quota, RateLimiter};
/// let limiter = RateLimiter::gcra(Quota::per_second(2)?);
/// let taken = limiter.acquire_at(0, 2)?;
/// assert!(taken.decision.is_allowed());
/// assert!(limiter.refund_at(&taken.admission.unwrap(), 0));
/// assert_eq!(limiter.peek_at(0, 1)?.remaining(), 1); // both units back
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    at: u64,
    cost: u64,
    /// The state word the admission found and the one it wrote, when known.
    word: Option<(u64, u64)>,
}

impl Admission {
    /// An admission known only by its time and cost (a store of your own that keeps
    /// no state word): refunds follow the "something since" rule, never the undo.
    pub const fn new(at: u64, cost: u64) -> Self {
        Self {
            at,
            cost,
            word: None,
        }
    }

    /// An admission at `at` of `cost` units that turned the word `before` into `after`.
    pub(crate) const fn wrote(at: u64, cost: u64, before: u64, after: u64) -> Self {
        Self {
            at,
            cost,
            word: Some((before, after)),
        }
    }

    /// When the units were taken (ns, on the limiter's axis; for the exact log, the
    /// time the entries were recorded at).
    pub const fn at(&self) -> u64 {
        self.at
    }

    /// The units taken.
    pub const fn cost(&self) -> u64 {
        self.cost
    }

    /// The state word the admission found, if known.
    pub const fn before(&self) -> Option<u64> {
        match self.word {
            Some((before, _)) => Some(before),
            None => None,
        }
    }

    /// The state word the admission wrote, if known.
    pub const fn after(&self) -> Option<u64> {
        match self.word {
            Some((_, after)) => Some(after),
            None => None,
        }
    }

    /// The word to restore if `state` still holds what this admission wrote (nothing
    /// happened since): the word it found.
    pub const fn undo(&self, state: u64) -> Option<u64> {
        match self.word {
            Some((before, after)) if after == state => Some(before),
            _ => None,
        }
    }

    /// The state after giving this admission back to `algorithm` at `now` (see the
    /// [module docs](self) for the rule): the undo while nothing happened since,
    /// otherwise the algorithm's own [`refund`](Algorithm::refund). `None` if the
    /// algorithm gives nothing back at all.
    pub fn give_back<A: Algorithm + ?Sized>(
        &self,
        algorithm: &A,
        state: u64,
        now: u64,
    ) -> Option<u64> {
        let late = algorithm.refund(state, self, now.max(self.at))?;
        Some(self.undo(state).unwrap_or(late))
    }
}

/// A decision, and what gives its units back when it admitted something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    /// The answer.
    pub decision: crate::Decision,
    /// `Some` when units were taken (an admission of a positive cost).
    pub admission: Option<Admission>,
}

/// The "something since" rule of a schedule (a word holding the instant its debt is
/// paid off, `span` = `B·T` the most debt a check may leave): give back the part of
/// the admission's `increment` of debt that lies after `now`, and never pull the word
/// below `now` (a word below `now` admits what one at `now` does, and less is all a
/// refund can lose by that).
///
/// Nothing while the word lies more than `span` after `now`: only a booking (a
/// reservation, a wait) leaves that much debt, and one whose turn is still ahead has
/// been told its instant, placed after the admission's slot. The slot freed before it
/// could only be used by starts that squeeze in before that turn, which one word
/// cannot tell apart from starts after it: so it stays unused until the bookings
/// ahead have started.
pub(crate) fn schedule_refund(
    state: u64,
    admission: &Admission,
    now: u64,
    increment: u64,
    span: u64,
) -> u64 {
    if state.saturating_sub(now) > span {
        return state;
    }
    // The instant the admission's own debt ended; without the word, the earliest it
    // can have been (no backlog ahead of it), which only gives back less.
    let wrote = admission
        .after()
        .unwrap_or(admission.at.saturating_add(increment));
    let ahead = increment.min(wrote.saturating_sub(now));
    state.saturating_sub(ahead).max(state.min(now))
}

/// [`schedule_refund`] for a schedule of `quota` (GCRA, the token bucket, the leaky
/// meter): the admission's cost times the emission interval, within the burst's span.
pub(crate) fn quota_refund(quota: &Quota, state: u64, admission: &Admission, now: u64) -> u64 {
    let increment = admission.cost().saturating_mul(quota.interval_nanos());
    schedule_refund(state, admission, now, increment, quota.capacity_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Gcra, Quota};

    const MS: u64 = 1_000_000;

    #[test]
    fn a_refund_after_the_debt_drained_gives_back_only_what_lies_ahead() {
        // 2 per second, burst 2 (T = 500 ms): X at 0, Y at 500 ms, X given back.
        let g = Gcra::new(Quota::per_second(2).unwrap());
        let x = g.decide(0, 0, 1).unwrap();
        let adm = Admission::wrote(0, 1, 0, x.next.unwrap());
        let y = g
            .decide(x.next.unwrap(), 500 * MS, 1)
            .unwrap()
            .next
            .unwrap();
        let refunded = adm.give_back(&g, y, 500 * MS).unwrap();
        // The twin that never saw X: Y alone, at 500 ms.
        let twin = g.decide(0, 500 * MS, 1).unwrap().next.unwrap();
        assert!(refunded >= twin, "{refunded} < {twin}");
        assert!(!g
            .decide(refunded, 500 * MS, 2)
            .unwrap()
            .decision
            .is_allowed());
        assert!(g
            .decide(refunded, 500 * MS, 1)
            .unwrap()
            .decision
            .is_allowed());
    }

    #[test]
    fn nothing_since_is_an_exact_undo() {
        let g = Gcra::new(Quota::per_second(2).unwrap());
        let x = g.decide(7, 100, 2).unwrap().next.unwrap();
        let adm = Admission::wrote(100, 2, 7, x);
        assert_eq!(adm.give_back(&g, x, 5_000 * MS), Some(7));
        assert_eq!(adm.undo(x + 1), None);
    }
}
