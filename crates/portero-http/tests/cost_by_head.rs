//! A cost function sees the whole head of the request, extensions included: what
//! an earlier layer read of the body (a completion's `max_tokens`) is the estimate,
//! with no header made up to carry it (found by a new user building an AI gateway).

use std::sync::Arc;

use http::{Request, StatusCode};
use portero::{Gcra, KeyedLimiter, ManualClock, Quota};
use portero_http::{keys, Limit, LimitLayer, Policy, RequestHead};
use tower::{service_fn, Layer, ServiceExt};

/// What a body-parsing layer before the limit found.
#[derive(Clone)]
struct MaxTokens(u64);

#[tokio::test]
async fn a_limits_cost_reads_an_extension_an_earlier_layer_set() {
    let q = Quota::per_minute(10_000).unwrap();
    let table = Arc::new(KeyedLimiter::with_clock(
        Gcra::new(q),
        10,
        ManualClock::new(),
    ));
    let key = keys::header::<()>(http::HeaderName::from_static("x-api-key"));
    let limit = Limit::new(table.clone(), Policy::for_quota("tokens", &q).unwrap(), key).cost_by(
        |head: &RequestHead<'_>| head.extensions().get::<MaxTokens>().map_or(4_096, |m| m.0),
    );
    let service = LimitLayer::new(limit).layer(service_fn(|_: Request<()>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    }));
    let request = |tokens: Option<u64>| {
        let mut r = Request::builder()
            .header("x-api-key", "k")
            .body(())
            .unwrap();
        if let Some(t) = tokens {
            r.extensions_mut().insert(MaxTokens(t));
        }
        r
    };
    let left = || {
        table
            .peek_at(&http::HeaderValue::from_static("k"), 0, 0)
            .unwrap()
            .remaining()
    };
    assert_eq!(
        service
            .clone()
            .oneshot(request(Some(700)))
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
    assert_eq!(left(), 10_000 - 700);
    assert_eq!(
        service
            .clone()
            .oneshot(request(None))
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
    assert_eq!(left(), 10_000 - 700 - 4_096);
    // The layer's cost reads the head the same way.
    let layer = LimitLayer::new(Limit::new(
        table.clone(),
        Policy::for_quota("tokens", &q).unwrap(),
        keys::header::<()>(http::HeaderName::from_static("x-api-key")),
    ))
    .cost_by(|head: &RequestHead<'_>| head.extensions().get::<MaxTokens>().map_or(1, |m| m.0));
    let service = layer.layer(service_fn(|_: Request<()>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    }));
    service.oneshot(request(Some(204))).await.unwrap();
    assert_eq!(left(), 10_000 - 700 - 4_096 - 204);
}
