//! A cap on one key's requests in flight: what bounds a settling limit's overshoot.
//!
//! A limit settled after the response (`settle`, `settle_by_usage`) takes each
//! request's estimate at the door and its real cost at the end; while requests are
//! in flight only their estimates are counted, so a key sending many at once with a
//! low estimate spends far past its quota before any settles (20 requests estimated
//! at 1 spent 60,000 tokens in under a second on a key of 10,000 a minute).
//!
//! Invariant: at most `most` admissions of one key hold a slot at once. A slot is
//! taken before the wrapped store is asked and is held by the admission's ticket
//! until it is settled, refunded, forgotten or dropped (a cancelled request, a
//! stream that ended); a check that finds every slot of its key held is refused
//! without asking the wrapped store (nothing is taken). Hence the bound: with at most
//! `n` requests of a key in flight, each using at most `m` units more than its
//! estimate, the key's usage runs past what its limit admits by at most `n·m` — the
//! settled excess of the requests in flight, which later requests then wait out as
//! debt. The slots count only where tickets live until the response ends: for a limit
//! that does not settle, a ticket (and its slot) goes when the request is admitted.

use core::fmt;
use core::hash::Hash;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use portero::keyed::RandomState;
use portero::Decision;

use super::store::{Checked, Checking, Held, Source, Store, StoreError, Ticket};

/// How long a client refused for having every slot held is told to wait: a request
/// in flight usually ends sooner, and the wait is not a quota's.
pub const IN_FLIGHT_RETRY_NANOS: u64 = 1_000_000_000;

/// A store whose keys may have at most `most` admitted requests in flight: wrap the
/// store of a limit that settles after the response.
///
/// ```
/// use std::sync::Arc;
/// use portero::{Gcra, KeyedLimiter, Quota};
/// use portero_http::{keys, InFlight, Limit, LimitLayer, Policy};
///
/// // 10,000 tokens a minute per API key, each call estimated at 500 and settled at
/// // what it used; at most 4 calls of a key at once, so a key can run past its
/// // budget by at most 4 × (the largest call's tokens − 500).
/// let q = Quota::per_minute(10_000)?;
/// let table = Arc::new(KeyedLimiter::new(Gcra::new(q), 100_000));
/// let key = keys::header::<String>(http::HeaderName::from_static("x-api-key"));
/// let tokens = Limit::new(InFlight::new(table, 4)?, Policy::for_quota("tokens", &q)?, key)
///     .cost(|_, _, _| 500)
///     .settle(|head| head.units("x-usage-tokens"));
/// let layer = LimitLayer::new(tokens);
/// # let _ = layer;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct InFlight<St> {
    store: St,
    most: u32,
    slots: Slots,
    hasher: RandomState,
}

/// The slots held per key (a key's fingerprint; present only while it holds some).
type Slots = Arc<Mutex<HashMap<u64, u32>>>;

/// A cap of no requests at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoSlots;

impl fmt::Display for NoSlots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key needs at least one request in flight")
    }
}

impl std::error::Error for NoSlots {}

impl<St> InFlight<St> {
    /// `store`, each key with at most `most` admitted requests in flight (at least 1).
    pub fn new(store: St, most: u32) -> Result<Self, NoSlots> {
        if most == 0 {
            return Err(NoSlots);
        }
        Ok(Self {
            store,
            most,
            slots: Arc::default(),
            hasher: RandomState::new(),
        })
    }

    /// The store it wraps.
    pub fn inner(&self) -> &St {
        &self.store
    }

    /// A key's requests in flight now.
    pub fn in_flight<K: Hash>(&self, key: Option<&K>) -> u32 {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.get(&self.fingerprint(key)).copied().unwrap_or(0)
    }

    fn fingerprint<K: Hash>(&self, key: Option<&K>) -> u64 {
        // The shared no-key bucket: one name no hashed key is meant to take (and if
        // one did, it would only share its slots).
        key.map_or(0, |k| self.hasher.hash_one(k) | 1)
    }

    /// A slot for `key`, if one is free.
    fn take(&self, key: u64) -> Option<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let held = slots.entry(key).or_insert(0);
        if *held >= self.most {
            return None;
        }
        *held += 1;
        Some(Slot {
            slots: self.slots.clone(),
            key,
        })
    }
}

impl<St> fmt::Debug for InFlight<St> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InFlight")
            .field("most", &self.most)
            .finish_non_exhaustive()
    }
}

/// One request's slot, given back when dropped.
struct Slot {
    slots: Slots,
    key: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = slots.get_mut(&self.key) {
            *held -= 1;
            if *held == 0 {
                slots.remove(&self.key);
            }
        }
    }
}

/// What an admission's ticket holds here: the wrapped store's own, and the slot.
struct Holding {
    // The wrapped store's own, moved back to it whole when the ticket is given back: a
    // store that settles a ticket once by owning it alone (Redis's) must not find a
    // second reference here.
    inner: std::sync::Mutex<Option<Held>>,
    _slot: Slot,
}

/// `answer` with `slot` held by its ticket (given back at once when nothing was taken).
fn holding(answer: Result<Checked, StoreError>, slot: Slot) -> Result<Checked, StoreError> {
    let mut checked = answer?;
    if let Some(ticket) = checked.ticket.as_mut() {
        let inner = std::sync::Mutex::new(ticket.held.take());
        ticket.held = Some(Held(Arc::new(Holding { inner, _slot: slot })));
    }
    Ok(checked)
}

/// `ticket` as the wrapped store made it, and the slot it held (dropped by the caller
/// once the wrapped store is done with the ticket).
fn unwrapped(mut ticket: Ticket) -> (Ticket, Option<Arc<Holding>>) {
    let holding = ticket
        .held
        .take()
        .and_then(|h| h.0.downcast::<Holding>().ok());
    ticket.held = holding
        .as_ref()
        .and_then(|h| h.inner.lock().unwrap_or_else(|e| e.into_inner()).take());
    (ticket, holding)
}

impl<K, St> Store<K> for InFlight<St>
where
    K: Hash + Send + Sync + 'static,
    St: Store<K>,
{
    fn check_key(&self, key: Option<K>, cost: u64) -> Checking {
        let Some(slot) = self.take(self.fingerprint(key.as_ref())) else {
            let capacity = self.store.capacity().unwrap_or(0);
            let decision =
                Decision::rejected(capacity, 0, IN_FLIGHT_RETRY_NANOS, IN_FLIGHT_RETRY_NANOS);
            return Checking::Done(Ok(Checked {
                plan: self.store.plan_of(key.as_ref()),
                ..Checked::new(decision, Source::Memory)
            }));
        };
        match self.store.check_key(key, cost) {
            Checking::Done(answer) => Checking::Done(holding(answer, slot)),
            Checking::Pending(pending) => {
                Checking::Pending(Box::pin(async move { holding(pending.await, slot) }))
            }
        }
    }

    fn ask_without_taking(&self, key: Option<K>, cost: u64) -> Option<Result<Checked, StoreError>> {
        if self.in_flight(key.as_ref()) >= self.most {
            let capacity = self.store.capacity().unwrap_or(0);
            let decision =
                Decision::rejected(capacity, 0, IN_FLIGHT_RETRY_NANOS, IN_FLIGHT_RETRY_NANOS);
            return Some(Ok(Checked {
                plan: self.store.plan_of(key.as_ref()),
                ..Checked::new(decision, Source::Memory)
            }));
        }
        self.store.ask_without_taking(key, cost)
    }

    fn standing(&self, key: Option<K>) -> Checking {
        self.store.standing(key)
    }

    fn refund_ticket(&self, ticket: Ticket) -> Option<Decision> {
        let (ticket, _slot) = unwrapped(ticket);
        self.store.refund_ticket(ticket)
    }

    fn settle_ticket(&self, ticket: Ticket, real: u64) -> Option<Checking> {
        let (ticket, _slot) = unwrapped(ticket);
        self.store.settle_ticket(ticket, real)
    }

    fn forget(&self, ticket: Ticket) -> Option<Checking> {
        let (ticket, _slot) = unwrapped(ticket);
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
