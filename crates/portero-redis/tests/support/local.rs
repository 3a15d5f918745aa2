//! A real redis-server per test, and limiters on it that give Redis time to answer.

use std::time::Duration;

use portero_redis::{LeasedLimiter, LocalRedis, RedisAlgorithm, RedisLimiter};

/// How long the tests that expect Redis to answer let it take (a loaded CI machine).
pub const ANSWER: Duration = Duration::from_secs(5);

/// A fresh server per test; a missing redis-server fails the test (CI installs it).
pub fn start_redis() -> LocalRedis {
    LocalRedis::start().expect("redis-server for this test")
}

/// A limiter on `server` that gives Redis [`ANSWER`] to reply.
pub async fn answering(server: &LocalRedis, algorithm: RedisAlgorithm) -> RedisLimiter {
    RedisLimiter::connect(&server.url(), algorithm)
        .await
        .unwrap()
        .timeout(ANSWER)
}

/// Whether one check of `cost` units of `key` is admitted (an error fails the test).
pub async fn admits(limiter: &RedisLimiter, key: &str, cost: u64) -> bool {
    limiter
        .check(key, cost)
        .await
        .unwrap()
        .decision
        .is_allowed()
}

/// Late 2026, in µs: the instant the tests that give the time start at.
pub const START_US: u64 = 1_795_000_000_000_000;

/// Whether `key` would admit `cost` units at `now` (µs), taking nothing: how the twin
/// tests compare a key with its twin.
pub async fn would_admit(limiter: &RedisLimiter, key: &str, cost: u64, now: u64) -> bool {
    limiter
        .decide_at(key, cost, true, now)
        .await
        .unwrap()
        .is_allowed()
}

/// A command sent straight to the server, to look at what the scripts stored.
pub async fn query<T: redis::FromRedisValue>(server: &LocalRedis, command: &[&str]) -> T {
    let client = redis::Client::open(server.url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd(command[0])
        .arg(&command[1..])
        .query_async(&mut c)
        .await
        .unwrap()
}

/// `n` instances leasing `batch` units of `algorithm` at a time for `lease_for`, each
/// on its own connection to `server` set up by `each` (a fallback table of 100 keys).
#[allow(dead_code)] // each test binary uses the helpers it needs
pub async fn instances(
    server: &LocalRedis,
    algorithm: RedisAlgorithm,
    n: usize,
    batch: u64,
    lease_for: Duration,
    each: impl Fn(RedisLimiter) -> RedisLimiter,
) -> Vec<LeasedLimiter> {
    let mut instances = Vec::new();
    for _ in 0..n {
        let limiter = each(answering(server, algorithm).await);
        instances.push(LeasedLimiter::new(limiter, batch, lease_for, 100));
    }
    instances
}
