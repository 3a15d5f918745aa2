//! Refunds on the pipeline's remote path come late: a local limit's unit is given back
//! after a round trip (the remote limit refused) or when the request is dropped while
//! it waits, and meanwhile the clock moved and other requests were admitted. The late
//! refund must give back only what can still be that request's: a twin that never saw
//! it would admit no less.

use std::sync::{Arc, Mutex};

use http::{HeaderName, HeaderValue, Request, Response, StatusCode};
use portero::{Decision, Gcra, KeyedLimiter, ManualClock, Quota};
use portero_http::{keys, Checked, Checking, Limit, LimitLayer, Policy, Source, Store};
use tokio::sync::oneshot;
use tower::{service_fn, Layer, ServiceExt};

const MS: u64 = 1_000_000;

/// A remote limit whose answers the test gives by hand, one per check.
#[derive(Clone, Default)]
struct Remote {
    answers: Arc<Mutex<Vec<oneshot::Sender<bool>>>>,
}

impl Store<HeaderValue> for Remote {
    fn check_key(&self, _key: Option<HeaderValue>, _cost: u64) -> Checking {
        let (tx, rx) = oneshot::channel();
        self.answers.lock().unwrap().push(tx);
        Checking::Pending(Box::pin(async move {
            let admit = rx.await.unwrap_or(false);
            let decision = if admit {
                Decision::admitted(10, 9, 0)
            } else {
                Decision::rejected(10, 0, 1_000_000_000, 1_000_000_000)
            };
            Ok(Checked::new(decision, Source::Redis))
        }))
    }
    fn standing(&self, _key: Option<HeaderValue>) -> Checking {
        Checking::Done(Ok(Checked::new(
            Decision::admitted(10, 10, 0),
            Source::Redis,
        )))
    }
    fn is_remote(&self) -> bool {
        true
    }
}

impl Remote {
    fn answer(&self, admit: bool) {
        let tx = self.answers.lock().unwrap().remove(0);
        let _ = tx.send(admit); // a dropped request no longer listens
    }
}

type Local = Arc<KeyedLimiter<HeaderValue, Gcra, Arc<ManualClock>>>;

/// A layer of a local limit (2 per second, burst 2: T = 500 ms) and a remote one,
/// with X sent at 0 and Y at 500 ms, both waiting for the remote's answers; the
/// local limit, its clock, the remote, and the two requests in flight.
async fn x_then_y() -> (
    Local,
    Remote,
    tokio::task::JoinHandle<Result<Response<String>, std::convert::Infallible>>,
    tokio::task::JoinHandle<Result<Response<String>, std::convert::Infallible>>,
) {
    let clock = Arc::new(ManualClock::new());
    let quota = Quota::per_second(2).unwrap();
    let local = Arc::new(KeyedLimiter::with_clock(
        Gcra::new(quota),
        10,
        clock.clone(),
    ));
    let remote = Remote::default();
    let header = || keys::header::<()>(HeaderName::from_static("x-user"));
    let layer = LimitLayer::new(Limit::new(
        local.clone(),
        Policy::for_quota("local", &quota).unwrap(),
        header(),
    ))
    .limit(Limit::new(
        remote.clone(),
        Policy::new("remote", 10, 1).unwrap(),
        header(),
    ));
    let service = layer.layer(service_fn(|_: Request<()>| async {
        Ok::<_, std::convert::Infallible>(Response::new(String::new()))
    }));
    let request = || Request::builder().header("x-user", "ann").body(()).unwrap();
    let x = tokio::spawn(service.clone().oneshot(request()));
    while remote.answers.lock().unwrap().is_empty() {
        tokio::task::yield_now().await;
    }
    clock.set(500 * MS);
    let y = tokio::spawn(service.clone().oneshot(request()));
    while remote.answers.lock().unwrap().len() < 2 {
        tokio::task::yield_now().await;
    }
    (local, remote, x, y)
}

/// The local limit alone at 500 ms, as the twin that saw only Y stands: one more
/// fits, not two.
fn one_more_at_500_ms(local: &Local) {
    let ann = HeaderValue::from_static("ann");
    assert!(local.check_at(&ann, 500 * MS, 1).unwrap().is_allowed());
    assert!(!local.check_at(&ann, 500 * MS, 1).unwrap().is_allowed());
}

#[tokio::test]
async fn a_local_unit_given_back_after_the_round_trip_invents_nothing() {
    // X is admitted locally at 0 and waits for the remote limit; at 500 ms Y is
    // admitted by both; then the remote refuses X and X's local unit comes back. Its
    // debt had drained by 500 ms.
    let (local, remote, x, y) = x_then_y().await;
    remote.answer(false); // X
    remote.answer(true); // Y
    assert_eq!(
        x.await.unwrap().unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(y.await.unwrap().unwrap().status(), StatusCode::OK);
    one_more_at_500_ms(&local);
}

#[tokio::test]
async fn a_request_dropped_while_it_waits_gives_back_only_what_is_still_its_own() {
    // As above, but X's client goes away while X waits: the future is dropped.
    let (local, remote, x, y) = x_then_y().await;
    x.abort(); // the client of X cancelled
    let _ = x.await;
    remote.answer(true); // X's answer, to no one
    remote.answer(true); // Y
    assert_eq!(y.await.unwrap().unwrap().status(), StatusCode::OK);
    one_more_at_500_ms(&local);
}
