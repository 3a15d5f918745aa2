//! Every bad input a limiter can meet gets a clear, typed error: no panic, no
//! overflow, no silent over-admission.

use std::time::Duration;

use portero::{
    CheckError, Gcra, ManualClock, Quota, QuotaError, RateLimiter, TokenBucket, MAX_TIME_NANOS,
};

#[test]
fn zero_and_absurd_rates_are_refused() {
    assert_eq!(Quota::per_second(0), Err(QuotaError::ZeroRate));
    assert_eq!(Quota::new(10, Duration::ZERO), Err(QuotaError::ZeroPeriod));
    assert!(matches!(
        Quota::per_second(u64::MAX),
        Err(QuotaError::RateTooHigh { .. })
    ));
    assert_eq!(
        Quota::per_second(10).unwrap().with_burst(0),
        Err(QuotaError::ZeroBurst)
    );
    assert_eq!(
        Quota::per_day(1).unwrap().with_burst(1 << 40),
        Err(QuotaError::SpanTooLong)
    );
    assert_eq!(Quota::new(1, Duration::MAX), Err(QuotaError::SpanTooLong));
    let msg = Quota::per_second(0).unwrap_err().to_string();
    assert!(msg.contains("at least 1"), "{msg}");
}

#[test]
fn cost_above_capacity_is_a_distinct_error_and_consumes_nothing() {
    let q = Quota::per_second(10).unwrap();
    let g = RateLimiter::gcra(q).with_clock(ManualClock::new());
    let tb = RateLimiter::token_bucket(q).with_clock(ManualClock::new());
    let err = CheckError::CostExceedsCapacity {
        cost: 11,
        capacity: 10,
    };
    assert_eq!(g.check_n(11), Err(err));
    assert_eq!(tb.check_n(11), Err(err));
    assert_eq!(
        g.check_n(u64::MAX).unwrap_err().to_string(),
        format!(
            "cost {} exceeds the capacity 10: it can never be admitted",
            u64::MAX
        )
    );
    assert_eq!(g.check_n(10).unwrap().remaining(), 0);
    assert_eq!(tb.check_n(10).unwrap().remaining(), 0);
}

#[test]
fn time_going_backwards_never_panics_or_admits_extra() {
    let clock = ManualClock::starting_at(10_000_000_000);
    let q = Quota::per_second(1).unwrap().with_burst(2).unwrap();
    let g = RateLimiter::gcra(q).with_clock(&clock);
    let tb = RateLimiter::token_bucket(q).with_clock(&clock);
    assert!(g.check_n(2).unwrap().is_allowed());
    assert!(tb.check_n(2).unwrap().is_allowed());
    for t in [9_999_999_999, 5_000_000_000, 0] {
        clock.set(t);
        assert!(!g.check().is_allowed());
        assert!(!tb.check().is_allowed());
    }
    // Back at the original time plus one interval: exactly one passes.
    clock.set(11_000_000_000);
    assert!(g.check().is_allowed());
    assert!(!g.check().is_allowed());
    assert!(tb.check().is_allowed());
    assert!(!tb.check().is_allowed());
}

#[test]
fn timestamps_near_u64_max_are_errors_not_wraps() {
    let q = Quota::per_hour(1).unwrap();
    for now in [MAX_TIME_NANOS + 1, u64::MAX - 1, u64::MAX] {
        let g = RateLimiter::with_algorithm_and_clock(Gcra::new(q), ManualClock::new());
        let tb = RateLimiter::with_algorithm_and_clock(TokenBucket::new(q), ManualClock::new());
        assert_eq!(g.check_at(now, 1), Err(CheckError::TimeOutOfRange { now }));
        assert_eq!(tb.check_at(now, 1), Err(CheckError::TimeOutOfRange { now }));
        assert_eq!(
            tb.set_tokens_at(0, now),
            Err(CheckError::TimeOutOfRange { now })
        );
        // The clock-driven check denies instead of admitting.
        g.clock().set(now);
        let d = g.check();
        assert!(!d.is_allowed());
        assert_eq!(d.retry_after_nanos(), u64::MAX);
        assert_eq!(g.raw_state(), 0, "nothing was written");
    }
    // At the edge of the range, the largest quota still decides without overflow.
    let big = Quota::from_nanos(1, 1 << 62).unwrap();
    let g = RateLimiter::gcra(big).with_clock(ManualClock::new());
    assert!(g.check_at(MAX_TIME_NANOS, 1).unwrap().is_allowed());
    assert!(!g.check_at(MAX_TIME_NANOS, 1).unwrap().is_allowed());
    assert!(!g.check_at(0, 1).unwrap().is_allowed());
}

#[test]
fn zero_cost_is_admitted_and_consumes_nothing() {
    let g = RateLimiter::gcra(Quota::per_second(1).unwrap()).with_clock(ManualClock::new());
    assert!(g.check().is_allowed());
    let before = g.raw_state();
    let d = g.check_n(0).unwrap();
    assert!(d.is_allowed());
    assert_eq!(d.remaining(), 0);
    assert_eq!(g.raw_state(), before);
}

#[test]
fn peek_consumes_nothing_and_reset_refills() {
    let tb =
        RateLimiter::token_bucket(Quota::per_second(3).unwrap()).with_clock(ManualClock::new());
    for _ in 0..5 {
        assert!(tb.peek().is_allowed());
    }
    assert_eq!(tb.tokens(), 3.0);
    for _ in 0..3 {
        assert!(tb.check().is_allowed());
    }
    assert!(!tb.peek().is_allowed());
    tb.reset();
    assert_eq!(tb.tokens(), 3.0);
    assert!(tb.check().is_allowed());
}

#[test]
fn initial_fill_is_configurable() {
    let tb =
        RateLimiter::token_bucket(Quota::per_second(10).unwrap()).with_clock(ManualClock::new());
    tb.set_tokens(2).unwrap();
    assert!(tb.check().is_allowed());
    assert!(tb.check().is_allowed());
    assert!(!tb.check().is_allowed());
    assert_eq!(
        tb.set_tokens(11),
        Err(CheckError::CostExceedsCapacity {
            cost: 11,
            capacity: 10
        })
    );
}
