//! Fewer round trips: the blocked-key cache and leases, against a real redis-server
//! started by the test.

use std::sync::Arc;
use std::time::Duration;

use portero::Quota;
use portero_redis::{LeasedLimiter, LocalRedis, RedisAlgorithm, RedisLimiter, ServedBy};

async fn limiter(server: &LocalRedis, algorithm: RedisAlgorithm) -> RedisLimiter {
    RedisLimiter::connect(&server.url(), algorithm)
        .await
        .unwrap()
        .timeout(Duration::from_secs(5))
}

/// A hot key hammered 1,000 times against 5 per minute: with the cache, 6 round trips
/// (5 admitted, 1 refused and cached); without, 1,000. The same 5 are admitted, every
/// admission comes from Redis, and every cached answer is a refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_abusive_key_costs_one_round_trip_per_refusal_period() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let gcra = RedisAlgorithm::gcra(Quota::per_minute(5).unwrap()).unwrap();
    for (cached, round_trips) in [(true, 6), (false, 1_000)] {
        let mut l = limiter(&server, gcra)
            .await
            .prefix(if cached { "c:" } else { "u:" })
            .unwrap();
        if cached {
            l = l.blocked_key_cache(1_000);
        }
        let mut admitted = 0;
        for _ in 0..1_000 {
            let v = l.check("abuser", 1).await.unwrap();
            if v.decision.is_allowed() {
                admitted += 1;
                assert_eq!(v.served_by, ServedBy::Redis);
            }
            if v.served_by == ServedBy::Cache {
                assert!(!v.decision.is_allowed());
                assert!(v.decision.retry_after_nanos() > 0);
            }
        }
        assert_eq!(admitted, 5);
        assert_eq!(l.round_trips(), round_trips, "cached: {cached}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_refuses_only_while_and_what_redis_refused() {
    let server = LocalRedis::start().expect("redis-server for this test");
    // 10 per second, burst 1: a refusal lasts at most 100 ms.
    let gcra = RedisAlgorithm::gcra(Quota::per_second(10).unwrap().with_burst(1).unwrap()).unwrap();
    let l = limiter(&server, gcra).await.blocked_key_cache(100);
    assert!(l.check("k", 1).await.unwrap().decision.is_allowed());
    let refused = l.check("k", 1).await.unwrap();
    assert_eq!(refused.served_by, ServedBy::Redis);
    assert_eq!(l.check("k", 1).await.unwrap().served_by, ServedBy::Cache);
    tokio::time::sleep(
        Duration::from_nanos(refused.decision.retry_after_nanos()) + Duration::from_millis(5),
    )
    .await;
    let after = l.check("k", 1).await.unwrap();
    assert!(
        after.decision.is_allowed(),
        "the refusal ended: Redis admits again"
    );
    // A smaller request than the one refused goes to Redis (it may fit sooner).
    let window = RedisAlgorithm::fixed_window(10, Duration::from_secs(60)).unwrap();
    let l = limiter(&server, window).await.blocked_key_cache(100);
    assert!(l.check("w", 8).await.unwrap().decision.is_allowed());
    assert!(!l.check("w", 5).await.unwrap().decision.is_allowed());
    let small = l.check("w", 2).await.unwrap();
    assert_eq!(
        (small.served_by, small.decision.is_allowed()),
        (ServedBy::Redis, true)
    );
    assert_eq!(l.check("w", 5).await.unwrap().served_by, ServedBy::Cache);
}

/// Three instances lease batches of 10 against 50 per minute while 400 requests race:
/// exactly 50 admitted (never more: units are charged when leased), in a handful of
/// round trips instead of 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leases_never_admit_more_than_the_limit_across_instances() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let window = RedisAlgorithm::fixed_window(50, Duration::from_secs(60)).unwrap();
    let mut instances = Vec::new();
    for _ in 0..3 {
        let l = limiter(&server, window).await.blocked_key_cache(100);
        instances.push(Arc::new(LeasedLimiter::new(
            l,
            10,
            Duration::from_secs(30),
            100,
        )));
    }
    let plain = limiter(&server, window).await;
    let tasks: Vec<_> = (0..400)
        .map(|i| {
            let l = instances[i % 3].clone();
            tokio::spawn(async move { l.check("hot", 1).await.unwrap().decision.is_allowed() })
        })
        .collect();
    let mut admitted = 0;
    for t in tasks {
        admitted += u32::from(t.await.unwrap());
    }
    assert_eq!(admitted, 50);
    let left = plain.peek("hot", 0).await.unwrap().decision.remaining();
    assert_eq!(left, 0, "Redis counted every leased unit");
    let round_trips: u64 = instances.iter().map(|l| l.round_trips()).sum();
    assert!(
        round_trips <= 12,
        "{round_trips} round trips for 400 checks"
    );
}
