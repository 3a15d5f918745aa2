//! Against a real Redis Cluster of three primaries that the test starts on loopback
//! ports and tears down: the Redis race per slot, and stacks within one slot.

use std::time::Duration;

use portero::Quota;
use portero_redis::{LocalCluster, RedisAlgorithm, RedisCheckError, RedisLimiter, StackedLimit};

async fn limiter(cluster: &LocalCluster, algorithm: RedisAlgorithm) -> RedisLimiter {
    let urls = cluster.urls();
    let nodes: Vec<&str> = urls.iter().map(String::as_str).collect();
    RedisLimiter::connect_cluster(&nodes, algorithm)
        .await
        .unwrap()
        .timeout(Duration::from_secs(5))
}

/// Two instances, 400 concurrent requests per round against 50 per minute, five
/// rounds with fresh keys (so the keys land on different nodes): exactly 50 each.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_redis_race_against_a_cluster_admits_exactly_the_limit_per_round() {
    let cluster = LocalCluster::start().expect("a local Redis Cluster for this test");
    for algorithm in [
        RedisAlgorithm::gcra(Quota::per_minute(50).unwrap()).unwrap(),
        RedisAlgorithm::fixed_window(50, Duration::from_secs(60)).unwrap(),
    ] {
        let instances = [
            limiter(&cluster, algorithm).await,
            limiter(&cluster, algorithm).await,
        ];
        for round in 0..5 {
            let key = format!("{}-round-{round}", algorithm.name());
            let tasks: Vec<_> = (0..400)
                .map(|i| {
                    let (limiter, key) = (instances[i % 2].clone(), key.clone());
                    tokio::spawn(async move {
                        limiter.check(&key, 1).await.unwrap().decision.is_allowed()
                    })
                })
                .collect();
            let mut admitted = 0;
            for t in tasks {
                admitted += u32::from(t.await.unwrap());
            }
            assert_eq!(admitted, 50, "{} round {round}", algorithm.name());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_in_one_slot_runs_and_one_across_slots_is_an_error_not_an_outage() {
    let cluster = LocalCluster::start().expect("a local Redis Cluster for this test");
    let gcra = |n| RedisAlgorithm::gcra(Quota::per_minute(n).unwrap()).unwrap();
    let limiter = limiter(&cluster, gcra(5)).await;
    let same_slot = [
        StackedLimit::new(gcra(5), "bob", 1).in_slot_of("acme"),
        StackedLimit::new(gcra(20), "acme", 1).in_slot_of("acme"),
    ];
    for _ in 0..5 {
        assert!(limiter.check_all(&same_slot).await.unwrap().is_allowed());
    }
    assert_eq!(
        limiter.check_all(&same_slot).await.unwrap().rejected_by,
        Some(0)
    );
    // Different hash tags hash to different slots: Redis refuses the script (CROSSSLOT).
    let across = [
        StackedLimit::new(gcra(5), "bob", 1),
        StackedLimit::new(gcra(20), "zed-tenant-elsewhere", 1),
    ];
    assert!(matches!(
        limiter.check_all(&across).await,
        Err(RedisCheckError::Redis(_))
    ));
    assert_eq!(limiter.errors(), 1);
    limiter.reset("bob").await.unwrap();
}
