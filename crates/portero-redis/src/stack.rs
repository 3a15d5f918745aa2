//! Several limits on one request, in one script call, all or none.
//!
//! The script decides every limit before it charges any, and charges only if all
//! admit, so a request refused by its tenant's limit costs nothing in its user's
//! limit (and the other way round) — one round trip instead of one per limit, and no
//! refunds to get wrong.
//!
//! # Keys, and Redis Cluster
//!
//! By default each limit's key is the one [`RedisLimiter::key_for`] gives its user key,
//! hash-tagged by that user key. One Redis server holds them all. A Cluster runs a
//! script only on keys of one slot, so there every limit of a stack must share a
//! hash tag: [`StackedLimit::in_slot_of`] puts a limit's key in the slot of a tag of
//! your choice (the tenant, say, for a user limit and a tenant limit). A truly global
//! limit cannot share a slot with every tenant: in a Cluster, check it in its own
//! call (it lives on one node), or give each tenant's slot its own share of it.

use portero::Decision;

use crate::algorithm::{redis_keys, with_second_key, RedisAlgorithm};
use crate::call::Call;
use crate::outcome::{RedisCheckError, ServedBy};

/// One limit of a stack: an algorithm and quota, the user key it counts, the cost.
#[derive(Debug, Clone)]
pub struct StackedLimit<'a> {
    /// The algorithm and its quota.
    pub algorithm: RedisAlgorithm,
    /// The key this limit counts (a user, a tenant, `"*"` for global).
    pub key: &'a str,
    /// Units this request costs in this limit.
    pub cost: u64,
    /// The hash tag the key is stored under (default: the key itself).
    pub slot: Option<&'a str>,
}

impl<'a> StackedLimit<'a> {
    /// `cost` units of `key` under `algorithm`, stored as [`RedisLimiter::key_for`]
    /// would store it.
    ///
    /// [`RedisLimiter::key_for`]: crate::RedisLimiter::key_for
    pub fn new(algorithm: RedisAlgorithm, key: &'a str, cost: u64) -> Self {
        Self {
            algorithm,
            key,
            cost,
            slot: None,
        }
    }

    /// Stores this limit's key in the Cluster slot of `tag`:
    /// `prefix{length:tag}:length:key:algorithm:quota`. A key stored this way is not
    /// the key a plain [`check`](crate::RedisLimiter::check) of `key` uses.
    pub fn in_slot_of(mut self, tag: &'a str) -> Self {
        self.slot = Some(tag);
        self
    }

    pub(crate) fn call(&self, prefix: &str) -> Result<Call, RedisCheckError> {
        let capacity = self.algorithm.capacity();
        if self.cost > capacity {
            return Err(portero::CheckError::CostExceedsCapacity {
                cost: self.cost,
                capacity,
            }
            .into());
        }
        let keys = match self.slot {
            None => redis_keys(prefix, self.key, &self.algorithm),
            Some(tag) => {
                let main = format!(
                    "{prefix}{{{}:{tag}}}:{}:{}:{}",
                    tag.len(),
                    self.key.len(),
                    self.key,
                    self.algorithm.key_suffix()
                );
                with_second_key(main, &self.algorithm)
            }
        };
        Ok(Call {
            algorithm: self.algorithm,
            keys,
            cost: self.cost,
            // A stack's outage answer is its first limit's, by its key.
            user: None,
        })
    }
}

/// A stack's answer: every limit's decision, and which refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackVerdict {
    /// Each limit's decision, in the order given (when one refuses, none was
    /// charged, and each that would have admitted says how it stands: its
    /// remaining units as before this check).
    pub decisions: Vec<Decision>,
    /// The first limit that refused, if any.
    pub rejected_by: Option<usize>,
    /// Redis, or the outage policy.
    pub served_by: ServedBy,
}

impl StackVerdict {
    pub(crate) fn new(decisions: Vec<Decision>, served_by: ServedBy) -> Self {
        let rejected_by = decisions.iter().position(|d| !d.is_allowed());
        Self {
            decisions,
            rejected_by,
            served_by,
        }
    }

    /// Whether every limit admitted (and all were charged).
    pub fn is_allowed(&self) -> bool {
        self.rejected_by.is_none()
    }

    /// The longest wait any refusing limit asks for (zero when admitted).
    pub fn retry_after_nanos(&self) -> u64 {
        self.decisions
            .iter()
            .filter(|d| !d.is_allowed())
            .map(Decision::retry_after_nanos)
            .max()
            .unwrap_or(0)
    }
}

/// The same Redis key twice in one stack would be decided once and charged twice:
/// refused as a usage error before Redis is asked.
pub(crate) fn refuse_repeated_keys(calls: &[Call]) -> Result<(), RedisCheckError> {
    for (i, a) in calls.iter().enumerate() {
        if calls[..i].iter().any(|b| b.keys[0] == a.keys[0]) {
            return Err(RedisCheckError::RepeatedKey {
                key: a.keys[0].clone(),
            });
        }
    }
    Ok(())
}
