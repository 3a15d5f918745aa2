//! What a request's check waits for while a remote store answers — one limit's
//! answer or a batch's — and what comes back; the plan resumes with it.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::store::{BatchPending, Checked, Pending as Answer, StoreError};

/// What a request waits for.
pub(crate) enum Awaiting {
    /// One remote limit's answer.
    One(Answer),
    /// A batch's answers, one per limit sent.
    Many(BatchPending),
}

/// What came back.
pub(crate) enum Answers {
    One(Result<Checked, StoreError>),
    Many(Vec<Result<Checked, StoreError>>),
}

impl Awaiting {
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Answers> {
        match self {
            Self::One(one) => one.as_mut().poll(cx).map(Answers::One),
            Self::Many(many) => Pin::new(many).poll(cx).map(Answers::Many),
        }
    }
}
