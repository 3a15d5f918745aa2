//! Property tests for the window and leaky algorithms: each bound the docs state, over
//! random arrivals and random weighted costs, and exact retry-after everywhere.

use portero::{
    Algorithm, Decision, FixedWindow, LeakyMeter, LeakyQueue, ManualClock, Placement, Quota,
    RateLimiter, SlidingLog, SlidingWindowCounter,
};
use proptest::prelude::*;

/// limit 1..=30 per window 1 µs..10 s.
fn quota() -> impl Strategy<Value = Quota> {
    (1u64..=30, 1_000u64..=10_000_000_000)
        .prop_filter_map("valid", |(l, w)| Quota::from_nanos(l, w).ok())
}

/// Sorted arrival times (gaps in 1/8 windows, sometimes 0) with costs 1..=3.
fn arrivals(window: u64) -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0u64..=6, 1u64..=3), 1..250).prop_map(move |v| {
        let mut now = window * 3 + 17;
        v.into_iter()
            .map(|(gap, cost)| {
                now += gap * (window / 8).max(1);
                (now, cost)
            })
            .collect()
    })
}

fn quota_and_arrivals() -> impl Strategy<Value = (Quota, Vec<(u64, u64)>)> {
    quota().prop_flat_map(|q| (Just(q), arrivals(q.period_nanos())))
}

/// Largest total cost of `events` (sorted by time) in any half-open span of `span` ns.
fn max_units_in(events: &[(u64, u64)], span: u64) -> u64 {
    let (mut best, mut sum, mut lo) = (0, 0, 0);
    for hi in 0..events.len() {
        sum += events[hi].1;
        while events[hi].0 - events[lo].0 >= span {
            sum -= events[lo].1;
            lo += 1;
        }
        best = best.max(sum);
    }
    best
}

fn run<A: Algorithm>(alg: A, arr: &[(u64, u64)]) -> Vec<(u64, u64, Decision)> {
    let lim = RateLimiter::with_algorithm_and_clock(alg, ManualClock::new());
    arr.iter()
        .filter_map(|&(t, c)| lim.check_at(t, c).ok().map(|d| (t, c, d)))
        .collect()
}

fn admitted(out: &[(u64, u64, Decision)]) -> Vec<(u64, u64)> {
    out.iter()
        .filter(|(_, _, d)| d.is_allowed())
        .map(|&(t, c, _)| (t, c))
        .collect()
}

/// Exact retry-after: admitted at now + r, rejected at now + r − 1.
fn check_retry<A: Algorithm + Clone>(alg: A, arr: &[(u64, u64)]) -> Result<(), TestCaseError> {
    let lim = RateLimiter::with_algorithm_and_clock(alg, ManualClock::new());
    for &(t, c) in arr {
        let Ok(d) = lim.check_at(t, c) else { continue };
        if !d.is_allowed() {
            let r = d.retry_after_nanos();
            prop_assert!(r > 0);
            prop_assert!(
                lim.peek_at(t + r, c).unwrap().is_allowed(),
                "not admitted at +{r}"
            );
            prop_assert!(
                !lim.peek_at(t + r - 1, c).unwrap().is_allowed(),
                "admitted at +{r}-1"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn sliding_log_never_more_than_l_in_any_window((q, arr) in quota_and_arrivals()) {
        let log = SlidingLog::with_clock(q, ManualClock::new());
        let mut ok = Vec::new();
        for &(t, c) in &arr {
            let Ok(d) = log.check_at(t, c) else {
                prop_assert!(c > q.limit());
                continue;
            };
            if d.is_allowed() {
                ok.push((t, c));
            } else {
                // Exact retry-after, checked on replicas: a peek at a later time would
                // move this log's clock forward.
                let r = d.retry_after_nanos();
                let at = |when: u64| {
                    let replica = SlidingLog::with_clock(q, ManualClock::new());
                    for &(t0, c0) in &ok {
                        replica.check_at(t0, c0).unwrap();
                    }
                    replica.peek_at(when, c).unwrap().is_allowed()
                };
                prop_assert!(at(t + r), "not admitted at +{r}");
                prop_assert!(!at(t + r - 1), "admitted at +{r}-1");
            }
        }
        prop_assert!(max_units_in(&ok, q.period_nanos()) <= q.limit());
    }

    #[test]
    fn fixed_window_never_more_than_l_per_window_or_2l_in_any_span((q, arr) in quota_and_arrivals()) {
        for placement in [Placement::Aligned, Placement::FirstRequest] {
            let fw = FixedWindow::with_placement(q, placement).unwrap();
            let ok = admitted(&run(fw, &arr));
            // A first-request window may be up to one quantum longer than W.
            let w = q.period_nanos();
            prop_assert!(max_units_in(&ok, w) <= 2 * q.limit());
            if placement == Placement::Aligned {
                for k in ok.iter().map(|(t, _)| t / w) {
                    let in_k: u64 = ok.iter().filter(|(t, _)| t / w == k).map(|(_, c)| c).sum();
                    prop_assert!(in_k <= q.limit());
                }
            }
            check_retry(fw, &arr)?;
        }
    }

    #[test]
    fn fixed_window_excess_never_changes_admissions((q, arr) in quota_and_arrivals()) {
        let plain = FixedWindow::new(q).unwrap();
        let counting = plain.count_excess().unwrap();
        let a: Vec<bool> = run(plain, &arr).iter().map(|x| x.2.is_allowed()).collect();
        let b: Vec<bool> = run(counting, &arr).iter().map(|x| x.2.is_allowed()).collect();
        prop_assert_eq!(a, b);
    }

    #[test]
    fn sliding_counter_never_more_than_2l_and_retry_is_exact((q, arr) in quota_and_arrivals()) {
        let sc = SlidingWindowCounter::new(q).unwrap();
        let ok = admitted(&run(sc, &arr));
        prop_assert!(max_units_in(&ok, q.period_nanos()) <= 2 * q.limit());
        check_retry(sc, &arr)?;
    }

    #[test]
    fn queue_never_releases_faster_than_r((q, arr) in quota_and_arrivals()) {
        let q = q.with_burst(q.limit()).unwrap();
        let out = run(LeakyQueue::new(q), &arr);
        let mut releases: Vec<(u64, u64)> = out
            .iter()
            .filter(|(_, _, d)| d.is_allowed())
            .map(|&(t, c, d)| (t + d.delay_nanos(), c))
            .collect();
        releases.sort();
        // Each release of c units comes at least c·T after the one before it, and no
        // admitted request waits longer than capacity·T.
        for pair in releases.windows(2) {
            prop_assert!(pair[1].0 - pair[0].0 >= pair[1].1 * q.interval_nanos());
        }
        for (_, _, d) in out.iter().filter(|(_, _, d)| d.is_allowed()) {
            prop_assert!(d.delay_nanos() <= q.capacity_nanos());
        }
        check_retry(LeakyQueue::new(q), &arr)?;
    }

    #[test]
    fn leaky_meter_retry_is_exact((q, arr) in quota_and_arrivals()) {
        check_retry(LeakyMeter::new(q), &arr)?;
    }
}
