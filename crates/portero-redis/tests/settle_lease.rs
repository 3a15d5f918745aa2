//! Settling admissions a lease answered ([`LeasedLimiter::settle`], and through
//! portero-http's layer): units not used go back to that very lease, units above the
//! estimate come from the lease and then from Redis as debt, a lease replaced by a
//! newer one takes back until its own expiry, an ended or reset lease takes nothing
//! back, and 64 requests in flight neither lose more than the lease
//! bound nor invent a unit. Quotas of a day: nothing refills while a test runs.

use std::time::Duration;

use axum::body::Body;
use axum::routing::post;
use axum::Router;
use http::{HeaderName, HeaderValue, Request, StatusCode};
use portero::Quota;
use portero_http::{keys, Limit, LimitLayer, Policy};
use portero_redis::{LeasedLimiter, LocalRedis, RedisAlgorithm, RedisLimiter, ServedBy};
use tower::ServiceExt;

async fn shared(server: &LocalRedis, quota: Quota, prefix: &str) -> RedisLimiter {
    RedisLimiter::connect(&server.url(), RedisAlgorithm::gcra(quota).unwrap())
        .await
        .unwrap()
        .timeout(Duration::from_secs(5))
        .prefix(prefix)
        .unwrap()
}

fn ten_thousand() -> Quota {
    Quota::per_day(10_000).unwrap()
}

/// What `key` has left in Redis (the leases' units counted as used).
async fn in_redis(limiter: &RedisLimiter, key: &str) -> u64 {
    limiter.peek(key, 0).await.unwrap().decision.remaining()
}

#[tokio::test]
async fn units_not_used_go_back_to_the_lease_they_came_from() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let redis = shared(&server, ten_thousand(), "back").await;
    let leased = LeasedLimiter::new(redis.clone(), 100, Duration::from_secs(600), 10);
    let first = leased.check("ann", 40).await.unwrap();
    assert!(first.decision.is_allowed());
    assert_eq!(leased.leased_units(), 60);
    let after = leased.settle(first.taken.unwrap(), 10).await.unwrap();
    assert_eq!(after.unwrap().remaining(), 90, "as if it had cost 10");
    assert_eq!(leased.leased_units(), 90);
    assert_eq!(in_redis(&redis, "ann").await, 10_000 - 100, "no round trip");
    // The next admissions spend the units that came back, from the lease.
    let next = leased.check("ann", 90).await.unwrap();
    assert_eq!(next.served_by, ServedBy::Lease);
    assert_eq!(leased.leased_units(), 0);
}

#[tokio::test]
async fn units_above_the_estimate_come_from_the_lease_then_from_redis_as_debt() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let redis = shared(&server, ten_thousand(), "above").await;
    let leased = LeasedLimiter::new(redis.clone(), 100, Duration::from_secs(600), 10);
    let first = leased.check("bo", 40).await.unwrap();
    leased.settle(first.taken.unwrap(), 200).await.unwrap();
    assert_eq!(leased.leased_units(), 0, "the lease's 60 went first");
    assert_eq!(
        in_redis(&redis, "bo").await,
        10_000 - 200,
        "the rest charged in Redis: as a twin charged 200 at the start"
    );
    // Past the limit: 300 a day (288 s a unit), 40 estimated, 500 used.
    let three_hundred = Quota::per_day(300).unwrap();
    let small = shared(&server, three_hundred, "debt").await;
    let leased = LeasedLimiter::new(small.clone(), 100, Duration::from_secs(600), 10);
    let first = leased.check("cy", 40).await.unwrap();
    let after = leased.settle(first.taken.unwrap(), 500).await.unwrap();
    assert_eq!(after.unwrap().remaining(), 0);
    let refused = small.check("cy", 1).await.unwrap();
    assert!(!refused.decision.is_allowed());
    // 500 charged of 300: one more unit fits after 201 units drained, 57,888 s.
    let wait = refused.decision.retry_after().as_secs_f64();
    assert!((57_887.0..=57_888.0).contains(&wait), "retry after {wait}");
}

#[tokio::test]
async fn an_ended_or_reset_lease_takes_nothing_back() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let redis = shared(&server, ten_thousand(), "ended").await;
    // A lease of 50 ms: it has ended when the admission settles.
    let brief = LeasedLimiter::new(redis.clone(), 100, Duration::from_millis(50), 10);
    let first = brief.check("di", 40).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    brief.settle(first.taken.unwrap(), 0).await.unwrap();
    assert_eq!(brief.leased_units(), 0);
    assert_eq!(in_redis(&redis, "di").await, 10_000 - 100);
    // Above the estimate, the debt is still charged in Redis.
    let second = brief.check("di", 40).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    brief.settle(second.taken.unwrap(), 70).await.unwrap();
    assert_eq!(in_redis(&redis, "di").await, 10_000 - 200 - 30);

    // A reset, then a new lease: the old admission's units do not go to it.
    let leased = LeasedLimiter::new(redis.clone(), 100, Duration::from_secs(600), 10);
    let old = leased.check("ed", 40).await.unwrap();
    leased.reset("ed").await.unwrap();
    let new = leased.check("ed", 10).await.unwrap();
    assert!(new.decision.is_allowed());
    assert_eq!(leased.leased_units(), 90);
    leased.settle(old.taken.unwrap(), 0).await.unwrap();
    assert_eq!(
        leased.leased_units(),
        90,
        "nothing given to a lease it never had"
    );
    assert_eq!(in_redis(&redis, "ed").await, 10_000 - 100);
}

/// Through the layer: 64 requests in flight on a leased limit, each estimated at 10
/// and using 3. Redis charged (minus what the lease holds now) is at least the 192
/// used, and above it by at most what replaced leases stranded: under 10 each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_in_flight_settle_in_the_lease() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let redis = shared(&server, ten_thousand(), "layer").await;
    let leased = LeasedLimiter::new(redis.clone(), 100, Duration::from_secs(600), 10);
    let limit = Limit::new(
        leased.clone(),
        Policy::for_quota("tokens", &ten_thousand()).unwrap(),
        keys::header::<Body>(HeaderName::from_static("x-api-key")),
    )
    .cost(|_, _, _| 10)
    .settle(|head| head.units("x-usage-tokens"));
    let app = Router::new()
        .route(
            "/complete",
            post(|| async { ([("x-usage-tokens", HeaderValue::from_static("3"))], "done") }),
        )
        .layer(LimitLayer::new(limit));
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                let req = Request::post("/complete")
                    .header("x-api-key", "fy")
                    .body(Body::empty())
                    .unwrap();
                app.oneshot(req).await.unwrap().status()
            })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), StatusCode::OK);
    }
    // The layer's key text for a header value (see portero-http's StoreKey).
    let charged = 10_000 - leased_standing(&leased, "fy").await;
    let held = leased.leased_units();
    let leases = leased.round_trips();
    let spent = charged - held;
    assert!(
        (192..=192 + leases.saturating_sub(1) * 9).contains(&spent),
        "charged {charged}, held {held}, {leases} leases"
    );
}

/// What the layer's key `key` has left in Redis, asked through the store.
async fn leased_standing(leased: &LeasedLimiter, key: &'static str) -> u64 {
    use portero_http::{Checking, Store};
    match Store::standing(leased, Some(HeaderValue::from_static(key))) {
        Checking::Done(answer) => answer,
        Checking::Pending(pending) => pending.await,
    }
    .unwrap()
    .decision
    .remaining()
}

/// Every algorithm takes a lease's debt: 1,000 a day, a lease of 100, 40 estimated and
/// 700 used: Redis then counts 700 (what a twin charged 700 at the start counts), and
/// a second admission of 400 settled at 400 leaves the key 100 past its limit.
#[tokio::test]
async fn every_algorithm_charges_a_leases_debt_in_redis() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let day = Duration::from_secs(86_400);
    let algorithms = [
        RedisAlgorithm::gcra(Quota::per_day(1_000).unwrap()).unwrap(),
        RedisAlgorithm::fixed_window(1_000, day).unwrap(),
        RedisAlgorithm::sliding_counter(1_000, day).unwrap(),
        RedisAlgorithm::sliding_log(1_000, day).unwrap(),
    ];
    for (i, algorithm) in algorithms.into_iter().enumerate() {
        let redis = RedisLimiter::connect(&server.url(), algorithm)
            .await
            .unwrap()
            .timeout(Duration::from_secs(5))
            .prefix(&format!("every-{i}"))
            .unwrap();
        let leased = LeasedLimiter::new(redis.clone(), 100, Duration::from_secs(600), 10);
        let first = leased.check("gu", 40).await.unwrap();
        leased.settle(first.taken.unwrap(), 700).await.unwrap();
        assert_eq!(leased.leased_units(), 0, "{algorithm:?}");
        assert_eq!(in_redis(&redis, "gu").await, 300, "{algorithm:?}");
        let second = leased.check("gu", 100).await.unwrap();
        assert!(second.decision.is_allowed(), "{algorithm:?}");
        leased.settle(second.taken.unwrap(), 400).await.unwrap();
        let refused = redis.check("gu", 1).await.unwrap();
        assert!(
            !refused.decision.is_allowed(),
            "{algorithm:?} past its limit"
        );
        assert_eq!(refused.decision.remaining(), 0, "{algorithm:?}");
    }
}

// Found by an outside review of leased settlement (each failed before its fix).

/// A ticket of the layer's store, and how the key stands after settling it.
async fn settled(leased: &LeasedLimiter, ticket: portero_http::Ticket, real: u64) {
    use portero_http::{Checking, Store};
    match Store::<HeaderValue>::settle_ticket(leased, ticket, real) {
        Some(Checking::Pending(p)) => drop(p.await),
        Some(Checking::Done(d)) => drop(d),
        None => {}
    }
}

async fn store_check(
    leased: &LeasedLimiter,
    key: &'static str,
    cost: u64,
) -> portero_http::Checked {
    use portero_http::{Checking, Store};
    match Store::check_key(leased, Some(HeaderValue::from_static(key)), cost) {
        Checking::Done(d) => d,
        Checking::Pending(p) => p.await,
    }
    .unwrap()
}

#[tokio::test]
async fn a_lease_ticket_cloned_or_edited_settles_once_at_what_it_took() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let redis = shared(&server, ten_thousand(), "once").await;
    let leased = LeasedLimiter::new(redis.clone(), 100, Duration::from_secs(600), 10);
    let first = store_check(&leased, "gy", 40).await;
    store_check(&leased, "gy", 60).await; // the lease is empty
    let ticket = first.ticket.unwrap();
    // A ticket is not `Clone`; what it holds is, and a ticket rebuilt around a copy
    // of it is a second claim.
    for _ in 0..10 {
        let copy = portero_http::Ticket {
            fingerprint: ticket.fingerprint,
            admission: portero::Admission::new(ticket.admission.at(), ticket.admission.cost()),
            plan: ticket.plan,
            held: ticket.held.clone(),
        };
        settled(&leased, copy, 0).await;
    }
    settled(&leased, ticket, 0).await;
    assert_eq!(
        leased.leased_units(),
        40,
        "given back once: each copy found another holder, the last one settled"
    );
    // An edited cost: the settlement reads what the admission took, 1.
    let leased = LeasedLimiter::new(redis.clone(), 100, Duration::from_secs(600), 10);
    let one = store_check(&leased, "hy", 1).await;
    store_check(&leased, "hy", 99).await;
    let mut edited = one.ticket.unwrap();
    edited.admission = portero::Admission::new(0, 100);
    settled(&leased, edited, 0).await;
    assert_eq!(leased.leased_units(), 1, "one unit back, not a hundred");
}

#[tokio::test]
async fn a_lease_admission_settled_by_another_limiter_is_debited_on_its_own_key() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let (a_redis, b_redis) = (
        shared(&server, ten_thousand(), "own-a").await,
        shared(&server, ten_thousand(), "own-b").await,
    );
    let a = LeasedLimiter::new(a_redis.clone(), 100, Duration::from_secs(600), 10);
    let b = LeasedLimiter::new(b_redis.clone(), 100, Duration::from_secs(600), 10);
    let taken = a.check("iy", 40).await.unwrap().taken.unwrap();
    b.settle(taken, 500).await.unwrap();
    assert_eq!(
        in_redis(&a_redis, "iy").await,
        10_000 - 100 - 460,
        "A's key owes it"
    );
    assert_eq!(in_redis(&b_redis, "iy").await, 10_000, "B's key untouched");
    // And through the plain limiter of another prefix.
    let taken = a.check("jy", 40).await.unwrap().taken.unwrap();
    b_redis.settle(taken, 500).await.unwrap();
    assert_eq!(in_redis(&a_redis, "jy").await, 10_000 - 100 - 460);
    assert_eq!(in_redis(&b_redis, "jy").await, 10_000);
}

/// A lease that ran short and was replaced still takes back what its admissions did
/// not use, spendable until its own expiry and before the newer lease's units. Before,
/// a replaced lease took nothing back: 200 requests at once through a lease of 4, the
/// refused ones giving back, kept 3 or 4 units in fresh-clone runs.
#[tokio::test]
async fn a_replaced_lease_takes_back_what_its_admissions_did_not_use() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let redis = shared(&server, ten_thousand(), "replaced").await;
    let leased = LeasedLimiter::new(redis.clone(), 10, Duration::from_secs(600), 10);
    // The first lease of 10: one admission of 6, another of 4 empties it.
    let six = leased.check("cy", 6).await.unwrap().taken.unwrap();
    let four = leased.check("cy", 4).await.unwrap();
    assert_eq!(four.served_by, ServedBy::Lease);
    assert_eq!(leased.leased_units(), 0);
    // The next request leases again: the first lease is replaced.
    let next = leased.check("cy", 1).await.unwrap();
    assert_eq!(next.served_by, ServedBy::Redis);
    assert_eq!(leased.leased_units(), 9);
    // The admission of 6 from the replaced lease used 1: its 5 come back.
    let after = leased.settle(six, 1).await.unwrap();
    assert!(after.is_some(), "settled in the replaced lease");
    assert_eq!(leased.leased_units(), 14);
    assert_eq!(in_redis(&redis, "cy").await, 10_000 - 20, "no round trip");
    // They are spent first, from the lease.
    let spent = leased.check("cy", 5).await.unwrap();
    assert_eq!(spent.served_by, ServedBy::Lease);
    assert_eq!(leased.leased_units(), 9);
}

/// A replaced lease lives only until its own expiry: what comes back to it after that
/// is lost with it (the lease bound), and nothing is invented.
#[tokio::test]
async fn a_replaced_lease_past_its_expiry_takes_nothing_back() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let redis = shared(&server, ten_thousand(), "expired").await;
    let leased = LeasedLimiter::new(redis.clone(), 10, Duration::from_millis(200), 10);
    let ten = leased.check("di", 10).await.unwrap().taken.unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(leased.check("di", 1).await.unwrap().decision.is_allowed());
    assert_eq!(leased.leased_units(), 9);
    leased.settle(ten, 0).await.unwrap();
    assert_eq!(
        leased.leased_units(),
        9,
        "the expired lease takes nothing back"
    );
}
