//! Fewer round trips: the blocked-key cache and leases, against a real redis-server
//! started by the test.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use portero::Quota;
use portero_redis::{LeasedLimiter, RedisAlgorithm, RedisCheckError, ServedBy, Verdict};

mod support {
    #[allow(dead_code)] // each test binary uses the helpers it needs
    pub mod local;
}
use support::local::{admits, answering, instances, start_redis};

/// A hot key hammered 1,000 times against 5 per minute: with the cache, 6 round trips
/// (5 admitted, 1 refused and cached); without, 1,000. The same 5 are admitted, every
/// admission comes from Redis, and every cached answer is a refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_abusive_key_costs_one_round_trip_per_refusal_period() {
    let server = start_redis();
    let gcra = RedisAlgorithm::gcra(Quota::per_minute(5).unwrap()).unwrap();
    for (cached, round_trips) in [(true, 6), (false, 1_000)] {
        let mut l = answering(&server, gcra)
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
    let server = start_redis();
    // 1 per second, burst 1: a refusal lasts up to a second, long beside the three
    // checks' round trips on a loaded machine.
    let gcra = RedisAlgorithm::gcra(Quota::per_second(1).unwrap().with_burst(1).unwrap()).unwrap();
    let l = answering(&server, gcra).await.blocked_key_cache(100);
    assert!(admits(&l, "k", 1).await);
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
    let l = answering(&server, window).await.blocked_key_cache(100);
    assert!(admits(&l, "w", 8).await);
    assert!(!admits(&l, "w", 5).await);
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
    let server = start_redis();
    let window = RedisAlgorithm::fixed_window(50, Duration::from_secs(60)).unwrap();
    let instances: Vec<_> = instances(&server, window, 3, 10, Duration::from_secs(30), |l| {
        l.blocked_key_cache(100)
    })
    .await
    .into_iter()
    .map(Arc::new)
    .collect();
    let plain = answering(&server, window).await;
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

/// Large costs and the limiter's own reset (each refused by the cache while Redis,
/// asked directly, admitted: a 5,000,000-unit refusal blocked a 1,050,000-unit request
/// because both were clamped to 2^20; `reset` left the key blocked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_never_refuses_a_large_cost_or_a_reset_key_that_redis_admits() {
    let server = start_redis();
    let quota = Quota::per_hour(5_000_000).unwrap();
    let gcra = RedisAlgorithm::gcra(quota).unwrap();
    let cached = answering(&server, gcra).await.blocked_key_cache(100);
    let direct = answering(&server, gcra).await; // the same keys, no cache
    assert!(admits(&direct, "big", 3_000_000).await);
    let refused = cached.check("big", 5_000_000).await.unwrap();
    assert!(!refused.decision.is_allowed());
    assert!(direct
        .peek("big", 1_050_000)
        .await
        .unwrap()
        .decision
        .is_allowed());
    let smaller = cached.check("big", 1_050_000).await.unwrap();
    assert_eq!(
        smaller.served_by,
        ServedBy::Redis,
        "not refused from the cache"
    );
    assert!(smaller.decision.is_allowed());
    assert_eq!(
        cached.check("big", 5_000_000).await.unwrap().served_by,
        ServedBy::Cache
    );
    cached.reset("big").await.unwrap();
    let after_reset = cached.check("big", 5_000_000).await.unwrap();
    assert!(
        after_reset.decision.is_allowed(),
        "reset: a full limit, as its docs say"
    );
}

/// The cache plus Redis against Redis alone: random costs up to the quota's maximum,
/// from this limiter and from another instance (no cache), resets through this one,
/// and time passing. Whenever the cache refuses, Redis — peeked at once, taking
/// nothing — refuses too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_refuses_only_what_redis_refuses_over_random_operations() {
    let server = start_redis();
    // 2,000,000 units, refilled in 200 ms: refusals come and go within the test.
    let quota = Quota::from_nanos(2_000_000, 200_000_000).unwrap();
    let gcra = RedisAlgorithm::gcra(quota).unwrap();
    let cached = answering(&server, gcra).await.blocked_key_cache(100);
    let other = answering(&server, gcra).await;
    // A small deterministic generator: the same sequence on every run.
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move |bound: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % bound
    };
    let (mut from_cache, mut checks) = (0, 0);
    for _ in 0..2_000 {
        let key = format!("k{}", next(3));
        let cost = match next(4) {
            0 => 1 + next(100),
            1 => 1 + next(2_000_000),
            2 => 1_900_000 + next(100_001),
            _ => 1 << (10 + next(11)),
        };
        match next(20) {
            0 => cached.reset(&key).await.unwrap(),
            1..=5 => {
                let _ = other.check(&key, cost).await.unwrap();
            }
            6 => tokio::time::sleep(Duration::from_millis(next(30))).await,
            _ => {
                checks += 1;
                let v = cached.check(&key, cost).await.unwrap();
                let answered = std::time::Instant::now();
                if v.served_by == ServedBy::Cache {
                    from_cache += 1;
                    assert!(!v.decision.is_allowed());
                    let truth = other.peek(&key, cost).await.unwrap();
                    // The peek comes a moment later: a refusal the cache said would
                    // end within that moment cannot be judged by it.
                    let judged = v.decision.retry_after_nanos() > 2 * elapsed_ns(answered);
                    assert!(
                        !judged || !truth.decision.is_allowed(),
                        "the cache refused {cost} of {key}, Redis admits it"
                    );
                }
            }
        }
    }
    assert!(
        from_cache > 50,
        "the cache answered {from_cache} of {checks}"
    );
}

fn elapsed_ns(since: std::time::Instant) -> u64 {
    u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// A reset while a refused check is in flight (an operator unblocking a user as the
/// user retries): the refusal that arrives after the reset is not cached, so the next
/// check goes to Redis, which admits it (before: refused from the cache for 12 s in
/// 20 of 20 rounds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_in_flight_during_a_reset_is_not_cached() {
    let server = start_redis();
    let gcra = RedisAlgorithm::gcra(Quota::per_minute(5).unwrap()).unwrap();
    let l = answering(&server, gcra).await.blocked_key_cache(1_000);
    for round in 0..20 {
        let key = format!("user-{round}");
        for _ in 0..5 {
            assert!(admits(&l, &key, 1).await);
        }
        let (refused, reset) = tokio::join!(l.check(&key, 1), l.reset(&key));
        reset.unwrap();
        assert!(
            !refused.unwrap().decision.is_allowed(),
            "decided before the reset"
        );
        let next = l.check(&key, 1).await.unwrap();
        assert_eq!(next.served_by, ServedBy::Redis, "round {round}");
        assert!(next.decision.is_allowed(), "round {round}");
    }
}

/// A reset while this instance's lease request is in flight: the lease that arrives
/// after it is not kept, so this instance holds nothing leased from before its own
/// reset (before: 49 units kept, 149 admitted against a fresh limit of 100).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_in_flight_during_this_instances_reset_is_not_kept() {
    let server = start_redis();
    let gcra = RedisAlgorithm::gcra(Quota::per_hour(100).unwrap()).unwrap();
    for round in 0..10 {
        let l = answering(&server, gcra).await;
        let leased = LeasedLimiter::new(l, 50, Duration::from_secs(60), 100);
        let key = format!("k-{round}");
        let (_, reset) = tokio::join!(leased.check(&key, 1), leased.reset(&key));
        reset.unwrap();
        assert_eq!(leased.leased_units(), 0, "round {round}");
        let mut admitted = 0;
        for _ in 0..200 {
            admitted += u32::from(leased.check(&key, 1).await.unwrap().decision.is_allowed());
        }
        assert!(admitted <= 100, "round {round}: {admitted} after the reset");
    }
}

/// Waiting on a Redis limit in real time (bounded: about 1.5 s): 2 per second,
/// burst 1 — four waits in a row are admitted about 500 ms apart (long beside a loaded
/// machine's delays), each after one
/// refusal and one sleep of Redis's own retry-after (two round trips, not a busy
/// poll); a wait allowed less than the retry-after returns the refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn until_ready_sleeps_redis_own_retry_after() {
    let server = start_redis();
    let quota = Quota::per_second(2).unwrap().with_burst(1).unwrap();
    let l = answering(&server, RedisAlgorithm::gcra(quota).unwrap()).await;
    let wait = |cost, max_wait| l.until_ready("wait", cost, max_wait);
    let (_, took) = four_admitted_waits(&wait).await;
    assert!(took >= Duration::from_millis(1_490), "{took:?}");
    assert!(took < Duration::from_millis(4_500), "{took:?}");
    assert!(l.round_trips() <= 7, "{} round trips", l.round_trips());
    short_and_costly_waits_fail(&wait, Duration::from_millis(10), 2).await;
}

/// A leased wait in real time (bounded: about 500 ms): 4 per second, burst 2, leases
/// of 2. The first wait leases the burst and the second spends the lease locally; each
/// of the next two is refused by Redis, sleeps the refusal's own retry-after (about
/// 250 ms) and is admitted by the next lease — a handful of round trips, not a busy
/// poll. A wait allowed less than the retry-after returns the refusal; a cost above
/// the capacity is an error at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_wait_sleeps_the_refusals_retry_after() {
    let server = start_redis();
    let quota = Quota::per_second(4).unwrap().with_burst(2).unwrap();
    let l = answering(&server, RedisAlgorithm::gcra(quota).unwrap()).await;
    let leased = LeasedLimiter::new(l, 2, Duration::from_secs(30), 100);
    let wait = |cost, max_wait| leased.until_ready("lw", cost, max_wait);
    let (waits, took) = four_admitted_waits(&wait).await;
    assert_eq!(
        waits[1].served_by,
        ServedBy::Lease,
        "the second spends the lease"
    );
    assert!(took >= Duration::from_millis(490), "{took:?}");
    assert!(took < Duration::from_millis(4_000), "{took:?}");
    let round_trips = leased.round_trips();
    assert!((3..=7).contains(&round_trips), "{round_trips} round trips");
    short_and_costly_waits_fail(&wait, Duration::from_millis(5), 3).await;
}

/// Four waits in a row for one unit, each allowed 2 s: every one admitted. Their
/// verdicts, and how long they took together.
async fn four_admitted_waits<W, F>(wait: &W) -> (Vec<Verdict>, Duration)
where
    W: Fn(u64, Duration) -> F,
    F: Future<Output = Result<Verdict, RedisCheckError>>,
{
    let started = std::time::Instant::now();
    let mut waits = Vec::new();
    for i in 0..4 {
        let v = wait(1, Duration::from_secs(2)).await.unwrap();
        assert!(v.decision.is_allowed(), "wait {i}");
        waits.push(v);
    }
    (waits, started.elapsed())
}

/// A wait of one unit allowed `too_short` (less than the retry-after) returns the
/// refusal; a wait for `above_capacity` units is an error at once.
async fn short_and_costly_waits_fail<W, F>(wait: &W, too_short: Duration, above_capacity: u64)
where
    W: Fn(u64, Duration) -> F,
    F: Future<Output = Result<Verdict, RedisCheckError>>,
{
    let impatient = wait(1, too_short).await.unwrap();
    assert!(!impatient.decision.is_allowed());
    assert!(matches!(
        wait(above_capacity, Duration::from_secs(1)).await,
        Err(RedisCheckError::Check(_))
    ));
}
