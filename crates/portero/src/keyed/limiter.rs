//! [`KeyedLimiter`]: the keyed table's API (see the [module docs](super)).

use core::hash::Hash;
use core::marker::PhantomData;

use crate::sync::ConfigCell;

use super::fingerprint::{Fingerprint, SlotHint};
use super::table::{self, Overflow, Table, Taken};
use crate::admission::{Acquired, Admission, Settlement};
use crate::algorithm::charge::{saturates, standing, Charging};
use crate::algorithm::Algorithm;
use crate::clock::{Clock, DefaultClock};
use crate::decision::{CheckError, Decision, KeyedError};
use ahash::RandomState;

/// The fingerprint of the bucket shared by requests without a key.
const ANONYMOUS: u64 = u64::MAX;

/// A limiter per key over a bounded table. `A` is any [`Algorithm`]; `K` any `Hash`.
///
/// ```
/// use portero::{Gcra, KeyedLimiter, ManualClock, Quota};
/// let per_user = KeyedLimiter::with_clock(Gcra::new(Quota::per_second(2)?), 10_000, ManualClock::new());
/// assert!(per_user.check(&"alice").is_allowed());
/// assert!(per_user.check(&"alice").is_allowed());
/// assert!(!per_user.check(&"alice").is_allowed());
/// assert!(per_user.check(&"bob").is_allowed()); // bob has his own share
/// assert_eq!(per_user.len(), 2);
/// # Ok::<(), portero::QuotaError>(())
/// ```
pub struct KeyedLimiter<K: ?Sized, A: Copy, C = DefaultClock> {
    pub(crate) table: Table,
    pub(crate) algorithm: ConfigCell<A>,
    hasher: RandomState,
    pub(crate) clock: C,
    _key: PhantomData<fn(&K)>,
}

impl<K: ?Sized, A: Copy, C> core::fmt::Debug for KeyedLimiter<K, A, C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KeyedLimiter")
            .field("max_keys", &self.table.max_keys())
            .field("keys", &self.table.len())
            .field("slots", &self.table.slot_count())
            .field("overflow", &self.table.overflow)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "std")]
impl<K: Hash + ?Sized, A: Algorithm + Copy> KeyedLimiter<K, A, DefaultClock> {
    /// Up to `max_keys` keys on the default clock, with a random seed.
    pub fn new(algorithm: A, max_keys: usize) -> Self {
        Self::with_clock(algorithm, max_keys, DefaultClock::default())
    }
}

impl<K: Hash + ?Sized, A: Algorithm + Copy, C: Clock> KeyedLimiter<K, A, C> {
    /// Up to `max_keys` keys (at least 1) on `clock`, with a random seed.
    #[cfg(feature = "std")]
    pub fn with_clock(algorithm: A, max_keys: usize, clock: C) -> Self {
        Self::with_hasher(algorithm, max_keys, clock, RandomState::new())
    }

    /// Up to `max_keys` keys on `clock`, hashing with `hasher`. Seed it from a real
    /// source of randomness: a known seed lets an attacker choose colliding keys.
    ///
    /// Allocates the whole table now (about 31 bytes per key); if that can fail, use
    /// [`try_with_hasher`](Self::try_with_hasher).
    pub fn with_hasher(algorithm: A, max_keys: usize, clock: C, hasher: RandomState) -> Self {
        Self::try_with_hasher(algorithm, max_keys, clock, hasher).unwrap_or_else(|_| {
            alloc::alloc::handle_alloc_error(core::alloc::Layout::new::<[u128; 2]>())
        })
    }

    /// Like [`with_hasher`](Self::with_hasher), but returns an error instead of
    /// aborting when the table cannot be allocated (an absurd `max_keys`, or a
    /// memory-limited runtime such as an edge worker).
    pub fn try_with_hasher(
        algorithm: A,
        max_keys: usize,
        clock: C,
        hasher: RandomState,
    ) -> Result<Self, alloc::collections::TryReserveError> {
        Ok(Self {
            table: Table::try_new(max_keys)?,
            algorithm: ConfigCell::new(algorithm),
            hasher,
            clock,
            _key: PhantomData,
        })
    }

    /// Sets the [`Overflow`] policy.
    pub fn overflow(mut self, policy: Overflow) -> Self {
        self.table.overflow = policy;
        self
    }

    /// Keys currently held.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most keys held at once.
    pub fn max_keys(&self) -> usize {
        self.table.max_keys()
    }

    /// Bytes of table memory (slots, hints and locks), fixed at construction.
    pub fn table_bytes(&self) -> usize {
        self.table.bytes()
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The current algorithm (quota).
    pub fn algorithm(&self) -> A {
        self.algorithm.load()
    }

    /// Replaces the algorithm's configuration for every key, keeping what each key has
    /// used: state words are reinterpreted under the new quota. For GCRA, token and
    /// leaky buckets the state is a time debt, so a key that was empty stays empty
    /// for the same time and then fills to the new burst. A window algorithm or
    /// calendar quota may change its limit (a lowered limit counts what was already
    /// admitted), but not its window length, period or placement: the state word's
    /// layout depends on those, so build a new table to change them.
    ///
    /// An admission from before the change gives nothing back after it (its units
    /// were counted under the old quota): every key's ledger is told so.
    pub fn set_algorithm(&self, algorithm: A) {
        self.table
            .retire_admissions(|| self.algorithm.store(algorithm));
    }

    /// One unit for `key`, now. A full table gives [`full_table`](Self::full_table)'s
    /// denial (see [`check_n`](Self::check_n) for the typed error).
    #[inline]
    pub fn check(&self, key: &K) -> Decision {
        // The hash, the loads of the key's buckets started and the configuration read,
        // all before the clock: its read (a `rdtsc`, about half of a check here) then
        // overlaps them. The other way round, a plain loop over 10,000 keys
        // (`keyed_loop` example) measured 40.6-47.0 ns a check; the hash first,
        // 36.7-41.1; the configuration too, 35.3-36.2. On a cached clock the order
        // made no difference (19.2 and 17.8).
        let tag = self.fingerprint(key);
        let probe = self.table.probe(tag);
        self.table.prefetch(probe);
        let algorithm = self.algorithm.load();
        let now = self.clock.now();
        // The held key's decision goes straight out; everything else (a new key, a
        // full table, an error) is decided again out of line. Merged into one
        // `Result` first, the hot path's decision was written field by field into a
        // temporary and copied out with wider loads, a store-forwarding stall (29 %
        // of a loop's samples on one load).
        match self.table.update_existing(&algorithm, probe, now, 1) {
            Ok(Some(d)) => d,
            held => self.check_cold(tag, now, held.is_err()),
        }
    }

    /// [`check`](Self::check) for a key that is not held (inserted here), or whose
    /// check `failed` (a full table's denial, as for an insert that fails).
    #[cold]
    #[inline(never)]
    fn check_cold(&self, tag: u64, now: u64, failed: bool) -> Decision {
        if failed {
            return self.full_table();
        }
        self.check_slow(&self.algorithm.load(), tag, now, 1)
            .unwrap_or_else(|_| self.full_table())
    }

    /// `cost` units for `key`, now.
    #[inline]
    pub fn check_n(&self, key: &K, cost: u64) -> Result<Decision, KeyedError> {
        self.check_at(key, self.clock.now(), cost)
    }

    /// `cost` units for `key` at `now` (ns).
    #[inline(always)]
    pub fn check_at(&self, key: &K, now: u64, cost: u64) -> Result<Decision, KeyedError> {
        self.check_tag(self.fingerprint(key), now, cost)
    }

    /// `cost` units at `now` for the one bucket that requests **without a key** share
    /// (an HTTP request with no client id, say): held in the table like any key, so
    /// leaving the key out never means unlimited. (A real key's fingerprint equals
    /// the shared bucket's with probability 2^-64, under a seed drawn at run time.)
    pub fn check_anonymous_at(&self, now: u64, cost: u64) -> Result<Decision, KeyedError> {
        self.check_tag(ANONYMOUS, now, cost)
    }

    /// [`check_anonymous_at`](Self::check_anonymous_at) the clock's now.
    pub fn check_anonymous_n(&self, cost: u64) -> Result<Decision, KeyedError> {
        self.check_anonymous_at(self.clock.now(), cost)
    }

    #[inline(always)]
    fn check_tag(&self, tag: u64, now: u64, cost: u64) -> Result<Decision, KeyedError> {
        if let Some(d) = self.check_existing(tag, now, cost)? {
            return Ok(d);
        }
        // Only the tag crosses into the slow path, which probes again: a probe handed
        // over (even by value: wasm passes structs by address) lives in memory, and
        // reloading its two bucket indices as one word stalled every check (≈ 5 ns
        // in V8).
        self.check_slow(&self.algorithm.load(), tag, now, cost)
    }

    /// The hot path: the key is held, so decide on its state and publish with one CAS
    /// over (fingerprint, state), all inline (returned out of line, the 64-byte
    /// `Result<Option<Decision>>` cost store-forwarding stalls on every check). `None`
    /// if the key is not held.
    #[inline(always)]
    fn check_existing(
        &self,
        tag: u64,
        now: u64,
        cost: u64,
    ) -> Result<Option<Decision>, KeyedError> {
        let algorithm = self.algorithm.load();
        let probe = self.table.probe(tag);
        self.table.prefetch(probe);
        self.table.update_existing(&algorithm, probe, now, cost)
    }

    /// A key that is not held (or whose slot was just reclaimed): insert it.
    #[cold]
    #[inline(never)]
    fn check_slow(
        &self,
        algorithm: &A,
        tag: u64,
        now: u64,
        cost: u64,
    ) -> Result<Decision, KeyedError> {
        self.insert_tag(algorithm, tag, now, cost).map(|(d, _)| d)
    }

    /// [`check_slow`](Self::check_slow), with what the write changed.
    pub(crate) fn insert_tag<B: Algorithm>(
        &self,
        algorithm: &B,
        tag: u64,
        now: u64,
        cost: u64,
    ) -> Result<Taken, KeyedError> {
        // A new key: decide on a fresh state first; only admitted requests (and
        // excess-counting windows) need a slot.
        let first = algorithm.decide(algorithm.initial_state(), now, cost)?;
        if first.next.is_none() {
            return Ok((first.decision, None));
        }
        self.table
            .insert(algorithm, self.table.probe(tag), (now, cost), first)
    }

    /// [`check_at`](Self::check_at), and when it admits, the [`Admission`] that gives
    /// its units back ([`refund`](Self::refund)).
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
        let algorithm = self.algorithm.load();
        let tag = fingerprint.to_bits();
        let note = self.table.ledger(tag).note();
        let probe = self.table.probe(tag);
        // As the check's hot path does: the bucket lines load while the hints are read.
        self.table.prefetch(probe);
        let held = self
            .table
            .update_with(probe, |state| table::recorded(&algorithm, state, now, cost))?;
        let (decision, wrote) = match held {
            Some(taken) => taken,
            None => self.insert_tag(&algorithm, tag, now, cost)?,
        };
        let admission = match wrote {
            Some((before, after)) if decision.is_allowed() && cost > 0 => Some(
                Admission::of_word(now, cost, before, after, note.total)
                    .placed_if(self.table.ledger(tag).placed(&note))
                    .taken_from(self.table.ledger(tag).origin(tag)),
            ),
            _ => None,
        };
        Ok(Acquired {
            decision,
            admission,
        })
    }

    /// The answer for a new key that a full table refuses: denied, nothing remaining,
    /// retry after [`DENY_FOR_NANOS`](crate::decision::DENY_FOR_NANOS) (one second: keys that
    /// are full again by then are reclaimed for it).
    // Inline, not `#[cold]`: as an out-of-line call its decision came back through
    // memory, so `check` built every decision in a temporary and copied it out with
    // wider loads than the stores that wrote it, a store-forwarding stall (≈ 4 ns).
    #[inline]
    pub fn full_table(&self) -> Decision {
        Decision::deny_for(
            self.algorithm.load().capacity(),
            crate::decision::DENY_FOR_NANOS,
        )
    }

    /// `key`'s fingerprint under this table's seed: what identifies it in the table.
    /// A caller that checks the same key often and pays for hashing it (a string
    /// copied across an FFI boundary, say) can keep it and call
    /// [`check_fingerprint_at`](Self::check_fingerprint_at) instead.
    ///
    /// ```
    /// use portero::{Gcra, KeyedLimiter, ManualClock, Quota};
    /// let per_user = KeyedLimiter::with_clock(Gcra::new(Quota::per_second(1)?), 100, ManualClock::new());
    /// let alice = per_user.fingerprint_of("alice");
    /// assert!(per_user.check_fingerprint_at(alice, 0, 1)?.is_allowed());
    /// assert!(!per_user.check_at("alice", 0, 1)?.is_allowed()); // the same key
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn fingerprint_of(&self, key: &K) -> Fingerprint {
        Fingerprint::from_bits(self.hasher.hash_one(key))
    }

    /// [`check_at`](Self::check_at) for the key `fingerprint` identifies (from
    /// [`fingerprint_of`](Self::fingerprint_of) on this limiter: under another seed it
    /// names some other key).
    #[inline(always)]
    pub fn check_fingerprint_at(
        &self,
        fingerprint: Fingerprint,
        now: u64,
        cost: u64,
    ) -> Result<Decision, KeyedError> {
        self.check_tag(fingerprint.to_bits(), now, cost)
    }

    /// [`check_fingerprint_at`](Self::check_fingerprint_at), looking first in the slot
    /// `hint` names, and leaving in `hint` where the key is held afterwards (or
    /// [`SlotHint::NONE`]). A caller that keeps each hot key's fingerprint can keep its
    /// hint beside it and skip the table's lookup on the next check.
    ///
    /// Only a hint: the slot's fingerprint is compared before its state is read, and
    /// the compare-and-swap covers the fingerprint, so a stale, wrong or made-up hint
    /// costs an ordinary lookup and never decides on another key's state.
    ///
    /// ```
    /// use portero::{Gcra, KeyedLimiter, ManualClock, Quota, SlotHint};
    /// let per_user = KeyedLimiter::with_clock(Gcra::new(Quota::per_second(2)?), 100, ManualClock::new());
    /// let alice = per_user.fingerprint_of("alice");
    /// let mut hint = SlotHint::NONE;
    /// assert!(per_user.check_hinted_at(alice, &mut hint, 0, 1)?.is_allowed());
    /// assert_ne!(hint, SlotHint::NONE); // where "alice" is held now
    /// assert!(per_user.check_hinted_at(alice, &mut hint, 0, 1)?.is_allowed());
    /// assert!(!per_user.check_at("alice", 0, 1)?.is_allowed()); // the same key: 2 used
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline(always)]
    pub fn check_hinted_at(
        &self,
        fingerprint: Fingerprint,
        hint: &mut SlotHint,
        now: u64,
        cost: u64,
    ) -> Result<Decision, KeyedError> {
        let algorithm = self.algorithm.load();
        let tag = fingerprint.to_bits();
        match self
            .table
            .update_at(&algorithm, hint.index(), tag, now, cost)?
        {
            Some(d) => Ok(d),
            None => {
                let (d, found) = self.check_and_find(tag, now, cost);
                *hint = found;
                d
            }
        }
    }

    /// A hinted check whose hint missed: the ordinary check, then where the key is.
    /// (The hint goes out by value: passed in by reference, it would live in memory
    /// on every check, not only on this path.)
    #[inline(never)]
    fn check_and_find(
        &self,
        tag: u64,
        now: u64,
        cost: u64,
    ) -> (Result<Decision, KeyedError>, SlotHint) {
        let d = self.check_tag(tag, now, cost);
        (d, SlotHint::at(self.table.slot_of(tag)))
    }

    /// How `key` stands now, consuming nothing: the units left
    /// ([`remaining`](Decision::remaining)) and when it is full again
    /// ([`reset_after`](Decision::reset_after)).
    ///
    /// ```
    /// use portero::{Gcra, KeyedLimiter, Quota};
    ///
    /// let limiter = KeyedLimiter::new(Gcra::new(Quota::per_minute(5)?), 100);
    /// limiter.check(&"ann");
    /// assert_eq!(limiter.peek(&"ann").remaining(), 4);
    /// # Ok::<(), portero::QuotaError>(())
    /// ```
    pub fn peek(&self, key: &K) -> Decision {
        self.peek_at(key, self.clock.now(), 0)
            .unwrap_or_else(|_| Decision::never(self.algorithm.load().capacity()))
    }

    /// What [`check_at`](Self::check_at) would answer, consuming nothing.
    pub fn peek_at(&self, key: &K, now: u64, cost: u64) -> Result<Decision, CheckError> {
        self.peek_fingerprint_at(self.fingerprint_of(key), now, cost)
    }

    /// The raw state word held for `key`, if it is held (feature `testing`).
    #[cfg(feature = "testing")]
    pub fn state_of(&self, key: &K) -> Option<u64> {
        self.table.state_of(self.fingerprint(key))
    }

    /// Keys held, by scanning the table (feature `testing`).
    #[cfg(feature = "testing")]
    pub fn count_slots(&self) -> usize {
        self.table.count_slots()
    }

    /// Forgets `key`: its next request finds a full limiter.
    pub fn reset(&self, key: &K) {
        self.table.remove(self.fingerprint(key));
    }

    /// [`reset`](Self::reset) for the key `fingerprint` identifies (a login that
    /// succeeded clears its failures).
    pub fn reset_fingerprint(&self, fingerprint: Fingerprint) {
        self.table.remove(fingerprint.to_bits());
    }

    /// Drops every key whose state is back to full at `now` (no decision at or after
    /// `now` changes). Returns how many were dropped. O(table size); no background
    /// thread is needed, inserts also reclaim lazily.
    pub fn sweep_at(&self, now: u64) -> usize {
        self.table.sweep(&self.algorithm.load(), now)
    }

    /// [`sweep_at`](Self::sweep_at) the clock's now.
    pub fn sweep(&self) -> usize {
        self.sweep_at(self.clock.now())
    }

    /// `key`'s limit, to stack with others in [`stack::check_all`](crate::keyed::stack::check_all).
    pub fn limit_for<'a>(&'a self, key: &'a K) -> KeyedLimit<'a, K, A, C> {
        KeyedLimit { limiter: self, key }
    }

    /// Gives back to `key` what `admission` took ([`Admission::give_back`]), at the
    /// limiter's own time read after the key's slot is loaded. An admission another
    /// key or limiter took gives nothing back here (its
    /// [`settle`](Self::settle) is an error).
    pub fn refund(&self, key: &K, admission: Admission) {
        self.refund_fingerprint(self.fingerprint_of(key), admission)
    }

    /// Takes `units` from `key` now whether or not they fit: a cost learned after
    /// the request was admitted, charged into debt past the burst (see
    /// [`Algorithm::charge`]; a key not held is taken in, as a check would — except
    /// under a window placed by its first request, which a charge never opens: a key
    /// with no window open is charged nothing, and stays as it was). Returns how the
    /// key stands afterwards for a request of one unit.
    pub fn charge(&self, key: &K, units: u64) -> Result<Decision, KeyedError> {
        self.charge_fingerprint_at(self.fingerprint_of(key), self.clock.now(), units)
    }

    /// [`charge`](Self::charge) for the key `fingerprint` identifies, at `now`.
    pub fn charge_fingerprint_at(
        &self,
        fingerprint: Fingerprint,
        now: u64,
        units: u64,
    ) -> Result<Decision, KeyedError> {
        let algorithm = self.algorithm.load();
        let charging = Charging(&algorithm);
        let tag = fingerprint.to_bits();
        let probe = self.table.probe(tag);
        // A held key is charged under its ledger's lock, so that a charge that
        // saturates its word tells the ledger (see `saturates`) with no refund in
        // between; a new key has no admission to give back.
        let held = self.table.ledger(tag).refunding(|_| {
            let mut dropped = false;
            let held = self.table.update_with(probe, |state| {
                dropped = saturates(&algorithm, state, now, units);
                table::recorded(&charging, state, now, units)
            });
            (held, if dropped { u64::MAX } else { 0 })
        })?;
        match held {
            Some((decision, _)) => Ok(decision),
            None => self.insert_tag(&charging, tag, now, units).map(|(d, _)| d),
        }
    }

    /// Settles what `admission` took from `key` on an estimate at its real cost
    /// `real` (see [`RateLimiter::settle`](crate::algorithm::limiter::RateLimiter::settle)):
    /// the units not used go back by the refund rule, the units above the estimate
    /// are charged into debt. Returns how the key stands afterwards for a request of
    /// one unit.
    ///
    /// ```
    /// use portero::{Gcra, KeyedLimiter, Quota};
    /// let per_key = KeyedLimiter::new(Gcra::new(Quota::per_minute(10_000)?), 1_000);
    /// let estimate = per_key.acquire_at(&"ann", 0, 1_000)?.admission.unwrap();
    /// let after = per_key.settle_fingerprint_at(per_key.fingerprint_of(&"ann"), estimate, 12_000, 0)?;
    /// assert!(!after.is_allowed()); // 2,000 units of debt past the burst
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle(&self, key: &K, admission: Admission, real: u64) -> Result<Decision, KeyedError> {
        let now = self.clock.now();
        self.settle_fingerprint_at(self.fingerprint_of(key), admission, real, now)
    }

    /// [`settle`](Self::settle) for the key `fingerprint` identifies, at `now` (no
    /// earlier than any check of the key since the admission).
    pub fn settle_fingerprint_at(
        &self,
        fingerprint: Fingerprint,
        admission: Admission,
        real: u64,
        now: u64,
    ) -> Result<Decision, KeyedError> {
        let tag = fingerprint.to_bits();
        if !admission.is_from(self.table.ledger(tag).origin(tag)) {
            return Err(CheckError::NotThisAdmission.into());
        }
        let now = now.max(admission.at());
        match admission.settled_at(real) {
            Settlement::Charge(units) => {
                return self.charge_fingerprint_at(fingerprint, now, units)
            }
            Settlement::GiveBack(back) => self.refund_fingerprint_at(fingerprint, back, now),
            Settlement::Kept => {}
        }
        let algorithm = self.algorithm.load();
        let state = self
            .table
            .state_of(fingerprint.to_bits())
            .unwrap_or(algorithm.initial_state());
        Ok(standing(&algorithm, state, now)?)
    }

    /// The fingerprint of the bucket that requests without a key share
    /// ([`check_anonymous_at`](Self::check_anonymous_at)), so a caller that keeps
    /// fingerprints can refund or peek it like any key.
    pub fn anonymous_fingerprint(&self) -> Fingerprint {
        Fingerprint::from_bits(ANONYMOUS)
    }

    /// [`refund`](Self::refund) for the key `fingerprint` identifies: what a caller
    /// that charged several limits gives back when a later one refuses.
    pub fn refund_fingerprint(&self, fingerprint: Fingerprint, admission: Admission) {
        let a = self.algorithm.load();
        let tag = fingerprint.to_bits();
        self.table.refund(&a, tag, &admission, || self.clock.now());
    }

    /// [`refund_fingerprint`](Self::refund_fingerprint) at `now` on the caller's axis
    /// (no earlier than any check of the key since the admission: see the
    /// [`admission`](crate::admission) module for what an earlier one costs).
    pub fn refund_fingerprint_at(&self, fingerprint: Fingerprint, admission: Admission, now: u64) {
        let a = self.algorithm.load();
        let tag = fingerprint.to_bits();
        self.table.refund(&a, tag, &admission, || now);
    }

    /// [`peek_at`](Self::peek_at) for the key `fingerprint` identifies.
    pub fn peek_fingerprint_at(
        &self,
        fingerprint: Fingerprint,
        now: u64,
        cost: u64,
    ) -> Result<Decision, CheckError> {
        let algorithm = self.algorithm.load();
        let state = self
            .table
            .state_of(fingerprint.to_bits())
            .unwrap_or(algorithm.initial_state());
        algorithm.decide(state, now, cost).map(|t| t.decision)
    }

    #[inline]
    pub(crate) fn fingerprint(&self, key: &K) -> u64 {
        self.fingerprint_of(key).to_bits()
    }
}

/// One key of a [`KeyedLimiter`], as a [`Limit`](crate::keyed::stack::Limit) for stacking.
#[derive(Debug)]
pub struct KeyedLimit<'a, K: ?Sized, A: Copy, C> {
    limiter: &'a KeyedLimiter<K, A, C>,
    key: &'a K,
}

impl<K: Hash + ?Sized, A: Algorithm + Copy, C: Clock> crate::keyed::stack::Limit
    for KeyedLimit<'_, K, A, C>
{
    fn acquire_at(&self, now: u64, cost: u64) -> Result<Acquired, KeyedError> {
        self.limiter.acquire_at(self.key, now, cost)
    }
    fn refund(&self, admission: Admission) {
        self.limiter.refund(self.key, admission)
    }
    fn peek_at(&self, now: u64, cost: u64) -> Result<Option<Decision>, KeyedError> {
        Ok(Some(self.limiter.peek_at(self.key, now, cost)?))
    }
}
