//! Stacked limits in one script call, peeks and per-call quotas, against a real
//! redis-server started by the test.

use std::time::Duration;

use portero::Quota;
use portero_redis::{LocalRedis, RedisAlgorithm, RedisCheckError, RedisLimiter, StackedLimit};

fn gcra(per_minute: u64) -> RedisAlgorithm {
    RedisAlgorithm::gcra(Quota::per_minute(per_minute).unwrap()).unwrap()
}

async fn limiter(server: &LocalRedis) -> RedisLimiter {
    RedisLimiter::connect(&server.url(), gcra(5))
        .await
        .unwrap()
        .timeout(Duration::from_secs(5))
}

/// User (GCRA 5/min), tenant (fixed window 8/min), global (sliding counter 100/min).
fn stack<'a>(user: &'a str, tenant: &'a str) -> [StackedLimit<'a>; 3] {
    let minute = Duration::from_secs(60);
    [
        StackedLimit::new(gcra(5), user, 1),
        StackedLimit::new(RedisAlgorithm::fixed_window(8, minute).unwrap(), tenant, 1),
        StackedLimit::new(
            RedisAlgorithm::sliding_counter(100, minute).unwrap(),
            "*",
            1,
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_is_all_or_none_and_a_refusal_charges_nothing_anywhere() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let limiter = limiter(&server).await;
    let admits_all = |user: &'static str, tenant: &'static str, n: usize| {
        let limiter = limiter.clone();
        async move {
            for _ in 0..n {
                let verdict = limiter.check_all(&stack(user, tenant)).await.unwrap();
                assert!(verdict.is_allowed(), "{user} of {tenant}");
            }
        }
    };
    admits_all("bob", "acme", 5).await;
    let refused = limiter.check_all(&stack("bob", "acme")).await.unwrap();
    assert_eq!(refused.rejected_by, Some(0), "bob's own limit");
    assert!(refused.retry_after_nanos() > 0);
    // The others took nothing, and say how they stand (every algorithm): acme 3 of
    // 8 left, the global 95 of 100 — not what this request would have left them.
    let left: Vec<u64> = refused.decisions.iter().map(|d| d.remaining()).collect();
    assert_eq!(left, [0, 3, 95]);
    admits_all("alice", "acme", 3).await;
    let refused = limiter.check_all(&stack("alice", "acme")).await.unwrap();
    assert_eq!(refused.rejected_by, Some(1), "acme's 8 are used");
    // Neither refusal charged anything: alice has 2 left, acme 0, the global 92.
    let alice = limiter.peek("alice", 0).await.unwrap().decision;
    assert_eq!(alice.remaining(), 2);
    let [_, tenant, global] = stack("alice", "acme");
    let peek = |l: StackedLimit<'static>| {
        let limiter = limiter.clone();
        async move {
            limiter
                .check_with(l.key, 0, &l.algorithm)
                .await
                .unwrap()
                .decision
        }
    };
    assert_eq!(peek(tenant).await.remaining(), 0);
    assert_eq!(peek(global).await.remaining(), 92);
    // The same Redis key twice would be charged twice: refused before Redis.
    let twice = [
        StackedLimit::new(gcra(5), "x", 1),
        StackedLimit::new(gcra(5), "x", 1),
    ];
    assert!(matches!(
        limiter.check_all(&twice).await,
        Err(RedisCheckError::RepeatedKey { .. })
    ));
}

/// The Redis race through a stack: two instances, 400 concurrent stacked requests for
/// one user (50 per minute) in one tenant (1,000 per minute): exactly 50 admitted, and
/// the tenant charged exactly 50.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_hundred_concurrent_stacked_requests_admit_exactly_the_user_limit() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let instances = [limiter(&server).await, limiter(&server).await];
    let minute = Duration::from_secs(60);
    let user = RedisAlgorithm::fixed_window(50, minute).unwrap();
    let tenant = RedisAlgorithm::fixed_window(1_000, minute).unwrap();
    let tasks: Vec<_> = (0..400)
        .map(|i| {
            let limiter = instances[i % 2].clone();
            tokio::spawn(async move {
                let limits = [
                    StackedLimit::new(user, "u", 1),
                    StackedLimit::new(tenant, "t", 1),
                ];
                limiter.check_all(&limits).await.unwrap().is_allowed()
            })
        })
        .collect();
    let mut admitted = 0;
    for t in tasks {
        admitted += u32::from(t.await.unwrap());
    }
    assert_eq!(admitted, 50);
    let left = instances[0]
        .check_with("t", 0, &tenant)
        .await
        .unwrap()
        .decision;
    assert_eq!(left.remaining(), 950);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peek_takes_nothing_and_quotas_passed_per_call_are_separate_tiers() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let limiter = limiter(&server).await;
    for _ in 0..20 {
        let d = limiter.peek("carol", 1).await.unwrap().decision;
        assert!(d.is_allowed());
        assert_eq!(d.remaining(), 4, "what a check would answer");
    }
    for left in (0..5).rev() {
        assert_eq!(
            limiter
                .check("carol", 1)
                .await
                .unwrap()
                .decision
                .remaining(),
            left
        );
    }
    assert!(!limiter
        .peek("carol", 1)
        .await
        .unwrap()
        .decision
        .is_allowed());
    // A paid tier for the same key: its own quota, no new limiter.
    let paid = gcra(50);
    let paid_admits = |cost| {
        let (limiter, paid) = (&limiter, &paid);
        async move {
            let verdict = limiter.check_with("carol", cost, paid).await.unwrap();
            verdict.decision.is_allowed()
        }
    };
    for _ in 0..20 {
        assert!(paid_admits(1).await);
    }
    assert!(!paid_admits(50).await);
    limiter.reset_with("carol", &paid).await.unwrap();
    assert!(paid_admits(50).await);
    limiter.reset("carol").await.unwrap();
    assert_eq!(
        limiter.peek("carol", 0).await.unwrap().decision.remaining(),
        5
    );
    // Keys in the slot of a chosen tag carry that tag.
    let in_slot = StackedLimit::new(gcra(5), "carol", 1).in_slot_of("acme");
    let verdict = limiter.check_all(&[in_slot]).await.unwrap();
    assert!(verdict.is_allowed(), "a fresh key, apart from carol's");
    let keys: Vec<String> = redis_keys(&server, "*{4:acme}*").await;
    assert_eq!(keys.len(), 1, "{keys:?}");
}

async fn redis_keys(server: &LocalRedis, pattern: &str) -> Vec<String> {
    let client = redis::Client::open(server.url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("KEYS")
        .arg(pattern)
        .query_async(&mut c)
        .await
        .unwrap()
}
