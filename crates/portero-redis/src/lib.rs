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
//!   and both admit (the seeds' race: 400 concurrent requests against a limit of 50
//!   admit exactly 50, tested here).
//! - **One clock.** The scripts read Redis's `TIME`, not the instance's clock, so
//!   instances whose clocks disagree still agree on windows and schedules.
//! - **Bounded.** Keys expire when they would be full again (GCRA) or when their
//!   window ends, so idle clients leave nothing behind.
//! - **An explicit outage policy.** A check that Redis does not answer within the
//!   timeout (default 50 ms) is decided by [`WhenDown`]: admit, deny, or an
//!   approximate limit in the instance's own memory. [`Verdict::served_by`] says
//!   which answered.
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
#![deny(missing_docs)]

#[cfg(feature = "tower")]
mod layer;
mod local;
mod scripts;

#[cfg(feature = "tower")]
pub use layer::{RedisRateLimitLayer, RedisRateLimitService};
pub use local::LocalRedis;

use core::fmt;
use std::sync::Arc;
use std::time::Duration;

use portero::{CheckError, Decision, Gcra, KeyedLimiter, Quota};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, Script};

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
}

impl fmt::Display for RedisQuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::TooLong => {
                "the quota's span is longer than Redis scripts compute exactly (2^52 µs)"
            }
            Self::Empty => "a Redis quota needs a limit and a window above zero",
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
        let window_ms = u64::try_from(window.as_nanos().div_ceil(1_000_000))
            .map_err(|_| RedisQuotaError::TooLong)?;
        if limit == 0 || window_ms == 0 {
            return Err(RedisQuotaError::Empty);
        }
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
        let window_us = u64::try_from(window.as_nanos().div_ceil(1_000))
            .map_err(|_| RedisQuotaError::TooLong)?;
        if limit == 0 || window_us == 0 {
            return Err(RedisQuotaError::Empty);
        }
        // Every product in the script is at most (L + 1)·W: keep it exact in doubles.
        match (limit + 1).checked_mul(window_us) {
            Some(lw) if lw <= MAX_SPAN_US => Ok(Self(Kind::SlidingCounter { limit, window_us })),
            _ => Err(RedisQuotaError::TooLong),
        }
    }

    /// A sliding log of `limit` units per `window` (whole microseconds, rounded up):
    /// exact, never more than `limit` in any span of `window`, at the price of one
    /// sorted-set entry per admitted unit (up to `limit` per key; at most 1,000,000).
    /// For the limits where one extra hurts: logins, SMS, payments.
    pub fn sliding_log(limit: u64, window: Duration) -> Result<Self, RedisQuotaError> {
        let window_us = u64::try_from(window.as_nanos().div_ceil(1_000))
            .map_err(|_| RedisQuotaError::TooLong)?;
        if limit == 0 || window_us == 0 {
            return Err(RedisQuotaError::Empty);
        }
        if limit > MAX_LOG_ENTRIES || window_us > MAX_SPAN_US {
            return Err(RedisQuotaError::TooLong);
        }
        Ok(Self(Kind::SlidingLog { limit, window_us }))
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
        let connection = ConnectionManager::new_with_config(client, config).await?;
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
        })
    }

    /// Prefixes every key with `prefix` (default `portero:`): limiters with different
    /// quotas must not share a prefix.
    pub fn prefix(mut self, prefix: &str) -> Self {
        self.prefix = Arc::from(prefix);
        self
    }

    /// How long a check waits for Redis before the outage policy decides.
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
    pub async fn check(&self, key: &str, cost: u64) -> Result<Verdict, CheckError> {
        let capacity = self.algorithm.capacity();
        if cost > capacity {
            return Err(CheckError::CostExceedsCapacity { cost, capacity });
        }
        let mut invocation = self.script.key(format!("{}{key}", self.prefix));
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
            invocation.invoke_async::<(u8, u64, u64, u64)>(&mut connection),
        )
        .await;
        match answer {
            Ok(Ok((allowed, remaining, retry_us, reset_us))) => Ok(Verdict {
                decision: Decision::new(
                    allowed == 1,
                    capacity,
                    remaining,
                    1,
                    retry_us.saturating_mul(1_000),
                    reset_us.saturating_mul(1_000),
                ),
                served_by: ServedBy::Redis,
            }),
            // Timed out, or an error (connection refused, reset, a script error).
            _ => self.fallback(key, cost),
        }
    }

    fn fallback(&self, key: &str, cost: u64) -> Result<Verdict, CheckError> {
        let capacity = self.algorithm.capacity();
        let decision = match &self.when_down {
            WhenDown::FailOpen => Decision::new(true, capacity, capacity - cost, 1, 0, 0),
            WhenDown::FailClosed => {
                Decision::new(false, capacity, 0, 1, 1_000_000_000, 1_000_000_000)
            }
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
        redis::cmd("DEL")
            .arg(format!("{}{key}", self.prefix))
            .query_async(&mut connection)
            .await
    }
}
