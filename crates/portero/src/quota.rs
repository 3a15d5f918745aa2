//! How much a limiter admits: a rate and a burst.

use core::fmt;
use core::time::Duration;

/// The longest span a quota may describe, in nanoseconds: `2^62` ns, about 146 years.
///
/// `burst × emission interval` must fit in it, which keeps every sum the limiters form
/// (`now + burst × interval`) inside a `u64` as long as `now ≤ MAX_TIME_NANOS`.
pub const MAX_SPAN_NANOS: u64 = 1 << 62;

/// The latest instant (nanoseconds on the caller's axis) a limiter accepts: `2^63 − 1`
/// ns, about 292 years after the clock's epoch. Later readings get
/// [`CheckError::TimeOutOfRange`](crate::decision::CheckError::TimeOutOfRange), never a wrap.
pub const MAX_TIME_NANOS: u64 = (1 << 63) - 1;

/// A rate (`limit` per `period`) and a burst (how many may pass at once).
///
/// The limiters work in one derived unit, the **emission interval** `T = period / limit`
/// in nanoseconds, rounded **up** so that rounding can only admit less, never more
/// (the error is under 1 ns per request). The capacity `burst × T` is the span of time a
/// full limiter has banked.
///
/// ```
/// use portero::Quota;
/// let q = Quota::per_minute(600)?.with_burst(20)?;
/// assert_eq!(q.emission_interval().as_millis(), 100);
/// assert_eq!(q.burst(), 20);
/// assert!(Quota::per_second(0).is_err());
/// # Ok::<(), portero::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    limit: u64,
    period: u64,
    interval: u64,
    burst: u64,
    /// `burst × interval`, kept so the hot path does not multiply.
    span: u64,
}

/// Why a quota was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuotaError {
    /// The limit (requests per period) was 0.
    ZeroRate,
    /// The period was 0.
    ZeroPeriod,
    /// The burst was 0: nothing could ever pass.
    ZeroBurst,
    /// More than one request per nanosecond: the emission interval would round to 0 ns.
    RateTooHigh {
        /// The limit asked for.
        limit: u64,
        /// The period, in nanoseconds.
        period_nanos: u64,
    },
    /// `burst × emission interval` (or the period) exceeds [`MAX_SPAN_NANOS`].
    SpanTooLong,
    /// The limit does not fit the algorithm's state word.
    LimitTooLarge {
        /// The limit asked for.
        limit: u64,
        /// The largest the algorithm's bit layout holds.
        max: u64,
    },
}

impl fmt::Display for QuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroRate => f.write_str("quota limit must be at least 1 request per period"),
            Self::ZeroPeriod => f.write_str("quota period must be longer than 0 ns"),
            Self::ZeroBurst => f.write_str("quota burst must be at least 1"),
            Self::RateTooHigh {
                limit,
                period_nanos,
            } => write!(
                f,
                "quota of {limit} per {period_nanos} ns is more than one request per nanosecond"
            ),
            Self::LimitTooLarge { limit, max } => write!(
                f,
                "limit {limit} is larger than this algorithm's state word holds ({max})"
            ),
            Self::SpanTooLong => f.write_str(
                "quota spans more than 2^62 ns (about 146 years): burst x interval is too large",
            ),
        }
    }
}

impl core::error::Error for QuotaError {}

impl Quota {
    /// `limit` requests per `period`, with a burst of `limit`.
    pub const fn new(limit: u64, period: Duration) -> Result<Self, QuotaError> {
        let nanos = period.as_nanos();
        if nanos > MAX_SPAN_NANOS as u128 {
            return Err(QuotaError::SpanTooLong);
        }
        Self::from_nanos(limit, nanos as u64)
    }

    /// `limit` requests per `period_nanos` nanoseconds, with a burst of `limit`.
    pub const fn from_nanos(limit: u64, period_nanos: u64) -> Result<Self, QuotaError> {
        if limit == 0 {
            return Err(QuotaError::ZeroRate);
        }
        if period_nanos == 0 {
            return Err(QuotaError::ZeroPeriod);
        }
        if period_nanos > MAX_SPAN_NANOS {
            return Err(QuotaError::SpanTooLong);
        }
        if limit > period_nanos {
            return Err(QuotaError::RateTooHigh {
                limit,
                period_nanos,
            });
        }
        let interval = period_nanos.div_ceil(limit);
        let q = Self {
            limit,
            period: period_nanos,
            interval,
            burst: 1,
            span: interval,
        };
        q.with_burst(limit)
    }

    /// `limit` per second.
    pub const fn per_second(limit: u64) -> Result<Self, QuotaError> {
        Self::from_nanos(limit, 1_000_000_000)
    }

    /// `limit` per minute.
    pub const fn per_minute(limit: u64) -> Result<Self, QuotaError> {
        Self::from_nanos(limit, 60_000_000_000)
    }

    /// `limit` per hour.
    pub const fn per_hour(limit: u64) -> Result<Self, QuotaError> {
        Self::from_nanos(limit, 3_600_000_000_000)
    }

    /// `limit` per day (86,400 s).
    pub const fn per_day(limit: u64) -> Result<Self, QuotaError> {
        Self::from_nanos(limit, 86_400_000_000_000)
    }

    /// The same rate with another burst (capacity).
    pub const fn with_burst(self, burst: u64) -> Result<Self, QuotaError> {
        if burst == 0 {
            return Err(QuotaError::ZeroBurst);
        }
        match burst.checked_mul(self.interval) {
            Some(span) if span <= MAX_SPAN_NANOS => Ok(Self {
                burst,
                span,
                ..self
            }),
            _ => Err(QuotaError::SpanTooLong),
        }
    }

    /// Requests per period, as configured.
    pub const fn limit(&self) -> u64 {
        self.limit
    }

    /// The period, as configured.
    pub const fn period(&self) -> Duration {
        Duration::from_nanos(self.period)
    }

    /// The period in nanoseconds.
    pub const fn period_nanos(&self) -> u64 {
        self.period
    }

    /// The burst: how many units a full limiter admits at once.
    pub const fn burst(&self) -> u64 {
        self.burst
    }

    /// The emission interval `T`: one unit comes back every `T`.
    pub const fn emission_interval(&self) -> Duration {
        Duration::from_nanos(self.interval)
    }

    /// The emission interval in nanoseconds (at least 1).
    pub const fn interval_nanos(&self) -> u64 {
        self.interval
    }

    /// `burst × T` in nanoseconds: the time an empty limiter takes to be full again.
    /// At most [`MAX_SPAN_NANOS`].
    pub const fn capacity_nanos(&self) -> u64 {
        self.span
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_quotas_with_typed_errors() {
        assert_eq!(Quota::per_second(0), Err(QuotaError::ZeroRate));
        assert_eq!(Quota::from_nanos(5, 0), Err(QuotaError::ZeroPeriod));
        assert_eq!(
            Quota::per_second(2_000_000_000),
            Err(QuotaError::RateTooHigh {
                limit: 2_000_000_000,
                period_nanos: 1_000_000_000
            })
        );
        assert_eq!(
            Quota::per_second(1).unwrap().with_burst(0),
            Err(QuotaError::ZeroBurst)
        );
        assert_eq!(
            Quota::per_day(1).unwrap().with_burst(u64::MAX),
            Err(QuotaError::SpanTooLong)
        );
        assert_eq!(
            Quota::new(1, Duration::from_secs(u64::MAX)),
            Err(QuotaError::SpanTooLong)
        );
        assert!(Quota::per_second(1_000_000_000).is_ok());
    }

    #[test]
    fn interval_rounds_up_never_down() {
        let q = Quota::per_second(3).unwrap();
        assert_eq!(q.interval_nanos(), 333_333_334);
        assert!(q.interval_nanos() * 3 >= 1_000_000_000);
    }
}
