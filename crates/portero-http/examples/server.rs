//! A rate-limited axum server: 3 requests per minute per client address, the client
//! read from `X-Forwarded-For` only when a trusted proxy (here: none but loopback
//! itself, for the demo) sent it.
//!
//! ```sh
//! cargo run -p portero-http --example server        # listens on 127.0.0.1:3000
//! curl -i http://127.0.0.1:3000/                    # 200, RateLimit: "per-client";r=2;t=20
//! ```

use std::net::SocketAddr;
use std::sync::Arc;

use axum::{routing::get, Router};
use portero::{Gcra, KeyedLimiter, Quota};
use portero_http::{ClientIp, Limit, LimitLayer, Policy, TrustedProxies};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quota = Quota::per_minute(3)?;
    let limiter = Arc::new(KeyedLimiter::new(Gcra::new(quota), 100_000));
    let client = ClientIp::new(TrustedProxies::new(["127.0.0.1"])?);
    let app = Router::new().route("/", get(|| async { "hello\n" })).layer(
        LimitLayer::new(Limit::new(
            limiter,
            Policy::for_quota("per-client", &quota)?,
            move |req: &http::Request<axum::body::Body>| client.key(req),
        ))
        .legacy_headers(true),
    );
    let addr = std::env::var("PORTERO_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
