//! A penalty blocks a key its limit refused for the stated time, with a
//! `Retry-After` of exactly the time left, and lets it through once it ends; a full
//! penalty table leaves new keys to their own limit; a blocked key costs a remote
//! limit nothing. Time stands still (a manual clock) unless a test moves it.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request as AxumRequest;
use axum::routing::post;
use axum::Router;
use http::{HeaderName, HeaderValue, Request, StatusCode};
use portero::{KeyedLog, ManualClock, Quota};
use portero_http::{keys, Limit, LimitLayer, Penalty, Policy};
use tower::ServiceExt;

const HOUR: Duration = Duration::from_secs(3600);

/// Five failed logins per user in 15 minutes, the sixth locking the user out for an
/// hour (at most `max_keys` users at once); a 401 unless the password is "right".
fn logins(clock: &Arc<ManualClock>, max_keys: usize) -> Router {
    let failures = Quota::new(5, Duration::from_secs(15 * 60)).unwrap();
    let log = KeyedLog::with_clock(failures, 1_000, clock.clone()).unwrap();
    let store = Penalty::with_clock(log, HOUR, max_keys, clock.clone()).unwrap();
    let by_user = keys::header::<Body>(HeaderName::from_static("x-user"));
    let limit = Limit::new(
        store,
        Policy::for_quota("login", &failures).unwrap(),
        by_user,
    )
    .count_only(|head| head.status() == StatusCode::UNAUTHORIZED);
    Router::new()
        .route(
            "/login",
            post(|req: AxumRequest| async move {
                match req.headers().get("x-password").map(|p| p == "right") {
                    Some(true) => StatusCode::OK,
                    _ => StatusCode::UNAUTHORIZED,
                }
            }),
        )
        .layer(LimitLayer::new(limit))
}

async fn login(app: &Router, user: &str, password: &str) -> (StatusCode, Option<u64>) {
    let request = Request::post("/login")
        .header("x-user", user)
        .header("x-password", HeaderValue::from_str(password).unwrap())
        .body(Body::empty())
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let retry = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().parse().unwrap());
    (response.status(), retry)
}

#[tokio::test]
async fn the_sixth_failure_locks_the_user_out_for_the_hour_whatever_its_window_says() {
    let clock = Arc::new(ManualClock::new());
    let app = logins(&clock, 100);
    for _ in 0..5 {
        assert_eq!(
            login(&app, "ann", "wrong").await.0,
            StatusCode::UNAUTHORIZED
        );
    }
    // The limit refuses the sixth: the penalty starts, and says so.
    assert_eq!(
        login(&app, "ann", "right").await,
        (StatusCode::TOO_MANY_REQUESTS, Some(3600))
    );
    // 16 minutes on, the failures have left the window, the penalty has not.
    clock.advance((16 * 60) * 1_000_000_000);
    assert_eq!(
        login(&app, "ann", "right").await,
        (StatusCode::TOO_MANY_REQUESTS, Some(2640))
    );
    // Another user is not blocked by ann's penalty.
    assert_eq!(login(&app, "bo", "right").await.0, StatusCode::OK);
    // The hour is over: the right password gets in.
    clock.advance((2640) * 1_000_000_000);
    assert_eq!(login(&app, "ann", "right").await.0, StatusCode::OK);
}

#[tokio::test]
async fn a_blocked_user_adds_no_failure_and_the_penalty_does_not_start_again() {
    let clock = Arc::new(ManualClock::new());
    let app = logins(&clock, 100);
    for _ in 0..5 {
        login(&app, "cy", "wrong").await;
    }
    login(&app, "cy", "wrong").await; // refused: the hour starts
    clock.advance((30 * 60) * 1_000_000_000);
    // Hammering while blocked does not push the end of the hour.
    for _ in 0..50 {
        assert_eq!(login(&app, "cy", "wrong").await.1, Some(1800));
    }
    clock.advance((1800) * 1_000_000_000);
    assert_eq!(login(&app, "cy", "wrong").await.0, StatusCode::UNAUTHORIZED);
}

/// An attacker who fills the penalty table with users of their own cannot unlock a
/// user that is blocked, and a user who finds the table full is still held to the
/// limit (five failures), only not locked out beyond it.
#[tokio::test]
async fn a_full_penalty_table_leaves_new_users_to_their_own_limit() {
    let clock = Arc::new(ManualClock::new());
    let app = logins(&clock, 2);
    for user in ["victim", "filler-1", "filler-2", "late"] {
        for _ in 0..6 {
            login(&app, user, "wrong").await;
        }
    }
    assert_eq!(
        login(&app, "victim", "right").await.1,
        Some(3600),
        "still blocked"
    );
    let (status, retry) = login(&app, "late", "right").await;
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "its own limit refuses it"
    );
    assert!(
        retry.unwrap() <= 15 * 60,
        "no penalty: the window's wait, {retry:?}"
    );
}

/// A wrapped store whose answers come later (a remote store): every check of a key
/// it has seen three times is refused, with a wait of one second.
struct Remote(std::sync::Mutex<u32>);

impl portero_http::Store<&'static str> for Remote {
    fn check_key(&self, _: Option<&'static str>, _: u64) -> portero_http::Checking {
        let seen = {
            let mut n = self.0.lock().unwrap();
            *n += 1;
            *n
        };
        portero_http::Checking::Pending(Box::pin(async move {
            tokio::task::yield_now().await;
            let d = if seen <= 3 {
                portero::Decision::admitted(3, 3 - u64::from(seen), 0)
            } else {
                portero::Decision::rejected(3, 0, 1_000_000_000, 1_000_000_000)
            };
            Ok(portero_http::Checked::new(d, portero_http::Source::Redis))
        }))
    }

    fn standing(&self, _: Option<&'static str>) -> portero_http::Checking {
        unreachable!("not asked here")
    }
}

async fn answer(checking: portero_http::Checking) -> portero::Decision {
    match checking {
        portero_http::Checking::Done(answer) => answer.unwrap().decision,
        portero_http::Checking::Pending(pending) => pending.await.unwrap().decision,
    }
}

/// Requests in flight when the penalty starts wait it out too: the remote store
/// said one second to each, the penalty an hour (found by an outside review: only
/// the first was told the hour).
#[tokio::test]
async fn requests_in_flight_when_the_penalty_starts_are_told_the_hour_too() {
    use portero_http::Store;
    let clock = Arc::new(ManualClock::new());
    let store = Penalty::with_clock(Remote(Default::default()), HOUR, 10, clock.clone()).unwrap();
    for _ in 0..3 {
        assert!(answer(store.check_key(Some("k"), 1)).await.is_allowed());
    }
    let in_flight: Vec<_> = (0..4).map(|_| store.check_key(Some("k"), 1)).collect();
    for checking in in_flight {
        let d = answer(checking).await;
        assert!(!d.is_allowed());
        assert_eq!(d.retry_after().as_secs(), 3600, "{d:?}");
    }
}

/// A penalty over plans answers a blocked key with its own plan's fields.
#[tokio::test]
async fn a_blocked_key_keeps_its_plans_fields() {
    use portero::{Gcra, KeyedLimiter};
    use portero_http::Plans;
    let clock = Arc::new(ManualClock::new());
    let plan = |name: &str, n: u64| {
        let q = Quota::per_minute(n).unwrap();
        let table = Arc::new(KeyedLimiter::with_clock(Gcra::new(q), 100, clock.clone()));
        (Policy::for_quota(name, &q).unwrap(), table)
    };
    let (free, pro) = (plan("free", 1), plan("pro", 3));
    let plans = Plans::new().plan(free.0, free.1).plan(pro.0, pro.1);
    let store = Penalty::with_clock(plans, HOUR, 100, clock.clone()).unwrap();
    let key = |req: &Request<Body>| {
        let key = req.headers().get("x-user")?.to_str().ok()?.to_owned();
        Some((usize::from(key.starts_with("pro_")), key))
    };
    let app = Router::new()
        .route("/login", post(|| async { "ok" }))
        .layer(LimitLayer::new(Limit::new(
            store,
            Policy::new("plan", 1, 60).unwrap(),
            key,
        )));
    let mut fields = Vec::new();
    for _ in 0..5 {
        let request = Request::post("/login")
            .header("x-user", "pro_ann")
            .body(Body::empty())
            .unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        let policy = response.headers()["ratelimit-policy"]
            .to_str()
            .unwrap()
            .to_owned();
        fields.push((response.status().as_u16(), policy));
    }
    assert_eq!(fields[3].0, 429, "{fields:?}");
    for (status, policy) in &fields {
        assert!(policy.starts_with("\"pro\""), "{status}: {policy}");
    }
}

/// Bad settings are errors, never a panic or an abort: a zero or absurd period, a
/// table that cannot be allocated.
#[test]
fn bad_penalty_settings_are_errors() {
    let log = || KeyedLog::new(Quota::per_minute(5).unwrap(), 10).unwrap();
    let err = |r: Result<Penalty<KeyedLog<str>, str>, portero_http::PenaltyError>| r.unwrap_err();
    assert!(matches!(
        err(Penalty::new(log(), Duration::ZERO, 10)),
        portero_http::PenaltyError::Period(_)
    ));
    assert!(matches!(
        err(Penalty::new(log(), Duration::MAX, 10)),
        portero_http::PenaltyError::Period(_)
    ));
    assert!(matches!(
        err(Penalty::new(log(), HOUR, usize::MAX)),
        portero_http::PenaltyError::TableTooLarge { .. }
    ));
}
