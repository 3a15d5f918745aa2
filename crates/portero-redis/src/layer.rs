//! [`RedisRateLimitLayer`]: a [`RedisLimiter`] in front of a tower service, so every
//! instance behind the load balancer enforces one shared limit.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::sync::Arc;

use http::{Request, Response, StatusCode};
use portero_http::headers::{self, Policy};
use portero_http::{too_many_requests, WhenNoKey};
use tower_layer::Layer;
use tower_service::Service;

use crate::{RedisLimiter, ServedBy};

/// Checks one unit per request against a [`RedisLimiter`], keyed by `key(&request)`:
/// admitted requests go on with the `RateLimit` fields added to their response,
/// rejected ones get 429 with `Retry-After` and `Cache-Control: no-store` without
/// reaching the inner service. Requests for which `key` returns `None` are decided by
/// [`WhenNoKey`] as in portero-http's layers: by default they share one bucket (the
/// empty key's), so a client that leaves out the header a limit keys on is limited
/// all the same. While Redis is down the limiter's [`WhenDown`](crate::WhenDown) policy
/// decides, and the response carries `RateLimit-Source: fallback` so it shows in logs.
///
/// ```no_run
/// use axum::{routing::get, Router};
/// use portero::Quota;
/// use portero_http::Policy;
/// use portero_redis::{RedisAlgorithm, RedisLimiter, RedisRateLimitLayer};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let quota = Quota::per_minute(100)?;
/// let shared = RedisLimiter::connect("redis://10.0.0.5:6379", RedisAlgorithm::gcra(quota)?).await?;
/// let app: Router = Router::new().route("/", get(|| async { "hi" })).layer(RedisRateLimitLayer::new(
///     shared,
///     Policy::for_quota("per-client", &quota)?,
///     |req: &http::Request<axum::body::Body>| {
///         req.headers().get("x-client-id")?.to_str().ok().map(str::to_owned)
///     },
/// ));
/// # let _ = app; Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisRateLimitLayer<F> {
    limiter: RedisLimiter,
    policy: Arc<Policy>,
    key: F,
    when_no_key: WhenNoKey,
}

impl<F> fmt::Debug for RedisRateLimitLayer<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisRateLimitLayer")
            .field("limiter", &self.limiter)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl<F> RedisRateLimitLayer<F> {
    /// Limits by `limiter`, advertising `policy`, keyed by `key`.
    pub fn new(limiter: RedisLimiter, policy: Policy, key: F) -> Self {
        Self {
            limiter,
            policy: Arc::new(policy),
            key,
            when_no_key: WhenNoKey::default(),
        }
    }

    /// What a request without a key gets (default [`WhenNoKey::SharedBucket`]: the
    /// bucket of the empty key, shared by every instance).
    pub fn when_no_key(mut self, when: WhenNoKey) -> Self {
        self.when_no_key = when;
        self
    }
}

impl<S, F: Clone> Layer<S> for RedisRateLimitLayer<F> {
    type Service = RedisRateLimitService<S, F>;

    fn layer(&self, inner: S) -> Self::Service {
        RedisRateLimitService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`RedisRateLimitLayer`] builds.
#[derive(Clone)]
pub struct RedisRateLimitService<S, F> {
    inner: S,
    layer: RedisRateLimitLayer<F>,
}

impl<S: fmt::Debug, F> fmt::Debug for RedisRateLimitService<S, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisRateLimitService")
            .field("inner", &self.inner)
            .field("layer", &self.layer)
            .finish()
    }
}

/// The response of a [`RedisRateLimitService`]: the check waits for Redis, so the
/// future is boxed.
pub type RedisRateLimitFuture<B, E> = Pin<Box<dyn Future<Output = Result<Response<B>, E>> + Send>>;

/// `RateLimit-Source`, set to `fallback` on responses the outage policy decided.
const SOURCE: http::HeaderName = http::HeaderName::from_static("ratelimit-source");

impl<S, F, ReqB, ResB> Service<Request<ReqB>> for RedisRateLimitService<S, F>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Future: Send,
    F: Fn(&Request<ReqB>) -> Option<String>,
    ReqB: Send + 'static,
    ResB: Default + From<&'static str> + Send + 'static,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = RedisRateLimitFuture<ResB, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        // The service that was polled ready serves this request; a clone takes its
        // place for the next one (the check is asynchronous, so the call happens later).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let key = match ((self.layer.key)(&request), self.layer.when_no_key) {
            (Some(key), _) => key,
            (None, WhenNoKey::SharedBucket) => String::new(),
            (None, WhenNoKey::Allow) => return Box::pin(inner.call(request)),
            // `WhenNoKey` may grow; anything else refuses rather than admits.
            (None, _) => {
                let refused =
                    portero::Decision::deny_for(self.layer.policy.quota(), portero::DENY_FOR_NANOS);
                let response = too_many_requests(&refused, &self.layer.policy);
                return Box::pin(async move { Ok(response) });
            }
        };
        let (limiter, policy) = (self.layer.limiter.clone(), self.layer.policy.clone());
        Box::pin(async move {
            let verdict = match limiter.check(&key, 1).await {
                Ok(v) => v,
                // Redis answered with an error (counted and logged by the limiter):
                // a fault to fix, not a client over its limit, nor an outage.
                Err(crate::RedisCheckError::Redis(_)) => {
                    let mut r = Response::new(ResB::default());
                    *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                    return Ok(r);
                }
                // A cost above capacity cannot happen at one unit; a full local
                // fallback table denies for a second.
                Err(_) => crate::Verdict {
                    decision: portero::Decision::deny_for(policy.quota(), portero::DENY_FOR_NANOS),
                    served_by: ServedBy::Fallback,
                },
            };
            let mut response = if verdict.decision.is_allowed() {
                let mut r = inner.call(request).await?;
                headers::insert(r.headers_mut(), &verdict.decision, &policy);
                r
            } else {
                too_many_requests(&verdict.decision, &policy)
            };
            if verdict.served_by == ServedBy::Fallback {
                response
                    .headers_mut()
                    .insert(SOURCE, http::HeaderValue::from_static("fallback"));
            }
            Ok(response)
        })
    }
}
