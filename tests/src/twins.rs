//! The subjects of the twin tests, built once: one limit of each store behind one
//! trait — a limiter's own word, key 7 of a keyed table, key 7 of an exact log, and a
//! word its caller keeps (the edge's Durable Object) — so that the refund, settlement
//! and order tests ask every store the same questions.
//!
//! A twin test runs a schedule on a subject `A` and on a fresh subject `B` that sees
//! only what `A` kept (no refunded request; each settled request at its real cost
//! from the start), then compares what each admits.

use std::cell::RefCell;

use portero::algorithm::kept::{KeptPlaces, KeptWord};
use portero::keyed::RandomState;
use portero::{
    Acquired, Admission, Algorithm, KeyedLimiter, KeyedLog, ManualClock, Quota, RateLimiter,
};

/// The key every keyed subject answers for.
const KEY: u64 = 7;

/// A limit under test: admitted, refunded or settled, charged, peeked.
pub trait Subject {
    /// `cost` units at `now`: the decision, and what gives them back.
    fn acquire(&self, now: u64, cost: u64) -> Option<Acquired>;
    /// Gives `admission` back at `now`.
    fn refund(&self, admission: Admission, now: u64);
    /// Settles `admission` at its real cost `real`, at `now`.
    fn settle(&self, admission: Admission, real: u64, now: u64);
    /// Takes `units` at `now` whether or not they fit.
    fn charge(&self, now: u64, units: u64);
    /// Whether `cost` units would be admitted at `now` (taking nothing).
    fn admits(&self, now: u64, cost: u64) -> bool;
    /// The units a request could take at `now` (what a peek says remains).
    fn remaining(&self, now: u64) -> u64;
    /// The raw state word, where the store has one.
    fn state(&self) -> Option<u64>;

    /// Whether a check dated before the latest time seen is read as that latest time
    /// (the exact log): seeing a later request then moves the key's time, so the twin
    /// is compared only at times no earlier than everything seen.
    fn reads_back_as_latest(&self) -> bool {
        false
    }

    /// The admission of `cost` units at `now`, if any were taken.
    fn admission(&self, now: u64, cost: u64) -> Option<Admission> {
        self.acquire(now, cost)?.admission
    }

    /// The twin's take: `units` at `now` whether or not they fit, as a request of
    /// that cost arriving then (one unit checked, opening a window as a request does,
    /// and the rest charged; all charged when even one is refused).
    fn take(&self, now: u64, units: u64) {
        match self.admission(now, 1) {
            Some(one) => self.settle(one, units, now),
            None => self.charge(now, units),
        }
    }
}

/// A limiter's own word.
pub struct Direct<A: Algorithm>(pub RateLimiter<A, ManualClock>);

/// Key 7 of a keyed table.
pub struct Keyed<A: Algorithm + Copy>(pub KeyedLimiter<u64, A, ManualClock>);

/// Key 7 of an exact log.
pub struct Log(pub KeyedLog<u64, ManualClock>);

/// A word its caller keeps, with its refund ledger and its log of places (the edge's
/// Durable Object).
pub struct Kept<A: Algorithm>(pub A, pub RefCell<(KeptWord, KeptPlaces)>);

/// A quota of up to 4 per period, burst up to 4 (small, so schedules fill it), and a
/// step for schedules: a fifth of its emission interval.
pub fn small_quota() -> impl proptest::strategy::Strategy<Value = (Quota, u64)> {
    use proptest::strategy::Strategy;
    (1u64..=4, 1u64..=4, 7u64..=200).prop_map(|(limit, burst, period)| {
        let q = Quota::from_nanos(limit, period * 1_000)
            .expect("a quota of 1 to 4 a period")
            .with_burst(burst)
            .expect("a burst of 1 to 4");
        (q, (q.interval_nanos() / 5).max(1))
    })
}

/// Fresh limiters of `a`'s own word.
pub fn direct<A: Algorithm + Copy>(a: A) -> impl Fn() -> Direct<A> {
    move || Direct(RateLimiter::with_algorithm_and_clock(a, ManualClock::new()))
}

/// Fresh 4-key tables of `a` (the same hasher every time: runs repeat).
pub fn keyed<A: Algorithm + Copy>(a: A) -> impl Fn() -> Keyed<A> {
    move || {
        Keyed(KeyedLimiter::with_hasher(
            a,
            4,
            ManualClock::new(),
            RandomState::with_seeds(1, 2, 3, 4),
        ))
    }
}

/// Fresh 4-key exact logs of `quota`.
pub fn log(quota: Quota) -> impl Fn() -> Log {
    move || {
        Log(KeyedLog::with_hasher(
            quota,
            4,
            ManualClock::new(),
            RandomState::with_seeds(1, 2, 3, 4),
        )
        .expect("a log of 4 keys"))
    }
}

/// Fresh kept words of `a`.
pub fn kept<A: Algorithm + Copy>(a: A) -> impl Fn() -> Kept<A> {
    move || Kept(a, RefCell::new((KeptWord::new(&a), KeptPlaces::new())))
}

impl<A: Algorithm> Subject for Direct<A> {
    fn acquire(&self, now: u64, cost: u64) -> Option<Acquired> {
        self.0.acquire_at(now, cost).ok()
    }
    fn refund(&self, admission: Admission, now: u64) {
        self.0.refund_at(admission, now);
    }
    fn settle(&self, admission: Admission, real: u64, now: u64) {
        self.0.settle_at(admission, real, now).expect("settles");
    }
    fn charge(&self, now: u64, units: u64) {
        self.0.charge_at(now, units).expect("charges");
    }
    fn admits(&self, now: u64, cost: u64) -> bool {
        self.0.peek_at(now, cost).is_ok_and(|d| d.is_allowed())
    }
    fn remaining(&self, now: u64) -> u64 {
        self.0.peek_at(now, 1).map_or(0, |d| d.remaining())
    }
    fn state(&self) -> Option<u64> {
        Some(self.0.raw_state())
    }
}

/// What a keyed table and an exact log answer alike for key 7 (the same methods on
/// two types).
macro_rules! key_seven {
    () => {
        fn acquire(&self, now: u64, cost: u64) -> Option<Acquired> {
            self.0.acquire_at(&KEY, now, cost).ok()
        }
        fn settle(&self, admission: Admission, real: u64, now: u64) {
            let key = self.0.fingerprint_of(&KEY);
            self.0
                .settle_fingerprint_at(key, admission, real, now)
                .expect("settles");
        }
        fn charge(&self, now: u64, units: u64) {
            let key = self.0.fingerprint_of(&KEY);
            self.0
                .charge_fingerprint_at(key, now, units)
                .expect("charges");
        }
        fn admits(&self, now: u64, cost: u64) -> bool {
            self.0
                .peek_at(&KEY, now, cost)
                .is_ok_and(|d| d.is_allowed())
        }
        fn remaining(&self, now: u64) -> u64 {
            self.0.peek_at(&KEY, now, 1).map_or(0, |d| d.remaining())
        }
    };
}

impl<A: Algorithm + Copy> Subject for Keyed<A> {
    key_seven!();
    fn refund(&self, admission: Admission, now: u64) {
        let key = self.0.fingerprint_of(&KEY);
        self.0.refund_fingerprint_at(key, admission, now);
    }
    fn state(&self) -> Option<u64> {
        self.0.state_of(&KEY)
    }
}

impl Subject for Log {
    key_seven!();
    fn refund(&self, admission: Admission, _now: u64) {
        self.0.refund(&KEY, admission);
    }
    fn state(&self) -> Option<u64> {
        None
    }
    fn reads_back_as_latest(&self) -> bool {
        true
    }
}

impl<A: Algorithm> Subject for Kept<A> {
    fn acquire(&self, now: u64, cost: u64) -> Option<Acquired> {
        let (word, _) = &mut *self.1.borrow_mut();
        let noted = word.ledger;
        let (decision, admission) = word.check(&self.0, now, cost).ok()?;
        // The store rebuilds what it stored: the word's two states and its ledger.
        let admission = admission.map(|a| match (a.before(), a.after()) {
            (Some(before), Some(after)) => {
                Admission::of_word(a.at(), a.cost(), before, after, noted)
            }
            _ => a,
        });
        Some(Acquired {
            decision,
            admission,
        })
    }
    fn refund(&self, admission: Admission, now: u64) {
        self.settle(admission, 0, now);
    }
    fn settle(&self, admission: Admission, real: u64, now: u64) {
        let (word, places) = &mut *self.1.borrow_mut();
        word.settle_placed(places, &self.0, admission, real, now)
            .expect("settles");
    }
    fn charge(&self, now: u64, units: u64) {
        let (word, _) = &mut *self.1.borrow_mut();
        word.state = self.0.charge(word.state, now, units).expect("charges");
    }
    fn admits(&self, now: u64, cost: u64) -> bool {
        let state = self.1.borrow().0.state;
        self.0
            .decide(state, now, cost)
            .is_ok_and(|t| t.decision.is_allowed())
    }
    fn remaining(&self, now: u64) -> u64 {
        let state = self.1.borrow().0.state;
        self.0
            .decide(state, now, 1)
            .map_or(0, |t| t.decision.remaining())
    }
    fn state(&self) -> Option<u64> {
        Some(self.1.borrow().0.state)
    }
}
