//! Quotas as the tests write them.

use portero::Quota;

/// `per_second` units a second, at most `burst` at once.
#[allow(dead_code)] // each test binary uses the helpers it needs
pub fn quota(per_second: u64, burst: u64) -> Quota {
    Quota::per_second(per_second)
        .unwrap()
        .with_burst(burst)
        .unwrap()
}

/// How many of the instants `at` (ns, one unit each) a fresh GCRA of `quota` refuses
/// when they are replayed in time order: 0 when they keep its bound, `B + t/T` units
/// in any interval `t`.
#[allow(dead_code)] // each test binary uses the helpers it needs
pub fn over_the_bound(at: &mut [u64], quota: Quota) -> usize {
    at.sort_unstable();
    let audit = portero::RateLimiter::gcra(quota).with_clock(portero::ManualClock::new());
    at.iter()
        .filter(|&&t| !audit.check_at(t, 1).unwrap().is_allowed())
        .count()
}
