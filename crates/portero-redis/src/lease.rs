//! Leases: an instance borrows a batch of a key's units from Redis in one script call
//! and spends them locally, so a hot key costs one round trip per batch instead of
//! one per request.
//!
//! # Bound
//!
//! A unit is charged in Redis, atomically with every other instance's checks and
//! leases, when it is leased; here it is spent at most once, and only until its lease
//! expires (`lease_for`). So across all instances **never more is admitted than the
//! limit allows**, counted over any window lengthened by `lease_for` (a unit may be
//! spent up to `lease_for` after Redis counted it). Units leased and not spent are
//! never returned: they are lost when their lease expires or is replaced — at most one
//! batch per key per instance, an under-admission bounded by the outstanding leases.
//!
//! Pick leases for hot keys with a high limit (a tenant's 10,000 per minute across a
//! fleet): the saving is a factor of the batch. For small limits (logins, 5 per
//! minute) a batch would strand most of the limit on one instance: check each request.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use portero::Decision;

use crate::limiter::Mode;
use crate::{RedisCheckError, RedisLimiter, ServedBy, Verdict};

/// A [`RedisLimiter`] that leases up to `batch` units per key in one script call and
/// spends them locally. Never more than the limit across all instances (units are
/// charged in Redis when leased), counted over any window lengthened by `lease_for`;
/// at most one unspent batch per key and instance is lost, never over-admitted. Pick it
/// for hot keys with large limits.
#[derive(Debug)]
pub struct LeasedLimiter {
    limiter: RedisLimiter,
    batch: u64,
    lease_for: Duration,
    max_keys: usize,
    leases: Mutex<HashMap<String, Lease>>,
    // One lease request in flight at a time: concurrent requests for a key wait for
    // the batch instead of each leasing one (and stranding the rest).
    leasing: tokio::sync::Mutex<()>,
}

#[derive(Debug)]
struct Lease {
    left: u64,
    expires: Instant,
}

impl LeasedLimiter {
    /// Leases up to `batch` units at a time for each key, each lease spendable for
    /// `lease_for`, for at most `max_keys` keys at once (beyond that, keys are checked
    /// one request at a time). Combine with
    /// [`blocked_key_cache`](RedisLimiter::blocked_key_cache) so that a key with
    /// nothing left costs no round trip either.
    pub fn new(limiter: RedisLimiter, batch: u64, lease_for: Duration, max_keys: usize) -> Self {
        Self {
            limiter,
            batch: batch.max(1),
            lease_for,
            max_keys,
            leases: Mutex::new(HashMap::new()),
            leasing: tokio::sync::Mutex::new(()),
        }
    }

    /// Admits `cost` units of `key` from its local lease, or leases a new batch.
    pub async fn check(&self, key: &str, cost: u64) -> Result<Verdict, RedisCheckError> {
        if let Some(verdict) = self.spend_from_lease(key, cost) {
            return Ok(verdict);
        }
        if cost > self.batch || !self.room_for(key) {
            return self.limiter.check(key, cost).await;
        }
        let _leasing = self.leasing.lock().await;
        // Someone may have leased a batch while this request waited.
        if let Some(verdict) = self.spend_from_lease(key, cost) {
            return Ok(verdict);
        }
        let call = self.limiter.default_call(key, self.batch)?;
        if let Some(wait) = self.limiter.cached_refusal(&call.keys[0], cost) {
            let capacity = self.limiter.capacity();
            return Ok(Verdict {
                decision: Decision::rejected(capacity, 0, wait, wait),
                served_by: ServedBy::Cache,
            });
        }
        let sent = self.limiter.cache_now();
        let Some(decided) = self
            .limiter
            .run(std::slice::from_ref(&call), Mode::Lease, 0)
            .await?
        else {
            return self.limiter.check(key, cost).await; // Redis away: its policy decides
        };
        let (decision, taken) = decided[0];
        if taken == 0 {
            let retry = decision.retry_after_nanos();
            self.limiter.remember_refusal(&call.keys[0], 1, retry, sent);
            return Ok(Verdict {
                decision,
                served_by: ServedBy::Redis,
            });
        }
        let fits = taken >= cost;
        let left = if fits { taken - cost } else { taken };
        self.lock().insert(
            key.to_owned(),
            Lease {
                left,
                expires: Instant::now() + self.lease_for,
            },
        );
        let capacity = self.limiter.capacity();
        let decision = if fits {
            Decision::admitted(capacity, left, 0)
        } else {
            // Fewer units than this request needs were left: keep them for smaller
            // requests, refuse this one for the usual second.
            Decision::deny_for(capacity, portero::DENY_FOR_NANOS)
        };
        Ok(Verdict {
            decision,
            served_by: ServedBy::Redis,
        })
    }

    fn spend_from_lease(&self, key: &str, cost: u64) -> Option<Verdict> {
        let left = self.spend(key, cost)?;
        Some(Verdict {
            decision: Decision::admitted(self.limiter.capacity(), left, 0),
            served_by: ServedBy::Lease,
        })
    }

    /// Script calls this instance's limiter sent (leases, refusals, plain checks).
    pub fn round_trips(&self) -> u64 {
        self.limiter.round_trips()
    }

    /// Takes `cost` from `key`'s live lease; what is left, or `None`.
    fn spend(&self, key: &str, cost: u64) -> Option<u64> {
        let mut leases = self.lock();
        let lease = leases.get_mut(key)?;
        if lease.expires <= Instant::now() {
            leases.remove(key);
            return None;
        }
        lease.left = lease.left.checked_sub(cost)?;
        Some(lease.left)
    }

    /// Whether `key` may hold a lease (dropping expired ones when the map is full).
    fn room_for(&self, key: &str) -> bool {
        let mut leases = self.lock();
        if leases.len() < self.max_keys || leases.contains_key(key) {
            return true;
        }
        let now = Instant::now();
        leases.retain(|_, l| l.expires > now);
        leases.len() < self.max_keys
    }

    // Each update is one insert, removal or subtraction: a poisoned lock is still
    // consistent.
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Lease>> {
        self.leases.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
