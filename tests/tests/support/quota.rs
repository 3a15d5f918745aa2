//! Quotas as the tests write them.

use portero::Quota;

/// `per_second` units a second, at most `burst` at once.
pub fn quota(per_second: u64, burst: u64) -> Quota {
    Quota::per_second(per_second)
        .unwrap()
        .with_burst(burst)
        .unwrap()
}
