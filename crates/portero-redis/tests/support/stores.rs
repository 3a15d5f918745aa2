//! The stores every pipeline option is checked with (the in-memory table, the exact
//! log, a Redis limiter, a leased one), and the requests that drive them.
#![allow(dead_code)] // each test binary uses the helpers it needs

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use http::{HeaderName, HeaderValue, Request, Response, StatusCode};
use portero::{Gcra, KeyedLimiter, KeyedLog, Quota};
use portero_http::{keys, Limit, LimitLayer, Policy, Store};
use portero_redis::{LeasedLimiter, LocalRedis, RedisAlgorithm, RedisLimiter};
use tower::ServiceExt;

/// The stores every option is checked with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Memory,
    /// The exact per-key sliding log (logins).
    Log,
    Redis,
    Leased,
}

pub const KINDS: [Kind; 4] = [Kind::Memory, Kind::Log, Kind::Redis, Kind::Leased];

pub fn per_minute(n: u64) -> Quota {
    Quota::per_minute(n).unwrap()
}

pub fn x_client() -> impl Fn(&Request<Body>) -> Option<HeaderValue> + Clone + Send + Sync {
    keys::header::<Body>(HeaderName::from_static("x-client"))
}

/// A fresh store of `kind` (its own Redis prefix, so runs never share keys) behind
/// one limit of `quota` keyed by `x-client`, added to `layer` or starting one.
pub struct Stores {
    redis: LocalRedis,
    next: std::sync::atomic::AtomicU64,
}

impl Stores {
    pub fn start() -> Self {
        Self {
            redis: LocalRedis::start().expect("redis-server for this test"),
            next: 0.into(),
        }
    }

    pub async fn redis(&self, quota: Quota) -> RedisLimiter {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        RedisLimiter::connect(&self.redis.url(), RedisAlgorithm::gcra(quota).unwrap())
            .await
            .unwrap()
            .timeout(Duration::from_secs(5))
            .prefix(&format!("matrix{n}"))
            .unwrap()
    }

    /// A fresh store of `kind` with `quota`.
    pub async fn store(&self, kind: Kind, quota: Quota) -> Under {
        match kind {
            Kind::Memory => {
                Under::Memory(Arc::new(KeyedLimiter::new(Gcra::new(quota), 100)), quota)
            }
            Kind::Log => Under::Log(Arc::new(KeyedLog::new(quota, 100).unwrap()), quota),
            Kind::Redis => Under::Redis(self.redis(quota).await, quota),
            // Batches of 2: most checks are spent locally, some lease again.
            Kind::Leased => Under::Leased(
                LeasedLimiter::new(self.redis(quota).await, 2, Duration::from_secs(60), 100),
                quota,
            ),
        }
    }

    /// One limit of a fresh store of `kind`, as a layer of its own or added to `to`.
    pub async fn limit(
        &self,
        kind: Kind,
        quota: Quota,
        name: &str,
        to: Option<LimitLayer<Body>>,
    ) -> LimitLayer<Body> {
        self.store(kind, quota).await.limit(name, to)
    }
}

/// A store under test, with its quota.
#[derive(Clone)]
pub enum Under {
    Memory(Arc<KeyedLimiter<HeaderValue, Gcra>>, Quota),
    Log(Arc<KeyedLog<HeaderValue>>, Quota),
    Redis(RedisLimiter, Quota),
    Leased(LeasedLimiter, Quota),
}

impl Under {
    /// This store behind a limit keyed by `x-client`, as a layer of its own or
    /// added to `to`.
    pub fn limit(self, name: &str, to: Option<LimitLayer<Body>>) -> LimitLayer<Body> {
        macro_rules! add {
            ($store:expr, $quota:expr) => {{
                let policy = Policy::for_quota(name, &$quota).unwrap();
                let limit = Limit::new($store, policy, x_client());
                match to {
                    Some(layer) => layer.limit(limit),
                    None => LimitLayer::new(limit),
                }
            }};
        }
        match self {
            Self::Memory(s, q) => add!(s, q),
            Self::Log(s, q) => add!(s, q),
            Self::Redis(s, q) => add!(s, q),
            Self::Leased(s, q) => add!(s, q),
        }
    }
}

pub fn app(layer: LimitLayer<Body>) -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
}

pub fn request(client: Option<&str>) -> Request<Body> {
    let mut r = Request::builder().uri("/");
    if let Some(c) = client {
        r = r.header("x-client", c);
    }
    r.body(Body::empty()).unwrap()
}

/// `n` requests from `client`: the responses.
pub async fn send(app: &Router, client: Option<&str>, n: usize) -> Vec<Response<Body>> {
    send_all(app, n, || request(client)).await
}

/// `n` requests made by `request`: the responses.
pub async fn send_all(
    app: &Router,
    n: usize,
    request: impl Fn() -> Request<Body>,
) -> Vec<Response<Body>> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(app.clone().oneshot(request()).await.unwrap());
    }
    out
}

/// A request from `client` of `tenant` (`x-client`, `x-tenant`).
pub fn from(client: &str, tenant: &str) -> Request<Body> {
    Request::builder()
        .uri("/")
        .header("x-client", client)
        .header("x-tenant", tenant)
        .body(Body::empty())
        .unwrap()
}

pub fn x_tenant() -> impl Fn(&Request<Body>) -> Option<HeaderValue> + Clone + Send + Sync {
    keys::header::<Body>(HeaderName::from_static("x-tenant"))
}

/// `name` with `quota`, advertised.
pub fn policy(name: &str, quota: Quota) -> Policy {
    Policy::for_quota(name, &quota).unwrap()
}

/// A layer of a limit per user (`x-client`, in `user`) and one per tenant
/// (`x-tenant`, in `tenant`), policies `user` and `tenant`.
pub fn user_and_tenant(
    user: (impl Store<HeaderValue>, Quota),
    tenant: (impl Store<HeaderValue>, Quota),
) -> LimitLayer<Body> {
    LimitLayer::new(Limit::new(user.0, policy("user", user.1), x_client())).limit(Limit::new(
        tenant.0,
        policy("tenant", tenant.1),
        x_tenant(),
    ))
}

pub fn ok(responses: &[Response<Body>]) -> usize {
    responses
        .iter()
        .filter(|r| r.status() == StatusCode::OK)
        .count()
}

pub fn field<'a>(r: &'a Response<Body>, name: &str) -> Option<&'a str> {
    r.headers().get(name).map(|v| v.to_str().unwrap())
}

/// Runs `test` on a runtime of its own with a metrics recorder of its own: what it
/// counted.
pub fn counted(test: impl std::future::Future<Output = ()>) -> crate::counters::Counters {
    let recorder = crate::counters::Counters::default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    {
        let _local_recorder = metrics::set_default_local_recorder(&recorder);
        runtime.block_on(test);
    }
    recorder
}

/// A limiter of `quota` on `url` (a Redis that is away or hangs), connected lazily,
/// that waits 50 ms for an answer.
pub fn away(url: &str, quota: Quota) -> RedisLimiter {
    RedisLimiter::connect_lazy(url, RedisAlgorithm::gcra(quota).unwrap())
        .unwrap()
        .timeout(Duration::from_millis(50))
}

/// A listener that accepts connections and never answers: a Redis that hangs.
pub fn hanging_redis() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    url
}

/// An app behind one limit: `store` keyed by `x-client`, advertised as `p` of `quota`.
pub fn behind(store: RedisLimiter, quota: Quota) -> Router {
    app(LimitLayer::new(Limit::new(
        store,
        Policy::for_quota("p", &quota).unwrap(),
        x_client(),
    )))
}

/// `store` as a limit of `n` per minute named `name`, keyed by `x-client`.
pub fn per_client<St>(
    store: St,
    name: &str,
    n: u64,
) -> Limit<St, impl Fn(&Request<Body>) -> Option<HeaderValue> + Clone + Send + Sync> {
    Limit::new(store, policy(name, per_minute(n)), x_client())
}
