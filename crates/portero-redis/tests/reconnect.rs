//! Redis coming back: after redis-server is killed and started again on its port, the
//! first check through a limiter that was connected all along is decided by Redis
//! (the connection it held went stale with the old server: that check used to fail in
//! about a millisecond, even seconds after Redis was back), and a breaker's probe that
//! finds Redis back closes the breaker instead of opening it again on the stale
//! connection.

use std::time::Duration;

use portero::Quota;
use portero_redis::{LocalRedis, RedisAlgorithm, RedisLimiter, ServedBy};

fn per_minute(n: u64) -> RedisAlgorithm {
    RedisAlgorithm::gcra(Quota::per_minute(n).unwrap()).unwrap()
}

/// A server, its port (for starting it again there), and a limiter connected to it
/// that Redis has answered once.
async fn connected() -> (LocalRedis, u16, RedisLimiter) {
    let server = LocalRedis::start().expect("redis-server for this test");
    let port = server.url().rsplit(':').next().unwrap().parse().unwrap();
    let limiter = RedisLimiter::connect(&server.url(), per_minute(100))
        .await
        .unwrap()
        .timeout(Duration::from_secs(2));
    assert_eq!(
        limiter.check("k", 1).await.unwrap().served_by,
        ServedBy::Redis
    );
    (server, port, limiter)
}

/// A redis-server started again on `port`, `ms` later.
async fn back_after(port: u16, ms: u64) -> LocalRedis {
    let back = LocalRedis::start_on(port).expect("redis-server again on its port");
    tokio::time::sleep(Duration::from_millis(ms)).await;
    back
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_check_after_redis_is_back_is_decided_by_redis() {
    let (mut server, port, limiter) = connected().await;
    // Killed and started again while no check was made: the limiter still holds the
    // connection to the old server.
    server.stop();
    let _back = back_after(port, 500).await;
    let first = limiter.check("k", 1).await.unwrap();
    // Decided by Redis, a new server: only this unit used.
    let answer = (first.served_by, first.decision.remaining());
    assert_eq!(
        answer,
        (ServedBy::Redis, 99),
        "the first check after Redis is back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breaker_probe_that_finds_redis_back_closes_the_breaker() {
    let (mut server, port, limiter) = connected().await;
    let limiter = limiter.breaker(3, Duration::from_millis(500)).unwrap();
    server.stop();
    for _ in 0..3 {
        let answer = limiter.check("k", 1).await.unwrap();
        assert_eq!(answer.served_by, ServedBy::Fallback);
    }
    // Open now. Redis comes back while it is; once its 500 ms are over, the next
    // check probes Redis, on the connection that failed three times.
    let _back = back_after(port, 800).await;
    let probe = limiter.check("k", 1).await.unwrap();
    assert_eq!(
        probe.served_by,
        ServedBy::Redis,
        "the probe finds Redis back"
    );
    assert_eq!(
        limiter.check("k", 1).await.unwrap().served_by,
        ServedBy::Redis
    );
}

/// Checks made while Redis is away (each answered by the outage policy) leave the
/// connection reconnecting to nothing; the first check once Redis is back is still
/// decided by Redis (it used to be answered by the policy: the connection manager
/// handed it the refusal of its last attempt, and only the check after reconnected).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checks_made_while_redis_was_away_leave_its_return_to_the_first_check() {
    let (mut server, port, limiter) = connected().await;
    let limiter = limiter.timeout(Duration::from_millis(200));
    server.stop();
    for _ in 0..5 {
        let answer = limiter.check("k", 1).await.unwrap();
        assert_eq!(answer.served_by, ServedBy::Fallback);
    }
    // At once: Redis accepts connections when this check is made.
    let _back = back_after(port, 0).await;
    let first = limiter.check("k", 1).await.unwrap();
    assert_eq!(
        (first.served_by, first.decision.remaining()),
        (ServedBy::Redis, 99),
        "the first check after Redis is back"
    );
}
