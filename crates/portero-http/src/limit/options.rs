//! The options of a [`LimitLayer`](crate::LimitLayer), each defined once for every
//! store: what a request without a key gets, what a store that cannot take the key
//! means, what a request costs, and how a refusal is answered.

use std::sync::Arc;

use http::{Extensions, HeaderMap, Method, Request, Response, Uri};
use portero::Decision;

use crate::headers::Policy;

/// What a request gets when a limit's key function finds no key in it (no client id
/// header, say).
///
/// ```
/// use std::sync::Arc;
/// use http::{HeaderName, Request, StatusCode};
/// use portero::{Gcra, KeyedLimiter, Quota};
/// use portero_http::{keys, Limit, LimitLayer, Policy, WhenNoKey};
/// use tower::{service_fn, Layer, ServiceExt};
///
/// # tokio::runtime::Runtime::new()?.block_on(async {
/// let quota = Quota::per_minute(100)?;
/// let store = Arc::new(KeyedLimiter::new(Gcra::new(quota), 10_000));
/// let key = keys::header::<()>(HeaderName::from_static("x-api-key"));
/// let layer = LimitLayer::new(Limit::new(store, Policy::for_quota("api", &quota)?, key))
///     .when_no_key(WhenNoKey::Reject);
/// let service = layer.layer(service_fn(|_: Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
/// }));
/// let anonymous = service.oneshot(Request::new(())).await?;
/// assert_eq!(anonymous.status(), StatusCode::TOO_MANY_REQUESTS);
/// # Ok::<(), Box<dyn std::error::Error>>(()) })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A missing key must not mean "unlimited": a client that leaves out the header a
/// limit keys on would otherwise never be limited. To key on the peer address when a
/// header is missing, say so in the key function ([`keys::either`](crate::keys::either)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WhenNoKey {
    /// Every request without a key shares one bucket of the same quota in the same
    /// store (the default): together they get one client's share. In memory the
    /// bucket is refunded like any key; in Redis it is one key that no real key names.
    #[default]
    SharedBucket,
    /// Refuse it: 429 with `Retry-After: 1`.
    Reject,
    /// Let it through unlimited. Only for keys that every real client sends and
    /// something before this layer enforces (an authentication layer, say).
    Allow,
}

/// What a request gets when a store cannot take its key: a full in-memory table (or
/// a full fallback table while Redis is away). Redis being away is its limiter's own
/// outage policy (`WhenDown`), which answers with a decision.
///
/// ```
/// use std::sync::Arc;
/// use http::{HeaderName, Request, StatusCode};
/// use portero::{Gcra, KeyedLimiter, Quota};
/// use portero_http::{keys, Limit, LimitLayer, Policy, WhenUnavailable};
/// use tower::{service_fn, Layer, ServiceExt};
///
/// # tokio::runtime::Runtime::new()?.block_on(async {
/// let quota = Quota::per_minute(5)?;
/// let one_key = Arc::new(KeyedLimiter::new(Gcra::new(quota), 1)); // room for one client
/// let key = keys::header::<()>(HeaderName::from_static("x-client"));
/// let layer = LimitLayer::new(Limit::new(one_key, Policy::for_quota("per-client", &quota)?, key))
///     .when_unavailable(WhenUnavailable::Reject);
/// let service = layer.layer(service_fn(|_: Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
/// }));
/// let from = |c| Request::builder().header("x-client", c).body(()).unwrap();
/// assert_eq!(service.clone().oneshot(from("ann")).await?.status(), StatusCode::OK);
/// let newcomer = service.oneshot(from("bob")).await?;
/// // The table is full: no limit decided, so the outage answer (503, Retry-After).
/// assert_eq!(newcomer.status(), StatusCode::SERVICE_UNAVAILABLE);
/// assert!(newcomer.headers().contains_key(http::header::RETRY_AFTER));
/// # Ok::<(), Box<dyn std::error::Error>>(()) })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WhenUnavailable {
    /// Refuse (the default), with the layer's
    /// [`outage_answer`](crate::LimitLayer::outage_answer): a flood of new keys cannot
    /// get through unlimited. Its
    /// `Retry-After` is the store's estimate, or else the policy's window: a newcomer
    /// gets a slot only once a tracked key has gone back to full, which for a quota
    /// whose burst is at most its limit is at most one window after that key's last
    /// request (never while a flood keeps every key active).
    #[default]
    Reject,
    /// Let the request through unlimited, keeping the service available to new
    /// clients at the price of not limiting them until keys free up.
    Allow,
}

/// How a request is answered when no limit decided it — its store could not be
/// reached and its outage policy refuses ([`Source::Unavailable`](crate::Source), a
/// Redis limit failing closed), or a store could not take its key
/// ([`WhenUnavailable::Reject`]) — see
/// [`LimitLayer::outage_answer`](crate::LimitLayer::outage_answer).
///
/// The default is 503: the server, not the client, could not decide, and a client that
/// reads the answer should know it did nothing wrong; both carry `Retry-After`, so a
/// well-behaved client waits either way, while dashboards, alerts and load balancers
/// see an outage instead of clients over their limits. Choose 429 for clients that
/// only back off on a 429.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutageAnswer {
    /// 503 Service Unavailable with `Retry-After`, `RateLimit-Source: fallback` when an
    /// outage policy refused, and the JSON body every answer has (the default).
    #[default]
    ServiceUnavailable,
    /// 429 Too Many Requests with the limit's fields, as for a client over its limit.
    TooManyRequests,
}

/// Builds the response for a refused request (see
/// [`LimitLayer::refusal`](crate::LimitLayer::refusal)): the refusing limit's decision
/// and policy.
pub type RefusalFn = dyn Fn(&Decision, &Policy) -> Response<String> + Send + Sync;

/// A request's cost in units, from its head (see
/// [`LimitLayer::cost_by`](crate::LimitLayer::cost_by)).
pub type CostFn = dyn Fn(&RequestHead<'_>) -> u64 + Send + Sync;

/// What a cost function sees of a request: all of it but the body, which has not
/// been read — its method, URI, fields and extensions (where an earlier layer puts
/// what it parsed, a body's `max_tokens` say).
#[derive(Debug, Clone, Copy)]
pub struct RequestHead<'a> {
    method: &'a Method,
    uri: &'a Uri,
    headers: &'a HeaderMap,
    extensions: &'a Extensions,
}

impl<'a> RequestHead<'a> {
    /// The head of `request`.
    pub fn of<B>(request: &'a Request<B>) -> Self {
        Self {
            method: request.method(),
            uri: request.uri(),
            headers: request.headers(),
            extensions: request.extensions(),
        }
    }

    /// The request's method.
    pub fn method(&self) -> &'a Method {
        self.method
    }

    /// The request's URI.
    pub fn uri(&self) -> &'a Uri {
        self.uri
    }

    /// The request's fields.
    pub fn headers(&self) -> &'a HeaderMap {
        self.headers
    }

    /// The request's extensions.
    pub fn extensions(&self) -> &'a Extensions {
        self.extensions
    }
}

/// What a request costs: one unit, or what a [`CostFn`] says.
#[derive(Clone, Default)]
pub(crate) struct Charge(Option<Arc<CostFn>>);

impl Charge {
    /// A cost from the request's method, URI and fields.
    pub(crate) fn new(
        cost: impl Fn(&Method, &Uri, &HeaderMap) -> u64 + Send + Sync + 'static,
    ) -> Self {
        Self::by(move |head| cost(head.method(), head.uri(), head.headers()))
    }

    /// A cost from the request's head.
    pub(crate) fn by(cost: impl Fn(&RequestHead<'_>) -> u64 + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(cost)))
    }

    /// The units `request` costs; a cost function of the caller's that panics is a
    /// bug of theirs, answered like a key that cannot be told (500), never a dropped
    /// connection.
    #[inline]
    pub(crate) fn of<B>(&self, request: &Request<B>) -> Result<u64, crate::keys::KeyError> {
        match self.0.as_ref() {
            None => Ok(1),
            Some(cost) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                cost(&RequestHead::of(request))
            }))
            .map_err(|_| crate::keys::KeyError::CostPanicked),
        }
    }
}
