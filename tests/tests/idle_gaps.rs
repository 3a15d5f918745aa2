//! Long idle gaps: a client that used its whole share and went quiet, for any gap up
//! to the supported time range, is never refused for longer than its own window,
//! period or burst allows, directly or in a keyed table, and a sweep drops its key once
//! its state carries no information.

use portero::{
    Algorithm, CalendarQuota, FixedWindow, Gcra, KeyedLimiter, LeakyMeter, LeakyQueue, ManualClock,
    Period, Placement, Quota, RateLimiter, SlidingWindowCounter, TokenBucket, MAX_TIME_NANOS,
};
use proptest::prelude::*;

const S: u64 = 1_000_000_000;
const DAY: u64 = 86_400 * S;

/// Uses up `a` at `t0`, waits `gap`, checks again. `bound` is the longest the
/// algorithm may ever make a client wait: after `bound` of quiet it must admit, and
/// before that any refusal's wait is at most `bound`.
fn after_idle_gap<A: Algorithm + Copy>(
    a: A,
    bound: u64,
    t0: u64,
    gap: u64,
) -> Result<(), TestCaseError> {
    let direct = RateLimiter::with_algorithm_and_clock(a, ManualClock::new());
    let keyed = KeyedLimiter::with_clock(a, 4, ManualClock::new());
    let swept = KeyedLimiter::with_clock(a, 4, ManualClock::new());
    for _ in 0..=a.capacity() {
        direct.check_at(t0, 1).unwrap();
        keyed.check_at(&1u64, t0, 1).unwrap();
        swept.check_at(&1u64, t0, 1).unwrap();
    }
    let t = t0 + gap;
    for d in [
        direct.check_at(t, 1).unwrap(),
        keyed.check_at(&1u64, t, 1).unwrap(),
    ] {
        if gap >= bound {
            prop_assert!(d.is_allowed(), "refused after {} ns of quiet", gap);
        } else if !d.is_allowed() {
            prop_assert!(
                d.retry_after_nanos() <= bound,
                "wait {}",
                d.retry_after_nanos()
            );
        }
        prop_assert!(
            d.reset_after_nanos() <= bound,
            "reset {}",
            d.reset_after_nanos()
        );
    }
    if gap >= bound {
        prop_assert_eq!(swept.sweep_at(t), 1, "an idle key is dropped");
    }
    Ok(())
}

/// A start anywhere in range and a gap of any magnitude (log-uniform) that keeps the
/// end in range.
fn start_and_gap() -> impl Strategy<Value = (u64, u64)> {
    (0..=MAX_TIME_NANOS, 0u32..=63, any::<u64>()).prop_map(|(t0, bits, x)| {
        let gap = if bits == 0 { 0 } else { x >> (64 - bits) };
        (t0, gap.min(MAX_TIME_NANOS - t0))
    })
}

fn quota() -> impl Strategy<Value = Quota> {
    (1u64..=20, 1u64..=20, 1u64..=4_000).prop_filter_map("valid", |(limit, burst, ms)| {
        Quota::from_nanos(limit, ms * 1_000_000)
            .and_then(|q| q.with_burst(burst))
            .ok()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_algorithm_forgets_after_its_own_span(q in quota(), (t0, gap) in start_and_gap()) {
        let span = q.burst() * q.emission_interval().as_nanos() as u64;
        let w = q.period_nanos();
        after_idle_gap(Gcra::new(q), span, t0, gap)?;
        after_idle_gap(TokenBucket::new(q), span, t0, gap)?;
        after_idle_gap(LeakyMeter::new(q), span, t0, gap)?;
        after_idle_gap(LeakyQueue::new(q), span, t0, gap)?;
        after_idle_gap(FixedWindow::new(q).unwrap(), w, t0, gap)?;
        after_idle_gap(FixedWindow::new(q).unwrap().count_excess().unwrap(), w, t0, gap)?;
        let first = FixedWindow::with_placement(q, Placement::FirstRequest).unwrap();
        after_idle_gap(first, 2 * w, t0, gap)?;
        after_idle_gap(SlidingWindowCounter::new(q).unwrap(), 2 * w, t0, gap)?;
        after_idle_gap(CalendarQuota::new(q.limit(), Period::Fixed(w)).unwrap(), w, t0, gap)?;
    }

    #[test]
    fn calendar_quotas_forget_after_their_period(limit in 1u64..=20, (t0, gap) in start_and_gap()) {
        after_idle_gap(CalendarQuota::per_day(limit).unwrap(), DAY, t0, gap)?;
        after_idle_gap(CalendarQuota::per_month(limit).unwrap(), 31 * DAY, t0, gap)?;
    }
}

/// The gaps that showed the old truncated window indices: a sliding counter (W = 1 s)
/// idle 97 days and about three years, a first-request window idle 8 days, a fixed
/// one-second calendar period idle 97 days.
#[test]
fn the_reported_gaps_are_forgotten() {
    let per_second = Quota::per_second(10).unwrap();
    let counter = SlidingWindowCounter::new(per_second).unwrap();
    let first = FixedWindow::with_placement(per_second, Placement::FirstRequest).unwrap();
    let fixed = CalendarQuota::new(10, Period::Fixed(S)).unwrap();
    let t0 = 1_700_000_000 * S;
    for gap in [97 * DAY, (1 << 23) * S, 3 * 365 * DAY] {
        after_idle_gap(counter, 2 * S, t0, gap).unwrap();
        after_idle_gap(fixed, S, t0, gap).unwrap();
    }
    for gap in [8 * DAY, 6 * DAY + 8 * 3_600 * S] {
        after_idle_gap(first, 2 * S, t0, gap).unwrap();
    }
}
