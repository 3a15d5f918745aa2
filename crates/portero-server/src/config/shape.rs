//! How a rule counts (`rate_limit.portero.algorithm` and `burst`): the one place the
//! gateway reads an algorithm's name and turns a rule into an algorithm, for memory
//! and for Redis alike, so that a file means the same with either store.
//!
//! envoyproxy/ratelimit counts in fixed windows aligned on the epoch, and so does a
//! rule here unless it names another algorithm: `gcra` (requests spread evenly over
//! the unit, at most `burst` at once: `requests_per_unit` unless the rule says less or
//! more) or `sliding-window-counter` (windows aligned on the epoch, no burst at a
//! window's edge). Algorithms Redis does not keep (the token bucket, which admits as
//! GCRA does, and the leaky buckets) are refused with the file's error.

use std::time::Duration;

use portero::{AlgorithmName, AnyAlgorithm, Quota};
use portero_redis::RedisAlgorithm;

use super::unit::Unit;

/// A rule's algorithm, with what it needs beyond `requests_per_unit` per unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shape {
    /// Fixed windows aligned on the Unix epoch (envoyproxy/ratelimit's; the default).
    FixedWindow,
    /// The sliding window counter over windows aligned on the epoch.
    SlidingWindowCounter,
    /// GCRA: at most `burst` requests at once, then `requests_per_unit` spread evenly
    /// over the unit.
    Gcra {
        /// Requests admitted at once.
        burst: u32,
    },
}

impl Shape {
    /// Every algorithm a rule may name, for errors.
    pub const NAMES: &'static str = "fixed-window, sliding-window-counter or gcra";

    /// The shape a rule's `algorithm` and `burst` ask for (neither: the fixed window).
    pub fn read(
        algorithm: Option<&str>,
        burst: Option<u32>,
        requests_per_unit: u32,
    ) -> Result<Self, String> {
        let name = match algorithm {
            None => AlgorithmName::FixedWindow,
            Some(n) => AlgorithmName::parse(n)
                .ok_or_else(|| format!("algorithm '{n}': expected {}", Self::NAMES))?,
        };
        match (name, burst) {
            (AlgorithmName::FixedWindow, None) => Ok(Self::FixedWindow),
            (AlgorithmName::SlidingWindowCounter, None) => Ok(Self::SlidingWindowCounter),
            (AlgorithmName::Gcra, None) => Ok(Self::Gcra {
                burst: requests_per_unit.max(1),
            }),
            (AlgorithmName::Gcra, Some(0)) => Err(
                "burst 0: GCRA admits at least one request at once (requests_per_unit: 0 refuses every request)"
                    .into(),
            ),
            (AlgorithmName::Gcra, Some(burst)) => Ok(Self::Gcra { burst }),
            (AlgorithmName::FixedWindow | AlgorithmName::SlidingWindowCounter, Some(_)) => Err(
                format!("burst is GCRA's: a {name} admits requests_per_unit in each window"),
            ),
            (other, _) => Err(format!(
                "algorithm '{other}' is not kept by the gateway (Redis has no such script): expected {}",
                Self::NAMES
            )),
        }
    }

    /// The algorithm's name.
    pub fn name(self) -> AlgorithmName {
        match self {
            Self::FixedWindow => AlgorithmName::FixedWindow,
            Self::SlidingWindowCounter => AlgorithmName::SlidingWindowCounter,
            Self::Gcra { .. } => AlgorithmName::Gcra,
        }
    }

    /// Whether a key's count starts again whole when the aligned window of its unit
    /// ends (a fixed window), rather than coming back over time.
    pub fn resets_on_the_window(self) -> bool {
        self == Self::FixedWindow
    }

    /// The most one request may ask for: more is never admitted.
    pub fn capacity(self, requests_per_unit: u32) -> u64 {
        match self {
            Self::Gcra { burst } => u64::from(burst),
            Self::FixedWindow | Self::SlidingWindowCounter => u64::from(requests_per_unit),
        }
    }

    /// `requests_per_unit` per unit, with GCRA's burst.
    fn quota(self, requests_per_unit: u32, unit: Unit) -> Result<Quota, String> {
        let nanos = unit.seconds() * 1_000_000_000;
        let quota = Quota::from_nanos(u64::from(requests_per_unit), nanos);
        match self {
            Self::Gcra { burst } => quota.and_then(|q| q.with_burst(u64::from(burst))),
            Self::FixedWindow | Self::SlidingWindowCounter => quota,
        }
        .map_err(|e| e.to_string())
    }

    /// The algorithm in memory, on a clock that reads the Unix epoch.
    pub fn in_memory(self, requests_per_unit: u32, unit: Unit) -> Result<AnyAlgorithm, String> {
        let quota = self.quota(requests_per_unit, unit)?;
        AnyAlgorithm::new(self.name(), quota).map_err(|e| e.to_string())
    }

    /// The algorithm in Redis (whole microseconds, as `portero-redis` counts).
    pub fn in_redis(self, requests_per_unit: u32, unit: Unit) -> Result<RedisAlgorithm, String> {
        let window = Duration::from_secs(unit.seconds());
        let limit = u64::from(requests_per_unit);
        let algorithm = match self {
            Self::FixedWindow => RedisAlgorithm::aligned_window(limit, window),
            Self::SlidingWindowCounter => RedisAlgorithm::sliding_counter(limit, window),
            Self::Gcra { .. } => RedisAlgorithm::gcra(self.quota(requests_per_unit, unit)?),
        };
        algorithm.map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_bursts_are_read_or_refused_by_name() {
        assert_eq!(Shape::read(None, None, 5), Ok(Shape::FixedWindow));
        assert_eq!(
            Shape::read(Some("gcra"), None, 5),
            Ok(Shape::Gcra { burst: 5 })
        );
        assert_eq!(
            Shape::read(Some("gcra"), Some(2), 5),
            Ok(Shape::Gcra { burst: 2 })
        );
        assert_eq!(
            Shape::read(Some("sliding-window-counter"), None, 5),
            Ok(Shape::SlidingWindowCounter)
        );
        for (algorithm, burst, says) in [
            (Some("GCRA"), None, "expected fixed-window"),
            (Some("token-bucket"), None, "not kept by the gateway"),
            (Some("sliding-log"), None, "not kept by the gateway"),
            (Some("gcra"), Some(0), "burst 0"),
            (None, Some(3), "burst is GCRA's"),
        ] {
            let e = Shape::read(algorithm, burst, 5).unwrap_err();
            assert!(e.contains(says), "{algorithm:?} {burst:?}: {e}");
        }
    }

    #[test]
    fn memory_and_redis_build_the_same_limit() {
        for shape in [
            Shape::FixedWindow,
            Shape::SlidingWindowCounter,
            Shape::Gcra { burst: 3 },
        ] {
            let memory = shape.in_memory(10, Unit::Minute).unwrap();
            let redis = shape.in_redis(10, Unit::Minute).unwrap();
            assert_eq!(memory.name(), shape.name());
            assert_eq!(redis.name(), shape.name());
            assert_eq!(redis.capacity(), shape.capacity(10), "{shape:?}");
        }
        // Beyond what either counts: an error, never a panic.
        // (a burst of four billion at one a year: a schedule 4·10⁹ years long).
        let absurd = Shape::Gcra { burst: u32::MAX };
        assert!(absurd.in_memory(1, Unit::Year).is_err());
        assert!(absurd.in_redis(1, Unit::Year).is_err());
    }
}
