//! Where the units refunds gave back came from: a short log, by place, that lets a
//! refund tell the give-backs that lay ahead of its own slot (they moved it) from
//! those behind it (they did not).
//!
//! # Places
//!
//! A schedule's word `W` (the instant its debt is paid off) only moves forward on a
//! check and back on a refund, and the refund adds what it moved to its ledger's
//! total `R` (see [`admission`](crate::admission)). So `V = W + R` never goes back,
//! and rises with every admission: an admission that found `b` and wrote `a` with the
//! ledger at `R` holds the place `[b + R, a + R)` among the word's admissions, and one
//! admitted after it starts at or after its end. A refund of `Y` since `X` was
//! admitted that started at or after `X`'s end was of a slot behind `X`: it moved the
//! word but not `X`'s slot. `X` then gives back by the core's rule with
//! `moved = (R_now − R_X) − Σ given behind`, which is exact when no time passed.
//!
//! # Invariant
//!
//! Every run `[start, end)` with its `given` is a union of refunded places of one key
//! (the log's owner), sorted by start. Runs only merge downward: two runs merged start
//! where the lower one started, so a refund counts a merged run as behind only if
//! every place in it was — the log can only make a refund give back less than the
//! places say, never more. A log taken over by another key forgets its runs (less,
//! again). Read and written only under the log's lock, itself taken under the
//! ledger's.

use crate::sync::{AtomicU64, Ordering::Relaxed, SpinLock, LOOM};

/// Runs the log of one limiter's word keeps (small under loom, to keep models
/// tractable): enough for 64 refunds in flight landing in any order to lose little.
pub(crate) const WORD_RUNS: usize = if LOOM { 2 } else { 16 };
/// The most runs any log keeps (what a log's merge works in).
pub(crate) const MOST_RUNS: usize = 16;

/// One run's fields, in atomics read and written under the log's lock (plain values
/// would need `unsafe`; the lock orders them).
#[derive(Debug)]
struct Run {
    start: [AtomicU64; 2],
    end: [AtomicU64; 2],
    given: AtomicU64,
}

/// A run's values: `[start, end)` and what refunds there gave back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) start: u128,
    pub(crate) end: u128,
    pub(crate) given: u64,
}

/// What refunds of the places among `runs` (`(start, given)`) starting at or after
/// `place` gave back: the give-backs behind an admission that ended at `place`.
pub(crate) fn behind_of(runs: impl Iterator<Item = (u128, u64)>, place: u128) -> u128 {
    runs.filter(|&(start, _)| start >= place)
        .map(|(_, given)| u128::from(given))
        .sum()
}

/// Records in `all[..*n]` (sorted runs; `all` holds one more than the log keeps,
/// the new run before any merge) the place `[start, end)` that gave back `given`:
/// joined to the runs it touches, the two closest runs merged while there are more
/// than the log keeps.
pub(crate) fn record_in(all: &mut [Span], n: &mut usize, (start, end, given): (u128, u128, u64)) {
    let runs = all.len() - 1;
    *n = (*n).min(runs);
    let at = all[..*n].iter().take_while(|s| s.start < start).count();
    all.copy_within(at..*n, at + 1);
    all[at] = Span { start, end, given };
    *n += 1;
    if at + 1 < *n && all[at + 1].start == end {
        join(all, n, at);
    }
    if at > 0 && all[at - 1].end == start {
        join(all, n, at - 1);
    }
    while *n > runs {
        let closest = (0..*n - 1)
            .min_by_key(|&i| all[i + 1].start.saturating_sub(all[i].end))
            .unwrap_or(0);
        join(all, n, closest);
    }
}

/// The log (see the [module docs](self)).
#[derive(Debug)]
pub(crate) struct RunLog<const RUNS: usize = WORD_RUNS> {
    lock: SpinLock,
    owner: AtomicU64,
    len: AtomicU64,
    runs: [Run; RUNS],
}

impl<const RUNS: usize> RunLog<RUNS> {
    /// An empty log, owned by nobody.
    pub(crate) fn new() -> Self {
        const { assert!(RUNS >= 1 && RUNS <= MOST_RUNS) };
        Self {
            lock: SpinLock::new(),
            owner: AtomicU64::new(0),
            len: AtomicU64::new(0),
            runs: core::array::from_fn(|_| Run {
                start: [AtomicU64::new(0), AtomicU64::new(0)],
                end: [AtomicU64::new(0), AtomicU64::new(0)],
                given: AtomicU64::new(0),
            }),
        }
    }

    /// The log's lock, held for one refund's reading and recording (taken once, not
    /// once for each: an uncontended lock is a compare-and-swap).
    pub(crate) fn turn(&self) -> LogTurn<'_, RUNS> {
        LogTurn {
            log: self,
            _held: self.lock.lock(),
        }
    }

    /// What refunds of `owner`'s places starting at or after `place` gave back: the
    /// give-backs behind an admission that ended at `place`.
    #[cfg(test)]
    pub(crate) fn behind(&self, owner: u64, place: u128) -> u128 {
        self.turn().behind(owner, place)
    }

    /// Notes that a refund of `owner`'s place `[start, end)` gave back `given`: joined
    /// to the runs it touches, the two closest runs merged while there are too many.
    #[cfg(test)]
    pub(crate) fn record(&self, owner: u64, start: u128, end: u128, given: u64) {
        self.turn().record(owner, start, end, given);
    }

    /// [`behind`](Self::behind), the lock held.
    fn behind_held(&self, owner: u64, place: u128) -> u128 {
        if self.owner.load(Relaxed) != owner {
            return 0;
        }
        // Read in place (no copy of the runs: every refund that finds others since
        // asks this).
        let n = (self.len.load(Relaxed) as usize).min(RUNS);
        let runs = self.runs[..n].iter();
        behind_of(
            runs.map(|run| (wide(&run.start), run.given.load(Relaxed))),
            place,
        )
    }

    /// [`record`](Self::record), the lock held.
    fn record_held(&self, owner: u64, start: u128, end: u128, given: u64) {
        if self.record_at_the_end(owner, start, end, given) {
            return;
        }
        let (mut n, spans) = self.read(owner);
        let mut all = [Span::default(); MOST_RUNS + 1];
        all[..n].copy_from_slice(&spans[..n]);
        record_in(&mut all[..=RUNS], &mut n, (start, end, given));
        self.write(owner, &all[..n]);
    }

    /// [`record`](Self::record)'s common cases, in place (copying the log out and
    /// back cost a settlement 60 of its 87 ns): a log `owner` does not hold yet, a
    /// place that extends the last run, or one after it with room left — what
    /// [`record_in`] makes of them too. Whether it was one of them.
    fn record_at_the_end(&self, owner: u64, start: u128, end: u128, given: u64) -> bool {
        let n = if self.owner.load(Relaxed) == owner {
            (self.len.load(Relaxed) as usize).min(RUNS)
        } else {
            0
        };
        let Some(last) = n.checked_sub(1).map(|i| &self.runs[i]) else {
            self.write(owner, &[Span { start, end, given }]);
            return true;
        };
        let last_end = wide(&last.end);
        if start == last_end {
            set_wide(&last.end, end);
            let sum = last.given.load(Relaxed).saturating_add(given);
            last.given.store(sum, Relaxed);
            return true;
        }
        if start > last_end && n < RUNS {
            let run = &self.runs[n];
            set_wide(&run.start, start);
            set_wide(&run.end, end);
            run.given.store(given, Relaxed);
            self.len.store(n as u64 + 1, Relaxed);
            return true;
        }
        false
    }

    /// The runs, when `owner` owns the log (none otherwise).
    fn read(&self, owner: u64) -> (usize, [Span; RUNS]) {
        let mut spans = [Span::default(); RUNS];
        if self.owner.load(Relaxed) != owner {
            return (0, spans);
        }
        let n = (self.len.load(Relaxed) as usize).min(RUNS);
        for (span, run) in spans.iter_mut().zip(&self.runs).take(n) {
            *span = Span {
                start: wide(&run.start),
                end: wide(&run.end),
                given: run.given.load(Relaxed),
            };
        }
        (n, spans)
    }

    fn write(&self, owner: u64, spans: &[Span]) {
        self.owner.store(owner, Relaxed);
        self.len.store(spans.len() as u64, Relaxed);
        for (span, run) in spans.iter().zip(&self.runs) {
            set_wide(&run.start, span.start);
            set_wide(&run.end, span.end);
            run.given.store(span.given, Relaxed);
        }
    }
}

/// A [`RunLog`] with its lock held.
pub(crate) struct LogTurn<'a, const RUNS: usize> {
    log: &'a RunLog<RUNS>,
    _held: crate::sync::SpinGuard<'a>,
}

impl<const RUNS: usize> LogTurn<'_, RUNS> {
    /// What refunds of `owner`'s places starting at or after `place` gave back: the
    /// give-backs behind an admission that ended at `place`.
    pub(crate) fn behind(&self, owner: u64, place: u128) -> u128 {
        self.log.behind_held(owner, place)
    }

    /// Notes that a refund of `owner`'s place `[start, end)` gave back `given`: joined
    /// to the runs it touches, the two closest runs merged while there are too many.
    pub(crate) fn record(&self, owner: u64, start: u128, end: u128, given: u64) {
        self.log.record_held(owner, start, end, given);
    }
}

/// Merges run `i` with the next into one that starts where `i` did.
fn join(all: &mut [Span], n: &mut usize, i: usize) {
    all[i] = Span {
        start: all[i].start,
        end: all[i].end.max(all[i + 1].end),
        given: all[i].given.saturating_add(all[i + 1].given),
    };
    all.copy_within(i + 2..*n, i + 1);
    *n -= 1;
}

fn wide(halves: &[AtomicU64; 2]) -> u128 {
    // Disjoint halves: `+` is `|`.
    (u128::from(halves[0].load(Relaxed)) << 64) + u128::from(halves[1].load(Relaxed))
}

fn set_wide(halves: &[AtomicU64; 2], value: u128) {
    halves[0].store((value >> 64) as u64, Relaxed);
    halves[1].store(value as u64, Relaxed);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn adjacent_places_make_one_run_and_count_behind_exactly() {
        let log = RunLog::<4>::new();
        // Slots [0,10), [10,20), ..., refunded from the last: each refund finds every
        // later slot's give-back behind it, and the log stays one run.
        for k in (1..=16u128).rev() {
            assert_eq!(log.behind(7, 10 * k), (16 - k) * 3, "slot {k}");
            log.record(7, 10 * (k - 1), 10 * k, 3);
            assert_eq!(log.read(7).0, 1);
        }
        assert_eq!(log.behind(7, 0), 16 * 3);
        assert_eq!(log.behind(8, 0), 0, "another key's log counts nothing");
    }

    #[test]
    fn too_many_runs_merge_downward_and_count_less_never_more() {
        let log = RunLog::<4>::new();
        for k in [0u128, 2, 4, 6, 8, 10] {
            log.record(1, 10 * k, 10 * k + 10, 5);
        }
        assert!(log.read(1).0 <= 4);
        for place in 0..130u128 {
            let exact = [0u128, 2, 4, 6, 8, 10]
                .iter()
                .filter(|&&k| 10 * k >= place)
                .count() as u128
                * 5;
            assert!(log.behind(1, place) <= exact, "at {place}");
        }
        assert_eq!(
            log.behind(1, 0),
            30,
            "everything lies behind the first place"
        );
    }

    #[test]
    fn a_full_log_merges_its_closest_runs_and_keeps_every_unit() {
        let log = RunLog::<4>::new();
        // Five runs for four places: C and D are the closest pair (2 apart).
        for (start, end) in [(0, 10), (100, 110), (200, 203), (205, 210), (400, 410)] {
            log.record(1, start, end, 1);
        }
        assert_eq!(log.read(1).0, 4, "as many runs as the log keeps, no fewer");
        assert_eq!(log.behind(1, 0), 5, "every unit still counted");
        // C and D merged (starting at C): behind 204 lies E alone; A and B apart.
        assert_eq!(log.behind(1, 204), 1);
        assert_eq!(log.behind(1, 150), 3);
        assert_eq!(log.behind(1, 50), 4);
    }

    #[test]
    fn places_beyond_two_to_the_sixty_four_keep_both_halves() {
        let log = RunLog::<4>::new();
        let high = 3u128 << 64;
        log.record(9, high + 10, high + 20, 7);
        assert_eq!(log.behind(9, high + 10), 7);
        assert_eq!(log.behind(9, high + 11), 0);
        assert_eq!(log.behind(9, 10), 7, "the high half is not lost");
        let (n, spans) = log.read(9);
        assert_eq!(n, 1);
        assert_eq!((spans[0].start, spans[0].end), (high + 10, high + 20));
    }

    #[test]
    fn a_new_owner_starts_empty() {
        let log = RunLog::<4>::new();
        log.record(1, 0, 10, 4);
        log.record(2, 20, 30, 6);
        assert_eq!(log.behind(1, 0), 0);
        assert_eq!(log.behind(2, 0), 6);
    }
}
