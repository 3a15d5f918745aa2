//! The response future: the inner service's, or the 500 decided before it.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use http::Response;
use pin_project_lite::pin_project;

pin_project! {
    /// The response of a [`ClientAddrService`](super::ClientAddrService).
    pub struct ClientAddrFuture<F, B> {
        #[pin]
        state: State<F, B>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, B> {
        // The address was resolved: the inner service answers.
        Called {
            #[pin]
            inner: F,
        },
        // No peer address: answered here.
        Answered { response: Option<Response<B>> },
    }
}

impl<F, B> ClientAddrFuture<F, B> {
    pub(super) fn called(inner: F) -> Self {
        Self {
            state: State::Called { inner },
        }
    }

    pub(super) fn answered(response: Response<B>) -> Self {
        Self {
            state: State::Answered {
                response: Some(response),
            },
        }
    }
}

impl<F, B, E> Future for ClientAddrFuture<F, B>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Called { inner } => inner.poll(cx),
            StateProj::Answered { response } => Poll::Ready(Ok(response
                .take()
                .expect("ClientAddrFuture polled after it completed"))),
        }
    }
}

impl<F, B> fmt::Debug for ClientAddrFuture<F, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientAddrFuture").finish_non_exhaustive()
    }
}
