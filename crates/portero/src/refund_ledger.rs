//! A word's refund ledger: what refunds moved it back by, the lock under which they
//! take turns, and the marks of sweeps (the rule it serves is in
//! [`admission`](crate::admission)'s docs).

use crate::admission::{origin_of, Admission, Seen};

/// What an admission notes of its word's ledger before it writes: the total, and
/// the ledger's turn, which tells afterwards whether a refund ran in between
/// ([`RefundLedger::placed`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Note {
    pub(crate) total: u128,
    turn: u64,
}

/// A word's refund ledger: the total `R` by which refunds moved it back other than
/// by an exact undo, and the lock under which refunds of its words take turns (see
/// the [`admission`](crate::admission) docs).
///
/// Invariant: `R` only grows, and only under the lock, after the refund's
/// compare-and-swap landed. It is kept as two halves (written low then high, read
/// high then low), so a reading without the lock — what an admission notes — is
/// never above the true total: it can only make a later refund give back less.
/// `turns` is odd while a refund runs and moves on by two with each: an admission
/// that read the same even turn before it noted the total and after it wrote knows
/// its total is the one its word was written with, and so its place
/// ([`refund_log`](crate::refund_log)).
///
/// A sweep that drops an idle key of a table adds `2^64` (one to the high half):
/// everything, for that key's admissions. Its neighbours' admissions read past it
/// ([`RefundLedger::past_sweeps`]): `sweep_run` counts the marks of the high half
/// since the last that was not a sweep (a carry, an eviction, a reset, a new
/// configuration), and `swept_at` is the latest time of those sweeps.
#[derive(Debug)]
pub(crate) struct RefundLedger {
    /// This ledger's number, unique in the process: what its words' admissions are
    /// stamped with ([`origin_of`]).
    id: u64,
    lock: crate::sync::SpinLock,
    turns: crate::sync::AtomicU64,
    high: crate::sync::AtomicU64,
    low: crate::sync::AtomicU64,
    sweep_run: crate::sync::AtomicU64,
    swept_at: crate::sync::AtomicU64,
}

impl RefundLedger {
    /// Nothing given back yet.
    pub(crate) fn new() -> Self {
        Self {
            id: crate::sync::next_id(),
            lock: crate::sync::SpinLock::new(),
            turns: crate::sync::AtomicU64::new(0),
            high: crate::sync::AtomicU64::new(0),
            low: crate::sync::AtomicU64::new(0),
            sweep_run: crate::sync::AtomicU64::new(0),
            swept_at: crate::sync::AtomicU64::new(0),
        }
    }

    /// The origin of the word this ledger keeps for the key `tag` (0: a limiter's
    /// one word).
    #[inline]
    pub(crate) fn origin(&self, tag: u64) -> u64 {
        origin_of(self.id, tag)
    }

    /// The total for an admission to note before it writes (no lock: never above the
    /// true total).
    #[inline]
    pub(crate) fn noted(&self) -> u128 {
        use crate::sync::Ordering::Acquire;
        let high = self.high.load(Acquire);
        let low = self.low.load(Acquire);
        // Disjoint halves: `+` is `|`.
        ((high as u128) << 64) + low as u128
    }

    /// What an admission notes before it writes (no lock): the total, and the turn.
    #[inline]
    pub(crate) fn note(&self) -> Note {
        use crate::sync::Ordering::Acquire;
        let turn = self.turns.load(Acquire);
        Note {
            total: self.noted(),
            turn,
        }
    }

    /// Whether no refund ran between `note` and the admission's write, read after
    /// the write: then the noted total is the one the word was written with. (A
    /// refund's compare-and-swap that the write built on comes after its turn began,
    /// so the write's acquire sees that turn.)
    #[inline]
    pub(crate) fn placed(&self, note: &Note) -> bool {
        use crate::sync::Ordering::Acquire;
        note.turn % 2 == 0 && self.turns.load(Acquire) == note.turn
    }

    /// Runs one refund under the ledger's lock: `attempt` gets the exact total and
    /// returns what it moved the word back by (0 for nothing or an exact undo),
    /// which is added before the lock is let go.
    pub(crate) fn refunding<T>(&self, attempt: impl FnOnce(u128) -> (T, u64)) -> T {
        let _turn = self.lock.lock();
        let turn = self.begin_turn();
        let (out, moved) = attempt(self.noted());
        self.add(moved);
        self.end_turn(turn);
        out
    }

    /// Runs `attempt` (dropping a key that is idle at `now`) under the ledger's lock,
    /// as a refund runs; when it says it dropped the key, marks the sweep: the
    /// dropped key's admissions give nothing back after it, its neighbours' read past
    /// it ([`past_sweeps`](Self::past_sweeps)).
    pub(crate) fn sweeping<T>(&self, now: u64, attempt: impl FnOnce() -> (T, bool)) -> T {
        use crate::sync::Ordering::{Relaxed, Release};
        let _turn = self.lock.lock();
        let turn = self.begin_turn();
        let (out, swept) = attempt();
        if swept {
            self.swept_at
                .store(self.swept_at.load(Relaxed).max(now), Relaxed);
            self.sweep_run
                .store(self.sweep_run.load(Relaxed).saturating_add(1), Relaxed);
            self.high
                .store(self.high.load(Relaxed).wrapping_add(1), Release);
        }
        self.end_turn(turn);
        out
    }

    /// `total` (read under the lock) as a refund of an admission that noted `noted`
    /// reads it: less the sweeps since, when every mark of the high half since the
    /// note was a sweep and the admission's key cannot have been among those dropped
    /// — `held_at(t)`: the word the admission wrote was not idle at `t`, the latest
    /// sweep's time (a sweep drops only keys idle at its time, and the key's word only
    /// moved on from what the admission wrote while no refund moved the low half).
    /// Otherwise `total` as it is: the sweeps then count as everything.
    fn past_sweeps(
        &self,
        noted: Option<u128>,
        total: u128,
        held_at: impl FnOnce(u64) -> bool,
    ) -> u128 {
        use crate::sync::Ordering::Relaxed;
        let Some(noted) = noted else {
            return total;
        };
        let marks = ((total >> 64) as u64).checked_sub((noted >> 64) as u64);
        match marks {
            Some(marks)
                if marks > 0
                    && total as u64 >= noted as u64
                    && marks <= self.sweep_run.load(Relaxed)
                    && held_at(self.swept_at.load(Relaxed)) =>
            {
                total - (u128::from(marks) << 64)
            }
            _ => total,
        }
    }

    /// Marks a refund running (the caller holds the lock, so only it writes `turns`):
    /// the word's compare-and-swap that follows releases this store with it.
    fn begin_turn(&self) -> u64 {
        use crate::sync::Ordering::Relaxed;
        let turn = self.turns.load(Relaxed).wrapping_add(1);
        self.turns.store(turn, Relaxed);
        turn
    }

    /// Marks the refund begun at `turn` done, after its total was added.
    fn end_turn(&self, turn: u64) {
        self.turns
            .store(turn.wrapping_add(1), crate::sync::Ordering::Release);
    }

    /// Gives `admission` back under the ledger's lock, the way [`refunding`] does,
    /// telling `attempt` what the ledger and `log` (which `owner`'s word's places it
    /// keeps) say, and logging the place it gave back from.
    ///
    /// [`refunding`]: Self::refunding
    pub(crate) fn giving_back<T, const RUNS: usize>(
        &self,
        log: &crate::refund_log::RunLog<RUNS>,
        (owner, held_at): (u64, impl FnOnce(u64) -> bool),
        admission: &Admission,
        attempt: impl FnOnce(Seen) -> (T, u64),
    ) -> T {
        let place = admission.place();
        self.refunding(|total| {
            let total = self.past_sweeps(admission.noted_total(), total, held_at);
            // The log's lock, taken once if at all.
            let mut turn = None;
            // Nothing given back since the admission: nothing to tell apart.
            let behind = match place {
                Some((_, end, true)) if admission.noted_total() != Some(total) => {
                    turn.get_or_insert_with(|| log.turn()).behind(owner, end)
                }
                _ => 0,
            };
            let (out, moved) = attempt(Seen { total, behind });
            if let (Some((start, end, _)), true) = (place, moved > 0) {
                turn.get_or_insert_with(|| log.turn())
                    .record(owner, start, end, moved);
            }
            (out, moved)
        })
    }

    /// Adds `moved` to the total (the caller holds the lock). A carry into the high
    /// half, or everything (`u64::MAX`), ends the run of sweeps.
    fn add(&self, moved: u64) {
        use crate::sync::Ordering::{Relaxed, Release};
        if moved == 0 {
            return;
        }
        let low = self.low.load(Relaxed);
        let (sum, carry) = low.overflowing_add(moved);
        if carry || moved == u64::MAX {
            self.sweep_run.store(0, Relaxed);
        }
        self.low.store(sum, Release);
        if carry {
            self.high
                .store(self.high.load(Relaxed).wrapping_add(1), Release);
        }
    }

    /// Runs `change` (a new configuration of the words these ledgers keep) holding
    /// every ledger's lock, and tells each that its words went back by everything:
    /// no admission from before the change gives anything back after it, whichever
    /// configuration its refund would read.
    #[cfg(feature = "alloc")]
    pub(crate) fn all_back(ledgers: &[RefundLedger], change: impl FnOnce()) {
        let locks: alloc::vec::Vec<_> = ledgers.iter().map(|l| l.lock.lock()).collect();
        let turns: alloc::vec::Vec<_> = ledgers.iter().map(|l| l.begin_turn()).collect();
        change();
        for (ledger, turn) in ledgers.iter().zip(turns) {
            ledger.add(u64::MAX);
            ledger.end_turn(turn);
        }
        drop(locks);
    }
}

#[cfg(test)]
mod tests;
