//! Stacked limits: a request passes a user limit, a tenant limit and a global limit
//! all or none.
//!
//! [`check_all`] first asks every limit whether it would admit, taking nothing
//! ([`Limit::peek_at`]); the first that would refuse answers, and no limit was
//! charged, so there is nothing to give back. Only when every limit would admit does
//! it take the units, limit by limit; a limit that refuses then has lost a race to
//! another thread, and the units the earlier ones took go back ([`Limit::refund`]),
//! by the one rule of the [`admission`](crate::admission) module: exactly what the
//! admission took while nothing came since (the common case: the refund follows the
//! check at once), and otherwise what can still be the admission's — never more, so
//! a refund racing other threads' checks can never leave a limit more generous than
//! if the rejected request had never arrived. Each limit refunds on its own clock,
//! read after it loads its word. The loom model in `tests/tests/loom_limits.rs` and
//! the twin-limiter property tests check that each limit still admits at most its
//! quota; `tests/tests/refund_load.rs` counts what refused stacks keep under load.
//!
//! A limit that cannot peek (a [`Limit`] of your own without
//! [`peek_at`](Limit::peek_at)) is taken in the second step like the others, and
//! given back when a later one refuses. Which limits give back: every one-word
//! algorithm here and the exact log; a
//! [`LeakyQueue`](crate::algorithm::leaky_bucket::LeakyQueue) only while the refused request is still the last
//! in its queue (the requests behind it were told when they leave); a first-request
//! [`FixedWindow`](crate::algorithm::fixed_window::FixedWindow) not when the refused request opened a window
//! others joined since. A limit that keeps the units is stricter, never looser.
//!
//! ```
//! use portero::keyed::stack;
//! use portero::{Gcra, KeyedLimiter, ManualClock, Quota, RateLimiter};
//! let user = KeyedLimiter::with_clock(Gcra::new(Quota::per_second(5)?), 1_000, ManualClock::new());
//! let global = RateLimiter::gcra(Quota::per_second(2)?).with_clock(ManualClock::new());
//! let ok = stack::check_all(&[&user.limit_for(&"alice"), &global], 0, 1)?;
//! assert!(ok.decision.is_allowed());
//! stack::check_all(&[&user.limit_for(&"alice"), &global], 0, 1)?;
//! let no = stack::check_all(&[&user.limit_for(&"alice"), &global], 0, 1)?;
//! assert_eq!(no.rejected_by, Some(1)); // the global limit said no…
//! // …and alice got her unit back: 2 used of 5, so one more would leave 2.
//! assert_eq!(user.peek_at(&"alice", 0, 1)?.remaining(), 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::admission::{Acquired, Admission};
use crate::algorithm::limiter::RateLimiter;
use crate::algorithm::Algorithm;
use crate::clock::Clock;
use crate::decision::{Decision, KeyedError};

/// One limit in a stack: something that can admit units and give them back.
pub trait Limit {
    /// Checks `cost` units at `now`, taking them if admitted.
    fn acquire_at(&self, now: u64, cost: u64) -> Result<Acquired, KeyedError>;
    /// Gives back what `admission` took, at the limit's own time.
    fn refund(&self, admission: Admission);
    /// What [`acquire_at`](Self::acquire_at) would answer, taking nothing: `None`
    /// when this limit cannot tell without taking (the default), and then it is taken
    /// and given back like before.
    fn peek_at(&self, now: u64, cost: u64) -> Result<Option<Decision>, KeyedError> {
        let _ = (now, cost);
        Ok(None)
    }
}

impl<A: Algorithm, C: Clock> Limit for RateLimiter<A, C> {
    fn acquire_at(&self, now: u64, cost: u64) -> Result<Acquired, KeyedError> {
        Ok(RateLimiter::acquire_at(self, now, cost)?)
    }
    fn refund(&self, admission: Admission) {
        RateLimiter::refund(self, admission);
    }
    fn peek_at(&self, now: u64, cost: u64) -> Result<Option<Decision>, KeyedError> {
        Ok(Some(RateLimiter::peek_at(self, now, cost)?))
    }
}

/// The outcome of a stack: the deciding limit's decision, and which one rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stacked {
    /// When admitted: the most binding limit's decision (fewest remaining). When
    /// rejected: the rejecting limit's decision, with its retry-after.
    pub decision: Decision,
    /// Index of the limit that rejected, if any.
    pub rejected_by: Option<usize>,
}

/// Checks `cost` units at `now` against every limit, all or none: asks each first
/// (taking nothing), then takes from each, the tightest first (those that cannot be
/// asked, then the fewest units left when asked; declared order on a tie), so that a
/// race lost to other threads is most likely lost before anything was taken. On a
/// refusal in the second step or an error, the units already taken are refunded, in
/// reverse order.
pub fn check_all(limits: &[&dyn Limit], now: u64, cost: u64) -> Result<Stacked, KeyedError> {
    if limits.is_empty() {
        return Ok(Stacked {
            decision: Decision::admitted(0, 0, 0),
            rejected_by: None,
        });
    }
    let mut left = [u64::MAX; TIGHTEST_FIRST];
    for (i, limit) in limits.iter().enumerate() {
        match limit.peek_at(now, cost)? {
            Some(d) if !d.is_allowed() => return refused_at(limits, i, d, now, cost),
            Some(d) if i < TIGHTEST_FIRST => left[i] = d.remaining(),
            // One that cannot tell without taking goes first: its refusal is the one
            // no peek foresaw.
            None if i < TIGHTEST_FIRST => left[i] = 0,
            _ => {}
        }
    }
    let mut order = [0usize; TIGHTEST_FIRST];
    let first = &mut order[..limits.len().min(TIGHTEST_FIRST)];
    for (i, o) in first.iter_mut().enumerate() {
        *o = i;
    }
    first.sort_unstable_by_key(|&i| (left[i], i)); // declared order on a tie
    let rest = TIGHTEST_FIRST.min(limits.len())..limits.len();
    take_in(
        limits,
        &mut first.iter().copied().chain(rest).peekable(),
        now,
        cost,
    )
}

/// How many limits of a stack are ordered tightest first (more are taken after them,
/// in order).
const TIGHTEST_FIRST: usize = 8;

/// Takes `cost` units from each limit in `order` (at least one), reporting indices
/// into `limits`; on a refusal (or an error) the units already taken are refunded, in
/// reverse order, each admission kept on the stack of its call (no allocation).
fn take_in<I: Iterator<Item = usize>>(
    limits: &[&dyn Limit],
    order: &mut core::iter::Peekable<I>,
    now: u64,
    cost: u64,
) -> Result<Stacked, KeyedError> {
    let Some(i) = order.next() else {
        return Ok(Stacked {
            decision: Decision::admitted(0, 0, 0),
            rejected_by: None,
        });
    };
    let taken = limits[i].acquire_at(now, cost)?;
    let d = taken.decision;
    if !d.is_allowed() || order.peek().is_none() {
        return Ok(Stacked {
            decision: d,
            rejected_by: (!d.is_allowed()).then_some(i),
        });
    }
    let outcome = take_in(limits, order, now, cost);
    match outcome {
        // The most binding decision: fewest remaining, the one taken first on a tie.
        Ok(s) if s.rejected_by.is_none() => Ok(Stacked {
            decision: if d.remaining() <= s.decision.remaining() {
                d
            } else {
                s.decision
            },
            rejected_by: None,
        }),
        _ => {
            if let Some(admission) = taken.admission {
                limits[i].refund(admission);
            }
            outcome
        }
    }
}

/// Limit `i` would refuse (`peeked`): its own check answers, so that a limit that
/// counts its refusals (an excess-counting window) counts this one. Should it admit
/// after all (room freed since the peek), the unit goes straight back and the peek's
/// answer stands: nothing was taken from the limits before it.
fn refused_at(
    limits: &[&dyn Limit],
    i: usize,
    peeked: Decision,
    now: u64,
    cost: u64,
) -> Result<Stacked, KeyedError> {
    let taken = limits[i].acquire_at(now, cost)?;
    if let Some(admission) = taken.admission.filter(|_| taken.decision.is_allowed()) {
        limits[i].refund(admission);
    }
    let decision = if taken.decision.is_allowed() {
        peeked
    } else {
        taken.decision
    };
    Ok(Stacked {
        decision,
        rejected_by: Some(i),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::quota::Quota;

    /// A limit that cannot be asked: taken, and given back when a later one refuses.
    struct Unasked<'a>(&'a RateLimiter<crate::algorithm::gcra::Gcra, ManualClock>);

    impl Limit for Unasked<'_> {
        fn acquire_at(&self, now: u64, cost: u64) -> Result<Acquired, KeyedError> {
            Ok(self.0.acquire_at(now, cost)?)
        }
        fn refund(&self, admission: Admission) {
            self.0.refund(admission);
        }
    }

    /// Past the eight limits ordered tightest first, the rest are taken in order, and
    /// a refusal by the last (which cannot be asked) gives every other limit its unit
    /// back.
    #[test]
    fn a_stack_of_ten_is_all_or_none() {
        let limits: [RateLimiter<_, ManualClock>; 10] = core::array::from_fn(|i| {
            let burst = if i == 9 { 1 } else { 5 };
            let q = Quota::per_hour(5).unwrap().with_burst(burst).unwrap();
            RateLimiter::gcra(q).with_clock(ManualClock::new())
        });
        let last = Unasked(&limits[9]);
        let all: [&dyn Limit; 10] = core::array::from_fn(|i| {
            if i == 9 {
                &last as &dyn Limit
            } else {
                &limits[i]
            }
        });
        let first = check_all(&all, 0, 1).unwrap();
        assert_eq!(first.rejected_by, None);
        assert_eq!(first.decision.remaining(), 0, "the last limit binds");
        // The last limit is spent and cannot be asked: it refuses when taken, after
        // the nine before it, which get their units back.
        assert_eq!(check_all(&all, 0, 1).unwrap().rejected_by, Some(9));
        for l in &limits[..9] {
            assert_eq!(l.peek_at(0, 0).unwrap().remaining(), 4);
        }
    }
}
