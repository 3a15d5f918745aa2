//! A router whose handler holds requests until the test lets them go, and the small
//! helpers that drive it in-process.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use axum::body::Body;
use axum::Router;
use http::{Request, StatusCode};
use tokio::sync::Semaphore;
use tower::ServiceExt;

/// A handler that counts its calls and holds each request until `open` lets it go.
pub fn held(calls: Arc<AtomicU32>, open: Arc<Semaphore>) -> Router {
    Router::new().fallback(move || {
        let (calls, open) = (calls.clone(), open.clone());
        async move {
            calls.fetch_add(1, Ordering::SeqCst);
            open.acquire().await.unwrap().forget();
            "done"
        }
    })
}

pub fn get_path(path: &str, fields: &[(&str, &str)]) -> Request<Body> {
    let mut r = Request::get(path);
    for (k, v) in fields {
        r = r.header(*k, *v);
    }
    r.body(Body::empty()).unwrap()
}

/// Starts `n` requests that the handler will hold, and waits until all are inside.
pub async fn hold(app: &Router, calls: &AtomicU32, n: u32, path: &str, fields: &[(&str, &str)]) {
    let before = calls.load(Ordering::SeqCst);
    for _ in 0..n {
        tokio::spawn(app.clone().oneshot(get_path(path, fields)));
    }
    until(|| calls.load(Ordering::SeqCst) >= before + n).await;
}

/// Yields to the spawned requests until `done` holds (a test that would wait forever
/// fails instead).
pub async fn until(mut done: impl FnMut() -> bool) {
    for _ in 0..1_000_000 {
        if done() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("the awaited state never came");
}

pub async fn status(app: &Router, path: &str, fields: &[(&str, &str)]) -> StatusCode {
    app.clone()
        .oneshot(get_path(path, fields))
        .await
        .unwrap()
        .status()
}
