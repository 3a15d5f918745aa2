//! A circuit breaker for the calling side: after `F` failures in a row, stop calling a
//! dependency for a while, answer with a fallback, then let **one** probe through.
//!
//! ```text
//!   closed ──F failures in a row──▶ open ──`open_for` passes──▶ half-open (one probe)
//!     ▲                               ▲                              │
//!     └───────── probe succeeds ──────┼──────── probe fails ─────────┘
//! ```
//!
//! A dependency that is down costs nothing while the breaker is open (no threads wait
//! on timeouts), and when it comes back one probe finds out instead of a stampede.
//!
//! # State: one `u64`
//!
//! ```text
//!  63   62 61                 44 43                                    0
//! +-------+---------------------+---------------------------------------+
//! | mode  | failures in a row   | open until (ms on the clock's axis)   |
//! +-------+---------------------+---------------------------------------+
//! ```
//!
//! Mode 0 closed, 1 open, 2 half-open (the probe is out). The time is whole
//! milliseconds: every instant up to [`MAX_TIME_NANOS`](crate::MAX_TIME_NANOS) fits in
//! 44 bits. Every change is one compare-and-swap through the crate's CAS helper, so
//! concurrent callers see one serial history: exactly one caller wins the probe, and no
//! failure report is lost (both checked by loom models).

use core::fmt;
use core::time::Duration;

use crossbeam_utils::CachePadded;

use crate::word::{AtomicWord, Transition};
use crate::{Clock, DefaultClock, DENY_FOR_NANOS};

const UNTIL_BITS: u32 = 44;
const FAILURE_BITS: u32 = 18;
const UNTIL_MASK: u64 = (1 << UNTIL_BITS) - 1;
const FAILURE_MASK: u64 = (1 << FAILURE_BITS) - 1;
const NANOS_PER_MS: u64 = 1_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Closed,
    Open,
    HalfOpen,
}

#[derive(Debug, Clone, Copy)]
struct Word {
    mode: Mode,
    failures: u64,
    until_ms: u64,
}

impl Word {
    fn decode(w: u64) -> Self {
        let mode = match w >> 62 {
            0 => Mode::Closed,
            1 => Mode::Open,
            _ => Mode::HalfOpen,
        };
        Self {
            mode,
            failures: (w >> UNTIL_BITS) & FAILURE_MASK,
            until_ms: w & UNTIL_MASK,
        }
    }

    fn encode(self) -> u64 {
        let mode = match self.mode {
            Mode::Closed => 0,
            Mode::Open => 1,
            Mode::HalfOpen => 2,
        };
        (mode << 62) | (self.failures.min(FAILURE_MASK) << UNTIL_BITS) | self.until_ms
    }

    const CLOSED: Self = Self {
        mode: Mode::Closed,
        failures: 0,
        until_ms: 0,
    };
}

/// Why a [`CircuitBreaker`] could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BreakerError {
    /// Zero failures would open it before the first call.
    ZeroFailures,
    /// More failures in a row than the state word counts (2^18 − 1).
    TooManyFailures,
    /// An open period of zero, or beyond the supported time range.
    BadOpenPeriod,
}

impl fmt::Display for BreakerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ZeroFailures => "a breaker opens after at least one failure",
            Self::TooManyFailures => "a breaker counts at most 262,143 failures in a row",
            Self::BadOpenPeriod => "the open period must be at least 1 ms and within range",
        })
    }
}

impl core::error::Error for BreakerError {}

/// The breaker refused a call: the dependency is presumed down. Answer with a fallback;
/// the breaker lets a probe through after `retry_after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerOpen {
    /// How long until a probe may go (a probe already out: one second, to ask again).
    pub retry_after: Duration,
}

/// A circuit breaker; see the [module docs](self).
///
/// ```
/// use std::time::Duration;
/// use portero::{CircuitBreaker, ManualClock};
///
/// let clock = ManualClock::new();
/// let breaker = CircuitBreaker::new(5, Duration::from_secs(30))?.with_clock(&clock);
/// for _ in 0..5 {
///     breaker.try_call().unwrap().failure();
/// }
/// assert!(breaker.try_call().is_err()); // open: answer with a fallback
/// clock.advance(30_000_000_000);
/// let probe = breaker.try_call().unwrap(); // one probe
/// assert!(breaker.try_call().is_err()); // and only one
/// probe.success(); // closed again
/// assert!(breaker.try_call().is_ok());
/// # Ok::<(), portero::BreakerError>(())
/// ```
#[derive(Debug)]
pub struct CircuitBreaker<C = DefaultClock> {
    word: CachePadded<AtomicWord>,
    failures_to_open: u64,
    open_for_ms: u64,
    clock: C,
}

impl CircuitBreaker<DefaultClock> {
    /// Opens after `failures_to_open` failures in a row, for `open_for` (rounded up to
    /// whole milliseconds); the usual choice is 5 failures and 30 seconds.
    pub fn new(failures_to_open: u32, open_for: Duration) -> Result<Self, BreakerError> {
        if failures_to_open == 0 {
            return Err(BreakerError::ZeroFailures);
        }
        if u64::from(failures_to_open) > FAILURE_MASK {
            return Err(BreakerError::TooManyFailures);
        }
        let open_for_ms = u64::try_from(open_for.as_nanos().div_ceil(u128::from(NANOS_PER_MS)))
            .ok()
            .filter(|&ms| ms > 0 && ms <= crate::MAX_SPAN_NANOS / NANOS_PER_MS)
            .ok_or(BreakerError::BadOpenPeriod)?;
        Ok(Self {
            word: CachePadded::new(AtomicWord::new(Word::CLOSED.encode())),
            failures_to_open: u64::from(failures_to_open),
            open_for_ms,
            clock: DefaultClock::default(),
        })
    }
}

impl<C: Clock> CircuitBreaker<C> {
    /// The same breaker on another clock.
    pub fn with_clock<C2: Clock>(self, clock: C2) -> CircuitBreaker<C2> {
        CircuitBreaker {
            word: self.word,
            failures_to_open: self.failures_to_open,
            open_for_ms: self.open_for_ms,
            clock,
        }
    }

    /// Asks to call the dependency now.
    pub fn try_call(&self) -> Result<BreakerCall<'_, C>, BreakerOpen> {
        self.try_call_at(self.clock.now())
    }

    /// Asks to call the dependency at `now` (ns). Closed: go. Open: refused until its
    /// period ends; then the first caller becomes the one probe (half-open) and everyone
    /// else is refused until the probe reports.
    pub fn try_call_at(&self, now: u64) -> Result<BreakerCall<'_, C>, BreakerOpen> {
        let now_ms = now.min(crate::MAX_TIME_NANOS) / NANOS_PER_MS;
        let probe = self.word.apply(|w| {
            let word = Word::decode(w);
            Ok(match word.mode {
                Mode::Closed => Transition::keep(false),
                Mode::Open if now_ms >= word.until_ms => {
                    let half = Word {
                        mode: Mode::HalfOpen,
                        until_ms: 0,
                        ..word
                    };
                    Transition::write(true, half.encode())
                }
                Mode::Open => {
                    let wait = (word.until_ms - now_ms).saturating_mul(NANOS_PER_MS);
                    return Err(BreakerOpen {
                        retry_after: Duration::from_nanos(wait),
                    });
                }
                Mode::HalfOpen => {
                    return Err(BreakerOpen {
                        retry_after: Duration::from_nanos(DENY_FOR_NANOS),
                    })
                }
            })
        })?;
        Ok(BreakerCall {
            breaker: self,
            probe,
            reported: false,
        })
    }

    /// Whether a call at `now` (ns) would go through: closed, or open with its period
    /// over (the call would be the probe).
    pub fn allows_call_at(&self, now: u64) -> bool {
        let word = Word::decode(self.word.load());
        word.mode == Mode::Closed
            || (word.mode == Mode::Open && now / NANOS_PER_MS >= word.until_ms)
    }

    fn report(&self, probe: bool, ok: bool, now: u64) {
        let now_ms = now.min(crate::MAX_TIME_NANOS) / NANOS_PER_MS;
        let open = Word {
            mode: Mode::Open,
            failures: 0,
            until_ms: now_ms.saturating_add(self.open_for_ms).min(UNTIL_MASK),
        };
        self.word.update(|w| {
            let word = Word::decode(w);
            let next = match (word.mode, ok) {
                (Mode::Closed, true) if word.failures == 0 => return None,
                (Mode::Closed, true) => Word::CLOSED,
                (Mode::Closed, false) if word.failures + 1 >= self.failures_to_open => open,
                (Mode::Closed, false) => Word {
                    failures: word.failures + 1,
                    ..word
                },
                // Only the probe's answer moves a half-open breaker.
                (Mode::HalfOpen, true) if probe => Word::CLOSED,
                (Mode::HalfOpen, false) if probe => open,
                // Calls that started before the breaker opened change nothing now.
                _ => return None,
            };
            Some(next.encode())
        });
    }
}

/// Permission to call the dependency once. Report how it went; dropping it unreported
/// (a panic, a cancelled request) counts as a failure.
#[derive(Debug)]
#[must_use = "report the call's outcome with success() or failure()"]
pub struct BreakerCall<'a, C: Clock> {
    breaker: &'a CircuitBreaker<C>,
    probe: bool,
    reported: bool,
}

impl<C: Clock> BreakerCall<'_, C> {
    /// Whether this call is the half-open probe.
    pub fn is_probe(&self) -> bool {
        self.probe
    }

    /// The call succeeded (now).
    pub fn success(self) {
        let now = self.breaker.clock.now();
        self.success_at(now);
    }

    /// The call failed (now): an error, a timeout, a 5xx — whatever the caller counts.
    pub fn failure(self) {
        let now = self.breaker.clock.now();
        self.failure_at(now);
    }

    /// The call succeeded at `now` (ns).
    pub fn success_at(mut self, now: u64) {
        self.reported = true;
        self.breaker.report(self.probe, true, now);
    }

    /// The call failed at `now` (ns).
    pub fn failure_at(mut self, now: u64) {
        self.reported = true;
        self.breaker.report(self.probe, false, now);
    }
}

impl<C: Clock> Drop for BreakerCall<'_, C> {
    fn drop(&mut self) {
        if !self.reported {
            self.breaker
                .report(self.probe, false, self.breaker.clock.now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ManualClock;

    const S: u64 = 1_000_000_000;

    #[test]
    fn opens_after_five_failures_probes_once_and_recovers() {
        let b = CircuitBreaker::new(5, Duration::from_secs(30))
            .unwrap()
            .with_clock(ManualClock::new());
        for _ in 0..4 {
            b.try_call_at(0).unwrap().failure_at(0);
        }
        b.try_call_at(0).unwrap().success_at(0); // a success resets the run
        for _ in 0..5 {
            b.try_call_at(S).unwrap().failure_at(S);
        }
        let open = b.try_call_at(2 * S).unwrap_err();
        assert_eq!(open.retry_after, Duration::from_secs(29));
        let probe = b.try_call_at(31 * S).unwrap();
        assert!(probe.is_probe());
        assert!(b.try_call_at(31 * S).is_err(), "one probe only");
        probe.failure_at(32 * S); // still down: open for another 30 s
        assert!(b.try_call_at(61 * S).is_err());
        let probe = b.try_call_at(62 * S).unwrap();
        probe.success_at(62 * S);
        assert!(b.try_call_at(62 * S).is_ok() && b.allows_call_at(62 * S));
    }

    #[test]
    fn an_unreported_call_counts_as_a_failure_and_bad_settings_are_errors() {
        let b = CircuitBreaker::new(1, Duration::from_secs(1))
            .unwrap()
            .with_clock(ManualClock::new());
        drop(b.try_call_at(0).unwrap());
        assert!(b.try_call_at(0).is_err());
        assert_eq!(
            CircuitBreaker::new(0, Duration::from_secs(1)).unwrap_err(),
            BreakerError::ZeroFailures
        );
        assert_eq!(
            CircuitBreaker::new(5, Duration::ZERO).unwrap_err(),
            BreakerError::BadOpenPeriod
        );
        assert_eq!(
            CircuitBreaker::new(5, Duration::MAX).unwrap_err(),
            BreakerError::BadOpenPeriod
        );
        assert_eq!(
            CircuitBreaker::new(1 << 20, Duration::from_secs(1)).unwrap_err(),
            BreakerError::TooManyFailures
        );
    }
}
