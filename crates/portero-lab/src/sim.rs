//! One set of arrivals through the five algorithms.

use portero::{
    AlgorithmName, FixedWindow, LeakyQueue, ManualClock, Quota, QuotaError, RateLimiter,
    SlidingLog, SlidingWindowCounter, TokenBucket,
};

/// The five algorithms, in the order the guide's tables list them (the leaky bucket
/// as a queue: admitted means queued, and what counts is when it is released).
pub const ALGORITHMS: [AlgorithmName; 5] = [
    AlgorithmName::FixedWindow,
    AlgorithmName::SlidingLog,
    AlgorithmName::SlidingWindowCounter,
    AlgorithmName::TokenBucket,
    AlgorithmName::LeakyQueue,
];

/// What one algorithm did with the arrivals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Name, one of [`ALGORITHMS`] (as the core spells it).
    pub name: &'static str,
    /// Requests admitted (for the queue: queued rather than dropped).
    pub admitted: u64,
    /// The most admitted (queue: released) in any interval `[t, t + W)`.
    pub max_in_window: u64,
    /// Admission instants (queue: release instants), ns, sorted.
    pub passed: Vec<u64>,
    /// For each arrival, whether it was admitted.
    pub verdicts: Vec<bool>,
}

/// The largest number of `sorted` instants in any half-open interval of `window` ns.
pub fn max_in_window(sorted: &[u64], window: u64) -> u64 {
    let mut best = 0;
    let mut lo = 0;
    for hi in 0..sorted.len() {
        while sorted[hi] - sorted[lo] >= window {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best as u64
}

/// Runs `arrivals` (ns, sorted) through all five algorithms with `limit` per
/// `window_ns`: the windows count `limit` per window, the buckets hold `limit` and
/// refill (or drain) `limit` per window; the token bucket starts full, the queue empty.
/// `progress` is called with the number of arrivals done, now and then.
pub fn simulate(
    arrivals: &[u64],
    limit: u64,
    window_ns: u64,
    progress: &mut dyn FnMut(u64),
) -> Result<Vec<Outcome>, QuotaError> {
    let quota = Quota::from_nanos(limit, window_ns)?;
    let fixed = RateLimiter::with_algorithm_and_clock(FixedWindow::new(quota)?, ManualClock::new());
    let log = SlidingLog::with_clock(quota, ManualClock::new());
    let counter = RateLimiter::with_algorithm_and_clock(
        SlidingWindowCounter::new(quota)?,
        ManualClock::new(),
    );
    let bucket = RateLimiter::with_algorithm_and_clock(TokenBucket::new(quota), ManualClock::new());
    let queue = RateLimiter::with_algorithm_and_clock(LeakyQueue::new(quota), ManualClock::new());

    let mut verdicts: Vec<Vec<bool>> = (0..5).map(|_| Vec::with_capacity(arrivals.len())).collect();
    let mut passed = vec![Vec::new(); 5];
    for (i, &t) in arrivals.iter().enumerate() {
        // Every arrival time is ≤ MAX_TIME_NANOS (checked by the parser) and costs 1,
        // so these checks cannot fail.
        let decisions = [
            fixed.check_at(t, 1),
            log.check_at(t, 1),
            counter.check_at(t, 1),
            bucket.check_at(t, 1),
            queue.check_at(t, 1),
        ];
        for (k, d) in decisions.into_iter().enumerate() {
            let d = d.expect("arrivals are validated to be in range");
            verdicts[k].push(d.is_allowed());
            if d.is_allowed() {
                passed[k].push(t + d.delay_nanos());
            }
        }
        if i % 4096 == 4095 {
            progress(i as u64 + 1);
        }
    }
    progress(arrivals.len() as u64);
    Ok(ALGORITHMS
        .iter()
        .zip(verdicts.into_iter().zip(passed))
        .map(|(name, (verdicts, mut passed))| {
            passed.sort_unstable();
            Outcome {
                name: name.as_str(),
                admitted: verdicts.iter().filter(|v| **v).count() as u64,
                max_in_window: max_in_window(&passed, window_ns),
                passed,
                verdicts,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_in_window_is_half_open() {
        assert_eq!(max_in_window(&[0, 10, 20], 20), 2);
        assert_eq!(max_in_window(&[0, 10, 20], 21), 3);
        assert_eq!(max_in_window(&[], 5), 0);
        assert_eq!(max_in_window(&[7, 7, 7], 1), 3);
    }
}
