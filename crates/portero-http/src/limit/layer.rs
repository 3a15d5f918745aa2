//! The layer: its limits and its options.

use core::fmt;
use std::sync::Arc;

use http::{Request, Response};
use portero::Decision;
use tower_layer::Layer;

use super::entry::{Entry, Limit, Route};
use super::options::{Charge, OutageAnswer, RefusalFn, RequestHead, WhenNoKey, WhenUnavailable};
use super::procedure::Procedure;
use super::service::LimitService;
use super::store::{Batch, Store};
use crate::headers::Policy;
use crate::keys::IntoKey;

/// Rate limits in front of a tower service (axum, hyper, tonic): one or more
/// [`Limit`]s, each a store (the in-memory [`KeyedLimiter`](portero::KeyedLimiter),
/// a Redis limiter, a leased one), a policy, a key and the routes it applies to.
///
/// Every applicable limit must admit a request, all or none: when one refuses, what
/// the earlier ones took goes back, so a refused request costs no quota anywhere: an
/// in-memory limit at once, a remote one (Redis, a lease) by settling its admission
/// at 0 in one call that the refusal does not wait for. Consecutive remote
/// limits whose stores share a [`Batch`](crate::Batch) channel (Redis limits on one
/// connection) are decided in one call, itself all or none. An admitted
/// request reaches the
/// inner service and its response gets every applied policy's `RateLimit` and
/// `RateLimit-Policy` fields as one list each, in the order the limits were added
/// (appended to any an inner layer wrote). A refused one never reaches it and is
/// answered here, before its body is read: 429 with the fields, `Retry-After` from
/// the refusing limit, `Cache-Control: no-store` and `{"error":"rate limit exceeded"}`
/// as JSON (the response body type must implement `From<&'static str>` and
/// `From<String>`, as axum's `Body` and http-body-util's `Full` do). A cost no limit
/// could admit is a 413; a key the server cannot tell (no peer address) or a store's
/// error is a 500 with the same JSON shape, logged with the `tracing` feature and
/// counted. A response a fallback decided carries `RateLimit-Source: fallback` and
/// the fallback's own quota.
///
/// Options, each for every store: [`when_no_key`](Self::when_no_key),
/// [`when_unavailable`](Self::when_unavailable), [`cost`](Self::cost),
/// [`shadow`](Self::shadow) (or per limit, [`Limit::shadow`]),
/// [`refusal`](Self::refusal), [`legacy_headers`](Self::legacy_headers), and a route
/// per limit ([`Limit::route`]).
///
/// ```
/// use std::sync::Arc;
/// use portero::{Gcra, KeyedLimiter, Quota};
/// use portero_http::{keys, route, Limit, LimitLayer, Policy};
/// type Req = http::Request<String>;
///
/// let login = Quota::per_minute(5)?;
/// let user = Quota::per_minute(100)?;
/// let x_user = || keys::header::<String>(http::HeaderName::from_static("x-user"));
/// let layer = LimitLayer::new(
///     Limit::new(
///         Arc::new(KeyedLimiter::new(Gcra::new(login), 100_000)),
///         Policy::for_quota("login", &login)?,
///         x_user(),
///     )
///     .route(route::post("/login")),
/// )
/// .limit(Limit::new(
///     Arc::new(KeyedLimiter::new(Gcra::new(user), 100_000)),
///     Policy::for_quota("user", &user)?,
///     x_user(),
/// ));
/// # let _ = layer;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// All or none holds within one layer: nested layers decide one after the other, so
/// an outer layer's limit stays charged for a request an inner layer refuses. Put
/// limits that must be all or none in one layer (several [`limit`](Self::limit)s).
///
/// The layer calls the inner service's `poll_ready` before it knows whether the
/// request will be admitted, like every tower middleware that answers by itself;
/// put it outside layers that reserve capacity in `poll_ready`.
pub struct LimitLayer<B> {
    pub(super) plan: Arc<Procedure<B>>,
}

impl<B> Clone for LimitLayer<B> {
    fn clone(&self) -> Self {
        Self {
            plan: self.plan.clone(),
        }
    }
}

impl<B> fmt::Debug for LimitLayer<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<(usize, &str)> = self
            .plan
            .entries
            .iter()
            .zip(&self.plan.declared)
            .map(|(e, &i)| (i, e.policy().name()))
            .collect();
        names.sort_unstable();
        f.debug_struct("LimitLayer")
            .field("policies", &names.iter().map(|n| n.1).collect::<Vec<_>>())
            .field("when_no_key", &self.plan.when_no_key)
            .field("when_unavailable", &self.plan.when_unavailable)
            .field("outage_answer", &self.plan.outage_answer)
            .field("shadow", &self.plan.shadow)
            .field("legacy", &self.plan.legacy)
            .finish_non_exhaustive()
    }
}

impl<B: 'static> LimitLayer<B> {
    /// A layer of one limit (add more with [`limit`](Self::limit)).
    pub fn new<St, F, R, KR>(limit: Limit<St, F, R>) -> Self
    where
        F: Fn(&Request<B>) -> KR + Send + Sync + 'static,
        KR: IntoKey,
        St: Store<KR::Key>,
        R: Route<B> + Send + Sync + 'static,
    {
        let plan = Procedure {
            entries: Vec::new(),
            declared: Vec::new(),
            batching: false,
            cost: Charge::default(),
            limit_costs: false,
            when_no_key: WhenNoKey::default(),
            when_unavailable: WhenUnavailable::default(),
            outage_answer: OutageAnswer::default(),
            shadow: false,
            legacy: false,
            refusal: None,
            settles_at_head: false,
            settles_by_usage: false,
        };
        Self {
            plan: Arc::new(plan),
        }
        .limit(limit)
    }

    /// Adds a limit, checked after the ones before it (and after every local one
    /// if it is remote).
    pub fn limit<St, F, R, KR>(self, limit: Limit<St, F, R>) -> Self
    where
        F: Fn(&Request<B>) -> KR + Send + Sync + 'static,
        KR: IntoKey,
        St: Store<KR::Key>,
        R: Route<B> + Send + Sync + 'static,
    {
        let entry: Arc<dyn Entry<B>> = Arc::new(limit);
        self.with(|plan| {
            plan.limit_costs |= entry.has_own_cost();
            if let Some(after) = entry.after() {
                plan.settles_at_head |= after.at_head();
                plan.settles_by_usage |= after.usage;
            }
            let declared = plan.entries.len();
            // Local limits first, each group in the declared order; a remote limit
            // that can travel in a batch goes right after the last one of its
            // channel, so limits declared between them never split the batch.
            let at = if !entry.is_remote() {
                plan.entries.iter().take_while(|e| !e.is_remote()).count()
            } else {
                let channel = batch_channel(&*entry);
                plan.batching |= channel.is_some();
                channel
                    .and_then(|c| {
                        plan.entries
                            .iter()
                            .rposition(|e| batch_channel(&**e) == Some(c))
                    })
                    .map_or(plan.entries.len(), |last| last + 1)
            };
            plan.entries.insert(at, entry);
            plan.declared.insert(at, declared);
        })
    }

    /// What requests without a key get (default: one shared bucket per limit).
    pub fn when_no_key(self, answer: WhenNoKey) -> Self {
        self.with(|plan| plan.when_no_key = answer)
    }

    /// What a request gets when a store cannot take its key (default: refused, with
    /// the [`outage_answer`](Self::outage_answer)).
    pub fn when_unavailable(self, answer: WhenUnavailable) -> Self {
        self.with(|plan| plan.when_unavailable = answer)
    }

    /// How a request no limit decided is refused: a store that could not be reached
    /// and fails closed, or one that could not take the key (default: 503 with
    /// `Retry-After`; see [`OutageAnswer`] for why). A custom
    /// [`refusal`](Self::refusal) answers only refusals a limit decided.
    ///
    /// ```
    /// use portero::{Gcra, KeyedLimiter, Quota};
    /// use portero_http::{keys, Limit, LimitLayer, OutageAnswer, Policy};
    ///
    /// let q = Quota::per_minute(100)?;
    /// let table = KeyedLimiter::new(Gcra::new(q), 10_000);
    /// let key = keys::header::<()>(http::HeaderName::from_static("x-api-key"));
    /// let layer = LimitLayer::new(Limit::new(table, Policy::for_quota("api", &q)?, key))
    ///     .outage_answer(OutageAnswer::TooManyRequests); // clients that only know 429
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn outage_answer(self, answer: OutageAnswer) -> Self {
        self.with(|plan| plan.outage_answer = answer)
    }

    /// Charges each request `cost(method, uri, fields)` units instead of one, in every
    /// limit: a route that does more work, or the body's declared length. All or
    /// nothing; a request costing more than a limit could ever admit gets 413 Content
    /// Too Large (except in a shadow limit, which never refuses). A cost of 0 is
    /// charged as 1: a request is never free (exempt routes with [`Limit::route`]).
    pub fn cost(
        self,
        cost: impl Fn(&http::Method, &http::Uri, &http::HeaderMap) -> u64 + Send + Sync + 'static,
    ) -> Self {
        self.with(|plan| plan.cost = Charge::new(cost))
    }

    /// [`cost`](Self::cost) from the whole head of the request (see
    /// [`Limit::cost_by`]): its extensions too.
    pub fn cost_by(self, cost: impl Fn(&RequestHead<'_>) -> u64 + Send + Sync + 'static) -> Self {
        self.with(|plan| plan.cost = Charge::by(cost))
    }

    /// Answers refusals with `refusal(decision, policy)` (the refusing limit's)
    /// instead of the JSON 429 — a page, another body, another status. The
    /// `RateLimit` fields, `Retry-After` and `Cache-Control: no-store` are added to
    /// whatever it returns.
    pub fn refusal(
        self,
        refusal: impl Fn(&Decision, &Policy) -> Response<String> + Send + Sync + 'static,
    ) -> Self {
        let refusal: Arc<RefusalFn> = Arc::new(refusal);
        self.with(|plan| plan.refusal = Some(refusal))
    }

    /// Shadow (dry-run) mode for every limit: decide and count as usual and send the
    /// `RateLimit` fields, but let every request through. A request a limit would
    /// have refused carries what is left for it (fewer units than its cost) and no
    /// `Retry-After`; a limit that could not decide it (a cost above its capacity, a
    /// key the server cannot tell, a failing store) is counted and not listed (see
    /// [`Limit::shadow`]). Shadow mode never changes an answer.
    pub fn shadow(self, on: bool) -> Self {
        self.with(|plan| plan.shadow = on)
    }

    /// Also send `X-RateLimit-Limit`, `-Remaining` and `-Reset` (delta-seconds), for
    /// clients written against those: the refusing limit's, or the one with the fewest
    /// units left (see [`headers::insert_legacy`](crate::headers::insert_legacy)).
    pub fn legacy_headers(self, on: bool) -> Self {
        self.with(|plan| plan.legacy = on)
    }

    /// Changes the plan (unshared while the layer is being built).
    fn with(mut self, change: impl FnOnce(&mut Procedure<B>)) -> Self {
        let plan = Arc::get_mut(&mut self.plan);
        match plan {
            Some(plan) => change(plan),
            None => {
                let mut copy = self.plan.duplicate();
                change(&mut copy);
                self.plan = Arc::new(copy);
            }
        }
        self
    }
}

fn batch_channel<B>(entry: &dyn Entry<B>) -> Option<usize> {
    super::batching::batchable(entry).map(Batch::channel)
}

impl<B> Procedure<B> {
    /// A copy (for a layer changed after it was cloned).
    fn duplicate(&self) -> Self {
        Self {
            entries: self.entries.clone(),
            declared: self.declared.clone(),
            batching: self.batching,
            cost: self.cost.clone(),
            limit_costs: self.limit_costs,
            when_no_key: self.when_no_key,
            when_unavailable: self.when_unavailable,
            outage_answer: self.outage_answer,
            shadow: self.shadow,
            legacy: self.legacy,
            refusal: self.refusal.clone(),
            settles_at_head: self.settles_at_head,
            settles_by_usage: self.settles_by_usage,
        }
    }
}

impl<S, B> Layer<S> for LimitLayer<B> {
    type Service = LimitService<S, B>;

    fn layer(&self, inner: S) -> Self::Service {
        LimitService {
            inner,
            plan: self.plan.clone(),
        }
    }
}
