//! The response future of both rate-limit layers: the inner service's answer with the
//! fields added, or the refusal decided before it was called.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::sync::Arc;

use http::{HeaderMap, Response};
use pin_project_lite::pin_project;
use portero::Decision;

use crate::headers::{self, Policy};

/// The fields a forwarded response gets.
pub(crate) enum Fields {
    /// One limit's (the legacy fields too if asked).
    One {
        decision: Decision,
        policy: Arc<Policy>,
        legacy: bool,
    },
    /// A stack's, one list per field.
    Many(Vec<(Decision, Arc<Policy>)>),
}

impl Fields {
    fn write(self, headers: &mut HeaderMap) {
        match self {
            // Only the fields: a forwarded response is not a refusal, even when shadow
            // mode let a rejected request through.
            Self::One {
                decision,
                policy,
                legacy,
            } => {
                headers::insert_fields(headers, &decision, &policy);
                if legacy {
                    headers::insert_legacy(headers, &decision, &policy);
                }
            }
            Self::Many(taken) => {
                let items: Vec<(Decision, &Policy)> =
                    taken.iter().map(|(d, p)| (*d, p.as_ref())).collect();
                if !items.is_empty() {
                    headers::insert_all(headers, &items, None);
                }
            }
        }
    }
}

pin_project! {
    /// The response of a [`RateLimitService`](crate::RateLimitService) or a
    /// [`StackedRateLimitService`](crate::StackedRateLimitService).
    pub struct RateLimitFuture<Fut, B> {
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
            fields: Option<Fields>,
        },
        // Refused: answered here.
        Answered { response: Option<Response<B>> },
    }
}

impl<Fut, B> RateLimitFuture<Fut, B> {
    /// The inner service's answer, with `fields` added.
    pub(crate) fn forwarded(inner: Fut, fields: Option<Fields>) -> Self {
        Self {
            state: State::Forwarded { inner, fields },
        }
    }

    /// An answer given here.
    pub(crate) fn answered(response: Response<B>) -> Self {
        Self {
            state: State::Answered {
                response: Some(response),
            },
        }
    }
}

impl<Fut, B, E> Future for RateLimitFuture<Fut, B>
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
                if let Some(fields) = fields.take() {
                    fields.write(response.headers_mut());
                }
                Poll::Ready(Ok(response))
            }
            StateProj::Answered { response } => Poll::Ready(Ok(response
                .take()
                .expect("RateLimitFuture polled after it completed"))),
        }
    }
}

impl<Fut, B> fmt::Debug for RateLimitFuture<Fut, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitFuture").finish_non_exhaustive()
    }
}
