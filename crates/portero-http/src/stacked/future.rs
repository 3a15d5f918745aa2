//! The response future: the inner answer with every policy's fields, or the 429 (or
//! 413) decided before the inner service was called.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::sync::Arc;

use http::Response;
use pin_project_lite::pin_project;
use portero::Decision;

use crate::headers::{self, Policy};

pin_project! {
    /// The response of a [`StackedRateLimitService`](super::StackedRateLimitService).
    pub struct StackedFuture<Fut, B> {
        #[pin]
        pub(super) state: State<Fut, B>,
    }
}

pin_project! {
    #[project = StateProj]
    pub(super) enum State<Fut, B> {
        // Admitted by every limit: the inner service answers.
        Forwarded {
            #[pin]
            inner: Fut,
            fields: Option<Vec<(Decision, Arc<Policy>)>>,
        },
        // Refused: answered here.
        Answered { response: Option<Response<B>> },
    }
}

impl<Fut, B> StackedFuture<Fut, B> {
    pub(super) fn answered(response: Response<B>) -> Self {
        Self {
            state: State::Answered {
                response: Some(response),
            },
        }
    }
}

impl<Fut, B, E> Future for StackedFuture<Fut, B>
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
                if let Some(taken) = fields.take().filter(|t| !t.is_empty()) {
                    let items: Vec<(Decision, &Policy)> =
                        taken.iter().map(|(d, p)| (*d, p.as_ref())).collect();
                    headers::insert_all(response.headers_mut(), &items, None);
                }
                Poll::Ready(Ok(response))
            }
            StateProj::Answered { response } => Poll::Ready(Ok(response
                .take()
                .expect("StackedFuture polled after it completed"))),
        }
    }
}

impl<Fut, B> fmt::Debug for StackedFuture<Fut, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StackedFuture").finish_non_exhaustive()
    }
}
