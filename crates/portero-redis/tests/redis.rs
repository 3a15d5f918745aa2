//! Against a real redis-server started by the test.

use std::sync::Arc;
use std::time::{Duration, Instant};

use portero::{CheckError, Gcra, KeyedLimiter, Quota};
use portero_redis::{
    LocalRedis, RedisAlgorithm, RedisCheckError, RedisLimiter, RedisQuotaError, ServedBy, WhenDown,
};

mod support {
    #[allow(dead_code)] // each test binary uses the helpers it needs
    pub mod local;
}
use support::local::{admits, answering, query, start_redis, ANSWER};

/// A limiter of `algorithm` (a limit of 3) on `server`: three single units for key
/// "k", each admitted with the exact remaining count; then the fourth, which must be
/// rejected. The limiter, and that rejection.
async fn three_then_refused(
    server: &LocalRedis,
    algorithm: RedisAlgorithm,
) -> (RedisLimiter, portero::Decision) {
    let limiter = answering(server, algorithm).await;
    for left in (0..3).rev() {
        let d = limiter.check("k", 1).await.unwrap().decision;
        assert!(d.is_allowed());
        assert_eq!(d.remaining(), left);
    }
    let d = limiter.check("k", 1).await.unwrap().decision;
    assert!(!d.is_allowed());
    (limiter, d)
}

const SEC: u64 = 1_000_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcra_in_redis_admits_the_burst_then_gives_exact_waits() {
    let server = start_redis();
    let algorithm = RedisAlgorithm::gcra(Quota::per_minute(5).unwrap()).unwrap();
    let limiter = answering(&server, algorithm).await;
    for left in (0..5).rev() {
        let v = limiter.check("alice", 1).await.unwrap();
        assert_eq!(v.served_by, ServedBy::Redis);
        assert!(v.decision.is_allowed());
        assert_eq!(v.decision.remaining(), left);
    }
    let v = limiter.check("alice", 1).await.unwrap();
    assert!(!v.decision.is_allowed());
    assert_eq!(v.decision.remaining(), 0);
    // The next unit is due 12 s after the first check, measured on Redis's clock.
    let retry = v.decision.retry_after_nanos();
    assert!(
        retry > 11 * SEC && retry <= 12 * SEC,
        "retry after {retry} ns"
    );
    let reset = v.decision.reset_after_nanos();
    assert!(
        reset > 59 * SEC && reset <= 60 * SEC,
        "reset after {reset} ns"
    );
    // Another key has its own share; a weighted check is all or nothing.
    assert!(admits(&limiter, "bob", 3).await);
    assert!(!admits(&limiter, "bob", 3).await);
    assert!(admits(&limiter, "bob", 2).await);
    // The key expires when the limit would be full again, and reset forgets it.
    let ttl: i64 = query(&server, &["PTTL", &limiter.key_for("alice")]).await;
    assert!(ttl > 59_000 && ttl <= 60_000, "ttl {ttl} ms");
    limiter.reset("alice").await.unwrap();
    assert!(admits(&limiter, "alice", 1).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_window_in_redis_counts_from_the_first_request() {
    let server = start_redis();
    let algorithm = RedisAlgorithm::fixed_window(3, Duration::from_secs(60)).unwrap();
    let (limiter, d) = three_then_refused(&server, algorithm).await;
    assert!(d.retry_after_nanos() > 59 * SEC && d.retry_after_nanos() <= 60 * SEC);
    // A rejection wrote nothing: the stored count is still 3.
    let n: u64 = query(&server, &["HGET", &limiter.key_for("k"), "n"]).await;
    assert_eq!(n, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_counter_in_redis_gives_a_retry_after_that_is_not_early() {
    let server = start_redis();
    let algorithm = RedisAlgorithm::sliding_counter(3, Duration::from_secs(1)).unwrap();
    // The counter's windows are whole seconds of Redis's clock (this machine's): the
    // three checks start early in one, so that they never straddle two (the third
    // would then count in a window of its own, and `c` would read 1).
    let into_second = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_millis();
    if into_second > 300 {
        tokio::time::sleep(Duration::from_millis(u64::from(1_010 - into_second))).await;
    }
    let (limiter, d) = three_then_refused(&server, algorithm).await;
    let retry = d.retry_after();
    assert!(
        retry > Duration::ZERO && retry <= Duration::from_secs(2),
        "{retry:?}"
    );
    // A rejection wrote nothing.
    let c: u64 = query(&server, &["HGET", &limiter.key_for("k"), "c"]).await;
    assert_eq!(c, 3);
    // Waiting what it said is enough (Redis's clock and ours run at the same rate).
    tokio::time::sleep(retry + Duration::from_millis(20)).await;
    assert!(admits(&limiter, "k", 1).await);
    // Weighted: more than the limit is an error; the limit itself fits a fresh key.
    assert!(limiter.check("fresh", 4).await.is_err());
    assert!(admits(&limiter, "fresh", 3).await);
    // L·W beyond 2^52 µs is refused up front.
    assert!(RedisAlgorithm::sliding_counter(1 << 40, Duration::from_secs(86_400)).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_log_in_redis_is_exact_and_its_retry_after_is_not_early() {
    let server = start_redis();
    let algorithm = RedisAlgorithm::sliding_log(3, Duration::from_secs(1)).unwrap();
    let limiter = answering(&server, algorithm).await;
    assert!(admits(&limiter, "k", 2).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let d = limiter.check("k", 1).await.unwrap().decision;
    assert!(d.is_allowed());
    assert_eq!(d.remaining(), 0);
    // Two more need the two oldest entries (admitted ≥ 300 ms earlier) to expire: at
    // most 700 ms from now; the whole log, ≥ 300 ms after that (the third entry's age).
    let d = limiter.check("k", 2).await.unwrap().decision;
    assert!(!d.is_allowed());
    let (retry, reset) = (d.retry_after(), d.reset_after());
    assert!(
        retry > Duration::ZERO && retry <= Duration::from_millis(700),
        "{retry:?}"
    );
    assert!(reset <= Duration::from_secs(1), "{reset:?}");
    assert!(
        reset - retry >= Duration::from_millis(300),
        "{retry:?} {reset:?}"
    );
    // A rejection added nothing: one entry per admitted request, two of them.
    let n: u64 = query(&server, &["ZCARD", &limiter.key_for("k")]).await;
    assert_eq!(n, 2);
    tokio::time::sleep(retry + Duration::from_millis(20)).await;
    assert!(admits(&limiter, "k", 2).await);
    assert!(!admits(&limiter, "k", 1).await);
    assert!(RedisAlgorithm::sliding_log(2_000_000, Duration::from_secs(1)).is_err());
}

/// The Redis race: two instances receive 400 concurrent requests for a limit of 50;
/// the atomic scripts admit exactly 50 in each of five rounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_hundred_concurrent_requests_admit_exactly_fifty_per_round() {
    let server = start_redis();
    for algorithm in [
        RedisAlgorithm::gcra(Quota::per_minute(50).unwrap()).unwrap(),
        RedisAlgorithm::fixed_window(50, Duration::from_secs(60)).unwrap(),
        RedisAlgorithm::sliding_counter(50, Duration::from_secs(60)).unwrap(),
        RedisAlgorithm::sliding_log(50, Duration::from_secs(60)).unwrap(),
    ] {
        let (a, b) = (
            answering(&server, algorithm).await,
            answering(&server, algorithm).await,
        );
        for round in 0..5 {
            let key = format!("{algorithm:?}-round-{round}");
            let tasks: Vec<_> = (0..400)
                .map(|i| {
                    let instance = if i % 2 == 0 { a.clone() } else { b.clone() };
                    let key = key.clone();
                    tokio::spawn(async move { instance.check(&key, 1).await.unwrap() })
                })
                .collect();
            let mut admitted = 0;
            for t in tasks {
                let v = t.await.unwrap();
                assert_eq!(v.served_by, ServedBy::Redis);
                admitted += u32::from(v.decision.is_allowed());
            }
            assert_eq!(admitted, 50, "{algorithm:?}, round {round}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_redis_is_down_the_policy_decides_within_the_timeout() {
    let mut server = start_redis();
    let algorithm = RedisAlgorithm::gcra(Quota::per_minute(100).unwrap()).unwrap();
    let local = Arc::new(KeyedLimiter::<str, Gcra>::new(
        Gcra::new(Quota::per_minute(3).unwrap()),
        1_000,
    ));
    // The default timeout (50 ms) here: that is what an outage is measured against.
    let open = RedisLimiter::connect(&server.url(), algorithm)
        .await
        .unwrap()
        .when_down(WhenDown::FailOpen);
    let closed = RedisLimiter::connect(&server.url(), algorithm)
        .await
        .unwrap()
        .when_down(WhenDown::FailClosed);
    let approx = RedisLimiter::connect(&server.url(), algorithm)
        .await
        .unwrap()
        .when_down(WhenDown::Local(local));
    let up = open.clone().timeout(ANSWER);
    assert_eq!(up.check("k", 1).await.unwrap().served_by, ServedBy::Redis);

    server.stop();
    let started = Instant::now();
    let v = open.check("k", 1).await.unwrap();
    assert_eq!(v.served_by, ServedBy::Fallback);
    assert!(v.decision.is_allowed());
    let v = closed.check("k", 1).await.unwrap();
    assert_eq!(v.served_by, ServedBy::Fallback);
    assert!(!v.decision.is_allowed());
    assert_eq!(v.decision.retry_after_nanos(), SEC);
    for _ in 0..3 {
        let v = approx.check("k", 1).await.unwrap();
        assert_eq!(v.served_by, ServedBy::Fallback);
        assert!(v.decision.is_allowed());
    }
    assert!(
        !approx.check("k", 1).await.unwrap().decision.is_allowed(),
        "the local limit holds"
    );
    // Seven checks against a dead server, each bounded by the 50 ms timeout (a
    // generous margin for a loaded CI machine: this is liveness, not speed).
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_an_error_not_a_call() {
    let server = start_redis();
    let algorithm = RedisAlgorithm::gcra(Quota::per_minute(5).unwrap()).unwrap();
    let limiter = answering(&server, algorithm).await;
    assert!(matches!(
        limiter.check("k", 6).await,
        Err(RedisCheckError::Check(CheckError::CostExceedsCapacity {
            cost: 6,
            capacity: 5
        }))
    ));
    assert!(RedisAlgorithm::fixed_window(0, Duration::from_secs(1)).is_err());
    assert!(RedisAlgorithm::fixed_window(5, Duration::ZERO).is_err());
    assert!(RedisAlgorithm::fixed_window(5, Duration::MAX).is_err());
    // A span portero accepts (≤ 2^62 ns) but beyond the scripts' exact range (2^52 µs).
    let huge = Quota::per_day(1).unwrap().with_burst(53_000).unwrap();
    assert!(RedisAlgorithm::gcra(huge).is_err());
    // Unreachable at start: an error, not a hang.
    assert!(RedisLimiter::connect("redis://127.0.0.1:1", algorithm)
        .await
        .is_err());
    // A key with odd characters is just a key.
    assert!(admits(&limiter, "ключ ✓ \"quoted\" {}", 1).await);
}

/// Nested prefixes and an attacker-chosen key: `rl:` + `login:bob` once met
/// `rl:login:` + `bob` on one Redis key (and the type clash then passed as an outage).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_prefixes_and_chosen_keys_never_share_state() {
    let server = start_redis();
    let login = RedisAlgorithm::sliding_log(3, Duration::from_secs(60)).unwrap();
    let general = RedisAlgorithm::gcra(Quota::per_minute(100).unwrap()).unwrap();
    let logins = answering(&server, login)
        .await
        .prefix("rl:login:")
        .unwrap()
        .when_down(WhenDown::FailOpen);
    let api = answering(&server, general)
        .await
        .prefix("rl:")
        .unwrap()
        .when_down(WhenDown::FailOpen);
    // The attacker spends on the general limiter with the victim's login key.
    for _ in 0..5 {
        assert!(admits(&api, "login:bob", 1).await);
    }
    let mut admitted = 0;
    for _ in 0..20 {
        let v = logins.check("bob", 1).await.unwrap();
        assert_eq!(v.served_by, ServedBy::Redis);
        admitted += u32::from(v.decision.is_allowed());
    }
    assert_eq!(admitted, 3, "3 login attempts per minute");
    assert_eq!(logins.errors() + api.errors(), 0);
    assert_ne!(logins.key_for("bob"), api.key_for("login:bob"));
    assert!(matches!(
        api.clone().prefix("rl:{x}"),
        Err(RedisQuotaError::PrefixHasBrace)
    ));
}

/// A key holding another type is Redis answering with an error: returned, counted,
/// never decided by the outage policy (which would admit under FailOpen).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_type_key_is_an_error_not_an_outage() {
    let server = start_redis();
    let algorithm = RedisAlgorithm::gcra(Quota::per_minute(3).unwrap()).unwrap();
    let limiter = answering(&server, algorithm)
        .await
        .when_down(WhenDown::FailOpen);
    let _: i64 = query(&server, &["LPUSH", &limiter.key_for("k"), "x"]).await;
    for n in 1..=3 {
        let r = limiter.check("k", 1).await;
        assert!(matches!(r, Err(RedisCheckError::Redis(_))), "{r:?}");
        assert_eq!(limiter.errors(), n);
    }
}

/// A request of a million units on a million-per-hour log stores one entry, not a
/// million; weighted entries still give an exact answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_request_is_one_log_entry() {
    let server = start_redis();
    let algorithm = RedisAlgorithm::sliding_log(1_000_000, Duration::from_secs(3_600)).unwrap();
    let limiter = answering(&server, algorithm).await;
    let d = limiter.check("big", 999_990).await.unwrap().decision;
    assert!(d.is_allowed());
    assert_eq!(d.remaining(), 10);
    let n: u64 = query(&server, &["ZCARD", &limiter.key_for("big")]).await;
    assert_eq!(n, 1);
    assert!(admits(&limiter, "big", 10).await);
    let d = limiter.check("big", 1).await.unwrap().decision;
    assert!(!d.is_allowed());
    // The first entry (999,990 units) must expire before one more fits: about an hour.
    assert!(
        d.retry_after() > Duration::from_secs(3_590),
        "{:?}",
        d.retry_after()
    );
    let n: u64 = query(&server, &["ZCARD", &limiter.key_for("big")]).await;
    assert_eq!(n, 2);
}

/// While Redis is paused, checks time out and the outage policy answers them; when
/// Redis resumes, their queued scripts are past their deadlines and charge nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_the_policy_answered_is_not_charged_later() {
    let server = start_redis();
    let algorithm = RedisAlgorithm::gcra(Quota::per_minute(5).unwrap()).unwrap();
    let limiter = RedisLimiter::connect(&server.url(), algorithm)
        .await
        .unwrap()
        .timeout(Duration::from_millis(50));
    // Load the script first, so the paused calls are the checks themselves.
    let patient = limiter.clone().timeout(ANSWER);
    assert!(admits(&patient, "warm-up", 1).await);
    // Paused long beside five timeouts of 50 ms and a loaded machine's delays: every
    // check is sent while Redis is paused.
    let _: String = query(&server, &["CLIENT", "PAUSE", "2000"]).await;
    for _ in 0..5 {
        let v = limiter.check("k", 1).await.unwrap();
        assert_eq!(v.served_by, ServedBy::Fallback);
        assert!(!v.decision.is_allowed(), "FailClosed");
    }
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    let v = patient.check("k", 1).await.unwrap();
    assert_eq!(v.served_by, ServedBy::Redis);
    assert!(v.decision.is_allowed());
    assert_eq!(
        v.decision.remaining(),
        4,
        "the five late scripts charged nothing"
    );
}

/// A service that starts while Redis is down: a lazy limiter answers with the outage
/// policy within its timeout (before: `connect` failed, so the service could not
/// start), and once Redis comes up on that address the same limiter shares the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazy_limiter_starts_while_redis_is_down_and_uses_it_once_up() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let gcra = RedisAlgorithm::gcra(Quota::per_minute(5).unwrap()).unwrap();
    let url = format!("redis://127.0.0.1:{port}");
    assert!(
        RedisLimiter::connect(&url, gcra).await.is_err(),
        "the eager one cannot start"
    );
    let lazy = RedisLimiter::connect_lazy(&url, gcra)
        .unwrap()
        .timeout(Duration::from_millis(200))
        .when_down(WhenDown::FailOpen);
    let started = std::time::Instant::now();
    let v = lazy.check("k", 1).await.unwrap();
    assert_eq!(v.served_by, ServedBy::Fallback);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "within the timeout, roughly"
    );
    let _server = LocalRedis::start_on(port).expect("redis-server on the free port");
    let mut served = None;
    for _ in 0..50 {
        let v = lazy.check("k", 1).await.unwrap();
        if v.served_by == ServedBy::Redis {
            served = Some(v);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let v = served.expect("connected once Redis was up");
    assert!(v.decision.is_allowed());
    assert_eq!(v.decision.remaining(), 4, "the shared limit in Redis");
}
