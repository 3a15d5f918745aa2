//! One rule for `remaining`, in every algorithm: it is the largest cost that would be
//! admitted at that instant (a check of `remaining` units is admitted, one of
//! `remaining + 1` is not), over random schedules of checks.

use portero::{
    Algorithm, CalendarQuota, FixedWindow, Gcra, LeakyMeter, LeakyQueue, ManualClock, Period,
    Placement, Quota, RateLimiter, SlidingWindowCounter, TokenBucket,
};
use proptest::prelude::*;

fn holds<A: Algorithm>(a: A, schedule: &[(u64, u64)], step: u64) -> Result<(), TestCaseError> {
    let l = RateLimiter::with_algorithm_and_clock(a, ManualClock::new());
    let cap = l.algorithm().capacity();
    let mut now = 1_000 * step;
    for &(dt, cost) in schedule {
        now += dt * step;
        let _ = l.check_at(now, cost.min(cap));
        for probe in [now, now + step / 2, now + step] {
            let left = l.peek_at(probe, 0).unwrap().remaining();
            prop_assert!(left <= cap);
            if left > 0 {
                prop_assert!(
                    l.peek_at(probe, left).unwrap().is_allowed(),
                    "{} said left at {}, refused",
                    left,
                    probe
                );
            }
            if left < cap {
                prop_assert!(
                    !l.peek_at(probe, left + 1).unwrap().is_allowed(),
                    "{} said left at {}, {} admitted",
                    left,
                    probe,
                    left + 1
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn remaining_is_the_largest_cost_admitted_now(
        limit in 1u64..=300, burst in 1u64..=20, period in 7u64..=50_000,
        schedule in prop::collection::vec((0u64..30, 1u64..=40), 1..60),
    ) {
        let q = Quota::from_nanos(limit, period * 1_000).unwrap().with_burst(burst).unwrap();
        let step = (q.period_nanos() / 13).max(1);
        holds(Gcra::new(q), &schedule, step)?;
        holds(TokenBucket::new(q), &schedule, step)?;
        holds(LeakyMeter::new(q), &schedule, step)?;
        holds(LeakyQueue::new(q), &schedule, step)?;
        // (Windows refuse limits their count bits cannot hold: skipped then.)
        if let Ok(w) = FixedWindow::new(q) {
            holds(w, &schedule, step)?;
        }
        if let Ok(w) = FixedWindow::with_placement(q, Placement::FirstRequest) {
            holds(w, &schedule, step)?;
        }
        if let Ok(w) = SlidingWindowCounter::new(q) {
            holds(w, &schedule, step)?;
        }
        if let Ok(c) = CalendarQuota::new(limit, Period::Fixed(q.period_nanos())) {
            holds(c, &schedule, step)?;
        }
    }
}
