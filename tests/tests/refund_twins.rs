//! Giving back exactly: twin limiters over random schedules, for every algorithm and
//! every store that refunds.
//!
//! Limiter A admits requests and gives some of them back (a stack's later limit
//! refused, a reservation was cancelled); its twin B replays, from scratch, every
//! request A admitted and still holds. After each refund, whatever A admits at any
//! probe time and cost, B must admit too: a refund never gives back what it did not
//! take. Schedules interleave checks with refunds of any earlier admission (not only
//! the last), and in half of them time jumps back now and then; a refund is dated at
//! the latest time seen so far, as a limiter refunding on its own clock is.

use std::time::Duration;

use portero::keyed::RandomState;
use portero::{
    Acquired, Admission, Algorithm, AlgorithmName, AnyAlgorithm, CalendarQuota, FixedWindow, Gcra,
    KeyedLimiter, KeyedLog, LeakyMeter, LeakyQueue, ManualClock, Period, Placement, Quota,
    RateLimiter, SlidingWindowCounter, TokenBucket,
};
use portero_tests::twins::{direct, keyed, log, small_quota as quota, Subject};
use proptest::prelude::*;

/// One step of a schedule.
#[derive(Debug, Clone)]
enum Op {
    /// A check of `cost` after `dt` (or `dt` back in time, when `back`).
    Check { dt: u64, back: bool, cost: u64 },
    /// `dt` later, the refund of outstanding admission number `which` (mod their count).
    Refund { dt: u64, which: usize },
}

fn ops(time_goes_back: bool) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        3 => (0u64..40, prop::bool::weighted(if time_goes_back { 0.2 } else { 0.0 }), 1u64..=4)
            .prop_map(|(dt, back, cost)| Op::Check { dt, back, cost }),
        1 => (0u64..40, any::<usize>()).prop_map(|(dt, which)| Op::Refund { dt, which }),
    ];
    prop::collection::vec(op, 1..50)
}

/// How a store's refunds must compare with the twin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// Never more than the twin: what A admits, B admits.
    NeverMore,
    /// Exactly the twin, when time moves forward: A admits what B admits, no more and
    /// no less (nothing lost).
    Exact,
    /// As `Exact`, where a refund that left the word as it was keeps the request
    /// (windows, whose refund of a window's opener gives nothing back once others came
    /// since, by design; see their docs): the twin replays it too.
    ExactOrKept,
}

/// Runs `ops` on a fresh `make()` (A) and, after every refund, checks A against a twin
/// built from scratch, by `rule`.
fn twins<S: Subject>(
    make: impl Fn() -> S,
    ops: &[Op],
    step: u64,
    capacity: u64,
    rule: Rule,
) -> Result<(), TestCaseError> {
    let a = make();
    // Exactness is claimed for time that moves forward: a check dated back is read at
    // the latest time the limit has seen, which its twin may not have seen.
    let forward = ops
        .iter()
        .all(|op| !matches!(op, Op::Check { back: true, dt, .. } if *dt > 0));
    let mut clock = 1_000 * step;
    // Every check A admitted: (time, cost, still charged), and the outstanding ones.
    let mut admitted: Vec<(u64, u64, bool)> = Vec::new();
    let mut outstanding: Vec<(usize, Admission)> = Vec::new();
    for op in ops {
        match *op {
            Op::Check { dt, back, cost } => {
                let now = if back {
                    clock.saturating_sub(dt * step)
                } else {
                    clock += dt * step;
                    clock
                };
                if let Some(Acquired {
                    decision,
                    admission,
                }) = a.acquire(now, cost)
                {
                    // Every admission after a refund, the twin admits too: a refund
                    // that moved where a window ends shows only in later checks.
                    let comparable = !a.reads_back_as_latest() || now == clock;
                    if decision.is_allowed()
                        && comparable
                        && admitted.iter().any(|&(.., charged)| !charged)
                    {
                        let b = make();
                        for &(t, cost, charged) in &admitted {
                            if charged {
                                b.acquire(t, cost);
                            }
                        }
                        prop_assert!(
                            b.admits(now, cost),
                            "A admits {} at {} where the twin refuses",
                            cost,
                            now
                        );
                    }
                    if decision.is_allowed() {
                        admitted.push((now, cost, true));
                        if let Some(admission) = admission {
                            outstanding.push((admitted.len() - 1, admission));
                        }
                    }
                }
            }
            Op::Refund { dt, which } => {
                if outstanding.is_empty() {
                    continue;
                }
                clock += dt * step;
                let (i, admission) = outstanding.remove(which % outstanding.len());
                let before = a.state();
                a.refund(admission, clock);
                let unchanged = before.is_some() && before == a.state();
                admitted[i].2 = rule == Rule::ExactOrKept && unchanged;
                let b = make();
                for &(t, cost, charged) in &admitted {
                    if charged {
                        b.acquire(t, cost);
                    }
                }
                let earlier = if a.reads_back_as_latest() {
                    0
                } else {
                    3 * step
                };
                let probes = [0, 1, 2, 3, 5, 8, 13, 40]
                    .into_iter()
                    .map(|k| clock + k * step)
                    .chain([
                        clock.saturating_sub(earlier),
                        clock.saturating_sub(earlier / 3),
                    ]);
                for t in probes {
                    for cost in 1..=capacity {
                        let (got, twin) = (a.admits(t, cost), b.admits(t, cost));
                        prop_assert!(
                            !got || twin,
                            "after refunding #{} at {}: A admits {} at {} where the twin refuses",
                            i,
                            clock,
                            cost,
                            t
                        );
                        prop_assert!(
                            rule == Rule::NeverMore || !forward || got == twin,
                            "after refunding #{} at {}: A refuses {} at {} where the twin admits",
                            i,
                            clock,
                            cost,
                            t
                        );
                    }
                }
            }
        }
    }
    Ok(())
}

fn both<A: Algorithm + Copy>(a: A, ops: &[Op], step: u64, rule: Rule) -> Result<(), TestCaseError> {
    let capacity = a.capacity().min(4);
    twins(direct(a), ops, step, capacity, rule)?;
    twins(keyed(a), ops, step, capacity, rule)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn gcra_token_bucket_and_leaky_meter_never_give_back_more(
        (q, step) in quota(), ops in any::<bool>().prop_flat_map(ops),
    ) {
        both(Gcra::new(q), &ops, step, Rule::NeverMore)?;
        both(TokenBucket::new(q), &ops, step, Rule::NeverMore)?;
        both(LeakyMeter::new(q), &ops, step, Rule::NeverMore)?;
        both(AnyAlgorithm::new(AlgorithmName::Gcra, q).unwrap(), &ops, step, Rule::NeverMore)?;
    }

    #[test]
    fn the_leaky_queue_gives_back_only_its_last_booking(
        (q, step) in quota(), ops in any::<bool>().prop_flat_map(ops),
    ) {
        both(LeakyQueue::new(q), &ops, step, Rule::NeverMore)?;
    }

    #[test]
    fn window_counts_never_give_back_more(
        (q, step) in quota(), ops in any::<bool>().prop_flat_map(ops),
    ) {
        // Windows give back exactly, except what a window's opener keeps.
        both(FixedWindow::new(q).unwrap(), &ops, step, Rule::ExactOrKept)?;
        both(FixedWindow::new(q).unwrap().count_excess().unwrap(), &ops, step, Rule::ExactOrKept)?;
        both(SlidingWindowCounter::new(q).unwrap(), &ops, step, Rule::ExactOrKept)?;
        let calendar = CalendarQuota::new(q.limit(), Period::Fixed(q.period_nanos())).unwrap();
        both(calendar, &ops, step, Rule::ExactOrKept)?;
        let first = FixedWindow::with_placement(q, Placement::FirstRequest).unwrap();
        both(first, &ops, step, Rule::ExactOrKept)?;
    }

    #[test]
    fn the_exact_log_never_gives_back_more(
        (q, step) in quota(), ops in any::<bool>().prop_flat_map(ops),
    ) {
        twins(log(q), &ops, step, q.limit().min(4), Rule::Exact)?;
    }
}

/// The failures found from outside, each as it was reported.
mod reported {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_gcra_refund_after_its_debt_drained_invents_nothing() {
        // 2 per second, burst 2: X at 0, Y at 500 ms, X refunded → 3 admitted at 500 ms.
        let l = RateLimiter::gcra(Quota::per_second(2).unwrap()).with_clock(ManualClock::new());
        let x = l.acquire_at(0, 1).unwrap().admission.unwrap();
        assert!(l.check_at(500 * MS, 1).unwrap().is_allowed());
        l.refund_at(x, 500 * MS);
        assert!(l.check_at(500 * MS, 1).unwrap().is_allowed());
        assert!(
            !l.check_at(500 * MS, 1).unwrap().is_allowed(),
            "a third at 500 ms"
        );
    }

    #[test]
    fn an_aligned_window_refund_after_a_rollover_gives_nothing_to_the_new_window() {
        // 2 per 1 s: X at 900 ms, Y at 1,100 ms, X refunded → 3 admitted in Y's window.
        let w = FixedWindow::new(Quota::per_second(2).unwrap()).unwrap();
        let l = RateLimiter::with_algorithm_and_clock(w, ManualClock::new());
        let x = l.acquire_at(900 * MS, 1).unwrap().admission.unwrap();
        assert!(l.check_at(1_100 * MS, 1).unwrap().is_allowed());
        l.refund_at(x, 1_100 * MS);
        assert!(l.check_at(1_100 * MS, 1).unwrap().is_allowed());
        assert!(!l.check_at(1_100 * MS, 1).unwrap().is_allowed());
    }

    #[test]
    fn a_first_request_window_opened_by_the_refunded_request_gives_nothing_back() {
        // X at 0 opens the window, Y at 500 ms joins, X refunded: the window stays
        // where X opened it, and keeps X's unit (its twin's window, opened by Y, would
        // still count Y at 1.2 s).
        let w = FixedWindow::with_placement(Quota::per_second(2).unwrap(), Placement::FirstRequest)
            .unwrap();
        let l = RateLimiter::with_algorithm_and_clock(w, ManualClock::new());
        let x = l.acquire_at(0, 1).unwrap().admission.unwrap();
        assert!(l.check_at(500 * MS, 1).unwrap().is_allowed());
        let before = l.raw_state();
        l.refund_at(x, 500 * MS);
        assert_eq!(l.raw_state(), before);
        assert!(!l.check_at(600 * MS, 1).unwrap().is_allowed());
    }

    /// The reported case: X opens the window at 0, Y joins at 200 ms, X is refunded
    /// at 300 ms. The twin that never saw X opens at Y and counts Y until 1.2 s, so it
    /// admits 1 at 1.1 s where this limiter admits 2 — no placement of the window is
    /// right for every such twin (the next request after X is not kept). So the
    /// refund keeps X and says so, and the limiter is exactly the twin that saw X.
    #[test]
    fn a_refund_that_keeps_a_first_request_opener_says_so_and_matches_the_twin_that_saw_it() {
        let w = FixedWindow::with_placement(Quota::per_second(2).unwrap(), Placement::FirstRequest)
            .unwrap();
        let a = RateLimiter::with_algorithm_and_clock(w, ManualClock::new());
        let x = a.acquire_at(0, 1).unwrap().admission.unwrap();
        assert!(a.check_at(200 * MS, 1).unwrap().is_allowed());
        assert!(
            !a.refund_at(x, 300 * MS),
            "the opener is kept, and the refund says so"
        );
        let saw_x = RateLimiter::with_algorithm_and_clock(w, ManualClock::new());
        saw_x.check_at(0, 1).unwrap();
        saw_x.check_at(200 * MS, 1).unwrap();
        for t in [1_000, 1_100, 1_100, 1_150, 1_200, 1_200, 1_900, 2_100] {
            let (got, twin) = (
                a.check_at(t * MS, 1).unwrap(),
                saw_x.check_at(t * MS, 1).unwrap(),
            );
            assert_eq!(got.is_allowed(), twin.is_allowed(), "at {t} ms");
        }
    }

    #[test]
    fn a_cancel_after_a_refund_cannot_erase_a_later_check() {
        // gcra 10/s burst 2: X checked at 0, R reserved at 0, Z checked at 100 ms, X
        // refunded, R cancelled → 2 admitted at 100 ms where the twin admits 1.
        let clock = ManualClock::new();
        let l = RateLimiter::gcra(Quota::per_second(10).unwrap().with_burst(2).unwrap())
            .with_clock(&clock);
        let x = l.acquire_at(0, 1).unwrap().admission.unwrap();
        let r = l.reserve_at(0, 1, Duration::from_secs(1)).unwrap();
        clock.set(100 * MS);
        assert!(l.check_at(100 * MS, 1).unwrap().is_allowed());
        l.refund_at(x, 100 * MS);
        r.cancel();
        // The twin saw only Z (at 100 ms): one more fits at 100 ms, not two.
        assert!(l.check_at(100 * MS, 1).unwrap().is_allowed());
        assert!(!l.check_at(100 * MS, 1).unwrap().is_allowed());
    }

    #[test]
    fn the_exact_log_gives_back_an_entry_recorded_after_a_later_check() {
        // A check at 10 ms, a check at 5 ms (recorded at 10 ms) and its refund.
        let log =
            KeyedLog::with_clock(Quota::per_second(3).unwrap(), 10, ManualClock::new()).unwrap();
        assert!(log.check_at(&"k", 10 * MS, 1).unwrap().is_allowed());
        let late = log.acquire_at(&"k", 5 * MS, 1).unwrap().admission.unwrap();
        log.refund(&"k", late);
        assert_eq!(log.peek_at(&"k", 10 * MS, 0).unwrap().remaining(), 2);
    }
}

/// Waits among the checks: reservations (direct and keyed GCRA) booked between checks
/// and cancelled in any order, checks refunded in any order. The twin replays every
/// request that stayed charged as a check at the instant it actually starts (a booking
/// at its turn): what A admits after a refund or a cancel, a limiter fed those starts
/// admits too — so the bound holds for the instants callers really start at.
mod with_waits {
    use super::*;

    #[derive(Debug, Clone)]
    enum Step {
        Check { dt: u64, cost: u64 },
        Reserve { dt: u64, cost: u64 },
        GiveBack { dt: u64, which: usize },
    }

    fn steps() -> impl Strategy<Value = Vec<Step>> {
        let step = prop_oneof![
            2 => (0u64..30, 1u64..=3).prop_map(|(dt, cost)| Step::Check { dt, cost }),
            2 => (0u64..30, 1u64..=3).prop_map(|(dt, cost)| Step::Reserve { dt, cost }),
            2 => (0u64..30, any::<usize>()).prop_map(|(dt, which)| Step::GiveBack { dt, which }),
        ];
        prop::collection::vec(step, 1..40)
    }

    /// A limit that checks, books and gives back on one manual clock.
    trait Waits {
        fn clock(&self) -> &ManualClock;
        fn acquire(&self, now: u64, cost: u64) -> Option<Acquired>;
        /// Books at the clock's time: the turn, and a handle to cancel it by.
        fn reserve(&self, cost: u64) -> Option<(u64, usize)>;
        fn cancel(&self, handle: usize);
        fn refund(&self, admission: Admission);
        fn admits(&self, now: u64, cost: u64) -> bool;
    }

    // Each subject's limiter is leaked (a few hundred small ones per run), so that its
    // reservations, which borrow it, can be kept beside it.
    struct Direct {
        limiter: &'static RateLimiter<Gcra, ManualClock>,
        turns: Turns<portero::Reservation<'static, ManualClock>>,
    }

    struct Keyed {
        limiter: &'static KeyedLimiter<u64, Gcra, ManualClock>,
        turns: Turns<portero::KeyedReservation<'static, u64, Gcra, ManualClock>>,
    }

    /// The booked turns of a subject, to cancel later by their handle.
    struct Turns<R>(std::cell::RefCell<Vec<Option<R>>>);

    /// A booked turn that can be cancelled.
    trait Turn {
        fn cancel(self);
    }

    impl Turn for portero::Reservation<'static, ManualClock> {
        fn cancel(self) {
            portero::Reservation::cancel(self);
        }
    }

    impl Turn for portero::KeyedReservation<'static, u64, Gcra, ManualClock> {
        fn cancel(self) {
            portero::KeyedReservation::cancel(self);
        }
    }

    impl<R: Turn> Turns<R> {
        fn new() -> Self {
            Self(std::cell::RefCell::new(Vec::new()))
        }

        /// Keeps a booked turn: its instant and handle.
        fn keep(&self, at: u64, r: R) -> Option<(u64, usize)> {
            let mut turns = self.0.borrow_mut();
            turns.push(Some(r));
            Some((at, turns.len() - 1))
        }

        fn cancel(&self, handle: usize) {
            if let Some(r) = self.0.borrow_mut()[handle].take() {
                r.cancel();
            }
        }
    }

    impl Waits for Direct {
        fn clock(&self) -> &ManualClock {
            self.limiter.clock()
        }
        fn acquire(&self, now: u64, cost: u64) -> Option<Acquired> {
            self.limiter.acquire_at(now, cost).ok()
        }
        fn reserve(&self, cost: u64) -> Option<(u64, usize)> {
            let r = self
                .limiter
                .reserve(cost, Duration::from_secs(3_600))
                .ok()?;
            self.turns.keep(r.ready_at(), r)
        }
        fn cancel(&self, handle: usize) {
            self.turns.cancel(handle);
        }
        fn refund(&self, admission: Admission) {
            self.limiter.refund(admission);
        }
        fn admits(&self, now: u64, cost: u64) -> bool {
            self.limiter
                .peek_at(now, cost)
                .is_ok_and(|d| d.is_allowed())
        }
    }

    impl Waits for Keyed {
        fn clock(&self) -> &ManualClock {
            self.limiter.clock()
        }
        fn acquire(&self, now: u64, cost: u64) -> Option<Acquired> {
            self.limiter.acquire_at(&7, now, cost).ok()
        }
        fn reserve(&self, cost: u64) -> Option<(u64, usize)> {
            let r = self
                .limiter
                .reserve_key(&7, cost, Duration::from_secs(3_600))
                .ok()?;
            self.turns.keep(r.ready_at(), r)
        }
        fn cancel(&self, handle: usize) {
            self.turns.cancel(handle);
        }
        fn refund(&self, admission: Admission) {
            self.limiter.refund(&7, admission);
        }
        fn admits(&self, now: u64, cost: u64) -> bool {
            self.limiter
                .peek_at(&7, now, cost)
                .is_ok_and(|d| d.is_allowed())
        }
    }

    enum Taken {
        Checked(Admission),
        Booked(usize),
    }

    fn run(a: &dyn Waits, q: Quota, step: u64, steps: &[Step]) -> Result<(), TestCaseError> {
        let mut clock = 1_000 * step;
        a.clock().set(clock);
        // (start instant, cost, still charged), and what can be given back.
        let mut started: Vec<(u64, u64, bool)> = Vec::new();
        let mut outstanding: Vec<(usize, Taken)> = Vec::new();
        for s in steps {
            match *s {
                Step::Check { dt, cost } => {
                    clock += dt * step;
                    a.clock().set(clock);
                    if let Some(Acquired {
                        decision,
                        admission: Some(adm),
                    }) = a.acquire(clock, cost)
                    {
                        prop_assert!(decision.is_allowed());
                        started.push((clock, cost, true));
                        outstanding.push((started.len() - 1, Taken::Checked(adm)));
                    }
                }
                Step::Reserve { dt, cost } => {
                    clock += dt * step;
                    a.clock().set(clock);
                    if let Some((at, handle)) = a.reserve(cost) {
                        started.push((at, cost, true));
                        outstanding.push((started.len() - 1, Taken::Booked(handle)));
                    }
                }
                Step::GiveBack { dt, which } => {
                    if outstanding.is_empty() {
                        continue;
                    }
                    clock += dt * step;
                    a.clock().set(clock);
                    let (i, taken) = outstanding.remove(which % outstanding.len());
                    match taken {
                        Taken::Checked(adm) => a.refund(adm),
                        Taken::Booked(handle) => a.cancel(handle),
                    }
                    started[i].2 = false;
                    let b = RateLimiter::gcra(q).with_clock(ManualClock::new());
                    for &(at, cost, charged) in &started {
                        if charged {
                            let _ = b.check_at(at, cost);
                        }
                    }
                    for k in [0, 1, 2, 3, 5, 8, 13, 40, 100] {
                        let t = clock + k * step;
                        for cost in 1..=q.burst().min(4) {
                            prop_assert!(
                                !a.admits(t, cost) || b.peek_at(t, cost).is_ok_and(|d| d.is_allowed()),
                                "after giving back #{} at {}: A admits {} at {} where the starts refuse",
                                i, clock, cost, t
                            );
                        }
                    }
                }
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn refunds_and_cancels_among_waits_never_give_back_more(
            (q, step) in quota(), steps in steps(),
        ) {
            let limiter: &'static _ = Box::leak(Box::new(RateLimiter::gcra(q).with_clock(ManualClock::new())));
            let direct = Direct { limiter, turns: Turns::new() };
            run(&direct, q, step, &steps)?;
            let table: &'static _ = Box::leak(Box::new(KeyedLimiter::with_hasher(
                Gcra::new(q), 4, ManualClock::new(), RandomState::with_seeds(1, 2, 3, 4),
            )));
            let keyed = Keyed { limiter: table, turns: Turns::new() };
            run(&keyed, q, step, &steps)?;
        }
    }
}

/// Found by an outside review: a refund of an earlier admission moves the later ones'
/// debt earlier, so the instant a later admission wrote no longer says where its debt
/// ends. Quota 1 per 60 s, burst 5: x1 (4 units) at 0, x2 (2) at 200 s, x1 given back
/// (exactly: its 40 s still ahead), x3 (1) at 320 s, x2 given back at 330 s — it gave
/// back 30 s of debt that was no longer its own, and 5 units went through at 350 s
/// where the twin (x3 alone) refuses: 6 units in 30 s against a burst of 5.
#[test]
fn a_refund_after_another_refund_moved_its_debt_invents_nothing() {
    const S: u64 = 1_000_000_000;
    let q = Quota::new(1, Duration::from_secs(60))
        .unwrap()
        .with_burst(5)
        .unwrap();
    let a = RateLimiter::with_algorithm_and_clock(Gcra::new(q), ManualClock::new());
    let x1 = a.acquire_at(0, 4).unwrap().admission.unwrap();
    let x2 = a.acquire_at(200 * S, 2).unwrap().admission.unwrap();
    a.refund_at(x1, 200 * S);
    assert!(a.check_at(320 * S, 1).unwrap().is_allowed());
    a.refund_at(x2, 330 * S);
    assert!(!a.check_at(350 * S, 5).unwrap().is_allowed());
}

/// The same review's other find: after a refund moved the word, a later admission can
/// write the very word an earlier one wrote, and an undo that trusts the word alone
/// gives back the later one's units. A token bucket of 4 per 7 ms, burst 2: x0 and x1
/// at t0, x0 given back at t0, x3 at t0 + 1.5 ms writes what x1 wrote, x1 given back
/// at t0 + 2.05 ms — by undo, freeing x3's unit: 2 units admitted there where the twin
/// (x3 alone) refuses.
#[test]
fn an_undo_after_another_refund_cannot_be_fooled_by_the_same_word() {
    let q = Quota::from_nanos(4, 7_000_003)
        .unwrap()
        .with_burst(2)
        .unwrap();
    let t0 = 3_600_030_450_782u64;
    let (t3, t4) = (t0 + 1_503_826, t0 + 2_048_912);
    let twin = RateLimiter::with_algorithm_and_clock(TokenBucket::new(q), ManualClock::new());
    assert!(twin.check_at(t3, 1).unwrap().is_allowed());
    assert!(!twin.peek_at(t4, 2).unwrap().is_allowed());

    let a = RateLimiter::with_algorithm_and_clock(TokenBucket::new(q), ManualClock::new());
    let x0 = a.acquire_at(t0, 1).unwrap().admission.unwrap();
    let x1 = a.acquire_at(t0, 1).unwrap().admission.unwrap();
    a.refund_at(x0, t0);
    assert!(a.check_at(t3, 1).unwrap().is_allowed());
    a.refund_at(x1, t4);
    assert!(!a.peek_at(t4, 2).unwrap().is_allowed());

    let k = KeyedLimiter::with_clock(TokenBucket::new(q), 4, ManualClock::new());
    let f = k.fingerprint_of(&7u64);
    let x0 = k
        .acquire_fingerprint_at(f, t0, 1)
        .unwrap()
        .admission
        .unwrap();
    let x1 = k
        .acquire_fingerprint_at(f, t0, 1)
        .unwrap()
        .admission
        .unwrap();
    k.refund_fingerprint_at(f, x0, t0);
    assert!(k.check_fingerprint_at(f, t3, 1).unwrap().is_allowed());
    k.refund_fingerprint_at(f, x1, t4);
    assert!(!k.peek_fingerprint_at(f, t4, 2).unwrap().is_allowed());
}
