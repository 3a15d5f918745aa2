//! An API service as a new user builds one, the recommended way for each part:
//!
//! - **who the client is**: `ClientAddrLayer`, trusting `X-Forwarded-For` only from a
//!   proxy it knows (loopback here), and `keys::client_addr()` in every limit that
//!   keys on the address: the address is resolved once per request;
//! - **a per-IP limit** on everything: 60 per minute;
//! - **a login limit** on `POST /login`, per user name (`X-Username`), all or none
//!   with the per-IP limit; a login without a user name is refused;
//! - **a weighted limit** per API key (`X-Api-Key`) on `/api/`: an export costs 10
//!   units of its 100 per minute, a read one;
//! - **a trial limit in shadow**: counted and advertised, refusing nothing;
//! - **metrics**: every decision counted (`/metrics`, Prometheus text, with `# HELP`);
//! - **shedding** beyond 256 requests in flight, `/health` exempt.
//!
//! ```sh
//! cargo run -p portero-examples --bin api_service   # listens on 127.0.0.1:3000
//! curl -i -X POST -H 'x-username: ann' http://127.0.0.1:3000/login
//! curl -i -X POST -H 'x-api-key: k1' http://127.0.0.1:3000/api/export
//! curl http://127.0.0.1:3000/metrics
//! ```

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::routing::{get, post};
use axum::Router;
use http::{HeaderName, Method};
use metrics_exporter_prometheus::PrometheusBuilder;
use portero::{ConcurrencyLimit, Gcra, KeyedLimiter, Quota};
use portero_http::axum::ClientAddrLayer;
use portero_http::{
    keys, route, ClientIp, Limit, LimitLayer, LoadShedLayer, Policy, TrustedProxies, WhenNoKey,
};

/// A keyed GCRA limit of `quota` for up to 100,000 keys, advertised as `name`.
fn table(quota: Quota) -> Arc<KeyedLimiter<http::HeaderValue, Gcra>> {
    Arc::new(KeyedLimiter::new(Gcra::new(quota), 100_000))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let prometheus = PrometheusBuilder::new().install_recorder()?;
    portero_http::describe_metrics();

    let per_ip = Quota::per_minute(60)?;
    let login = Quota::per_minute(5)?;
    let api = Quota::per_minute(100)?;
    let trial = Quota::per_minute(30)?;
    // A limit `name` of `quota` per value of the request's `field` header.
    let per_header = |name: &str, quota: Quota, field: &'static str| {
        let key = keys::header::<Body>(HeaderName::from_static(field));
        Ok::<_, portero_http::PolicyError>(Limit::new(
            table(quota),
            Policy::for_quota(name, &quota)?,
            key,
        ))
    };
    let addresses = |quota: Quota| Arc::new(KeyedLimiter::new(Gcra::new(quota), 100_000));
    let limits = LimitLayer::new(Limit::new(
        addresses(per_ip),
        Policy::for_quota("per-ip", &per_ip)?,
        keys::client_addr::<Body>(),
    ))
    .limit(
        per_header("login", login, "x-username")?
            .route(route::post("/login"))
            .when_no_key(WhenNoKey::Reject),
    )
    .limit(
        per_header("api-key", api, "x-api-key")?
            .route(route::prefix("/api/"))
            .when_no_key(WhenNoKey::Reject)
            .cost(|method, uri, _| match (method, uri.path()) {
                (&Method::POST, "/api/export") => 10,
                _ => 1,
            }),
    )
    .limit(
        Limit::new(
            addresses(trial),
            Policy::for_quota("trial", &trial)?,
            keys::client_addr::<Body>(),
        )
        .shadow(true),
    );
    let client_ip = ClientIp::new(TrustedProxies::new(["127.0.0.1"])?);
    let shedding = LoadShedLayer::new(Arc::new(ConcurrencyLimit::new(256)), Duration::from_secs(1))
        .exempt(route::get::<Body>("/health"));
    let metrics = move || {
        let prometheus = prometheus.clone();
        async move { prometheus.render() }
    };
    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route("/login", post(|| async { "welcome\n" }))
        .route("/api/items", get(|| async { "[]\n" }))
        .route("/api/export", post(|| async { "exported\n" }))
        .route("/health", get(|| async { "ok\n" }))
        .route("/metrics", get(metrics))
        // One `Router::layer` for the front door (axum boxes each one): shed,
        // resolve the client, then limit, in that order.
        .layer(
            tower::ServiceBuilder::new()
                .layer(shedding)
                .layer(ClientAddrLayer::new(client_ip))
                .layer(limits),
        );
    portero_examples::serve(app).await
}
