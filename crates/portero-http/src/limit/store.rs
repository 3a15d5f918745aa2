//! What the pipeline needs of a store: check a key for a cost, and give back what an
//! admitted check took. The in-memory [`KeyedLimiter`] answers at once; a remote store
//! (Redis, leases) answers with a future. A store reports what happened — a decision,
//! who made it, or why there is none — and the pipeline alone turns that into an
//! answer, so no store re-implements the HTTP policy.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use std::hash::Hash;
use std::sync::Arc;

use portero::{
    Admission, Algorithm, CheckError, Clock, Decision, Fingerprint, KeyedError, KeyedLimiter,
};

/// Who decided a check (the `source` label of the metrics, and `RateLimit-Source:
/// fallback` on a response the outage policy decided).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Source {
    /// This process's memory.
    Memory,
    /// The shared state in Redis.
    Redis,
    /// A recent remote refusal remembered here (Redis's blocked-key cache).
    Cache,
    /// Units leased from the shared store earlier and spent here.
    Lease,
    /// The outage policy, because the shared store did not answer in time.
    Fallback,
    /// The outage policy refused without deciding (fail closed) because the shared
    /// store did not answer in time: answered as an outage
    /// ([`LimitLayer::outage_answer`](crate::LimitLayer::outage_answer)), not as a
    /// client over its limit.
    Unavailable,
}

impl Source {
    /// The label value: `memory`, `redis`, `cache`, `lease`, `fallback`,
    /// `unavailable`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Redis => "redis",
            Self::Cache => "cache",
            Self::Lease => "lease",
            Self::Fallback => "fallback",
            Self::Unavailable => "unavailable",
        }
    }

    /// Whether an outage policy answered (`RateLimit-Source: fallback`).
    pub fn is_outage_policy(self) -> bool {
        matches!(self, Self::Fallback | Self::Unavailable)
    }
}

/// A store's answer to one check (not `Clone`: its [`Ticket`] is one claim).
#[derive(Debug, PartialEq, Eq)]
pub struct Checked {
    /// The decision.
    pub decision: Decision,
    /// Who made it.
    pub source: Source,
    /// What gives the units back if a later limit refuses the request (`None`: the
    /// store cannot, or took nothing, and the units stay charged — stricter, never
    /// looser). See [`Store::refund_ticket`] for how much a ticket gives back.
    pub ticket: Option<Ticket>,
    /// The plan whose quota decided, in a [`Plans`](crate::Plans) store (its place
    /// in the plans; 0 for any other store): the fields advertise that plan's policy.
    pub plan: u16,
}

impl Checked {
    /// A decision that cannot be refunded.
    pub fn new(decision: Decision, source: Source) -> Self {
        Self {
            decision,
            source,
            ticket: None,
            plan: 0,
        }
    }
}

/// What identifies an admission to its store for a refund: the key's fingerprint,
/// and what the check took and wrote ([`Admission`]: its time, cost and state word,
/// by which the store gives back exactly what can still be this request's).
///
/// A ticket is one claim on one admission's units: it is not `Clone`, and giving
/// it back or settling it consumes it, so no admission is given back twice.
#[derive(Debug, PartialEq, Eq)]
pub struct Ticket {
    /// The key's fingerprint in the store.
    pub fingerprint: Fingerprint,
    /// What the check took (see the core's [`admission`](portero::admission) rule).
    pub admission: Admission,
    /// The plan whose store took it, in a [`Plans`](crate::Plans) store (0 for any
    /// other store).
    pub plan: u16,
    /// What a remote store keeps to settle the admission (its key and what its
    /// script took); `None` for a store that names keys by fingerprint.
    pub held: Option<Held>,
}

/// What a remote store keeps in a [`Ticket`] (its own type, which only it reads).
/// Equal when it is the same one.
#[derive(Clone)]
pub struct Held(pub Arc<dyn core::any::Any + Send + Sync>);

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Held {}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Held")
    }
}

/// Why a store gave no decision.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// The cost is above what the limit could ever admit (answered 413).
    CostAboveCapacity,
    /// The store could not take a new key (a full table, a full fallback table):
    /// the layer's [`WhenUnavailable`](crate::WhenUnavailable) decides.
    Unavailable {
        /// How long until the store can likely take it, if known (ns).
        retry_after_nanos: Option<u64>,
        /// Whose table was full: [`Source::Memory`] (this store's), or
        /// [`Source::Fallback`] (an outage policy's, while the shared store is away:
        /// the answer is marked and counted as a fallback answer).
        source: Source,
    },
    /// The store answered with an error (a script error, a key of the wrong type):
    /// a fault to fix, answered 500 and logged, never over-admitted.
    Faulty(Box<dyn std::error::Error + Send + Sync>),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::CostAboveCapacity => f.write_str("the cost is above the limit's capacity"),
            Self::Unavailable { .. } => f.write_str("the store cannot take the key now"),
            Self::Faulty(e) => write!(f, "the store failed: {e}"),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<KeyedError> for StoreError {
    fn from(e: KeyedError) -> Self {
        match e {
            KeyedError::Check(CheckError::CostExceedsCapacity { .. }) => Self::CostAboveCapacity,
            KeyedError::KeyTableFull { .. } => Self::Unavailable {
                retry_after_nanos: None,
                source: Source::Memory,
            },
            // A time out of range cannot come from a clock-driven check; anything the
            // core adds later is a fault, not an admission.
            other => Self::Faulty(Box::new(other)),
        }
    }
}

/// A remote store's answer, still on its way.
pub type Pending = Pin<Box<dyn Future<Output = Result<Checked, StoreError>> + Send>>;

/// A store's answer: given at once, or on its way.
pub enum Checking {
    /// Decided without waiting (memory, a cache hit, a live lease).
    Done(Result<Checked, StoreError>),
    /// To be awaited (a round trip).
    Pending(Pending),
}

impl fmt::Debug for Checking {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Done(d) => f.debug_tuple("Done").field(d).finish(),
            Self::Pending(_) => f.write_str("Pending"),
        }
    }
}

/// Where a limit's counts live. `key` is `None` for a request without a key that the
/// layer's [`WhenNoKey::SharedBucket`](crate::WhenNoKey::SharedBucket) sends to the
/// store's one shared bucket (which no real key can name).
///
/// The in-memory tables are stores (and portero-redis's limiters); a check reports a
/// [`Checked`] (decision, [`Source`], refund [`Ticket`]) or a [`StoreError`], at once or
/// as a future ([`Checking`]). A remote store of your own: see [`Batch`]'s example.
///
/// ```
/// use portero::{Gcra, KeyedLimiter, Quota};
/// use portero_http::{Checking, Source, Store};
///
/// let table = KeyedLimiter::new(Gcra::new(Quota::per_minute(2)?), 100);
/// let Checking::Done(Ok(first)) = Store::check_key(&table, Some("ann"), 1) else { panic!() };
/// assert!(first.decision.is_allowed());
/// assert_eq!(first.source, Source::Memory);
/// // A later limit refused the request: the unit goes back.
/// let after = Store::<&str>::refund_ticket(&table, first.ticket.unwrap()).unwrap();
/// assert_eq!(after.remaining(), 2);
/// assert_eq!(Store::<&str>::capacity(&table), Some(2));
/// let Checking::Done(Ok(now)) = Store::standing(&table, Some("ann")) else { panic!() };
/// assert_eq!(now.decision.remaining(), 2); // a peek takes nothing
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Store<K>: Send + Sync + 'static {
    /// Takes `cost` units for `key` if they fit (all or nothing).
    ///
    /// The trait's methods are named apart from the limiters' own (`check`,
    /// `peek`, `refund`, `settle`): a limiter in an `Arc` keeps answering to its own
    /// methods where this trait is in scope.
    fn check_key(&self, key: Option<K>, cost: u64) -> Checking;

    /// How `key` stands now, taking nothing: its units left and when it is full
    /// again (a decision for no units, without a ticket) — for a "how much is left"
    /// endpoint over any store.
    fn standing(&self, key: Option<K>) -> Checking;

    /// What [`check_key`](Self::check_key) would answer now, taking nothing: `None` when the
    /// store cannot tell without taking (the default; a remote store). With more
    /// than one limit, the pipeline asks every local limit first: a refusal answers
    /// before anything is taken anywhere, and when a remote limit follows, the
    /// local units are taken only after it admitted — so a request refused by any
    /// limit leaves no unit to give back (a refund happens only when a race is lost
    /// between the asking and the taking).
    fn ask_without_taking(&self, key: Option<K>, cost: u64) -> Option<Result<Checked, StoreError>> {
        let _ = (key, cost);
        None
    }

    /// Gives back what the admission `ticket` names took, and returns the key's
    /// decision as it stands afterwards (what a refused request reports for this
    /// limit).
    ///
    /// The rule is the core's ([`portero::admission`]): everything while nothing came
    /// since the admission, otherwise only what can still be this request's (a GCRA
    /// key gives back the debt still ahead of now, a window the units of a window
    /// still counted, an exact log the entries recorded at the admission's time), so
    /// a refund never leaves a key more generous than if the request had never come.
    /// Refunds may give back less: a [`LeakyQueue`](portero::LeakyQueue) key only
    /// while the request is still last in its queue, a window's opener nothing once
    /// others came, a GCRA key short by at most the time since the admission plus
    /// what other refunds of its word gave back since. A store
    /// that cannot refund at all hands out no tickets (its units stay charged:
    /// stricter, never looser).
    fn refund_ticket(&self, ticket: Ticket) -> Option<Decision> {
        let _ = ticket;
        None
    }

    /// Settles what the admission `ticket` names took on an estimate at its real
    /// cost `real`, learned from the response (0: a refund): the units not used go
    /// back by the rule of [`refund_ticket`](Self::refund_ticket), the units above the estimate
    /// are charged into debt past the burst (later requests wait it out). Answers
    /// how the key stands afterwards, at once or after a round trip; `None` (the
    /// default) when the store cannot settle, and the estimate stands.
    fn settle_ticket(&self, ticket: Ticket, real: u64) -> Option<Checking> {
        let _ = (ticket, real);
        None
    }

    /// Forgets the key the admission `ticket` was taken for (a login that succeeded
    /// clears its failures): how the key stands afterwards, at once or after a round
    /// trip; `None` (the default) when the store cannot.
    fn forget(&self, ticket: Ticket) -> Option<Checking> {
        let _ = ticket;
        None
    }

    /// The policy plan `plan` advertises, in a [`Plans`](crate::Plans) store
    /// (`None`: the limit's own).
    fn plan_policy(&self, plan: u16) -> Option<&Arc<crate::headers::Policy>> {
        let _ = plan;
        None
    }

    /// The plan `key` is on, in a [`Plans`](crate::Plans) store (0 for any other
    /// store): what a store wrapping this one puts in an answer of its own.
    fn plan_of(&self, key: Option<&K>) -> u16 {
        let _ = key;
        0
    }

    /// The most units one check may cost (`None`: the store does not say). A request
    /// costing more than an applicable limit's capacity is answered 413 before any
    /// limit is checked: it could never be admitted, so a 429 from another limit
    /// would only send the client to retry into the 413.
    fn capacity(&self) -> Option<u64> {
        None
    }

    /// Whether [`check_key`](Self::check_key) may answer [`Checking::Pending`]: such limits
    /// are checked after every local one, so a local refusal never costs a round
    /// trip nor leaves units charged remotely.
    fn is_remote(&self) -> bool {
        false
    }

    /// Where this store's checks can travel together with other limits' of the same
    /// request, in one call (a Redis connection: one script for several limits, all
    /// or none). `None` (the default): each check is its own call.
    fn batch(&self) -> Option<&dyn Batch> {
        None
    }

    /// [`check_key`](Self::check_key) made ready for [`batch`](Self::batch) to send with
    /// others instead of sent now, or the answer when none is needed (a cost above
    /// capacity, a refusal remembered). Called only when `batch` is `Some`.
    fn prepare(&self, key: Option<K>, cost: u64) -> Prepare {
        let _ = (key, cost);
        Prepare::Answered(Err(StoreError::Faulty(
            "this store sends no batches".into(),
        )))
    }
}

/// Sends several limits' prepared checks in one call, all or none: if one refuses,
/// none is charged, and every answer says how its limit stands.
///
/// A remote store whose [`Store::batch`] names a channel lets [`LimitLayer`](crate::LimitLayer)
/// send the consecutive limits of one request on that channel together (portero-redis
/// does: one script call for every Redis limit on one connection). A toy store of
/// counters "far away", where every call is counted:
///
/// ```
/// use std::collections::HashMap;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::{Arc, Mutex};
/// use http::{HeaderName, HeaderValue, Request, StatusCode};
/// use portero::Decision;
/// use portero_http::{keys, Batch, BatchPending, Checked, Checking, Limit, LimitLayer, Policy};
/// use portero_http::{Prepare, Prepared, Source, Store, StoreError};
/// use tower::{service_fn, Layer, ServiceExt};
///
/// #[derive(Clone, Default)]
/// struct Remote {
///     used: Arc<Mutex<HashMap<String, u64>>>,
///     calls: Arc<AtomicUsize>,
/// }
///
/// /// `limit` units per key, under `name`, in `remote`.
/// #[derive(Clone)]
/// struct Counter { remote: Remote, name: &'static str, limit: u64 }
///
/// impl Store<HeaderValue> for Counter {
///     fn check_key(&self, key: Option<HeaderValue>, cost: u64) -> Checking {
///         match self.prepare(key, cost) {
///             Prepare::Ready(one) => {
///                 let call = self.send(vec![one]);
///                 Checking::Pending(Box::pin(async move { call.await.remove(0) }))
///             }
///             Prepare::Answered(answer) => Checking::Done(answer),
///         }
///     }
///     fn standing(&self, key: Option<HeaderValue>) -> Checking {
///         let key = key.and_then(|k| k.to_str().ok().map(str::to_owned)).unwrap_or_default();
///         let used = self.remote.used.lock().unwrap().get(&format!("{}:{key}", self.name)).copied();
///         let left = self.limit - used.unwrap_or(0);
///         Checking::Done(Ok(Checked::new(Decision::admitted(self.limit, left, 0), Source::Redis)))
///     }
///     fn is_remote(&self) -> bool { true }
///     fn batch(&self) -> Option<&dyn Batch> { Some(self) }
///     fn prepare(&self, key: Option<HeaderValue>, cost: u64) -> Prepare {
///         let key = key.and_then(|k| k.to_str().ok().map(str::to_owned)).unwrap_or_default();
///         Prepare::Ready(Prepared(Box::new((format!("{}:{key}", self.name), self.limit, cost))))
///     }
/// }
///
/// impl Batch for Counter {
///     fn channel(&self) -> usize { Arc::as_ptr(&self.remote.calls) as usize }
///     fn send(&self, checks: Vec<Prepared>) -> BatchPending {
///         let remote = self.remote.clone();
///         Box::pin(async move {
///             remote.calls.fetch_add(1, Ordering::Relaxed);
///             let parts: Vec<(String, u64, u64)> =
///                 checks.into_iter().map(|c| *c.0.downcast().expect("a Counter's")).collect();
///             let mut used = remote.used.lock().unwrap();
///             // Decide every limit, then charge all or none.
///             let fits = |(key, limit, cost): &(String, u64, u64)| {
///                 used.get(key).copied().unwrap_or(0) + cost <= *limit
///             };
///             let all = parts.iter().all(fits);
///             parts.iter().map(|(key, limit, cost)| {
///                 let now = used.entry(key.clone()).or_default();
///                 let fit = *now + cost <= *limit;
///                 if all { *now += cost; }
///                 let left = limit - *now;
///                 // A limit that fits says how it stands (charged only if all fit).
///                 let decision = if fit { Decision::admitted(*limit, left, 0) }
///                     else { Decision::rejected(*limit, left, 1_000_000_000, 0) };
///                 Ok(Checked::new(decision, Source::Redis))
///             }).collect()
///         })
///     }
/// }
///
/// # tokio::runtime::Runtime::new()?.block_on(async {
/// let remote = Remote::default();
/// let per_user = Counter { remote: remote.clone(), name: "user", limit: 3 };
/// let per_tenant = Counter { remote: remote.clone(), name: "tenant", limit: 2 };
/// let header = |name| keys::header::<()>(HeaderName::from_static(name));
/// let layer = LimitLayer::new(Limit::new(per_user, Policy::new("user", 3, 60)?, header("x-user")))
///     .limit(Limit::new(per_tenant, Policy::new("tenant", 2, 60)?, header("x-tenant")));
/// let service = layer.layer(service_fn(|_: Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
/// }));
/// let request = |tenant| Request::builder().header("x-user", "ann").header("x-tenant", tenant)
///     .body(()).unwrap();
/// let mut statuses = Vec::new();
/// for tenant in ["acme", "acme", "acme", "initech"] {
///     statuses.push(service.clone().oneshot(request(tenant)).await?.status());
/// }
/// assert_eq!(statuses, [StatusCode::OK, StatusCode::OK, StatusCode::TOO_MANY_REQUESTS, StatusCode::OK]);
/// assert_eq!(remote.calls.load(Ordering::Relaxed), 4, "one call a request, two limits each");
/// assert_eq!(remote.used.lock().unwrap()["user:ann"], 3, "the refused request took nothing");
/// # Ok::<(), Box<dyn std::error::Error>>(()) })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Batch: Send + Sync {
    /// Which calls can carry checks together: equal for stores that share one
    /// connection (and so one call).
    fn channel(&self) -> usize;

    /// Sends `checks` (each prepared by a store of this channel) in one call: one
    /// answer each, in order.
    fn send(&self, checks: Vec<Prepared>) -> BatchPending;
}

/// What [`Store::prepare`] gave: a check ready for its batch, or the answer when no
/// call is needed.
#[derive(Debug)]
pub enum Prepare {
    /// Ready to be sent with the others.
    Ready(Prepared),
    /// Answered without a call (a cost above capacity, a refusal remembered).
    Answered(Result<Checked, StoreError>),
}

/// A check made ready to be sent in a batch: what the store needs, opaque to the
/// pipeline (see [`Batch`]'s example: a store boxes what its
/// [`send`](Batch::send) downcasts).
pub struct Prepared(pub Box<dyn core::any::Any + Send>);

impl fmt::Debug for Prepared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Prepared")
    }
}

/// A batch's answers, on their way: one per check sent, in order (see [`Batch`]'s
/// example).
pub type BatchPending = Pin<Box<dyn Future<Output = Vec<Result<Checked, StoreError>>> + Send>>;

/// A store for an in-memory table that names keys by fingerprint (`KeyedLimiter`,
/// `KeyedLog`): decided at once, refunded by the admission's fingerprint and time.
macro_rules! in_memory_store {
    ($table:ident < K, $($param:ident),* >, capacity = |$t:ident| $capacity:expr, $($bounds:tt)*) => {
        impl<K, $($param),*> Store<K> for $table<K, $($param),*>
        where
            K: Hash + Send + Sync + 'static,
            $($bounds)*
        {
            #[inline]
            fn check_key(&self, key: Option<K>, cost: u64) -> Checking {
                let fingerprint = match &key {
                    Some(key) => self.fingerprint_of(key),
                    None => self.anonymous_fingerprint(),
                };
                let now = self.clock().now();
                Checking::Done(
                    self.acquire_fingerprint_at(fingerprint, now, cost)
                        .map(|taken| Checked {
                            decision: taken.decision,
                            source: Source::Memory,
                            ticket: taken.admission.map(|admission| Ticket {
                                fingerprint,
                                admission,
                                plan: 0,
                                held: None,
                            }),
                            plan: 0,
                        })
                        .map_err(StoreError::from),
                )
            }

            fn ask_without_taking(&self, key: Option<K>, cost: u64) -> Option<Result<Checked, StoreError>> {
                let fingerprint = match &key {
                    Some(key) => self.fingerprint_of(key),
                    None => self.anonymous_fingerprint(),
                };
                let now = self.clock().now();
                Some(
                    self.peek_fingerprint_at(fingerprint, now, cost)
                        .map(|decision| Checked::new(decision, Source::Memory))
                        .map_err(|e| StoreError::from(portero::KeyedError::from(e))),
                )
            }

            fn standing(&self, key: Option<K>) -> Checking {
                let fingerprint = match &key {
                    Some(key) => self.fingerprint_of(key),
                    None => self.anonymous_fingerprint(),
                };
                let now = self.clock().now();
                Checking::Done(
                    self.peek_fingerprint_at(fingerprint, now, 0)
                        .map(|decision| Checked::new(decision, Source::Memory))
                        .map_err(|e| StoreError::Faulty(Box::new(e))),
                )
            }

            fn refund_ticket(&self, ticket: Ticket) -> Option<Decision> {
                let now = self.clock().now().max(ticket.admission.at());
                self.refund_fingerprint(ticket.fingerprint, ticket.admission);
                self.peek_fingerprint_at(ticket.fingerprint, now, 0).ok()
            }

            fn settle_ticket(&self, ticket: Ticket, real: u64) -> Option<Checking> {
                let now = self.clock().now();
                let settled =
                    self.settle_fingerprint_at(ticket.fingerprint, ticket.admission, real, now);
                Some(Checking::Done(
                    settled
                        .map(|decision| Checked::new(decision, Source::Memory))
                        .map_err(StoreError::from),
                ))
            }

            fn forget(&self, ticket: Ticket) -> Option<Checking> {
                self.reset_fingerprint(ticket.fingerprint);
                let now = self.clock().now();
                let standing = self.peek_fingerprint_at(ticket.fingerprint, now, 0);
                Some(Checking::Done(
                    standing
                        .map(|decision| Checked::new(decision, Source::Memory))
                        .map_err(|e| StoreError::Faulty(Box::new(e))),
                ))
            }

            fn capacity(&self) -> Option<u64> {
                let $t = self;
                Some($capacity)
            }
        }
    };
}
pub(super) use in_memory_store;

// The key type is the table's, so it is inferred from either.
in_memory_store!(
    KeyedLimiter<K, A, C>,
    capacity = |table| table.algorithm().capacity(),
    A: Algorithm + Copy + Send + Sync + 'static,
    C: Clock + Send + Sync + 'static,
);

impl<K, T: Store<K> + ?Sized> Store<K> for Arc<T> {
    #[inline]
    fn check_key(&self, key: Option<K>, cost: u64) -> Checking {
        (**self).check_key(key, cost)
    }

    fn standing(&self, key: Option<K>) -> Checking {
        (**self).standing(key)
    }

    fn ask_without_taking(&self, key: Option<K>, cost: u64) -> Option<Result<Checked, StoreError>> {
        (**self).ask_without_taking(key, cost)
    }

    fn refund_ticket(&self, ticket: Ticket) -> Option<Decision> {
        (**self).refund_ticket(ticket)
    }

    fn settle_ticket(&self, ticket: Ticket, real: u64) -> Option<Checking> {
        (**self).settle_ticket(ticket, real)
    }

    fn forget(&self, ticket: Ticket) -> Option<Checking> {
        (**self).forget(ticket)
    }

    fn plan_policy(&self, plan: u16) -> Option<&Arc<crate::headers::Policy>> {
        (**self).plan_policy(plan)
    }

    fn plan_of(&self, key: Option<&K>) -> u16 {
        (**self).plan_of(key)
    }

    fn capacity(&self) -> Option<u64> {
        (**self).capacity()
    }

    fn is_remote(&self) -> bool {
        (**self).is_remote()
    }

    fn batch(&self) -> Option<&dyn Batch> {
        (**self).batch()
    }

    fn prepare(&self, key: Option<K>, cost: u64) -> Prepare {
        (**self).prepare(key, cost)
    }
}
