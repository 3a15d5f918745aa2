//! The Redis limiter as a store of portero-http's one pipeline
//! ([`LimitLayer`](portero_http::LimitLayer)): every option of the layer (no key,
//! shadow, cost, refusal, legacy fields, routes, stacks) applies to a shared limit
//! as to an in-memory one, because this crate adds a store, not a layer.
//!
//! A key reaches Redis as the text its [`StoreKey`] writes (header bytes
//! percent-encoded, addresses as written, tuples length-prefixed, each type tagged);
//! requests without a key share the bucket of
//! [`RedisLimiter::check_anonymous`], which no key can name. Who
//! decided is the answer's [`Source`]: a fallback answer carries its own quota and is
//! counted and traced by the pipeline.

use std::sync::Arc;

use portero_http::{
    Batch, BatchPending, Checked, Checking, Prepare, Prepared, Source, Store, StoreError, StoreKey,
    Ticket,
};

use crate::batch::{check_parts, Part};
use crate::call::Taken;
use crate::lease::LeasedLimiter;
use crate::limiter::RedisLimiter;
use crate::outcome::{RedisCheckError, ServedBy, Verdict};

/// Several Redis limits of one layer on one connection travel in one call, all or
/// none (see the `batch` module).
impl<K: StoreKey + Send + 'static> Store<K> for RedisLimiter {
    fn check_key(&self, key: Option<K>, cost: u64) -> Checking {
        let call = match self.call_of(key.as_ref(), cost) {
            Ok(call) => call,
            Err(e) => return Checking::Done(answer(Err(e), self.fails_closed())),
        };
        let limiter = self.clone();
        Checking::Pending(Box::pin(async move {
            let mut verdict = limiter.check_call(&call).await;
            let taken = verdict_taken(&mut verdict);
            with_ticket(answer(verdict, limiter.fails_closed()), taken, call.keys)
        }))
    }

    /// One script call on the admission's key (see the `settle` module); Redis
    /// not answering in time leaves the estimate standing.
    fn settle_ticket(&self, ticket: Ticket, real: u64) -> Option<Checking> {
        let taken = taken_of(ticket)?;
        let limiter = self.clone();
        Some(settled_by(async move { limiter.settle(taken, real).await }))
    }

    /// Deletes the admission's key in Redis (a login that succeeded): full again.
    fn forget(&self, ticket: Ticket) -> Option<Checking> {
        let taken = taken_of(ticket)?;
        let limiter = self.clone();
        Some(Checking::Pending(Box::pin(async move {
            forgotten(&limiter, taken).await
        })))
    }

    fn standing(&self, key: Option<K>) -> Checking {
        let call = match self.call_of(key.as_ref(), 0) {
            Ok(call) => call,
            Err(e) => return Checking::Done(answer(Err(e), false)),
        };
        let limiter = self.clone();
        Checking::Pending(Box::pin(async move {
            answer(limiter.peek_call(&call).await, false)
        }))
    }

    fn is_remote(&self) -> bool {
        true
    }

    fn capacity(&self) -> Option<u64> {
        Some(self.capacity())
    }

    fn batch(&self) -> Option<&dyn Batch> {
        let (_, carries_several) = self.channel();
        carries_several.then_some(self as &dyn Batch)
    }

    fn prepare(&self, key: Option<K>, cost: u64) -> Prepare {
        let call = match self.call_of(key.as_ref(), cost) {
            Ok(call) => call,
            Err(e) => return Prepare::Answered(answer(Err(e), false)),
        };
        match Part::new(self, call) {
            Ok(part) => Prepare::Ready(Prepared(Box::new(part))),
            Err(remembered) => Prepare::Answered(answer(Ok(remembered), false)),
        }
    }
}

impl RedisLimiter {
    /// The call for `cost` units of `key` (written straight into its Redis key), or
    /// of the shared no-key bucket.
    fn call_of<K: StoreKey>(
        &self,
        key: Option<&K>,
        cost: u64,
    ) -> Result<crate::call::Call, RedisCheckError> {
        match key {
            Some(key) => self.call_writing(|out| key.write_key(out), cost),
            None => self.anonymous_call(cost),
        }
    }
}

impl Batch for RedisLimiter {
    fn channel(&self) -> usize {
        self.channel().0
    }

    fn send(&self, checks: Vec<Prepared>) -> BatchPending {
        let parts: Option<Vec<Part>> = checks
            .into_iter()
            .map(|p| p.0.downcast::<Part>().ok().map(|part| *part))
            .collect();
        Box::pin(async move {
            match parts {
                Some(parts) => {
                    let closed: Vec<bool> =
                        parts.iter().map(|p| p.limiter.fails_closed()).collect();
                    let (verdicts, calls) = check_parts(parts).await;
                    verdicts
                        .into_iter()
                        .zip(closed)
                        .zip(calls)
                        .map(|((mut v, c), call)| {
                            let taken = verdict_taken(&mut v);
                            with_ticket(answer(v, c), taken, call.keys)
                        })
                        .collect()
                }
                None => vec![Err(StoreError::Faulty(
                    "a batch for Redis carried another store's check".into(),
                ))],
            }
        })
    }
}

/// A leased limit: units left in this instance's lease are spent at once (no I/O,
/// [`Source::Lease`]); leasing a new batch is a round trip.
impl<K: StoreKey + Send + 'static> Store<K> for LeasedLimiter {
    fn check_key(&self, key: Option<K>, cost: u64) -> Checking {
        // The shared no-key bucket is not leased: it is checked in Redis itself.
        let Some(key) = key else {
            return Store::<K>::check_key(self.limiter(), None, cost);
        };
        // The key's text in a buffer this thread reuses: a check its live lease
        // answers allocates only its ticket.
        let spent = KEY_TEXT.with(|buffer| match buffer.try_borrow_mut() {
            Ok(mut text) => {
                text.clear();
                key.write_key(&mut text);
                self.spend_from_lease(&text, cost)
            }
            Err(_) => self.spend_from_lease(&text_of(&key), cost),
        });
        if let Some(mut spent) = spent {
            let taken = spent.taken.take();
            return Checking::Done(settleable(answer(Ok(spent), false), taken));
        }
        let text = text_of(&key);
        let leased = self.clone();
        Checking::Pending(Box::pin(async move {
            let closed = leased.limiter().fails_closed();
            let mut verdict = leased.check(&text, cost).await;
            let taken = verdict_taken(&mut verdict);
            settleable(answer(verdict, closed), taken)
        }))
    }

    /// In this instance's lease while it lives (no round trip), or in Redis (see
    /// [`LeasedLimiter::settle`]).
    fn settle_ticket(&self, ticket: Ticket, real: u64) -> Option<Checking> {
        let taken = taken_of(ticket)?;
        let leased = self.clone();
        Some(settled_by(async move { leased.settle(taken, real).await }))
    }

    /// Deletes the key in Redis and this instance's lease of it.
    fn forget(&self, ticket: Ticket) -> Option<Checking> {
        let taken = taken_of(ticket)?;
        let leased = self.clone();
        let full = self.limiter().algorithm().capacity();
        Some(Checking::Pending(Box::pin(async move {
            let key = match &taken.lease {
                Some(lease) => &lease.key,
                // Not from a lease: the Redis key itself.
                None => return forgotten(leased.limiter(), taken).await,
            };
            match leased.reset(key).await {
                Ok(()) => Ok(Checked::new(
                    portero::Decision::admitted(full, full, 0),
                    Source::Redis,
                )),
                Err(e) => Err(StoreError::Faulty(Box::new(e))),
            }
        })))
    }

    /// How the key stands in the shared store (not in this instance's lease).
    fn standing(&self, key: Option<K>) -> Checking {
        Store::<K>::standing(self.limiter(), key)
    }

    fn capacity(&self) -> Option<u64> {
        Store::<K>::capacity(self.limiter())
    }

    fn is_remote(&self) -> bool {
        true
    }
}

thread_local! {
    static KEY_TEXT: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// The text a key is stored under.
fn text_of<K: StoreKey>(key: &K) -> String {
    let mut text = String::new();
    key.write_key(&mut text);
    text
}

/// What a Redis admission's ticket holds: what it took, on which keys. A ticket
/// cloned settles at most once: only the last holder can take the `Taken` out.
struct Held(Taken);

/// The `Taken` a ticket holds, if this is the last holder of it.
fn taken_of(ticket: Ticket) -> Option<Taken> {
    last_holder(ticket.held?.0)
}

/// The `Taken` in `held`, if this is its last holder.
fn last_holder(held: Arc<dyn core::any::Any + Send + Sync>) -> Option<Taken> {
    let held = held.downcast::<Held>().ok()?;
    Arc::try_unwrap(held).ok().map(|Held(taken)| taken)
}

/// The settlement `settling` as the pipeline reads it: Redis not answering in time
/// leaves the estimate standing.
fn settled_by(
    settling: impl core::future::Future<Output = Result<Option<portero::Decision>, RedisCheckError>>
        + Send
        + 'static,
) -> Checking {
    Checking::Pending(Box::pin(async move {
        match settling.await {
            Ok(Some(decision)) => Ok(Checked::new(decision, Source::Redis)),
            Ok(None) => Err(StoreError::Unavailable {
                retry_after_nanos: None,
                source: Source::Redis,
            }),
            Err(e) => Err(StoreError::Faulty(Box::new(e))),
        }
    }))
}

/// Deletes the Redis keys `taken` names: the key is full again.
async fn forgotten(limiter: &RedisLimiter, taken: Taken) -> Result<Checked, StoreError> {
    let algorithm = taken.algorithm;
    match limiter.delete(&taken.keys, &algorithm).await {
        Ok(()) => {
            let full = algorithm.capacity();
            let decision = portero::Decision::admitted(full, full, 0);
            Ok(Checked::new(decision, Source::Redis))
        }
        Err(e) => Err(StoreError::Faulty(Box::new(e))),
    }
}

/// `checked` with a ticket that settles what the admission took (if it took any: in
/// Redis, or from a lease). A refund ticket it is not (a Redis stack is all or none),
/// so its fingerprint and plan mean nothing. The admission itself (its cost, its lease
/// or keys) is held once: a ticket cloned or edited settles it at most once, at what
/// it took.
fn settleable(
    checked: Result<Checked, StoreError>,
    taken: Option<Taken>,
) -> Result<Checked, StoreError> {
    let mut checked = checked?;
    let Some(taken) = taken else {
        return Ok(checked);
    };
    let admission = portero::Admission::new(taken.at_us.saturating_mul(1_000), taken.cost);
    checked.ticket = Some(Ticket {
        fingerprint: portero::Fingerprint::from_bits(0),
        admission,
        plan: 0,
        held: Some(portero_http::Held(Arc::new(Held(taken)))),
    });
    Ok(checked)
}

fn verdict_taken(verdict: &mut Result<Verdict, RedisCheckError>) -> Option<Taken> {
    verdict.as_mut().ok().and_then(|v| v.taken.take())
}

/// [`settleable`], the admission's keys those of the call it was checked by.
fn with_ticket(
    checked: Result<Checked, StoreError>,
    taken: Option<Taken>,
    keys: [String; 2],
) -> Result<Checked, StoreError> {
    let taken = taken.map(|mut taken| {
        taken.keys = keys;
        taken
    });
    settleable(checked, taken)
}

/// A Redis verdict as the pipeline reads it; `closed`: the limiter fails closed, so
/// a refusal its outage policy gave decided nothing ([`Source::Unavailable`], answered
/// as an outage).
pub(crate) fn answer(
    verdict: Result<Verdict, RedisCheckError>,
    closed: bool,
) -> Result<Checked, StoreError> {
    match verdict {
        Ok(v) if closed && v.served_by == ServedBy::Fallback && !v.decision.is_allowed() => {
            Ok(Checked::new(v.decision, Source::Unavailable))
        }
        Ok(v) => Ok(Checked::new(v.decision, source_of(v.served_by))),
        Err(RedisCheckError::Check(_)) => Err(StoreError::CostAboveCapacity),
        Err(RedisCheckError::LocalTableFull { .. }) => Err(StoreError::Unavailable {
            retry_after_nanos: Some(portero::DENY_FOR_NANOS),
            source: Source::Fallback,
        }),
        Err(e) => Err(StoreError::Faulty(Box::new(e))),
    }
}

fn source_of(served_by: ServedBy) -> Source {
    match served_by {
        ServedBy::Redis => Source::Redis,
        ServedBy::Fallback => Source::Fallback,
        ServedBy::Cache => Source::Cache,
        ServedBy::Lease => Source::Lease,
    }
}
