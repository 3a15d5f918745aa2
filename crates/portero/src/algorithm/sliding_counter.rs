//! The sliding window counter: two fixed-window counts, the previous one weighted.
//!
//! ```text
//! estimate = prev · (1 − elapsed / W) + cur       (before counting the new request)
//! admit a request of cost c when  estimate + c − 1 < L     (c = 1: estimate < L)
//! ```
//!
//! computed exactly in integers: `prev·(W − elapsed) + cur·W < (L − c + 1)·W`, in
//! `u128`, so there is no float drift. Windows are aligned: `[k·W, (k+1)·W)`. The
//! estimate assumes last window's requests were spread evenly; when they bunched at its
//! end it undercounts (and may admit a little over `L` in a sliding span, as the boundary
//! 101-for-100 shows), when they bunched at its start it overcounts. `cur` never exceeds
//! `L`, so no span of `W` ever holds more than `2L`.
//!
//! # State: one `u64`
//!
//! ```text
//!  63                 2c 2c-1          c c-1            0
//! +--------------------+---------------+---------------+
//! | window index       | prev (c bits) | cur (c bits)  |
//! +--------------------+---------------+---------------+
//! ```
//!
//! The index is the whole `⌊now / W⌋` (see `window.rs`): it gets the
//! bits every index up to [`MAX_TIME_NANOS`](crate::quota::MAX_TIME_NANOS) needs, and each count
//! half of the rest, `c = ⌊(64 − bits(MAX_TIME / W)) / 2⌋` (15 bits at `W` = 1 s, 18 at
//! one minute, 21 at one hour). So the layout depends on `W` alone and no idle gap can
//! wrap the index. The index difference decides: 0 is the same window, 1 shifts `cur`
//! into `prev`, ≥ 2 clears both, negative (time went backwards) is treated as the
//! stored window with no time elapsed, which can only count more. Limits: `L < 2^c`,
//! `W ≤ 2^62` ns; a larger `L` is [`QuotaError::LimitTooLarge`].

use crate::admission::Admission;
use crate::algorithm::Algorithm;
use crate::decision::check_range;
use crate::decision::{CheckError, Decision};
use crate::quota::{Quota, QuotaError};
use crate::window::{index_bits, index_delta, mask};
use crate::word::Transition;

/// The sliding window counter over a [`Quota`]'s limit and period (burst unused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingWindowCounter {
    limit: u64,
    window: u64,
    /// Bits of each count (`c` in the module docs).
    count_bits: u32,
}

impl SlidingWindowCounter {
    /// `quota.limit()` per sliding `quota.period()`.
    pub const fn new(quota: Quota) -> Result<Self, QuotaError> {
        let window = quota.period_nanos();
        let count_bits = (64 - index_bits(window)) / 2;
        if quota.limit() > mask(count_bits) {
            return Err(QuotaError::LimitTooLarge {
                limit: quota.limit(),
                max: mask(count_bits),
            });
        }
        Ok(Self {
            limit: quota.limit(),
            window,
            count_bits,
        })
    }

    /// `(index, prev, cur)` of a state word.
    #[inline]
    fn unpack(&self, state: u64) -> (u64, u64, u64) {
        let c = self.count_bits;
        (state >> (2 * c), (state >> c) & mask(c), state & mask(c))
    }

    #[inline]
    fn pack(&self, index: u64, prev: u64, cur: u64) -> u64 {
        let c = self.count_bits;
        (index << (2 * c)) | (prev << c) | cur
    }

    /// Weighted count ×W: `prev·(W − elapsed) + cur·W`.
    fn weighted(&self, prev: u64, cur: u64, elapsed: u64) -> u128 {
        prev as u128 * (self.window - elapsed) as u128 + cur as u128 * self.window as u128
    }

    /// The largest cost admitted at a weighted count ×W of `weighted` (what
    /// `remaining` says): `c` fits iff `weighted < (L − c + 1)·W`, so the largest is
    /// `L − ⌊weighted / W⌋` (none below 0).
    fn largest_fit(&self, weighted: u128) -> u64 {
        let whole = weighted / self.window as u128;
        self.limit
            .saturating_sub(u64::try_from(whole).unwrap_or(u64::MAX))
    }

    /// The windows as `state` holds them at `now`: `(prev, cur, elapsed in this
    /// window, time from now to this window's end, its tag)`.
    #[inline]
    fn current(&self, state: u64, now: u64) -> (u64, u64, u64, u64, u64) {
        let w = self.window;
        let index = now / w;
        let (stored, prev0, cur0) = self.unpack(state);
        let d = if prev0 == 0 && cur0 == 0 {
            2 // nothing stored: any window is a fresh one
        } else {
            index_delta(index, stored)
        };
        match d {
            0 => (prev0, cur0, now - index * w, (index + 1) * w - now, index),
            1 => (cur0, 0, now - index * w, (index + 1) * w - now, index),
            d if d >= 2 => (0, 0, now - index * w, (index + 1) * w - now, index),
            // Time went backwards: the stored window, as at its very start.
            d => {
                let ahead = (-d) as u64 * w - (now - index * w);
                (prev0, cur0, 0, ahead + w, stored)
            }
        }
    }

    /// Smallest elapsed `e ≥ 0` with `prev·(W − e) < k·W`, if one exists below `W`.
    fn first_fit(&self, prev: u64, k: u64) -> u64 {
        let w = self.window as u128;
        let (have, limit) = (prev as u128 * w, k as u128 * w);
        if have < limit {
            return 0;
        }
        let over = have - limit;
        // prev·(W − e) < k·W  ⇔  prev·e > prev·W − k·W = over
        (over / prev as u128 + 1) as u64
    }
}

impl Algorithm for SlidingWindowCounter {
    /// Takes the admission's units off the window that counted them: `cur` while it
    /// is still the stored window, `prev` once it has just become the previous one,
    /// nothing after that (it no longer weighs in the estimate). As for an aligned
    /// [`FixedWindow`](crate::algorithm::fixed_window::FixedWindow), a request that moved the stored window on
    /// over counts gives nothing back once others came since (short by at most one
    /// request's units per window).
    fn refund(&self, state: u64, admission: &Admission, _now: u64) -> Option<u64> {
        let cost = admission.cost();
        let (Some(before), Some(after)) = (admission.before(), admission.after()) else {
            return Some(state);
        };
        let counted = self.unpack(after).0;
        let (was, was_prev, was_cur) = self.unpack(before);
        // A part of a request that stays (a settlement): the opener rule does not apply.
        if !admission.keeps_request() && was != counted && was_prev + was_cur > 0 {
            return Some(state);
        }
        let (stored, prev, cur) = self.unpack(state);
        // Nothing while the word may have been reset or replaced since (the ledger
        // says everything went back), or a count saturated (a charge past what the
        // count holds: it no longer tells what is counted).
        let most = mask(self.count_bits);
        if admission.moved_since().is_none() || prev >= most || cur >= most {
            return Some(state);
        }
        let (prev, cur) = match index_delta(stored, counted) {
            0 => (prev, cur.saturating_sub(cost)),
            1 => (prev.saturating_sub(cost), cur),
            _ => (prev, cur),
        };
        Some(self.pack(stored, prev, cur))
    }

    fn capacity(&self) -> u64 {
        self.limit
    }

    /// Counts the units in the window current at `now`, past the limit (up to what
    /// a count's bits hold): refused until enough of it has slid out.
    fn charge(&self, state: u64, now: u64, cost: u64) -> Option<u64> {
        let (prev, cur, _, _, t) = self.current(state, now);
        Some(self.pack(t, prev, cur.saturating_add(cost).min(mask(self.count_bits))))
    }

    #[inline]
    fn decide(&self, state: u64, now: u64, cost: u64) -> Result<Transition, CheckError> {
        check_range(now, cost, self.limit)?;
        let (w, l) = (self.window, self.limit);
        let (prev, cur, elapsed, to_end, t) = self.current(state, now);
        let weighted = self.weighted(prev, cur, elapsed);
        let remaining = self.largest_fit(weighted);
        let reset = if cur > 0 {
            to_end + w
        } else if prev > 0 {
            to_end
        } else {
            0
        };
        let k = l + 1 - cost; // admit iff weighted < k·W
        if cost == 0 || weighted < k as u128 * w as u128 {
            if cost == 0 {
                return Ok(Transition::keep(Decision::admitted(l, remaining, reset)));
            }
            let cur = cur + cost;
            let left = self.largest_fit(self.weighted(prev, cur, elapsed));
            let d = Decision::admitted(l, left, to_end + w);
            return Ok(Transition::write(d, self.pack(t, prev, cur)));
        }
        // When would it fit? Later in this window as prev's weight falls, or else in
        // the next one, where cur becomes prev.
        // `to_end − (W − elapsed)` is 0, or how far ahead the stored window starts.
        let until_elapsed = to_end - (w - elapsed);
        let this_window = (cur < k)
            .then(|| self.first_fit(prev, k - cur))
            .filter(|&e| e < w)
            .map(|e| until_elapsed + (e - elapsed));
        let retry = this_window.unwrap_or_else(|| to_end + self.first_fit(cur, k));
        let d = Decision::rejected(l, remaining, retry.max(1), reset);
        Ok(Transition::keep(d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn seed_example_estimate_ninety_admits() {
        // limit 100, W = 60 s, prev 80, cur 30, 15 s into the window: 80·0.75 + 30 = 90.
        let c = SlidingWindowCounter::new(Quota::per_minute(100).unwrap()).unwrap();
        let state = c.pack(1, 80, 30);
        let t = c.decide(state, 60 * S + 15 * S, 1).unwrap();
        assert!(t.decision.is_allowed());
        assert_eq!(t.decision.remaining(), 9);
        // 10 units: 90 + 10 − 1 = 99 < 100 passes; 11 does not.
        assert!(c.decide(state, 75 * S, 10).unwrap().decision.is_allowed());
        assert!(!c.decide(state, 75 * S, 11).unwrap().decision.is_allowed());
    }

    #[test]
    fn retry_after_is_exact() {
        let c = SlidingWindowCounter::new(Quota::from_nanos(10, 1_000).unwrap()).unwrap();
        let mut state = 0;
        for now in [0, 999, 1_000, 1_003, 1_500, 2_000, 2_999] {
            for _ in 0..12 {
                let t = c.decide(state, now, 1).unwrap();
                if let Some(n) = t.next {
                    state = n;
                    continue;
                }
                let r = t.decision.retry_after_nanos();
                assert!(
                    c.decide(state, now + r, 1).unwrap().decision.is_allowed(),
                    "at {now}+{r}"
                );
                assert!(
                    !c.decide(state, now + r - 1, 1)
                        .unwrap()
                        .decision
                        .is_allowed(),
                    "at {now}+{r}-1"
                );
            }
        }
    }
}
