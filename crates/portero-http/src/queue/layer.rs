//! The layer and its configuration.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue};

use super::gate::Gate;
use super::order::Order;
use crate::headers::retry_after_value;
use crate::limit::entry::NoRoutes;

/// At most `C` requests run; up to `Q` more wait for a slot, each until its deadline,
/// and the rest are answered 503 at once.
///
/// A server offered more than it can serve, with an unbounded first-in-first-out
/// line, keeps busy answering requests whose clients already gave up: full throughput,
/// no goodput. This layer bounds the line and gives every request a deadline (the
/// client's timeout, from a header if the client sends one, never beyond the
/// configured one); a request that waited in line is started only if its deadline
/// still leaves the [estimated service time](Self::service_time_estimate), so one that
/// would answer after its client gave up is answered 503 and never reaches the inner
/// service (one that finds a free slot starts at once: it has its whole deadline, and
/// running it keeps the estimate measured, so a slow spell cannot lock the queue into
/// refusing everything), and
/// one whose client disconnects leaves the line at once (its future is dropped). A
/// full line refuses in constant time. The line is served oldest first by default
/// ([`Order`]).
///
/// ```
/// use std::time::Duration;
/// use portero_http::queue::{DeadlineQueueLayer, Order};
///
/// // 100 running, 200 waiting, clients give up after 2 s; interactive: newest first.
/// let layer = DeadlineQueueLayer::new(100, 200, Duration::from_secs(2))
///     .order(Order::NewestFirst)
///     .timeout_header(http::HeaderName::from_static("x-request-timeout-ms"));
/// # let _ = layer;
/// ```
#[derive(Debug, Clone)]
pub struct DeadlineQueueLayer<X = NoRoutes> {
    pub(super) exempt: X,
    pub(super) gate: Arc<Gate>,
    pub(super) client_timeout: Duration,
    pub(super) timeout_header: Option<HeaderName>,
    pub(super) retry_after: HeaderValue,
    service_time: Option<Duration>,
    running: usize,
    queue: usize,
}

impl DeadlineQueueLayer {
    /// `running` at once, `queue` waiting, each waiting at most `client_timeout` from
    /// its arrival (a zero capacity admits nothing; a zero queue sheds at once).
    pub fn new(running: usize, queue: usize, client_timeout: Duration) -> Self {
        Self {
            exempt: NoRoutes,
            gate: Arc::new(Gate::new(running, queue, Order::default())),
            client_timeout,
            timeout_header: None,
            retry_after: retry_after_value(Duration::from_secs(1)),
            service_time: None,
            running,
            queue,
        }
    }
}

impl<X> DeadlineQueueLayer<X> {
    /// Never queues or sheds the requests `route` matches (the [`route`](crate::route)
    /// helpers, or any predicate): they go to the inner service at once, holding no
    /// slot — a health check that must answer while the line is full.
    ///
    /// ```
    /// use std::time::Duration;
    /// use portero_http::{queue::DeadlineQueueLayer, route};
    ///
    /// let layer = DeadlineQueueLayer::new(100, 200, Duration::from_secs(2))
    ///     .exempt(route::get::<()>("/health"));
    /// # let _ = layer;
    /// ```
    pub fn exempt<X2>(self, route: X2) -> DeadlineQueueLayer<X2> {
        DeadlineQueueLayer {
            exempt: route,
            gate: self.gate,
            client_timeout: self.client_timeout,
            timeout_header: self.timeout_header,
            retry_after: self.retry_after,
            service_time: self.service_time,
            running: self.running,
            queue: self.queue,
        }
    }

    /// Serves the line in `order`.
    pub fn order(mut self, order: Order) -> Self {
        self.gate = Arc::new(Gate::new(self.running, self.queue, order));
        self
    }

    /// Reads each request's own timeout, in whole milliseconds, from `name` (for
    /// example `x-request-timeout-ms`); a missing or malformed value means the
    /// configured client timeout, and a longer one is cut to it (a client cannot buy
    /// a longer wait).
    pub fn timeout_header(mut self, name: HeaderName) -> Self {
        self.timeout_header = Some(name);
        self
    }

    /// The `Retry-After` on a 503 (whole seconds, rounded up; default 1 s).
    pub fn retry_after(mut self, retry_after: Duration) -> Self {
        self.retry_after = retry_after_value(retry_after);
        self
    }

    /// The service time a request that waited must have left before its deadline to
    /// be started, instead of the measured one (below). A request that could not
    /// finish in time is answered 503 without running: its answer would come after
    /// its client gave up.
    pub fn service_time(mut self, estimate: Duration) -> Self {
        self.service_time = Some(estimate);
        self
    }

    /// What a request that waited must have left before its deadline to be started: the
    /// configured [`service_time`](Self::service_time), or else the mean service
    /// time of the requests this layer has run (exponentially weighted, each new one
    /// counting 1/8; zero before the first).
    pub fn service_time_estimate(&self) -> Duration {
        self.service_time
            .unwrap_or_else(|| self.gate.mean_service_time())
    }

    /// Requests running now.
    pub fn running(&self) -> usize {
        self.gate.in_flight()
    }

    /// Requests waiting now.
    pub fn waiting(&self) -> usize {
        self.gate.waiting()
    }

    pub(super) fn timeout_of(&self, headers: &http::HeaderMap) -> Duration {
        let asked = self
            .timeout_header
            .as_ref()
            .and_then(|name| headers.get(name))
            .and_then(|v| v.to_str().ok())
            .filter(|v| (1..=12).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|v| v.parse::<u64>().ok())
            .map(Duration::from_millis);
        asked.map_or(self.client_timeout, |t| t.min(self.client_timeout))
    }
}
