//! The response future: a remote limit's answer awaited (when one is asked), then the
//! inner service's answer with the fields added, or the refusal decided here.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{ready, Context, Poll};
use std::sync::Arc;

use http::{Request, Response};
use pin_project_lite::pin_project;
use tower_service::Service;

use super::after::ResponseHead;
use super::awaiting::Awaiting;
use super::procedure::{AppliedList, Flow, Pending as Waiting, Procedure, Run};
use super::respond::{refuse, write_fields};
use super::settle::Later;

/// The fields an admitted response gets: the plan and what it applied.
type Fields<B> = (Arc<Procedure<B>>, AppliedList);

pin_project! {
    /// The response of a [`LimitService`](super::LimitService).
    pub struct LimitFuture<F, S, ReqB, ResB> {
        #[pin]
        state: State<F, S, ReqB, ResB>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, S, ReqB, ResB> {
        // A remote limit is deciding; the readied inner service and the request wait
        // (boxed: only this path pays for carrying them, and a round trip dwarfs it —
        // unboxed, every future moved a request's worth of bytes on every move).
        Waiting { remote: Box<Remote<S, ReqB>> },
        // Admitted: the inner service answers.
        Forwarded {
            #[pin]
            inner: F,
            fields: Option<Fields<ReqB>>,
        },
        // Answered by the inner service; a remote store settles before the fields
        // are written (boxed: only a remote settlement pays for carrying it).
        Settling { settling: Box<Settling<ReqB, ResB>> },
        // Refused: answered here.
        Answered { response: Option<Response<ResB>> },
    }
}

/// A response waiting on its remote settlements: each one's place in the applied
/// limits, and its round trip.
struct Settling<ReqB, ResB> {
    response: Option<Response<ResB>>,
    fields: Option<Fields<ReqB>>,
    later: Vec<(usize, Later)>,
}

/// What a request waiting on a remote limit holds.
struct Remote<S, ReqB> {
    pending: Awaiting,
    inner: Option<S>,
    request: Option<Request<ReqB>>,
    // Gives the local units back if the request is dropped while it waits.
    run: Waiting<ReqB>,
}

impl<F, S, ReqB, ResB> LimitFuture<F, S, ReqB, ResB> {
    pub(super) fn forwarded(inner: F, fields: Option<Fields<ReqB>>) -> Self {
        Self {
            state: State::Forwarded { inner, fields },
        }
    }

    pub(super) fn answered(response: Response<ResB>) -> Self {
        Self {
            state: State::Answered {
                response: Some(response),
            },
        }
    }

    pub(super) fn waiting(
        pending: Awaiting,
        inner: S,
        request: Request<ReqB>,
        run: Run,
        plan: Arc<Procedure<ReqB>>,
    ) -> Self {
        Self {
            state: State::Waiting {
                remote: Box::new(Remote {
                    pending,
                    inner: Some(inner),
                    request: Some(request),
                    run: Waiting::new(plan, run),
                }),
            },
        }
    }
}

impl<S, ReqB: 'static, ResB> Future for LimitFuture<S::Future, S, ReqB, ResB>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    ResB: From<&'static str> + From<String>,
{
    type Output = Result<Response<ResB>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Waiting { remote } => {
                    let Remote {
                        pending,
                        inner,
                        request,
                        run,
                    } = &mut **remote;
                    let answer = ready!(pending.poll(cx));
                    let plan = run.plan.clone();
                    let (Some(req), Some(r)) = (request.as_ref(), run.run_mut()) else {
                        panic!("LimitFuture polled after it completed");
                    };
                    match plan.resume(r, req, answer) {
                        Flow::Waiting(next) => *pending = next,
                        Flow::Refused(why) => {
                            // Refunded by the plan already; nothing is left to give back.
                            let r = run.finish().expect("checked above");
                            let response = refuse(&plan, &r.applied, why);
                            state.set(State::Answered {
                                response: Some(response),
                            });
                        }
                        Flow::Admitted => {
                            let (Some(mut svc), Some(mut req), Some(mut r)) =
                                (inner.take(), request.take(), run.finish())
                            else {
                                panic!("LimitFuture polled after it completed");
                            };
                            if plan.settles_by_usage {
                                plan.hand_usage(&mut r.applied, &mut req);
                            }
                            let call = svc.call(req);
                            state.set(State::Forwarded {
                                inner: call,
                                fields: Some((plan, r.applied)),
                            });
                        }
                    }
                }
                StateProj::Forwarded { inner, fields } => {
                    let mut response = match ready!(inner.poll(cx)) {
                        Ok(response) => response,
                        Err(e) => return Poll::Ready(Err(e)),
                    };
                    if let Some((plan, mut applied)) = fields.take() {
                        if plan.settles_at_head {
                            let head = ResponseHead::new(
                                response.status(),
                                response.headers(),
                                response.extensions(),
                            );
                            let later = plan.settle_at_head(&mut applied, &head);
                            if !later.is_empty() {
                                state.set(State::Settling {
                                    settling: Box::new(Settling {
                                        response: Some(response),
                                        fields: Some((plan, applied)),
                                        later,
                                    }),
                                });
                                continue;
                            }
                        }
                        write_fields(&plan, &applied, None, response.headers_mut());
                    }
                    return Poll::Ready(Ok(response));
                }
                StateProj::Settling { settling } => {
                    let Settling {
                        response,
                        fields,
                        later,
                    } = &mut **settling;
                    let Some((_, applied)) = fields.as_mut() else {
                        panic!("LimitFuture polled after it completed");
                    };
                    // All at once (several remote limits' round trips overlap), each
                    // once: a settlement that ended leaves the list, its limit's
                    // decision replaced by how the key stands after it.
                    let mut i = 0;
                    while let Some((at, settlement)) = later.get_mut(i) {
                        let Poll::Ready(after) = settlement.as_mut().poll(cx) else {
                            i += 1;
                            continue;
                        };
                        if let (Some(after), Some(a)) = (after, applied.as_mut_slice().get_mut(*at))
                        {
                            a.decision = after;
                        }
                        drop(later.swap_remove(i));
                    }
                    if !later.is_empty() {
                        return Poll::Pending;
                    }
                    let (Some(mut response), Some((plan, applied))) =
                        (response.take(), fields.take())
                    else {
                        panic!("LimitFuture polled after it completed");
                    };
                    write_fields(&plan, &applied, None, response.headers_mut());
                    return Poll::Ready(Ok(response));
                }
                StateProj::Answered { response } => {
                    return Poll::Ready(Ok(response
                        .take()
                        .expect("LimitFuture polled after it completed")))
                }
            }
        }
    }
}

impl<F, S, ReqB, ResB> fmt::Debug for LimitFuture<F, S, ReqB, ResB> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LimitFuture").finish_non_exhaustive()
    }
}
