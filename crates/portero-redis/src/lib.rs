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
//! - **Stacked, peeked, tiered.** [`RedisLimiter::check_all`] checks a user, a tenant
//!   and a global limit in one script call, all or none ([`StackedLimit`]);
//!   [`RedisLimiter::peek`] answers without charging; [`RedisLimiter::check_with`]
//!   takes the quota per call (plans and tiers without a limiter each).
//! - **Fewer round trips.** [`RedisLimiter::blocked_key_cache`] answers a key Redis
//!   has just refused locally until the refusal ends; [`LeasedLimiter`] borrows units
//!   in batches and spends them locally (its exact bound is in [`LeasedLimiter`]'s
//!   module). [`RedisLimiter::connect_cluster`] runs on a Redis Cluster.
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
//! With the `tower` feature, [`RedisLimiter`] and [`LeasedLimiter`] are stores of
//! portero-http's one pipeline, `LimitLayer`: the shared limit in front of an axum or
//! hyper service with every option of the layer (429, `Retry-After` and the
//! `RateLimit` fields, the same no-key, shadow, cost and refusal options as in
//! memory, stacked with in-memory limits), and `RateLimit-Source: fallback` plus
//! the fallback's own quota when the outage policy answered.
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
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs, missing_debug_implementations)]

mod algorithm;
#[cfg(feature = "tower")]
mod batch;
mod breakers;
mod cache;
mod call;
mod clock;
mod connection;
mod fallback;
mod lease;
mod limiter;
mod local;
mod outcome;
mod round_trip;
mod scripts;
mod settle;
mod stack;
#[cfg(feature = "tower")]
mod store;

pub use algorithm::{RedisAlgorithm, RedisQuotaError};
pub use call::Taken;
pub use lease::LeasedLimiter;
pub use limiter::RedisLimiter;
pub use local::{LocalCluster, LocalRedis};
pub use outcome::{RedisCheckError, ServedBy, Verdict, WhenDown};
pub use stack::{StackVerdict, StackedLimit};

// The crate's README (its crates.io page) is checked as a doc test too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
