//! The shared limit as a tower layer: two axum "instances" against one redis-server.

use axum::routing::get;
use axum::Router;
use http::StatusCode;
use portero::Quota;
use portero_http::{Limit, LimitLayer, Policy};
use portero_redis::{LocalRedis, RedisAlgorithm, WhenDown};
use tower::ServiceExt;

#[path = "../../portero-http/tests/support/by_client.rs"]
mod by_client;
use by_client::{client_key, request};

mod support {
    #[allow(dead_code)] // each test binary uses the helpers it needs
    pub mod local;
}
use support::local::{answering, start_redis};

async fn instance(server: &LocalRedis, quota: Quota, when_down: WhenDown) -> Router {
    let limiter = answering(server, RedisAlgorithm::gcra(quota).unwrap())
        .await
        .when_down(when_down);
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(LimitLayer::new(Limit::new(
            limiter,
            Policy::for_quota("per-client", &quota).unwrap(),
            client_key,
        )))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_one_limit_and_answer_429() {
    let mut server = start_redis();
    let quota = Quota::per_minute(5).unwrap();
    let a = instance(&server, quota, WhenDown::FailClosed).await;
    let b = instance(&server, quota, WhenDown::FailClosed).await;
    for (i, app) in [&a, &a, &a, &b, &b].into_iter().enumerate() {
        let r = app.clone().oneshot(request(Some("alice"))).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "request {i}");
        assert_eq!(r.headers()["ratelimit-policy"], r#""per-client";q=5;w=60"#);
        let left = 4 - i;
        let field = r.headers()["ratelimit"].to_str().unwrap().to_owned();
        assert!(
            field.starts_with(&format!(r#""per-client";r={left};t="#)),
            "{field}"
        );
        assert!(r.headers().get("ratelimit-source").is_none());
    }
    for app in [&a, &b] {
        let r = app.clone().oneshot(request(Some("alice"))).await.unwrap();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()["retry-after"], "12");
        assert_eq!(r.headers()["cache-control"], "no-store");
    }
    // Another client, and a request without a key, are not held back by alice.
    let r = b.clone().oneshot(request(Some("bob"))).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = a.clone().oneshot(request(None)).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        r.headers().get("ratelimit").is_some(),
        "limited too, in the shared bucket"
    );

    // Redis goes away: each instance's policy answers, and says so.
    let open = instance(&server, quota, WhenDown::FailOpen).await;
    server.stop();
    let r = open.oneshot(request(Some("carol"))).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["ratelimit-source"], "fallback");
    // Failing closed decides nothing: an outage, not a client over its limit (it was
    // a 429 "rate limit exceeded" with the shared quota), and no fallback decided it
    // (it said `fallback` and "service overloaded" with none configured).
    let r = a.clone().oneshot(request(Some("carol"))).await.unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.headers()["ratelimit-source"], "unavailable");
    assert_eq!(r.headers()["retry-after"], "1");
    assert_eq!(r.headers()["content-type"], "application/json");
    let body = axum::body::to_bytes(r.into_body(), 1_000).await.unwrap();
    assert_eq!(body, portero_http::LIMIT_UNAVAILABLE_BODY);
}

/// Requests whose key function finds no key (a client that leaves out the header)
/// share one bucket by default, as with the in-memory layer: 5 of 20 across both
/// instances (before: all 20 admitted, no limit at all). `Reject` refuses them;
/// `Allow` is the explicit opt-out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_a_key_are_never_unlimited() {
    use portero_http::WhenNoKey;
    let server = start_redis();
    let quota = Quota::per_minute(5).unwrap();
    for (when, want) in [
        (None, 5),
        (Some(WhenNoKey::SharedBucket), 0), // the same bucket, already spent above
        (Some(WhenNoKey::Reject), 0),
        (Some(WhenNoKey::Allow), 20),
    ] {
        let layer = |limiter| {
            let l = LimitLayer::new(Limit::new(
                limiter,
                Policy::for_quota("per-client", &quota).unwrap(),
                client_key,
            ));
            match when {
                Some(w) => l.when_no_key(w),
                None => l,
            }
        };
        let mut apps = Vec::new();
        for _ in 0..2 {
            let limiter = answering(&server, RedisAlgorithm::gcra(quota).unwrap()).await;
            apps.push(
                Router::new()
                    .route("/", get(|| async { "ok" }))
                    .layer(layer(limiter)),
            );
        }
        let mut admitted = 0;
        for i in 0..20 {
            let r = apps[i % 2].clone().oneshot(request(None)).await.unwrap();
            admitted += u32::from(r.status() == StatusCode::OK);
        }
        assert_eq!(admitted, want, "{when:?}");
    }
}
