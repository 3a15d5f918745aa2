//! A shard of a [`KeyedLog`](super::KeyedLog): its slots, index and rings behind one
//! lock, and everything done with the lock held (see the module's invariant).

use alloc::boxed::Box;
use alloc::collections::TryReserveError;
use alloc::vec::Vec;

use crossbeam_utils::CachePadded;

use crate::decision::{Decision, KeyedError};
use crate::sync::{AtomicU64, AtomicUsize, Ordering, SpinGuard, SpinLock};

/// The low bits of an index word: the slot id + 1 (ids are below 2^24); the high bits
/// are the key's fingerprint's, compared before the slot is read.
const ID_BITS: u32 = 25;
const ID_MASK: u64 = (1 << ID_BITS) - 1;
/// The end of a shard's free-slot list.
const NIL: u64 = u64::MAX;

/// The decision for a key with an empty log.
fn fresh(rule: Rule, cost: u64) -> Decision {
    Decision::admitted(
        rule.limit,
        rule.limit - cost,
        if cost > 0 { rule.window } else { 0 },
    )
}

/// The rule every key follows: `limit` units in any `window` ns.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rule {
    pub(super) limit: u64,
    pub(super) window: u64,
}

/// One key's place in a shard.
#[derive(Debug)]
pub(super) struct Slot {
    /// The key's fingerprint; 0 when free.
    pub(super) fp: AtomicU64,
    /// `head | len << 32` of the key's ring (oldest entry, entries held); when free,
    /// the next free slot (or `NIL`).
    pub(super) ring: AtomicU64,
    /// The latest time the key has been checked at.
    pub(super) seen: AtomicU64,
}

/// A part of the table behind one lock (see the module's invariant).
#[derive(Debug)]
pub(super) struct Shard {
    pub(super) lock: SpinLock,
    /// Keys held (also read without the lock, by `len`).
    pub(super) keys: AtomicUsize,
    /// The most keys held.
    pub(super) cap: usize,
    /// The first free slot, or `NIL`.
    pub(super) free: AtomicU64,
    /// A lower bound on the earliest time any held key's log is entirely expired.
    pub(super) reclaim_at: AtomicU64,
    /// No key taken in starts earlier: the latest time of every key dropped.
    pub(super) floor: AtomicU64,
    /// How many keys were dropped (reset or reclaimed): an admission from before a
    /// drop gives nothing back after it.
    pub(super) drops: AtomicU64,
    pub(super) slots: Box<[Slot]>,
    /// Linear probing, at most half full: `fingerprint's high bits | (slot id + 1)`,
    /// 0 when empty.
    pub(super) index: Box<[AtomicU64]>,
    /// `cap` rings of `limit` timestamps.
    pub(super) entries: Box<[AtomicU64]>,
}

#[inline(always)]
pub(super) fn get(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

#[inline(always)]
pub(super) fn put(a: &AtomicU64, v: u64) {
    a.store(v, Ordering::Relaxed)
}

pub(super) fn filled<T>(n: usize, make: impl Fn() -> T) -> Result<Box<[T]>, TryReserveError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)?;
    v.extend((0..n).map(|_| make()));
    Ok(v.into_boxed_slice())
}

impl Shard {
    pub(super) fn try_new(cap: usize, limit: u64) -> Result<Self, TryReserveError> {
        let slots = filled(cap, || Slot {
            fp: AtomicU64::new(0),
            ring: AtomicU64::new(NIL),
            seen: AtomicU64::new(0),
        })?;
        // The free list: 0 → 1 → … → cap − 1.
        for (i, s) in slots.iter().enumerate() {
            if i + 1 < cap {
                put(&s.ring, i as u64 + 1);
            }
        }
        Ok(Self {
            lock: SpinLock::new(),
            keys: AtomicUsize::new(0),
            cap,
            free: AtomicU64::new(0),
            reclaim_at: AtomicU64::new(u64::MAX),
            floor: AtomicU64::new(0),
            drops: AtomicU64::new(0),
            slots,
            index: filled((cap * 2).next_power_of_two(), || AtomicU64::new(0))?,
            entries: filled(cap * limit as usize, || AtomicU64::new(0))?,
        })
    }

    pub(super) fn bytes(&self) -> usize {
        core::mem::size_of::<CachePadded<Shard>>()
            + self.slots.len() * core::mem::size_of::<Slot>()
            + (self.index.len() + self.entries.len()) * core::mem::size_of::<AtomicU64>()
    }

    pub(super) fn lock(&self, rule: Rule) -> Locked<'_> {
        Locked {
            _guard: self.lock.lock(),
            s: self,
            rule,
        }
    }
}

/// One key's ring, as read under the lock.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ring {
    pub(super) id: usize,
    pub(super) head: u64,
    pub(super) len: u64,
}

/// A shard whose lock is held: the only way to its contents.
pub(super) struct Locked<'a> {
    pub(super) _guard: SpinGuard<'a>,
    pub(super) s: &'a Shard,
    pub(super) rule: Rule,
}

impl Locked<'_> {
    pub(super) fn home(&self, fp: u64) -> usize {
        fp as usize & (self.s.index.len() - 1)
    }

    /// `fp`'s index position and slot id, if held.
    pub(super) fn find(&self, fp: u64) -> Option<(usize, usize)> {
        let mask = self.s.index.len() - 1;
        let mut i = self.home(fp);
        loop {
            let w = get(&self.s.index[i]);
            if w == 0 {
                return None;
            }
            if (w ^ fp) & !ID_MASK == 0 {
                let id = (w & ID_MASK) as usize - 1;
                if get(&self.s.slots[id].fp) == fp {
                    return Some((i, id));
                }
            }
            i = (i + 1) & mask;
        }
    }

    pub(super) fn ring(&self, id: usize) -> Ring {
        let w = get(&self.s.slots[id].ring);
        Ring {
            id,
            head: w & 0xFFFF_FFFF,
            len: w >> 32,
        }
    }

    pub(super) fn set_ring(&self, r: Ring) {
        put(&self.s.slots[r.id].ring, r.head | r.len << 32);
    }

    /// Where the ring's `i`-th entry (0 = oldest; `i < limit`) is stored.
    pub(super) fn at(&self, r: Ring, i: u64) -> &AtomicU64 {
        let mut j = r.head + i;
        if j >= self.rule.limit {
            j -= self.rule.limit;
        }
        &self.s.entries[r.id * self.rule.limit as usize + j as usize]
    }

    pub(super) fn entry(&self, r: Ring, i: u64) -> u64 {
        get(self.at(r, i))
    }

    /// How many leading entries satisfy `pred` (true, then false, along the ring).
    pub(super) fn count_while(&self, r: Ring, pred: impl Fn(u64) -> bool) -> u64 {
        let (mut lo, mut hi) = (0, r.len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.entry(r, mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Entries expired at `t` (at most `t − W`; `e + W` cannot overflow).
    pub(super) fn expired(&self, r: Ring, t: u64) -> u64 {
        let w = self.rule.window;
        self.count_while(r, |e| e + w <= t)
    }

    /// When the ring is entirely expired (0 if it is empty).
    pub(super) fn empty_at(&self, r: Ring) -> u64 {
        if r.len == 0 {
            0
        } else {
            self.entry(r, r.len - 1) + self.rule.window
        }
    }

    /// The textbook decision on `r` at `t` (no earlier than the key's latest time),
    /// and how many entries have expired by then. Reads only.
    pub(super) fn decide(&self, r: Ring, t: u64, cost: u64) -> (Decision, u64) {
        let Rule { limit, window } = self.rule;
        let expired = self.expired(r, t);
        let used = r.len - expired;
        let left = limit - used;
        // Entries are at most `t`, and the live ones later than `t − W`.
        let reset = if used > 0 {
            self.entry(r, r.len - 1) + window - t
        } else {
            0
        };
        if cost <= left {
            let reset = if cost > 0 { window } else { reset };
            return (Decision::admitted(limit, left - cost, reset), expired);
        }
        // The request fits once the oldest `cost − left` live entries have expired.
        let freeing = self.entry(r, expired + (cost - left) - 1);
        let retry = freeing + window - t;
        (Decision::rejected(limit, left, retry, reset), expired)
    }

    /// Lowers the shard's reclaim bound to when `r` empties (after a change to it).
    pub(super) fn note(&self, r: Ring) {
        let at = self.empty_at(r);
        if at < get(&self.s.reclaim_at) {
            put(&self.s.reclaim_at, at);
        }
    }

    /// A check of `cost > 0` on the held key in slot `id`: the decision, and the time
    /// its entries are recorded at (no earlier than the key's latest).
    pub(super) fn check(&self, id: usize, now: u64, cost: u64) -> (Decision, u64) {
        let slot = &self.s.slots[id];
        let t = now.max(get(&slot.seen));
        let mut r = self.ring(id);
        let (d, expired) = self.decide(r, t, cost);
        // What has expired by `t` stays expired: the time moves to `t`.
        put(&slot.seen, t);
        r.head += expired;
        if r.head >= self.rule.limit {
            r.head -= self.rule.limit;
        }
        r.len -= expired;
        if d.is_allowed() {
            for i in r.len..r.len + cost {
                put(self.at(r, i), t);
            }
            r.len += cost;
        }
        self.set_ring(r);
        self.note(r);
        (d, t)
    }

    /// Records `cost` entries at `now` (the key's latest time, if later) whether or
    /// not they fit: a settlement above its estimate. Past the limit, the newest
    /// entries take the oldest ones' places (the log refuses for a whole window
    /// from now: at most `limit` units of debt). Returns the key's standing.
    pub(super) fn charge(&self, id: usize, now: u64, cost: u64) -> Decision {
        let limit = self.rule.limit;
        let slot = &self.s.slots[id];
        let t = now.max(get(&slot.seen));
        let mut r = self.ring(id);
        let (_, expired) = self.decide(r, t, 0);
        put(&slot.seen, t);
        r.head += expired;
        if r.head >= limit {
            r.head -= limit;
        }
        r.len -= expired;
        for _ in 0..cost.min(limit) {
            if r.len == limit {
                // The oldest entry gives its place to a newer one: later to expire.
                r.head = if r.head + 1 == limit { 0 } else { r.head + 1 };
                r.len -= 1;
            }
            put(self.at(r, r.len), t);
            r.len += 1;
        }
        self.set_ring(r);
        self.note(r);
        let one = self.decide(r, t, 1).0;
        if one.is_allowed() {
            self.decide(r, t, 0).0
        } else {
            one
        }
    }

    /// The decision for the key `fp` at `now` (held or not), changing nothing.
    pub(super) fn peek(&self, fp: u64, now: u64, cost: u64) -> Decision {
        match self.find(fp) {
            Some((_, id)) => {
                let t = now.max(get(&self.s.slots[id].seen));
                self.decide(self.ring(id), t, cost).0
            }
            None => fresh(self.rule, cost),
        }
    }

    /// Takes in the new key `fp` with its first admission (`0 < cost ≤ limit`),
    /// reclaiming expired keys first if the shard is full: the decision, and the time
    /// its entries are recorded at.
    pub(super) fn insert(
        &self,
        fp: u64,
        now: u64,
        cost: u64,
        max_keys: usize,
    ) -> Result<(Decision, u64), KeyedError> {
        if self.s.keys.load(Ordering::Relaxed) == self.s.cap {
            let t = now.max(get(&self.s.floor));
            if get(&self.s.reclaim_at) <= t {
                self.reclaim(t);
            }
            if self.s.keys.load(Ordering::Relaxed) == self.s.cap {
                return Err(KeyedError::KeyTableFull {
                    max_keys: max_keys as u64,
                });
            }
        }
        let t = now.max(get(&self.s.floor));
        let id = get(&self.s.free) as usize;
        let slot = &self.s.slots[id];
        put(&self.s.free, get(&slot.ring));
        put(&slot.fp, fp);
        put(&slot.seen, t);
        let r = Ring {
            id,
            head: 0,
            len: cost,
        };
        for i in 0..cost {
            put(self.at(r, i), t);
        }
        self.set_ring(r);
        self.note(r);
        // Room is certain: the index is at most half full.
        let mask = self.s.index.len() - 1;
        let mut i = self.home(fp);
        while get(&self.s.index[i]) != 0 {
            i = (i + 1) & mask;
        }
        put(&self.s.index[i], (fp & !ID_MASK) | (id as u64 + 1));
        self.s.keys.fetch_add(1, Ordering::Relaxed);
        Ok((fresh(self.rule, cost), t))
    }

    /// Drops the key at index position `pos`, slot `id`; `keep_time` raises the
    /// shard's floor to its latest time (a reclaim: not a reset).
    pub(super) fn remove(&self, pos: usize, id: usize, keep_time: bool) {
        let mask = self.s.index.len() - 1;
        // Backward-shift deletion: later entries of the probe run move up into the
        // hole unless their home lies cyclically after it.
        let mut hole = pos;
        let mut j = pos;
        loop {
            j = (j + 1) & mask;
            let w = get(&self.s.index[j]);
            if w == 0 {
                break;
            }
            let home = self.home(get(&self.s.slots[(w & ID_MASK) as usize - 1].fp));
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                put(&self.s.index[hole], w);
                hole = j;
            }
        }
        put(&self.s.index[hole], 0);
        let slot = &self.s.slots[id];
        if keep_time && get(&slot.seen) > get(&self.s.floor) {
            put(&self.s.floor, get(&slot.seen));
        }
        put(&self.s.drops, get(&self.s.drops).wrapping_add(1));
        put(&slot.fp, 0);
        put(&slot.seen, 0);
        put(&slot.ring, get(&self.s.free));
        put(&self.s.free, id as u64);
        self.s.keys.fetch_sub(1, Ordering::Relaxed);
    }

    /// Drops every key whose log is entirely expired at `t` and sets the reclaim
    /// bound to when the next one will be. Returns how many were dropped.
    pub(super) fn reclaim(&self, t: u64) -> usize {
        let mut next = u64::MAX;
        let mut dropped = 0;
        for id in 0..self.s.slots.len() {
            let fp = get(&self.s.slots[id].fp);
            if fp == 0 {
                continue;
            }
            let at = self.empty_at(self.ring(id));
            if at <= t {
                if let Some((pos, id)) = self.find(fp) {
                    self.remove(pos, id, true);
                    dropped += 1;
                }
            } else {
                next = next.min(at);
            }
        }
        put(&self.s.reclaim_at, next);
        dropped
    }

    /// How many keys this shard dropped so far.
    pub(super) fn drops(&self) -> u64 {
        get(&self.s.drops)
    }

    /// Removes up to `cost` entries recorded at exactly `now` from the key `fp`
    /// (entries of one time are interchangeable, so whose they are does not matter).
    pub(super) fn refund(&self, fp: u64, now: u64, cost: u64) {
        let Some((_, id)) = self.find(fp) else {
            return;
        };
        let mut r = self.ring(id);
        let start = self.count_while(r, |e| e < now);
        let end = self.count_while(r, |e| e <= now);
        let k = cost.min(end - start);
        if k == 0 {
            return;
        }
        // The entries after the run close up over the `k` removed (sorted still).
        for i in end..r.len {
            put(self.at(r, i - k), self.entry(r, i));
        }
        r.len -= k;
        self.set_ring(r);
        self.note(r);
    }
}
