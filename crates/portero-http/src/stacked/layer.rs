//! The layer: an ordered list of limits.

use core::fmt;
use std::hash::Hash;
use std::sync::Arc;

use http::Request;
use portero::{Algorithm, Clock, KeyedLimiter};
use tower_layer::Layer;

use super::limit::{KeyedEntry, RequestLimit};
use super::StackedRateLimitService;
use crate::headers::Policy;
use crate::rate_limit::Charge;

/// Several limits per request, checked in order, all or none: when one refuses, the
/// units the earlier ones took are given back (as the core's `stack::check_all`), so a
/// refused request costs no quota anywhere. Each limit may apply to some routes only
/// (`POST /login` 5 per minute, reads 1,000), and counts under its own key (user,
/// tenant, one global key). The response carries every applied policy's fields as one
/// list each (`RateLimit: "user";r=4;t=12, "global";r=990;t=1`); a refusal is a 429
/// with the refusing policy's `Retry-After`, decided before the body is read.
///
/// ```
/// use std::sync::Arc;
/// use portero::{Gcra, KeyedLimiter, Quota};
/// use portero_http::{all_routes, keys, Policy, StackedRateLimitLayer};
/// type Req = http::Request<String>;
///
/// let login = Quota::per_minute(5)?;
/// let user = Quota::per_minute(100)?;
/// let layer = StackedRateLimitLayer::<String>::new()
///     .limit(
///         |r: &Req| r.method() == http::Method::POST && r.uri().path() == "/login",
///         Arc::new(KeyedLimiter::new(Gcra::new(login), 100_000)),
///         Policy::for_quota("login", &login)?,
///         keys::header(http::HeaderName::from_static("x-user")),
///     )
///     .limit(
///         all_routes,
///         Arc::new(KeyedLimiter::new(Gcra::new(user), 100_000)),
///         Policy::for_quota("user", &user)?,
///         keys::header(http::HeaderName::from_static("x-user")),
///     );
/// # let _ = layer;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct StackedRateLimitLayer<B> {
    pub(super) limits: Arc<[Arc<dyn RequestLimit<B>>]>,
    pub(super) cost: Charge,
}

/// The route filter that accepts every request.
pub fn all_routes<B>(_: &Request<B>) -> bool {
    true
}

impl<B> Clone for StackedRateLimitLayer<B> {
    fn clone(&self) -> Self {
        Self {
            limits: self.limits.clone(),
            cost: self.cost.clone(),
        }
    }
}

impl<B> fmt::Debug for StackedRateLimitLayer<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.limits.iter().map(|l| l.policy().name()).collect();
        f.debug_struct("StackedRateLimitLayer")
            .field("policies", &names)
            .finish_non_exhaustive()
    }
}

impl<B> Default for StackedRateLimitLayer<B> {
    fn default() -> Self {
        Self {
            limits: Arc::new([]),
            cost: Charge::default(),
        }
    }
}

impl<B: 'static> StackedRateLimitLayer<B> {
    /// A stack with no limits yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a limit for the requests `route` accepts (a path, a method, an operation;
    /// [`all_routes`] for every request), counted under `key`.
    pub fn limit<K, A, C, F, R>(
        mut self,
        route: R,
        limiter: Arc<KeyedLimiter<K, A, C>>,
        policy: Policy,
        key: F,
    ) -> Self
    where
        K: Hash + Send + Sync + 'static,
        A: Algorithm + Copy + Send + Sync + 'static,
        C: Clock + Send + Sync + 'static,
        F: Fn(&Request<B>) -> Option<K> + Send + Sync + 'static,
        R: Fn(&Request<B>) -> bool + Send + Sync + 'static,
    {
        let entry = KeyedEntry {
            limiter,
            policy: Arc::new(policy),
            key,
            route,
        };
        let mut limits: Vec<Arc<dyn RequestLimit<B>>> = self.limits.iter().cloned().collect();
        limits.push(Arc::new(entry));
        self.limits = limits.into();
        self
    }

    crate::rate_limit::cost_setter!();
}

impl<S, B> Layer<S> for StackedRateLimitLayer<B> {
    type Service = StackedRateLimitService<S, B>;

    fn layer(&self, inner: S) -> Self::Service {
        StackedRateLimitService {
            inner,
            layer: self.clone(),
        }
    }
}
