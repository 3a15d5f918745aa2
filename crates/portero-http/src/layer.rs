//! [`RateLimitLayer`]: a keyed limit in front of a tower service.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::hash::Hash;
use std::sync::Arc;

use http::{Request, Response, StatusCode};
use pin_project_lite::pin_project;
use portero::{Algorithm, Clock, Decision, KeyedError, KeyedLimiter};
use tower_layer::Layer;
use tower_service::Service;

use crate::headers::{self, Policy};

/// What to answer a new client while the key table is full of active keys (see
/// [`portero::Overflow`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WhenTableFull {
    /// 429 with `Retry-After: 1` (the default): a flood of new keys cannot get
    /// through unlimited.
    #[default]
    Reject,
    /// Let the request through unlimited, keeping the service available to new
    /// clients at the price of not limiting them until keys free up.
    Allow,
}

/// Checks one unit per request against a [`KeyedLimiter`], keyed by `key(&request)`.
///
/// An admitted request goes to the inner service and its response gets the
/// `RateLimit` fields; a rejected one never reaches it and is answered here: 429, the
/// fields, `Retry-After`, `Cache-Control: no-store` and an empty body (the response
/// body type must implement `Default`). Requests for which `key` returns `None` are
/// not limited by this layer.
///
/// The layer calls the inner service's `poll_ready` before it knows whether the
/// request will be admitted, like every tower middleware that answers by itself;
/// put it outside layers that reserve capacity in `poll_ready`.
pub struct RateLimitLayer<K, A: Copy, C, F> {
    limiter: Arc<KeyedLimiter<K, A, C>>,
    policy: Arc<Policy>,
    key: F,
    when_full: WhenTableFull,
}

impl<K, A: Copy, C, F: Clone> Clone for RateLimitLayer<K, A, C, F> {
    fn clone(&self) -> Self {
        Self {
            limiter: self.limiter.clone(),
            policy: self.policy.clone(),
            key: self.key.clone(),
            when_full: self.when_full,
        }
    }
}

impl<K, A: Copy, C, F> RateLimitLayer<K, A, C, F> {
    /// Limits by `limiter`, advertising `policy`, keyed by `key`.
    pub fn new(limiter: Arc<KeyedLimiter<K, A, C>>, policy: Policy, key: F) -> Self {
        Self {
            limiter,
            policy: Arc::new(policy),
            key,
            when_full: WhenTableFull::default(),
        }
    }

    /// What new clients get while the key table is full.
    pub fn when_table_full(mut self, answer: WhenTableFull) -> Self {
        self.when_full = answer;
        self
    }
}

impl<S, K, A: Copy, C, F: Clone> Layer<S> for RateLimitLayer<K, A, C, F> {
    type Service = RateLimitService<S, K, A, C, F>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimitService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`RateLimitLayer`] builds.
pub struct RateLimitService<S, K, A: Copy, C, F> {
    inner: S,
    layer: RateLimitLayer<K, A, C, F>,
}

impl<S: Clone, K, A: Copy, C, F: Clone> Clone for RateLimitService<S, K, A, C, F> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
        }
    }
}

/// A 429 for `decision`, answered without the inner service.
fn too_many<B: Default>(decision: &Decision, policy: &Policy) -> Response<B> {
    let mut response = Response::new(B::default());
    *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    headers::insert(response.headers_mut(), decision, policy);
    response
}

impl<S, K, A, C, F, ReqB, ResB> Service<Request<ReqB>> for RateLimitService<S, K, A, C, F>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    K: Hash,
    A: Algorithm + Copy,
    C: Clock,
    F: Fn(&Request<ReqB>) -> Option<K>,
    ResB: Default,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        let layer = &self.layer;
        let decision = match (layer.key)(&request).map(|k| layer.limiter.check_n(&k, 1)) {
            None => None,
            Some(Ok(d)) => Some(d),
            Some(Err(KeyedError::KeyTableFull { .. }))
                if layer.when_full == WhenTableFull::Allow =>
            {
                None
            }
            // A full table (or, impossibly for a clock-driven check, a bad time): deny
            // for one second rather than admit unlimited.
            Some(Err(_)) => Some(Decision::deny_for(
                layer.policy.quota(),
                portero::DENY_FOR_NANOS,
            )),
        };
        match decision {
            Some(d) if !d.is_allowed() => ResponseFuture {
                state: State::Answered {
                    response: Some(too_many(&d, &layer.policy)),
                },
            },
            _ => ResponseFuture {
                state: State::Forwarded {
                    inner: self.inner.call(request),
                    fields: decision.map(|d| (d, layer.policy.clone())),
                },
            },
        }
    }
}

pin_project! {
    /// The response of a [`RateLimitService`]: the inner service's, with the
    /// `RateLimit` fields added, or a 429 answered at once.
    pub struct ResponseFuture<Fut, B> {
        #[pin]
        state: State<Fut, B>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<Fut, B> {
        // Admitted: the inner service answers.
        Forwarded {
            #[pin]
            inner: Fut,
            fields: Option<(Decision, Arc<Policy>)>,
        },
        // Rejected: answered here.
        Answered { response: Option<Response<B>> },
    }
}

impl<Fut, B, E> Future for ResponseFuture<Fut, B>
where
    Fut: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Forwarded { inner, fields } => {
                let mut response = match inner.poll(cx) {
                    Poll::Ready(Ok(response)) => response,
                    other => return other,
                };
                if let Some((decision, policy)) = fields.take() {
                    headers::insert(response.headers_mut(), &decision, &policy);
                }
                Poll::Ready(Ok(response))
            }
            StateProj::Answered { response } => Poll::Ready(Ok(response
                .take()
                .expect("ResponseFuture polled after it completed"))),
        }
    }
}
