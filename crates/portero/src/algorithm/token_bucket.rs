//! The token bucket: capacity `B`, refill rate `r`, lazy refill.
//!
//! The textbook rule is `tokens = min(B, tokens + elapsed·r)`, then pay `cost` tokens if
//! `tokens ≥ cost` (no partial payment). Storing `tokens` and `last` would take two
//! words; instead the bucket stores the one instant that determines both.
//!
//! # State: one `u64`, the instant the bucket is full again
//!
//! ```text
//!  63                                                               0
//! +------------------------------------------------------------------+
//! |  full_at: nanoseconds on the limiter's time axis                 |
//! +------------------------------------------------------------------+
//! ```
//!
//! With `T = 1/r` (ns per token, from the [`Quota`]), the bucket holds
//!
//! ```text
//! tokens(now) = B − max(0, full_at − now) / T          (fractions count)
//! ```
//!
//! which is exactly the lazy refill: between updates `tokens` grows by `elapsed / T`
//! and stops at `B`. Paying `n` tokens moves `full_at` to `max(full_at, now) + n·T`.
//! `full_at = 0` is a full bucket; a bucket started with `k` tokens at `t0` has
//! `full_at = t0 + (B − k)·T`. Fractional tokens are kept to the nanosecond of refill:
//! at r = 0.5 per second (`T` = 2 s) one whole token appears after exactly 2 s.
//!
//! Range: as for [`Gcra`](crate::algorithm::gcra::Gcra), `now ≤ 2^63` ns and `B·T ≤ 2^62` ns.
//! This is the same arithmetic as GCRA seen from the other side (tokens instead of a
//! schedule); the property tests check that the two admit exactly the same requests.

use crate::admission::{quota_charge, quota_refund, Admission};
use crate::algorithm::limiter::RateLimiter;
use crate::algorithm::Algorithm;
use crate::clock::Clock;
use crate::clock::DefaultClock;
use crate::decision::check_range;
use crate::decision::{CheckError, Decision};
use crate::quota::{Quota, MAX_TIME_NANOS};
use crate::word::Transition;

/// A token bucket over a [`Quota`]: capacity = the quota's burst, one token every
/// emission interval. See the [module docs](self) for the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucket {
    quota: Quota,
}

impl TokenBucket {
    /// A bucket of capacity `quota.burst()` refilled at `quota.limit()` per period.
    pub const fn new(quota: Quota) -> Self {
        Self { quota }
    }

    /// The quota.
    pub const fn quota(&self) -> &Quota {
        &self.quota
    }

    /// Tokens in the bucket at `now` for state `full_at`, in units of `1/T` tokens
    /// (nanoseconds of refill): `B·T − deficit`.
    #[inline]
    fn banked(&self, full_at: u64, now: u64) -> u64 {
        let deficit = full_at.saturating_sub(now);
        self.quota.capacity_nanos().saturating_sub(deficit)
    }

    /// Tokens held at `now` for the state word `full_at` (fractions included).
    pub fn tokens_in(&self, full_at: u64, now: u64) -> f64 {
        self.banked(full_at, now) as f64 / self.quota.interval_nanos() as f64
    }

    /// The state word of a bucket holding `tokens` at `now`.
    pub fn state_with(&self, tokens: u64, now: u64) -> Result<u64, CheckError> {
        if now > MAX_TIME_NANOS {
            return Err(CheckError::TimeOutOfRange { now });
        }
        let missing =
            self.quota
                .burst()
                .checked_sub(tokens)
                .ok_or(CheckError::CostExceedsCapacity {
                    cost: tokens,
                    capacity: self.quota.burst(),
                })?;
        Ok(now + missing * self.quota.interval_nanos())
    }
}

impl Algorithm for TokenBucket {
    /// Puts back the admission's tokens that have not refilled by `now` anyway: the
    /// part of its `n·T` of debt after `now` (as [`Gcra`](crate::algorithm::gcra::Gcra)'s refund).
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

    #[inline]
    fn decide(&self, full_at: u64, now: u64, cost: u64) -> Result<Transition, CheckError> {
        let q = &self.quota;
        check_range(now, cost, q.burst())?;
        let t = q.interval_nanos();
        let tokens = self.banked(full_at, now); // lazy refill, capped at B
        let price = cost * t;
        // In debt (a settlement charged past the burst, or time went backwards) the
        // bucket holds nothing and owes more: even no units wait (as GCRA's), so that
        // a check of 0 units never writes the debt away.
        if tokens < price || full_at.saturating_sub(now) > q.capacity_nanos() {
            // Wait for the missing tokens; if time went backwards the deficit can be
            // deeper than the bucket, so wait for that too.
            let deficit = full_at.saturating_sub(now);
            let wait = deficit.saturating_add(price) - q.capacity_nanos();
            let d = Decision::new(false, q.burst(), tokens, t, wait, deficit);
            return Ok(Transition::keep(d));
        }
        let left = tokens - price;
        let refill = q.capacity_nanos() - left;
        Ok(Transition::write(
            Decision::new(true, q.burst(), left, t, 0, refill),
            now + refill,
        ))
    }
}

impl<C: Clock> RateLimiter<TokenBucket, C> {
    /// Tokens in the bucket now (fractions included).
    ///
    /// ```
    /// use portero::{ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// // r = 0.5 per second: one token every 2 s.
    /// let quota = portero::Quota::new(1, std::time::Duration::from_secs(2))?.with_burst(3)?;
    /// let bucket = RateLimiter::token_bucket(quota).with_clock(&clock);
    /// bucket.set_tokens(0)?;
    /// clock.advance(1_000_000_000);
    /// assert_eq!(bucket.tokens(), 0.5);
    /// clock.advance(1_000_000_000);
    /// assert_eq!(bucket.tokens(), 1.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tokens(&self) -> f64 {
        self.tokens_at(self.clock().now())
    }

    /// Tokens in the bucket at `now`.
    pub fn tokens_at(&self, now: u64) -> f64 {
        self.algorithm().tokens_in(self.state_word(), now)
    }

    /// Sets the fill to `tokens` now (the initial fill, or a manual top-up).
    pub fn set_tokens(&self, tokens: u64) -> Result<(), CheckError> {
        self.set_tokens_at(tokens, self.clock().now())
    }

    /// Sets the fill to `tokens` at `now`. More than the capacity is an error.
    pub fn set_tokens_at(&self, tokens: u64, now: u64) -> Result<(), CheckError> {
        let state = self.algorithm().state_with(tokens, now)?;
        self.store_state(state);
        Ok(())
    }
}

impl RateLimiter<TokenBucket, DefaultClock> {
    /// A [`TokenBucket`] for `quota` (capacity = burst), starting full.
    pub fn token_bucket(quota: Quota) -> Self {
        Self::new(TokenBucket::new(quota))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractional_tokens_count() {
        let q = Quota::new(1, core::time::Duration::from_secs(2)).unwrap();
        let b = TokenBucket::new(q);
        let s = b.state_with(0, 0).unwrap();
        assert!(!b.decide(s, 1_999_999_999, 1).unwrap().decision.is_allowed());
        assert_eq!(b.tokens_in(s, 1_000_000_000), 0.5);
        assert!(b.decide(s, 2_000_000_000, 1).unwrap().decision.is_allowed());
    }

    #[test]
    fn refill_is_capped_at_capacity() {
        let b = TokenBucket::new(Quota::per_second(10).unwrap().with_burst(5).unwrap());
        let s = b.state_with(0, 0).unwrap();
        assert_eq!(b.tokens_in(s, 3_600_000_000_000), 5.0);
        let mut s = s;
        let now = 3_600_000_000_000;
        for _ in 0..5 {
            let t = b.decide(s, now, 1).unwrap();
            assert!(t.decision.is_allowed());
            s = t.next.unwrap();
        }
        assert!(!b.decide(s, now, 1).unwrap().decision.is_allowed());
    }

    #[test]
    fn state_with_rejects_overfill() {
        let b = TokenBucket::new(Quota::per_second(10).unwrap());
        assert_eq!(
            b.state_with(11, 0),
            Err(CheckError::CostExceedsCapacity {
                cost: 11,
                capacity: 10
            })
        );
    }
}
