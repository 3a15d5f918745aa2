//! Several limits settling after one response settle at once: their round trips
//! overlap, so a response with two remote limits to settle waits one round trip, not
//! two. Each store here finishes its settlement only once the other's has started (a
//! barrier of two): settled one after the other, the first would wait forever.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::routing::post;
use axum::Router;
use http::{HeaderName, HeaderValue, Request, StatusCode};
use portero::{Decision, Gcra, KeyedLimiter, Quota};
use portero_http::{keys, Checked, Checking, Limit, LimitLayer, Policy, Source, Store, Ticket};
use tokio::sync::Barrier;
use tower::ServiceExt;

/// An in-memory table whose settlements are remote-like: pending until both stores'
/// settlements have started.
struct Meeting {
    table: Arc<KeyedLimiter<HeaderValue, Gcra>>,
    barrier: Arc<Barrier>,
}

impl Store<HeaderValue> for Meeting {
    fn check_key(&self, key: Option<HeaderValue>, cost: u64) -> Checking {
        Store::check_key(&self.table, key, cost)
    }

    fn standing(&self, key: Option<HeaderValue>) -> Checking {
        Store::standing(&self.table, key)
    }

    fn settle_ticket(&self, ticket: Ticket, real: u64) -> Option<Checking> {
        let (table, barrier) = (self.table.clone(), self.barrier.clone());
        Some(Checking::Pending(Box::pin(async move {
            barrier.wait().await;
            let settled = match Store::<HeaderValue>::settle_ticket(&table, ticket, real) {
                Some(Checking::Done(answer)) => answer?,
                _ => Checked::new(Decision::admitted(0, 0, 0), Source::Memory),
            };
            Ok(Checked::new(settled.decision, Source::Redis))
        })))
    }

    fn is_remote(&self) -> bool {
        true
    }
}

#[tokio::test]
async fn two_remote_limits_settle_at_once() {
    let quota = Quota::per_day(10_000).unwrap();
    let barrier = Arc::new(Barrier::new(2));
    let limit = |name: &'static str| {
        let store = Meeting {
            table: Arc::new(KeyedLimiter::new(Gcra::new(quota), 100)),
            barrier: barrier.clone(),
        };
        let table = store.table.clone();
        let limit = Limit::new(
            store,
            Policy::for_quota(name, &quota).unwrap(),
            keys::header::<Body>(HeaderName::from_static("x-api-key")),
        )
        .cost(|_, _, _| 500)
        .settle(|head| head.units("x-usage-tokens"));
        (limit, table)
    };
    let ((first, one), (second, two)) = (limit("first"), limit("second"));
    let app = Router::new()
        .route(
            "/complete",
            post(|| async { ([("x-usage-tokens", "120")], "done") }),
        )
        .layer(LimitLayer::new(first).limit(second));
    let request = Request::post("/complete")
        .header("x-api-key", "ann")
        .body(Body::empty())
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(5), app.oneshot(request))
        .await
        .expect("both settlements ran at once (one after the other, the first waits forever)")
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    for table in [one, two] {
        let Checking::Done(Ok(now)) =
            Store::standing(&table, Some(HeaderValue::from_static("ann")))
        else {
            panic!("an in-memory table answers at once");
        };
        let left = now.decision.remaining();
        assert_eq!(left, 10_000 - 120, "settled at the 120 used");
    }
}
