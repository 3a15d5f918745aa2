//! A settling limit bounds its own overshoot when its keys' requests in flight are
//! capped (`InFlight`), over real HTTP: a key of 10,000 tokens a minute whose calls
//! are estimated at 1 and each use 3,000. Without the cap, 20 calls at once were all
//! admitted and spent 60,000 tokens (the AI-gateway newcomer's finding); with at most
//! 2 in flight, the key runs past its budget by at most 2 × (3,000 − 1), however many
//! calls come at once (20, then 64). Time stands still, so every count is exact.

mod support {
    pub mod loopback;
}

use std::sync::Arc;
use std::time::Duration;

use axum::routing::post;
use axum::Router;
use http::{HeaderName, HeaderValue};
use portero::{Gcra, KeyedLimiter, ManualClock, Quota};
use portero_http::{keys, InFlight, Limit, LimitLayer, Policy};
use support::loopback::{send, serve};

type Budget = Arc<KeyedLimiter<HeaderValue, Gcra, ManualClock>>;

const USED: u64 = 3_000;

fn gateway(table: Budget, q: Quota, most: Option<u32>) -> Router {
    let key = keys::header::<axum::body::Body>(HeaderName::from_static("x-api-key"));
    let policy = Policy::for_quota("tokens", &q).unwrap();
    let handler = post(|| async {
        // The model call takes a while: the calls overlap.
        tokio::time::sleep(Duration::from_millis(150)).await;
        ([("x-usage-tokens", USED.to_string())], "done")
    });
    let router = Router::new().route("/complete", handler);
    match most {
        Some(n) => router.layer(LimitLayer::new(
            Limit::new(InFlight::new(table, n).unwrap(), policy, key)
                .cost(|_, _, _| 1)
                .settle(|head| head.units("x-usage-tokens")),
        )),
        None => router.layer(LimitLayer::new(
            Limit::new(table, policy, key)
                .cost(|_, _, _| 1)
                .settle(|head| head.units("x-usage-tokens")),
        )),
    }
}

/// `n` calls of one key at once: how many were admitted.
async fn at_once(addr: std::net::SocketAddr, n: usize) -> u64 {
    let calls: Vec<_> = (0..n)
        .map(|_| {
            tokio::spawn(async move {
                send(addr, "POST", "/complete", &[("x-api-key", "k")])
                    .await
                    .status
            })
        })
        .collect();
    let mut admitted = 0;
    for call in calls {
        admitted += u64::from(call.await.unwrap() == 200);
    }
    admitted
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capped_in_flight_the_overshoot_stays_within_its_bound() {
    let q = Quota::per_minute(10_000).unwrap();
    let budget = 10_000;
    // Uncapped: what the newcomer saw.
    let table: Budget = Arc::new(KeyedLimiter::with_clock(
        Gcra::new(q),
        100,
        ManualClock::new(),
    ));
    let admitted = at_once(serve(gateway(table, q, None)).await, 20).await;
    let spent = admitted * USED;
    println!("uncapped, 20 at once: {admitted} admitted, {spent} tokens spent of {budget}");
    assert!(
        spent > budget + 2 * (USED - 1),
        "the uncapped gateway overshoots"
    );

    let most = 2;
    let bound = u64::from(most) * (USED - 1);
    let table: Budget = Arc::new(KeyedLimiter::with_clock(
        Gcra::new(q),
        100,
        ManualClock::new(),
    ));
    let addr = serve(gateway(table.clone(), q, Some(most))).await;
    let mut spent = 0;
    for n in [20, 64, 64] {
        let admitted = at_once(addr, n).await;
        assert!(
            admitted <= u64::from(most),
            "{n} at once: {admitted} admitted"
        );
        spent += admitted * USED;
        let over = spent.saturating_sub(budget);
        println!("capped at {most} in flight, {n} at once: {admitted} admitted, {spent} spent, {over} over the budget (bound {bound})");
        assert!(over <= bound, "{over} over the budget, bound {bound}");
    }
    assert!(
        spent > budget,
        "the key did run past its budget, within the bound"
    );
}

/// A request that is cancelled (its future dropped: the client went away) gives its
/// slot back, as one settled does: with one slot, the next request is admitted.
#[tokio::test]
async fn a_cancelled_request_gives_its_slot_back() {
    use tower::ServiceExt;
    let q = Quota::per_minute(10_000).unwrap();
    let table: Budget = Arc::new(KeyedLimiter::with_clock(
        Gcra::new(q),
        100,
        ManualClock::new(),
    ));
    let store = Arc::new(InFlight::new(table, 1).unwrap());
    let key = keys::header::<axum::body::Body>(HeaderName::from_static("x-api-key"));
    let limit = Limit::new(store.clone(), Policy::for_quota("tokens", &q).unwrap(), key)
        .cost(|_, _, _| 1)
        .settle(|head| head.units("x-usage-tokens"));
    let app = Router::new()
        .route(
            "/complete",
            post(|| async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                "never"
            }),
        )
        .layer(LimitLayer::new(limit));
    let request = || {
        http::Request::post("/complete")
            .header("x-api-key", "k")
            .body(axum::body::Body::empty())
            .unwrap()
    };
    let first = tokio::spawn(app.clone().oneshot(request()));
    let k = HeaderValue::from_static("k");
    while store.in_flight(Some(&k)) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let second = app.clone().oneshot(request()).await.unwrap();
    assert_eq!(second.status(), 429, "the one slot is held");
    assert_eq!(second.headers()["retry-after"], "1");
    first.abort();
    let _ = first.await;
    assert_eq!(
        store.in_flight(Some(&k)),
        0,
        "the cancelled request's slot is back"
    );
}
