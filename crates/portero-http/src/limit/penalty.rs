//! A penalty: a key its limit refused is blocked for a stated time — a login limit
//! that locks a user name out for an hour once its five failures are spent, a client
//! that hammers past its quota sent away for longer than its window.
//!
//! Invariant: after the wrapped store refuses a key at time `t` (a decision, not an
//! outage policy's answer), every check of that key is refused until `t + P`, with a
//! `retry_after` of exactly the time left; a blocked check never reaches the wrapped
//! store (a Redis limit is not asked, and takes nothing). Penalties live in this
//! instance's memory, one GCRA of one unit per `P` per key, at most `max_keys` at
//! once: a key that finds the table full of live penalties is not blocked (its own
//! limit still refuses it as before), and a penalty that ended frees its place.

use core::fmt;
use core::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use portero::keyed::RandomState;
use portero::{Clock, Decision, DefaultClock, Fingerprint, Gcra, KeyedLimiter, Quota, QuotaError};

use super::store::{Checked, Checking, Source, Store, StoreError, Ticket};

/// A store whose refusals block the key for a stated time: wrap any store (memory,
/// the exact log, Redis) and give it to [`Limit::new`](crate::Limit::new).
///
/// ```
/// use std::time::Duration;
/// use portero::{KeyedLog, Quota};
/// use portero_http::{Limit, LimitLayer, Penalty, Policy};
///
/// // Five failed logins per user name in 15 minutes; the sixth locks it for an hour.
/// let failures = Quota::new(5, Duration::from_secs(15 * 60))?;
/// let store = Penalty::new(KeyedLog::new(failures, 100_000)?, Duration::from_secs(3600), 100_000)?;
/// let by_user = |req: &http::Request<String>| req.headers().get("x-user").cloned();
/// let logins = Limit::new(store, Policy::for_quota("login", &failures)?, by_user)
///     .count_only(|head| head.status() == http::StatusCode::UNAUTHORIZED);
/// let layer = LimitLayer::new(logins);
/// # let _ = layer;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Penalty<St, K: ?Sized, C = DefaultClock> {
    store: St,
    blocked: Arc<KeyedLimiter<K, Gcra, C>>,
}

impl<St, K: Hash + ?Sized> Penalty<St, K, DefaultClock> {
    /// `store`, whose refusals block the key for `period` (a quota of one unit per
    /// `period`: zero, or longer than a quota may be, is an error), at most
    /// `max_keys` keys blocked at once (at least one; a table that cannot be
    /// allocated is an error, not an abort).
    pub fn new(store: St, period: Duration, max_keys: usize) -> Result<Self, PenaltyError> {
        Self::with_clock(store, period, max_keys, DefaultClock::default())
    }
}

impl<St, K: Hash + ?Sized, C: Clock> Penalty<St, K, C> {
    /// [`new`](Penalty::new) on `clock` (a test's manual clock).
    pub fn with_clock(
        store: St,
        period: Duration,
        max_keys: usize,
        clock: C,
    ) -> Result<Self, PenaltyError> {
        let one_per_period = Quota::new(1, period).map_err(PenaltyError::Period)?;
        let table = KeyedLimiter::try_with_hasher(
            Gcra::new(one_per_period),
            max_keys,
            clock,
            RandomState::new(),
        )
        .map_err(|_| PenaltyError::TableTooLarge { max_keys })?;
        Ok(Self {
            store,
            blocked: Arc::new(table),
        })
    }

    /// The store it wraps.
    pub fn inner(&self) -> &St {
        &self.store
    }

    fn fingerprint(&self, key: Option<&K>) -> Fingerprint {
        match key {
            Some(key) => self.blocked.fingerprint_of(key),
            None => self.blocked.anonymous_fingerprint(),
        }
    }
}

/// Why a [`Penalty`] could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PenaltyError {
    /// The period is not a quota's (zero, or too long).
    Period(QuotaError),
    /// The table of `max_keys` penalties could not be allocated.
    TableTooLarge {
        /// The keys asked for.
        max_keys: usize,
    },
}

impl fmt::Display for PenaltyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Period(e) => write!(f, "the penalty's period: {e}"),
            Self::TableTooLarge { max_keys } => {
                write!(f, "a table of {max_keys} penalties cannot be allocated")
            }
        }
    }
}

impl std::error::Error for PenaltyError {}

impl<St, K: ?Sized, C> fmt::Debug for Penalty<St, K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Penalty").finish_non_exhaustive()
    }
}

/// The penalties of one [`Penalty`] store, shared with its answers on their way.
type Blocked<K, C> = Arc<KeyedLimiter<K, Gcra, C>>;

/// The refusal of a key still blocked at `now` (`None`: not blocked), as plan
/// `plan`'s answer.
fn blocked_now<K: Hash + ?Sized, C: Clock>(
    blocked: &Blocked<K, C>,
    key: Fingerprint,
    now: u64,
    capacity: u64,
    plan: u16,
) -> Option<Checked> {
    let d = blocked.peek_fingerprint_at(key, now, 1).ok()?;
    (!d.is_allowed()).then(|| {
        let wait = d.retry_after_nanos();
        let decision = Decision::rejected(capacity, 0, wait, wait);
        Checked {
            plan,
            ..Checked::new(decision, Source::Memory)
        }
    })
}

/// `answer`, and when it is a refusal the wrapped store decided, the key's penalty
/// started now if none is live; either way the refusal waits what is left of the
/// penalty at least (a request in flight when another started it too).
fn penalized<K: Hash + ?Sized, C: Clock>(
    blocked: &Blocked<K, C>,
    key: Fingerprint,
    answer: Result<Checked, StoreError>,
) -> Result<Checked, StoreError> {
    let mut checked = answer?;
    let d = checked.decision;
    if d.is_allowed() || checked.source.is_outage_policy() || checked.source == Source::Unavailable
    {
        return Ok(checked);
    }
    let now = blocked.clock().now();
    // Taken only if no penalty is live (a table full of live ones takes none).
    let _ = blocked.acquire_fingerprint_at(key, now, 1);
    let left = blocked
        .peek_fingerprint_at(key, now, 1)
        .map_or(0, |b| b.retry_after_nanos());
    if left > d.retry_after_nanos() {
        let reset = d.reset_after_nanos().max(left);
        checked.decision = Decision::rejected(d.limit(), d.remaining(), left, reset);
    }
    Ok(checked)
}

impl<K, St, C> Penalty<St, K, C>
where
    K: Hash + Send + Sync + 'static,
    St: Store<K>,
    C: Clock + Send + Sync + 'static,
{
    /// The refusal of `key` while its penalty lasts, as its plan's answer.
    fn blocked_now(&self, fingerprint: Fingerprint, key: Option<&K>) -> Option<Checked> {
        let now = self.blocked.clock().now();
        let capacity = self.store.capacity().unwrap_or(0);
        blocked_now(
            &self.blocked,
            fingerprint,
            now,
            capacity,
            self.store.plan_of(key),
        )
    }
}

impl<K, St, C> Store<K> for Penalty<St, K, C>
where
    K: Hash + Send + Sync + 'static,
    St: Store<K>,
    C: Clock + Send + Sync + 'static,
{
    fn check_key(&self, key: Option<K>, cost: u64) -> Checking {
        let fingerprint = self.fingerprint(key.as_ref());
        if let Some(refused) = self.blocked_now(fingerprint, key.as_ref()) {
            return Checking::Done(Ok(refused));
        }
        match self.store.check_key(key, cost) {
            Checking::Done(answer) => Checking::Done(penalized(&self.blocked, fingerprint, answer)),
            Checking::Pending(pending) => {
                let blocked = self.blocked.clone();
                Checking::Pending(Box::pin(async move {
                    penalized(&blocked, fingerprint, pending.await)
                }))
            }
        }
    }

    /// A blocked key is refused; otherwise the wrapped store's answer, and a refusal
    /// starts the penalty (the pipeline answers a refusal it peeked at once).
    fn ask_without_taking(&self, key: Option<K>, cost: u64) -> Option<Result<Checked, StoreError>> {
        let fingerprint = self.fingerprint(key.as_ref());
        if let Some(refused) = self.blocked_now(fingerprint, key.as_ref()) {
            return Some(Ok(refused));
        }
        let answer = self.store.ask_without_taking(key, cost)?;
        Some(penalized(&self.blocked, fingerprint, answer))
    }

    fn standing(&self, key: Option<K>) -> Checking {
        let fingerprint = self.fingerprint(key.as_ref());
        match self.blocked_now(fingerprint, key.as_ref()) {
            Some(refused) => Checking::Done(Ok(refused)),
            None => self.store.standing(key),
        }
    }

    fn refund_ticket(&self, ticket: Ticket) -> Option<Decision> {
        self.store.refund_ticket(ticket)
    }

    fn settle_ticket(&self, ticket: Ticket, real: u64) -> Option<Checking> {
        self.store.settle_ticket(ticket, real)
    }

    fn forget(&self, ticket: Ticket) -> Option<Checking> {
        self.store.forget(ticket)
    }

    fn plan_policy(&self, plan: u16) -> Option<&Arc<crate::headers::Policy>> {
        self.store.plan_policy(plan)
    }

    fn plan_of(&self, key: Option<&K>) -> u16 {
        self.store.plan_of(key)
    }

    fn capacity(&self) -> Option<u64> {
        self.store.capacity()
    }

    fn is_remote(&self) -> bool {
        self.store.is_remote()
    }
}
