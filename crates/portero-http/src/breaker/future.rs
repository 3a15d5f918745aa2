//! The response future: reports the call's outcome to the breaker when it finishes
//! (a dropped future reports a failure through the call's own drop).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Response;
use pin_project_lite::pin_project;
use portero::{BreakerCall, BreakerOpen, Clock};
use tokio::time::Sleep;

use super::error::BreakerCallError;
use super::layer::FailureFn;

pin_project! {
    /// The response of a [`CircuitBreakerService`](super::CircuitBreakerService).
    pub struct CircuitBreakerFuture<Fut, B, C>
    where
        C: Clock,
        C: 'static,
    {
        #[pin]
        pub(super) state: State<Fut, B, C>,
    }
}

pin_project! {
    #[project = StateProj]
    pub(super) enum State<Fut, B, C>
    where
        C: Clock,
        C: 'static,
    {
        Calling {
            #[pin]
            inner: Fut,
            #[pin]
            timeout: Option<Sleep>,
            call: Option<BreakerCall<'static, C>>,
            is_failure: FailureFn<B>,
        },
        Open { answer: Option<Result<Response<B>, BreakerOpen>> },
        // Decided before any call: the inner service did not become ready in time.
        ReadyTimedOut { answered: bool },
    }
}

impl<Fut, B, E, C> Future for CircuitBreakerFuture<Fut, B, C>
where
    Fut: Future<Output = Result<Response<B>, E>>,
    C: Clock + 'static,
{
    type Output = Result<Response<B>, BreakerCallError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Calling {
                inner,
                timeout,
                call,
                is_failure,
            } => {
                let out = match inner.poll(cx) {
                    Poll::Ready(Ok(response)) => {
                        let failed = is_failure(&response);
                        (Ok(response), failed)
                    }
                    Poll::Ready(Err(e)) => (Err(BreakerCallError::Inner(e)), true),
                    Poll::Pending => match timeout.as_pin_mut().map(|t| t.poll(cx)) {
                        Some(Poll::Ready(())) => (Err(BreakerCallError::TimedOut), true),
                        _ => return Poll::Pending,
                    },
                };
                let call = call
                    .take()
                    .expect("CircuitBreakerFuture polled after it completed");
                match out {
                    (answer, false) => {
                        call.success();
                        Poll::Ready(answer)
                    }
                    (answer, true) => {
                        call.failure();
                        Poll::Ready(answer)
                    }
                }
            }
            StateProj::Open { answer } => Poll::Ready(
                answer
                    .take()
                    .expect("CircuitBreakerFuture polled after it completed")
                    .map_err(BreakerCallError::Open),
            ),
            StateProj::ReadyTimedOut { answered } => {
                assert!(!*answered, "CircuitBreakerFuture polled after it completed");
                *answered = true;
                Poll::Ready(Err(BreakerCallError::TimedOut))
            }
        }
    }
}

impl<Fut, B, C: Clock + 'static> fmt::Debug for CircuitBreakerFuture<Fut, B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreakerFuture")
            .finish_non_exhaustive()
    }
}
