//! Every algorithm by name: the one spelling of each name ([`AlgorithmName`]) and one
//! type that holds any one-word algorithm chosen at run time ([`AnyAlgorithm`]).
//!
//! Invariant: [`AnyAlgorithm`] forwards every [`Algorithm`] method — state, capacity,
//! decisions, refunds and bookings — to the algorithm it holds, so it decides exactly as that
//! algorithm. Bindings (the wasm crate, the lab, portero-redis's keys) take names and
//! algorithms from here instead of spelling them again.

use core::fmt;

use crate::admission::Admission;

use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::leaky_bucket::{LeakyMeter, LeakyQueue};
use crate::algorithm::sliding_counter::SlidingWindowCounter;
use crate::algorithm::token_bucket::TokenBucket;
use crate::algorithm::Algorithm;
use crate::decision::CheckError;
use crate::quota::{Quota, QuotaError};
use crate::word::Transition;

/// The name of an algorithm, as configuration files, the JavaScript binding, Redis
/// keys and the lab spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AlgorithmName {
    /// [`Gcra`]: `"gcra"`.
    Gcra,
    /// [`TokenBucket`]: `"token-bucket"`.
    TokenBucket,
    /// [`FixedWindow`]: `"fixed-window"`.
    FixedWindow,
    /// [`SlidingWindowCounter`]: `"sliding-window-counter"`.
    SlidingWindowCounter,
    /// [`SlidingLog`](crate::algorithm::sliding_log::SlidingLog) (not one word: no [`AnyAlgorithm`]):
    /// `"sliding-log"`.
    SlidingLog,
    /// [`LeakyMeter`]: `"leaky-meter"`.
    LeakyMeter,
    /// [`LeakyQueue`]: `"leaky-queue"`.
    LeakyQueue,
}

impl AlgorithmName {
    /// Every name, in the order the guide introduces them.
    pub const ALL: [Self; 7] = [
        Self::FixedWindow,
        Self::SlidingLog,
        Self::SlidingWindowCounter,
        Self::TokenBucket,
        Self::Gcra,
        Self::LeakyMeter,
        Self::LeakyQueue,
    ];

    /// The name's one spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Gcra => "gcra",
            Self::TokenBucket => "token-bucket",
            Self::FixedWindow => "fixed-window",
            Self::SlidingWindowCounter => "sliding-window-counter",
            Self::SlidingLog => "sliding-log",
            Self::LeakyMeter => "leaky-meter",
            Self::LeakyQueue => "leaky-queue",
        }
    }

    /// The algorithm spelled `name`, if any.
    ///
    /// ```
    /// use portero::AlgorithmName;
    /// assert_eq!(AlgorithmName::parse("token-bucket"), Some(AlgorithmName::TokenBucket));
    /// assert_eq!(AlgorithmName::parse("TokenBucket"), None);
    /// ```
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|n| n.as_str() == name)
    }
}

impl fmt::Display for AlgorithmName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Any one-word algorithm, chosen at run time (from configuration, or from
/// JavaScript), deciding exactly as the algorithm it holds.
///
/// ```
/// use portero::{AlgorithmName, AnyAlgorithm, Quota, RateLimiter};
/// let name = AlgorithmName::parse("sliding-window-counter").unwrap();
/// let limiter = RateLimiter::new(AnyAlgorithm::new(name, Quota::per_second(2)?)?);
/// assert!(limiter.check_at(0, 2)?.is_allowed());
/// assert!(!limiter.check_at(0, 1)?.is_allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AnyAlgorithm {
    /// GCRA.
    Gcra(Gcra),
    /// The token bucket.
    TokenBucket(TokenBucket),
    /// The fixed window (aligned).
    FixedWindow(FixedWindow),
    /// The sliding window counter.
    SlidingWindowCounter(SlidingWindowCounter),
    /// The leaky bucket as a meter.
    LeakyMeter(LeakyMeter),
    /// The leaky bucket as a queue (a shaper: admitted requests carry a delay).
    LeakyQueue(LeakyQueue),
}

/// Why [`AnyAlgorithm::new`] could not build an algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AnyAlgorithmError {
    /// The quota does not fit the algorithm (see [`QuotaError`]).
    Quota(QuotaError),
    /// The algorithm is not one word of state (the sliding log).
    NotOneWord(AlgorithmName),
}

impl From<QuotaError> for AnyAlgorithmError {
    fn from(e: QuotaError) -> Self {
        Self::Quota(e)
    }
}

impl fmt::Display for AnyAlgorithmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Quota(e) => e.fmt(f),
            Self::NotOneWord(n) => write!(f, "{n} keeps more than one word of state"),
        }
    }
}

impl core::error::Error for AnyAlgorithmError {}

impl AnyAlgorithm {
    /// The algorithm `name` for `quota`.
    pub const fn new(name: AlgorithmName, quota: Quota) -> Result<Self, AnyAlgorithmError> {
        Ok(match name {
            AlgorithmName::Gcra => Self::Gcra(Gcra::new(quota)),
            AlgorithmName::TokenBucket => Self::TokenBucket(TokenBucket::new(quota)),
            AlgorithmName::FixedWindow => match FixedWindow::new(quota) {
                Ok(a) => Self::FixedWindow(a),
                Err(e) => return Err(AnyAlgorithmError::Quota(e)),
            },
            AlgorithmName::SlidingWindowCounter => match SlidingWindowCounter::new(quota) {
                Ok(a) => Self::SlidingWindowCounter(a),
                Err(e) => return Err(AnyAlgorithmError::Quota(e)),
            },
            AlgorithmName::LeakyMeter => Self::LeakyMeter(LeakyMeter::new(quota)),
            AlgorithmName::LeakyQueue => Self::LeakyQueue(LeakyQueue::new(quota)),
            AlgorithmName::SlidingLog => return Err(AnyAlgorithmError::NotOneWord(name)),
        })
    }

    /// Its name.
    pub const fn name(&self) -> AlgorithmName {
        match self {
            Self::Gcra(_) => AlgorithmName::Gcra,
            Self::TokenBucket(_) => AlgorithmName::TokenBucket,
            Self::FixedWindow(_) => AlgorithmName::FixedWindow,
            Self::SlidingWindowCounter(_) => AlgorithmName::SlidingWindowCounter,
            Self::LeakyMeter(_) => AlgorithmName::LeakyMeter,
            Self::LeakyQueue(_) => AlgorithmName::LeakyQueue,
        }
    }
}

/// Forwards to the algorithm held, whichever it is.
macro_rules! forward {
    ($self:ident, $a:ident => $call:expr) => {
        match $self {
            AnyAlgorithm::Gcra($a) => $call,
            AnyAlgorithm::TokenBucket($a) => $call,
            AnyAlgorithm::FixedWindow($a) => $call,
            AnyAlgorithm::SlidingWindowCounter($a) => $call,
            AnyAlgorithm::LeakyMeter($a) => $call,
            AnyAlgorithm::LeakyQueue($a) => $call,
        }
    };
}

impl Algorithm for AnyAlgorithm {
    fn initial_state(&self) -> u64 {
        forward!(self, a => a.initial_state())
    }

    fn capacity(&self) -> u64 {
        forward!(self, a => a.capacity())
    }

    #[inline]
    fn decide(&self, state: u64, now: u64, cost: u64) -> Result<Transition, CheckError> {
        forward!(self, a => a.decide(state, now, cost))
    }

    fn refund(&self, state: u64, admission: &Admission, now: u64) -> Option<u64> {
        forward!(self, a => a.refund(state, admission, now))
    }

    fn book(&self, state: u64, now: u64, cost: u64) -> Option<(u64, u64)> {
        forward!(self, a => a.book(state, now, cost))
    }

    fn charge(&self, state: u64, now: u64, cost: u64) -> Option<u64> {
        forward!(self, a => a.charge(state, now, cost))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_distinct() {
        for n in AlgorithmName::ALL {
            assert_eq!(AlgorithmName::parse(n.as_str()), Some(n));
        }
        let q = Quota::per_second(4).unwrap();
        for n in AlgorithmName::ALL {
            match AnyAlgorithm::new(n, q) {
                Ok(a) => assert_eq!(a.name(), n),
                Err(e) => assert_eq!(e, AnyAlgorithmError::NotOneWord(AlgorithmName::SlidingLog)),
            }
        }
    }

    #[test]
    fn refunds_are_forwarded() {
        let q = Quota::per_second(4).unwrap();
        let any = AnyAlgorithm::new(AlgorithmName::Gcra, q).unwrap();
        let s = any.decide(0, 0, 2).unwrap().next.unwrap();
        let adm = Admission::new(0, 2);
        assert_eq!(any.refund(s, &adm, 0), Gcra::new(q).refund(s, &adm, 0));
        assert!(any.refund(s, &adm, 0).is_some());
    }

    #[test]
    fn bookings_are_forwarded_and_only_gcra_books() {
        let q = Quota::per_second(4).unwrap();
        for name in AlgorithmName::ALL {
            let Ok(any) = AnyAlgorithm::new(name, q) else {
                continue; // the sliding log is not one word
            };
            let booked = any.book(3_000_000_000, 0, 2);
            if name == AlgorithmName::Gcra {
                assert_eq!(booked, Gcra::new(q).book(3_000_000_000, 0, 2));
                assert_eq!(booked, Some((2_500_000_000, 3_500_000_000)));
            } else {
                assert_eq!(booked, None, "{name:?}");
            }
        }
    }
}
