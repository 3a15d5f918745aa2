//! Fair shedding per tenant: when a shared service nears capacity, refuse the tenants
//! above their fair share first, so one noisy tenant cannot cost the small ones their
//! requests.
//!
//! With random shedding every tenant loses the same fraction: a tenant sending 170 of
//! 200 requests per second to a service for 100 makes 30 tenants sending 1 per second
//! lose about half of theirs. Max-min fairness serves every tenant that asks for less
//! than an equal share in full and gives the rest to the one asking more.
//!
//! # Rule and invariant
//!
//! `capacity` requests in flight at most. Below `capacity − reserve` anyone is
//! admitted. In the last `reserve` slots a tenant is admitted only while it has fewer
//! requests in flight than some other tenant: the largest user never gets the reserve.
//! So no tenant ever holds more than `capacity − reserve`, and near capacity no tenant
//! is refused while one using more is admitted — max-min fairness over requests in
//! flight: a tenant asking for less than an equal split is served in full, the one
//! asking for more takes the cut. (A split by the number of tenants would not do: 30
//! tenants sending 1 per second with 1 s requests often have 3 in flight each, above
//! an equal split of 100 slots, while the noisy one has 60.)
//!
//! Tenant ids must come from a verified credential, not from the client's own words:
//! a fresh id always has nothing in flight, so a client inventing ids would be
//! admitted to the reserve on every request (see
//! [`LoadShedLayer::by_tenant`](crate::LoadShedLayer::by_tenant)).
//!
//! Counts are kept only for tenants with work in flight, so the table never holds more
//! than `capacity` tenants, however many keys a client invents; keys are hashed with a
//! per-process random seed. Deciding in the reserve scans the tenants in flight
//! (at most `capacity`) under the lock.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The one tenant of every request without a verified tenant (a name no `Hash` of a
/// caller's key is meant to equal; even if one did, it only shares their counts).
const ANONYMOUS: &str = "\u{0}portero:anonymous";

/// In-flight counts per tenant and the fair-share rule; see the [module docs](self).
///
/// ```
/// use std::sync::Arc;
/// use portero_http::fair::FairShare;
///
/// let share = Arc::new(FairShare::new(10, 2)?);
/// let noisy: Vec<_> = (0..8).map(|_| share.try_acquire(&"noisy").unwrap()).collect();
/// assert!(share.try_acquire(&"noisy").is_none()); // over its share near capacity
/// assert!(share.try_acquire(&"small").is_some()); // the reserve is for the others
/// # Ok::<(), portero_http::fair::FairShareError>(())
/// ```
#[derive(Debug)]
pub struct FairShare {
    capacity: u32,
    open_to_all: u32,
    state: Mutex<State>,
    hasher: RandomState,
}

#[derive(Debug, Default)]
struct State {
    total: u32,
    per_tenant: HashMap<u64, u32>,
}

/// Why a [`FairShare`] was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FairShareError;

impl std::fmt::Display for FairShareError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("fair share needs a capacity of at least 1 and a reserve below it")
    }
}

impl std::error::Error for FairShareError {}

/// One request in flight for a tenant; frees its slot when dropped.
#[derive(Debug)]
#[must_use = "the slot is freed as soon as the permit is dropped"]
pub struct FairPermit {
    share: Arc<FairShare>,
    tenant: u64,
}

impl FairShare {
    /// At most `capacity` in flight; the last `reserve` slots only for tenants below
    /// their fair share.
    pub fn new(capacity: u32, reserve: u32) -> Result<Self, FairShareError> {
        if capacity == 0 || reserve >= capacity {
            return Err(FairShareError);
        }
        Ok(Self {
            capacity,
            open_to_all: capacity - reserve,
            state: Mutex::default(),
            hasher: RandomState::new(),
        })
    }

    /// A slot for `tenant`, or `None`: the service is full, or it is nearly full and no
    /// other tenant has more in flight.
    pub fn try_acquire<K: Hash + ?Sized>(self: &Arc<Self>, tenant: &K) -> Option<FairPermit> {
        let tenant = self.hasher.hash_one(tenant);
        let mut state = self.lock();
        let mine = state.per_tenant.get(&tenant).copied().unwrap_or(0);
        let admit = state.total < self.open_to_all
            || (state.total < self.capacity
                && state.per_tenant.values().any(|&other| other > mine));
        if !admit {
            return None;
        }
        state.total += 1;
        *state.per_tenant.entry(tenant).or_insert(0) += 1;
        Some(FairPermit {
            share: self.clone(),
            tenant,
        })
    }

    /// A slot for a request without a verified tenant: only below
    /// `capacity − reserve`, never in the reserve, which is for verified tenants
    /// below their share. All such requests count as one tenant.
    pub fn try_acquire_anonymous(self: &Arc<Self>) -> Option<FairPermit> {
        let tenant = self.hasher.hash_one(ANONYMOUS);
        let mut state = self.lock();
        if state.total >= self.open_to_all {
            return None;
        }
        state.total += 1;
        *state.per_tenant.entry(tenant).or_insert(0) += 1;
        Some(FairPermit {
            share: self.clone(),
            tenant,
        })
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> u32 {
        self.lock().total
    }

    /// Tenants with requests in flight now (never more than the capacity).
    pub fn active_tenants(&self) -> usize {
        self.lock().per_tenant.len()
    }

    // A panic while the lock is held cannot leave the counts half-updated (each
    // update is two increments or two decrements), so a poisoned lock is still usable.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for FairPermit {
    fn drop(&mut self) {
        let mut state = self.share.lock();
        state.total = state.total.saturating_sub(1);
        if let Some(n) = state.per_tenant.get_mut(&self.tenant) {
            *n -= 1;
            if *n == 0 {
                state.per_tenant.remove(&self.tenant);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heavy_tenant_stops_at_the_reserve_and_small_ones_use_it() {
        let share = Arc::new(FairShare::new(10, 3).unwrap());
        let heavy: Vec<_> = std::iter::from_fn(|| share.try_acquire("heavy")).collect();
        assert_eq!(heavy.len(), 7);
        let small: Vec<_> = (0..3)
            .map(|i| {
                share
                    .try_acquire(&format!("small-{i}"))
                    .expect("below its share")
            })
            .collect();
        assert!(share.try_acquire("late").is_none(), "full is full");
        assert_eq!(share.in_flight(), 10);
        drop(small);
        drop(heavy);
        assert_eq!((share.in_flight(), share.active_tenants()), (0, 0));
        assert_eq!(FairShare::new(0, 0).unwrap_err(), FairShareError);
        assert_eq!(FairShare::new(5, 5).unwrap_err(), FairShareError);
    }

    #[test]
    fn invented_keys_never_grow_the_table_past_the_capacity() {
        let share = Arc::new(FairShare::new(100, 10).unwrap());
        let mut held = Vec::new();
        for i in 0..100_000u32 {
            if let Some(p) = share.try_acquire(&i) {
                held.push(p);
            }
            if held.len() == 100 {
                held.clear();
            }
            assert!(share.active_tenants() <= 100);
        }
    }

    proptest::proptest! {
        /// Random acquires and releases over 6 tenants: never more than the capacity in
        /// flight, the open part open to all, and in the reserve a refusal only for a
        /// tenant that no other tenant exceeds (the largest takes the cut).
        #[test]
        fn the_rule_holds_for_any_sequence(
            capacity in 1u32..12,
            reserve_share in 0u32..100,
            ops in proptest::collection::vec((0u8..6, proptest::bool::ANY), 1..200),
        ) {
            let reserve = capacity * reserve_share / 100 % capacity;
            let share = Arc::new(FairShare::new(capacity, reserve).unwrap());
            let mut held: Vec<Vec<FairPermit>> = (0..6).map(|_| Vec::new()).collect();
            for (tenant, acquire) in ops {
                let t = usize::from(tenant);
                if !acquire {
                    held[t].pop();
                    continue;
                }
                let total: usize = held.iter().map(Vec::len).sum();
                let mine = held[t].len();
                let others_max = (0..6).filter(|&o| o != t).map(|o| held[o].len()).max().unwrap_or(0);
                let expect = total < (capacity - reserve) as usize
                    || (total < capacity as usize && others_max > mine);
                let got = share.try_acquire(&tenant);
                proptest::prop_assert_eq!(got.is_some(), expect);
                if let Some(p) = got {
                    held[t].push(p);
                }
                proptest::prop_assert!(share.in_flight() <= capacity);
            }
        }
    }
}
