//! The service the end-to-end benchmark (`benches/e2e/run.sh`) loads over loopback: one
//! axum route, `GET /c/{client}`, built one of three ways — no limiter, portero's
//! `LimitLayer`, or tower_governor's layer — with one quota per client keyed by the
//! path's client id (the load generator draws 10,000 of them). `open`: a quota that
//! never refuses at this speed; `tight`: one request per client per hour (a flood:
//! every request past a client's first is refused).
//!
//! `cargo run --release -p portero-benches --example e2e_server -- portero open`
//! prints `listening on http://ADDR` and serves until stopped.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::{routing::get, Router};
use http::Request;
use portero::{Gcra, KeyedLimiter, Quota};
use portero_http::{Limit, LimitLayer, Policy};
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::KeyExtractor;
use tower_governor::GovernorError;

/// The client id: the path after `/c/`.
fn client(uri: &http::Uri) -> Option<String> {
    uri.path().strip_prefix("/c/").map(str::to_owned)
}

/// tower_governor's key: the same client id.
#[derive(Clone, Debug)]
struct PathClient;

impl KeyExtractor for PathClient {
    type Key = String;
    fn extract<T>(&self, req: &Request<T>) -> Result<String, GovernorError> {
        client(req.uri()).ok_or(GovernorError::UnableToExtractKey)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (which, load) = (
        args.next().unwrap_or_else(|| "plain".into()),
        args.next().unwrap_or_else(|| "open".into()),
    );
    let (per_hour, burst) = match load.as_str() {
        "tight" => (1, 1),
        _ => (3_600_000_000_000, 1 << 30),
    };
    let quota = Quota::new(per_hour, Duration::from_secs(3_600))?.with_burst(burst)?;
    let app = Router::new().route("/c/{client}", get(|| async { "ok" }));
    let app = match which.as_str() {
        "plain" => app,
        "portero" => {
            let table = Arc::new(KeyedLimiter::new(Gcra::new(quota), 100_000));
            let key = |req: &Request<Body>| client(req.uri());
            app.layer(LimitLayer::new(Limit::new(
                table,
                Policy::for_quota("client", &quota)?,
                key,
            )))
        }
        "governor" => {
            let config = GovernorConfigBuilder::default()
                .period(Duration::from_nanos(quota.interval_nanos()))
                .burst_size(u32::try_from(burst)?)
                .key_extractor(PathClient)
                .use_headers()
                .finish()
                .ok_or("a valid governor quota")?;
            app.layer(tower_governor::GovernorLayer::new(Arc::new(config)))
        }
        other => return Err(format!("no setup {other:?}: plain, portero or governor").into()),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        println!("listening on http://{}", listener.local_addr()?);
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await?;
        Ok(())
    })
}
