//! Limiters on tokio's clock (paused in tests): the limiter and the waits it asks for
//! then read the same instants.

use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use portero::{Algorithm, Clock, KeyedLimiter};
use tokio::time::Instant;

/// Nanoseconds since it was made, on tokio's clock (paused in tests).
#[derive(Debug, Clone, Copy)]
pub struct TokioClock(Instant);

impl TokioClock {
    pub fn new() -> Self {
        Self(Instant::now())
    }
}

impl Clock for TokioClock {
    fn now(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// A keyed limiter of `algorithm` for up to `max_keys` keys, on tokio's clock.
pub fn keyed_on_tokio_clock<K: Hash + ?Sized, A: Algorithm + Copy>(
    algorithm: A,
    max_keys: usize,
) -> Arc<KeyedLimiter<K, A, TokioClock>> {
    Arc::new(KeyedLimiter::with_clock(
        algorithm,
        max_keys,
        TokioClock::new(),
    ))
}

/// A wait with `jitter_ms` of jitter, whose turn came `turn_ms` after it started, took
/// from its turn to its turn plus the jitter: never early, late by at most the jitter.
pub fn assert_jittered(took: Duration, turn_ms: u64, jitter_ms: u64) {
    let turn = Duration::from_millis(turn_ms);
    let latest = turn + Duration::from_millis(jitter_ms);
    assert!((turn..=latest).contains(&took), "{took:?}");
}
