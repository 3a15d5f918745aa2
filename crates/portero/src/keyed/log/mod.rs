//! An exact sliding log per key, in memory fixed at construction.
//!
//! [`KeyedLog`] is [`SlidingLog`](crate::algorithm::sliding_log::SlidingLog)'s decision for every key of a
//! bounded table: a request of `cost` units for a key at `t` is admitted iff the units
//! that key had admitted in `(t − W, t]`, plus `cost`, are at most `L`. An entry exactly
//! `W` old has expired. Only admitted units are recorded, so for every key **no span of
//! `W` ever holds more than `L` admitted units** (tested against a textbook model).
//!
//! # Why a lock
//!
//! A key's state here is up to `L` timestamps, not one word, so it cannot be published
//! with one compare-and-swap the way [`KeyedLimiter`](crate::keyed::limiter::KeyedLimiter) publishes
//! its keys; a lock-free log would need multi-word transactions. The table is instead
//! split into **shards by key hash, each behind one spin lock** (the crate's insert
//! lock, held for a binary search and a few stores), so keys in different shards never
//! wait on each other. A shard's fields are atomics accessed `Relaxed` *only* so the
//! crate needs neither `unsafe` nor `std`; the lock's acquire/release orders them.
//!
//! **Invariant:** every read and write of a shard's slots, index, entries and counters
//! (except the advisory key count read by [`len`](KeyedLog::len)) happens while that
//! shard's lock is held — the only way to reach them is through the lock guard's view
//! (`Locked`) — so each key's log changes as if one thread at a time decided on it.
//!
//! # Layout and bounds
//!
//! - **Bounded memory.** At most `max_keys` keys, each with a fixed ring of `L`
//!   timestamps (one 8-byte entry per admitted unit). `max_keys · L` may not exceed
//!   [`MAX_LOG_ENTRIES`] (2^24, 128 MiB of timestamps); a table that would is refused
//!   with [`KeyedLogError::TooManyEntries`]. The whole table is allocated at
//!   construction, at most `8·L + 56` bytes per key (the ring, a 24-byte slot and
//!   16–32 bytes of index), and never grows: [`table_bytes`](KeyedLog::table_bytes)
//!   is constant.
//! - **Shards.** A table of fewer than 2048 keys is one shard, so its key cap is
//!   exact. Larger tables have up to 16 shards of `max_keys / shards` keys each (at
//!   least 1024); a newcomer is refused when *its* shard is full, so under the random
//!   seed a large table starts refusing some newcomers at a few percent below
//!   `max_keys` — never above it.
//! - **Per key:** a ring of `L` entries, sorted, holding only units not yet known to
//!   have expired; the latest time the key has seen; its fingerprint. A shard finds a
//!   key through a linear-probing index at most half full.
//! - **Cost:** a check is a binary search of the ring (O(log L)) plus one store per
//!   admitted unit; retry-after is one read (the entry whose expiry frees enough).
//!   A cost of `n` writes `n` entries, so costs are bounded by `L` (a cost above `L`
//!   is [`CheckError::CostExceedsCapacity`] at once).
//!
//! # A full table
//!
//! A key whose log is entirely outside the window (every entry expired) carries no
//! information and may be dropped. When a newcomer finds its shard full, such keys are
//! reclaimed then (lazily; [`KeyedLog::sweep_at`] does it on demand); if none can be,
//! the newcomer gets [`KeyedError::KeyTableFull`] and the keys held keep their exact
//! logs. Each shard keeps a lower bound on the earliest time any of its logs can have
//! expired, so a flood of newcomers to a full shard is refused in O(1) each, and a
//! scan of the shard (O(keys per shard)) runs only once that time has come.
//!
//! # Time
//!
//! Times are nanoseconds up to [`MAX_TIME_NANOS`](crate::quota::MAX_TIME_NANOS) (later ones
//! are [`CheckError::TimeOutOfRange`], nothing consumed), windows up to
//! [`MAX_SPAN_NANOS`](crate::quota::MAX_SPAN_NANOS), so `t + W` never overflows. A time
//! earlier than the latest a key has seen is read as that latest time: nothing expires
//! early and each key's log stays sorted (never over-admits). A dropped key's latest
//! time is kept as its shard's floor, and every key a shard takes in starts there, so
//! reclaiming a key can never let its old entries and new ones share a window.
//! A check of cost 0 takes nothing and is answered as a peek (it moves no time).
//!
//! # Refunds
//!
//! An admission's [`Admission`] names the time its entries were recorded at (the
//! key's latest time when that was later than the check's `now`), read under the
//! shard's lock. [`refund`](KeyedLog::refund) removes up to its cost of entries
//! recorded at exactly that time: entries of one instant are interchangeable, so the
//! log left is the one the twin that never saw the request holds — nothing lost,
//! nothing invented, whatever other threads did in between.

use alloc::boxed::Box;
use alloc::collections::TryReserveError;
use alloc::vec::Vec;
use core::fmt;
use core::hash::Hash;
use core::marker::PhantomData;

use crossbeam_utils::CachePadded;

use crate::admission::{origin_of, Acquired, Admission, Settlement};
use crate::clock::{Clock, DefaultClock};
use crate::decision::check_range;
use crate::decision::{CheckError, Decision, KeyedError};
use crate::keyed::fingerprint::Fingerprint;
use crate::quota::Quota;
use crate::sync::Ordering;
use ahash::RandomState;

mod shard;
use shard::{get, Locked, Rule, Shard};

/// The most timestamps a [`KeyedLog`] may hold, `max_keys · limit`: 2^24 entries
/// (128 MiB of 8-byte timestamps).
pub const MAX_LOG_ENTRIES: u64 = 1 << 24;

/// The fingerprint of the bucket shared by requests without a key (the same as
/// [`KeyedLimiter`](crate::keyed::limiter::KeyedLimiter)'s).
const ANONYMOUS: u64 = u64::MAX;
/// The fewest keys a shard of a sharded table holds.
const SHARD_KEYS: usize = 1024;
/// The most shards a table is split into.
const MAX_SHARDS: usize = 16;

/// Why a [`KeyedLog`] could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyedLogError {
    /// `max_keys` was 0: no key could ever be admitted. (A limit of 0 cannot get this
    /// far: [`Quota`] refuses it with [`QuotaError::ZeroRate`](crate::quota::QuotaError::ZeroRate).)
    NoKeys,
    /// `max_keys · limit` exceeds [`MAX_LOG_ENTRIES`].
    TooManyEntries {
        /// The key cap asked for.
        max_keys: usize,
        /// The limit (timestamps per key).
        limit: u64,
    },
    /// The table could not be allocated.
    OutOfMemory,
}

impl fmt::Display for KeyedLogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoKeys => f.write_str("a keyed log needs room for at least one key"),
            Self::TooManyEntries { max_keys, limit } => write!(
                f,
                "{max_keys} keys x a limit of {limit} is more than the {MAX_LOG_ENTRIES} \
                 timestamps a keyed log may hold"
            ),
            Self::OutOfMemory => f.write_str("the keyed log's table could not be allocated"),
        }
    }
}

impl core::error::Error for KeyedLogError {}

impl From<TryReserveError> for KeyedLogError {
    fn from(_: TryReserveError) -> Self {
        Self::OutOfMemory
    }
}

/// An exact sliding-window log per key: at most `quota.limit()` units for each key in
/// any `quota.period()` (the burst is unused), for up to `max_keys` keys in memory
/// fixed at construction. See the [module](self) for the layout, the bounds and the
/// locking.
///
/// ```
/// use portero::{KeyedLog, ManualClock, Quota};
/// const S: u64 = 1_000_000_000;
/// // 5 login attempts per user in any 60 s, for up to 10,000 users.
/// let logins = KeyedLog::with_clock(Quota::per_minute(5)?, 10_000, ManualClock::new())?;
/// for i in 0..5 {
///     assert!(logins.check_at(&"alice", i * S, 1)?.is_allowed());
/// }
/// let no = logins.check_at(&"alice", 30 * S, 1)?;
/// assert!(!no.is_allowed());
/// assert_eq!(no.retry_after().as_secs(), 30); // the attempt at 0 s leaves at 60 s
/// assert!(logins.check_at(&"bob", 30 * S, 1)?.is_allowed()); // bob has his own log
/// assert!(logins.check_at(&"alice", 60 * S, 1)?.is_allowed());
/// assert_eq!(logins.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct KeyedLog<K: ?Sized, C = DefaultClock> {
    shards: Box<[CachePadded<Shard>]>,
    rule: Rule,
    max_keys: usize,
    hasher: RandomState,
    clock: C,
    /// This log's number: what its admissions are stamped with, per key.
    id: u64,
    _key: PhantomData<fn(&K)>,
}

impl<K: ?Sized, C> fmt::Debug for KeyedLog<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedLog")
            .field("limit", &self.rule.limit)
            .field("window_nanos", &self.rule.window)
            .field("max_keys", &self.max_keys)
            .field("shards", &self.shards.len())
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "std")]
impl<K: Hash + ?Sized> KeyedLog<K, DefaultClock> {
    /// Up to `max_keys` keys, `quota.limit()` units each in any `quota.period()`, on
    /// the default clock with a random seed.
    pub fn new(quota: Quota, max_keys: usize) -> Result<Self, KeyedLogError> {
        Self::with_clock(quota, max_keys, DefaultClock::default())
    }
}

impl<K: Hash + ?Sized, C: Clock> KeyedLog<K, C> {
    /// Up to `max_keys` keys on `clock`, with a random seed.
    #[cfg(feature = "std")]
    pub fn with_clock(quota: Quota, max_keys: usize, clock: C) -> Result<Self, KeyedLogError> {
        Self::with_hasher(quota, max_keys, clock, RandomState::new())
    }

    /// Up to `max_keys` keys on `clock`, hashing with `hasher` (seed it from a real
    /// source of randomness: keys are chosen by clients). Allocates the whole table
    /// now; refuses `max_keys` 0, `max_keys · limit` above [`MAX_LOG_ENTRIES`], and a
    /// table that cannot be allocated.
    pub fn with_hasher(
        quota: Quota,
        max_keys: usize,
        clock: C,
        hasher: RandomState,
    ) -> Result<Self, KeyedLogError> {
        let limit = quota.limit();
        if max_keys == 0 {
            return Err(KeyedLogError::NoKeys);
        }
        if (max_keys as u128) * (limit as u128) > MAX_LOG_ENTRIES as u128 {
            return Err(KeyedLogError::TooManyEntries { max_keys, limit });
        }
        let mut n = 1;
        while n * 2 <= MAX_SHARDS && max_keys / (n * 2) >= SHARD_KEYS {
            n *= 2;
        }
        let mut shards = Vec::new();
        shards.try_reserve_exact(n)?;
        for i in 0..n {
            let cap = max_keys / n + usize::from(i < max_keys % n);
            shards.push(CachePadded::new(Shard::try_new(cap, limit)?));
        }
        Ok(Self {
            shards: shards.into_boxed_slice(),
            rule: Rule {
                limit,
                window: quota.period_nanos(),
            },
            max_keys,
            hasher,
            clock,
            id: crate::sync::next_id(),
            _key: PhantomData,
        })
    }

    /// The most units a key may have in any window.
    pub fn limit(&self) -> u64 {
        self.rule.limit
    }

    /// The window, in nanoseconds.
    pub fn window_nanos(&self) -> u64 {
        self.rule.window
    }

    /// The most keys held at once.
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// How many shards (locks) the table is split into: 1 below 2048 keys.
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// Keys held (read without locks: a snapshot under concurrent checks).
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.keys.load(Ordering::Relaxed))
            .sum()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of table memory (rings, slots, index, shards), fixed at construction.
    pub fn table_bytes(&self) -> usize {
        self.shards.iter().map(|s| s.bytes()).sum()
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// One unit for `key`, now. A full table (or a clock past the supported range)
    /// gives a denial with nothing remaining; [`check_n`](Self::check_n) gives the
    /// typed error.
    pub fn check(&self, key: &K) -> Decision {
        match self.check_n(key, 1) {
            Ok(d) => d,
            Err(KeyedError::KeyTableFull { .. }) => {
                Decision::deny_for(self.rule.limit, crate::decision::DENY_FOR_NANOS)
            }
            Err(_) => Decision::never(self.rule.limit),
        }
    }

    /// `cost` units for `key`, now.
    pub fn check_n(&self, key: &K, cost: u64) -> Result<Decision, KeyedError> {
        self.check_at(key, self.clock.now(), cost)
    }

    /// `cost` units for `key` at `now` (ns): admitted iff the key's units in
    /// `(now − W, now]` plus `cost` are at most the limit; admitted units are recorded.
    pub fn check_at(&self, key: &K, now: u64, cost: u64) -> Result<Decision, KeyedError> {
        self.check_fingerprint_at(self.fingerprint_of(key), now, cost)
    }

    /// `cost` units at `now` for the one log that requests **without a key** share:
    /// held in the table like any key, so leaving the key out never means unlimited.
    pub fn check_anonymous_at(&self, now: u64, cost: u64) -> Result<Decision, KeyedError> {
        self.check_fingerprint_at(self.anonymous_fingerprint(), now, cost)
    }

    /// [`check_anonymous_at`](Self::check_anonymous_at) the clock's now.
    pub fn check_anonymous_n(&self, cost: u64) -> Result<Decision, KeyedError> {
        self.check_anonymous_at(self.clock.now(), cost)
    }

    /// `key`'s fingerprint under this table's seed: what identifies it here.
    pub fn fingerprint_of(&self, key: &K) -> Fingerprint {
        Fingerprint::from_bits(self.hasher.hash_one(key))
    }

    /// The fingerprint of the log that requests without a key share.
    pub fn anonymous_fingerprint(&self) -> Fingerprint {
        Fingerprint::from_bits(ANONYMOUS)
    }

    /// [`check_at`](Self::check_at) for the key `fingerprint` identifies.
    pub fn check_fingerprint_at(
        &self,
        fingerprint: Fingerprint,
        now: u64,
        cost: u64,
    ) -> Result<Decision, KeyedError> {
        self.acquire_fingerprint_at(fingerprint, now, cost)
            .map(|a| a.decision)
    }

    /// [`check_at`](Self::check_at), and when it admits, the [`Admission`] that gives
    /// its units back ([`refund`](Self::refund)): it names the time the entries were
    /// recorded at (the key's latest time, if later than `now`).
    pub fn acquire_at(&self, key: &K, now: u64, cost: u64) -> Result<Acquired, KeyedError> {
        self.acquire_fingerprint_at(self.fingerprint_of(key), now, cost)
    }

    /// [`acquire_at`](Self::acquire_at) for the key `fingerprint` identifies.
    pub fn acquire_fingerprint_at(
        &self,
        fingerprint: Fingerprint,
        now: u64,
        cost: u64,
    ) -> Result<Acquired, KeyedError> {
        check_range(now, cost, self.rule.limit)?;
        let fp = fingerprint.to_bits();
        let shard = self.lock(fp);
        if cost == 0 {
            return Ok(Acquired {
                decision: shard.peek(fp, now, 0),
                admission: None,
            });
        }
        let (decision, at) = match shard.find(fp) {
            Some((_, id)) => shard.check(id, now, cost),
            None => shard.insert(fp, now, cost, self.max_keys)?,
        };
        let origin = origin_of(self.id, fp);
        let drops = shard.drops();
        Ok(Acquired {
            decision,
            admission: decision
                .is_allowed()
                .then(|| Admission::of_log(at, cost, drops).taken_from(origin)),
        })
    }

    /// What [`check_at`](Self::check_at) would answer, recording nothing (and moving
    /// no time).
    pub fn peek_at(&self, key: &K, now: u64, cost: u64) -> Result<Decision, CheckError> {
        self.peek_fingerprint_at(self.fingerprint_of(key), now, cost)
    }

    /// [`peek_at`](Self::peek_at) for the key `fingerprint` identifies. A key that is
    /// not held peeks as an empty log (even if the table is full).
    pub fn peek_fingerprint_at(
        &self,
        fingerprint: Fingerprint,
        now: u64,
        cost: u64,
    ) -> Result<Decision, CheckError> {
        check_range(now, cost, self.rule.limit)?;
        let fp = fingerprint.to_bits();
        Ok(self.lock(fp).peek(fp, now, cost))
    }

    /// Gives back what `admission` took from `key` (what an all-or-none stack does
    /// when a later limit refuses): up to its cost of entries recorded at its time
    /// are removed — exact, since entries of one time are interchangeable. Nothing
    /// happens for a key not held, or whose entries of that time have expired and
    /// been dropped (they count for nothing by then).
    pub fn refund(&self, key: &K, admission: Admission) {
        self.refund_fingerprint(self.fingerprint_of(key), admission)
    }

    /// [`refund`](Self::refund) for the key `fingerprint` identifies.
    pub fn refund_fingerprint(&self, fingerprint: Fingerprint, admission: Admission) {
        let fp = fingerprint.to_bits();
        if admission.cost() == 0 || !admission.is_from(origin_of(self.id, fp)) {
            return;
        }
        let shard = self.lock(fp);
        // A key dropped since (reset, reclaimed) and taken in again holds entries of
        // another request, perhaps at the very same time: the shard's count of drops
        // tells (a neighbour's drop too, which only gives back less).
        if admission.is_stamped() && shard.drops() != admission.log_drops() {
            return;
        }
        shard.refund(fp, admission.at(), admission.cost());
    }

    /// Records `units` entries for the key `fingerprint` at `now` whether or not
    /// they fit: a cost learned after the request was admitted (see
    /// [`settle_fingerprint_at`](Self::settle_fingerprint_at)). Past the limit the
    /// newest entries replace the oldest: an exact log holds at most one window of
    /// debt, `limit` units at the charge's time. Returns the key's standing.
    pub fn charge_fingerprint_at(
        &self,
        fingerprint: Fingerprint,
        now: u64,
        units: u64,
    ) -> Result<Decision, KeyedError> {
        check_range(now, 0, 0)?;
        let fp = fingerprint.to_bits();
        let shard = self.lock(fp);
        if units == 0 {
            let one = shard.peek(fp, now, 1);
            return Ok(if one.is_allowed() {
                shard.peek(fp, now, 0)
            } else {
                one
            });
        }
        let id = match shard.find(fp) {
            Some((_, id)) => id,
            None => {
                // A key not held: taken in with one entry, as a check would.
                shard.insert(fp, now, 1, self.max_keys)?;
                let (_, id) = shard.find(fp).ok_or(KeyedError::KeyTableFull {
                    max_keys: self.max_keys as u64,
                })?;
                return Ok(shard.charge(id, now, units - 1));
            }
        };
        Ok(shard.charge(id, now, units))
    }

    /// Settles what `admission` took from the key `fingerprint` on an estimate at
    /// its real cost `real` (0: a refund): the entries not used are removed (those
    /// recorded at the admission's time, exact), the units above the estimate are
    /// recorded at `now` ([`charge_fingerprint_at`](Self::charge_fingerprint_at)).
    /// Returns the key's standing.
    pub fn settle_fingerprint_at(
        &self,
        fingerprint: Fingerprint,
        admission: Admission,
        real: u64,
        now: u64,
    ) -> Result<Decision, KeyedError> {
        if !admission.is_from(origin_of(self.id, fingerprint.to_bits())) {
            return Err(CheckError::NotThisAdmission.into());
        }
        let at = admission.at();
        match admission.settled_at(real) {
            Settlement::Charge(units) => {
                return self.charge_fingerprint_at(fingerprint, now, units)
            }
            Settlement::GiveBack(back) => self.refund_fingerprint(fingerprint, back),
            Settlement::Kept => {}
        }
        self.charge_fingerprint_at(fingerprint, now.max(at), 0)
    }

    /// Forgets the key `fingerprint` identifies (a login that succeeded clears its
    /// failures).
    pub fn reset_fingerprint(&self, fingerprint: Fingerprint) {
        let fp = fingerprint.to_bits();
        let shard = self.lock(fp);
        if let Some((pos, id)) = shard.find(fp) {
            shard.remove(pos, id, false);
        }
    }

    /// Forgets `key`: its next request finds an empty log.
    pub fn reset(&self, key: &K) {
        self.reset_fingerprint(self.fingerprint_of(key));
    }

    /// Drops every key whose log is entirely expired at `now` (no decision changes).
    /// Returns how many were dropped. O(table size), one shard locked at a time; not
    /// needed for correctness, since a full shard reclaims such keys itself.
    pub fn sweep_at(&self, now: u64) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let shard = s.lock(self.rule);
                let t = now.max(get(&s.floor));
                shard.reclaim(t)
            })
            .sum()
    }

    /// [`sweep_at`](Self::sweep_at) the clock's now.
    pub fn sweep(&self) -> usize {
        self.sweep_at(self.clock.now())
    }

    /// `key`'s log, to stack with other limits in
    /// [`stack::check_all`](crate::keyed::stack::check_all).
    pub fn limit_for<'a>(&'a self, key: &'a K) -> KeyedLogLimit<'a, K, C> {
        KeyedLogLimit { log: self, key }
    }

    fn lock(&self, fp: u64) -> Locked<'_> {
        // The top bits choose the shard; the index position uses the low bits.
        let i = (fp >> 60) as usize & (self.shards.len() - 1);
        self.shards[i].lock(self.rule)
    }
}

/// One key of a [`KeyedLog`], as a [`Limit`](crate::keyed::stack::Limit) for stacking.
#[derive(Debug)]
pub struct KeyedLogLimit<'a, K: ?Sized, C> {
    log: &'a KeyedLog<K, C>,
    key: &'a K,
}

impl<K: Hash + ?Sized, C: Clock> crate::keyed::stack::Limit for KeyedLogLimit<'_, K, C> {
    fn acquire_at(&self, now: u64, cost: u64) -> Result<Acquired, KeyedError> {
        self.log.acquire_at(self.key, now, cost)
    }
    fn refund(&self, admission: Admission) {
        self.log.refund(self.key, admission)
    }
    fn peek_at(&self, now: u64, cost: u64) -> Result<Option<Decision>, KeyedError> {
        Ok(Some(self.log.peek_at(self.key, now, cost)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn shard_count_follows_the_table_size() {
        let shards = |max_keys| {
            let quota = Quota::from_nanos(1, 10).unwrap();
            KeyedLog::<u64, _>::with_hasher(quota, max_keys, ManualClock::new(), RandomState::new())
                .unwrap()
                .shards()
        };
        assert_eq!(shards(2047), 1);
        assert_eq!(shards(2048), 2);
        assert_eq!(shards(1 << 20), 16);
    }
}
