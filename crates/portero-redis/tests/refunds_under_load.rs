//! A stack of an in-memory limit per client and a Redis limit per tenant under 200
//! concurrent requests: the refused ones keep none of the client's units (the local
//! limit is asked first and taken only once Redis admitted).

use std::sync::Arc;

use http::{HeaderValue, StatusCode};
use portero::{AlgorithmName, AnyAlgorithm, Clock, KeyedLimiter, ManualClock, Quota};
use portero_http::{Limit, LimitLayer};
use tower::ServiceExt;

#[path = "../../portero-http/tests/support/counters.rs"]
mod counters;

mod support {
    pub mod stores;
}
use support::stores::*;

/// One client, burst 300 in memory (frozen clock), a tenant limit of 5 in Redis: 200
/// requests at once. 5 get through, 195 are refused by Redis, and the client's limit
/// stands at 295 — not 103, as when each refused request kept its unit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_requests_refused_by_redis_keep_no_local_unit() {
    let stores = Stores::start();
    for name in ["gcra", "token-bucket"] {
        let clock = Arc::new(ManualClock::starting_at(1_000_000_000));
        let per_client = Quota::per_hour(300).unwrap();
        let algorithm = AnyAlgorithm::new(AlgorithmName::parse(name).unwrap(), per_client).unwrap();
        let client = Arc::new(KeyedLimiter::with_clock(algorithm, 100, clock.clone()));
        let per_tenant = Quota::per_hour(5).unwrap();
        let layer = LimitLayer::new(Limit::new(
            client.clone(),
            policy("client", per_client),
            x_client(),
        ))
        .limit(Limit::new(
            stores.redis(per_tenant).await,
            policy("tenant", per_tenant),
            x_tenant(),
        ));
        let through = at_once(app(layer), 200).await;
        let left = client
            .peek_at(&HeaderValue::from_static("alice"), clock.now(), 0)
            .unwrap()
            .remaining();
        let kept = 300 - left - through;
        println!("{name} + Redis: {through} of 200 through, {kept} of the client's units kept by {} refused requests", 200 - through);
        assert_eq!(through, 5);
        assert_eq!(kept, 0, "{name}: refused requests kept {kept} units");
    }
}

/// The other way round (found by an outside review): the client's own limit is nearly
/// spent (1 unit left of 10) and the tenant's Redis limit has room. 50 requests at
/// once: 1 gets through, and the tenant is charged for that one only — the local limit,
/// close to empty, is taken before Redis, so the 49 it refuses cost the tenant nothing
/// (Redis units cannot be given back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nearly_spent_local_limit_refuses_before_redis_is_charged() {
    let stores = Stores::start();
    let clock = Arc::new(ManualClock::starting_at(1_000_000_000));
    let per_client = Quota::per_hour(10).unwrap();
    let client = Arc::new(KeyedLimiter::with_clock(
        portero::Gcra::new(per_client),
        100,
        clock.clone(),
    ));
    for _ in 0..9 {
        assert!(client
            .check(&HeaderValue::from_static("alice"))
            .is_allowed());
    }
    let per_tenant = Quota::per_hour(100).unwrap();
    let tenant = stores.redis(per_tenant).await;
    let layer = LimitLayer::new(Limit::new(
        client.clone(),
        policy("client", per_client),
        x_client(),
    ))
    .limit(Limit::new(
        tenant.clone(),
        policy("tenant", per_tenant),
        x_tenant(),
    ));
    let through = at_once(app(layer), 50).await;
    // What the tenant has left: only its Redis limit, for other clients.
    let alone = app(LimitLayer::new(Limit::new(
        tenant,
        policy("tenant", per_tenant),
        x_tenant(),
    )));
    let mut left = 0u64;
    for i in 0..120 {
        let status = alone
            .clone()
            .oneshot(from(&format!("c{i}"), "acme"))
            .await
            .unwrap()
            .status();
        left += u64::from(status == StatusCode::OK);
    }
    println!("client 1 unit left, tenant 100 in Redis: {through} of 50 through, the tenant has {left} left");
    assert_eq!(through, 1);
    assert_eq!(left, 99, "the tenant was charged for refused requests");
}

/// `n` requests of alice (tenant acme) sent at once: how many got through.
async fn at_once(front: axum::Router, n: usize) -> u64 {
    let all: Vec<_> = (0..n)
        .map(|_| {
            let front = front.clone();
            tokio::spawn(
                async move { front.oneshot(from("alice", "acme")).await.unwrap().status() },
            )
        })
        .collect();
    let mut through = 0;
    for one in all {
        through += u64::from(one.await.unwrap() == StatusCode::OK);
    }
    through
}
