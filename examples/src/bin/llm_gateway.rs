//! A model gateway whose costs are known only after the call, and a login that
//! counts failures only:
//!
//! - **tokens per minute per API key, by plan**: `free_…` keys get 10,000 tokens a
//!   minute, `pro_…` keys 100,000 (each key's fields name its own plan, and the
//!   metrics count it under its plan); at most 4 calls of one key in flight, so
//!   estimates that turn out low cannot take more than 4 calls' error past the budget;
//!   with `REDIS_URL` set, the budget is kept in Redis and shared by every instance;
//! - **`POST /v1/complete`**: admitted on an estimate (the request's
//!   `x-max-tokens`, 500 if absent), settled at the usage the model reports in the
//!   response's `x-usage-tokens` — a call that used more goes into debt, and the
//!   key's next calls wait it out (`Retry-After`);
//! - **`POST /v1/stream`**: a streamed completion that reports its tokens as it
//!   sends them, settled when the stream ends (or at what it had sent, if the
//!   client hangs up);
//! - **`POST /login`** (a form, `user=…&password=…`): 5 failed logins per user name
//!   per 15 minutes; a success is not counted and clears the failures.
//!
//! The "model" here is a stand-in that uses `x-simulate-tokens` tokens (800 if
//! absent); the password that works is `open-sesame`.
//!
//! ```sh
//! cargo run -p portero-examples --bin llm_gateway   # listens on 127.0.0.1:3000
//! # or two instances sharing the budget:
//! # REDIS_URL=redis://127.0.0.1:6379 PORTERO_ADDR=127.0.0.1:3001 cargo run -p portero-examples --bin llm_gateway
//! curl -i -X POST -H 'x-api-key: free_ann' -H 'x-simulate-tokens: 4000' http://127.0.0.1:3000/v1/complete
//! curl -N -X POST -H 'x-api-key: pro_bo' http://127.0.0.1:3000/v1/stream
//! curl -i -X POST -d 'user=ann&password=guess' http://127.0.0.1:3000/login
//! ```

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use http::{HeaderMap, StatusCode};
use portero::{Gcra, KeyedLimiter, KeyedLog, Quota};
use portero_http::{InFlight, Limit, LimitLayer, Plans, Policy, Store, Usage};
use portero_redis::{RedisAlgorithm, RedisLimiter};

/// Calls of one API key in flight at once.
const MOST_IN_FLIGHT: u32 = 4;

/// The tokens the stand-in model uses for a request.
fn simulated_tokens(fields: &HeaderMap) -> u64 {
    fields
        .get("x-simulate-tokens")
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .unwrap_or(800)
}

/// `POST /v1/complete`: the whole answer at once, its usage in a field.
async fn complete(request: Request) -> impl IntoResponse {
    let used = simulated_tokens(request.headers());
    ([("x-usage-tokens", used.to_string())], "a completion\n")
}

/// `POST /v1/stream`: ten chunks, each one's tokens reported as it is sent.
async fn stream(Extension(usage): Extension<Usage>, request: Request) -> Body {
    let per_chunk = simulated_tokens(request.headers()) / 10;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<String, std::io::Error>>(1);
    tokio::spawn(async move {
        for i in 0..10 {
            usage.add(per_chunk);
            if tx.send(Ok(format!("chunk {i}\n"))).await.is_err() {
                return; // the client hung up: `usage` settles what it was told
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    Body::from_stream(futures_lite_stream(move |cx| rx.poll_recv(cx)))
}

/// A stream from a poll function (what `tokio-stream` would give).
fn futures_lite_stream<T, F>(poll: F) -> impl futures_core::Stream<Item = T> + Send
where
    F: FnMut(&mut std::task::Context<'_>) -> std::task::Poll<Option<T>> + Send + Unpin,
{
    struct Polled<F>(F);
    impl<T, F> futures_core::Stream for Polled<F>
    where
        F: FnMut(&mut std::task::Context<'_>) -> std::task::Poll<Option<T>> + Unpin,
    {
        type Item = T;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<T>> {
            (self.0)(cx)
        }
    }
    Polled(poll)
}

/// The user name and password of a login form, parsed before the limits (which key
/// on the user name) and the handler.
#[derive(Clone)]
struct Login {
    user: String,
    password: String,
}

async fn parse_login(request: Request, next: Next) -> Response {
    if request.uri().path() != "/login" {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 4_096).await else {
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    let form = String::from_utf8_lossy(&bytes).into_owned();
    let field = |name: &str| {
        form.split('&')
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
            .map(str::to_owned)
    };
    if let (Some(user), Some(password)) = (field("user"), field("password")) {
        parts.extensions.insert(Login { user, password });
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

async fn login(Extension(login): Extension<Login>) -> StatusCode {
    if login.password == "open-sesame" {
        StatusCode::OK
    } else {
        StatusCode::UNAUTHORIZED
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (free, pro) = (Quota::per_minute(10_000)?, Quota::per_minute(100_000)?);
    let policies = (
        Policy::for_quota("free", &free)?,
        Policy::for_quota("pro", &pro)?,
    );
    // Each plan's store, capped at MOST_IN_FLIGHT calls of a key in flight: in this
    // process's memory, or in Redis (one connection, a clone per plan's quota).
    match std::env::var("REDIS_URL") {
        Ok(url) => {
            let redis = RedisLimiter::connect_lazy(&url, RedisAlgorithm::gcra(free)?)?;
            let pro_redis = redis.clone().with_algorithm(RedisAlgorithm::gcra(pro)?);
            let plans = Plans::new()
                .plan(policies.0, InFlight::new(redis, MOST_IN_FLIGHT)?)
                .plan(policies.1, InFlight::new(pro_redis, MOST_IN_FLIGHT)?);
            serve(plans).await
        }
        Err(_) => {
            let table = |q| InFlight::new(KeyedLimiter::new(Gcra::new(q), 100_000), MOST_IN_FLIGHT);
            let plans = Plans::new()
                .plan(policies.0, table(free)?)
                .plan(policies.1, table(pro)?);
            serve(plans).await
        }
    }
}

/// The gateway over `plans`, whatever store keeps them.
async fn serve<St>(plans: Plans<St>) -> Result<(), Box<dyn std::error::Error>>
where
    St: Store<String> + Send + Sync + 'static,
{
    let plans = Arc::new(plans);
    // The plan of an API key: a lookup the service owns (here, the key's prefix).
    // A key of neither plan is refused (no key: `WhenNoKey`'s shared bucket).
    let by_plan = |request: &http::Request<Body>| {
        let key = request.headers().get("x-api-key")?.to_str().ok()?;
        let plan = match key.split_once('_')?.0 {
            "free" => "free",
            "pro" => "pro",
            _ => return None,
        };
        Some((plan, key.to_owned()))
    };
    let estimate = |_: &http::Method, _: &http::Uri, fields: &HeaderMap| {
        fields
            .get("x-max-tokens")
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(500)
    };
    // A plan's client sees its plan's policy and is counted under it in the
    // metrics; this one answers requests without a key (plan 0's bucket).
    let tokens = |route: &'static str| {
        Ok::<_, portero_http::PolicyError>(
            Limit::new(plans.clone(), Policy::new("tokens", 10_000, 60)?, by_plan)
                .route(move |request: &http::Request<Body>| request.uri().path() == route)
                .cost(estimate),
        )
    };
    let complete_tokens = tokens("/v1/complete")?.settle(|head| head.units("x-usage-tokens"));
    let stream_tokens = tokens("/v1/stream")?.settle_by_usage();

    let failures = Quota::new(5, Duration::from_secs(15 * 60))?;
    let logins = Arc::new(KeyedLog::new(failures, 100_000)?);
    let by_user = |request: &http::Request<Body>| {
        request
            .extensions()
            .get::<Login>()
            .map(|login| login.user.clone())
    };
    let failed_logins = Limit::new(logins, Policy::for_quota("login", &failures)?, by_user)
        .route(|request: &http::Request<Body>| request.uri().path() == "/login")
        .count_only(|head| head.status() == StatusCode::UNAUTHORIZED)
        .clear_on(|head| head.status().is_success());

    let app = Router::new()
        .route("/v1/complete", post(complete))
        .route("/v1/stream", post(stream))
        .route("/login", post(login))
        .layer(
            tower::ServiceBuilder::new()
                .layer(middleware::from_fn(parse_login))
                .layer(
                    LimitLayer::new(complete_tokens)
                        .limit(stream_tokens)
                        .limit(failed_logins),
                ),
        );
    portero_examples::serve(app).await
}
