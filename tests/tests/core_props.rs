//! Property tests: the lock-free limiters against textbook models, and the
//! bounds the docs claim.

use portero::{Algorithm, CheckError, Gcra, ManualClock, Quota, RateLimiter, TokenBucket};
use portero_tests::reference::{RefLeakyMeter, RefTokenBucket};
use proptest::prelude::*;

/// A random quota: 1..=1000 per 1 ms..10 s, burst 1..=40.
fn quota() -> impl Strategy<Value = Quota> {
    (1u64..=1000, 1_000_000u64..=10_000_000_000, 1u64..=40).prop_filter_map(
        "valid quota",
        |(limit, period, burst)| {
            Quota::from_nanos(limit, period)
                .ok()?
                .with_burst(burst)
                .ok()
        },
    )
}

/// Arrivals as (gap in units of T/4, cost), monotonic in time.
fn arrivals() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0u64..=12, 1u64..=6), 1..200)
}

fn times(q: &Quota, arrivals: &[(u64, u64)], start: u64) -> Vec<(u64, u64)> {
    let step = q.interval_nanos() / 4 + 1;
    let mut now = start;
    arrivals
        .iter()
        .map(|&(gap, cost)| {
            now += gap * step;
            (now, cost)
        })
        .collect()
}

fn limiter<A: Algorithm>(a: A) -> RateLimiter<A, ManualClock> {
    RateLimiter::with_algorithm_and_clock(a, ManualClock::new())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The atomic token bucket decides exactly as the two-field textbook bucket:
    /// same admissions, same remaining tokens.
    #[test]
    fn token_bucket_matches_reference(q in quota(), arr in arrivals(), start in 0u64..1u64 << 40) {
        let lim = limiter(TokenBucket::new(q));
        let mut reference = RefTokenBucket::full(q.interval_nanos(), q.burst());
        for (now, cost) in times(&q, &arr, start) {
            let want = reference.try_acquire(now, cost);
            match lim.check_at(now, cost) {
                Ok(d) => {
                    prop_assert_eq!(d.is_allowed(), want);
                    prop_assert_eq!(d.remaining(), reference.whole_tokens());
                }
                Err(CheckError::CostExceedsCapacity { .. }) => {
                    prop_assert!(cost > q.burst());
                    prop_assert!(!want);
                }
                Err(e) => prop_assert!(false, "unexpected {e}"),
            }
        }
    }

    /// GCRA and the token bucket with the same (r, B) admit exactly the same requests,
    /// and both agree with the leaky bucket read as a meter (the guide's claim).
    #[test]
    fn gcra_token_bucket_and_leaky_meter_agree(q in quota(), arr in arrivals()) {
        let g = limiter(Gcra::new(q));
        let tb = limiter(TokenBucket::new(q));
        let mut meter = RefLeakyMeter::empty(q.interval_nanos(), q.burst());
        for (now, cost) in times(&q, &arr, 1_000) {
            let a = g.check_at(now, cost);
            let b = tb.check_at(now, cost);
            prop_assert_eq!(a, b);
            let allowed = a.map(|d| d.is_allowed()).unwrap_or(false);
            prop_assert_eq!(allowed, meter.try_acquire(now, cost));
        }
    }

    /// In any interval [a, b], admitted units ≤ B + ⌊(b − a) / T⌋, for arbitrary
    /// (even non-monotonic) arrival times.
    #[test]
    fn never_admits_more_than_burst_plus_rate_times_interval(
        q in quota(),
        raw in prop::collection::vec((0u64..40, 1u64..=4), 1..150),
        shuffle in any::<bool>(),
    ) {
        for gcra in [true, false] {
            let step = q.interval_nanos() / 4 + 1;
            let mut now = 0u64;
            let mut admitted: Vec<(u64, u64)> = Vec::new();
            let g = limiter(Gcra::new(q));
            let tb = limiter(TokenBucket::new(q));
            for (i, &(gap, cost)) in raw.iter().enumerate() {
                now += gap * step;
                // Every third request, with `shuffle`, comes with a time from the past.
                let t = if shuffle && i % 3 == 2 { now.saturating_sub(7 * step) } else { now };
                let d = if gcra { g.check_at(t, cost) } else { tb.check_at(t, cost) };
                if matches!(d, Ok(d) if d.is_allowed()) {
                    admitted.push((t, cost));
                }
            }
            admitted.sort();
            for i in 0..admitted.len() {
                let mut sum = 0;
                for j in i..admitted.len() {
                    sum += admitted[j].1;
                    let span = admitted[j].0 - admitted[i].0;
                    prop_assert!(
                        sum <= q.burst() + span / q.interval_nanos(),
                        "{} units in {} ns > B {} + span/T", sum, span, q.burst()
                    );
                }
            }
        }
    }

    /// The scalable mode keeps the single-GCRA bound exactly: in any interval [a, b],
    /// admitted ≤ B + ⌊(b − a) / T⌋, whatever the stripe count.
    #[test]
    fn striped_never_admits_more_than_burst_plus_rate_times_interval(
        q in quota(),
        stripes in 1usize..6,
        raw in prop::collection::vec((0u64..40, 1u64..=2), 1..150),
    ) {
        let s = portero::Striped::with_clock(q, stripes, ManualClock::new()).unwrap();
        let step = q.interval_nanos() / 4 + 1;
        let mut now = 0;
        let mut admitted = Vec::new();
        for (gap, cost) in raw {
            now += gap * step;
            if matches!(s.check_at(now, cost), Ok(d) if d.is_allowed()) {
                admitted.push((now, cost));
            }
        }
        for i in 0..admitted.len() {
            let mut sum = 0;
            for j in i..admitted.len() {
                sum += admitted[j].1;
                let span = admitted[j].0 - admitted[i].0;
                prop_assert!(sum <= q.burst() + span / q.interval_nanos());
            }
        }
    }

    /// retry_after is exact: the same request is admitted at now + retry_after and
    /// rejected one nanosecond earlier.
    #[test]
    fn retry_after_is_exact(q in quota(), arr in arrivals()) {
        let g = limiter(Gcra::new(q));
        let tb = limiter(TokenBucket::new(q));
        for (now, cost) in times(&q, &arr, 0) {
            for lim in [&g as &dyn Peek, &tb] {
                if let Ok(d) = lim.check(now, cost) {
                    if !d.is_allowed() {
                        let r = d.retry_after_nanos();
                        prop_assert!(r > 0);
                        prop_assert!(lim.peek(now + r, cost).is_allowed());
                        prop_assert!(!lim.peek(now + r - 1, cost).is_allowed());
                    }
                }
            }
        }
    }

    /// reset_after is exact: at now + reset_after the limiter is full again.
    #[test]
    fn reset_after_reaches_full(q in quota(), arr in arrivals()) {
        let tb = limiter(TokenBucket::new(q));
        for (now, cost) in times(&q, &arr, 0) {
            if let Ok(d) = tb.check_at(now, cost) {
                let full = now + d.reset_after_nanos();
                prop_assert_eq!(tb.tokens_at(full), q.burst() as f64);
                if d.reset_after_nanos() > 0 {
                    prop_assert!(tb.tokens_at(full - 1) < q.burst() as f64);
                }
            }
        }
    }
}

/// Object-safe view of a limiter for the retry-after property.
trait Peek {
    fn check(&self, now: u64, cost: u64) -> Result<portero::Decision, CheckError>;
    fn peek(&self, now: u64, cost: u64) -> portero::Decision;
}

impl<A: Algorithm> Peek for RateLimiter<A, ManualClock> {
    fn check(&self, now: u64, cost: u64) -> Result<portero::Decision, CheckError> {
        self.check_at(now, cost)
    }
    fn peek(&self, now: u64, cost: u64) -> portero::Decision {
        self.peek_at(now, cost).expect("in range")
    }
}

/// The textbook form of a reservation: a token bucket whose credit (in ns of refill)
/// may go into debt for what is booked ahead, refilled one ns per ns up to `B·T`. A
/// booking of `n` units is ready once the credit covers `n·T` (`now` plus what is
/// missing) and takes `n·T` at once; a check admits only if the credit covers it.
struct RefReservations {
    credit: i128,
    last: u64,
    span: i128,
    t: i128,
}

impl RefReservations {
    fn advance(&mut self, now: u64) {
        if now > self.last {
            self.credit = (self.credit + i128::from(now - self.last)).min(self.span);
            self.last = now;
        }
    }
    fn reserve(&mut self, now: u64, n: u64) -> u64 {
        self.advance(now);
        let need = i128::from(n) * self.t;
        let ready = now as i128 + (need - self.credit).max(0);
        self.credit -= need;
        ready as u64
    }
    fn check(&mut self, now: u64, n: u64) -> bool {
        self.advance(now);
        let need = i128::from(n) * self.t;
        let ok = self.credit >= need;
        if ok {
            self.credit -= need;
        }
        ok
    }
}

proptest! {
    /// Reservations and checks on one GCRA limiter against the debt model, with time
    /// moving forward: every reservation is ready exactly when the model says, and
    /// every check admits exactly when it does (one schedule for both).
    #[test]
    fn reservations_match_a_bucket_with_debt(
        per_sec in 1u64..50,
        burst in 1u64..6,
        ops in prop::collection::vec((0u64..300_000_000, 1u64..4, any::<bool>()), 1..80),
    ) {
        let quota = Quota::per_second(per_sec).unwrap().with_burst(burst).unwrap();
        let limiter = RateLimiter::gcra(quota).with_clock(ManualClock::new());
        let mut model = RefReservations {
            credit: i128::from(quota.capacity_nanos()),
            last: 0,
            span: i128::from(quota.capacity_nanos()),
            t: i128::from(quota.interval_nanos()),
        };
        let mut now = 0u64;
        for (step, n, reserve) in ops {
            now += step;
            let n = n.min(burst);
            if reserve {
                let r = limiter.reserve_at(now, n, std::time::Duration::from_secs(3_600)).unwrap();
                prop_assert_eq!(r.ready_at(), model.reserve(now, n));
                r.commit();
            } else {
                let d = limiter.check_at(now, n).unwrap();
                prop_assert_eq!(d.is_allowed(), model.check(now, n));
            }
        }
    }
}

proptest! {
    /// Keyed reservations (a GCRA key's turns booked on its slot word) against the
    /// same debt model, one model per key, with checks and cancels mixed in: every
    /// booking is ready exactly when its key's model says and every check admits
    /// exactly when it does; a cancel of the key's last booking gives it back (the
    /// model forgets it), its first request's too. Keys never share a schedule.
    #[test]
    fn keyed_reservations_match_a_bucket_with_debt_per_key(
        per_sec in 1u64..50,
        burst in 1u64..6,
        ops in prop::collection::vec(
            (0u64..300_000_000, 1u64..4, 0u8..3, 0u8..3),
            1..80,
        ),
    ) {
        const HOUR: std::time::Duration = std::time::Duration::from_secs(3_600);
        let quota = Quota::per_second(per_sec).unwrap().with_burst(burst).unwrap();
        let keyed = portero::KeyedLimiter::with_clock(Gcra::new(quota), 10, ManualClock::new());
        let fresh = || RefReservations {
            credit: i128::from(quota.capacity_nanos()),
            last: 0,
            span: i128::from(quota.capacity_nanos()),
            t: i128::from(quota.interval_nanos()),
        };
        let mut models = [fresh(), fresh(), fresh()];
        let mut now = 0u64;
        for (step, n, key, op) in ops {
            now += step;
            let n = n.min(burst);
            let model = &mut models[usize::from(key)];
            match op {
                0 => {
                    let d = keyed.check_at(&key, now, n).unwrap();
                    prop_assert_eq!(d.is_allowed(), model.check(now, n));
                }
                1 => {
                    let r = keyed.reserve_key_at(&key, now, n, HOUR).unwrap();
                    prop_assert_eq!(r.ready_at(), model.reserve(now, n));
                    r.commit();
                }
                _ => {
                    // Book and cancel at once: nothing came after it, so it gives
                    // back, the key's first request (an admission) too.
                    let (credit, last) = (model.credit, model.last);
                    let r = keyed.reserve_key_at(&key, now, n, HOUR).unwrap();
                    prop_assert_eq!(r.ready_at(), model.reserve(now, n));
                    let gave = r.cancel();
                    prop_assert!(gave);
                    if gave {
                        (model.credit, model.last) = (credit, last);
                        model.advance(now);
                    }
                }
            }
        }
    }
}
