//! The client's side: when to retry after a 429 or 503.
//!
//! Exponential backoff with **full jitter**: before retry `n` (from 0) wait a uniformly
//! random time in `[0, min(cap, base·2ⁿ)]`. The randomness spreads clients that were
//! refused together over the whole interval, so they do not come back together and
//! be refused together again. If the server sent `Retry-After`, the wait is that
//! plus the same random draw: never early, and still spread.
//!
//! A server's `Retry-After` is honoured up to a ceiling, [`Backoff::max_wait`]
//! (default one hour): a longer one means "give up" ([`Backoff::next_delay`] answers
//! `None`), and no delay this module returns is ever longer than the ceiling, so
//! `Instant::now() + delay` cannot overflow whatever the server sent.

use core::fmt;
use std::time::{Duration, SystemTime};

use http::header::RETRY_AFTER;
use http::HeaderMap;
use rand::Rng;

/// Exponential backoff with full jitter between `base` and `cap`.
///
/// ```
/// use std::time::Duration;
/// use portero_http::Backoff;
/// let backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(10))?;
/// assert_eq!(backoff.ceiling(0), Duration::from_millis(100));
/// assert_eq!(backoff.ceiling(3), Duration::from_millis(800));
/// assert_eq!(backoff.ceiling(40), Duration::from_secs(10)); // capped, no overflow
/// let wait = backoff.delay(3, Some(Duration::from_secs(2)));
/// assert!(wait >= Duration::from_secs(2) && wait <= Duration::from_millis(2_800));
/// # Ok::<(), portero_http::BackoffError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    max_retries: u32,
    max_wait: Duration,
}

/// The default [`Backoff::max_wait`]: one hour.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(3_600);
/// The largest [`Backoff::max_wait`] accepted: 30 days (longer ones are lowered to it).
pub const MAX_WAIT_LIMIT: Duration = Duration::from_secs(30 * 86_400);

/// Why a [`Backoff`] could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackoffError {
    /// `base` was zero: every retry would be immediate.
    ZeroBase,
    /// `cap` was below `base`.
    CapBelowBase,
}

impl fmt::Display for BackoffError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ZeroBase => "the backoff base must be more than zero",
            Self::CapBelowBase => "the backoff cap must be at least the base",
        })
    }
}

impl std::error::Error for BackoffError {}

impl Backoff {
    /// Backoff doubling from `base` up to `cap`.
    pub fn new(base: Duration, cap: Duration) -> Result<Self, BackoffError> {
        if base.is_zero() {
            return Err(BackoffError::ZeroBase);
        }
        if cap < base {
            return Err(BackoffError::CapBelowBase);
        }
        Ok(Self {
            base,
            cap,
            max_retries: u32::MAX,
            max_wait: DEFAULT_MAX_WAIT.max(cap.min(MAX_WAIT_LIMIT)),
        })
    }

    /// The longest wait honoured (default one hour, or `cap` if longer; at most
    /// [`MAX_WAIT_LIMIT`]): every delay is at most this, and a server's `Retry-After`
    /// beyond it makes [`next_delay`](Self::next_delay) give up.
    pub fn with_max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = max_wait.min(MAX_WAIT_LIMIT);
        self
    }

    /// The longest wait honoured (see [`with_max_wait`](Self::with_max_wait)).
    pub fn max_wait(&self) -> Duration {
        self.max_wait
    }

    /// Gives up after `max_retries` retries (a client must never retry forever):
    /// [`next_delay`](Self::next_delay) answers `None` from then on.
    pub fn with_max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// The wait before retry `attempt` (from 0), or `None` once the retries are used
    /// up or the server asks for a wait beyond [`max_wait`](Self::max_wait).
    ///
    /// ```
    /// use std::time::Duration;
    /// use portero_http::Backoff;
    /// let b = Backoff::new(Duration::from_millis(500), Duration::from_secs(10))?.with_max_retries(3);
    /// assert!(b.next_delay(2, None).is_some());
    /// assert_eq!(b.next_delay(3, None), None);
    /// # Ok::<(), portero_http::BackoffError>(())
    /// ```
    pub fn next_delay(&self, attempt: u32, retry_after: Option<Duration>) -> Option<Duration> {
        let too_long = retry_after.is_some_and(|r| r > self.max_wait);
        (attempt < self.max_retries && !too_long).then(|| self.delay(attempt, retry_after))
    }

    /// The longest wait before retry `attempt`: `min(cap, base·2^attempt)`.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        match 1u32.checked_shl(attempt) {
            Some(factor) => self.base.saturating_mul(factor).min(self.cap),
            None => self.cap,
        }
    }

    /// The wait before retry `attempt`, drawn from `rng`: uniform in
    /// `[0, ceiling(attempt)]`, after `retry_after` if the server gave one, and never
    /// more than [`max_wait`](Self::max_wait).
    pub fn delay_with<R: Rng + ?Sized>(
        &self,
        attempt: u32,
        retry_after: Option<Duration>,
        rng: &mut R,
    ) -> Duration {
        let ceiling = u64::try_from(self.ceiling(attempt).as_nanos()).unwrap_or(u64::MAX);
        let jitter = Duration::from_nanos(rng.random_range(0..=ceiling));
        retry_after
            .unwrap_or(Duration::ZERO)
            .saturating_add(jitter)
            .min(self.max_wait)
    }

    /// [`delay_with`](Self::delay_with) the thread's random generator.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        self.delay_with(attempt, retry_after, &mut rand::rng())
    }
}

/// The wait a response's `Retry-After` asks for, as of `now`: delta-seconds
/// (`Retry-After: 120`) or an HTTP date (a date in the past is zero). `None` if the
/// field is missing or malformed.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// let mut h = http::HeaderMap::new();
/// h.insert("retry-after", "120".parse().unwrap());
/// assert_eq!(portero_http::retry_after(&h, SystemTime::now()), Some(Duration::from_secs(120)));
/// ```
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Delta-seconds; absurdly long values saturate rather than fail.
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}
