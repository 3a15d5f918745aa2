//! The priority experiment: a service with 100 slots (1 s per request on average, so
//! 100 per second) is offered 150 requests per second of three kinds: checkouts
//! (critical, a tenth), ordinary pages (default, six tenths) and recommendations
//! (sheddable, three tenths). A plain concurrency limit refuses whatever arrives when
//! it is full, so every class loses the same third; shedding by priority
//! (`LoadShedLayer::by_priority` over `PriorityLimit::three_classes`: sheddable work
//! stops at 70 in flight, default at 90, critical may take all 100) takes the cut from
//! the recommendations first, then from the pages, and the checkouts are served in
//! full.
//!
//! The ceilings have a price: a slot above a class's ceiling stays empty when only
//! that class wants it. Near capacity, when the higher classes need fewer than 70
//! slots, sheddable work is refused while slots stand idle.
//!
//! Each run drives the real tower layer: every request is a `http::Request` through
//! `LoadShedLayer`'s service, whose inner service answers when the simulation says the
//! request's work is done (its slot is held until then, as in a server), and a 503
//! from the layer is a refusal.
//!
//! The headline rests on critical work needing less than the 10 slots only it may
//! take, plus what it wins below 90: [`load_curve`] raises the offered load, with the
//! same mix, until even critical work is refused.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use portero::{ConcurrencyLimit, Priority, PriorityLimit};
use portero_http::LoadShedLayer;
use rand::Rng;
use tower_layer::Layer;
use tower_service::Service;

use super::{poisson, rng, Events, SEC};

/// Requests in flight at once; each takes [`SERVICE`] on average: 100 per second.
pub const CAPACITY: u64 = 100;
/// Mean service time of one request (exponentially distributed).
pub const SERVICE: u64 = SEC;
/// Requests offered per second in the headline run (Poisson, all classes together).
pub const OFFERED: f64 = 150.0;
/// Length of each run.
pub const SECONDS: u64 = 120;
/// The three classes: the path each one's requests take, and its share of the load.
pub const CLASSES: [Class; 3] = [
    Class {
        name: "critical",
        priority: Priority::CRITICAL,
        path: "/checkout",
        share: 0.1,
    },
    Class {
        name: "default",
        priority: Priority::DEFAULT,
        path: "/",
        share: 0.6,
    },
    Class {
        name: "sheddable",
        priority: Priority::SHEDDABLE,
        path: "/recommendations",
        share: 0.3,
    },
];
/// The loads [`load_curve`] offers: every [`LOAD_STEP`] per second up to this.
pub const HIGHEST_LOAD: u64 = 400;
/// The step between them.
pub const LOAD_STEP: u64 = 25;

/// One kind of traffic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Class {
    /// Its name in the tables.
    pub name: &'static str,
    /// What the layer's classifier gives its requests.
    pub priority: Priority,
    /// The path its requests take (what the classifier reads).
    pub path: &'static str,
    /// Its share of the offered load.
    pub share: f64,
}

/// What decides which requests get a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// `LoadShedLayer::new` over a `ConcurrencyLimit` of 100: the first 100 in flight.
    Plain,
    /// `LoadShedLayer::by_priority` over `PriorityLimit::three_classes(100)`.
    ByPriority,
}

impl Admission {
    /// The row label.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "plain limit of 100",
            Self::ByPriority => "by priority (100/90/70)",
        }
    }
}

/// What one admission did at one load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Run {
    /// The admission.
    pub admission: Admission,
    /// Requests offered per second.
    pub offered: f64,
    /// Per class (in [`CLASSES`] order): requests offered and served.
    pub classes: [(u64, u64); 3],
}

impl Run {
    /// Share of class `i`'s requests refused, in percent.
    pub fn lost_percent(&self, i: usize) -> f64 {
        let (offered, served) = self.classes[i];
        100.0 * (offered - served) as f64 / offered.max(1) as f64
    }

    /// Class `i`'s requests served per second.
    pub fn served_per_second(&self, i: usize) -> f64 {
        self.classes[i].1 as f64 / SECONDS as f64
    }

    /// All requests served per second.
    pub fn throughput(&self) -> f64 {
        (0..3).map(|i| self.served_per_second(i)).sum()
    }
}

/// Both admissions at [`OFFERED`] on the same arrivals (seeded).
pub fn run(seed: u64) -> [Run; 2] {
    at_load(OFFERED, seed)
}

/// Both admissions at every load from [`LOAD_STEP`] to [`HIGHEST_LOAD`] per second:
/// `[plain, by priority]` per load.
pub fn load_curve(seed: u64) -> Vec<[Run; 2]> {
    (1..=HIGHEST_LOAD / LOAD_STEP)
        .map(|k| at_load((k * LOAD_STEP) as f64, seed))
        .collect()
}

fn at_load(offered: f64, seed: u64) -> [Run; 2] {
    let arrivals = arrivals(offered, seed);
    let second = Duration::from_secs(1);
    let plain = LoadShedLayer::new(Arc::new(ConcurrencyLimit::new(CAPACITY)), second).layer(Server);
    let by_priority = LoadShedLayer::by_priority(
        Arc::new(PriorityLimit::three_classes(CAPACITY)),
        classify,
        second,
    )
    .layer(Server);
    [
        serve(Admission::Plain, plain, offered, &arrivals, seed),
        serve(Admission::ByPriority, by_priority, offered, &arrivals, seed),
    ]
}

/// The classifier an application would write: by route.
fn classify(request: &Request<()>) -> Priority {
    CLASSES
        .iter()
        .find(|c| c.path == request.uri().path())
        .map_or(Priority::DEFAULT, |c| c.priority)
}

/// `(time, class)` in time order: one Poisson stream per class.
fn arrivals(offered: f64, seed: u64) -> Vec<(u64, usize)> {
    let mut rng = rng(seed);
    let mut all: Vec<(u64, usize)> = CLASSES
        .iter()
        .enumerate()
        .flat_map(|(i, c)| {
            poisson(offered * c.share, SECONDS, &mut rng)
                .into_iter()
                .map(move |t| (t, i))
        })
        .collect();
    all.sort_unstable();
    all
}

/// Tells the inner service's answer that its work is done.
#[derive(Debug, Clone)]
struct Done(Arc<AtomicBool>);

/// The application behind the layer: each request's answer is ready once its
/// [`Done`] is set.
#[derive(Debug, Clone, Copy)]
struct Server;

/// The answer to one request, pending until the simulation finishes its work.
struct Work(Arc<AtomicBool>);

impl Future for Work {
    type Output = Result<Response<String>, Infallible>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        if self.0.load(Ordering::Relaxed) {
            Poll::Ready(Ok(Response::new(String::new())))
        } else {
            Poll::Pending
        }
    }
}

impl Service<Request<()>> for Server {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = Work;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<()>) -> Work {
        let done = request
            .extensions()
            .get::<Done>()
            .expect("every request has one");
        Work(done.0.clone())
    }
}

/// A request being worked on: what tells its answer it is done, and the layer's
/// response future, which holds the slot until it completes.
type InWork<F> = (Arc<AtomicBool>, Pin<Box<F>>);

/// Nothing to wake: the simulation polls each answer when its work is done.
struct NoWake;

impl Wake for NoWake {
    fn wake(self: Arc<Self>) {}
}

fn serve<S>(
    admission: Admission,
    mut service: S,
    offered: f64,
    arrivals: &[(u64, usize)],
    seed: u64,
) -> Run
where
    S: Service<Request<()>, Response = Response<String>, Error = Infallible>,
{
    let waker = Waker::from(Arc::new(NoWake));
    let mut cx = Context::from_waker(&waker);
    // Service times come from their own seeded generator (one draw per request
    // served), so both admissions see the same arrivals.
    let mut times = rng(seed.wrapping_add(1));
    let mut run = Run {
        admission,
        offered,
        classes: [(0, 0); 3],
    };
    let mut in_work: Events<InWork<S::Future>> = Events::default();
    let mut finish = |(done, mut answer): InWork<S::Future>| {
        done.store(true, Ordering::Relaxed);
        // Its answer is ready now, and the layer frees the slot as it hands it on.
        let ready = answer.as_mut().poll(&mut cx);
        assert!(matches!(ready, Poll::Ready(Ok(ref r)) if r.status() == StatusCode::OK));
    };
    for &(t, class) in arrivals {
        while let Some((_, work)) = in_work.pop_until(t) {
            finish(work);
        }
        let done = Arc::new(AtomicBool::new(false));
        let mut request = Request::new(());
        *request.uri_mut() = http::Uri::from_static(CLASSES[class].path);
        request.extensions_mut().insert(Done(done.clone()));
        let ready = service.poll_ready(&mut Context::from_waker(&waker));
        assert!(ready.is_ready(), "the layer is always ready");
        let mut answer = Box::pin(service.call(request));
        run.classes[class].0 += 1;
        match answer.as_mut().poll(&mut Context::from_waker(&waker)) {
            // Shed before the server saw it: 503 at once.
            Poll::Ready(Ok(response)) => {
                assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
            }
            Poll::Ready(Err(never)) => match never {},
            // Admitted: its slot is held until its work is done.
            Poll::Pending => {
                run.classes[class].1 += 1;
                let u: f64 = times.random_range(f64::EPSILON..1.0);
                let took = (-u.ln() * SERVICE as f64) as u64;
                in_work.push(t + took, (done, answer));
            }
        }
    }
    run
}
