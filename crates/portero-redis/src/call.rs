//! What one limit asks of the script ([`Call`]), what the script is asked to do
//! ([`Mode`]), what it answers ([`Decided`]), and what an admission took, to settle
//! it later ([`Taken`]).

use core::ops::Range;

use portero::Decision;

use crate::algorithm::RedisAlgorithm;

/// One limit as the script sees it: its algorithm, its two keys, its cost.
pub(crate) struct Call {
    pub(crate) algorithm: RedisAlgorithm,
    pub(crate) keys: [String; 2],
    pub(crate) cost: u64,
    /// Where the user key's text lies in `keys[0]`, for the outage policy (`None`:
    /// the shared no-key bucket).
    pub(crate) user: Option<Range<usize>>,
}

impl Call {
    /// The user key's text (`None`: the shared no-key bucket).
    pub(crate) fn user_key(&self) -> Option<&str> {
        self.keys[0].get(self.user.clone()?)
    }
}

/// One lease as the admissions it answered know it: a settlement gives units back
/// only to the lease whose tag is this very one (`Arc::ptr_eq`), not to one leased
/// after it ran out or after a reset.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct LeaseTag {
    /// The user key it was leased for.
    pub(crate) key: String,
    /// The units Redis granted it: what it never holds more than.
    pub(crate) granted: u64,
    /// The Redis keys and algorithm it was leased from: where what an admission of it
    /// owes above its estimate is debited, whichever limiter settles it.
    pub(crate) keys: [String; 2],
    pub(crate) algorithm: RedisAlgorithm,
}

impl LeaseTag {
    pub(crate) fn new(key: &str, granted: u64, call: &Call) -> Self {
        Self {
            key: key.to_owned(),
            granted,
            keys: call.keys.clone(),
            algorithm: call.algorithm,
        }
    }
}

/// What the script decided, per limit.
pub(crate) type Decided = Vec<Limited>;

/// What a settlement finds an admission by in Redis (see `lua/algorithms.lua`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Mark {
    /// The TAT it left, its window's start or index, its log entry's sequence.
    pub(crate) place: u64,
    /// The key's refund ledger before it wrote (GCRA; 0 elsewhere): a settlement
    /// gives back only what other give-backs since cannot have taken.
    pub(crate) noted: u64,
    /// When the key it wrote was created (GCRA, the sliding counter; 0 elsewhere):
    /// nothing goes back to a later life of the key.
    pub(crate) generation: u64,
}

/// What the script decided for one limit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limited {
    /// The decision in the limit's own terms.
    pub(crate) decision: Decision,
    /// The units it took.
    pub(crate) taken: u64,
    /// What a settlement finds the admission by (see `lua/algorithms.lua`).
    pub(crate) mark: Mark,
    /// When the script decided, on Redis's clock (µs).
    pub(crate) at_us: u64,
}

/// What the script is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Decide every limit, charge all if all admit.
    Check = 0,
    /// Decide, charge nothing.
    Peek = 1,
    /// One limit: take the most units that fit, up to the cost.
    Lease = 2,
    /// One limit: move an admission from its estimate to its real cost.
    Settle = 3,
    /// One limit: its cost charged now, past the limit (a lease's units settled above
    /// their estimate).
    Debit = 4,
}

/// What an admission took in Redis, to settle it at its real cost later
/// ([`RedisLimiter::settle`](crate::RedisLimiter::settle)): the check's [`Verdict::taken`](crate::Verdict::taken).
/// It names the admission's own Redis keys, and a settlement consumes it: neither
/// `Copy` nor `Clone`, so one admission is settled at most once (twice would give
/// its units back twice), and only on its own key:
///
/// ```compile_fail,E0382
/// # async fn twice(limiter: portero_redis::RedisLimiter) -> Result<(), Box<dyn std::error::Error>> {
/// let taken = limiter.check("k", 30).await?.taken.unwrap();
/// limiter.settle(taken, 0).await?;
/// limiter.settle(taken, 0).await?; // error: use of moved value
/// # Ok(()) }
/// ```
#[derive(Debug, PartialEq, Eq)]
pub struct Taken {
    pub(crate) algorithm: RedisAlgorithm,
    pub(crate) cost: u64,
    /// The admission's time on Redis's clock (µs).
    pub(crate) at_us: u64,
    /// What the script finds the admission by (its TAT, window, log entry).
    pub(crate) mark: Mark,
    /// The Redis keys it was checked on (filled by whoever owned the call).
    pub(crate) keys: [String; 2],
    /// The lease it was spent from, for an admission a lease answered (then `keys`,
    /// `mark` and `at_us` are empty: the units were charged when leased).
    pub(crate) lease: Option<std::sync::Arc<LeaseTag>>,
}

impl Taken {
    /// The units the admission took (its estimate).
    pub fn cost(&self) -> u64 {
        self.cost
    }

    /// What an admission `lease` answered took (nothing to find in Redis: its units
    /// were charged when leased).
    pub(crate) fn from_lease(
        algorithm: RedisAlgorithm,
        cost: u64,
        lease: std::sync::Arc<LeaseTag>,
    ) -> Self {
        Self {
            algorithm,
            cost,
            at_us: 0,
            mark: Mark::default(),
            keys: Default::default(),
            lease: Some(lease),
        }
    }

    /// The call a settlement runs on: the admission's keys and algorithm.
    pub(crate) fn call(&mut self) -> Call {
        Call {
            algorithm: self.algorithm,
            keys: core::mem::take(&mut self.keys),
            cost: self.cost,
            user: None,
        }
    }
}

/// What the admission that Redis decided as `limited` took, if it can be settled (it
/// took units), under `algorithm`; its keys are filled by the call's owner.
pub(crate) fn taken_by(algorithm: RedisAlgorithm, limited: &Limited) -> Option<Taken> {
    (limited.taken > 0).then(|| Taken {
        algorithm,
        cost: limited.taken,
        at_us: limited.at_us,
        mark: limited.mark,
        keys: Default::default(),
        lease: None,
    })
}
