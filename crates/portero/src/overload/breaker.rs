//! A circuit breaker for the calling side: when calls to a dependency keep failing,
//! stop calling it for a while, answer with a fallback, then let **one** probe through.
//!
//! ```text
//!   closed ──trips──▶ open ──`open_for` passes──▶ half-open (one probe)
//!     ▲                ▲                              │
//!     └─ probe succeeds┼──────── probe fails ─────────┘
//! ```
//!
//! It trips on one of two rules ([`Trip`]): `F` failures in a row (the usual 5), or a
//! failure rate over a sliding window of the last `N` calls (at least `P` % of them
//! failed, once at least `M` calls were seen) — the rate rule also catches a
//! dependency that fails every other call, which never makes 5 in a row.
//!
//! A dependency that is down costs nothing while the breaker is open (no threads wait
//! on timeouts), and when it comes back one probe finds out instead of a stampede.
//!
//! # State: one `u64`
//!
//! ```text
//!  63 62 61        44 43                                                 0
//! +-----+-----------+----------------------------------------------------+
//! |mode |generation | closed:    failures in a row, or                   |
//! |     | (18 bits) |            (calls seen: 6 | outcomes: 38)          |
//! |     |           | open:      open until (ms on the clock's axis)     |
//! |     |           | half-open: the probe's deadline (ms)               |
//! +-----+-----------+----------------------------------------------------+
//! ```
//!
//! Mode 0 closed, 1 open, 2 half-open (the probe is out). In the rate rule the last
//! `N ≤ 38` outcomes are bits (1 = failure), newest lowest. The time is whole
//! milliseconds: every instant up to [`MAX_TIME_NANOS`](crate::quota::MAX_TIME_NANOS) fits in
//! 44 bits. Every change is one compare-and-swap through the crate's CAS helper, so
//! concurrent callers see one serial history: exactly one caller wins the probe, no
//! failure report is lost, and a stale report never counts (checked by loom models).

use core::fmt;
use core::time::Duration;

use crossbeam_utils::CachePadded;

use crate::clock::{Clock, DefaultClock};
use crate::decision::DENY_FOR_NANOS;
use crate::word::{AtomicWord, Transition};

const PAYLOAD_BITS: u32 = 44;
const PAYLOAD_MASK: u64 = (1 << PAYLOAD_BITS) - 1;
const GENERATION_MASK: u64 = (1 << 18) - 1;
const MAX_IN_A_ROW: u32 = (1 << 18) - 1;
/// The most calls the failure-rate window remembers (one bit each).
pub const MAX_RATE_WINDOW: u8 = 38;
const SEEN_SHIFT: u32 = 38;
const NANOS_PER_MS: u64 = 1_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    // The payload is the trip rule's record of recent calls.
    Closed(u64),
    Open { until_ms: u64 },
    HalfOpen { deadline_ms: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Word {
    generation: u64,
    mode: Mode,
}

impl Word {
    fn decode(w: u64) -> Self {
        let payload = w & PAYLOAD_MASK;
        let mode = match w >> 62 {
            0 => Mode::Closed(payload),
            1 => Mode::Open { until_ms: payload },
            _ => Mode::HalfOpen {
                deadline_ms: payload,
            },
        };
        Self {
            generation: (w >> PAYLOAD_BITS) & GENERATION_MASK,
            mode,
        }
    }

    fn encode(self) -> u64 {
        let (tag, payload) = match self.mode {
            Mode::Closed(record) => (0, record),
            Mode::Open { until_ms } => (1, until_ms),
            Mode::HalfOpen { deadline_ms } => (2, deadline_ms),
        };
        (tag << 62) | (self.generation << PAYLOAD_BITS) | (payload & PAYLOAD_MASK)
    }

    /// The next cycle, in `mode`.
    fn next(self, mode: Mode) -> Self {
        Self {
            generation: (self.generation + 1) & GENERATION_MASK,
            mode,
        }
    }
}

/// When a closed [`CircuitBreaker`] opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trip {
    /// After this many failures in a row (a success starts the count again).
    InARow(u32),
    /// When at least `percent` % of the last `window` calls failed, once at least
    /// `min_calls` of them were seen.
    FailureRate {
        /// Failed share that opens the breaker, 1–100.
        percent: u8,
        /// Calls remembered, 1–[`MAX_RATE_WINDOW`].
        window: u8,
        /// Calls needed before the rate counts (so one early failure is not 100 %).
        min_calls: u8,
    },
}

impl Trip {
    fn check(self) -> Result<Self, BreakerError> {
        match self {
            Self::InARow(0) => Err(BreakerError::ZeroFailures),
            Self::InARow(n) if n > MAX_IN_A_ROW => Err(BreakerError::TooManyFailures),
            Self::FailureRate {
                percent,
                window,
                min_calls,
            } if percent == 0
                || percent > 100
                || window == 0
                || window > MAX_RATE_WINDOW
                || min_calls == 0
                || min_calls > window =>
            {
                Err(BreakerError::BadFailureRate)
            }
            rule => Ok(rule),
        }
    }

    /// The record after one more outcome, and whether it trips the breaker.
    fn record(self, record: u64, failed: bool) -> (u64, bool) {
        match self {
            Self::InARow(n) => {
                let in_a_row = if failed { record + 1 } else { 0 };
                (in_a_row, in_a_row >= u64::from(n))
            }
            Self::FailureRate {
                percent,
                window,
                min_calls,
            } => {
                let window = u32::from(window);
                let mask = (1u64 << window) - 1;
                let seen = (record >> SEEN_SHIFT).min(u64::from(window) - 1) + 1;
                let outcomes = ((record << 1) | u64::from(failed)) & mask;
                let failures = u64::from(outcomes.count_ones());
                let trips =
                    seen >= u64::from(min_calls) && failures * 100 >= u64::from(percent) * seen;
                ((seen << SEEN_SHIFT) | outcomes, trips)
            }
        }
    }
}

/// Why a [`CircuitBreaker`] could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BreakerError {
    /// Zero failures would open it before the first call.
    ZeroFailures,
    /// More failures in a row than the state word counts (2^18 − 1).
    TooManyFailures,
    /// A failure rate outside 1–100 %, a window outside 1–38 calls, or a minimum of
    /// calls of zero or beyond the window.
    BadFailureRate,
    /// An open period of zero, or beyond the supported time range.
    BadOpenPeriod,
    /// A probe timeout of zero, or beyond the supported time range.
    BadProbeTimeout,
}

impl fmt::Display for BreakerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ZeroFailures => "a breaker opens after at least one failure",
            Self::TooManyFailures => "a breaker counts at most 262,143 failures in a row",
            Self::BadFailureRate => {
                "a failure rate needs 1-100 %, a window of 1-38 calls and 1-window minimum calls"
            }
            Self::BadOpenPeriod => "the open period must be at least 1 ms and within range",
            Self::BadProbeTimeout => "the probe timeout must be at least 1 ms and within range",
        })
    }
}

impl core::error::Error for BreakerError {}

/// The breaker refused a call: the dependency is presumed down. Answer with a fallback;
/// the breaker lets a probe through after `retry_after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerOpen {
    /// How long until a probe may go (a probe already out: at most one second, to ask
    /// again).
    pub retry_after: Duration,
}

/// A circuit breaker: closed until its [`Trip`] rule fires, then open for `open_for`
/// (calls refused with the time left), then half-open with exactly one probe whose
/// answer — or silence past the probe timeout — closes or reopens it. The whole state
/// is one atomic word changed by compare-and-swap.
///
/// # Bounds
///
/// - **A probe cannot hang the breaker.** A probe that has not reported within the
///   probe timeout ([`with_probe_timeout`](CircuitBreaker::with_probe_timeout), by
///   default the open period) counts as a failed probe at that instant: the breaker
///   is open for another period, then the next caller probes. So a dependency that
///   recovers is called again at most `probe timeout + open period` after a probe
///   went out, whatever the probe does.
/// - **Outcomes count only in their own cycle.** Every transition (trip, probe out,
///   probe answered or timed out) starts a new generation, and a call carries the
///   generation that admitted it: a call admitted before the breaker tripped, or a
///   probe that timed out, changes nothing when it finally reports. Generations are
///   18 bits; a call is miscounted only if it stays out for exactly a multiple of
///   2^18 transitions, which at one transition per open period takes
///   `2^17 × open period` (36 hours at a 1 s period).
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
    trip: Trip,
    open_for_ms: u64,
    probe_timeout_ms: u64,
    clock: C,
}

/// Whole milliseconds (rounded up) of a positive period within the time range.
fn period_ms(period: Duration) -> Option<u64> {
    u64::try_from(period.as_nanos().div_ceil(u128::from(NANOS_PER_MS)))
        .ok()
        .filter(|&ms| ms > 0 && ms <= crate::quota::MAX_SPAN_NANOS / NANOS_PER_MS)
}

impl CircuitBreaker<DefaultClock> {
    /// Opens after `failures_in_a_row` failures in a row, for `open_for` (rounded up to
    /// whole milliseconds); the usual choice is 5 failures and 30 seconds.
    pub fn new(failures_in_a_row: u32, open_for: Duration) -> Result<Self, BreakerError> {
        Self::tripping(Trip::InARow(failures_in_a_row), open_for)
    }

    /// Opens on `trip`'s rule, for `open_for` (rounded up to whole milliseconds).
    ///
    /// ```
    /// use std::time::Duration;
    /// use portero::{CircuitBreaker, ManualClock, Trip};
    ///
    /// // Half of the last 20 calls failed (after at least 10): open for 30 s.
    /// let rule = Trip::FailureRate { percent: 50, window: 20, min_calls: 10 };
    /// let breaker = CircuitBreaker::tripping(rule, Duration::from_secs(30))?
    ///     .with_clock(ManualClock::new());
    /// for i in 0..10 {
    ///     let call = breaker.try_call().unwrap();
    ///     if i % 2 == 0 { call.failure() } else { call.success() } // never 2 in a row
    /// }
    /// assert!(breaker.try_call().is_err());
    /// # Ok::<(), portero::BreakerError>(())
    /// ```
    pub fn tripping(trip: Trip, open_for: Duration) -> Result<Self, BreakerError> {
        let trip = trip.check()?;
        let open_for_ms = period_ms(open_for).ok_or(BreakerError::BadOpenPeriod)?;
        Ok(Self {
            word: CachePadded::new(AtomicWord::new(
                Word {
                    generation: 0,
                    mode: Mode::Closed(0),
                }
                .encode(),
            )),
            trip,
            open_for_ms,
            probe_timeout_ms: open_for_ms,
            clock: DefaultClock::default(),
        })
    }
}

impl<C: Clock> CircuitBreaker<C> {
    /// The same breaker on another clock.
    pub fn with_clock<C2: Clock>(self, clock: C2) -> CircuitBreaker<C2> {
        CircuitBreaker {
            word: self.word,
            trip: self.trip,
            open_for_ms: self.open_for_ms,
            probe_timeout_ms: self.probe_timeout_ms,
            clock,
        }
    }

    /// A probe that has not reported after `timeout` (rounded up to whole
    /// milliseconds; by default the open period) counts as a failed probe.
    ///
    /// ```
    /// use std::time::Duration;
    /// use portero::CircuitBreaker;
    ///
    /// let breaker = CircuitBreaker::new(5, Duration::from_secs(30))?
    ///     .with_probe_timeout(Duration::from_secs(2))?;
    /// # let _ = breaker;
    /// # Ok::<(), portero::BreakerError>(())
    /// ```
    pub fn with_probe_timeout(mut self, timeout: Duration) -> Result<Self, BreakerError> {
        self.probe_timeout_ms = period_ms(timeout).ok_or(BreakerError::BadProbeTimeout)?;
        Ok(self)
    }

    /// The breaker's clock (callers that time their calls read it once).
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Asks to call the dependency now.
    pub fn try_call(&self) -> Result<BreakerCall<'_, C>, BreakerOpen> {
        self.try_call_at(self.clock.now())
    }

    /// Asks to call the dependency at `now` (ns). Closed: go. Open: refused until its
    /// period ends; then the first caller becomes the one probe (half-open) and everyone
    /// else is refused until the probe reports or its timeout passes.
    pub fn try_call_at(&self, now: u64) -> Result<BreakerCall<'_, C>, BreakerOpen> {
        let (generation, probe) = self.enter(now)?;
        Ok(BreakerCall {
            breaker: Handle::Borrowed(self),
            generation,
            probe,
            reported: false,
        })
    }

    /// [`try_call`](Self::try_call) for a shared breaker: the call keeps the breaker
    /// alive and may move to another task (a request's future).
    #[cfg(feature = "alloc")]
    pub fn try_call_owned(
        self: &alloc::sync::Arc<Self>,
    ) -> Result<BreakerCall<'static, C>, BreakerOpen> {
        let (generation, probe) = self.enter(self.clock.now())?;
        Ok(BreakerCall {
            breaker: Handle::Shared(self.clone()),
            generation,
            probe,
            reported: false,
        })
    }

    /// What a call at `now_ms` gets from state `w`: admitted (its generation, whether
    /// it is the probe) or refused, and the state to publish.
    fn decide(&self, w: u64, now: u64) -> Transition<Result<(u64, bool), BreakerOpen>> {
        // Periods start at `now` rounded up, so none is cut short by the rounding.
        let (now_ms, from_ms) = (to_ms(now), to_ms_up(now));
        let word = Word::decode(w);
        let refuse = |wait_ms: u64| {
            Err(BreakerOpen {
                retry_after: Duration::from_nanos(wait_ms.saturating_mul(NANOS_PER_MS)),
            })
        };
        let probe_from = |open: Word| {
            let probe = open.next(Mode::HalfOpen {
                deadline_ms: from_ms.saturating_add(self.probe_timeout_ms),
            });
            Transition::write(Ok((probe.generation, true)), probe.encode())
        };
        match word.mode {
            Mode::Closed(_) => Transition::keep(Ok((word.generation, false))),
            Mode::Open { until_ms } if now_ms >= until_ms => probe_from(word),
            Mode::Open { until_ms } => Transition::keep(refuse(until_ms - now_ms)),
            Mode::HalfOpen { deadline_ms } if now_ms >= deadline_ms => {
                // The probe is presumed failed at its deadline.
                let until_ms = deadline_ms.saturating_add(self.open_for_ms);
                let open = word.next(Mode::Open { until_ms });
                if now_ms >= until_ms {
                    probe_from(open)
                } else {
                    Transition::write(refuse(until_ms - now_ms), open.encode())
                }
            }
            Mode::HalfOpen { deadline_ms } => {
                let wait_ms = (deadline_ms - now_ms).min(DENY_FOR_NANOS / NANOS_PER_MS);
                Transition::keep(refuse(wait_ms))
            }
        }
    }

    /// Lets a call in at `now` (ns), or refuses it.
    fn enter(&self, now: u64) -> Result<(u64, bool), BreakerOpen> {
        let Ok(admitted) = self
            .word
            .apply::<_, core::convert::Infallible>(|w| Ok(self.decide(w, now)));
        admitted
    }

    /// Why a call at `now` (ns) would be refused, without taking a slot or changing
    /// anything; `None` when it would go through (closed, or the next probe).
    pub fn refusal_at(&self, now: u64) -> Option<BreakerOpen> {
        self.decide(self.word.load(), now).decision.err()
    }

    /// Whether a call at `now` (ns) would go through: closed, or open with its period
    /// over (the call would be the probe).
    pub fn allows_call_at(&self, now: u64) -> bool {
        self.refusal_at(now).is_none()
    }

    fn report(&self, generation: u64, probe: bool, ok: bool, now: u64) {
        let (now_ms, from_ms) = (to_ms(now), to_ms_up(now));
        self.word.update(|w| {
            let word = Word::decode(w);
            if word.generation != generation {
                // Admitted in an earlier cycle: its outcome says nothing about this one.
                return None;
            }
            let open_from = |at_ms: u64| {
                word.next(Mode::Open {
                    until_ms: at_ms.saturating_add(self.open_for_ms).min(PAYLOAD_MASK),
                })
            };
            let next = match word.mode {
                Mode::Closed(record) if !probe => match self.trip.record(record, !ok) {
                    (_, true) => open_from(from_ms),
                    (next, false) if next == record => return None,
                    (next, false) => Word {
                        mode: Mode::Closed(next),
                        ..word
                    },
                },
                // A probe answering after its deadline had already failed then.
                Mode::HalfOpen { deadline_ms } if probe && ok && now_ms < deadline_ms => {
                    word.next(Mode::Closed(0))
                }
                Mode::HalfOpen { deadline_ms } if probe => open_from(from_ms.min(deadline_ms)),
                _ => return None,
            };
            Some(next.encode())
        });
    }
}

fn to_ms(now: u64) -> u64 {
    now.min(crate::quota::MAX_TIME_NANOS) / NANOS_PER_MS
}

fn to_ms_up(now: u64) -> u64 {
    now.min(crate::quota::MAX_TIME_NANOS).div_ceil(NANOS_PER_MS)
}

/// Permission to call the dependency once. Report how it went; dropping it unreported
/// (a panic, a cancelled request) counts as a failure.
#[derive(Debug)]
#[must_use = "report the call's outcome with success() or failure()"]
pub struct BreakerCall<'a, C: Clock> {
    breaker: Handle<'a, C>,
    generation: u64,
    probe: bool,
    reported: bool,
}

#[derive(Debug)]
enum Handle<'a, C> {
    Borrowed(&'a CircuitBreaker<C>),
    #[cfg(feature = "alloc")]
    Shared(alloc::sync::Arc<CircuitBreaker<C>>),
}

impl<C> core::ops::Deref for Handle<'_, C> {
    type Target = CircuitBreaker<C>;

    fn deref(&self) -> &CircuitBreaker<C> {
        match self {
            Self::Borrowed(b) => b,
            #[cfg(feature = "alloc")]
            Self::Shared(b) => b,
        }
    }
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
        self.breaker.report(self.generation, self.probe, true, now);
    }

    /// The call failed at `now` (ns).
    pub fn failure_at(mut self, now: u64) {
        self.reported = true;
        self.breaker.report(self.generation, self.probe, false, now);
    }

    /// The call ended without an outcome (its caller gave up before the dependency
    /// answered): counted neither way. A probe abandoned this way is a silent probe:
    /// the breaker stays half-open until the probe timeout, then counts it as failed.
    pub fn abandon(mut self) {
        self.reported = true;
    }
}

impl<C: Clock> Drop for BreakerCall<'_, C> {
    fn drop(&mut self) {
        if !self.reported {
            let now = self.breaker.clock.now();
            self.breaker.report(self.generation, self.probe, false, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    const S: u64 = 1_000_000_000;

    /// Opens after five failures in a row, for 30 s; the tests give every call's time.
    fn five_in_a_row() -> CircuitBreaker<ManualClock> {
        CircuitBreaker::new(5, Duration::from_secs(30))
            .unwrap()
            .with_clock(ManualClock::new())
    }

    /// `n` calls admitted at `now`, each failing then.
    fn fail(b: &CircuitBreaker<ManualClock>, n: u32, now: u64) {
        for _ in 0..n {
            b.try_call_at(now).unwrap().failure_at(now);
        }
    }

    #[test]
    fn opens_after_five_failures_probes_once_and_recovers() {
        let b = five_in_a_row();
        fail(&b, 4, 0);
        b.try_call_at(0).unwrap().success_at(0); // a success resets the run
        fail(&b, 5, S);
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

    /// A probe that never answers (a hung connection) must not hold the breaker
    /// half-open: after the probe timeout it counts as a failed probe, the breaker opens
    /// again, and a later call becomes the next probe.
    #[test]
    fn a_hung_probe_counts_as_a_failure_after_the_probe_timeout() {
        let b = five_in_a_row();
        fail(&b, 5, 0);
        let hung = b.try_call_at(30 * S).unwrap();
        assert!(hung.is_probe());
        assert!(b.try_call_at(59 * S).is_err(), "the probe is still out");
        // At 60 s the probe is presumed failed: open until 90 s.
        let open = b.try_call_at(61 * S).unwrap_err();
        assert_eq!(open.retry_after, Duration::from_secs(29));
        let next = b
            .try_call_at(3_600 * S)
            .expect("an hour later a new probe goes");
        assert!(next.is_probe());
        next.success_at(3_600 * S);
        hung.failure_at(3_601 * S); // the hung probe's late answer changes nothing
        assert!(b.try_call_at(3_601 * S).is_ok(), "closed");
    }

    /// A trip between two milliseconds: the open period counts from the trip rounded
    /// up, never cut short (before: a probe went 29.000001 ms after a 30 ms trip).
    #[test]
    fn the_open_period_is_never_cut_short_by_rounding() {
        let b = CircuitBreaker::new(1, Duration::from_millis(30))
            .unwrap()
            .with_clock(ManualClock::new());
        b.try_call_at(0).unwrap().failure_at(999_999);
        assert!(b.try_call_at(30_000_000).is_err());
        assert!(b.try_call_at(30_999_999).is_err());
        assert!(b.try_call_at(31_000_000).unwrap().is_probe());
    }

    /// Calls admitted before the breaker tripped report after it recovered: their
    /// failures belong to the old cycle and must not open it again.
    #[test]
    fn outcomes_count_only_in_the_cycle_that_admitted_the_call() {
        let b = five_in_a_row();
        let stale: Vec<_> = (0..5).map(|_| b.try_call_at(0).unwrap()).collect();
        fail(&b, 5, 0);
        assert!(b.try_call_at(S).is_err(), "tripped");
        b.try_call_at(30 * S).unwrap().success_at(30 * S);
        for call in stale {
            call.failure_at(31 * S); // timed out long ago, reported now
        }
        assert!(b.try_call_at(31 * S).is_ok(), "still closed");
        assert!(b.allows_call_at(31 * S));
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

    /// Every sequence of 12 outcomes against the textbook rule (a queue of the last
    /// `window` outcomes): the breaker opens at exactly the first call where the model's
    /// failed share reaches the threshold with enough calls seen.
    #[test]
    fn the_failure_rate_rule_matches_a_queue_of_the_last_calls_exhaustively() {
        for (percent, window, min_calls) in
            [(40, 5, 3), (50, 4, 4), (100, 3, 1), (1, MAX_RATE_WINDOW, 2)]
        {
            let rule = Trip::FailureRate {
                percent,
                window,
                min_calls,
            };
            for bits in 0u32..1 << 12 {
                let b = CircuitBreaker::tripping(rule, Duration::from_secs(1))
                    .unwrap()
                    .with_clock(ManualClock::new());
                let mut last = std::collections::VecDeque::new();
                for i in 0..12 {
                    let failed = bits >> i & 1 == 1;
                    let call = b.try_call_at(0).expect("closed until the model trips");
                    if failed {
                        call.failure_at(0)
                    } else {
                        call.success_at(0)
                    }
                    last.push_back(failed);
                    if last.len() > usize::from(window) {
                        last.pop_front();
                    }
                    let failures = last.iter().filter(|&&f| f).count();
                    let trips = last.len() >= usize::from(min_calls)
                        && failures * 100 >= usize::from(percent) * last.len();
                    assert_eq!(!b.allows_call_at(0), trips, "{rule:?} {bits:012b} at {i}");
                    if trips {
                        break;
                    }
                }
            }
        }
    }

    #[test]
    fn a_dependency_failing_every_other_call_trips_the_rate_rule_only() {
        let in_a_row = five_in_a_row();
        let rate = Trip::FailureRate {
            percent: 50,
            window: 20,
            min_calls: 10,
        };
        let by_rate = CircuitBreaker::tripping(rate, Duration::from_secs(30))
            .unwrap()
            .with_clock(ManualClock::new());
        for i in 0..100 {
            for b in [&in_a_row, &by_rate] {
                if let Ok(call) = b.try_call_at(0) {
                    if i % 2 == 0 {
                        call.failure_at(0)
                    } else {
                        call.success_at(0)
                    }
                }
            }
        }
        assert!(in_a_row.try_call_at(0).is_ok());
        assert!(by_rate.try_call_at(0).is_err());
        for bad in [
            Trip::FailureRate {
                percent: 0,
                window: 10,
                min_calls: 1,
            },
            Trip::FailureRate {
                percent: 101,
                window: 10,
                min_calls: 1,
            },
            Trip::FailureRate {
                percent: 50,
                window: MAX_RATE_WINDOW + 1,
                min_calls: 1,
            },
            Trip::FailureRate {
                percent: 50,
                window: 10,
                min_calls: 11,
            },
            Trip::FailureRate {
                percent: 50,
                window: 10,
                min_calls: 0,
            },
        ] {
            assert_eq!(
                CircuitBreaker::tripping(bad, Duration::from_secs(1)).unwrap_err(),
                BreakerError::BadFailureRate
            );
        }
    }
}
