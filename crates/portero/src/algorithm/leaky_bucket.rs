//! The leaky bucket, in both of its readings (see `docs/guide.md`).
//!
//! - [`LeakyMeter`] (a policer): the bucket holds only a level. Each admitted unit adds
//!   1, the level drains at `r`, and a request of cost `c` is admitted at once when
//!   `level + c ≤ capacity`; nothing waits. With `tokens = capacity − level` it is the
//!   token bucket's mirror image and admits exactly the same requests (tested).
//! - [`LeakyQueue`] (a shaper): requests join a bounded queue that releases one unit
//!   every `T = 1/r`. An admitted request is told its `delay` ([`Decision::delay`]):
//!   the `k`-th request into an empty queue leaves after `k·T` (the first one interval
//!   after arriving); the worst wait is `capacity·T`; a full queue rejects. Whatever
//!   the input, releases are at least `T` apart per unit.
//!
//! # State: one `u64` each
//!
//! ```text
//!  63                                                               0
//! +------------------------------------------------------------------+
//! | meter: the instant the level drains to 0 (ns)                    |
//! | queue: the instant the last queued unit leaves (ns)              |
//! +------------------------------------------------------------------+
//! ```
//!
//! `level(now) = max(0, empty_at − now) / T` and `queued(now) = ⌈max(0, tail − now) / T⌉`.
//! Range: `now ≤ 2^63` ns, `capacity·T ≤ 2^62` ns (checked by [`Quota`]). A `now`
//! earlier than a previous one sees a fuller bucket, never an emptier one.

use crate::admission::{quota_charge, quota_refund, Admission};
use crate::algorithm::Algorithm;
use crate::decision::{CheckError, Decision};
use crate::quota::Quota;
use crate::word::Transition;

/// Pours `cost` units into a bucket of `q` whose content drains by `empty_at` (in
/// units × `T`, drained lazily): admitted while it does not overflow `B·T`, the new
/// empty instant written; refused otherwise, writing nothing. The one transition of
/// both leaky buckets (the queue's tail is the meter's level).
#[inline]
fn pour(q: &Quota, empty_at: u64, now: u64, cost: u64) -> Result<Transition, CheckError> {
    crate::decision::check_range(now, cost, q.burst())?;
    let (t, full) = (q.interval_nanos(), q.capacity_nanos());
    let level = empty_at.saturating_sub(now); // drained lazily, in units × T
    let poured = level.saturating_add(cost * t);
    if cost > 0 && poured > full {
        let d = Decision::new(
            false,
            q.burst(),
            full.saturating_sub(level),
            t,
            poured - full,
            level,
        );
        return Ok(Transition::keep(d));
    }
    // A peek (no units) of a level past the capacity (charged into debt) is full.
    let d = Decision::new(true, q.burst(), full.saturating_sub(poured), t, 0, poured);
    if cost == 0 {
        return Ok(Transition::keep(d));
    }
    Ok(Transition::write(d, now + poured))
}

/// The leaky bucket as a meter: capacity = the quota's burst, drained at its rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeakyMeter {
    quota: Quota,
}

impl LeakyMeter {
    /// A meter of capacity `quota.burst()` draining `quota.limit()` per period.
    pub const fn new(quota: Quota) -> Self {
        Self { quota }
    }

    /// The level (in units, fractions included) at `now` for state `empty_at`.
    pub fn level_in(&self, empty_at: u64, now: u64) -> f64 {
        empty_at.saturating_sub(now) as f64 / self.quota.interval_nanos() as f64
    }
}

impl Algorithm for LeakyMeter {
    /// Drains back out of the level the part of the admission's units that has not
    /// leaked out by `now` anyway (as [`Gcra`](crate::algorithm::gcra::Gcra)'s refund).
    fn refund(&self, state: u64, admission: &Admission, now: u64) -> Option<u64> {
        Some(quota_refund(&self.quota, state, admission, now))
    }

    fn capacity(&self) -> u64 {
        self.quota.burst()
    }

    /// Raises the level by `n` units past the capacity (at most 146 years of debt, as [`Algorithm::charge`] says).
    fn charge(&self, state: u64, now: u64, cost: u64) -> Option<u64> {
        Some(quota_charge(&self.quota, state, now, cost))
    }

    #[inline]
    fn decide(&self, empty_at: u64, now: u64, cost: u64) -> Result<Transition, CheckError> {
        pour(&self.quota, empty_at, now, cost)
    }
}

/// The leaky bucket as a bounded queue (a shaper): capacity = the quota's burst,
/// released at its rate. Admitted requests carry their [`Decision::delay`].
///
/// ```
/// use portero::{LeakyQueue, ManualClock, Quota, RateLimiter};
/// // The queue's classic figure: 6 slots, one release every 0.5 s, 9 arrive at once.
/// let quota = Quota::from_nanos(2, 1_000_000_000)?.with_burst(6)?;
/// let queue = RateLimiter::new(LeakyQueue::new(quota)).with_clock(ManualClock::new());
/// let delays: Vec<_> = (0..9)
///     .map(|_| queue.check())
///     .map(|d| d.is_allowed().then(|| d.delay().as_secs_f64()))
///     .collect();
/// assert_eq!(&delays[..6], &[Some(0.5), Some(1.0), Some(1.5), Some(2.0), Some(2.5), Some(3.0)]);
/// assert_eq!(&delays[6..], &[None, None, None]);
/// # Ok::<(), portero::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeakyQueue {
    quota: Quota,
}

impl LeakyQueue {
    /// A queue of `quota.burst()` slots releasing `quota.limit()` per period.
    pub const fn new(quota: Quota) -> Self {
        Self { quota }
    }

    /// Units still queued at `now` for state `tail`.
    pub fn queued_in(&self, tail: u64, now: u64) -> u64 {
        tail.saturating_sub(now)
            .div_ceil(self.quota.interval_nanos())
    }
}

impl Algorithm for LeakyQueue {
    /// Gives nothing back once anything came since: the requests queued behind this
    /// one were told when they leave, and its slot lies between theirs. (While it is
    /// still the last in the queue, [`Admission::give_back`] takes it out exactly,
    /// and a [`part`](Admission::part) of it comes off the tail by the schedule's
    /// rule.)
    fn refund(&self, state: u64, admission: &Admission, now: u64) -> Option<u64> {
        let last = admission.after() == Some(state) && !admission.others_given_back();
        Some(if last {
            quota_refund(&self.quota, state, admission, now)
        } else {
            state
        })
    }

    fn capacity(&self) -> u64 {
        self.quota.burst()
    }

    /// Lengthens the queue by `n` units past its slots: the requests that join
    /// later leave that much later (at most 146 years of debt, as [`Algorithm::charge`] says).
    fn charge(&self, state: u64, now: u64, cost: u64) -> Option<u64> {
        Some(quota_charge(&self.quota, state, now, cost))
    }

    #[inline]
    fn decide(&self, tail: u64, now: u64, cost: u64) -> Result<Transition, CheckError> {
        // The meter's pour: the queue's tail is the meter's level. What differs is that
        // an admitted request waits for its turn, the time until it leaves the queue.
        let poured = pour(&self.quota, tail, now, cost)?;
        Ok(match poured.next {
            Some(leaves_at) => {
                Transition::write(poured.decision.with_delay(leaves_at - now), leaves_at)
            }
            None => poured,
        })
    }
}

#[cfg(feature = "std")]
impl<C: crate::clock::Clock> crate::algorithm::limiter::RateLimiter<LeakyQueue, C> {
    /// Joins the queue and blocks the thread until this request's turn. Returns the
    /// rejection at once if the queue is full. Turns are handed out in the order the
    /// requests joined, one unit every `T`.
    pub fn acquire_blocking(&self, cost: u64) -> Result<Decision, CheckError> {
        let d = self.check_n(cost)?;
        if d.is_allowed() {
            std::thread::sleep(d.delay());
        }
        Ok(d)
    }
}

#[cfg(feature = "tokio")]
impl<C: crate::clock::Clock> crate::algorithm::limiter::RateLimiter<LeakyQueue, C> {
    /// Joins the queue and waits (without blocking a thread) until this request's
    /// turn. Returns the rejection at once if the queue is full.
    pub async fn acquire(&self, cost: u64) -> Result<Decision, CheckError> {
        let d = self.check_n(cost)?;
        if d.is_allowed() {
            tokio::time::sleep(d.delay()).await;
        }
        Ok(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn queue_delays_are_k_over_r_and_the_worst_is_capacity_over_r() {
        let q = LeakyQueue::new(Quota::per_second(10).unwrap().with_burst(4).unwrap());
        let mut tail = 0;
        let now = 5 * S;
        for k in 1..=4 {
            let t = q.decide(tail, now, 1).unwrap();
            assert_eq!(t.decision.delay_nanos(), k * S / 10);
            tail = t.next.unwrap();
        }
        let full = q.decide(tail, now, 1).unwrap();
        assert!(!full.decision.is_allowed());
        assert_eq!(full.decision.retry_after_nanos(), S / 10);
        assert_eq!(q.queued_in(tail, now), 4);
        assert_eq!(q.queued_in(tail, now + S / 10), 3);
        assert_eq!(q.queued_in(tail, now + 4 * S / 10), 0);
    }

    #[test]
    fn meter_admits_up_to_capacity_and_drains() {
        let m = LeakyMeter::new(Quota::per_second(10).unwrap().with_burst(3).unwrap());
        let t = m.decide(0, S, 3).unwrap();
        assert!(t.decision.is_allowed());
        let s = t.next.unwrap();
        assert_eq!(m.level_in(s, S), 3.0);
        assert!(!m.decide(s, S, 1).unwrap().decision.is_allowed());
        assert_eq!(m.level_in(s, S + S / 20), 2.5);
        assert!(m.decide(s, S + S / 10, 1).unwrap().decision.is_allowed());
    }
}
