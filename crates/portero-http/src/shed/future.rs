//! The response future: holds the slot until the inner answer is ready (or the
//! request is dropped), or carries the 503 decided before the inner service.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use http::Response;
use pin_project_lite::pin_project;

use super::admission::Completion;

pin_project! {
    /// The response of a [`LoadShedService`](super::LoadShedService).
    pub struct LoadShedFuture<Fut, B, P> {
        #[pin]
        pub(super) state: State<Fut, B, P>,
    }
}

pin_project! {
    #[project = StateProj]
    pub(super) enum State<Fut, B, P> {
        // In flight, holding a permit until this future completes or is dropped.
        Serving {
            #[pin]
            inner: Fut,
            permit: Option<P>,
        },
        // Shed: a 503 answered at once.
        Shed { response: Option<Response<B>> },
    }
}

impl<Fut, B, E, P> Future for LoadShedFuture<Fut, B, P>
where
    Fut: Future<Output = Result<Response<B>, E>>,
    P: Completion,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Serving { inner, permit } => {
                let out = inner.poll(cx);
                if out.is_ready() {
                    // The slot is free as soon as the answer is.
                    if let Some(permit) = permit.take() {
                        permit.complete();
                    }
                }
                out
            }
            StateProj::Shed { response } => Poll::Ready(Ok(response
                .take()
                .expect("LoadShedFuture polled after it completed"))),
        }
    }
}

impl<Fut, B, P> fmt::Debug for LoadShedFuture<Fut, B, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadShedFuture").finish_non_exhaustive()
    }
}
