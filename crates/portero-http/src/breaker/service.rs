//! The service: ask the breaker, then call the dependency or answer without it.

use std::fmt;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Response;
use portero::{BreakerOpen, Clock};
use tower_service::Service;

use super::future::{CircuitBreakerFuture, State};
use super::{BreakerCallError, CircuitBreakerLayer};
use crate::observe::shed;

/// The service [`CircuitBreakerLayer`] builds.
pub struct CircuitBreakerService<S, B, C> {
    pub(super) inner: S,
    // Whether `inner.poll_ready` said ready since the last call: an open breaker
    // reports ready without asking the inner service.
    pub(super) inner_ready: bool,
    pub(super) layer: CircuitBreakerLayer<B, C>,
}

impl<S: Clone, B, C> Clone for CircuitBreakerService<S, B, C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            inner_ready: false,
            layer: self.layer.clone(),
        }
    }
}

impl<S: fmt::Debug, B, C: fmt::Debug> fmt::Debug for CircuitBreakerService<S, B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreakerService")
            .field("inner", &self.inner)
            .field("layer", &self.layer)
            .finish()
    }
}

impl<S, Req, B, C> Service<Req> for CircuitBreakerService<S, B, C>
where
    S: Service<Req, Response = Response<B>>,
    C: Clock + 'static,
{
    type Response = Response<B>;
    type Error = BreakerCallError<S::Error>;
    type Future = CircuitBreakerFuture<S::Future, B, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let breaker = &self.layer.breaker;
        if breaker.refusal_at(breaker.clock().now()).is_some() {
            // Open: the call will not reach the inner service, so its readiness
            // (a saturated pool, a full buffer) must not delay the fallback.
            self.inner_ready = false;
            return Poll::Ready(Ok(()));
        }
        let ready = self.inner.poll_ready(cx).map_err(BreakerCallError::Inner);
        self.inner_ready = matches!(ready, Poll::Ready(Ok(())));
        ready
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let breaker = &self.layer.breaker;
        let attempt = if std::mem::take(&mut self.inner_ready) {
            breaker.try_call_owned()
        } else {
            // Ready only because the breaker was open: the inner service may not be
            // called. If the period ended since, this one call is answered as open.
            Err(breaker
                .refusal_at(breaker.clock().now())
                .unwrap_or(BreakerOpen {
                    retry_after: Duration::ZERO,
                }))
        };
        let state = match attempt {
            Ok(call) => State::Calling {
                inner: self.inner.call(request),
                timeout: self.layer.timeout.map(tokio::time::sleep),
                call: Some(call),
                is_failure: self.layer.is_failure.clone(),
            },
            Err(open) => {
                shed("circuit_breaker", "circuit_open");
                State::Open {
                    answer: Some(match &self.layer.fallback {
                        Some(fallback) => Ok(fallback(open)),
                        None => Err(open),
                    }),
                }
            }
        };
        CircuitBreakerFuture { state }
    }
}
