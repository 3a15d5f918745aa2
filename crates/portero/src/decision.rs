//! The one answer every limiter gives.

use core::fmt;
use core::time::Duration;

/// The outcome of one check, the same for every algorithm (and for the HTTP headers,
/// the wasm API and the lab).
///
/// `remaining` is kept as `slack / unit` and divided only when read, so the hot path
/// builds a `Decision` from a few subtractions.
///
/// ```
/// use portero::{Quota, RateLimiter};
/// let l = RateLimiter::gcra(Quota::per_second(1)?);
/// let first = l.check_at(0, 1)?;
/// assert!(first.is_allowed());
/// let second = l.check_at(0, 1)?;
/// assert!(!second.is_allowed());
/// assert_eq!(second.limit(), 1);
/// assert_eq!(second.remaining(), 0);
/// assert_eq!(second.retry_after().as_secs(), 1);
/// assert_eq!(second.reset_after().as_secs(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    allowed: bool,
    limit: u64,
    slack: u64,
    unit: u64,
    retry_after: u64,
    reset_after: u64,
    delay: u64,
}

/// What a reader needs (the internal slack and unit are how `remaining` is kept
/// exact, not what it is).
impl fmt::Debug for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Decision");
        d.field("allowed", &self.allowed)
            .field("limit", &self.limit)
            .field("remaining", &self.remaining())
            .field("retry_after", &self.retry_after())
            .field("reset_after", &self.reset_after());
        if self.delay > 0 {
            d.field("delay", &self.delay());
        }
        d.finish()
    }
}

impl Decision {
    /// A decision from its parts. `remaining = slack / unit` (`unit` 0 is taken as 1).
    /// `retry_after` and `reset_after` are nanoseconds; an admission's `retry_after`
    /// is always 0 (whatever is passed), so readers may rely on it.
    #[inline]
    pub const fn new(
        allowed: bool,
        limit: u64,
        slack: u64,
        unit: u64,
        retry_after: u64,
        reset_after: u64,
    ) -> Self {
        Self {
            allowed,
            limit,
            slack,
            // Branch-free: 0 becomes 1, every other unit stays (the hot path's units
            // are emission intervals, never 0).
            unit: unit + (unit == 0) as u64,
            retry_after: retry_after * !allowed as u64,
            reset_after,
            delay: 0,
        }
    }

    /// An admission with `remaining` whole units left; the limiter is full again
    /// after `reset_after` ns.
    pub const fn admitted(limit: u64, remaining: u64, reset_after: u64) -> Self {
        Self::new(true, limit, remaining, 1, 0, reset_after)
    }

    /// A refusal: `remaining` units left, the same request fits after `retry_after`
    /// ns, the limiter is full again after `reset_after` ns.
    pub const fn rejected(limit: u64, remaining: u64, retry_after: u64, reset_after: u64) -> Self {
        Self::new(false, limit, remaining, 1, retry_after, reset_after)
    }

    /// A refusal that no wait can turn around (the time was out of range): retry and
    /// reset are `u64::MAX` ns, "never". Headers built from it are bounded by the
    /// HTTP layer; nothing else should read it as a real wait.
    pub const fn never(limit: u64) -> Self {
        Self::rejected(limit, 0, u64::MAX, u64::MAX)
    }

    /// A refusal that is not about the client's own usage — a full key table, a
    /// shared store that did not answer and a policy that fails closed — telling the
    /// client to come back after `nanos` (usually [`DENY_FOR_NANOS`]), with nothing
    /// remaining of `limit`.
    pub const fn deny_for(limit: u64, nanos: u64) -> Self {
        Self::rejected(limit, 0, nanos, nanos)
    }

    /// The same decision for a shaper: an admitted request must wait `delay_nanos`
    /// before it goes (see [`LeakyQueue`](crate::algorithm::leaky_bucket::LeakyQueue)).
    pub const fn with_delay(self, delay_nanos: u64) -> Self {
        Self {
            delay: delay_nanos,
            ..self
        }
    }

    /// For shapers ([`LeakyQueue`](crate::algorithm::leaky_bucket::LeakyQueue)): how long an admitted request
    /// waits before it may go. Zero for every limiter that admits at once.
    pub const fn delay(&self) -> Duration {
        Duration::from_nanos(self.delay)
    }

    /// [`delay`](Self::delay) in nanoseconds.
    pub const fn delay_nanos(&self) -> u64 {
        self.delay
    }

    /// Whether the request may pass.
    #[inline]
    pub const fn is_allowed(&self) -> bool {
        self.allowed
    }

    /// The most units the limiter admits at once (the burst, or the window's limit).
    pub const fn limit(&self) -> u64 {
        self.limit
    }

    /// Whole units still available after this decision.
    pub const fn remaining(&self) -> u64 {
        self.slack / self.unit
    }

    /// [`remaining`](Self::remaining) as the fraction it is read from, `(slack,
    /// unit)` with `remaining() == slack / unit`: for a caller that stores decisions
    /// and divides only when someone reads them (a 64-bit division is the dearest
    /// step of building a decision).
    ///
    /// ```
    /// use portero::Decision;
    /// let d = Decision::new(true, 10, 7_500, 1_000, 0, 0);
    /// let (slack, unit) = d.remaining_fraction();
    /// assert_eq!(slack / unit, d.remaining());
    /// ```
    pub const fn remaining_fraction(&self) -> (u64, u64) {
        (self.slack, self.unit)
    }

    /// How long until this same request would be admitted (zero when it was).
    pub const fn retry_after(&self) -> Duration {
        Duration::from_nanos(self.retry_after)
    }

    /// [`retry_after`](Self::retry_after) in nanoseconds.
    pub const fn retry_after_nanos(&self) -> u64 {
        self.retry_after
    }

    /// How long until the limiter is back to full (nothing used).
    pub const fn reset_after(&self) -> Duration {
        Duration::from_nanos(self.reset_after)
    }

    /// [`reset_after`](Self::reset_after) in nanoseconds.
    pub const fn reset_after_nanos(&self) -> u64 {
        self.reset_after
    }
}

/// How long [`Decision::deny_for`] refusals usually ask a client to wait: one second.
/// Long enough that a refused client does not hammer the server, short enough that it
/// is back soon after room frees up (a table's idle keys are reclaimed on demand).
pub const DENY_FOR_NANOS: u64 = 1_000_000_000;

/// Why a check could not be decided. Nothing was consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CheckError {
    /// The cost is larger than the limiter can ever hold: waiting would not help.
    CostExceedsCapacity {
        /// The cost asked for.
        cost: u64,
        /// The most the limiter can admit at once.
        capacity: u64,
    },
    /// The time given is past [`MAX_TIME_NANOS`](crate::quota::MAX_TIME_NANOS).
    TimeOutOfRange {
        /// The time given, in nanoseconds.
        now: u64,
    },
    /// The algorithm cannot take units after the fact (a settlement above the
    /// estimate: see [`Algorithm::charge`](crate::algorithm::Algorithm::charge)).
    CannotCharge,
    /// A settlement of an admission another limiter (or, in a table, another key)
    /// took: it is that word's to settle, and nothing changed here.
    NotThisAdmission,
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::CostExceedsCapacity { cost, capacity } => write!(
                f,
                "cost {cost} exceeds the capacity {capacity}: it can never be admitted"
            ),
            Self::TimeOutOfRange { now } => write!(
                f,
                "time {now} ns is past the supported range (2^63 ns after the epoch)"
            ),
            Self::NotThisAdmission => f.write_str(
                "the admission was taken by another limiter or for another key: nothing settled",
            ),
            Self::CannotCharge => {
                f.write_str("this algorithm cannot take units after the fact (into debt)")
            }
        }
    }
}

impl core::error::Error for CheckError {}

/// Why a check of a keyed limit (a [`KeyedLimiter`](crate::keyed::limiter::KeyedLimiter), a stack
/// that may hold one) could not be decided. Nothing was consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyedError {
    /// The algorithm refused the input (see [`CheckError`]).
    Check(CheckError),
    /// The table already holds `max_keys` active keys and its overflow policy refuses
    /// new ones (see `keyed::Overflow`).
    KeyTableFull {
        /// The table's key cap.
        max_keys: u64,
    },
}

impl From<CheckError> for KeyedError {
    fn from(e: CheckError) -> Self {
        Self::Check(e)
    }
}

impl fmt::Display for KeyedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Check(e) => e.fmt(f),
            Self::KeyTableFull { max_keys } => write!(
                f,
                "the key table is full ({max_keys} active keys): new keys are refused"
            ),
        }
    }
}

impl core::error::Error for KeyedError {}

/// The range checks every algorithm makes before deciding: `now` within
/// [`MAX_TIME_NANOS`](crate::quota::MAX_TIME_NANOS), `cost` within the capacity.
#[inline]
pub(crate) fn check_range(now: u64, cost: u64, capacity: u64) -> Result<(), CheckError> {
    if now > crate::quota::MAX_TIME_NANOS {
        return Err(CheckError::TimeOutOfRange { now });
    }
    if cost > capacity {
        return Err(CheckError::CostExceedsCapacity { cost, capacity });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Decision;

    #[test]
    fn debug_shows_what_a_reader_needs() {
        let d = Decision::rejected(5, 0, 12_000_000_000, 60_000_000_000);
        assert_eq!(
            format!("{d:?}"),
            "Decision { allowed: false, limit: 5, remaining: 0, retry_after: 12s, reset_after: 60s }"
        );
        let queued = Decision::admitted(10, 9, 0).with_delay(100_000_000);
        assert!(format!("{queued:?}").ends_with("delay: 100ms }"));
    }

    #[test]
    fn an_admission_never_asks_to_wait() {
        assert_eq!(Decision::new(true, 5, 1, 1, 7, 3).retry_after_nanos(), 0);
        assert_eq!(Decision::new(false, 5, 1, 1, 7, 3).retry_after_nanos(), 7);
    }
}
