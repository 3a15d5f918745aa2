//! Settlement through portero-http's layer on a Redis limit: the response's fields
//! show the key after the settlement's round trip, a debt gives the next request an
//! exact `Retry-After`, failed logins are counted and good ones given back, a
//! streamed body's usage settles when it ends, and 64 requests in flight neither
//! lose nor invent a unit. A quota of 10,000 a day: nothing refills while a test runs.

use std::time::Duration;

use axum::body::Body;
use axum::extract::Request as AxumRequest;
use axum::routing::post;
use axum::{Extension, Router};
use http::{HeaderName, HeaderValue, Request, StatusCode};
use portero::Quota;
use portero_http::{keys, Checking, Limit, LimitLayer, Policy, Store, Usage};
use portero_redis::{LocalRedis, RedisAlgorithm, RedisLimiter};
use tower::ServiceExt;

fn quota() -> Quota {
    Quota::per_day(10_000).unwrap()
}

async fn limiter(server: &LocalRedis, prefix: &str) -> RedisLimiter {
    RedisLimiter::connect(&server.url(), RedisAlgorithm::gcra(quota()).unwrap())
        .await
        .unwrap()
        .timeout(Duration::from_secs(5))
        .prefix(prefix)
        .unwrap()
}

fn api_key() -> impl Fn(&Request<Body>) -> Option<HeaderValue> + Clone + Send + Sync + 'static {
    keys::header::<Body>(HeaderName::from_static("x-api-key"))
}

/// `/complete` answers with the usage the request asks for (`x-use`) in
/// `x-usage-tokens`; `/login` answers 401 unless the password is "right".
fn app(layer: LimitLayer<Body>) -> Router {
    Router::new()
        .route(
            "/complete",
            post(|req: AxumRequest| async move {
                let used = req.headers().get("x-use").cloned();
                (
                    [(
                        "x-usage-tokens",
                        used.unwrap_or(HeaderValue::from_static("0")),
                    )],
                    "done",
                )
            }),
        )
        .route(
            "/login",
            post(|req: AxumRequest| async move {
                match req.headers().get("x-password").map(|p| p == "right") {
                    Some(true) => StatusCode::OK,
                    _ => StatusCode::UNAUTHORIZED,
                }
            }),
        )
        .layer(layer)
}

fn request(path: &str, key: &str, extra: (&str, &str)) -> Request<Body> {
    Request::post(path)
        .header("x-api-key", key)
        .header(extra.0, extra.1)
        .body(Body::empty())
        .unwrap()
}

/// The `RateLimit` field's `r`.
fn remaining(response: &http::Response<Body>) -> u64 {
    let field = response.headers()["ratelimit"].to_str().unwrap();
    let r = field
        .split(';')
        .find_map(|p| p.trim().strip_prefix("r="))
        .unwrap();
    r.parse().unwrap()
}

/// What `key` (a header value, as the layer stores it) has left in Redis.
async fn left(limiter: &RedisLimiter, key: &'static str) -> u64 {
    let standing = Store::standing(limiter, Some(HeaderValue::from_static(key)));
    let checked = match standing {
        Checking::Done(answer) => answer,
        Checking::Pending(pending) => pending.await,
    };
    checked.unwrap().decision.remaining()
}

#[tokio::test]
async fn the_fields_show_the_redis_key_after_settlement_and_a_debt_an_exact_retry_after() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let tokens = limiter(&server, "tokens").await;
    let limit = Limit::new(
        tokens.clone(),
        Policy::for_quota("tokens", &quota()).unwrap(),
        api_key(),
    )
    .cost(|_, _, _| 500)
    .settle(|head| head.units("x-usage-tokens"));
    let app = app(LimitLayer::new(limit));
    let mut used = 0;
    for usage in [1_938u64, 120, 3_000] {
        let response = app
            .clone()
            .oneshot(request("/complete", "ann", ("x-use", &usage.to_string())))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        used += usage;
        assert_eq!(
            remaining(&response),
            10_000 - used,
            "the field after settlement"
        );
        assert_eq!(left(&tokens, "ann").await, 10_000 - used);
    }
    // 12,000 used by one call: 2,000 of debt, and the next estimate of 500 fits once
    // 2,500 tokens have come back, at 8.64 s each: 21,600 s.
    let response = app
        .clone()
        .oneshot(request("/complete", "bo", ("x-use", "12000")))
        .await
        .unwrap();
    assert_eq!(remaining(&response), 0);
    let refused = app
        .clone()
        .oneshot(request("/complete", "bo", ("x-use", "1")))
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((21_599..=21_600).contains(&wait), "Retry-After {wait}");
}

#[tokio::test]
async fn failed_logins_are_counted_in_redis_and_good_ones_given_back() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let logins = limiter(&server, "logins").await;
    let limit = Limit::new(
        logins.clone(),
        Policy::for_quota("logins", &quota()).unwrap(),
        api_key(),
    )
    .count_only(|head| head.status() == StatusCode::UNAUTHORIZED);
    let app = app(LimitLayer::new(limit));
    for password in ["wrong", "right", "wrong", "right", "right", "wrong"] {
        let response = app
            .clone()
            .oneshot(request("/login", "cy", ("x-password", password)))
            .await
            .unwrap();
        assert_ne!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    }
    assert_eq!(
        left(&logins, "cy").await,
        10_000 - 3,
        "three failures, nothing else"
    );
}

#[tokio::test]
async fn a_streamed_usage_settles_in_redis_when_its_handle_drops() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let tokens = limiter(&server, "streamed").await;
    let limit = Limit::new(
        tokens.clone(),
        Policy::for_quota("tokens", &quota()).unwrap(),
        api_key(),
    )
    .cost(|_, _, _| 500)
    .settle_by_usage();
    let app = Router::new()
        .route(
            "/stream",
            post(|Extension(usage): Extension<Usage>| async move {
                usage.add(120);
                usage.add(580);
                "streamed"
            }),
        )
        .layer(LimitLayer::new(limit));
    let response = app
        .oneshot(request("/stream", "di", ("x-use", "0")))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    drop(response);
    // The settlement runs on the runtime once the handle drops: wait for it.
    let mut settled = left(&tokens, "di").await;
    for _ in 0..500 {
        if settled == 10_000 - 700 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        settled = left(&tokens, "di").await;
    }
    assert_eq!(
        settled,
        10_000 - 700,
        "settled at the 700 reported, not the 500 estimated"
    );
}

/// Two Redis limits on one connection (checked in one batched call), each settling,
/// 64 requests in flight each estimated at 10 and using 3: both keys end exactly
/// 64 × 3 down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_in_flight_settle_exactly_on_two_batched_redis_limits() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let per_key = limiter(&server, "per-key").await;
    let per_tenant = limiter(&server, "per-tenant").await;
    let tenant = |req: &Request<Body>| req.headers().get("x-tenant").cloned();
    let layer = LimitLayer::new(
        Limit::new(
            per_key.clone(),
            Policy::for_quota("key", &quota()).unwrap(),
            api_key(),
        )
        .cost(|_, _, _| 10)
        .settle(|head| head.units("x-usage-tokens")),
    )
    .limit(
        Limit::new(
            per_tenant.clone(),
            Policy::for_quota("tenant", &quota()).unwrap(),
            tenant,
        )
        .cost(|_, _, _| 10)
        .settle(|head| head.units("x-usage-tokens")),
    );
    let app = app(layer);
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                let mut req = request("/complete", "ed", ("x-use", "3"));
                req.headers_mut()
                    .insert("x-tenant", HeaderValue::from_static("acme"));
                app.oneshot(req).await.unwrap().status()
            })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), StatusCode::OK);
    }
    assert_eq!(left(&per_key, "ed").await, 10_000 - 64 * 3);
    assert_eq!(left(&per_tenant, "acme").await, 10_000 - 64 * 3);
}

/// A penalty over a Redis limit: once Redis refused the key, the key is blocked
/// here for the stated time, and its requests cost Redis no round trip.
#[tokio::test]
async fn a_key_a_redis_limit_refused_is_blocked_without_asking_redis_again() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let three = Quota::per_day(3).unwrap();
    let shared = RedisLimiter::connect(&server.url(), RedisAlgorithm::gcra(three).unwrap())
        .await
        .unwrap()
        .timeout(Duration::from_secs(5));
    let store = portero_http::Penalty::new(shared.clone(), Duration::from_secs(600), 100).unwrap();
    let app = app(LimitLayer::new(Limit::new(
        store,
        Policy::for_quota("calls", &three).unwrap(),
        api_key(),
    )));
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let response = app
            .clone()
            .oneshot(request("/complete", "fy", ("x-use", "1")))
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
    let asked = shared.round_trips();
    for _ in 0..20 {
        let response = app
            .clone()
            .oneshot(request("/complete", "fy", ("x-use", "1")))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        let wait: u64 = response.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            (599..=600).contains(&wait),
            "the penalty's time left: {wait}"
        );
    }
    assert_eq!(
        shared.round_trips(),
        asked,
        "a blocked key costs Redis nothing"
    );
}

/// A good login clears the user's failures in Redis; the response's fields say the
/// key is full again.
#[tokio::test]
async fn a_good_login_clears_the_failures_in_redis() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let logins = limiter(&server, "cleared").await;
    let limit = Limit::new(
        logins.clone(),
        Policy::for_quota("logins", &quota()).unwrap(),
        api_key(),
    )
    .count_only(|head| head.status() == StatusCode::UNAUTHORIZED)
    .clear_on(|head| head.status().is_success());
    let app = app(LimitLayer::new(limit));
    for _ in 0..4 {
        app.clone()
            .oneshot(request("/login", "gu", ("x-password", "wrong")))
            .await
            .unwrap();
    }
    assert_eq!(left(&logins, "gu").await, 10_000 - 4);
    let response = app
        .clone()
        .oneshot(request("/login", "gu", ("x-password", "right")))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(remaining(&response), 10_000, "the field after clearing");
    assert_eq!(left(&logins, "gu").await, 10_000);
}

/// A Redis limit behind portero-http's per-key cap on requests in flight (`InFlight`)
/// settles and gives back as it does alone: the cap used to keep a second reference to
/// the Redis admission, which a Redis ticket must own alone to settle, so every
/// settlement and give-back through it was silently dropped (the units kept).
#[tokio::test]
async fn a_capped_redis_limit_settles_and_gives_back() {
    use portero_http::InFlight;
    let server = LocalRedis::start().expect("redis-server for this test");
    let tokens = limiter(&server, "capped").await;
    let limit = Limit::new(
        InFlight::new(tokens.clone(), 4).unwrap(),
        Policy::for_quota("tokens", &quota()).unwrap(),
        api_key(),
    )
    .cost(|_, _, _| 500)
    .settle(|head| head.units("x-usage-tokens"));
    // A second limit that refuses `bo` outright: the Redis units must come back.
    let none = portero::KeyedLimiter::new(portero::Gcra::new(Quota::per_day(1).unwrap()), 10);
    let tight = Limit::new(
        std::sync::Arc::new(none),
        Policy::new("tight", 1, 86_400).unwrap(),
        api_key(),
    )
    .route(|r: &Request<Body>| r.headers().get("x-tight").is_some());
    let app = app(LimitLayer::new(limit).limit(tight));
    let response = app
        .clone()
        .oneshot(request("/complete", "ann", ("x-use", "1938")))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(remaining(&response), 10_000 - 1_938, "settled at its usage");
    assert_eq!(left(&tokens, "ann").await, 10_000 - 1_938);
    // bo's first request takes the tight limit's one unit; the second is refused by
    // it after Redis admitted: Redis gives the 500 back.
    let first = app
        .clone()
        .oneshot(request("/complete", "bo", ("x-tight", "1")))
        .await
        .unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let before = left(&tokens, "bo").await;
    let refused = app
        .clone()
        .oneshot(request("/complete", "bo", ("x-tight", "1")))
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        left(&tokens, "bo").await,
        before,
        "nothing kept by the refused request"
    );
}

/// Plans of mixed stores: one plan in this process's memory, another in Redis, as one
/// `Plans` of shared stores (`Arc<dyn Store<K>>`), chosen by name.
#[tokio::test]
async fn plans_of_mixed_stores_each_count_where_they_live() {
    use portero_http::Plans;
    use std::sync::Arc;
    let server = LocalRedis::start().expect("redis-server for this test");
    let shared = limiter(&server, "mixed").await;
    type Shared = Arc<dyn Store<HeaderValue> + Send + Sync>;
    let local: Shared = Arc::new(portero::KeyedLimiter::new(portero::Gcra::new(quota()), 100));
    let remote: Shared = Arc::new(shared.clone());
    let plans = Plans::new()
        .plan(Policy::for_quota("free", &quota()).unwrap(), local)
        .plan(Policy::for_quota("pro", &quota()).unwrap(), remote);
    let key = |r: &Request<Body>| {
        let k = r.headers().get("x-api-key")?.clone();
        let plan = if k.as_bytes().starts_with(b"pro") {
            "pro"
        } else {
            "free"
        };
        Some((plan, k))
    };
    let limit = plans
        .limit(key)
        .cost(|_, _, _| 500)
        .settle(|head| head.units("x-usage-tokens"));
    let app = app(LimitLayer::new(limit));
    for (who, plan) in [("pro-ann", "pro"), ("free-bo", "free")] {
        let response = app
            .clone()
            .oneshot(request("/complete", who, ("x-use", "700")))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert!(response.headers()["ratelimit"]
            .to_str()
            .unwrap()
            .starts_with(&format!("\"{plan}\";r=9300")));
    }
    // The pro key's units are in Redis; the free key's are not.
    assert_eq!(left(&shared, "pro-ann").await, 9_300);
    assert_eq!(left(&shared, "free-bo").await, 10_000);
}

/// 200 requests at once, each on its own key of a Redis limit behind `InFlight`, then
/// a local limit of 10 taken after Redis (it has room when asked): the 190 it refuses
/// give their Redis units back, each on its own key — nothing kept through the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_at_once_through_a_capped_redis_limit_keep_nothing() {
    use portero_http::InFlight;
    let server = LocalRedis::start().expect("redis-server for this test");
    let tokens = limiter(&server, "capped200").await;
    let redis = Limit::new(
        InFlight::new(tokens.clone(), 4).unwrap(),
        Policy::for_quota("tokens", &quota()).unwrap(),
        api_key(),
    )
    .cost(|_, _, _| 500)
    .settle(|head| head.units("x-usage-tokens"));
    let ten = Quota::per_day(10).unwrap();
    let shared = portero::KeyedLimiter::new(portero::Gcra::new(ten), 10);
    let local = Limit::new(
        std::sync::Arc::new(shared),
        Policy::for_quota("shared", &ten).unwrap(),
        |_: &Request<Body>| Some(HeaderValue::from_static("all")),
    );
    let app = app(LimitLayer::new(redis).limit(local));
    let calls: Vec<_> = (0..200)
        .map(|i| {
            let app = app.clone();
            tokio::spawn(async move {
                let key = format!("k{i}");
                let r = app
                    .oneshot(request("/complete", &key, ("x-use", "500")))
                    .await
                    .unwrap();
                (key, r.status())
            })
        })
        .collect();
    let mut through = 0;
    let mut keys = Vec::new();
    for call in calls {
        let (key, status) = call.await.unwrap();
        through += usize::from(status == StatusCode::OK);
        keys.push(key);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut used = 0;
    for key in keys {
        let key: &'static str = Box::leak(key.into_boxed_str());
        used += 10_000 - left(&tokens, key).await;
    }
    println!("{through} of 200 through; {used} Redis units used (500 each admitted)");
    assert_eq!(through, 10);
    assert_eq!(used, 500 * 10, "the refused kept {} units", used - 5_000);
}
