//! Which algorithm runs in Redis, with which quota, in the units the script uses.

use core::fmt;
use core::ops::Range;
use std::io::Write;
use std::time::Duration;

use portero::{AlgorithmName, Quota};

/// Largest schedule the scripts handle exactly: Lua numbers are doubles, and
/// `now + B·T` in µs must stay below 2^53.
const MAX_SPAN_US: u64 = 1 << 52;

/// The most entries a sliding log keeps per key.
const MAX_LOG_ENTRIES: u64 = 1_000_000;

/// Which algorithm the shared state runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RedisAlgorithm(Kind);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Gcra {
        interval_us: u64,
        burst: u64,
    },
    FixedWindow {
        limit: u64,
        window_us: u64,
        aligned: bool,
    },
    SlidingCounter {
        limit: u64,
        window_us: u64,
    },
    SlidingLog {
        limit: u64,
        window_us: u64,
    },
}

/// Why a quota cannot run in Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedisQuotaError {
    /// `burst × T` (or the window, or `limit × window` for the sliding counter) is
    /// beyond what the scripts compute exactly (2^52 µs, about 142 years), or a
    /// sliding log's limit is above 1,000,000 entries.
    TooLong,
    /// A zero limit or window.
    Empty,
    /// A key prefix with `{` or `}`: those delimit the user key's hash tag.
    PrefixHasBrace,
}

impl fmt::Display for RedisQuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::TooLong => {
                "the quota's span is longer than Redis scripts compute exactly (2^52 µs)"
            }
            Self::Empty => "a Redis quota needs a limit and a window above zero",
            Self::PrefixHasBrace => "a Redis key prefix may not contain '{' or '}'",
        })
    }
}

impl std::error::Error for RedisQuotaError {}

impl RedisAlgorithm {
    /// GCRA for `quota`. Redis keeps time in microseconds, so the emission interval
    /// is rounded **up** to a whole microsecond: never more than the quota, and for
    /// rates up to 1,000 per second per key less than 0.1 % below it.
    pub fn gcra(quota: Quota) -> Result<Self, RedisQuotaError> {
        let interval_us = quota.interval_nanos().div_ceil(1_000);
        let burst = quota.burst();
        match interval_us.checked_mul(burst) {
            Some(span) if span <= MAX_SPAN_US => Ok(Self(Kind::Gcra { interval_us, burst })),
            _ => Err(RedisQuotaError::TooLong),
        }
    }

    /// A fixed window of `limit` units per `window`, starting at a key's first
    /// admitted request (whole microseconds, rounded up). It admits up to `2 × limit`
    /// around a window's end; prefer [`gcra`](Self::gcra) unless you need windows.
    pub fn fixed_window(limit: u64, window: Duration) -> Result<Self, RedisQuotaError> {
        let window_us = window_us(limit, window, MAX_SPAN_US)?;
        Ok(Self(Kind::FixedWindow {
            limit,
            window_us,
            aligned: false,
        }))
    }

    /// A fixed window of `limit` units per `window` (whole microseconds, rounded up),
    /// windows aligned on Redis's clock: each starts at a whole multiple of `window`
    /// since the Unix epoch, whoever asks first, so every key's window of a minute
    /// ends on the minute (as envoyproxy/ratelimit counts, and as portero's
    /// in-memory [`FixedWindow`](portero::FixedWindow) counts on a clock that reads
    /// the epoch). Up to `2 × limit` around a window's end, like any fixed window.
    pub fn aligned_window(limit: u64, window: Duration) -> Result<Self, RedisQuotaError> {
        let window_us = window_us(limit, window, MAX_SPAN_US)?;
        Ok(Self(Kind::FixedWindow {
            limit,
            window_us,
            aligned: true,
        }))
    }

    /// A sliding window counter of `limit` units per `window` (whole microseconds,
    /// rounded up), windows aligned on Redis's clock: nearly exact (it assumes last
    /// window's requests were spread evenly), never more than `2 × limit` in any span
    /// of `window`, no boundary burst. The same rule as portero's
    /// [`SlidingWindowCounter`](portero::SlidingWindowCounter).
    pub fn sliding_counter(limit: u64, window: Duration) -> Result<Self, RedisQuotaError> {
        let window_us = whole_units(limit, window, 1_000)?;
        // Every product in the script is at most (L + 1)·W: keep it exact in doubles.
        match (limit + 1).checked_mul(window_us) {
            Some(lw) if lw <= MAX_SPAN_US => Ok(Self(Kind::SlidingCounter { limit, window_us })),
            _ => Err(RedisQuotaError::TooLong),
        }
    }

    /// A sliding log of `limit` units per `window` (whole microseconds, rounded up):
    /// exact, never more than `limit` in any span of `window`, at the price of one
    /// sorted-set entry per admitted request, carrying its cost (so at most `limit`
    /// entries per key; `limit` at most 1,000,000). For the limits where one extra
    /// hurts: logins, SMS, payments.
    pub fn sliding_log(limit: u64, window: Duration) -> Result<Self, RedisQuotaError> {
        let window_us = window_us(limit, window, MAX_LOG_ENTRIES)?;
        Ok(Self(Kind::SlidingLog { limit, window_us }))
    }

    /// The algorithm and quota as they appear in Redis keys: changing either starts
    /// from fresh keys instead of reading state written under other rules.
    /// Whether the algorithm keeps a second key (the sliding log's live-unit index).
    pub(crate) fn uses_second_key(&self) -> bool {
        matches!(self.0, Kind::SlidingLog { .. })
    }

    /// Whether a key's life is told by a generation (GCRA, the sliding counter): a
    /// reset then leaves its mark (see `scripts::RESET`).
    pub(crate) fn has_generation(&self) -> bool {
        matches!(self.0, Kind::Gcra { .. } | Kind::SlidingCounter { .. })
    }

    pub(crate) fn key_suffix(&self) -> String {
        let name = self.name();
        match self.0 {
            Kind::Gcra { interval_us, burst } => format!("{name}:{interval_us}us:{burst}"),
            // Aligned windows keep their start elsewhere: never the same key.
            Kind::FixedWindow {
                limit,
                window_us,
                aligned: true,
            } => format!("{name}:aligned:{limit}:{window_us}us"),
            Kind::FixedWindow {
                limit, window_us, ..
            }
            | Kind::SlidingCounter { limit, window_us }
            | Kind::SlidingLog { limit, window_us } => format!("{name}:{limit}:{window_us}us"),
        }
    }

    /// The algorithm's name, as portero spells it everywhere.
    pub fn name(&self) -> AlgorithmName {
        match self.0 {
            Kind::Gcra { .. } => AlgorithmName::Gcra,
            Kind::FixedWindow { .. } => AlgorithmName::FixedWindow,
            Kind::SlidingCounter { .. } => AlgorithmName::SlidingWindowCounter,
            Kind::SlidingLog { .. } => AlgorithmName::SlidingLog,
        }
    }

    /// The script's arguments for this algorithm: its number and two parameters.
    pub(crate) fn script_args(&self) -> [u64; 3] {
        match self.0 {
            Kind::Gcra { interval_us, burst } => [1, interval_us, burst],
            Kind::FixedWindow {
                limit,
                window_us,
                aligned,
            } => [if aligned { 5 } else { 2 }, limit, window_us],
            Kind::SlidingCounter { limit, window_us } => [3, limit, window_us],
            Kind::SlidingLog { limit, window_us } => [4, limit, window_us],
        }
    }

    /// The most units one request may cost.
    pub fn capacity(&self) -> u64 {
        match self.0 {
            Kind::Gcra { burst, .. } => burst,
            Kind::FixedWindow { limit, .. }
            | Kind::SlidingCounter { limit, .. }
            | Kind::SlidingLog { limit, .. } => limit,
        }
    }
}

/// `window` in whole microseconds (rounded up) for a window limit of `limit` units,
/// at most `max_limit`; both within what the scripts count exactly.
fn window_us(limit: u64, window: Duration, max_limit: u64) -> Result<u64, RedisQuotaError> {
    let window_us = whole_units(limit, window, 1_000)?;
    if window_us > MAX_SPAN_US || limit > max_limit {
        return Err(RedisQuotaError::TooLong);
    }
    Ok(window_us)
}

/// `window` in whole units of `unit_ns` (rounded up), for a `limit`: both above zero.
fn whole_units(limit: u64, window: Duration, unit_ns: u128) -> Result<u64, RedisQuotaError> {
    let units =
        u64::try_from(window.as_nanos().div_ceil(unit_ns)).map_err(|_| RedisQuotaError::TooLong)?;
    if limit == 0 || units == 0 {
        return Err(RedisQuotaError::Empty);
    }
    Ok(units)
}

/// The Redis keys of `key` under `algorithm`: `prefix{length:key}:algorithm:quota`, and
/// the same with `:n` for the sliding log's second key (see
/// [`RedisLimiter::key_for`](crate::RedisLimiter::key_for)).
pub(crate) fn redis_keys(prefix: &str, key: &str, algorithm: &RedisAlgorithm) -> [String; 2] {
    let suffix = algorithm.key_suffix();
    user_keys(prefix, &suffix, algorithm, |out| out.push_str(key)).0
}

/// The same keys for the user key `write` writes (its text), built in one buffer
/// with the text written once, straight from a typed key; and where the text lies
/// in the first key. `suffix` is the algorithm's [`key_suffix`](RedisAlgorithm::key_suffix).
pub(crate) fn user_keys(
    prefix: &str,
    suffix: &str,
    algorithm: &RedisAlgorithm,
    write: impl FnOnce(&mut String),
) -> ([String; 2], Range<usize>) {
    // Room for most keys (an IPv6 address, an API key) without growing.
    let mut main = String::with_capacity(prefix.len() + suffix.len() + 96);
    main.push_str(prefix);
    main.push('{');
    let at = main.len();
    write(&mut main);
    let len = main.len() - at;
    // `length:` goes before the text, now that its length is known.
    let mut digits = [0u8; 24];
    let mut cursor = &mut digits[..];
    let _ = write!(cursor, "{len}:");
    let room = cursor.len();
    let written = digits.len() - room;
    let head = core::str::from_utf8(&digits[..written]).unwrap_or("0:");
    main.insert_str(at, head);
    let text = at + head.len()..at + head.len() + len;
    main.push_str("}:");
    main.push_str(suffix);
    (with_second_key(main, algorithm), text)
}

/// The keys of the bucket that checks without a key share: `{*}` where a user key
/// has `{length:key}`, so no user key names it.
pub(crate) fn anonymous_keys(prefix: &str, algorithm: &RedisAlgorithm) -> [String; 2] {
    with_second_key(
        format!("{prefix}{{*}}:{}", algorithm.key_suffix()),
        algorithm,
    )
}

/// `main` and, for the one algorithm that keeps two (the sliding log's index), its
/// second key; an empty string otherwise. A script declares only the keys its
/// algorithm uses: during a Cluster slot migration Redis refuses any call declaring
/// several keys (`TRYAGAIN`), so a second key nobody reads would turn every migration
/// into an outage.
pub(crate) fn with_second_key(main: String, algorithm: &RedisAlgorithm) -> [String; 2] {
    let second = if algorithm.uses_second_key() {
        format!("{main}:n")
    } else {
        String::new()
    };
    [main, second]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_nested_prefixes_and_hostile_user_keys_never_meet() {
        let a = RedisAlgorithm::gcra(Quota::per_minute(3).unwrap()).unwrap();
        let b = RedisAlgorithm::gcra(Quota::per_minute(4).unwrap()).unwrap();
        let key = |p, k, alg| redis_keys(p, k, alg)[0].clone();
        assert_ne!(key("rl:", "login:bob", &a), key("rl:login:", "bob", &a));
        assert_ne!(key("rl:", "bob", &a), key("rl:", "bob", &b));
        let hostile = "bob}:gcra:20000000us:3";
        assert_ne!(key("rl:", hostile, &a), key("rl:", "bob", &a));
        assert_eq!(key("p:", "x}y", &a), "p:{3:x}y}:gcra:20000000us:3");
    }

    #[test]
    fn a_key_written_in_place_is_the_key_of_its_text() {
        let alg = RedisAlgorithm::sliding_log(3, Duration::from_secs(60)).unwrap();
        let long = "k".repeat(300);
        for text in ["", "bob", "ip:2001:db8::1", long.as_str()] {
            let (keys, at) = user_keys("p:", &alg.key_suffix(), &alg, |o| o.push_str(text));
            assert_eq!(keys, redis_keys("p:", text, &alg));
            assert_eq!(&keys[0][at], text);
            assert_eq!(
                keys[0],
                format!("p:{{{}:{text}}}:{}", text.len(), alg.key_suffix())
            );
        }
    }
}
