//! An opt-in scalable mode for one hot limit shared by many cores: striped buckets that
//! borrow from each other.
//!
//! One atomic word is as fast as a limiter can be on one core, but when every core
//! checks the same global limit, that word's cache line bounces between them. A
//! [`Striped`] limiter splits the quota into `S` stripes on separate cache lines, each a
//! GCRA of rate `r / S` and burst `⌊B / S⌋` (the remainder spread over the first
//! stripes, so the bursts sum to exactly `B`). A thread checks its own stripe first and,
//! only when that one rejects, borrows from the others in turn.
//!
//! **Over-admission bound: zero.** Each stripe admits at most `B_i + t / T_i` units in
//! any interval `t` (its own GCRA bound), and `Σ B_i = B`, `Σ 1/T_i ≤ r`, so the whole
//! admits at most `B + r·t`: the same bound as a single GCRA, whatever the threads do.
//! The loom model and the stress test in `tests/` check it.
//!
//! **Under-admission**: a request is rejected only when no single stripe can pay its
//! whole cost. With unit costs that happens only when every stripe holds less than one
//! token, i.e. the whole holds less than `S` tokens, so at most `S − 1` units of burst
//! are left unused and the sustained rate is unaffected. Rejections scan all stripes
//! (loads only, no writes).

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::vec::Vec;

use crossbeam_utils::CachePadded;

use crate::algorithm::gcra::Gcra;
use crate::algorithm::Algorithm;
use crate::clock::{Clock, DefaultClock};
use crate::decision::{CheckError, Decision};
use crate::quota::{Quota, QuotaError};
use crate::word::AtomicWord;

/// A GCRA quota split over stripes that borrow from each other. See the module docs.
#[derive(Debug)]
pub struct Striped<C = DefaultClock> {
    stripes: Vec<(Gcra, CachePadded<AtomicWord>)>,
    burst: u64,
    clock: C,
}

static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

std::thread_local! {
    /// Each thread's home stripe, assigned round-robin at its first check.
    static HOME: Cell<usize> = Cell::new(NEXT_STRIPE.fetch_add(1, Ordering::Relaxed));
}

impl Striped<DefaultClock> {
    /// `quota` split over `stripes` stripes (at least 1, at most the burst) on the
    /// default clock.
    pub fn new(quota: Quota, stripes: usize) -> Result<Self, QuotaError> {
        Self::with_clock(quota, stripes, DefaultClock::default())
    }
}

impl<C: Clock> Striped<C> {
    /// `quota` split over `stripes` stripes on `clock`.
    pub fn with_clock(quota: Quota, stripes: usize, clock: C) -> Result<Self, QuotaError> {
        let s = (stripes.max(1) as u64).min(quota.burst());
        // Each stripe's rate is limit / (s · period): T_i = s · T, rounded up.
        let mut out = Vec::with_capacity(s as usize);
        for i in 0..s {
            let burst = quota.burst() / s + u64::from(i < quota.burst() % s);
            let period = quota
                .period_nanos()
                .checked_mul(s)
                .ok_or(QuotaError::SpanTooLong)?;
            let q = Quota::from_nanos(quota.limit(), period)?.with_burst(burst)?;
            out.push((Gcra::new(q), CachePadded::new(AtomicWord::new(0))));
        }
        Ok(Self {
            stripes: out,
            burst: quota.burst(),
            clock,
        })
    }

    /// Number of stripes.
    pub fn stripes(&self) -> usize {
        self.stripes.len()
    }

    /// One unit now.
    #[inline]
    pub fn check(&self) -> Decision {
        self.check_at(self.clock.now(), 1)
            .unwrap_or_else(|_| Decision::never(self.burst))
    }

    /// `cost` units at `now`: the home stripe first, then the others in turn. The
    /// decision is the admitting stripe's, or on rejection the one that will be able
    /// to pay soonest (its retry-after), with the whole limiter's remaining units.
    pub fn check_at(&self, now: u64, cost: u64) -> Result<Decision, CheckError> {
        let n = self.stripes.len();
        let home = HOME.with(Cell::get) % n;
        let mut soonest: Option<Decision> = None;
        let mut remaining = 0;
        for k in 0..n {
            let (gcra, word) = &self.stripes[(home + k) % n];
            match word.apply(|s| gcra.decide(s, now, cost)) {
                Ok(d) if d.is_allowed() => return Ok(d),
                Ok(d) => {
                    remaining += d.remaining();
                    if soonest.is_none_or(|s| d.retry_after_nanos() < s.retry_after_nanos()) {
                        soonest = Some(d);
                    }
                }
                // A cost above one stripe's burst can never be paid here.
                Err(CheckError::CostExceedsCapacity { .. }) if cost <= self.burst => {}
                Err(CheckError::CostExceedsCapacity { .. }) => {
                    return Err(CheckError::CostExceedsCapacity {
                        cost,
                        capacity: self.burst,
                    })
                }
                Err(e) => return Err(e),
            }
        }
        let s = soonest.ok_or(CheckError::CostExceedsCapacity {
            cost,
            capacity: self.burst / n as u64,
        })?;
        Ok(Decision::rejected(
            self.burst,
            remaining,
            s.retry_after_nanos(),
            s.reset_after_nanos(),
        ))
    }
}
