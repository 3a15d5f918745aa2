//! Stacked limits: a request passes a user limit, a tenant limit and a global limit
//! all or none.
//!
//! [`check_all`] acquires each limit in order. If one rejects, every unit the earlier
//! ones took is given back ([`Limit::refund`]), so a rejected request costs no quota
//! anywhere. A refund follows the one rule of the [`admission`](crate::admission)
//! module: exactly what the admission took while nothing came since (the common case:
//! the refund follows the check at once), and otherwise what can still be the
//! admission's — never more, so a refund racing other threads' checks can never leave
//! a limit more generous than if the rejected request had never arrived. Each limit
//! refunds on its own clock, read after it loads its word. The loom model in
//! `tests/tests/loom_limits.rs` and the twin-limiter property tests check that each
//! limit still admits at most its quota.
//!
//! Which limits give back: every one-word algorithm here and the exact log; a
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
    fn refund(&self, admission: &Admission);
}

impl<A: Algorithm, C: Clock> Limit for RateLimiter<A, C> {
    fn acquire_at(&self, now: u64, cost: u64) -> Result<Acquired, KeyedError> {
        Ok(RateLimiter::acquire_at(self, now, cost)?)
    }
    fn refund(&self, admission: &Admission) {
        RateLimiter::refund(self, admission);
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

/// Checks `cost` units at `now` against every limit, all or none. On a rejection (or
/// an error) the units already taken are refunded, in reverse order.
pub fn check_all(limits: &[&dyn Limit], now: u64, cost: u64) -> Result<Stacked, KeyedError> {
    let Some((first, rest)) = limits.split_first() else {
        return Ok(Stacked {
            decision: Decision::admitted(0, 0, 0),
            rejected_by: None,
        });
    };
    let taken = first.acquire_at(now, cost)?;
    let d = taken.decision;
    if !d.is_allowed() {
        return Ok(Stacked {
            decision: d,
            rejected_by: Some(0),
        });
    }
    if rest.is_empty() {
        return Ok(Stacked {
            decision: d,
            rejected_by: None,
        });
    }
    // The rest of the stack, then this limit's refund if it refused: the refunds run
    // in reverse order, each admission kept on the stack of this call (no allocation).
    let outcome = check_all(rest, now, cost);
    match outcome {
        Ok(s) if s.rejected_by.is_none() => {
            let binding = if d.remaining() <= s.decision.remaining() {
                d
            } else {
                s.decision
            };
            Ok(Stacked {
                decision: binding,
                rejected_by: None,
            })
        }
        _ => {
            if let Some(admission) = &taken.admission {
                first.refund(admission);
            }
            outcome.map(|s| Stacked {
                rejected_by: s.rejected_by.map(|i| i + 1),
                ..s
            })
        }
    }
}
