//! The table behind a [`KeyedLimiter`](super::limiter::KeyedLimiter): buckets of slots, their
//! hint words, lookup, insert, eviction and sweep.
//!
//! Invariants:
//! - a key is held in at most one slot: inserts hold both candidate buckets' locks
//!   and rescan before claiming a slot (checked by a loom model);
//! - every path that writes a key into a slot — an empty slot, an idle key replaced,
//!   an eviction — publishes the slot's hint byte before the locks are released, so
//!   the next lookup of that key finds it (checked by a loom model and the full-table
//!   model test);
//! - at most `max_keys` keys are held; memory is fixed at creation.

use alloc::boxed::Box;
use alloc::collections::TryReserveError;
use alloc::vec::Vec;

use super::locks::BucketLocks;
use super::slot::{pack, unpack, Slot};
use crate::admission::Admission;
use crate::algorithm::Algorithm;
use crate::decision::{Decision, KeyedError};
use crate::refund_ledger::RefundLedger;
use crate::refund_log::RunLog;
use crate::sync::{AtomicU64, AtomicUsize, Ordering, Prefetcher, SpinLock, COMPACT, LOOM};
use crate::word::Transition;

/// What a new key gets when all `max_keys` keys are still active.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overflow {
    /// Refuse the new key with [`KeyedError::KeyTableFull`]: existing keys keep their
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

/// Buckets that share one refund ledger: about 71 keys at the table's fill, for
/// about a third of a byte per key (with the logs below, the table stays under 32
/// bytes a key at a million keys). A neighbour's refund only makes a refund here
/// give back less (and the log of places tells most of those apart), and refunds of
/// one ledger take turns.
const BUCKETS_PER_LEDGER: usize = 16;

/// One log of refunded places per this many ledgers, shared by the keys whose
/// fingerprints pick it (a log serves one key at a time: a key that takes it over
/// starts it afresh, and the one that had it gives back by the ledger's total alone,
/// less than the log would have told). At most [`MOST_LOGS`]: about 0.3 byte per key
/// at capacity, and 680 KiB at most.
const LEDGERS_PER_LOG: usize = 32;
/// Runs a table's log keeps (see `refund_log`).
const TABLE_RUNS: usize = if LOOM { 2 } else { 16 };
/// The most refund logs a table keeps.
const MOST_LOGS: usize = 1024;

/// Slots per bucket (two cache lines; small under loom, to keep models tractable).
pub(crate) const BUCKET: usize = if LOOM { 2 } else { 8 };

/// Where a key may live: its fingerprint and its two candidate buckets.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probe {
    tag: u64,
    buckets: [usize; 2],
}

impl Probe {
    /// The fingerprint probed for.
    pub(crate) fn tag(&self) -> u64 {
        self.tag
    }
}

pub(crate) struct Table {
    slots: Box<[Slot]>,
    /// One word per bucket: the low byte of each slot's fingerprint (a hint).
    hints: Box<[AtomicU64]>,
    locks: Box<[SpinLock]>,
    /// One refund ledger per [`BUCKETS_PER_LEDGER`] buckets, chosen by a key's first
    /// bucket (which never changes for a key): its keys' refunds take turns there.
    ledgers: Box<[RefundLedger]>,
    /// Where refunds gave back from, a log per key at a time (see [`LEDGERS_PER_LOG`]).
    logs: Box<[RunLog<TABLE_RUNS>]>,
    buckets: usize,
    max_keys: usize,
    keys: AtomicUsize,
    prefetcher: Prefetcher,
    pub(crate) overflow: Overflow,
}

impl Table {
    /// A table for `max_keys` keys (at least 1), or the allocation error.
    pub(crate) fn try_new(max_keys: usize) -> Result<Self, TryReserveError> {
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
            slots: filled(buckets.saturating_mul(BUCKET), || Slot::new(0))?,
            hints: filled(buckets, || AtomicU64::new(0))?,
            locks: filled(buckets, SpinLock::new)?,
            ledgers: filled(buckets.div_ceil(BUCKETS_PER_LEDGER), RefundLedger::new)?,
            logs: filled(
                buckets
                    .div_ceil(BUCKETS_PER_LEDGER * LEDGERS_PER_LOG)
                    .min(MOST_LOGS),
                RunLog::new,
            )?,
            buckets,
            max_keys,
            keys: AtomicUsize::new(0),
            prefetcher: Prefetcher::detect(),
            overflow: Overflow::RejectNewKeys,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.keys.load(Ordering::Relaxed)
    }

    pub(crate) fn max_keys(&self) -> usize {
        self.max_keys
    }

    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn bytes(&self) -> usize {
        self.slots.len() * core::mem::size_of::<Slot>()
            + self.hints.len() * core::mem::size_of::<AtomicU64>()
            + self.locks.len() * core::mem::size_of::<SpinLock>()
            + self.ledgers.len() * core::mem::size_of::<RefundLedger>()
            + self.logs.len() * core::mem::size_of::<RunLog<TABLE_RUNS>>()
    }

    /// `tag`'s two candidate buckets, from independent bits of the fingerprint: the
    /// first from its top bits, the second from bits 31 down (both by multiply-shift
    /// range reduction, exact for up to 2^32 buckets); the hint byte comes from the
    /// low 8 bits, which neither uses below 2^24 buckets. (A hint drawn from the bits
    /// that chose the bucket would be the same for every key there, and useless.)
    #[inline(always)]
    pub(crate) fn probe(&self, tag: u64) -> Probe {
        let b1 = reduce(tag, self.buckets);
        let b2 = reduce(tag.rotate_left(32) ^ 0x9E37_79B9_7F4A_7C15, self.buckets);
        let b2 = if b2 == b1 {
            (b1 + 1) % self.buckets
        } else {
            b2
        };
        Probe {
            tag,
            buckets: [b1, b2],
        }
    }

    /// Starts loading the first slots of both buckets while the hint words are read:
    /// inserts fill a bucket from its start, so at the table's load (≈ 4.4 keys per
    /// bucket) the key is usually in one of those two lines, and the two cache misses
    /// overlap instead of following each other. Asked for to be written where the CPU
    /// can ([`Prefetcher`]): the check's compare-and-swap follows.
    #[inline(always)]
    pub(crate) fn prefetch(&self, p: Probe) {
        for b in p.buckets {
            self.prefetcher.line(&self.slots[b * BUCKET]);
        }
    }

    /// Finds `tag`'s slot. Both buckets' hint words are loaded at once and the first
    /// slot whose hint byte matches, in either bucket, is chosen without a branch: a
    /// key sits in either of its buckets about as often, so "which bucket" is a coin
    /// toss the branch predictor loses half the time (and the second hint load waited
    /// for the first). Only when that first guess is not the key (a colliding hint, or
    /// a key not held whose hint byte some other slot shares) are all candidates
    /// scanned, out of line. A stale or colliding hint costs a wasted load; the
    /// fingerprint in the slot itself decides.
    #[inline(always)]
    pub(crate) fn find(&self, p: Probe) -> Option<(usize, u128)> {
        if COMPACT {
            return self.find_scan(p);
        }
        let h = hint_of(p.tag);
        let [b1, b2] = p.buckets;
        let m1 = matching_bytes(self.hints[b1].load(Ordering::Acquire), h);
        let m2 = matching_bytes(self.hints[b2].load(Ordering::Acquire), h);
        // All ones when the first bucket has a candidate: a select by masks, which
        // compiles to no branch.
        let first = 0usize.wrapping_sub(usize::from(m1 != 0));
        let first_bits = 0u64.wrapping_sub(u64::from(m1 != 0));
        let (b, m) = ((b1 & first) | (b2 & !first), m1 | (m2 & !first_bits));
        if m == 0 {
            // No hint byte matches in either bucket: the key is not held.
            return None;
        }
        let i = b * BUCKET + (m.trailing_zeros() / 8) as usize;
        let w = self.slots[i].load();
        if unpack(w).0 == p.tag {
            return Some((i, w));
        }
        self.find_scan(p)
    }

    /// [`find`](Self::find)'s full scan: every slot of both buckets whose hint byte
    /// matches, in order.
    #[inline(never)]
    fn find_scan(&self, p: Probe) -> Option<(usize, u128)> {
        let h = hint_of(p.tag);
        for b in p.buckets {
            let mut candidates = matching_bytes(self.hints[b].load(Ordering::Acquire), h);
            while candidates != 0 {
                let i = b * BUCKET + (candidates.trailing_zeros() / 8) as usize;
                candidates &= candidates - 1;
                let w = self.slots[i].load();
                if unpack(w).0 == p.tag {
                    return Some((i, w));
                }
            }
        }
        None
    }

    /// The state held for `tag`, if any.
    pub(crate) fn state_of(&self, tag: u64) -> Option<u64> {
        self.find(self.probe(tag)).map(|(_, w)| unpack(w).1)
    }

    /// Records slot `i`'s hint (only under its bucket's insert lock).
    fn set_hint(&self, i: usize, tag: u64) {
        let (b, j) = (i / BUCKET, (i % BUCKET) as u32 * 8);
        let word = &self.hints[b];
        let old = word.load(Ordering::Relaxed);
        let new = (old & !(0xFF << j)) | (u64::from(hint_of(tag)) << j);
        word.store(new, Ordering::Release);
    }

    /// Writes `fresh` (a new key and its first state) over slot `i`, which held `w`
    /// (idle at `idle_at`, if it says), and publishes its hint: the one way a key
    /// enters a slot.
    fn claim(&self, i: usize, w: u128, fresh: u128, idle_at: Option<u64>) -> bool {
        let claimed = self.replace(i, w, fresh, idle_at);
        if claimed {
            self.set_hint(i, unpack(fresh).0);
        }
        claimed
    }

    /// Replaces slot `i`'s word `w` with `next` by compare-and-swap. When `w` held a
    /// key, the swap runs under that key's ledger and tells it the word went back by
    /// everything: an admission of the key from before gives nothing back to the key
    /// when it returns as new (evicted, reclaimed or swept; a refund either lands
    /// before, on the old word, or sees the mark). A key idle at `idle_at` (swept, or
    /// reclaimed idle) is marked as a sweep, which its neighbours' refunds read past.
    fn replace(&self, i: usize, w: u128, next: u128, idle_at: Option<u64>) -> bool {
        let held = unpack(w).0;
        if held == 0 {
            return self.slots[i].cas(w, next).is_ok();
        }
        let swap = || self.slots[i].cas(w, next).is_ok();
        match idle_at {
            Some(now) => self.ledger(held).sweeping(now, || {
                let replaced = swap();
                (replaced, replaced)
            }),
            None => self.ledger(held).refunding(|_| {
                let replaced = swap();
                (replaced, if replaced { u64::MAX } else { 0 })
            }),
        }
    }

    /// The hot path: the key is present; one CAS over (fingerprint, state). `None` if
    /// the key is not held (or its slot was reclaimed while we looked).
    #[inline(always)]
    pub(crate) fn update_existing<A: Algorithm>(
        &self,
        a: &A,
        p: Probe,
        now: u64,
        cost: u64,
    ) -> Result<Option<Decision>, KeyedError> {
        loop {
            let Some((i, w)) = self.find(p) else {
                return Ok(None);
            };
            if let Some(d) = decide_in(a, &self.slots[i], w, p.tag, now, cost)? {
                return Ok(Some(d));
            }
            // The slot was reclaimed in between: look the key up again.
        }
    }

    /// [`update_existing`](Self::update_existing) at slot `i`, where the caller last
    /// saw `tag`: `None` if `i` is out of range or holds another key (or none), and the
    /// caller looks the key up. Only a hint: the slot's fingerprint is compared before
    /// its state is used, as `find` compares it.
    #[inline(always)]
    pub(crate) fn update_at<A: Algorithm>(
        &self,
        a: &A,
        i: usize,
        tag: u64,
        now: u64,
        cost: u64,
    ) -> Result<Option<Decision>, KeyedError> {
        match self.slots.get(i) {
            Some(slot) => {
                let w = slot.load();
                if unpack(w).0 != tag {
                    return Ok(None);
                }
                decide_in(a, slot, w, tag, now, cost)
            }
            None => Ok(None),
        }
    }

    /// The slot holding `tag`, if any.
    pub(crate) fn slot_of(&self, tag: u64) -> Option<usize> {
        self.find(self.probe(tag)).map(|(i, _)| i)
    }

    /// Inserts `tag` with the state `state` its first request left (`decision`), or
    /// finds it inserted by a concurrent insert and decides there.
    pub(crate) fn insert<A: Algorithm>(
        &self,
        a: &A,
        p: Probe,
        (now, cost): (u64, u64),
        first: Transition,
    ) -> Result<Taken, KeyedError> {
        let buckets = p.buckets;
        let _locks = BucketLocks::acquire(&self.locks, buckets);
        // Another insert of this key may have won the locks first.
        if let Some(taken) = self.update_with(p, |state| recorded(a, state, now, cost))? {
            return Ok(taken);
        }
        let Some(state) = first.next else {
            return Ok((first.decision, None));
        };
        let decision = (first.decision, Some((a.initial_state(), state)));
        let fresh = pack(p.tag, state);
        // Checks of the keys held go on without the locks: a slot chosen below can
        // change before it is claimed. Each retry follows another thread's successful
        // write, so the loop ends when they do.
        loop {
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
                        if self.claim(i, 0, fresh, None) {
                            return Ok(decision);
                        }
                    }
                }
            }
            self.keys.fetch_sub(1, Ordering::Relaxed);
            // No room: replace an idle key in place (the count is unchanged).
            let mut soonest: Option<(usize, u128, u64)> = None;
            let mut raced = false;
            for b in buckets {
                for (i, w, reset) in self.held_in(a, b, now) {
                    if reset == 0 {
                        if self.claim(i, w, fresh, Some(now)) {
                            return Ok(decision);
                        }
                        raced = true;
                    } else if soonest.is_none_or(|(_, _, r)| reset < r) {
                        soonest = Some((i, w, reset));
                    }
                }
            }
            match (self.overflow, soonest) {
                (Overflow::EvictSoonestFull, Some((i, w, _))) => {
                    if self.claim(i, w, fresh, None) {
                        return Ok(decision);
                    }
                    // The key chosen was checked (or reset) meanwhile: choose again.
                }
                // A slot changed while we looked (a key emptied or charged): look again.
                _ if raced => {}
                // Both buckets empty while the table is at its cap (its keys are
                // elsewhere): free the soonest-full key of the nearest bucket that
                // holds one, then insert under the cap. Without this a newcomer was
                // refused about once in 20,000 inserts of a full 1,000-key table.
                (Overflow::EvictSoonestFull, None) if self.evict_near(a, buckets[0], now) => {}
                _ => {
                    return Err(KeyedError::KeyTableFull {
                        max_keys: self.max_keys as u64,
                    })
                }
            }
        }
    }

    /// Empties the slot of the key that is full soonest in the first bucket after
    /// `from` (wrapping) that holds a key; whether one was freed.
    fn evict_near<A: Algorithm>(&self, a: &A, from: usize, now: u64) -> bool {
        let buckets = self.slots.len() / BUCKET;
        for step in 1..=buckets {
            let b = (from + step) % buckets;
            loop {
                let soonest = self.held_in(a, b, now).min_by_key(|&(_, _, reset)| reset);
                let Some((i, w, _)) = soonest else {
                    break; // an empty bucket too: the next
                };
                if self.replace(i, w, 0, None) {
                    self.keys.fetch_sub(1, Ordering::Relaxed);
                    return true;
                }
                // That key was checked meanwhile: choose again in this bucket.
            }
        }
        false
    }

    /// The keys held in bucket `b`: each slot, its word, and how long until the key
    /// is full again at `now` (`u64::MAX` for a state the algorithm cannot read).
    fn held_in<'t, A: Algorithm>(
        &'t self,
        a: &'t A,
        b: usize,
        now: u64,
    ) -> impl Iterator<Item = (usize, u128, u64)> + 't {
        (b * BUCKET..(b + 1) * BUCKET).filter_map(move |i| {
            let w = self.slots[i].load();
            let (t, s) = unpack(w);
            (t != 0).then(|| {
                let reset = a
                    .decide(s, now, 0)
                    .map_or(u64::MAX, |t| t.decision.reset_after_nanos());
                (i, w, reset)
            })
        })
    }

    fn free_in(&self, b: usize) -> usize {
        (b * BUCKET..(b + 1) * BUCKET)
            .filter(|&i| unpack(self.slots[i].load()).0 == 0)
            .count()
    }

    /// Runs `transition` on `tag`'s state and publishes its result with one CAS over
    /// (fingerprint, state), as [`update_existing`](Self::update_existing) does for a
    /// check; `Ok(None)` if the key is not held. (Bookings: off the checks' hot path.)
    pub(crate) fn update_with<T, E>(
        &self,
        p: Probe,
        mut transition: impl FnMut(u64) -> Result<Transition<T>, E>,
    ) -> Result<Option<T>, E> {
        'find: while let Some((i, mut w)) = self.find(p) {
            loop {
                let t = transition(unpack(w).1)?;
                let Some(next) = t.next else {
                    return Ok(Some(t.decision));
                };
                match self.slots[i].cas(w, pack(p.tag, next)) {
                    Ok(()) => return Ok(Some(t.decision)),
                    Err(actual) if unpack(actual).0 == p.tag => w = actual,
                    // Reclaimed in between: look the key up again.
                    Err(_) => continue 'find,
                }
            }
        }
        Ok(None)
    }

    /// Forgets `tag`, and tells its ledger that the word went back by everything:
    /// an admission from before gives nothing back to the key that comes next.
    pub(crate) fn remove(&self, tag: u64) {
        let p = self.probe(tag);
        self.ledger(tag).refunding(|_| {
            while let Some((i, w)) = self.find(p) {
                if self.slots[i].cas(w, 0).is_ok() {
                    self.keys.fetch_sub(1, Ordering::Relaxed);
                    break;
                }
            }
            ((), u64::MAX)
        })
    }

    /// The refund ledger of the key whose fingerprint is `tag`: an admission notes
    /// its total before it writes.
    #[inline]
    pub(crate) fn ledger(&self, tag: u64) -> &RefundLedger {
        let first = reduce(tag, self.buckets);
        &self.ledgers[first / BUCKETS_PER_LEDGER]
    }

    /// Runs `change` (a new configuration) so that no admission from before it gives
    /// anything back after it ([`RefundLedger::all_back`]).
    pub(crate) fn retire_admissions(&self, change: impl FnOnce()) {
        RefundLedger::all_back(&self.ledgers, change);
    }

    /// Gives back to `tag` what `admission` took ([`Admission::give_back`]) at the
    /// time `now` gives, read after each load of the slot, under the key's ledger:
    /// the state it changed and what it wrote, or `None` (the key is not held, or the
    /// algorithm gives nothing back).
    pub(crate) fn refund<A: Algorithm>(
        &self,
        a: &A,
        tag: u64,
        admission: &Admission,
        now: impl Fn() -> u64,
    ) -> Option<(u64, u64)> {
        // Another key's (or table's) admission gives nothing back here.
        if !admission.is_from(self.ledger(tag).origin(tag)) {
            return None;
        }
        let p = self.probe(tag);
        // The log by bits the buckets do not use: keys of one ledger spread over logs.
        let log = &self.logs[reduce(tag.rotate_left(24), self.logs.len())];
        // Its key was not among the keys a sweep since dropped when the word it wrote
        // was not idle at the sweep's time.
        let held_at = |t| admission.after().is_some_and(|w| !is_idle(a, w, t));
        self.ledger(tag)
            .giving_back(log, (tag, held_at), admission, |seen| {
                while let Some((i, w)) = self.find(p) {
                    let state = unpack(w).1;
                    let Some((next, undo)) =
                        admission.give_back_ledgered(a, state, now(), Some(seen))
                    else {
                        return (None, 0);
                    };
                    if next == state {
                        return (Some((state, next)), 0);
                    }
                    if self.slots[i].cas(w, pack(tag, next)).is_ok() {
                        let moved = if undo { 0 } else { state.abs_diff(next) };
                        return (Some((state, next)), moved);
                    }
                }
                (None, 0)
            })
    }

    /// Drops every key whose state carries no information at `now`.
    pub(crate) fn sweep<A: Algorithm>(&self, a: &A, now: u64) -> usize {
        let mut dropped = 0;
        for (i, slot) in self.slots.iter().enumerate() {
            let w = slot.load();
            let (tag, state) = unpack(w);
            if tag != 0 && is_idle(a, state, now) && self.replace(i, w, 0, Some(now)) {
                dropped += 1;
            }
        }
        self.keys.fetch_sub(dropped, Ordering::Relaxed);
        dropped
    }

    /// Keys held, by scanning every slot.
    #[cfg(feature = "testing")]
    pub(crate) fn count_slots(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| unpack(s.load()).0 != 0)
            .count()
    }
}

/// A boxed slice of `n` values, or the allocation error.
fn filled<T>(n: usize, make: impl Fn() -> T) -> Result<Box<[T]>, TryReserveError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)?;
    v.extend((0..n).map(|_| make()));
    Ok(v.into_boxed_slice())
}

/// Decides for `tag` on `slot`, last read as `w` (holding `tag`), and publishes
/// the transition with one CAS over (fingerprint, state), deciding again while
/// other threads update the same key. `None` if the slot is taken over by another
/// key (or emptied) before the CAS lands: nothing was written.
#[inline(always)]
fn decide_in<A: Algorithm>(
    a: &A,
    slot: &Slot,
    mut w: u128,
    tag: u64,
    now: u64,
    cost: u64,
) -> Result<Option<Decision>, KeyedError> {
    loop {
        let t = a.decide(unpack(w).1, now, cost)?;
        let Some(next) = t.next else {
            return Ok(Some(t.decision));
        };
        match slot.cas(w, pack(tag, next)) {
            Ok(()) => return Ok(Some(t.decision)),
            // Still ours (another thread updated it): decide again.
            Err(actual) if unpack(actual).0 == tag => w = actual,
            Err(_) => return Ok(None),
        }
    }
}

/// A decision, and what its write changed (the state found, the state written): what
/// an [`Admission`] is made of.
pub(crate) type Taken = (Decision, Option<(u64, u64)>);

/// `a`'s transition on `state`, its decision carrying what it writes over what.
pub(crate) fn recorded<A: Algorithm>(
    a: &A,
    state: u64,
    now: u64,
    cost: u64,
) -> Result<Transition<Taken>, KeyedError> {
    let t = a.decide(state, now, cost)?;
    Ok(Transition {
        decision: (t.decision, t.next.map(|next| (state, next))),
        next: t.next,
    })
}

/// The hint byte of a fingerprint: its low 8 bits (see [`Table::probe`]).
#[inline]
fn hint_of(tag: u64) -> u8 {
    tag as u8
}

/// `x`'s top bits scaled to `0..n`: `⌊x · n / 2^64⌋`, with a 64-bit multiply of the top
/// 32 bits when `n` fits in 32 bits (32-bit targets have no cheap 128-bit product).
#[inline]
fn reduce(x: u64, n: usize) -> usize {
    match u32::try_from(n) {
        Ok(n) => (((x >> 32) * u64::from(n)) >> 32) as usize,
        Err(_) => ((u128::from(x) * n as u128) >> 64) as usize,
    }
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

/// A state that is back to full: dropping it changes no decision at or after `now`.
fn is_idle<A: Algorithm>(a: &A, state: u64, now: u64) -> bool {
    a.decide(state, now, 0)
        .is_ok_and(|t| t.decision.reset_after_nanos() == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::gcra::Gcra;
    use crate::quota::Quota;

    /// A table of 10,000 keys (0..10,000 hashed by `hasher`), each inserted, and their
    /// probes.
    fn ten_thousand_keys(hasher: ahash::RandomState) -> (Table, Vec<Probe>) {
        let gcra = Gcra::new(Quota::per_second(1).unwrap());
        let table = Table::try_new(10_000).unwrap();
        let probes: Vec<Probe> = (0..10_000u64)
            .map(|k| table.probe(hasher.hash_one(k).max(1)))
            .collect();
        for p in &probes {
            let first = gcra.decide(gcra.initial_state(), 0, 1).unwrap();
            table.insert(&gcra, *p, (0, 1), first).unwrap();
        }
        (table, probes)
    }

    /// A lookup loads, besides the hint words, the slots whose hint byte matches: about
    /// one per key. (When the hint came from the same bits as the first bucket, every
    /// key in a bucket had the same hint, and a lookup loaded the whole bucket.)
    #[test]
    fn a_lookup_loads_about_one_slot() {
        let (table, probes) = ten_thousand_keys(ahash::RandomState::with_seeds(1, 2, 3, 4));
        let loads: u32 = probes
            .iter()
            .map(|p| {
                p.buckets
                    .iter()
                    .map(|&b| {
                        matching_bytes(table.hints[b].load(Ordering::Relaxed), hint_of(p.tag))
                            .count_ones()
                    })
                    .sum::<u32>()
            })
            .sum();
        let per_key = f64::from(loads) / probes.len() as f64;
        assert!(per_key < 1.2, "{per_key} slot loads per lookup");
    }

    /// Every held key is found, also those whose branch-free first guess is another
    /// key's slot (a hint byte in the first bucket that matches while the key sits in
    /// the second, or an earlier matching byte in its own bucket): those go to the
    /// full scan. Absent keys are not found.
    #[test]
    fn every_key_is_found_also_behind_a_colliding_hint() {
        let hasher = ahash::RandomState::with_seeds(5, 6, 7, 8);
        let (table, probes) = ten_thousand_keys(hasher.clone());
        let mut behind_a_collision = 0;
        for p in &probes {
            let (i, w) = table.find(*p).expect("a held key is found");
            assert_eq!(unpack(w).0, p.tag);
            let m1 = matching_bytes(
                table.hints[p.buckets[0]].load(Ordering::Relaxed),
                hint_of(p.tag),
            );
            let guess = if m1 != 0 {
                p.buckets[0] * BUCKET + (m1.trailing_zeros() / 8) as usize
            } else {
                let m2 = matching_bytes(
                    table.hints[p.buckets[1]].load(Ordering::Relaxed),
                    hint_of(p.tag),
                );
                p.buckets[1] * BUCKET + (m2.trailing_zeros() / 8) as usize
            };
            behind_a_collision += usize::from(guess != i);
        }
        assert!(
            behind_a_collision > 10,
            "{behind_a_collision} keys behind a colliding hint"
        );
        let absent = (10_000..20_000u64)
            .filter(|k| table.find(table.probe(hasher.hash_one(k).max(1))).is_some());
        assert_eq!(absent.count(), 0);
    }
}
