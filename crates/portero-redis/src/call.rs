//! What one limit asks of the script ([`Call`]), what the script is asked to do
//! ([`Mode`]), and what it answers ([`Decided`]).

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

/// What the script decided, per limit.
pub(crate) type Decided = Vec<Limited>;

/// What the script decided for one limit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limited {
    /// The decision in the limit's own terms.
    pub(crate) decision: Decision,
    /// The units it took.
    pub(crate) taken: u64,
    /// What a settlement finds the admission by (see `lua/algorithms.lua`).
    pub(crate) mark: u64,
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
}
