//! What the layer does with faults in the caller's own code and values (found by a
//! new user building an AI gateway): a key function that panics is answered 500 and
//! said on stderr, never a dropped connection; a usage field is read only as plain
//! decimals (`+5` is not 5).

use std::sync::Arc;

use http::{Request, StatusCode};
use portero::{Gcra, KeyedLimiter, ManualClock, Quota};
use portero_http::{Limit, LimitLayer, Policy, ResponseHead, LIMIT_FAILED_BODY};
use tower::{service_fn, Layer, ServiceExt};

#[tokio::test]
async fn a_panicking_key_function_is_a_500_and_the_next_request_is_served() {
    let q = Quota::per_minute(100).unwrap();
    let table = Arc::new(KeyedLimiter::with_clock(
        Gcra::new(q),
        10,
        ManualClock::new(),
    ));
    // A plan lookup that panics on a key it does not know.
    let key = |r: &Request<()>| -> Option<String> {
        let k = r.headers().get("x-api-key")?.to_str().ok()?;
        assert!(k != "unknown", "no plan for this key");
        Some(k.to_string())
    };
    let service = LimitLayer::new(Limit::new(
        table,
        Policy::for_quota("api", &q).unwrap(),
        key,
    ))
    .layer(service_fn(|_: Request<()>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    }));
    let request = |k: &str| Request::builder().header("x-api-key", k).body(()).unwrap();
    // Before: the panic unwound through the service's future, and hyper dropped the
    // connection with no answer.
    let r = service.clone().oneshot(request("unknown")).await.unwrap();
    assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(r.into_body(), LIMIT_FAILED_BODY);
    let r = service.clone().oneshot(request("known")).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

/// A cost function that panics, the layer's or one limit's: 500, nothing charged, the
/// next request served (it used to unwind through the service: no answer at all).
#[tokio::test]
async fn a_panicking_cost_function_is_a_500_and_charges_nothing() {
    let q = Quota::per_minute(3).unwrap();
    let table = Arc::new(KeyedLimiter::with_clock(
        Gcra::new(q),
        10,
        ManualClock::new(),
    ));
    let key = |_: &Request<()>| Some("k".to_string());
    let cost = |_: &http::Method, _: &http::Uri, fields: &http::HeaderMap| -> u64 {
        let tokens = fields
            .get("x-tokens")
            .expect("every request states its tokens");
        tokens.to_str().unwrap().parse().unwrap()
    };
    let inner = service_fn(|_: Request<()>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    });
    let request = |tokens: Option<&str>| {
        let mut r = Request::builder();
        if let Some(t) = tokens {
            r = r.header("x-tokens", t);
        }
        r.body(()).unwrap()
    };
    let layered = LimitLayer::new(Limit::new(
        table.clone(),
        Policy::for_quota("api", &q).unwrap(),
        key,
    ))
    .cost(cost)
    .layer(inner);
    let own = LimitLayer::new(
        Limit::new(table.clone(), Policy::for_quota("api", &q).unwrap(), key).cost(cost),
    )
    .layer(inner);
    for service in [layered.clone().boxed_clone(), own.boxed_clone()] {
        let r = service.clone().oneshot(request(None)).await.unwrap();
        assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(r.into_body(), LIMIT_FAILED_BODY);
    }
    // Nothing was charged: the key still admits its three.
    let r = layered.clone().oneshot(request(Some("3"))).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[test]
fn usage_fields_are_plain_decimals_only() {
    let extensions = http::Extensions::new();
    let read = |value: &str| {
        let mut fields = http::HeaderMap::new();
        fields.insert("x-usage", http::HeaderValue::from_str(value).unwrap());
        ResponseHead::new(StatusCode::OK, &fields, &extensions).units("x-usage")
    };
    assert_eq!(read("1938"), Some(1938));
    assert_eq!(read(" 7 "), Some(7));
    assert_eq!(read("0"), Some(0));
    assert_eq!(read("18446744073709551615"), Some(u64::MAX));
    for bad in [
        "+5",
        "-1",
        "0x10",
        "1_000",
        "1e3",
        "5.0",
        "",
        " ",
        "18446744073709551616",
        "٣",
    ] {
        assert_eq!(read(bad), None, "{bad:?}");
    }
}
