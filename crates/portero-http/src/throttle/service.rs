//! The service: book a slot, wait for it, then call the dependency.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use portero::{Clock, ReserveError};
use tower_service::Service;

use super::{CallCost, OnePerCall, ThrottleError, ThrottleLayer};

/// The response future of a [`ThrottleService`]: boxed, because it waits for its slot
/// and then drives a clone of the inner service.
pub type ThrottleFuture<R, E> = Pin<Box<dyn Future<Output = Result<R, ThrottleError<E>>> + Send>>;

/// The service [`ThrottleLayer`] builds.
pub struct ThrottleService<S, C, F = OnePerCall> {
    pub(super) inner: S,
    pub(super) layer: ThrottleLayer<C, F>,
}

impl<S: Clone, C, F: Clone> Clone for ThrottleService<S, C, F> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
        }
    }
}

impl<S: fmt::Debug, C: fmt::Debug, F: fmt::Debug> fmt::Debug for ThrottleService<S, C, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThrottleService")
            .field("inner", &self.inner)
            .field("layer", &self.layer)
            .finish()
    }
}

impl<S, Req, C, F> Service<Req> for ThrottleService<S, C, F>
where
    F: CallCost<Req>,
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send,
    Req: Send + 'static,
    C: Clock + Send + Sync + 'static,
{
    type Response = S::Response;
    type Error = ThrottleError<S::Error>;
    type Future = ThrottleFuture<S::Response, S::Error>;

    // Readiness is awaited inside the future, after the wait, on the clone that will
    // make the call: a call waiting for its turn must not hold the client's readiness.
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let mut inner = self.inner.clone();
        // Booked when the call is made, so calls take their turns in call order; a
        // cost above the burst is refused here, booking nothing.
        let cost = self.layer.cost.cost(&request);
        let booked = self.layer.limiter.reserve_owned(cost, self.layer.max_wait);
        Box::pin(async move {
            let reservation = match booked {
                Ok(r) => r,
                Err(ReserveError::TooLong { wait }) => return Err(ThrottleError::WouldWait(wait)),
                Err(e) => return Err(ThrottleError::Limit(e)),
            };
            // Dropped here (the caller gave up), the reservation gives its slot back.
            reservation.ready().await;
            std::future::poll_fn(|cx| inner.poll_ready(cx))
                .await
                .map_err(ThrottleError::Inner)?;
            inner.call(request).await.map_err(ThrottleError::Inner)
        })
    }
}
