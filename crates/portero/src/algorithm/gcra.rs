//! GCRA, the generic cell rate algorithm ("virtual scheduling").
//!
//! # State: one `u64`, the theoretical arrival time (TAT)
//!
//! ```text
//!  63                                                               0
//! +------------------------------------------------------------------+
//! |  TAT: nanoseconds on the limiter's time axis                     |
//! +------------------------------------------------------------------+
//! ```
//!
//! With emission interval `T` (ns per unit) and burst `B`, the TAT is the instant at
//! which the limiter would be full again if nothing more arrived; `0` (or any TAT not
//! after `now`) means full. A request of `n` units at `now` is admitted iff
//!
//! ```text
//! max(TAT, now) + n·T − now  ≤  B·T
//! ```
//!
//! and then `TAT ← max(TAT, now) + n·T`. A rejection writes nothing. Consequences:
//!
//! - In any interval of length `t`, at most `B + t / T` units are admitted.
//! - `retry_after = max(TAT, now) + n·T − B·T − now` exactly.
//! - `remaining = ⌊(B·T − (TAT' − now)) / T⌋`, `reset_after = TAT' − now`.
//!
//! Range: `now < 2^63` ns and `B·T ≤ 2^62` ns (checked by [`Quota`]), so the TAT stays
//! below `2^63 + 2^62` and no sum overflows. A `now` earlier than an earlier call's only
//! sees a larger backlog, so going back in time can never admit more.
//!
//! GCRA admits exactly what a [`TokenBucket`](crate::algorithm::token_bucket::TokenBucket) with the same rate
//! and capacity admits (the property tests check it); it is the leaky bucket as a
//! meter, written as a schedule.

use crate::admission::{quota_charge, quota_refund, Admission};
use crate::algorithm::limiter::RateLimiter;
use crate::algorithm::Algorithm;
use crate::clock::DefaultClock;
use crate::decision::check_range;
use crate::decision::{CheckError, Decision};
use crate::quota::Quota;
use crate::word::Transition;

/// GCRA over a [`Quota`]: see the [module docs](self) for the state and formula.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    quota: Quota,
}

impl Gcra {
    /// GCRA for `quota`.
    pub const fn new(quota: Quota) -> Self {
        Self { quota }
    }

    /// The quota.
    pub const fn quota(&self) -> &Quota {
        &self.quota
    }

    /// A booking of `cost` units at `now` on `tat`: `(ready_at, TAT')` with
    /// `ready_at = max(now, TAT + n·T − B·T)` and `TAT' = max(TAT, now) + n·T`, the
    /// request as if it arrived at the first instant it conforms (saturating: a TAT
    /// near the top of the range only makes the wait longer; callers cap the wait
    /// before they write). The one formula of every GCRA wait, direct and keyed.
    #[inline]
    pub(crate) fn booking(&self, tat: u64, now: u64, cost: u64) -> (u64, u64) {
        let increment = cost.saturating_mul(self.quota.interval_nanos());
        let span = self.quota.capacity_nanos();
        let ready_at = tat.saturating_add(increment).saturating_sub(span).max(now);
        (ready_at, tat.max(now).saturating_add(increment))
    }
}

impl Algorithm for Gcra {
    /// Gives back the part of the admission's `n·T` of debt that must still lie after
    /// `now` (see [`admission`](crate::admission): short by at most the time since it
    /// plus what other refunds of the word gave back since).
    fn refund(&self, state: u64, admission: &Admission, now: u64) -> Option<u64> {
        Some(quota_refund(&self.quota, state, admission, now))
    }

    /// Moves the word on by `n·T` into debt (at most 146 years of debt, as [`Algorithm::charge`] says).
    fn charge(&self, state: u64, now: u64, cost: u64) -> Option<u64> {
        Some(quota_charge(&self.quota, state, now, cost))
    }

    fn capacity(&self) -> u64 {
        self.quota.burst()
    }

    /// `ready_at = max(now, TAT + n·T − B·T)`, `TAT ← max(TAT, now) + n·T`: the
    /// request as if it arrived at the first instant it conforms.
    fn book(&self, tat: u64, now: u64, cost: u64) -> Option<(u64, u64)> {
        Some(self.booking(tat, now, cost))
    }

    #[inline]
    fn decide(&self, tat: u64, now: u64, cost: u64) -> Result<Transition, CheckError> {
        let q = &self.quota;
        check_range(now, cost, q.burst())?;
        let (t, span) = (q.interval_nanos(), q.capacity_nanos());
        // Written so that the loaded TAT reaches the CAS through as few instructions as
        // possible (a locked CAS waits for everything before it): the admit test
        // `max(TAT, now) + n·T ≤ now + B·T` is the same as `TAT ≤ limit` with
        // `limit = now + B·T − n·T ≥ now` (because n ≤ B), and `limit` does not depend
        // on the state. No overflow: every TAT a limiter can hold was produced here (or
        // by a refund, which only lowers it), so TAT ≤ MAX_TIME + B·T < 2^63 + 2^62,
        // and n·T ≤ B·T ≤ 2^62: every sum stays below 2^64.
        let increment = cost * t;
        let latest = now + span;
        let limit = latest - increment;
        if tat > limit {
            // Here TAT > limit ≥ now, so the backlog is TAT − now.
            let backlog = tat - now;
            let d = Decision::new(
                false,
                q.burst(),
                span.saturating_sub(backlog),
                t,
                tat - limit,
                backlog,
            );
            return Ok(Transition::keep(d));
        }
        let new_tat = if tat > now { tat } else { now } + increment;
        let d = Decision::new(true, q.burst(), latest - new_tat, t, 0, new_tat - now);
        Ok(Transition::write(d, new_tat))
    }
}

impl RateLimiter<Gcra, DefaultClock> {
    /// A [`Gcra`] limiter for `quota`, starting full.
    pub fn gcra(quota: Quota) -> Self {
        Self::new(Gcra::new(quota))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Admission;
    use crate::quota::MAX_TIME_NANOS;

    fn gcra(per_sec: u64, burst: u64) -> Gcra {
        Gcra::new(
            Quota::per_second(per_sec)
                .unwrap()
                .with_burst(burst)
                .unwrap(),
        )
    }

    #[test]
    fn admits_the_burst_then_one_per_interval() {
        let g = gcra(10, 3);
        let mut tat = 0;
        let now = 5_000_000_000;
        for left in (0..3).rev() {
            let t = g.decide(tat, now, 1).unwrap();
            assert!(t.decision.is_allowed());
            assert_eq!(t.decision.remaining(), left);
            tat = t.next.unwrap();
        }
        let t = g.decide(tat, now, 1).unwrap();
        assert!(!t.decision.is_allowed());
        assert_eq!(t.next, None, "a rejection writes nothing");
        assert_eq!(t.decision.retry_after_nanos(), 100_000_000);
        assert_eq!(t.decision.reset_after_nanos(), 300_000_000);
        let later = g.decide(tat, now + 100_000_000, 1).unwrap();
        assert!(later.decision.is_allowed());
        assert!(!g
            .decide(tat, now + 99_999_999, 1)
            .unwrap()
            .decision
            .is_allowed());
    }

    #[test]
    fn weighted_cost_is_all_or_nothing() {
        let g = gcra(10, 5);
        let t = g.decide(0, 0, 4).unwrap();
        assert!(t.decision.is_allowed());
        let tat = t.next.unwrap();
        let t = g.decide(tat, 0, 2).unwrap();
        assert!(!t.decision.is_allowed());
        assert_eq!(t.decision.remaining(), 1);
        assert_eq!(t.decision.retry_after_nanos(), 100_000_000);
        assert_eq!(
            g.decide(tat, 0, 6),
            Err(CheckError::CostExceedsCapacity {
                cost: 6,
                capacity: 5
            })
        );
    }

    #[test]
    fn time_going_backwards_never_admits_more() {
        let g = gcra(10, 2);
        let now = 1_000_000_000;
        let tat = g.decide(0, now, 2).unwrap().next.unwrap();
        for back in [1, 1_000, 1_000_000_000] {
            assert!(!g.decide(tat, now - back, 1).unwrap().decision.is_allowed());
        }
        assert!(!g.decide(tat, 0, 1).unwrap().decision.is_allowed());
    }

    #[test]
    fn time_near_u64_max_is_an_error_not_a_wrap() {
        let g = gcra(10, 2);
        assert_eq!(
            g.decide(0, u64::MAX, 1),
            Err(CheckError::TimeOutOfRange { now: u64::MAX })
        );
        let t = g.decide(0, MAX_TIME_NANOS, 2).unwrap();
        assert!(t.decision.is_allowed());
        let tat = t.next.unwrap();
        assert!(!g
            .decide(tat, MAX_TIME_NANOS, 1)
            .unwrap()
            .decision
            .is_allowed());
        // The largest TAT a limiter can hold, read at time 0: no overflow, a rejection.
        let worst = MAX_TIME_NANOS + g.quota().capacity_nanos();
        assert!(!g.decide(worst, 0, 2).unwrap().decision.is_allowed());
    }

    // Giving back through `Admission` (the rule of the `admission` module), on GCRA.
    const MS: u64 = 1_000_000;

    #[test]
    fn a_refund_after_the_debt_drained_gives_back_only_what_lies_ahead() {
        // 2 per second, burst 2 (T = 500 ms): X at 0, Y at 500 ms, X given back.
        let g = Gcra::new(Quota::per_second(2).unwrap());
        let x = g.decide(0, 0, 1).unwrap();
        let adm = Admission::of_word(0, 1, 0, x.next.unwrap(), 0);
        let y = g
            .decide(x.next.unwrap(), 500 * MS, 1)
            .unwrap()
            .next
            .unwrap();
        let (refunded, _) = adm
            .give_back_ledgered(&g, y, 500 * MS, Some(crate::admission::Seen::total(0)))
            .unwrap();
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
        let adm = Admission::of_word(100, 2, 7, x, 0);
        assert_eq!(
            adm.give_back_ledgered(&g, x, 5_000 * MS, Some(crate::admission::Seen::total(0))),
            Some((7, true))
        );
        assert_eq!(adm.undo(x + 1), None);
        // A refund that moved the word since, or no ledger at all: the same word
        // proves nothing.
        assert_ne!(
            adm.give_back_ledgered(&g, x, 5_000 * MS, Some(crate::admission::Seen::total(1)))
                .map(|(s, _)| s),
            Some(7)
        );
        assert_ne!(adm.give_back(&g, x, 5_000 * MS), Some(7));
    }
}
