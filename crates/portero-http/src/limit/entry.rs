//! One limit of a pipeline: a store, the policy it advertises, the key it counts a
//! request under, the routes it applies to, and whether it only watches (shadow).

use core::fmt;
use std::sync::Arc;

use http::Request;
use portero::Decision;

use super::after::{AfterResponse, ResponseHead};
use super::options::{Charge, RequestHead, WhenNoKey};
use super::store::{Batch, Checking, Prepare, Prepared, Store, Ticket};
use crate::headers::Policy;
use crate::keys::{IntoKey, KeyError};

/// Which requests a limit applies to: any `Fn(&Request<B>) -> bool` (see
/// [`route`](crate::route) for method and path helpers), or [`AllRoutes`].
pub trait Route<B> {
    /// Whether the limit applies to `request`.
    fn matches(&self, request: &Request<B>) -> bool;
}

/// Every request (a limit's default route).
#[derive(Debug, Clone, Copy, Default)]
pub struct AllRoutes;

impl<B> Route<B> for AllRoutes {
    #[inline]
    fn matches(&self, _: &Request<B>) -> bool {
        true
    }
}

/// A route that matches no request: what the overload layers exempt by default
/// ([`LoadShedLayer::exempt`](crate::LoadShedLayer::exempt),
/// [`DeadlineQueueLayer::exempt`](crate::queue::DeadlineQueueLayer::exempt)).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoRoutes;

impl<B> Route<B> for NoRoutes {
    #[inline]
    fn matches(&self, _: &Request<B>) -> bool {
        false
    }
}

impl<B, F: Fn(&Request<B>) -> bool> Route<B> for F {
    #[inline]
    fn matches(&self, request: &Request<B>) -> bool {
        self(request)
    }
}

/// One limit for a [`LimitLayer`](crate::LimitLayer): requests on its routes are
/// counted in `store` under `key(&request)` and advertised as `policy`.
///
/// The key function returns `Option<K>` (`None`: the client sent nothing to key on,
/// decided by [`WhenNoKey`](crate::WhenNoKey)) or `Result<K, KeyError>` (the server
/// cannot tell: answered 500), see [`keys`](crate::keys).
#[derive(Clone)]
pub struct Limit<St, F, R = AllRoutes> {
    pub(crate) store: St,
    pub(crate) policy: Arc<Policy>,
    pub(crate) key: F,
    pub(crate) route: R,
    pub(crate) shadow: bool,
    // This limit's own cost and no-key policy, where it has them (else the layer's).
    pub(crate) cost: Option<Charge>,
    pub(crate) when_no_key: Option<WhenNoKey>,
    // What it learns from the response.
    pub(crate) after: AfterResponse,
}

impl<St, F, R> fmt::Debug for Limit<St, F, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limit")
            .field("policy", &self.policy)
            .field("shadow", &self.shadow)
            .finish_non_exhaustive()
    }
}

impl<St, F> Limit<St, F> {
    /// Every request, counted in `store` under `key`, advertised as `policy`.
    pub fn new(store: St, policy: Policy, key: F) -> Self {
        Self {
            store,
            policy: Arc::new(policy),
            key,
            route: AllRoutes,
            shadow: false,
            cost: None,
            when_no_key: None,
            after: AfterResponse::default(),
        }
    }
}

impl<St, F, R> Limit<St, F, R> {
    /// Only the requests `route` accepts (`POST /login`, a path prefix).
    pub fn route<R2>(self, route: R2) -> Limit<St, F, R2> {
        Limit {
            store: self.store,
            policy: self.policy,
            key: self.key,
            route,
            shadow: self.shadow,
            cost: self.cost,
            when_no_key: self.when_no_key,
            after: self.after,
        }
    }

    /// Charges each request `cost(method, uri, fields)` units in this limit, instead
    /// of the layer's [`cost`](crate::LimitLayer::cost) — an API key's limit counting
    /// an export as 10 while the per-client limit counts every request as one — with
    /// the other limits of the layer, all or none. A cost of 0 is charged as 1; a
    /// cost above this limit's capacity is answered 413.
    ///
    /// ```
    /// use portero::{Gcra, KeyedLimiter, Quota};
    /// use portero_http::{keys, Limit, LimitLayer, Policy};
    ///
    /// let q = Quota::per_minute(100)?;
    /// let key = || keys::header::<()>(http::HeaderName::from_static("x-api-key"));
    /// let per_key = Limit::new(KeyedLimiter::new(Gcra::new(q), 10_000), Policy::for_quota("api", &q)?, key())
    ///     .cost(|method, uri, _| if method == http::Method::POST && uri.path() == "/export" { 10 } else { 1 });
    /// let layer = LimitLayer::new(per_key)
    ///     .limit(Limit::new(KeyedLimiter::new(Gcra::new(q), 10_000), Policy::for_quota("calls", &q)?, key()));
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cost(
        mut self,
        cost: impl Fn(&http::Method, &http::Uri, &http::HeaderMap) -> u64 + Send + Sync + 'static,
    ) -> Self {
        self.cost = Some(Charge::new(cost));
        self
    }

    /// [`cost`](Self::cost) from the whole head of the request: its extensions too,
    /// where an earlier layer put what it read of the body (a completion's
    /// `max_tokens`, so that the estimate is a bound the server owns).
    ///
    /// ```
    /// use portero::{Gcra, KeyedLimiter, Quota};
    /// use portero_http::{keys, Limit, Policy, RequestHead};
    ///
    /// /// What a body-parsing layer before this one found.
    /// #[derive(Clone)]
    /// struct MaxTokens(u64);
    ///
    /// let q = Quota::per_minute(10_000)?;
    /// let key = keys::header::<()>(http::HeaderName::from_static("x-api-key"));
    /// let table: KeyedLimiter<http::HeaderValue, Gcra> = KeyedLimiter::new(Gcra::new(q), 10_000);
    /// let tokens = Limit::new(table, Policy::for_quota("tokens", &q)?, key)
    ///     .cost_by(|head: &RequestHead<'_>| head.extensions().get::<MaxTokens>().map_or(4_096, |m| m.0));
    /// # let _ = tokens;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cost_by(
        mut self,
        cost: impl Fn(&RequestHead<'_>) -> u64 + Send + Sync + 'static,
    ) -> Self {
        self.cost = Some(Charge::by(cost));
        self
    }

    /// Settles each admitted request at the real cost its response head tells
    /// (`real(head)`; `None`: the estimate stands) — a field the handler sets
    /// ([`ResponseHead::units`]), or a value it put in the response's extensions.
    /// The request was admitted on its estimate (its [`cost`](Self::cost), 1 by
    /// default); the units not used go back (by the refund rule: less, never more,
    /// once others came since), the units above it are charged even past the burst,
    /// so the key goes into debt and later requests are refused, with an exact
    /// `Retry-After`, until it is paid off. The response's fields show the key after
    /// settlement. Every store of portero's settles (the in-memory tables and log,
    /// Redis, leases); a store of your own that cannot keeps the estimate.
    ///
    /// Bound: in any span, a key admits no more than a twin charged each request's
    /// real cost on arrival would, plus what the requests still in flight will be
    /// charged above their estimates.
    ///
    /// ```
    /// use portero::{Gcra, KeyedLimiter, Quota};
    /// use portero_http::{keys, Limit, LimitLayer, Policy};
    ///
    /// let tokens = Quota::per_minute(10_000)?;
    /// let key = keys::header::<()>(http::HeaderName::from_static("x-api-key"));
    /// let per_key = Limit::new(KeyedLimiter::new(Gcra::new(tokens), 10_000), Policy::for_quota("tokens", &tokens)?, key)
    ///     .cost(|_, _, _| 500) // the estimate a request is admitted on
    ///     .settle(|head| head.units("x-usage-tokens"));
    /// let layer = LimitLayer::new(per_key);
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle(
        mut self,
        real: impl Fn(&ResponseHead<'_>) -> Option<u64> + Send + Sync + 'static,
    ) -> Self {
        self.after.real = Some(Arc::new(real));
        self
    }

    /// Settles each admitted request at the units the handler reports through the
    /// [`Usage`](crate::Usage) handle the layer puts in the request's extensions —
    /// for a cost known only when a streamed body ends. It settles when the handle's
    /// last clone is dropped, with what was reported (nothing reported: the
    /// estimate stands); the response's fields show the key after the estimate, as
    /// the body has not ended when they are sent. Settled as [`settle`](Self::settle)
    /// does.
    pub fn settle_by_usage(mut self) -> Self {
        self.after.usage = true;
        self
    }

    /// Counts only the requests whose response passes `test` (a failed login: 401
    /// or 403): the others are given back after the response (by the refund rule).
    /// A request is still checked, and refused while the key is exhausted, before
    /// the handler runs — so at most the quota's failures get through at once, even
    /// with many in flight; one that never answers (cancelled) stays counted.
    pub fn count_only(
        mut self,
        test: impl Fn(&ResponseHead<'_>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.after.count_if = Some(Arc::new(test));
        self
    }

    /// Forgets the key when a response passes `test` (a login that succeeded
    /// clears the failures before it). Checked before [`count_only`](Self::count_only).
    pub fn clear_on(
        mut self,
        test: impl Fn(&ResponseHead<'_>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.after.clear_if = Some(Arc::new(test));
        self
    }

    /// What a request without a key gets in this limit, instead of the layer's
    /// [`when_no_key`](crate::LimitLayer::when_no_key).
    pub fn when_no_key(mut self, answer: WhenNoKey) -> Self {
        self.when_no_key = Some(answer);
        self
    }

    /// Shadow (dry-run) this limit: decide and count as usual, advertise its fields,
    /// but never refuse because of it — to see what a new limit would refuse first.
    /// A request it would have refused is counted `shadow_rejected` and carries what
    /// is left for it (fewer units than its cost) and no `Retry-After`. One it could
    /// not decide — a cost above its capacity (counted `shadow_rejected`), a key the
    /// server cannot tell or a failing store (counted as `shadow_key` / `shadow_store`
    /// failures, and logged) — goes through with no field of this limit: there is no
    /// decision to advertise. A shadow limit never changes an answer.
    pub fn shadow(mut self, on: bool) -> Self {
        self.shadow = on;
        self
    }
}

/// What checking one limit for one request gave.
pub(crate) enum Step {
    /// The store's answer (the key found, or the shared no-key bucket).
    Checked(Checking),
    /// The request has no key and its limit lets it through unlimited.
    Unlimited,
    /// The request has no key and its limit refuses it.
    Refused,
    /// The server cannot tell the key.
    KeyFailed(KeyError),
}

/// What a request without a usable key gets in one limit: a [`Step`] decided
/// without the store.
pub(crate) enum Keyless {
    /// Let through unlimited.
    Unlimited,
    /// Refused.
    Refused,
    /// The server cannot tell the key.
    KeyFailed(KeyError),
}

impl From<Keyless> for Step {
    fn from(keyless: Keyless) -> Self {
        match keyless {
            Keyless::Unlimited => Self::Unlimited,
            Keyless::Refused => Self::Refused,
            Keyless::KeyFailed(e) => Self::KeyFailed(e),
        }
    }
}

/// What preparing one limit for a batch gave.
pub(crate) enum Prep {
    /// Ready to be sent with the others.
    Prepared(Prepared),
    /// Decided without a call (no key, a key failure, an answer known at once).
    Decided(Step),
}

/// The object-safe face of a [`Limit`], so limits of different stores and key types
/// share one pipeline.
pub(crate) trait Entry<B>: Send + Sync {
    fn applies(&self, request: &Request<B>) -> bool;
    fn check(
        &self,
        request: &Request<B>,
        cost: u64,
        no_key: crate::limit::options::WhenNoKey,
    ) -> Step;
    fn prepare(
        &self,
        request: &Request<B>,
        cost: u64,
        no_key: crate::limit::options::WhenNoKey,
    ) -> Prep;
    /// What [`check`](Self::check) would give, taking nothing (`None`: the store
    /// cannot tell without taking).
    fn peek(
        &self,
        request: &Request<B>,
        cost: u64,
        no_key: crate::limit::options::WhenNoKey,
    ) -> Option<Step>;
    /// How the key of `request` stands in this limit, taking nothing (`None`: no key
    /// to name).
    fn standing(
        &self,
        request: &Request<B>,
        no_key: crate::limit::options::WhenNoKey,
    ) -> Option<Checking>;
    /// What `request` costs in this limit: its own cost, or the layer's `cost`.
    fn cost_of(&self, request: &Request<B>, cost: u64) -> Result<u64, KeyError>;
    /// Whether this limit has a cost of its own.
    fn has_own_cost(&self) -> bool;
    fn batch(&self) -> Option<&dyn Batch>;
    fn refund(&self, ticket: Ticket) -> Option<Decision>;
    /// What it learns from the response (`None`: nothing).
    fn after(&self) -> Option<&AfterResponse>;
    fn settle(&self, ticket: Ticket, real: u64) -> Option<Checking>;
    fn forget(&self, ticket: Ticket) -> Option<Checking>;
    /// The policy plan `plan` advertises (`None`: the limit's own).
    fn plan_policy(&self, plan: u16) -> Option<&Arc<Policy>>;
    fn capacity(&self) -> Option<u64>;
    /// Whether `request` has no key and this limit lets it through unlimited.
    fn lets_through(&self, request: &Request<B>, no_key: crate::limit::options::WhenNoKey) -> bool;
    fn policy(&self) -> &Arc<Policy>;
    fn is_shadow(&self) -> bool;
    fn is_remote(&self) -> bool;
}

impl<B, St, F, R, KR> Entry<B> for Limit<St, F, R>
where
    F: Fn(&Request<B>) -> KR + Send + Sync,
    KR: IntoKey,
    St: Store<KR::Key>,
    R: Route<B> + Send + Sync,
{
    #[inline]
    fn applies(&self, request: &Request<B>) -> bool {
        self.route.matches(request)
    }

    #[inline]
    fn check(
        &self,
        request: &Request<B>,
        cost: u64,
        no_key: crate::limit::options::WhenNoKey,
    ) -> Step {
        let cost = match self.cost_of(request, cost) {
            Ok(cost) => cost,
            Err(e) => return Step::KeyFailed(e),
        };
        match self.key_of(request, no_key) {
            Ok(key) => Step::Checked(self.store.check_key(key, cost)),
            Err(keyless) => keyless.into(),
        }
    }

    fn peek(
        &self,
        request: &Request<B>,
        cost: u64,
        no_key: crate::limit::options::WhenNoKey,
    ) -> Option<Step> {
        let cost = match self.cost_of(request, cost) {
            Ok(cost) => cost,
            Err(e) => return Some(Step::KeyFailed(e)),
        };
        match self.key_of(request, no_key) {
            Ok(key) => self
                .store
                .ask_without_taking(key, cost)
                .map(|answer| Step::Checked(Checking::Done(answer))),
            Err(keyless) => Some(keyless.into()),
        }
    }

    fn standing(
        &self,
        request: &Request<B>,
        no_key: crate::limit::options::WhenNoKey,
    ) -> Option<Checking> {
        self.key_of(request, no_key)
            .ok()
            .map(|key| self.store.standing(key))
    }

    #[inline]
    fn cost_of(&self, request: &Request<B>, cost: u64) -> Result<u64, KeyError> {
        match &self.cost {
            // A request is never free: a cost function's 0 is one unit.
            Some(own) => own.of(request).map(|c| c.max(1)),
            None => Ok(cost),
        }
    }

    fn has_own_cost(&self) -> bool {
        self.cost.is_some()
    }

    fn prepare(
        &self,
        request: &Request<B>,
        cost: u64,
        no_key: crate::limit::options::WhenNoKey,
    ) -> Prep {
        let cost = match self.cost_of(request, cost) {
            Ok(cost) => cost,
            Err(e) => return Prep::Decided(Step::KeyFailed(e)),
        };
        match self.key_of(request, no_key) {
            Ok(key) => match self.store.prepare(key, cost) {
                Prepare::Ready(prepared) => Prep::Prepared(prepared),
                Prepare::Answered(answer) => Prep::Decided(Step::Checked(Checking::Done(answer))),
            },
            Err(keyless) => Prep::Decided(keyless.into()),
        }
    }

    fn batch(&self) -> Option<&dyn Batch> {
        self.store.batch()
    }

    fn refund(&self, ticket: Ticket) -> Option<Decision> {
        self.store.refund_ticket(ticket)
    }

    fn after(&self) -> Option<&AfterResponse> {
        (self.after.at_head() || self.after.usage).then_some(&self.after)
    }

    fn settle(&self, ticket: Ticket, real: u64) -> Option<Checking> {
        self.store.settle_ticket(ticket, real)
    }

    fn forget(&self, ticket: Ticket) -> Option<Checking> {
        self.store.forget(ticket)
    }

    fn plan_policy(&self, plan: u16) -> Option<&Arc<Policy>> {
        self.store.plan_policy(plan)
    }

    fn capacity(&self) -> Option<u64> {
        self.store.capacity()
    }

    fn lets_through(&self, request: &Request<B>, no_key: crate::limit::options::WhenNoKey) -> bool {
        matches!(self.key_of(request, no_key), Err(Keyless::Unlimited))
    }

    fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    fn is_shadow(&self) -> bool {
        self.shadow
    }

    fn is_remote(&self) -> bool {
        self.store.is_remote()
    }
}

impl<St, F, R> Limit<St, F, R> {
    /// The key `request` is counted under (`None`: the shared no-key bucket), or
    /// what the request gets without one.
    #[inline]
    fn key_of<B, KR: IntoKey>(
        &self,
        request: &Request<B>,
        no_key: crate::limit::options::WhenNoKey,
    ) -> Result<Option<KR::Key>, Keyless>
    where
        F: Fn(&Request<B>) -> KR,
    {
        // A key function of the caller's that panics is a bug of theirs: answered like
        // a key that cannot be told (500, said once on stderr), never a dropped
        // connection. Nothing of this limit's was held while it ran.
        let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            (self.key)(request).into_key()
        }))
        .unwrap_or(Err(crate::keys::KeyError::Panicked));
        match found {
            Ok(Some(key)) => Ok(Some(key)),
            Ok(None) => match self.when_no_key.unwrap_or(no_key) {
                crate::limit::options::WhenNoKey::SharedBucket => Ok(None),
                crate::limit::options::WhenNoKey::Allow => Err(Keyless::Unlimited),
                crate::limit::options::WhenNoKey::Reject => Err(Keyless::Refused),
            },
            Err(e) => Err(Keyless::KeyFailed(e)),
        }
    }
}
