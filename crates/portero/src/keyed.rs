//! A limiter per key (user, API key, IP, tenant) in a fixed-size table that a flood of
//! keys cannot grow.
//!
//! # Layout
//!
//! The table is an array of 16-byte slots, grouped in buckets of [`BUCKET`] slots (two
//! cache lines), plus one 64-bit hint word per bucket holding the top byte of each
//! slot's fingerprint, so a lookup loads one hint word and then, almost always, only
//! the one slot it wants. Each slot is one 128-bit atomic word:
//!
//! ```text
//!  127                          64 63                            0
//! +--------------------------------+--------------------------------+
//! | key fingerprint (0 = empty)    | the algorithm's state word     |
//! +--------------------------------+--------------------------------+
//! ```
//!
//! A key's fingerprint is its 64-bit `ahash` under a seed drawn at run time (keys are
//! attacker-controlled: no fixed seed, no HashDoS). Every key has two candidate buckets
//! (two-choice hashing), so buckets overflow only when the whole table is nearly full.
//!
//! - **Checking an existing key** scans its buckets without locks, then runs the
//!   algorithm's transition and publishes it with one 128-bit compare-and-swap over
//!   fingerprint *and* state. Because the CAS covers the fingerprint, a slot that was
//!   reclaimed and reused by another key in between can never receive this key's update.
//!   Nothing is allocated.
//! - **Inserting** takes the two buckets' insert locks (1-byte spin locks, held for a
//!   few loads), rescans, and claims an empty slot with the new key *and its first
//!   decision* in one CAS. The locks only order inserts among themselves, so a key can
//!   never be inserted twice; checks never wait for them.
//! - **Bounded memory.** At most `max_keys` keys are held; the table has
//!   `⌈1.8 · max_keys⌉` slots rounded up to a bucket (≈ 31 bytes per key at capacity,
//!   hints and locks included).
//!   A key whose state is back to full carries no information: dropping it changes no
//!   decision at or after that time. Such keys are reclaimed lazily by inserts that
//!   find no room, and by [`KeyedLimiter::sweep`].
//! - **When every key is still active**, the [`Overflow`] policy decides.
//!
//! Keys are identified by their 64-bit fingerprint: two keys whose fingerprints collide
//! share one state, which can only make both stricter, never admit more. With `n` keys
//! the chance of any collision is about `n² / 2^65` (1 in 37 million at a million
//! keys), and the run-time seed keeps anyone from aiming for one.

use core::hash::Hash;
use core::marker::PhantomData;

use alloc::boxed::Box;
use alloc::vec::Vec;
use crossbeam_utils::atomic::AtomicCell;
#[cfg(not(loom))]
use crossbeam_utils::Backoff;

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
use portable_atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};

use crate::{Algorithm, CheckError, Clock, Decision, DefaultClock};

/// The hasher keyed limiters use (`ahash`), re-exported so callers can seed it.
pub use ahash::RandomState;

/// Slots per bucket.
#[cfg(not(loom))]
const BUCKET: usize = 8;
/// Slots per bucket (small under loom, to keep the models' state space tractable).
#[cfg(loom)]
const BUCKET: usize = 2;

/// What a new key gets when all `max_keys` keys are still active.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overflow {
    /// Refuse the new key with [`CheckError::KeyTableFull`]: existing keys keep their
    /// exact state, so a flood of new keys cannot evict the users already tracked.
    /// The caller chooses what a refusal means (deny, or fail open).
    #[default]
    RejectNewKeys,
    /// Evict, among the new key's candidate slots, the key that would be full again
    /// soonest, and track the new key in its place. The evicted key returns as new, so
    /// it may get up to the units it had used back (at most its burst) — the price of
    /// always tracking new keys.
    EvictSoonestFull,
}

/// The 128-bit slot word: fingerprint in the high half, state in the low half.
mod slot {
    #[cfg(loom)]
    pub(crate) struct Slot(loom::sync::Mutex<u128>);
    #[cfg(loom)]
    impl Slot {
        pub(crate) fn new() -> Self {
            Self(loom::sync::Mutex::new(0))
        }
        pub(crate) fn load(&self) -> u128 {
            *self.0.lock().unwrap()
        }
        pub(crate) fn cas(&self, current: u128, new: u128) -> Result<(), u128> {
            let mut v = self.0.lock().unwrap();
            if *v == current {
                *v = new;
                Ok(())
            } else {
                Err(*v)
            }
        }
    }

    #[cfg(not(loom))]
    pub(crate) struct Slot(portable_atomic::AtomicU128);
    #[cfg(not(loom))]
    impl Slot {
        pub(crate) fn new() -> Self {
            Self(portable_atomic::AtomicU128::new(0))
        }
        #[inline]
        pub(crate) fn load(&self) -> u128 {
            self.0.load(portable_atomic::Ordering::Acquire)
        }
        #[inline]
        pub(crate) fn cas(&self, current: u128, new: u128) -> Result<(), u128> {
            self.0
                .compare_exchange(
                    current,
                    new,
                    portable_atomic::Ordering::AcqRel,
                    portable_atomic::Ordering::Acquire,
                )
                .map(|_| ())
        }
    }
}
use slot::Slot;

#[inline]
fn pack(tag: u64, state: u64) -> u128 {
    ((tag as u128) << 64) | state as u128
}

#[inline]
fn unpack(word: u128) -> (u64, u64) {
    ((word >> 64) as u64, word as u64)
}

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
    slots: Box<[Slot]>,
    /// One word per bucket: the top byte of each slot's fingerprint (a hint).
    hints: Box<[AtomicU64]>,
    locks: Box<[BucketLock]>,
    buckets: usize,
    algorithm: AtomicCell<A>,
    hasher: RandomState,
    max_keys: usize,
    keys: AtomicUsize,
    overflow: Overflow,
    clock: C,
    _key: PhantomData<fn(&K)>,
}

impl<K: ?Sized, A: Copy, C> core::fmt::Debug for KeyedLimiter<K, A, C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KeyedLimiter")
            .field("max_keys", &self.max_keys)
            .field("keys", &self.keys.load(Ordering::Relaxed))
            .field("slots", &self.slots.len())
            .field("overflow", &self.overflow)
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
        Self::try_with_hasher(algorithm, max_keys, clock, hasher)
            .unwrap_or_else(|_| alloc::alloc::handle_alloc_error(Self::layout_hint()))
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
        let max_keys = max_keys.max(1);
        // 9/5 slots per key: two-choice buckets of 8 at ≤ 56% load essentially never
        // overflow before the key count does (a million keys all fit; see the memory
        // benchmark), and with the hints it is ≈ 31 bytes per key.
        let buckets = max_keys
            .saturating_mul(9)
            .div_ceil(5)
            .div_ceil(BUCKET)
            .max(2);
        Ok(Self {
            slots: filled(buckets.saturating_mul(BUCKET), Slot::new)?,
            hints: filled(buckets, || AtomicU64::new(0))?,
            locks: filled(buckets, new_lock)?,
            buckets,
            algorithm: AtomicCell::new(algorithm),
            hasher,
            max_keys,
            keys: AtomicUsize::new(0),
            overflow: Overflow::RejectNewKeys,
            clock,
            _key: PhantomData,
        })
    }

    fn layout_hint() -> core::alloc::Layout {
        core::alloc::Layout::new::<Slot>()
    }

    /// Sets the [`Overflow`] policy.
    pub fn overflow(mut self, policy: Overflow) -> Self {
        self.overflow = policy;
        self
    }

    /// Keys currently held.
    pub fn len(&self) -> usize {
        self.keys.load(Ordering::Relaxed)
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most keys held at once.
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// Bytes of table memory (slots and locks), fixed at construction.
    pub fn table_bytes(&self) -> usize {
        self.slots.len() * core::mem::size_of::<Slot>()
            + self.hints.len() * core::mem::size_of::<AtomicU64>()
            + self.locks.len() * core::mem::size_of::<BucketLock>()
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
    pub fn set_algorithm(&self, algorithm: A) {
        self.algorithm.store(algorithm);
    }

    /// One unit for `key`, now. A full table gives [`full_table`](Self::full_table)'s
    /// denial (see [`check_n`](Self::check_n) for the typed error).
    #[inline]
    pub fn check(&self, key: &K) -> Decision {
        match self.check_at(key, self.clock.now(), 1) {
            Ok(d) => d,
            Err(_) => self.full_table(),
        }
    }

    /// `cost` units for `key`, now.
    #[inline]
    pub fn check_n(&self, key: &K, cost: u64) -> Result<Decision, CheckError> {
        self.check_at(key, self.clock.now(), cost)
    }

    /// `cost` units for `key` at `now` (ns).
    #[inline(always)]
    pub fn check_at(&self, key: &K, now: u64, cost: u64) -> Result<Decision, CheckError> {
        let algorithm = self.algorithm.load();
        let tag = self.fingerprint(key);
        let buckets = self.buckets_of(tag);
        self.prefetch(buckets);
        // The hot path: the key is held, so decide on its state and publish with one
        // CAS over (fingerprint, state), all inline (returned out of line, the 64-byte
        // `Result<Option<Decision>>` cost store-forwarding stalls on every check).
        if let Some(d) = self.update_existing(&algorithm, tag, buckets, now, cost)? {
            return Ok(d);
        }
        self.check_slow(&algorithm, tag, buckets, now, cost)
    }

    /// A key that is not held (or whose slot was just reclaimed): insert it.
    #[cold]
    #[inline(never)]
    fn check_slow(
        &self,
        algorithm: &A,
        tag: u64,
        buckets: [usize; 2],
        now: u64,
        cost: u64,
    ) -> Result<Decision, CheckError> {
        // A new key: decide on a fresh state first; only admitted requests (and
        // excess-counting windows) need a slot.
        let t = algorithm.decide(algorithm.initial_state(), now, cost)?;
        let Some(state) = t.next else {
            return Ok(t.decision);
        };
        self.insert(algorithm, tag, buckets, now, cost, state, t.decision)
    }

    /// The answer for a new key that a full table refuses: denied, nothing remaining,
    /// retry after [`DENY_FOR_NANOS`](crate::DENY_FOR_NANOS) (one second: keys that
    /// are full again by then are reclaimed for it).
    #[cold]
    pub fn full_table(&self) -> Decision {
        Decision::deny_for(self.algorithm.load().capacity(), crate::DENY_FOR_NANOS)
    }

    /// What [`check_at`](Self::check_at) would answer, consuming nothing.
    pub fn peek_at(&self, key: &K, now: u64, cost: u64) -> Result<Decision, CheckError> {
        let algorithm = self.algorithm.load();
        let tag = self.fingerprint(key);
        let buckets = self.buckets_of(tag);
        let state = self
            .find(tag, buckets)
            .map_or(algorithm.initial_state(), |(_, w)| unpack(w).1);
        algorithm.decide(state, now, cost).map(|t| t.decision)
    }

    /// The raw state word held for `key`, if it is held (feature `testing`).
    #[cfg(feature = "testing")]
    pub fn state_of(&self, key: &K) -> Option<u64> {
        let tag = self.fingerprint(key);
        let buckets = self.buckets_of(tag);
        self.find(tag, buckets).map(|(_, w)| unpack(w).1)
    }

    /// Forgets `key`: its next request finds a full limiter.
    pub fn reset(&self, key: &K) {
        let tag = self.fingerprint(key);
        let buckets = self.buckets_of(tag);
        while let Some((i, w)) = self.find(tag, buckets) {
            if self.slots[i].cas(w, 0).is_ok() {
                self.keys.fetch_sub(1, Ordering::Relaxed);
                return;
            }
        }
    }

    /// Drops every key whose state is back to full at `now` (no decision at or after
    /// `now` changes). Returns how many were dropped. O(table size); no background
    /// thread is needed, inserts also reclaim lazily.
    pub fn sweep_at(&self, now: u64) -> usize {
        let algorithm = self.algorithm.load();
        let mut dropped = 0;
        for slot in self.slots.iter() {
            let w = slot.load();
            let (tag, state) = unpack(w);
            if tag != 0 && is_idle(&algorithm, state, now) && slot.cas(w, 0).is_ok() {
                dropped += 1;
            }
        }
        self.keys.fetch_sub(dropped, Ordering::Relaxed);
        dropped
    }

    /// [`sweep_at`](Self::sweep_at) the clock's now.
    pub fn sweep(&self) -> usize {
        self.sweep_at(self.clock.now())
    }

    #[inline]
    fn fingerprint(&self, key: &K) -> u64 {
        match self.hasher.hash_one(key) {
            0 => 1, // 0 marks an empty slot
            h => h,
        }
    }

    /// Two candidate buckets from independent bits of the fingerprint.
    #[inline]
    fn buckets_of(&self, tag: u64) -> [usize; 2] {
        let n = self.buckets as u128;
        let b1 = ((tag as u128 * n) >> 64) as usize;
        let b2 = (((tag.rotate_left(32) ^ 0x9E37_79B9_7F4A_7C15) as u128 * n) >> 64) as usize;
        [
            b1,
            if b2 == b1 {
                (b1 + 1) % self.buckets
            } else {
                b2
            },
        ]
    }

    /// Starts loading the first slots of both buckets while the hint words are read:
    /// inserts fill a bucket from its start, so at the table's load (≈ 4.4 keys per
    /// bucket) the key is usually in one of those two lines, and the two cache misses
    /// overlap instead of following each other.
    #[inline]
    fn prefetch(&self, buckets: [usize; 2]) {
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        for b in buckets {
            let p: *const Slot = &self.slots[b * BUCKET];
            // SAFETY: a prefetch is only a hint; it reads nothing and cannot fault.
            #[allow(unsafe_code)]
            unsafe {
                core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast())
            };
        }
        #[cfg(not(all(target_arch = "x86_64", not(loom))))]
        let _ = buckets;
    }

    /// Finds `tag`'s slot: one load of each bucket's hint word, then a full load only
    /// of the slots whose hint byte matches (a stale or colliding hint costs one wasted
    /// load; the fingerprint in the slot itself decides).
    #[inline]
    fn find(&self, tag: u64, buckets: [usize; 2]) -> Option<(usize, u128)> {
        let h = hint_of(tag);
        for b in buckets {
            let mut candidates = matching_bytes(self.hints[b].load(Ordering::Acquire), h);
            while candidates != 0 {
                let i = b * BUCKET + (candidates.trailing_zeros() / 8) as usize;
                candidates &= candidates - 1;
                let w = self.slots[i].load();
                if unpack(w).0 == tag {
                    return Some((i, w));
                }
            }
        }
        None
    }

    /// Records slot `i`'s hint (only under its bucket's insert lock).
    fn set_hint(&self, i: usize, tag: u64) {
        let (b, j) = (i / BUCKET, (i % BUCKET) as u32 * 8);
        let word = &self.hints[b];
        let old = word.load(Ordering::Relaxed);
        let new = (old & !(0xFF << j)) | (u64::from(hint_of(tag)) << j);
        word.store(new, Ordering::Release);
    }

    /// The hot path: the key is present; one CAS over (fingerprint, state). `None` if
    /// the key is not held (or its slot was reclaimed while we looked).
    #[inline(always)]
    fn update_existing(
        &self,
        a: &A,
        tag: u64,
        buckets: [usize; 2],
        now: u64,
        cost: u64,
    ) -> Result<Option<Decision>, CheckError> {
        'lookup: loop {
            let Some((i, mut w)) = self.find(tag, buckets) else {
                return Ok(None);
            };
            loop {
                let t = a.decide(unpack(w).1, now, cost)?;
                let Some(next) = t.next else {
                    return Ok(Some(t.decision));
                };
                match self.slots[i].cas(w, pack(tag, next)) {
                    Ok(()) => return Ok(Some(t.decision)),
                    // Still ours (another thread updated it): decide again.
                    Err(actual) if unpack(actual).0 == tag => w = actual,
                    // The slot was reclaimed in between: look the key up again.
                    Err(_) => continue 'lookup,
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn insert(
        &self,
        a: &A,
        tag: u64,
        buckets: [usize; 2],
        now: u64,
        cost: u64,
        state: u64,
        decision: Decision,
    ) -> Result<Decision, CheckError> {
        let _guard = BucketLocks::acquire(&self.locks, buckets);
        // Another insert of this key may have won the locks first.
        if let Some(d) = self.update_existing(a, tag, buckets, now, cost)? {
            return Ok(d);
        }
        let fresh = pack(tag, state);
        // Room under the cap: the emptier bucket's first free slot.
        if self.keys.fetch_add(1, Ordering::Relaxed) < self.max_keys {
            let (emptier, other) = if self.free_in(buckets[0]) >= self.free_in(buckets[1]) {
                (buckets[0], buckets[1])
            } else {
                (buckets[1], buckets[0])
            };
            for b in [emptier, other] {
                for i in b * BUCKET..(b + 1) * BUCKET {
                    // Only inserts fill empty slots, and we hold both buckets' locks.
                    if self.slots[i].cas(0, fresh).is_ok() {
                        self.set_hint(i, tag);
                        return Ok(decision);
                    }
                }
            }
        }
        self.keys.fetch_sub(1, Ordering::Relaxed);
        // No room: replace an idle key in place (the count is unchanged).
        let mut soonest: Option<(usize, u128, u64)> = None;
        for b in buckets {
            for i in b * BUCKET..(b + 1) * BUCKET {
                let w = self.slots[i].load();
                let (t, s) = unpack(w);
                if t == 0 {
                    continue;
                }
                let reset = a
                    .decide(s, now, 0)
                    .map_or(u64::MAX, |t| t.decision.reset_after_nanos());
                if reset == 0 && self.slots[i].cas(w, fresh).is_ok() {
                    self.set_hint(i, tag);
                    return Ok(decision);
                }
                if soonest.is_none_or(|(_, _, r)| reset < r) {
                    soonest = Some((i, w, reset));
                }
            }
        }
        match (self.overflow, soonest) {
            (Overflow::EvictSoonestFull, Some((i, w, _)))
                if self.slots[i].cas(w, fresh).is_ok() =>
            {
                // Like every path that writes a key into a slot: the hint is published
                // before the locks are released, so the next lookup finds the key.
                self.set_hint(i, tag);
                Ok(decision)
            }
            _ => Err(CheckError::KeyTableFull {
                max_keys: self.max_keys as u64,
            }),
        }
    }

    fn free_in(&self, b: usize) -> usize {
        (b * BUCKET..(b + 1) * BUCKET)
            .filter(|&i| unpack(self.slots[i].load()).0 == 0)
            .count()
    }

    /// Keys held, by scanning the table (feature `testing`).
    #[cfg(feature = "testing")]
    pub fn count_slots(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| unpack(s.load()).0 != 0)
            .count()
    }
}

/// A boxed slice of `n` values, or the allocation error.
fn filled<T>(
    n: usize,
    make: impl Fn() -> T,
) -> Result<Box<[T]>, alloc::collections::TryReserveError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)?;
    v.extend((0..n).map(|_| make()));
    Ok(v.into_boxed_slice())
}

/// The hint byte of a fingerprint: its top 8 bits.
#[inline]
fn hint_of(tag: u64) -> u8 {
    (tag >> 56) as u8
}

/// A mask with bit 7 of every byte of `word` that may equal `byte` (SWAR "has zero
/// byte" on `word ^ byte…byte`). False positives are possible, false negatives not.
#[inline]
fn matching_bytes(word: u64, byte: u8) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let x = word ^ (ONES * u64::from(byte));
    let m = x.wrapping_sub(ONES) & !x & HIGHS;
    // Only the bytes that hold slots of this bucket.
    if BUCKET >= 8 {
        m
    } else {
        m & ((1u64 << (BUCKET * 8)) - 1)
    }
}

fn is_idle<A: Algorithm>(a: &A, state: u64, now: u64) -> bool {
    a.decide(state, now, 0)
        .is_ok_and(|t| t.decision.reset_after_nanos() == 0)
}

/// A bucket's insert lock: one byte, spun on briefly (held for a few loads).
#[cfg(not(loom))]
type BucketLock = AtomicU8;
/// Under loom, a modelled mutex: a spin lock's busy loop would explode the model.
#[cfg(loom)]
type BucketLock = loom::sync::Mutex<()>;

fn new_lock() -> BucketLock {
    #[cfg(not(loom))]
    return AtomicU8::new(0);
    #[cfg(loom)]
    return loom::sync::Mutex::new(());
}

/// Both buckets' insert locks, taken in index order (no deadlock), released on drop.
struct BucketLocks<'a> {
    #[cfg(not(loom))]
    locks: &'a [BucketLock],
    #[cfg(not(loom))]
    held: [usize; 2],
    #[cfg(loom)]
    _guards: (
        loom::sync::MutexGuard<'a, ()>,
        loom::sync::MutexGuard<'a, ()>,
    ),
}

impl<'a> BucketLocks<'a> {
    fn acquire(locks: &'a [BucketLock], buckets: [usize; 2]) -> Self {
        let held = [buckets[0].min(buckets[1]), buckets[0].max(buckets[1])];
        #[cfg(loom)]
        {
            let first = locks[held[0]].lock().unwrap();
            let second = locks[held[1]].lock().unwrap();
            Self {
                _guards: (first, second),
            }
        }
        #[cfg(not(loom))]
        {
            for &b in &held {
                let backoff = Backoff::new();
                while locks[b]
                    .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_err()
                {
                    backoff.snooze();
                }
            }
            Self { locks, held }
        }
    }
}

#[cfg(not(loom))]
impl Drop for BucketLocks<'_> {
    fn drop(&mut self) {
        for &b in self.held.iter().rev() {
            self.locks[b].store(0, Ordering::Release);
        }
    }
}

/// One key of a [`KeyedLimiter`], as a [`Limit`](crate::stack::Limit) for stacking.
#[derive(Debug)]
pub struct KeyedLimit<'a, K: ?Sized, A: Copy, C> {
    limiter: &'a KeyedLimiter<K, A, C>,
    key: &'a K,
}

impl<K: Hash + ?Sized, A: Algorithm + Copy, C: Clock> KeyedLimiter<K, A, C> {
    /// `key`'s limit, to stack with others in [`stack::check_all`](crate::stack::check_all).
    pub fn limit_for<'a>(&'a self, key: &'a K) -> KeyedLimit<'a, K, A, C> {
        KeyedLimit { limiter: self, key }
    }

    /// Gives back `cost` units taken from `key` by an admission at `now`.
    pub fn refund_at(&self, key: &K, now: u64, cost: u64) {
        let a = self.algorithm.load();
        let tag = self.fingerprint(key);
        let buckets = self.buckets_of(tag);
        while let Some((i, w)) = self.find(tag, buckets) {
            let Some(next) = a.refund(unpack(w).1, now, cost) else {
                return;
            };
            if self.slots[i].cas(w, pack(tag, next)).is_ok() {
                return;
            }
        }
    }
}

impl<K: Hash + ?Sized, A: Algorithm + Copy, C: Clock> crate::stack::Limit
    for KeyedLimit<'_, K, A, C>
{
    fn acquire_at(&self, now: u64, cost: u64) -> Result<Decision, CheckError> {
        self.limiter.check_at(self.key, now, cost)
    }
    fn refund_at(&self, now: u64, cost: u64) {
        self.limiter.refund_at(self.key, now, cost)
    }
}
