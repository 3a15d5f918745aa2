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
