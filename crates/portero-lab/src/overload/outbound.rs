//! The outbound experiment: 50 tasks share a provider that allows 100 calls per
//! second (an SMS gateway billing per message), each with 20 messages to send at
//! once. Waiting their turn through one shared limiter (reservations, first come,
//! first served) makes no call over the quota; retrying on the provider's 429 (after
//! its `Retry-After`, in whole seconds as HTTP sends it) makes calls that are refused
//! and, with the seconds rounded up, leaves the quota idle between retries.

use std::time::Duration;

use portero::{ManualClock, Quota, RateLimiter};

use super::{Events, SEC};

/// Tasks sharing the provider.
pub const TASKS: u64 = 50;
/// Messages each task sends.
pub const MESSAGES: u64 = 20;
/// The provider's quota, per second (burst 1: it counts strictly).
pub const PER_SECOND: u64 = 100;

/// How the tasks meet the quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// A shared limiter in front of the provider: each call books its turn.
    Wait,
    /// Call at once; on a 429, retry after the provider's `Retry-After` (whole s).
    RetryOn429,
    /// The same, plus full jitter: a uniform extra of up to another `Retry-After`.
    RetryOn429Jittered,
}

impl Strategy {
    /// The row label.
    pub fn name(self) -> &'static str {
        match self {
            Self::Wait => "wait for a turn",
            Self::RetryOn429 => "retry on 429",
            Self::RetryOn429Jittered => "retry on 429 + jitter",
        }
    }
}

/// What one strategy did.
#[derive(Debug, Clone)]
pub struct Run {
    /// The strategy.
    pub strategy: Strategy,
    /// Messages delivered per second, from the first call to the last delivery.
    pub delivered_per_second: f64,
    /// Calls the provider refused (over its quota).
    pub over_quota: u64,
    /// Each message's time from its task's start to its delivery, sorted (ns).
    pub waits: Vec<u64>,
}

impl Run {
    /// The wait at quantile `q` (0–1), in seconds.
    pub fn wait_at(&self, q: f64) -> f64 {
        let i = ((self.waits.len() - 1) as f64 * q).round() as usize;
        self.waits[i] as f64 / SEC as f64
    }
}

fn quota() -> Quota {
    Quota::per_second(PER_SECOND)
        .and_then(|q| q.with_burst(1))
        .expect("a valid quota")
}

/// The three strategies, on simulated time (`seed` draws the jitter).
pub fn run(seed: u64) -> [Run; 3] {
    [
        Strategy::Wait,
        Strategy::RetryOn429,
        Strategy::RetryOn429Jittered,
    ]
    .map(|s| run_one(s, seed))
}

fn run_one(strategy: Strategy, seed: u64) -> Run {
    let mut rng = super::rng(seed);
    let provider = RateLimiter::gcra(quota()).with_clock(ManualClock::new());
    let shared = RateLimiter::gcra(quota()).with_clock(ManualClock::new());
    // (task, message): every message is tried at time 0 first.
    let mut events: Events<(u64, u64)> = Events::default();
    for task in 0..TASKS {
        for m in 0..MESSAGES {
            let at = match strategy {
                // Booked in order at the start: each call made at its turn.
                Strategy::Wait => {
                    let r = shared
                        .reserve_at(0, 1, Duration::from_secs(3_600))
                        .expect("room within the hour");
                    let at = r.ready_at();
                    r.commit();
                    at
                }
                Strategy::RetryOn429 | Strategy::RetryOn429Jittered => 0,
            };
            events.push(at, (task, m));
        }
    }
    let (mut over_quota, mut waits, mut last) = (0, Vec::new(), 0);
    while let Some((now, (task, m))) = events.pop_until(u64::MAX) {
        let d = provider.check_at(now, 1).expect("in range");
        if d.is_allowed() {
            waits.push(now);
            last = last.max(now);
        } else {
            over_quota += 1;
            let after = d.retry_after_nanos().div_ceil(SEC).max(1) * SEC;
            let extra = match strategy {
                Strategy::RetryOn429Jittered => rand::Rng::random_range(&mut rng, 0..=after),
                _ => 0,
            };
            events.push(now + after + extra, (task, m));
        }
    }
    waits.sort_unstable();
    let span = (last as f64 / SEC as f64).max(1e-9);
    Run {
        strategy,
        delivered_per_second: waits.len() as f64 / span,
        over_quota,
        waits,
    }
}
