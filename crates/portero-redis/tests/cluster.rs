//! Against a real Redis Cluster of three primaries that the test starts on loopback
//! ports and tears down: the Redis race per slot, and stacks within one slot.

use std::time::Duration;

use portero::Quota;
use portero_redis::{
    LocalCluster, RedisAlgorithm, RedisCheckError, RedisLimiter, ServedBy, StackedLimit, WhenDown,
};

mod support {
    #[allow(dead_code)] // each test binary uses the helpers it needs
    pub mod local;
}
use support::local::ANSWER;

async fn limiter(cluster: &LocalCluster, algorithm: RedisAlgorithm) -> RedisLimiter {
    let urls = cluster.urls();
    let nodes: Vec<&str> = urls.iter().map(String::as_str).collect();
    RedisLimiter::connect_cluster(&nodes, algorithm)
        .await
        .unwrap()
        .timeout(ANSWER)
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

/// A fail-open limiter whose timeout (250 ms) is shorter than the migration's 300 ms
/// between MIGRATING and MIGRATE: any answer the migration holds up past it shows.
async fn migrating(cluster: &LocalCluster, algorithm: RedisAlgorithm) -> RedisLimiter {
    limiter(cluster, algorithm)
        .await
        .timeout(Duration::from_millis(250))
        .when_down(WhenDown::FailOpen)
}

/// `redis-cli -p PORT args…`, its output.
fn cli(port: &str, args: &[&str]) -> String {
    let out = std::process::Command::new("redis-cli")
        .args(["-p", port])
        .args(args)
        .output()
        .expect("redis-cli");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Moves a key's slot from the primary that owns it to another, the way
/// `redis-cli --cluster reshard` does (IMPORTING / MIGRATING, MIGRATE, SETSLOT NODE),
/// while two instances check the key 400 times against a limit of 50 with the
/// fail-open policy: exactly 50 admitted, none answered by the outage policy, for
/// the sliding log's two keys too. (Every script declared a second key, so during the
/// migration Redis answered TRYAGAIN and fail-open admitted 48 extra.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slot_migration_under_load_admits_exactly_the_limit() {
    let cluster = LocalCluster::start().expect("a local Redis Cluster for this test");
    let ports: Vec<String> = cluster
        .urls()
        .iter()
        .map(|u| u.rsplit(':').next().unwrap().to_owned())
        .collect();
    // Per hour: no unit comes back during the test's few seconds.
    let hour = Duration::from_secs(3_600);
    for (algorithm, two_keys) in [
        (
            RedisAlgorithm::gcra(Quota::per_hour(50).unwrap()).unwrap(),
            false,
        ),
        (RedisAlgorithm::sliding_log(50, hour).unwrap(), true),
    ] {
        let instances = [
            migrating(&cluster, algorithm).await,
            migrating(&cluster, algorithm).await,
        ];
        let key = format!("migrating-{}", algorithm.name());
        let redis_key = instances[0].key_for(&key);
        let slot = cli(&ports[0], &["cluster", "keyslot", &redis_key]);
        assert!(instances[0]
            .check(&key, 1)
            .await
            .unwrap()
            .decision
            .is_allowed());
        let owner = ports
            .iter()
            .find(|p| cli(p, &["cluster", "countkeysinslot", &slot]) != "0")
            .expect("the key lives somewhere")
            .clone();
        let target = ports.iter().find(|p| **p != owner).unwrap().clone();
        let (owner_id, target_id) = (
            cli(&owner, &["cluster", "myid"]),
            cli(&target, &["cluster", "myid"]),
        );
        let load: Vec<_> = (0..399)
            .map(|i| {
                let (limiter, key) = (instances[i % 2].clone(), key.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(3 * i as u64)).await;
                    limiter.check(&key, 1).await.unwrap()
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(200)).await;
        cli(
            &target,
            &["cluster", "setslot", &slot, "importing", &owner_id],
        );
        cli(
            &owner,
            &["cluster", "setslot", &slot, "migrating", &target_id],
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut keys = vec![redis_key.clone()];
        if two_keys {
            keys.push(format!("{redis_key}:n"));
        }
        let mut migrate = vec!["migrate", "127.0.0.1", &target, "", "0", "5000", "keys"];
        migrate.extend(keys.iter().map(String::as_str));
        assert_eq!(cli(&owner, &migrate), "OK");
        tokio::time::sleep(Duration::from_millis(300)).await;
        for p in &ports {
            cli(p, &["cluster", "setslot", &slot, "node", &target_id]);
        }
        let mut admitted = 1;
        for t in load {
            let verdict = t.await.unwrap();
            assert_ne!(
                verdict.served_by,
                ServedBy::Fallback,
                "{}",
                algorithm.name()
            );
            admitted += u32::from(verdict.decision.is_allowed());
        }
        assert_eq!(admitted, 50, "{}", algorithm.name());
        assert_eq!(
            cli(&target, &["cluster", "countkeysinslot", &slot]),
            keys.len().to_string()
        );
    }
}

/// One primary of three dies (no replicas; `cluster-require-full-coverage no`, so the
/// live primaries keep serving their slots). With a breaker, the dead node's keys stop
/// waiting the timeout after a few failures while the live nodes' keys are still
/// decided by Redis. (One breaker for the whole Cluster stayed closed on the live
/// nodes' successes: every check on the dead node's keys waited the full timeout.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_primary_trips_only_its_own_breaker() {
    let mut cluster = LocalCluster::start().expect("a local Redis Cluster for this test");
    for url in cluster.urls() {
        let port = url.rsplit(':').next().unwrap();
        assert_eq!(
            cli(
                port,
                &["CONFIG", "SET", "cluster-require-full-coverage", "no"]
            ),
            "OK"
        );
    }
    let timeout = Duration::from_millis(300);
    let algorithm = RedisAlgorithm::gcra(Quota::per_minute(1_000_000).unwrap()).unwrap();
    let limiter = limiter(&cluster, algorithm)
        .await
        .timeout(timeout)
        .breaker(3, Duration::from_secs(60))
        .unwrap();
    let keys: Vec<String> = (0..90).map(|i| format!("k{i}")).collect();
    for k in &keys {
        assert_eq!(
            limiter.check(k, 1).await.unwrap().served_by,
            ServedBy::Redis
        );
    }
    cluster.stop_node(0);
    let (mut waited, mut redis, mut fallback) = (0, 0, 0);
    for _round in 0..3 {
        for k in &keys {
            let started = std::time::Instant::now();
            match limiter.check(k, 1).await.unwrap().served_by {
                ServedBy::Redis => redis += 1,
                _ => fallback += 1,
            }
            waited += usize::from(started.elapsed() >= timeout - Duration::from_millis(50));
        }
    }
    // About a third of the keys are on the dead node: 3 of theirs wait, then none
    // (a few more while the slot map is first read).
    assert!(fallback >= 60, "{fallback} answered by the outage policy");
    assert!(redis >= 150, "{redis} decided by the live primaries");
    assert!(waited <= 6, "{waited} checks waited the full timeout");
}
