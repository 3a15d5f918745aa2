//! The service: ask the breaker, then call the dependency or answer without it.

use std::fmt;
use std::task::{Context, Poll};

use http::Response;
use portero::Clock;
use tower_service::Service;

use super::future::{CircuitBreakerFuture, State};
use super::{BreakerCallError, CircuitBreakerLayer};
use crate::observe::shed;

/// The service [`CircuitBreakerLayer`] builds.
pub struct CircuitBreakerService<S, B, C> {
    pub(super) inner: S,
    pub(super) layer: CircuitBreakerLayer<B, C>,
}

impl<S: Clone, B, C> Clone for CircuitBreakerService<S, B, C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
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
        self.inner.poll_ready(cx).map_err(BreakerCallError::Inner)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let state = match self.layer.breaker.try_call_owned() {
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
