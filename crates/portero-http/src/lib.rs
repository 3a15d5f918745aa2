//! portero over HTTP: who the client is, what a server sends when it limits, and what
//! a client does when it is limited.
//!
//! - [`ClientIp`] ([`client`]): the client's address — the connection's peer, or what a
//!   trusted proxy wrote in `X-Forwarded-For` / `Forwarded`, read from the right;
//!   IPv6 grouped by /64. [`keys`]: header, extension, global and paired keys.
//! - [`headers`]: the IETF `RateLimit` / `RateLimit-Policy` fields, `Retry-After`
//!   (whole seconds, rounded up, at most a year) and `Cache-Control: no-store` on a
//!   429, from any portero [`Decision`](portero::Decision); legacy `X-RateLimit-*`.
//! - [`LimitLayer`]: the one rate-limit pipeline, a tower layer (axum, hyper, tonic)
//!   that checks every applicable [`Limit`] per request, all or none, and answers 429
//!   itself, before the body is read. A limit's counts live in a [`Store`]: the
//!   in-memory [`KeyedLimiter`](portero::KeyedLimiter), or (portero-redis) a Redis or
//!   leased limiter; every option — no key, a store that cannot take the key, cost,
//!   shadow, custom refusal, legacy fields, routes ([`route`]) — works the same for each.
//!   [`axum`] (feature `axum`): the client's address resolved once, for limits and
//!   handlers alike, and a loud 500 when the server recorded no peer address.
//! - [`LoadShedLayer`]: 503 at once instead of queueing behind a struggling server,
//!   decided before the handler runs — beyond a fixed `C`, by priority class
//!   ([`portero::PriorityLimit`]), by tenant ([`fair::FairShare`]: the largest tenant
//!   takes the cut), or beyond a limit that follows latency
//!   ([`portero::AdaptiveConcurrency`]). [`queue::DeadlineQueueLayer`]: a bounded line,
//!   a deadline per request, oldest or newest first.
//! - [`CircuitBreakerLayer`]: the calling side — stop calling a failing dependency,
//!   answer a fallback, probe for recovery.
//! - [`Backoff`]: the client side — exponential backoff with full jitter that never
//!   retries before the server's `Retry-After`, nor waits past its own ceiling.
//!
//! Features: `axum` (read axum's `ConnectInfo`, the [`axum`] module), `metrics` (count
//! every decision per policy, outcome and source), `tracing` (an event per refusal,
//! fallback answer and failed check).
//!
//! ```
//! use axum::{routing::get, Router};
//! use portero::{Gcra, KeyedLimiter, Quota};
//! use portero_http::{ClientIp, Limit, LimitLayer, Policy, TrustedProxies};
//! use std::sync::Arc;
//!
//! let quota = Quota::per_minute(60)?;
//! let per_client = Arc::new(KeyedLimiter::new(Gcra::new(quota), 100_000));
//! let client = ClientIp::new(TrustedProxies::none()); // no proxy: the peer is the client
//! let app: Router = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(LimitLayer::new(Limit::new(
//!         per_client,
//!         Policy::for_quota("per-client", &quota)?,
//!         move |req: &http::Request<axum::body::Body>| client.key(req),
//!     )));
//! # let _ = app;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs, missing_debug_implementations)]

mod answer;
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub mod axum;
mod backoff;
mod breaker;
pub mod client;
pub mod fair;
mod field_value;
pub mod headers;
pub mod keys;
mod limit;
#[cfg(feature = "metrics")]
mod metric_keys;
mod observe;
#[cfg(feature = "metrics")]
pub use observe::describe_metrics;
pub mod queue;
pub mod route;
mod shed;
mod throttle;

pub use answer::{
    limit_failed, limit_unavailable, service_unavailable, too_costly, too_many_requests,
    too_many_requests_for, LIMIT_FAILED_BODY, LIMIT_UNAVAILABLE_BODY, SERVICE_UNAVAILABLE_BODY,
    TOO_COSTLY_BODY, TOO_MANY_REQUESTS_BODY,
};
pub use backoff::{retry_after, Backoff, BackoffError, DEFAULT_MAX_WAIT, MAX_WAIT_LIMIT};
pub use breaker::{
    BreakerCallError, CircuitBreakerFuture, CircuitBreakerLayer, CircuitBreakerService, FailureFn,
    FallbackFn, DEFAULT_CALL_TIMEOUT,
};
pub use client::{ClientAddr, ClientIp, TrustedProxies};
pub use headers::{Policy, PolicyError};
pub use limit::{
    AllRoutes, Batch, BatchPending, Checked, Checking, CostFn, Held, InFlight, Limit, LimitFuture,
    LimitLayer, LimitService, NoRoutes, NoSlots, OutageAnswer, Penalty, PenaltyError, Pending,
    Plans, Prepare, Prepared, RefusalFn, RequestHead, ResponseHead, Route, Source, Store,
    StoreError, StoreKey, Ticket, Usage, WhenNoKey, WhenUnavailable, WhichPlan,
    IN_FLIGHT_RETRY_NANOS, RATELIMIT_SOURCE,
};
pub use shed::{admission, LoadShedFuture, LoadShedLayer, LoadShedService};
pub use throttle::{
    CallCost, OnePerCall, ThrottleError, ThrottleFuture, ThrottleLayer, ThrottleService,
};

// The crate's README (its crates.io page) is checked as a doc test too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
