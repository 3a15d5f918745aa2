//! Textbook models, written independently of portero's one-word encodings.
//!
//! Each keeps the state the textbook describes (tokens and last update, or level and last
//! update) in `u128` arithmetic, scaled so that nothing is rounded: one token is `T`
//! "token-nanoseconds", and one nanosecond of elapsed time refills one of them.

/// The textbook token bucket: `tokens = min(B, tokens + elapsed·r)`, pay if `tokens ≥ cost`.
#[derive(Debug, Clone)]
pub struct RefTokenBucket {
    /// Emission interval in ns (one token per `interval`).
    pub interval: u128,
    /// Capacity in tokens.
    pub burst: u128,
    /// Tokens held, scaled by `interval`.
    pub scaled_tokens: u128,
    /// Time of the last update (ns); `None` before the first request.
    pub last: Option<u128>,
}

impl RefTokenBucket {
    /// A full bucket.
    pub fn full(interval: u64, burst: u64) -> Self {
        Self {
            interval: interval as u128,
            burst: burst as u128,
            scaled_tokens: burst as u128 * interval as u128,
            last: None,
        }
    }

    fn refill(&mut self, now: u128) {
        if let Some(last) = self.last {
            // Time that goes backwards refills nothing.
            let elapsed = now.saturating_sub(last);
            self.scaled_tokens = (self.scaled_tokens + elapsed).min(self.burst * self.interval);
        }
        self.last = Some(self.last.map_or(now, |l| l.max(now)));
    }

    /// Tries to pay `cost` tokens at `now`; returns whether it was admitted.
    pub fn try_acquire(&mut self, now: u64, cost: u64) -> bool {
        self.refill(now as u128);
        let price = cost as u128 * self.interval;
        if self.scaled_tokens >= price {
            self.scaled_tokens -= price;
            true
        } else {
            false
        }
    }

    /// Whole tokens held after the last update.
    pub fn whole_tokens(&self) -> u64 {
        (self.scaled_tokens / self.interval) as u64
    }
}

/// The textbook leaky bucket as a meter: the level drains at `r`; admit when
/// `level + cost ≤ capacity`, then `level += cost`. Nothing waits.
#[derive(Debug, Clone)]
pub struct RefLeakyMeter {
    /// Emission interval in ns (one unit drains per `interval`).
    pub interval: u128,
    /// Capacity in units.
    pub capacity: u128,
    /// Level, scaled by `interval`.
    pub scaled_level: u128,
    /// Time of the last update (ns).
    pub last: Option<u128>,
}

impl RefLeakyMeter {
    /// An empty meter.
    pub fn empty(interval: u64, capacity: u64) -> Self {
        Self {
            interval: interval as u128,
            capacity: capacity as u128,
            scaled_level: 0,
            last: None,
        }
    }

    /// Tries to add `cost` units at `now`; returns whether it was admitted.
    pub fn try_acquire(&mut self, now: u64, cost: u64) -> bool {
        let now = now as u128;
        if let Some(last) = self.last {
            self.scaled_level = self.scaled_level.saturating_sub(now.saturating_sub(last));
        }
        self.last = Some(self.last.map_or(now, |l| l.max(now)));
        let add = cost as u128 * self.interval;
        if self.scaled_level + add <= self.capacity * self.interval {
            self.scaled_level += add;
            true
        } else {
            false
        }
    }
}
