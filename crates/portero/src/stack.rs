//! Stacked limits: a request passes a user limit, a tenant limit and a global limit
//! all or none.
//!
//! [`check_all`] acquires each limit in order. If one rejects, every unit the earlier
//! ones took is given back ([`Limit::refund_at`]), so a rejected request costs no quota
//! anywhere. Refunds subtract exactly what was added (a time debt for GCRA and the
//! buckets, a count for windows), so they commute with other threads' updates and can
//! never leave a limit more generous than if the rejected request had never arrived: the
//! loom model in `tests/tests/loom_limits.rs` checks that each limit still admits at most
//! its quota.
//!
//! ```
//! use portero::{stack, Gcra, KeyedLimiter, ManualClock, Quota, RateLimiter};
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

use crate::{Algorithm, Clock, Decision, KeyedError, RateLimiter};

/// One limit in a stack: something that can admit units and give them back.
pub trait Limit {
    /// Checks `cost` units at `now`, taking them if admitted.
    fn acquire_at(&self, now: u64, cost: u64) -> Result<Decision, KeyedError>;
    /// Gives back `cost` units taken by an admission at `now`.
    fn refund_at(&self, now: u64, cost: u64);
}

impl<A: Algorithm, C: Clock> Limit for RateLimiter<A, C> {
    fn acquire_at(&self, now: u64, cost: u64) -> Result<Decision, KeyedError> {
        Ok(self.check_at(now, cost)?)
    }
    fn refund_at(&self, now: u64, cost: u64) {
        RateLimiter::refund_at(self, now, cost);
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
    let mut binding: Option<Decision> = None;
    for (i, limit) in limits.iter().enumerate() {
        let outcome = limit.acquire_at(now, cost);
        match outcome {
            Ok(d) if d.is_allowed() => {
                if binding.is_none_or(|b| d.remaining() < b.remaining()) {
                    binding = Some(d);
                }
            }
            _ => {
                for earlier in limits[..i].iter().rev() {
                    earlier.refund_at(now, cost);
                }
                let d = outcome?;
                return Ok(Stacked {
                    decision: d,
                    rejected_by: Some(i),
                });
            }
        }
    }
    Ok(Stacked {
        decision: binding.unwrap_or(Decision::admitted(0, 0, 0)),
        rejected_by: None,
    })
}
