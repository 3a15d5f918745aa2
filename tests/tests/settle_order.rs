//! Settlements in any order: a schedule (GCRA, the token bucket, the leaky meter;
//! one word or a keyed table's) that settles its admissions in reverse, forward or
//! random order with no time passing stands exactly where a twin charged the real
//! costs at the start stands; and with time passing and 64 admissions in flight,
//! what it keeps of the give-back units is measured and bounded (≥ 99 % back).
//!
//! A refund gives back the part of its slot still ahead of now, after what refunds
//! of slots *ahead* of it moved it; the refunds of slots behind it (the log of
//! places, `refund_log`) do not count. With the ledger's total alone, sixteen
//! admissions of 10 settled at 3 in reverse kept 42 of 112 units.

use portero::{Admission, Algorithm, Gcra, LeakyMeter, Quota, TokenBucket};
use portero_tests::twins::{direct, kept, keyed, Subject};

/// A small deterministic generator (splitmix64): the orders and costs drawn.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i as u64 + 1) as usize);
        }
    }
}

/// 1,000 a second (T = 1 ms), a burst of 1,000.
fn quota() -> Quota {
    Quota::per_second(1_000).unwrap().with_burst(1_000).unwrap()
}

const T: u64 = 1_000_000;

/// Where a subject keeps its word.
#[derive(Debug, Clone, Copy)]
enum Store {
    /// A limiter's own word.
    Word,
    /// Key 7 of a keyed table.
    Table,
    /// A word its caller keeps, with its log of places (the edge's Durable Object).
    Kept,
}

/// A subject of `a` in `store`.
fn subject<A: Algorithm + Copy + 'static>(a: A, store: Store) -> Box<dyn Subject> {
    match store {
        Store::Word => Box::new(direct(a)()),
        Store::Table => Box::new(keyed(a)()),
        Store::Kept => Box::new(kept(a)()),
    }
}

/// `cost` units at `now`, which must be admitted.
fn take(s: &dyn Subject, now: u64, cost: u64) -> Admission {
    let taken = s.acquire(now, cost).expect("in range");
    assert!(taken.decision.is_allowed(), "{cost} at {now}");
    taken.admission.expect("units taken")
}

/// Runs `case` for each schedule in each store.
fn for_each(mut case: impl FnMut(&str, Store, &mut dyn FnMut() -> Box<dyn Subject>)) {
    for store in [Store::Word, Store::Table, Store::Kept] {
        case("gcra", store, &mut || subject(Gcra::new(quota()), store));
        case("token bucket", store, &mut || {
            subject(TokenBucket::new(quota()), store)
        });
        case("leaky meter", store, &mut || {
            subject(LeakyMeter::new(quota()), store)
        });
    }
}

#[test]
fn with_no_time_passing_settlements_in_any_order_leave_exactly_the_twin() {
    let mut draw = Draw(54);
    for_each(|name, store, make| {
        for order in ["reverse", "forward", "random", "random", "random"] {
            let (a, b) = (make(), make());
            let now = 10 * T;
            let mut taken: Vec<Admission> = (0..16).map(|_| take(&*a, now, 10)).collect();
            for _ in 0..16 {
                b.settle(take(&*b, now, 10), 3, now);
            }
            match order {
                "reverse" => taken.reverse(),
                "random" => draw.shuffle(&mut taken),
                _ => {}
            }
            for one in taken {
                a.settle(one, 3, now);
            }
            for later in [0, 5 * T, 100 * T] {
                assert_eq!(
                    a.remaining(now + later),
                    b.remaining(now + later),
                    "{name} ({store:?}), {order}: A and its twin at +{later} ns"
                );
            }
        }
    });
}

/// 64 admissions of 8 in flight, time passing 0.5 ms between events (half a unit),
/// each settled at a random real cost below its estimate in random order: what A
/// still holds beyond its twin, over all the units given back, summed over 50 runs a
/// schedule — at most 1 %.
#[test]
fn with_time_passing_and_64_in_flight_at_least_99_percent_comes_back() {
    let mut draw = Draw(64);
    for_each(|name, store, make| {
        let (mut kept, mut back) = (0u64, 0u64);
        for _ in 0..50 {
            let (a, b) = (make(), make());
            let mut now = 10 * T;
            let mut flight: Vec<(Admission, u64)> = Vec::new();
            let mut admitted = 0;
            while admitted < 64 || !flight.is_empty() {
                now += T / 2;
                if admitted < 64 && (flight.is_empty() || draw.below(2) == 0) {
                    let real = draw.below(8);
                    flight.push((take(&*a, now, 8), real));
                    b.settle(take(&*b, now, 8), real, now);
                    back += 8 - real;
                    admitted += 1;
                } else {
                    let which = draw.below(flight.len() as u64) as usize;
                    let (one, real) = flight.swap_remove(which);
                    a.settle(one, real, now);
                }
            }
            let (mine, theirs) = (a.remaining(now), b.remaining(now));
            assert!(mine <= theirs, "{name} ({store:?}): never looser");
            kept += theirs - mine;
        }
        let share = 100.0 * (back - kept) as f64 / back as f64;
        println!("{name} ({store:?}): {kept} of {back} give-back units kept, {share:.2} % back");
        assert!(
            kept * 100 <= back,
            "{name} ({store:?}): {kept} of {back} kept"
        );
    });
}

/// 200 admissions of one unit at one instant, 195 of them given back in random order
/// (the requests a later limit refused), no time passing. A log of places keeps a
/// bounded number of runs; once the places given back out of order form more, its
/// closest runs merge downward and a give-back counts less behind it: never more than
/// the twin, and what it keeps is measured here (a limiter's own log and a table's
/// keep 16 runs; a kept word's 64; Redis's 128, where this leaves exactly the twin:
/// `crates/portero-redis/tests/settle_order.rs`).
#[test]
fn two_hundred_given_back_in_random_order_keep_what_a_full_log_loses() {
    let mut draw = Draw(200);
    let per_hour = || Gcra::new(Quota::per_hour(300).unwrap());
    for (store, most) in [(Store::Word, 20), (Store::Table, 20), (Store::Kept, 0)] {
        let mut kept = 0;
        for _ in 0..5 {
            let (s, twin) = (subject(per_hour(), store), subject(per_hour(), store));
            let mut taken: Vec<Admission> = (0..200).map(|_| take(&*s, T, 1)).collect();
            for _ in 0..5 {
                take(&*twin, T, 1);
            }
            let mut back = taken.split_off(5);
            draw.shuffle(&mut back);
            for one in back {
                s.refund(one, T);
            }
            let (left, theirs) = (s.remaining(T), twin.remaining(T));
            assert!(left <= theirs, "{store:?}: never more than the twin");
            kept += theirs - left;
            assert!(
                theirs - left <= most,
                "{store:?}: {} of 195 kept",
                theirs - left
            );
        }
        println!("{store:?}: 5 runs of 195 given back in random order, {kept} units kept");
    }
}
