//! A stack under load: a request refused by a later limit keeps none of what the
//! earlier ones hold, however many requests are in flight (the pipeline asks every
//! local limit before it takes from any). The same over Redis: `portero-redis`'s
//! `tests/refunds_under_load.rs`.

use std::sync::Arc;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use http::{HeaderName, HeaderValue, Request, StatusCode};
use portero::{AlgorithmName, AnyAlgorithm, Clock, Gcra, KeyedLimiter, Quota};
use portero_http::{keys, Limit, LimitLayer, Policy};
use tower::ServiceExt;

/// A client limit (burst 300, one unit back every 12 s) then a tenant limit that
/// admits 50, both in memory on the default clock: 12,000 requests of one client, 64 in flight at a time. 50 get
/// through; the client's limit must then stand at 300 − 50, for GCRA and the token
/// bucket alike — every refused request gave back (or never took) its unit.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn twelve_thousand_stacked_requests_64_in_flight_keep_no_unit_of_the_earlier_limit() {
    for name in ["gcra", "token-bucket"] {
        let per_client = Quota::per_hour(300).unwrap();
        let algorithm = AnyAlgorithm::new(AlgorithmName::parse(name).unwrap(), per_client).unwrap();
        let client = Arc::new(KeyedLimiter::new(algorithm, 100));
        let per_tenant = Quota::per_hour(50).unwrap();
        let tenant = Arc::new(KeyedLimiter::new(Gcra::new(per_tenant), 100));
        let header = |name| keys::header::<Body>(HeaderName::from_static(name));
        let layer = LimitLayer::new(Limit::new(
            client.clone(),
            Policy::for_quota("client", &per_client).unwrap(),
            header("x-client"),
        ))
        .limit(Limit::new(
            tenant,
            Policy::for_quota("tenant", &per_tenant).unwrap(),
            header("x-tenant"),
        ));
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer);
        let gate = Arc::new(tokio::sync::Semaphore::new(64));
        let mut all = tokio::task::JoinSet::new();
        for _ in 0..12_000 {
            let (app, turn) = (app.clone(), gate.clone().acquire_owned().await.unwrap());
            all.spawn(async move {
                let request = Request::get("/")
                    .header("x-client", "alice")
                    .header("x-tenant", "acme")
                    .body(Body::empty())
                    .unwrap();
                let status = app.oneshot(request).await.unwrap().status();
                drop(turn);
                status
            });
        }
        let mut through = 0u64;
        while let Some(status) = all.join_next().await {
            through += u64::from(status.unwrap() == StatusCode::OK);
        }
        let left = client
            .peek_at(&HeaderValue::from_static("alice"), client.clock().now(), 0)
            .unwrap()
            .remaining();
        let kept = 300 - left - through;
        println!("{name}: {through} of 12,000 through, {kept} units of the client's limit kept by refused requests");
        assert_eq!(through, 50);
        assert_eq!(kept, 0, "{name}: refused requests kept {kept} units");
    }
}
