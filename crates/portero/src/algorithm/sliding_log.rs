//! The sliding log: exact, at the price of memory.
//!
//! Every admitted request's timestamp (and cost) is kept. A request at `t` sees the
//! window `(t − W, t]`: an entry exactly `W` old has expired. It is admitted when the
//! units still in the window plus its cost are at most `L`. Only admitted requests are
//! recorded, so **no span of `W` ever holds more than `L` admitted units** (tested).
//!
//! # Cost and concurrency
//!
//! Memory is up to `L` entries of 16 bytes per limiter (a limit of 10,000 per hour is
//! up to 160 KB), allocated once up front to at most `min(L, 4096)` entries. State is a
//! deque behind a `std::sync::Mutex`: one log cannot be updated by a single CAS, and an
//! uncontended mutex costs about one CAS (see `BENCHMARKS.md`). Expiry is amortised O(1)
//! per request; retry-after walks the log, O(L) only on rejections.
//!
//! Time that goes backwards is read as the latest time already seen, so nothing expires
//! early and the log stays sorted.

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::clock::{Clock, DefaultClock};
use crate::decision::check_range;
use crate::decision::{CheckError, Decision};
use crate::quota::Quota;

#[derive(Debug, Default)]
struct Log {
    entries: VecDeque<(u64, u64)>,
    units: u64,
    /// The latest time seen: what has expired by then stays expired.
    seen: u64,
}

/// An exact sliding-window limiter: at most `quota.limit()` units in any
/// `quota.period()` (the burst is unused).
///
/// ```
/// use portero::{ManualClock, Quota, SlidingLog};
/// let clock = ManualClock::new();
/// let log = SlidingLog::with_clock(Quota::per_second(2)?, &clock);
/// assert!(log.check().is_allowed());
/// clock.advance(400_000_000);
/// assert!(log.check().is_allowed());
/// let no = log.check();
/// assert!(!no.is_allowed());
/// assert_eq!(no.retry_after().as_millis(), 600); // the first entry expires at 1 s
/// # Ok::<(), portero::QuotaError>(())
/// ```
#[derive(Debug)]
pub struct SlidingLog<C = DefaultClock> {
    limit: u64,
    window: u64,
    log: Mutex<Log>,
    clock: C,
    #[cfg(feature = "tokio")]
    line: crate::wait_line::WaitLine,
}

impl SlidingLog<DefaultClock> {
    /// A log for `quota` on the default clock.
    pub fn new(quota: Quota) -> Self {
        Self::with_clock(quota, DefaultClock::default())
    }
}

impl<C: Clock> SlidingLog<C> {
    /// A log for `quota` on `clock`.
    pub fn with_clock(quota: Quota, clock: C) -> Self {
        let cap = quota.limit().min(4096) as usize;
        Self {
            limit: quota.limit(),
            window: quota.period_nanos(),
            log: Mutex::new(Log {
                entries: VecDeque::with_capacity(cap),
                units: 0,
                seen: 0,
            }),
            clock,
            #[cfg(feature = "tokio")]
            line: crate::wait_line::WaitLine::default(),
        }
    }

    /// The most units in any window (the quota's limit).
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The line of waiters ([`crate::wait`]).
    #[cfg(feature = "tokio")]
    pub(crate) fn line(&self) -> &crate::wait_line::WaitLine {
        &self.line
    }

    /// One unit now.
    pub fn check(&self) -> Decision {
        self.check_at(self.clock.now(), 1)
            .unwrap_or_else(|_| Decision::never(self.limit))
    }

    /// `cost` units now.
    pub fn check_n(&self, cost: u64) -> Result<Decision, CheckError> {
        self.check_at(self.clock.now(), cost)
    }

    /// `cost` units at `now` (ns); admitted units are recorded.
    pub fn check_at(&self, now: u64, cost: u64) -> Result<Decision, CheckError> {
        self.decide(now, cost, true)
    }

    /// What `check_at` would answer, recording nothing.
    pub fn peek_at(&self, now: u64, cost: u64) -> Result<Decision, CheckError> {
        self.decide(now, cost, false)
    }

    /// Forgets every entry.
    pub fn reset(&self) {
        let mut log = self.lock();
        log.entries.clear();
        log.units = 0;
        log.seen = 0;
    }

    /// Entries held (admitted requests not yet known to be expired).
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether the log holds no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Log> {
        // A panic elsewhere cannot leave the log inconsistent (updates are
        // single pushes/pops), so a poisoned lock is still usable.
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn decide(&self, now: u64, cost: u64, record: bool) -> Result<Decision, CheckError> {
        check_range(now, cost, self.limit)?;
        let mut log = self.lock();
        let now = now.max(log.seen);
        log.seen = now;
        // Entries at or before now − W have expired.
        while let Some(&(t, units)) = log.entries.front() {
            if t + self.window > now {
                break;
            }
            log.entries.pop_front();
            log.units -= units;
        }
        let reset = |log: &Log| {
            log.entries
                .back()
                .map_or(0, |&(t, _)| t + self.window - now)
        };
        let left = self.limit - log.units;
        if cost <= left {
            // A peek answers what the check would: as if the entry were recorded.
            let reset = if cost > 0 { self.window } else { reset(&log) };
            if record && cost > 0 {
                log.entries.push_back((now, cost));
                log.units += cost;
            }
            return Ok(Decision::admitted(self.limit, left - cost, reset));
        }
        // Walk from the oldest entry until enough units would have expired.
        let mut freed = 0;
        let mut retry = 0;
        for &(t, units) in &log.entries {
            freed += units;
            if left + freed >= cost {
                retry = t + self.window - now;
                break;
            }
        }
        Ok(Decision::rejected(self.limit, left, retry, reset(&log)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    /// `limit` per `window` ns on a manual clock.
    fn log(limit: u64, window: u64) -> SlidingLog<ManualClock> {
        SlidingLog::with_clock(
            Quota::from_nanos(limit, window).unwrap(),
            ManualClock::new(),
        )
    }

    /// One unit at each time; each verdict as expected.
    fn verdicts(log: &SlidingLog<ManualClock>, script: &[(u64, bool)]) {
        for &(t, want) in script {
            assert_eq!(log.check_at(t, 1).unwrap().is_allowed(), want, "at {t}");
        }
    }

    #[test]
    fn entry_exactly_w_old_has_expired() {
        let log = log(1, 100);
        verdicts(&log, &[(0, true), (99, false), (100, true)]);
        assert_eq!(log.len(), 1);
    }

    #[test]
    fn weighted_retry_waits_for_enough_expiries() {
        let log = log(4, 100);
        for t in [0, 10, 20, 30] {
            assert!(log.check_at(t, 1).unwrap().is_allowed());
        }
        let d = log.check_at(50, 3).unwrap();
        assert!(!d.is_allowed());
        assert_eq!(d.retry_after_nanos(), 70); // the third entry (t=20) expires at 120
        assert!(!log.peek_at(119, 3).unwrap().is_allowed());
        assert!(log.peek_at(120, 3).unwrap().is_allowed());
        // A peek answers what the check would, and records nothing.
        let (peeked, checked) = (log.peek_at(120, 3).unwrap(), log.check_at(120, 3).unwrap());
        assert_eq!(peeked, checked);
        // 120 expired three entries; an earlier time cannot bring them back into play.
        assert!(!log.peek_at(110, 4).unwrap().is_allowed());
    }

    #[test]
    fn backwards_time_expires_nothing_early() {
        verdicts(&log(1, 100), &[(1_000, true), (0, false), (1_100, true)]);
    }
}
