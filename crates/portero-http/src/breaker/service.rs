//! The service: ask the breaker, then call the dependency or answer without it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tower_layer::Layer;

use http::Response;
use portero::{BreakerOpen, Clock};
use tokio::time::Sleep;
use tower_service::Service;

use super::error::BreakerCallError;
use super::future::{CircuitBreakerFuture, State};
use super::layer::CircuitBreakerLayer;
use crate::observe::shed;

/// The service [`CircuitBreakerLayer`] builds.
pub struct CircuitBreakerService<S, B, C> {
    pub(super) inner: S,
    // Whether `inner.poll_ready` said ready since the last call: an open breaker
    // reports ready without asking the inner service.
    pub(super) inner_ready: bool,
    // The call timeout runs while the inner service is not ready too: a client that
    // cannot take a call within it has failed that call.
    pub(super) ready_deadline: Option<Pin<Box<Sleep>>>,
    pub(super) ready_timed_out: bool,
    pub(super) layer: CircuitBreakerLayer<B, C>,
}

// The layer builds this service; the impl lives here so that the layer (its
// options) never imports the service it builds.
impl<S, B, C> Layer<S> for CircuitBreakerLayer<B, C> {
    type Service = CircuitBreakerService<S, B, C>;

    fn layer(&self, inner: S) -> Self::Service {
        CircuitBreakerService {
            inner,
            inner_ready: false,
            ready_deadline: None,
            ready_timed_out: false,
            layer: self.clone(),
        }
    }
}

impl<S: Clone, B, C> Clone for CircuitBreakerService<S, B, C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            inner_ready: false,
            ready_deadline: None,
            ready_timed_out: false,
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
        match self.inner.poll_ready(cx) {
            Poll::Ready(ready) => {
                self.ready_deadline = None;
                self.inner_ready = ready.is_ok();
                Poll::Ready(ready.map_err(BreakerCallError::Inner))
            }
            Poll::Pending => {
                let Some(timeout) = self.layer.timeout else {
                    return Poll::Pending;
                };
                let deadline = self
                    .ready_deadline
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                if deadline.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                // Not ready within the call timeout: that call failed (as the probe,
                // if one was due, so the breaker opens again instead of hanging).
                self.ready_deadline = None;
                if let Ok(call) = breaker.try_call_owned() {
                    call.failure();
                }
                self.inner_ready = false;
                self.ready_timed_out = true;
                Poll::Ready(Ok(()))
            }
        }
    }

    fn call(&mut self, request: Req) -> Self::Future {
        if std::mem::take(&mut self.ready_timed_out) {
            return CircuitBreakerFuture {
                state: State::ReadyTimedOut { answered: false },
            };
        }
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
