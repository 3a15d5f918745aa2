//! Calendar quotas: per-day and per-month counts that reset exactly at UTC boundaries.

use portero::keyed::stack;

use portero::{CalendarQuota, Gcra, ManualClock, Period, Quota, RateLimiter};
use proptest::prelude::*;

const S: u64 = 1_000_000_000;
const DAY: u64 = 86_400 * S;

fn limiter(q: CalendarQuota) -> RateLimiter<CalendarQuota, ManualClock> {
    RateLimiter::with_algorithm_and_clock(q, ManualClock::new())
}

/// The guide's quota example: 500,000 per day at a steady 10 per second runs out after
/// 50,000 s (13.9 h), and the rate limit never noticed.
#[test]
fn half_a_million_per_day_at_ten_per_second_lasts_fifty_thousand_seconds() {
    let day_start = 20_787 * DAY; // 2026-11-30T00:00:00Z
    let quota = limiter(CalendarQuota::per_day(500_000).unwrap());
    let rate = RateLimiter::gcra(Quota::per_second(10).unwrap()).with_clock(ManualClock::new());
    let mut t = day_start;
    let mut last_ok = None;
    loop {
        let s = stack::check_all(&[&rate, &quota], t, 1).unwrap();
        if s.rejected_by.is_some() {
            assert_eq!(s.rejected_by, Some(1), "the quota, not the rate, says no");
            let d = s.decision;
            assert_eq!(d.remaining(), 0);
            assert_eq!(
                t + d.retry_after_nanos(),
                day_start + DAY,
                "back at midnight"
            );
            break;
        }
        last_ok = Some(t);
        t += S / 10;
    }
    assert_eq!(last_ok.unwrap() - day_start + S / 10, 50_000 * S);
    // Refunds gave the rate limiter its token back for the rejected request.
    assert!(rate.peek_at(t, 1).unwrap().is_allowed());
}

proptest! {
    /// Across day or month boundaries: never more than the quota per calendar period,
    /// remaining is exact, and a spent quota comes back exactly at the boundary.
    #[test]
    fn never_more_than_the_quota_per_period(
        limit in 1u64..20,
        monthly in any::<bool>(),
        gaps in prop::collection::vec((0u64..(3 * 3_600), 1u64..=3), 1..400),
    ) {
        let period = if monthly { Period::Month } else { Period::Day };
        let q = CalendarQuota::new(limit, period).unwrap();
        let lim = limiter(q);
        let mut t = 20_787 * DAY - 5 * 3_600 * S; // 2026-11-29T19:00Z, near a month end
        let scale = if monthly { 60 } else { 1 }; // monthly runs cover months
        let mut used: std::collections::HashMap<u64, u64> = Default::default();
        for (gap, cost) in gaps {
            t += gap * S * scale;
            let (index, _, end) = q.period_at(t);
            let Ok(d) = lim.check_at(t, cost) else {
                prop_assert!(cost > limit);
                continue;
            };
            let u = used.entry(index).or_default();
            if d.is_allowed() {
                *u += cost;
                prop_assert!(*u <= limit);
                prop_assert_eq!(d.remaining(), limit - *u);
            } else {
                prop_assert!(*u + cost > limit);
                prop_assert_eq!(t + d.retry_after_nanos(), end);
                prop_assert!(lim.peek_at(end, cost).unwrap().is_allowed());
                prop_assert!(!lim.peek_at(end - 1, cost).unwrap().is_allowed());
            }
        }
    }
}

#[test]
fn time_going_back_into_yesterday_restores_nothing() {
    let q = limiter(CalendarQuota::per_day(2).unwrap());
    let today = 20_787 * DAY + 3_600 * S;
    assert!(q.check_at(today, 2).unwrap().is_allowed());
    let d = q.check_at(today - 2 * 3_600 * S, 1).unwrap();
    assert!(!d.is_allowed());
    assert_eq!(today - 2 * 3_600 * S + d.retry_after_nanos(), 20_788 * DAY);
    assert!(CalendarQuota::new(0, Period::Day).is_err());
    assert!(CalendarQuota::new(1, Period::Fixed(0)).is_err());
    // Days need 17 bits of index, leaving 47 for the count.
    assert!(CalendarQuota::new(1 << 47, Period::Day).is_err());
    assert!(CalendarQuota::new((1 << 47) - 1, Period::Day).is_ok());
    let _ = Gcra::new(Quota::per_second(1).unwrap());
}

/// The guide's "N in any window" table: "60 per minute" on GCRA (burst 60) lets a
/// fresh client through 119 times in its first 60 s (a full bucket, then one a
/// second); the sliding log, exactly 60.
#[test]
fn sixty_a_minute_is_119_in_the_first_minute_on_gcra_and_60_on_the_sliding_log() {
    let q = Quota::per_minute(60).unwrap();
    let gcra = RateLimiter::with_algorithm_and_clock(Gcra::new(q), ManualClock::new());
    let log = portero::SlidingLog::with_clock(q, ManualClock::new());
    // A request every 10 ms for the first 60 s.
    let times = (0..6_000u64).map(|i| i * 10_000_000);
    let (mut on_gcra, mut on_log) = (0, 0);
    for t in times {
        on_gcra += u32::from(gcra.check_at(t, 1).unwrap().is_allowed());
        on_log += u32::from(log.check_at(t, 1).unwrap().is_allowed());
    }
    assert_eq!((on_gcra, on_log), (119, 60));
}
