//! Redis's clock as this process sees it.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

/// Redis's clock as seen from this process: `redis_µs − local_µs`, re-estimated from
/// every answer (the middle of the round trip it came in, so its error is at most
/// half that round trip).
#[derive(Debug)]
pub(crate) struct RedisClock {
    base: Instant,
    offset_us: AtomicI64,
}

impl RedisClock {
    pub(crate) fn new() -> Self {
        Self {
            base: Instant::now(),
            offset_us: AtomicI64::new(0),
        }
    }

    pub(crate) fn local_us(&self) -> i64 {
        i64::try_from(self.base.elapsed().as_micros()).unwrap_or(i64::MAX)
    }

    /// Records Redis's `now` from an answer to a call sent at `sent` (local µs).
    pub(crate) fn observe(&self, sent: i64, redis_now: u64) {
        let middle = sent + (self.local_us() - sent) / 2;
        let offset = i64::try_from(redis_now).unwrap_or(i64::MAX) - middle;
        self.offset_us.store(offset, Ordering::Relaxed);
    }

    /// `local` µs from now, on Redis's clock.
    pub(crate) fn redis_time_in(&self, from: i64, after: Duration) -> u64 {
        let after = i64::try_from(after.as_micros()).unwrap_or(i64::MAX);
        let t = from
            .saturating_add(after)
            .saturating_add(self.offset_us.load(Ordering::Relaxed));
        u64::try_from(t).unwrap_or(0).max(1)
    }
}
