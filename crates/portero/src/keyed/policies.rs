//! Per-endpoint policies: a table from operation to its own keyed limit.
//!
//! `POST /login` at 5 per minute per user, SMS sends counted in messages, cheap reads at
//! 1,000 per minute: one table, resolved without allocating on the hot path (a hash
//! lookup of the operation, then the keyed limiter's lock-free check).
//!
//! ```
//! use portero::{Gcra, ManualClock, Policies, Quota};
//! let policies = Policies::new()
//!     .with("POST /login", Gcra::new(Quota::per_minute(5)?), 100_000, ManualClock::new())
//!     .with("SMS", Gcra::new(Quota::per_hour(20)?), 100_000, ManualClock::new())
//!     .with("GET /items", Gcra::new(Quota::per_minute(1_000)?), 100_000, ManualClock::new());
//! for _ in 0..5 {
//!     assert!(policies.check_at(&"POST /login", &42u64, 0, 1)?.is_allowed());
//! }
//! assert!(!policies.check_at(&"POST /login", &42u64, 0, 1)?.is_allowed());
//! assert!(policies.check_at(&"GET /items", &42u64, 0, 1)?.is_allowed());
//! // An SMS to 3 recipients costs 3 messages.
//! assert_eq!(policies.check_at(&"SMS", &42u64, 0, 3)?.remaining(), 17);
//! assert!(policies.check_at(&"DELETE /", &42u64, 0, 1).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use core::hash::Hash;
use std::collections::HashMap;

use crate::algorithm::Algorithm;
use crate::clock::{Clock, DefaultClock};
use crate::decision::{Decision, KeyedError};
use crate::keyed::limiter::KeyedLimiter;

/// Operation → keyed limit. `O` names operations (`&'static str`, an enum…), `K` the
/// keys counted within each.
pub struct Policies<O, K: ?Sized, A: Copy, C = DefaultClock> {
    index: HashMap<O, usize, ahash::RandomState>,
    limiters: Vec<KeyedLimiter<K, A, C>>,
}

impl<O, K: ?Sized, A: Copy, C> core::fmt::Debug for Policies<O, K, A, C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Policies")
            .field("operations", &self.limiters.len())
            .finish_non_exhaustive()
    }
}

impl<O: Hash + Eq, K: Hash + ?Sized, A: Algorithm + Copy, C: Clock> Default
    for Policies<O, K, A, C>
{
    fn default() -> Self {
        Self::new()
    }
}

impl<O: Hash + Eq, K: Hash + ?Sized, A: Algorithm + Copy, C: Clock> Policies<O, K, A, C> {
    /// An empty table.
    pub fn new() -> Self {
        Self {
            index: HashMap::with_hasher(ahash::RandomState::new()),
            limiters: Vec::new(),
        }
    }

    /// Adds (or replaces) `operation`'s limit: `algorithm` per key, up to `max_keys`.
    pub fn with(mut self, operation: O, algorithm: A, max_keys: usize, clock: C) -> Self {
        let limiter = KeyedLimiter::with_clock(algorithm, max_keys, clock);
        match self.index.get(&operation) {
            Some(&i) => self.limiters[i] = limiter,
            None => {
                self.index.insert(operation, self.limiters.len());
                self.limiters.push(limiter);
            }
        }
        self
    }

    /// The keyed limiter behind `operation`, to reset keys or change its quota.
    pub fn get(&self, operation: &O) -> Option<&KeyedLimiter<K, A, C>> {
        self.index.get(operation).map(|&i| &self.limiters[i])
    }

    /// `cost` units of `operation` for `key`, now.
    pub fn check_n(&self, operation: &O, key: &K, cost: u64) -> Result<Decision, PolicyError> {
        Ok(self
            .get(operation)
            .ok_or(PolicyError::UnknownOperation)?
            .check_n(key, cost)?)
    }

    /// `cost` units of `operation` for `key` at `now`.
    pub fn check_at(
        &self,
        operation: &O,
        key: &K,
        now: u64,
        cost: u64,
    ) -> Result<Decision, PolicyError> {
        Ok(self
            .get(operation)
            .ok_or(PolicyError::UnknownOperation)?
            .check_at(key, now, cost)?)
    }
}

/// Why [`Policies`] could not decide a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PolicyError {
    /// No policy is configured for the operation.
    UnknownOperation,
    /// The operation's keyed limit could not decide (see [`KeyedError`]).
    Keyed(KeyedError),
}

impl From<KeyedError> for PolicyError {
    fn from(e: KeyedError) -> Self {
        Self::Keyed(e)
    }
}

impl core::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::UnknownOperation => f.write_str("no rate-limit policy for this operation"),
            Self::Keyed(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for PolicyError {}
