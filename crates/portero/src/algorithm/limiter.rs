//! [`RateLimiter`]: one algorithm, one atomic word, one clock.

use crossbeam_utils::CachePadded;

use crate::admission::{Acquired, Admission, Settlement};
use crate::algorithm::charge::{saturates, standing, Charging};
use crate::algorithm::Algorithm;
use crate::clock::{Clock, DefaultClock};
use crate::decision::{CheckError, Decision};
use crate::refund_ledger::{Note, RefundLedger};
use crate::refund_log::RunLog;
use crate::word::AtomicWord;
pub use crate::word::Transition;

/// A lock-free limiter: algorithm `A` over one cache-padded atomic word, timed by `C`.
///
/// Share it between threads by reference or in an `Arc`; every method takes `&self`.
///
/// ```
/// use portero::{ManualClock, Quota, RateLimiter};
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::gcra(Quota::per_second(10)?).with_clock(&clock);
/// for _ in 0..10 {
///     assert!(limiter.check().is_allowed());
/// }
/// assert!(!limiter.check().is_allowed());
/// clock.advance(100_000_000); // 100 ms: one request's worth
/// assert!(limiter.check().is_allowed());
/// # Ok::<(), portero::QuotaError>(())
/// ```
#[derive(Debug)]
pub struct RateLimiter<A, C = DefaultClock> {
    pub(crate) state: CachePadded<AtomicWord>,
    algorithm: A,
    clock: C,
    // How far refunds moved the word back, and their turns (see `RefundLedger`).
    refunds: RefundLedger,
    // Where the units refunds gave back came from (see `refund_log`).
    given_back: RunLog,
    // Waiters in line for this limiter (`until_ready`), not its state.
    #[cfg(feature = "tokio")]
    pub(crate) line: crate::wait_line::WaitLine,
}

impl<A: Algorithm> RateLimiter<A, DefaultClock> {
    /// A limiter running `algorithm` on the [`DefaultClock`].
    pub fn new(algorithm: A) -> Self {
        Self::with_algorithm_and_clock(algorithm, DefaultClock::default())
    }
}

impl<A: Algorithm, C: Clock> RateLimiter<A, C> {
    /// A limiter running `algorithm` on `clock`.
    pub fn with_algorithm_and_clock(algorithm: A, clock: C) -> Self {
        Self {
            state: CachePadded::new(AtomicWord::new(algorithm.initial_state())),
            algorithm,
            clock,
            refunds: RefundLedger::new(),
            given_back: RunLog::new(),
            #[cfg(feature = "tokio")]
            line: crate::wait_line::WaitLine::default(),
        }
    }

    /// The same limiter (and state) on another clock.
    pub fn with_clock<C2: Clock>(self, clock: C2) -> RateLimiter<A, C2> {
        RateLimiter {
            state: self.state,
            algorithm: self.algorithm,
            clock,
            refunds: self.refunds,
            given_back: self.given_back,
            #[cfg(feature = "tokio")]
            line: self.line,
        }
    }

    /// Checks one unit now, consuming it if admitted.
    ///
    /// Cannot fail: the cost (1) always fits, and the clocks start at 0, so the time
    /// stays in range for 292 years; should it ever not, the request is denied
    /// (`retry_after` = `u64::MAX` ns) rather than admitted.
    #[inline]
    pub fn check(&self) -> Decision {
        self.check_at(self.clock.now(), 1)
            .unwrap_or_else(|_| self.denied())
    }

    /// Checks `cost` units now: admitted whole or not at all.
    #[inline]
    pub fn check_n(&self, cost: u64) -> Result<Decision, CheckError> {
        self.check_at(self.clock.now(), cost)
    }

    /// Checks `cost` units at `now` (nanoseconds on the caller's own axis).
    ///
    /// Time may go backwards between calls: an earlier `now` never admits more than
    /// the later one would have (it sees less refill), and never panics.
    #[inline]
    pub fn check_at(&self, now: u64, cost: u64) -> Result<Decision, CheckError> {
        self.state
            .apply(|state| self.algorithm.decide(state, now, cost))
    }

    /// What [`check`](Self::check) would answer now, consuming nothing.
    pub fn peek(&self) -> Decision {
        self.peek_at(self.clock.now(), 1)
            .unwrap_or_else(|_| self.denied())
    }

    /// What [`check_at`](Self::check_at) would answer, consuming nothing.
    pub fn peek_at(&self, now: u64, cost: u64) -> Result<Decision, CheckError> {
        self.algorithm
            .decide(self.state.load(), now, cost)
            .map(|t| t.decision)
    }

    /// [`check_at`](Self::check_at), and when it admits, the [`Admission`] that gives
    /// its units back ([`refund`](Self::refund)).
    pub fn acquire_at(&self, now: u64, cost: u64) -> Result<Acquired, CheckError> {
        let note = self.refunds.note();
        let mut wrote = None;
        let decision = self.state.apply(|state| {
            let t = self.algorithm.decide(state, now, cost)?;
            wrote = t.next.map(|next| (state, next));
            Ok::<_, CheckError>(t)
        })?;
        // A positive cost admitted is the one write that took units (an
        // excess-counting window also writes its rejections); an algorithm that
        // admits without writing leaves an admission known by its time and cost.
        let admission = (decision.is_allowed() && cost > 0).then(|| {
            match wrote {
                Some((before, after)) => Admission::of_word(now, cost, before, after, note.total)
                    .placed_if(self.refunds.placed(&note)),
                None => Admission::new(now, cost),
            }
            .taken_from(self.refunds.origin(0))
        });
        Ok(Acquired {
            decision,
            admission,
        })
    }

    /// Gives back what `admission` took (see [`Admission::give_back`] for the rule),
    /// at the limiter's own time, read after the word is loaded so that every check
    /// it sees is no later.
    ///
    /// Returns whether anything was given back. `false` means the limiter keeps the
    /// request and stands as if it had been used (never looser than that): an
    /// algorithm that gives nothing back, a queue's slot with requests booked behind
    /// it, a first-request window's opener once others joined (the window lies where
    /// it put it), or debt already paid off by the time of the refund.
    pub fn refund(&self, admission: Admission) -> bool {
        self.refund_with(&admission, None)
            .is_some_and(|(state, next)| state != next)
    }

    /// [`refund`](Self::refund) at `now` on the caller's axis (no earlier than any
    /// check applied since the admission: see the [`admission`](crate::admission)
    /// module for what an earlier one costs).
    pub fn refund_at(&self, admission: Admission, now: u64) -> bool {
        self.refund_with(&admission, Some(now))
            .is_some_and(|(state, next)| state != next)
    }

    /// The refund's compare-and-swap under the ledger's lock, at `now` or the clock's
    /// time read after each load: the word it changed and what it wrote (`None`: no
    /// refunds here).
    pub(crate) fn refund_with(
        &self,
        admission: &Admission,
        now: Option<u64>,
    ) -> Option<(u64, u64)> {
        // Another limiter's admission gives nothing back here.
        if !admission.is_from(self.refunds.origin(0)) {
            return None;
        }
        self.refunds
            // One word, never swept.
            .giving_back(&self.given_back, (1, |_| false), admission, |seen| {
                let mut done = None;
                let mut moved = 0;
                self.state.update(|state| {
                    let now = now.unwrap_or_else(|| self.clock.now());
                    let given =
                        admission.give_back_ledgered(&self.algorithm, state, now, Some(seen));
                    done = given.map(|(next, _)| (state, next));
                    let moves = given.filter(|&(next, _)| next != state);
                    // An exact undo returns the word to one it held since the admission:
                    // nothing a later refund must count.
                    moved = match moves {
                        Some((next, false)) => state.abs_diff(next),
                        _ => 0,
                    };
                    moves.map(|(next, _)| next)
                });
                (done, moved)
            })
    }

    /// Takes `units` now whether or not they fit: a cost learned after the request
    /// was admitted, charged into debt past the burst (see
    /// [`Algorithm::charge`]: a window placed by its first request is never opened
    /// by a charge, so one charged with no window open takes nothing). Returns how
    /// the limiter stands afterwards (refused, with the exact `retry_after` of one
    /// unit, while in debt).
    ///
    /// ```
    /// use portero::{ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let tokens = RateLimiter::gcra(Quota::per_second(10)?).with_clock(&clock);
    /// let after = tokens.charge(25)?; // 15 units past a burst of 10
    /// assert!(!after.is_allowed());
    /// assert_eq!(after.retry_after().as_millis(), 1_600); // until one unit fits
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn charge(&self, units: u64) -> Result<Decision, CheckError> {
        self.charge_at(self.clock.now(), units)
    }

    /// [`charge`](Self::charge) at `now` on the caller's axis.
    pub fn charge_at(&self, now: u64, units: u64) -> Result<Decision, CheckError> {
        let charging = Charging(&self.algorithm);
        // Under the ledger's lock: a charge that saturates the word tells the ledger
        // it went back by everything (see `saturates`), with no refund in between.
        self.refunds.refunding(|_| {
            let mut dropped = false;
            let out = self.state.apply(|state| {
                dropped = saturates(&self.algorithm, state, now, units);
                charging.decide(state, now, units)
            });
            (out, if dropped { u64::MAX } else { 0 })
        })
    }

    /// Settles an admission taken on an estimate at its real cost `real`, learned
    /// afterwards (tokens a model call used; 0: a refund): the units not used go back by the
    /// refund rule ([`Admission::part`]: less, never more, while others came
    /// since), the units above the estimate are charged into debt
    /// ([`charge`](Self::charge)). Returns how the limiter stands afterwards for a
    /// request of one unit. Settle each admission at most once, instead of a refund.
    ///
    /// ```
    /// use portero::{ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let budget = RateLimiter::gcra(Quota::per_minute(10_000)?).with_clock(&clock);
    /// let estimate = budget.acquire_at(0, 1_000)?.admission.unwrap();
    /// let after = budget.settle(estimate, 1_938)?; // the response said 1,938
    /// assert_eq!(after.remaining(), 10_000 - 1_938);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle(&self, admission: Admission, real: u64) -> Result<Decision, CheckError> {
        self.settle_with(admission, real, None)
    }

    /// [`settle`](Self::settle) at `now` on the caller's axis (no earlier than any
    /// check applied since the admission).
    pub fn settle_at(
        &self,
        admission: Admission,
        real: u64,
        now: u64,
    ) -> Result<Decision, CheckError> {
        self.settle_with(admission, real, Some(now))
    }

    fn settle_with(
        &self,
        admission: Admission,
        real: u64,
        now: Option<u64>,
    ) -> Result<Decision, CheckError> {
        if !admission.is_from(self.refunds.origin(0)) {
            return Err(CheckError::NotThisAdmission);
        }
        let at = admission.at();
        match admission.settled_at(real) {
            Settlement::Charge(units) => {
                let now = now.unwrap_or_else(|| self.clock.now());
                return self.charge_at(now.max(at), units);
            }
            Settlement::GiveBack(back) => {
                self.refund_with(&back, now);
            }
            Settlement::Kept => {}
        }
        let now = now.unwrap_or_else(|| self.clock.now()).max(at);
        standing(&self.algorithm, self.state.load(), now)
    }

    /// The refund ledger now, for a booking to note.
    pub(crate) fn refunds_note(&self) -> Note {
        self.refunds.note()
    }

    /// Whether no refund ran since `note` (read after a booking wrote).
    pub(crate) fn refunds_placed(&self, note: &Note) -> bool {
        self.refunds.placed(note)
    }

    /// Forgets everything admitted: the limiter is as new.
    pub fn reset(&self) {
        self.store_state(self.algorithm.initial_state());
    }

    /// The algorithm and its configuration.
    pub fn algorithm(&self) -> &A {
        &self.algorithm
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The raw state word, as the algorithm's documentation lays it out (feature
    /// `testing`: for tests and models, not a stable API).
    #[cfg(feature = "testing")]
    pub fn raw_state(&self) -> u64 {
        self.state_word()
    }

    /// The state word, for algorithm-specific readers.
    pub(crate) fn state_word(&self) -> u64 {
        self.state.load()
    }

    /// Overwrites the raw state word (used by algorithm-specific setters), as a
    /// refund of everything: an admission from before gives nothing back after it.
    pub(crate) fn store_state(&self, state: u64) {
        self.refunds.refunding(|_| {
            self.state.store(state);
            ((), u64::MAX)
        })
    }

    fn denied(&self) -> Decision {
        let limit = self.algorithm.capacity();
        Decision::never(limit)
    }
}
