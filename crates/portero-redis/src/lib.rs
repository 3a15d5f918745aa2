//! portero's limits shared by every instance of a service, in Redis.
//!
//! When a service runs as several instances behind a load balancer, limits counted in
//! each instance's memory add up: three instances with 100 per minute each let a
//! client through 300 times a minute. [`RedisLimiter`] keeps the state in Redis
//! instead, where every instance reads and writes it:
//!
//! - **Four algorithms**: [GCRA](RedisAlgorithm::gcra) (the default choice: bursts of
//!   `B`, `r` on average, exact retry-after), the
//!   [sliding window counter](RedisAlgorithm::sliding_counter), the exact
//!   [sliding log](RedisAlgorithm::sliding_log) and the
//!   [fixed window](RedisAlgorithm::fixed_window), each with the same rule as the
//!   in-memory algorithm of the same name.
//! - **Atomic.** Each check is one Lua script: read, decide and write run with no
//!   other command in between, so two instances can never both see "9 of 10 used"
//!   and both admit (the Redis race: 400 concurrent requests against a limit of 50
//!   admit exactly 50, tested here).
//! - **One clock.** The scripts read Redis's `TIME`, not the instance's clock, so
//!   instances whose clocks disagree still agree on windows and schedules.
//! - **Bounded.** Keys expire when they would be full again (GCRA) or when their
//!   window ends, so idle clients leave nothing behind. A sliding log stores one
//!   entry per request (carrying its cost), so no single request can make a script
//!   do work in proportion to its cost.
//! - **Keys that cannot collide.** A user key is stored length-prefixed inside a
//!   `{…}` hash tag, after the limiter's prefix and before the algorithm and quota
//!   ([`RedisLimiter::key_for`]): limiters with nested prefixes, other quotas or
//!   other algorithms never share a Redis key whatever the user key is, and every
//!   key of one user lands in one Redis Cluster slot.
//! - **Errors are errors.** A reply Redis gives with an error (a key of the wrong
//!   type, a script error) is returned as [`RedisCheckError::Redis`], counted
//!   ([`RedisLimiter::errors`]) and logged with `tracing`; only a Redis that does not
//!   answer (down, unreachable, slow, loading, failing over) is an outage.
//! - **Redis 5.0 or newer**, checked at connect (the scripts read `TIME` before they
//!   write, which older servers refuse).
//! - **An explicit outage policy.** A check that Redis does not answer within the
//!   timeout (default 50 ms) is decided by [`WhenDown`]: admit, deny, or an
//!   approximate limit in the instance's own memory. [`Verdict::served_by`] says
//!   which answered. The script carries the check's deadline on Redis's clock and
//!   does nothing once past it, so a request the policy answered is not charged again
//!   when a stalled Redis catches up (the bound is on [`RedisLimiter::timeout`]).
//!
//! With the `tower` feature, `RedisRateLimitLayer` puts the shared limit in front of
//! an axum or hyper service (429, `Retry-After` and the `RateLimit` fields, from
//! portero-http).
//!
//! Asynchronous replication can lose the last writes when a primary fails over: for
//! a moment a client may get more than its limit. That drift is accepted here, as it
//! is by most Redis-based limiters; it cannot be fixed without a consensus store.
//!
//! ```no_run
//! use portero::Quota;
//! use portero_redis::{RedisAlgorithm, RedisLimiter, WhenDown};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let per_client = RedisLimiter::connect(
//!     "redis://127.0.0.1:6379",
//!     RedisAlgorithm::gcra(Quota::per_minute(100)?)?,
//! )
//! .await?
//! .when_down(WhenDown::FailOpen);
//! let verdict = per_client.check("client-42", 1).await?;
//! if !verdict.decision.is_allowed() {
//!     // 429 with Retry-After: verdict.decision.retry_after()
//! }
//! # Ok(()) }
//! ```
#![deny(missing_docs, missing_debug_implementations)]

#[cfg(feature = "tower")]
mod layer;
mod local;
mod scripts;

#[cfg(feature = "tower")]
pub use layer::{RedisRateLimitFuture, RedisRateLimitLayer, RedisRateLimitService};
pub use local::LocalRedis;

use core::fmt;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use portero::{AlgorithmName, CheckError, Decision, Gcra, KeyedError, KeyedLimiter, Quota};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ErrorKind, RedisError, Script};

/// The oldest Redis the scripts run on.
const MIN_REDIS_MAJOR: u64 = 5;

/// Largest schedule the scripts handle exactly: Lua numbers are doubles, and
/// `now + B·T` in µs must stay below 2^53.
const MAX_SPAN_US: u64 = 1 << 52;

/// The most entries a sliding log keeps per key.
const MAX_LOG_ENTRIES: u64 = 1_000_000;

/// Which algorithm the shared state runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedisAlgorithm(Kind);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Gcra { interval_us: u64, burst: u64 },
    FixedWindow { limit: u64, window_ms: u64 },
    SlidingCounter { limit: u64, window_us: u64 },
    SlidingLog { limit: u64, window_us: u64 },
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
    /// admitted request (whole milliseconds, rounded up). It admits up to `2 × limit`
    /// around a window's end; prefer [`gcra`](Self::gcra) unless you need windows.
    pub fn fixed_window(limit: u64, window: Duration) -> Result<Self, RedisQuotaError> {
        let window_ms = whole_units(limit, window, 1_000_000)?;
        if window_ms > MAX_SPAN_US / 1_000 || limit > MAX_SPAN_US {
            return Err(RedisQuotaError::TooLong);
        }
        Ok(Self(Kind::FixedWindow { limit, window_ms }))
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
        let window_us = whole_units(limit, window, 1_000)?;
        if limit > MAX_LOG_ENTRIES || window_us > MAX_SPAN_US {
            return Err(RedisQuotaError::TooLong);
        }
        Ok(Self(Kind::SlidingLog { limit, window_us }))
    }

    /// The algorithm and quota as they appear in Redis keys: changing either starts
    /// from fresh keys instead of reading state written under other rules.
    fn key_suffix(&self) -> String {
        let name = self.name();
        match self.0 {
            Kind::Gcra { interval_us, burst } => format!("{name}:{interval_us}us:{burst}"),
            Kind::FixedWindow { limit, window_ms } => format!("{name}:{limit}:{window_ms}ms"),
            Kind::SlidingCounter { limit, window_us } | Kind::SlidingLog { limit, window_us } => {
                format!("{name}:{limit}:{window_us}us")
            }
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

/// `window` in whole units of `unit_ns` (rounded up), for a `limit`: both above zero.
fn whole_units(limit: u64, window: Duration, unit_ns: u128) -> Result<u64, RedisQuotaError> {
    let units =
        u64::try_from(window.as_nanos().div_ceil(unit_ns)).map_err(|_| RedisQuotaError::TooLong)?;
    if limit == 0 || units == 0 {
        return Err(RedisQuotaError::Empty);
    }
    Ok(units)
}

/// What a check does when Redis does not answer in time (down, unreachable, slow).
#[derive(Debug, Clone)]
pub enum WhenDown {
    /// Admit: availability over protection.
    FailOpen,
    /// Deny, with `Retry-After` of one second: protection over availability.
    FailClosed,
    /// Decide with a limiter in this instance's memory — an approximate limit (give
    /// it the quota divided by the number of instances) for the time Redis is away.
    Local(Arc<KeyedLimiter<str, Gcra>>),
}

/// Who decided a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServedBy {
    /// The shared state in Redis.
    Redis,
    /// The [`WhenDown`] policy, because Redis did not answer in time.
    Fallback,
}

/// A decision, and who made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// The decision (times converted from Redis's microseconds to nanoseconds).
    pub decision: Decision,
    /// Redis, or the outage policy.
    pub served_by: ServedBy,
}

/// Why a check could not be decided.
#[derive(Debug)]
#[non_exhaustive]
pub enum RedisCheckError {
    /// Bad input, found before Redis was asked (a cost above the capacity).
    Check(CheckError),
    /// The [`WhenDown::Local`] fallback's table was full: a new key it could not
    /// track (the layer denies it for a second).
    LocalTableFull {
        /// The local table's key cap.
        max_keys: u64,
    },
    /// Redis answered, with an error: a key holding another type, a script error, a
    /// reply of the wrong shape. Not an outage: the outage policy does not apply.
    Redis(RedisError),
}

impl fmt::Display for RedisCheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Check(e) => e.fmt(f),
            Self::LocalTableFull { max_keys } => write!(
                f,
                "Redis did not answer and the local fallback's table is full ({max_keys} keys)"
            ),
            Self::Redis(e) => write!(f, "Redis answered with an error: {e}"),
        }
    }
}

impl std::error::Error for RedisCheckError {}

impl From<CheckError> for RedisCheckError {
    fn from(e: CheckError) -> Self {
        Self::Check(e)
    }
}

impl From<KeyedError> for RedisCheckError {
    fn from(e: KeyedError) -> Self {
        match e {
            KeyedError::Check(e) => Self::Check(e),
            KeyedError::KeyTableFull { max_keys } => Self::LocalTableFull { max_keys },
            // KeyedError is non-exhaustive: a future variant is still a local refusal.
            _ => Self::LocalTableFull { max_keys: 0 },
        }
    }
}

/// Redis's clock as seen from this process: `redis_µs − local_µs`, re-estimated from
/// every answer (the middle of the round trip it came in, so its error is at most
/// half that round trip).
#[derive(Debug)]
struct RedisClock {
    base: Instant,
    offset_us: AtomicI64,
}

impl RedisClock {
    fn local_us(&self) -> i64 {
        i64::try_from(self.base.elapsed().as_micros()).unwrap_or(i64::MAX)
    }

    /// Records Redis's `now` from an answer to a call sent at `sent` (local µs).
    fn observe(&self, sent: i64, redis_now: u64) {
        let middle = sent + (self.local_us() - sent) / 2;
        let offset = i64::try_from(redis_now).unwrap_or(i64::MAX) - middle;
        self.offset_us.store(offset, Ordering::Relaxed);
    }

    /// `local` µs from now, on Redis's clock.
    fn redis_time_in(&self, from: i64, after: Duration) -> u64 {
        let after = i64::try_from(after.as_micros()).unwrap_or(i64::MAX);
        let t = from
            .saturating_add(after)
            .saturating_add(self.offset_us.load(Ordering::Relaxed));
        u64::try_from(t).unwrap_or(0).max(1)
    }
}

/// A limit whose state lives in Redis, shared by every instance that uses the same
/// key prefix and algorithm. Cloning is cheap and shares the connection.
#[derive(Clone)]
pub struct RedisLimiter {
    connection: ConnectionManager,
    algorithm: RedisAlgorithm,
    script: Arc<Script>,
    prefix: Arc<str>,
    timeout: Duration,
    when_down: WhenDown,
    clock: Arc<RedisClock>,
    errors: Arc<AtomicU64>,
}

impl fmt::Debug for RedisLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLimiter")
            .field("algorithm", &self.algorithm)
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("when_down", &self.when_down)
            .finish_non_exhaustive()
    }
}

const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

impl RedisLimiter {
    /// Connects to `url` (e.g. `redis://127.0.0.1:6379`). Fails if Redis cannot be
    /// reached now; afterwards the connection is re-established in the background and
    /// checks that find it down follow [`WhenDown`] (default: [`WhenDown::FailClosed`]).
    pub async fn connect(url: &str, algorithm: RedisAlgorithm) -> Result<Self, RedisError> {
        let client = redis::Client::open(url)?;
        // No response timeout on the connection: each check bounds its own wait
        // (`timeout`), so a caller who allows more time gets it.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(CONNECT_TIMEOUT)
            .set_number_of_retries(1);
        let mut connection = ConnectionManager::new_with_config(client, config).await?;
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut connection)
            .await?;
        check_version(&info)?;
        let clock = RedisClock {
            base: Instant::now(),
            offset_us: AtomicI64::new(0),
        };
        let sent = clock.local_us();
        let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut connection).await?;
        clock.observe(sent, secs * 1_000_000 + micros);
        let script = match algorithm.0 {
            Kind::Gcra { .. } => scripts::GCRA,
            Kind::FixedWindow { .. } => scripts::FIXED_WINDOW,
            Kind::SlidingCounter { .. } => scripts::SLIDING_COUNTER,
            Kind::SlidingLog { .. } => scripts::SLIDING_LOG,
        };
        Ok(Self {
            connection,
            algorithm,
            script: Arc::new(Script::new(script)),
            prefix: Arc::from("portero:"),
            timeout: DEFAULT_TIMEOUT,
            when_down: WhenDown::FailClosed,
            clock: Arc::new(clock),
            errors: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Starts every key with `prefix` (default `portero:`), e.g. to keep one
    /// service's limits apart from another's. Keys never collide across limiters
    /// whatever the prefixes (see [`key_for`](Self::key_for)), but a prefix may not
    /// contain `{` or `}`.
    pub fn prefix(mut self, prefix: &str) -> Result<Self, RedisQuotaError> {
        if prefix.contains(['{', '}']) {
            return Err(RedisQuotaError::PrefixHasBrace);
        }
        self.prefix = Arc::from(prefix);
        Ok(self)
    }

    /// The Redis key that holds `key`'s state:
    /// `prefix{length:key}:algorithm:quota` (the sliding log adds a second key with
    /// `:n` appended). The user key is length-prefixed, so no user key can reach
    /// into the algorithm or quota part, and a prefix without braces cannot reach
    /// into the user key; the `{…}` hash tag puts all of one user's keys in one
    /// Redis Cluster slot.
    pub fn key_for(&self, key: &str) -> String {
        redis_key(&self.prefix, key, &self.algorithm)
    }

    /// How many checks Redis answered with an error ([`RedisCheckError::Redis`]).
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// How long a check waits for Redis before the outage policy decides.
    ///
    /// The script is sent with a deadline of `timeout` from now on Redis's clock and
    /// does nothing past it. A request the outage policy answered can still be
    /// charged in Redis only if its script started within the last stretch of the
    /// timeout that its answer needed to travel back, plus the error of the clock
    /// estimate (half the round trip of the answer it came from): a fraction of a
    /// millisecond on one network, never a stalled queue of scripts.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The outage policy.
    pub fn when_down(mut self, policy: WhenDown) -> Self {
        self.when_down = policy;
        self
    }

    /// Checks `cost` units for `key`, taking them if admitted (all or nothing).
    ///
    /// A cost above the algorithm's capacity is an error, decided before Redis is
    /// asked. Redis being down is not an error: the [`WhenDown`] policy decides and
    /// the verdict says so.
    pub async fn check(&self, key: &str, cost: u64) -> Result<Verdict, RedisCheckError> {
        let capacity = self.algorithm.capacity();
        if cost > capacity {
            return Err(CheckError::CostExceedsCapacity { cost, capacity }.into());
        }
        let redis_key = self.key_for(key);
        let mut invocation = self.script.key(&redis_key);
        if let Kind::SlidingLog { .. } = self.algorithm.0 {
            invocation.key(format!("{redis_key}:n"));
        }
        let sent = self.clock.local_us();
        invocation.arg(self.clock.redis_time_in(sent, self.timeout));
        match self.algorithm.0 {
            Kind::Gcra { interval_us, burst } => invocation.arg(interval_us).arg(burst),
            Kind::FixedWindow { limit, window_ms } => invocation.arg(limit).arg(window_ms),
            Kind::SlidingCounter { limit, window_us } | Kind::SlidingLog { limit, window_us } => {
                invocation.arg(limit).arg(window_us)
            }
        };
        invocation.arg(cost);
        let mut connection = self.connection.clone();
        let answer = tokio::time::timeout(
            self.timeout,
            invocation.invoke_async::<(u8, u64, u64, u64, u64)>(&mut connection),
        )
        .await;
        match answer {
            Ok(Ok((outcome @ (0 | 1), remaining, retry_us, reset_us, now))) => {
                self.clock.observe(sent, now);
                Ok(Verdict {
                    decision: Decision::new(
                        outcome == 1,
                        capacity,
                        remaining,
                        1,
                        retry_us.saturating_mul(1_000),
                        reset_us.saturating_mul(1_000),
                    ),
                    served_by: ServedBy::Redis,
                })
            }
            // Too late on Redis's clock: nothing was charged; as slow as an outage.
            Ok(Ok((_, _, _, _, now))) => {
                self.clock.observe(sent, now);
                self.fallback(key, cost)
            }
            Ok(Err(e)) if !is_outage(&e) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                tracing::error!(key = %redis_key, error = %e, "portero-redis: Redis answered a check with an error");
                Err(RedisCheckError::Redis(e))
            }
            // Timed out, or Redis unreachable, loading or failing over.
            _ => self.fallback(key, cost),
        }
    }

    fn fallback(&self, key: &str, cost: u64) -> Result<Verdict, RedisCheckError> {
        let capacity = self.algorithm.capacity();
        let decision = match &self.when_down {
            WhenDown::FailOpen => Decision::admitted(capacity, capacity - cost, 0),
            WhenDown::FailClosed => Decision::deny_for(capacity, portero::DENY_FOR_NANOS),
            WhenDown::Local(local) => local.check_n(key, cost)?,
        };
        Ok(Verdict {
            decision,
            served_by: ServedBy::Fallback,
        })
    }

    /// Forgets `key` in Redis: its next request finds a full limit.
    pub async fn reset(&self, key: &str) -> Result<(), RedisError> {
        let mut connection = self.connection.clone();
        let redis_key = self.key_for(key);
        redis::cmd("DEL")
            .arg(&redis_key)
            .arg(format!("{redis_key}:n"))
            .query_async(&mut connection)
            .await
    }
}

/// `prefix{length:key}:algorithm:quota` (see [`RedisLimiter::key_for`]).
fn redis_key(prefix: &str, key: &str, algorithm: &RedisAlgorithm) -> String {
    format!("{prefix}{{{}:{key}}}:{}", key.len(), algorithm.key_suffix())
}

/// Whether an error means Redis is away (the outage policy decides) rather than an
/// answer (a wrong-type key, a script error: returned as errors).
fn is_outage(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || matches!(
            e.kind(),
            ErrorKind::BusyLoadingError
                | ErrorKind::TryAgain
                | ErrorKind::ClusterDown
                | ErrorKind::MasterDown
                | ErrorKind::ReadOnly
                | ErrorKind::ClusterConnectionNotFound
        )
        // A long script holds the server: it will answer, just not in time.
        || e.code() == Some("BUSY")
}

/// Refuses servers older than Redis 5 (from `INFO server`'s `redis_version`).
fn check_version(info: &str) -> Result<(), RedisError> {
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .map(str::trim)
        .unwrap_or("");
    let major = version
        .split('.')
        .next()
        .and_then(|m| m.parse::<u64>().ok());
    match major {
        Some(m) if m >= MIN_REDIS_MAJOR => Ok(()),
        _ => Err(RedisError::from((
            ErrorKind::ClientError,
            "portero-redis needs Redis 5.0 or newer",
            format!("the server reports version {version:?}"),
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_before_redis_5_are_refused_by_name() {
        let info = |v: &str| format!("# Server\r\nredis_version:{v}\r\nredis_mode:standalone\r\n");
        assert!(check_version(&info("7.0.15")).is_ok());
        assert!(check_version(&info("5.0.0")).is_ok());
        for old in ["4.0.14", "3.2.12", "garbage", ""] {
            let e = check_version(&info(old)).unwrap_err();
            assert!(e.to_string().contains("Redis 5.0 or newer"), "{e}");
        }
        assert!(check_version("no version here").is_err());
    }

    #[test]
    fn keys_of_nested_prefixes_and_hostile_user_keys_never_meet() {
        let a = RedisAlgorithm::gcra(Quota::per_minute(3).unwrap()).unwrap();
        let b = RedisAlgorithm::gcra(Quota::per_minute(4).unwrap()).unwrap();
        assert_ne!(
            redis_key("rl:", "login:bob", &a),
            redis_key("rl:login:", "bob", &a)
        );
        assert_ne!(redis_key("rl:", "bob", &a), redis_key("rl:", "bob", &b));
        let hostile = "bob}:gcra:20000000us:3";
        assert_ne!(redis_key("rl:", hostile, &a), redis_key("rl:", "bob", &a));
        assert_eq!(redis_key("p:", "x}y", &a), "p:{3:x}y}:gcra:20000000us:3");
    }
}
