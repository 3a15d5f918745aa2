//! The layer and its configurations: which [`Admission`] decides.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderValue, Request};
use portero::{AdaptiveConcurrency, ConcurrencyLimit, Priority, PriorityLimit};

use super::admission::{ByPriority, ByTenant};
use crate::fair::FairShare;
use crate::headers::retry_after_value;
use crate::limit::entry::NoRoutes;

/// Sheds before the inner service runs (before the body is read, before any handler
/// or dependency): a refused request is answered 503 Service Unavailable with a
/// `Retry-After` at once.
///
/// A rate limit admits the same rate however slow the server gets; a concurrency
/// limit admits `C / S` requests per second for a service time `S` (Little's law),
/// so when the server slows down it admits less, and the excess is shed in
/// microseconds instead of waiting in a queue until it times out. The slot is held
/// until the inner service's response future completes or is dropped (a cancelled
/// request frees its slot at once); a streamed body is not counted after that.
///
/// Which request gets a slot is the admission `A`: [`new`](Self::new) (the first
/// `C`), [`by_priority`](LoadShedLayer::by_priority),
/// [`by_tenant`](LoadShedLayer::by_tenant) or [`adaptive`](LoadShedLayer::adaptive).
#[derive(Debug, Clone)]
pub struct LoadShedLayer<A = Arc<ConcurrencyLimit>, X = NoRoutes> {
    pub(super) admission: A,
    pub(super) retry_after: HeaderValue,
    pub(super) exempt: X,
}

impl LoadShedLayer {
    /// Sheds beyond `limit`'s permits, advising clients to come back after
    /// `retry_after` (whole seconds, rounded up, at least 1).
    pub fn new(limit: Arc<ConcurrencyLimit>, retry_after: Duration) -> Self {
        Self::with_admission(limit, retry_after)
    }
}

impl<A> LoadShedLayer<A> {
    /// Sheds whatever `admission` refuses.
    pub fn with_admission(admission: A, retry_after: Duration) -> Self {
        Self {
            admission,
            retry_after: retry_after_value(retry_after),
            exempt: NoRoutes,
        }
    }
}

impl<A, X> LoadShedLayer<A, X> {
    /// Never sheds the requests `route` matches (the [`route`](crate::route) helpers,
    /// or any predicate): they go to the inner service at once, holding no slot and
    /// not counted — a health check that must answer while the service sheds.
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    /// use portero::ConcurrencyLimit;
    /// use portero_http::{route, LoadShedLayer};
    ///
    /// let layer = LoadShedLayer::new(Arc::new(ConcurrencyLimit::new(100)), Duration::from_secs(1))
    ///     .exempt(route::get::<()>("/health"));
    /// # let _ = layer;
    /// ```
    pub fn exempt<X2>(self, route: X2) -> LoadShedLayer<A, X2> {
        LoadShedLayer {
            admission: self.admission,
            retry_after: self.retry_after,
            exempt: route,
        }
    }
}

impl LoadShedLayer<Arc<AdaptiveConcurrency>> {
    /// Sheds beyond a limit that follows the inner service's latency (measured from
    /// the call to the response future's completion).
    pub fn adaptive(limit: Arc<AdaptiveConcurrency>, retry_after: Duration) -> Self {
        Self::with_admission(limit, retry_after)
    }
}

impl<F> LoadShedLayer<ByPriority<F>> {
    /// Refuses lower priorities first: `classify` names each request's class from its
    /// head (a route, a header, the method), and each class stops at its ceiling.
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    /// use portero::{Priority, PriorityLimit};
    /// use portero_http::LoadShedLayer;
    ///
    /// let layer = LoadShedLayer::by_priority(
    ///     Arc::new(PriorityLimit::three_classes(100)),
    ///     |req: &http::Request<()>| match req.uri().path() {
    ///         "/health" | "/checkout" => Priority::CRITICAL,
    ///         p if p.starts_with("/prefetch") => Priority::SHEDDABLE,
    ///         _ => Priority::DEFAULT,
    ///     },
    ///     Duration::from_secs(1),
    /// );
    /// # let _ = layer;
    /// ```
    pub fn by_priority<B>(limit: Arc<PriorityLimit>, classify: F, retry_after: Duration) -> Self
    where
        F: Fn(&Request<B>) -> Priority,
    {
        Self::with_admission(ByPriority { limit, classify }, retry_after)
    }
}

impl<F> LoadShedLayer<ByTenant<F>> {
    /// Refuses tenants above their fair share first ([`FairShare`]); `tenant` names
    /// each request's tenant.
    ///
    /// **The tenant must be something the client cannot invent**: the owner of an API
    /// key or a claim of a token that an authentication layer *before* this one has
    /// verified (put in the request's extensions), never a header the client writes.
    /// An invented id is a fresh tenant with nothing in flight, and the reserve
    /// always admits such a tenant: a client rotating ids takes the reserve from the
    /// small tenants it exists for. Return `None` for a request without a verified
    /// tenant: all of those count as one tenant that is admitted only below
    /// `capacity − reserve`, never to the reserve, so inventing ids gains nothing
    /// that a tenant at its share would not get.
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    /// use portero_http::{fair::FairShare, LoadShedLayer};
    ///
    /// /// Set by the authentication layer once the API key is checked.
    /// #[derive(Clone)]
    /// struct VerifiedTenant(String);
    ///
    /// let layer = LoadShedLayer::by_tenant(
    ///     Arc::new(FairShare::new(500, 50)?),
    ///     |req: &http::Request<()>| req.extensions().get::<VerifiedTenant>().map(|t| t.0.clone()),
    ///     Duration::from_secs(1),
    /// );
    /// # let _ = layer;
    /// # Ok::<(), portero_http::fair::FairShareError>(())
    /// ```
    pub fn by_tenant<B, K>(share: Arc<FairShare>, tenant: F, retry_after: Duration) -> Self
    where
        F: Fn(&Request<B>) -> Option<K>,
    {
        Self::with_admission(ByTenant { share, tenant }, retry_after)
    }
}
