//! The insert locks of a keyed table: one spin lock per bucket.
//!
//! Invariant: an insert holds both of its key's buckets' locks, taken in index order
//! (so two inserts can never wait on each other in a cycle) and released together on
//! drop. Only inserts, evictions and idle replacements take them: checks of existing
//! keys never wait.

use crate::sync::{SpinGuard, SpinLock};

/// Both buckets' locks, held until dropped.
pub(crate) struct BucketLocks<'a> {
    _first: SpinGuard<'a>,
    _second: SpinGuard<'a>,
}

impl<'a> BucketLocks<'a> {
    /// Takes the locks of buckets `b` (two distinct indices) in index order.
    pub(crate) fn acquire(locks: &'a [SpinLock], b: [usize; 2]) -> Self {
        let (low, high) = (b[0].min(b[1]), b[0].max(b[1]));
        let first = locks[low].lock();
        Self {
            _first: first,
            _second: locks[high].lock(),
        }
    }
}
