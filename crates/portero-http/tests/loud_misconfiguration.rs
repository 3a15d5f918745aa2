//! A server that forgot to record each connection's address (axum served without
//! `into_make_service_with_connect_info`) says so on stderr the first time, naming
//! the fix, whatever the crate's features: before, without a `tracing` subscriber it
//! answered 500 and logged nothing (found by a new user).

use std::process::Command;

use axum::body::Body;
use http::{Request, StatusCode};
use portero::{Gcra, KeyedLimiter, Quota};
use portero_http::{keys, ClientIp, Limit, LimitLayer, Policy, TrustedProxies};
use tower::{Layer, ServiceExt};

/// Run in a child process (so that its stderr can be read): two requests without
/// a recorded peer address.
#[tokio::test]
async fn child_two_requests_without_a_peer_address() {
    if std::env::var_os("PORTERO_CHILD").is_none() {
        return;
    }
    let q = Quota::per_minute(60).unwrap();
    let layer = LimitLayer::new(Limit::new(
        std::sync::Arc::new(KeyedLimiter::new(Gcra::new(q), 100)),
        Policy::for_quota("per-ip", &q).unwrap(),
        keys::client_ip::<Body>(ClientIp::new(TrustedProxies::none())),
    ));
    let service = layer.layer(tower::service_fn(|_: Request<Body>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(Body::empty()))
    }));
    for _ in 0..2 {
        let response = service
            .clone()
            .oneshot(Request::new(Body::empty()))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}

#[test]
fn a_missing_peer_address_is_said_once_on_stderr_with_the_fix() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_two_requests_without_a_peer_address",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("PORTERO_CHILD", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "the child test failed: {out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said = stderr
        .matches("into_make_service_with_connect_info")
        .count();
    assert_eq!(said, 1, "said once, naming the fix; stderr was:\n{stderr}");
}
