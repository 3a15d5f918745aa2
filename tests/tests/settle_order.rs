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

use portero::{
    Admission, Algorithm, Gcra, KeyedLimiter, LeakyMeter, ManualClock, Quota, RateLimiter,
    TokenBucket,
};

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

/// A limit under test: a one-word limiter, or key 7 of a keyed table.
enum Subject<A: Algorithm + Copy> {
    Direct(Box<RateLimiter<A, ManualClock>>),
    Keyed(KeyedLimiter<u64, A, ManualClock>),
}

impl<A: Algorithm + Copy> Subject<A> {
    fn new(algorithm: A, keyed: bool) -> Self {
        if keyed {
            Self::Keyed(KeyedLimiter::with_clock(
                algorithm,
                100,
                ManualClock::starting_at(0),
            ))
        } else {
            Self::Direct(Box::new(RateLimiter::with_algorithm_and_clock(
                algorithm,
                ManualClock::starting_at(0),
            )))
        }
    }

    fn acquire(&self, now: u64, cost: u64) -> Admission {
        let taken = match self {
            Self::Direct(l) => l.acquire_at(now, cost).map_err(|e| e.to_string()),
            Self::Keyed(l) => l.acquire_at(&7, now, cost).map_err(|e| e.to_string()),
        };
        let taken = taken.expect("in range");
        assert!(taken.decision.is_allowed(), "{cost} at {now}");
        taken.admission.expect("units taken")
    }

    fn settle(&self, admission: Admission, real: u64, now: u64) {
        match self {
            Self::Direct(l) => {
                l.settle_at(admission, real, now).expect("settles");
            }
            Self::Keyed(l) => {
                let key = l.fingerprint_of(&7);
                l.settle_fingerprint_at(key, admission, real, now)
                    .expect("settles");
            }
        }
    }

    /// The largest cost admitted at `now` (peeking).
    fn admissible(&self, now: u64) -> u64 {
        match self {
            Self::Direct(l) => l.peek_at(now, 1).map(|d| d.remaining()),
            Self::Keyed(l) => l.peek_at(&7, now, 1).map(|d| d.remaining()),
        }
        .unwrap_or(0)
    }
}

/// Runs `case` for each schedule, one word and keyed.
fn for_each(mut case: impl FnMut(&str, bool, &mut dyn FnMut() -> Box<dyn Twin>)) {
    for keyed in [false, true] {
        case("gcra", keyed, &mut || {
            Box::new(Subject::new(Gcra::new(quota()), keyed))
        });
        case("token bucket", keyed, &mut || {
            Box::new(Subject::new(TokenBucket::new(quota()), keyed))
        });
        case("leaky meter", keyed, &mut || {
            Box::new(Subject::new(LeakyMeter::new(quota()), keyed))
        });
    }
}

/// What the tests ask of a subject, whatever its algorithm.
trait Twin {
    fn acquire(&self, now: u64, cost: u64) -> Admission;
    fn settle(&self, admission: Admission, real: u64, now: u64);
    fn admissible(&self, now: u64) -> u64;
}

impl<A: Algorithm + Copy> Twin for Subject<A> {
    fn acquire(&self, now: u64, cost: u64) -> Admission {
        Subject::acquire(self, now, cost)
    }
    fn settle(&self, admission: Admission, real: u64, now: u64) {
        Subject::settle(self, admission, real, now)
    }
    fn admissible(&self, now: u64) -> u64 {
        Subject::admissible(self, now)
    }
}

#[test]
fn with_no_time_passing_settlements_in_any_order_leave_exactly_the_twin() {
    let mut draw = Draw(54);
    for_each(|name, keyed, make| {
        for order in ["reverse", "forward", "random", "random", "random"] {
            let (a, b) = (make(), make());
            let now = 10 * T;
            let mut taken: Vec<Admission> = (0..16).map(|_| a.acquire(now, 10)).collect();
            for _ in 0..16 {
                b.settle(b.acquire(now, 10), 3, now);
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
                    a.admissible(now + later),
                    b.admissible(now + later),
                    "{name} (keyed {keyed}), {order}: A and its twin at +{later} ns"
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
    for_each(|name, keyed, make| {
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
                    flight.push((a.acquire(now, 8), real));
                    b.settle(b.acquire(now, 8), real, now);
                    back += 8 - real;
                    admitted += 1;
                } else {
                    let which = draw.below(flight.len() as u64) as usize;
                    let (one, real) = flight.swap_remove(which);
                    a.settle(one, real, now);
                }
            }
            let (mine, theirs) = (a.admissible(now), b.admissible(now));
            assert!(mine <= theirs, "{name} (keyed {keyed}): never looser");
            kept += theirs - mine;
        }
        let share = 100.0 * (back - kept) as f64 / back as f64;
        println!(
            "{name} (keyed {keyed}): {kept} of {back} give-back units kept, {share:.2} % back"
        );
        assert!(
            kept * 100 <= back,
            "{name} (keyed {keyed}): {kept} of {back} kept"
        );
    });
}
