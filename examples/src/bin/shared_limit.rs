//! One limit shared by every instance through Redis — 10 requests per minute per
//! client (`X-Client`), wherever they land — with an explicit outage policy: while
//! Redis does not answer within 50 ms, each instance counts locally at half the
//! quota (two instances), says so (`RateLimit-Source: fallback`), and after three
//! timeouts in a row stops waiting for Redis for five seconds. It starts while Redis
//! is down, and shares the limit once Redis is up.
//!
//! ```sh
//! REDIS_URL=redis://127.0.0.1:6379 PORTERO_ADDR=127.0.0.1:3001 cargo run -p portero-examples --bin shared_limit &
//! REDIS_URL=redis://127.0.0.1:6379 PORTERO_ADDR=127.0.0.1:3002 cargo run -p portero-examples --bin shared_limit &
//! curl -i -H 'x-client: ann' http://127.0.0.1:3001/    # the 11th across both: 429
//! ```

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use http::HeaderName;
use portero::{Gcra, KeyedLimiter, Quota};
use portero_http::{keys, Limit, LimitLayer, Policy};
use portero_redis::{RedisAlgorithm, RedisLimiter, WhenDown};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let quota = Quota::per_minute(10)?;
    let locally = Arc::new(KeyedLimiter::new(Gcra::new(Quota::per_minute(5)?), 100_000));
    let shared = RedisLimiter::connect_lazy(&url, RedisAlgorithm::gcra(quota)?)?
        .timeout(Duration::from_millis(50))
        .breaker(3, Duration::from_secs(5))?
        .when_down(WhenDown::Local(locally));
    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(LimitLayer::new(Limit::new(
            shared,
            Policy::for_quota("per-client", &quota)?,
            keys::header::<Body>(HeaderName::from_static("x-client")),
        )));
    portero_examples::serve(app).await
}
