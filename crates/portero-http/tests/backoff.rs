//! Backoff bounds (property tests), its spread, and `Retry-After` parsing.

use std::time::{Duration, SystemTime};

use http::HeaderMap;
use portero_http::{retry_after, Backoff, BackoffError};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

proptest! {
    /// Every delay lies in [retry_after, retry_after + min(cap, base·2^n)], for any
    /// attempt (no overflow at u32::MAX) and any configuration.
    #[test]
    fn delays_stay_within_the_full_jitter_bounds(
        base_ns in 1u64..10_000_000_000,
        extra_ns in 0u64..100_000_000_000,
        attempt in any::<u32>(),
        retry_ms in proptest::option::of(0u64..10_000_000),
        seed in any::<u64>(),
    ) {
        let (base, cap) = (Duration::from_nanos(base_ns), Duration::from_nanos(base_ns + extra_ns));
        let b = Backoff::new(base, cap).unwrap();
        let ceiling = b.ceiling(attempt);
        prop_assert!(ceiling >= base.min(cap) && ceiling <= cap);
        if attempt < 64 {
            let exact = (base_ns as u128) << attempt;
            prop_assert_eq!(ceiling.as_nanos(), exact.min(cap.as_nanos()));
        }
        let retry = retry_ms.map(Duration::from_millis);
        let d = b.delay_with(attempt, retry, &mut StdRng::seed_from_u64(seed));
        let floor = retry.unwrap_or(Duration::ZERO);
        let (lo, hi) = (floor.min(b.max_wait()), (floor + ceiling).min(b.max_wait()));
        prop_assert!(d >= lo && d <= hi, "{:?} not in [{:?}, {:?}]", d, lo, hi);
    }
}

#[test]
fn the_jitter_spreads_over_the_whole_interval() {
    // 20,000 draws at a 1 s ceiling: the mean is 0.5 s (± 3 % with overwhelming
    // probability for a uniform draw) and every tenth of the interval is used.
    let b = Backoff::new(Duration::from_millis(125), Duration::from_secs(60)).unwrap();
    let mut rng = StdRng::seed_from_u64(42);
    let mut deciles = [0u32; 10];
    let mut sum = 0.0;
    for _ in 0..20_000 {
        let d = b.delay_with(3, None, &mut rng).as_secs_f64();
        sum += d;
        deciles[((d * 10.0) as usize).min(9)] += 1;
    }
    let mean = sum / 20_000.0;
    assert!((0.485..0.515).contains(&mean), "mean {mean}");
    for (i, n) in deciles.iter().enumerate() {
        assert!((1_700..2_300).contains(n), "decile {i}: {n}");
    }
}

#[test]
fn bad_configurations_are_errors() {
    let s = Duration::from_secs(1);
    assert_eq!(Backoff::new(Duration::ZERO, s), Err(BackoffError::ZeroBase));
    assert_eq!(Backoff::new(s, s / 2), Err(BackoffError::CapBelowBase));
}

#[test]
fn retry_after_reads_seconds_and_dates() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let with = |v: &str| {
        let mut h = HeaderMap::new();
        h.insert("retry-after", v.parse().unwrap());
        retry_after(&h, now)
    };
    assert_eq!(with("120"), Some(Duration::from_secs(120)));
    assert_eq!(with(" 7 "), Some(Duration::from_secs(7)));
    assert_eq!(
        with("99999999999999999999999"),
        Some(Duration::from_secs(u64::MAX))
    );
    let later = httpdate::fmt_http_date(now + Duration::from_secs(90));
    assert_eq!(with(&later), Some(Duration::from_secs(90)));
    let earlier = httpdate::fmt_http_date(now - Duration::from_secs(90));
    assert_eq!(with(&earlier), Some(Duration::ZERO));
    for bad in ["", "-5", "1.5", "soon", "Mon, 99 Foo 2024"] {
        assert_eq!(with(bad), None, "{bad:?}");
    }
    assert_eq!(retry_after(&HeaderMap::new(), now), None);
}

/// `Retry-After: 99999999999999999999` parses to `u64::MAX` seconds; the delay a
/// client gets from it is still bounded (it once made `Instant::now() + delay` panic).
#[test]
fn a_hostile_retry_after_never_overflows_the_callers_clock() {
    let mut h = HeaderMap::new();
    h.insert("retry-after", "99999999999999999999".parse().unwrap());
    let asked = retry_after(&h, SystemTime::now());
    assert_eq!(asked, Some(Duration::from_secs(u64::MAX)));
    let b = Backoff::new(Duration::from_millis(100), Duration::from_secs(30)).unwrap();
    for attempt in [0, 5, u32::MAX] {
        let wait = b.delay(attempt, asked);
        assert!(wait <= Duration::from_secs(3_600), "{wait:?}");
        let _ = std::time::Instant::now() + wait;
    }
}

/// Beyond the ceiling on honoured waits, a client gives up instead of sleeping.
#[test]
fn a_wait_beyond_the_ceiling_gives_up() {
    let b = Backoff::new(Duration::from_millis(100), Duration::from_secs(30))
        .unwrap()
        .with_max_wait(Duration::from_secs(60));
    assert_eq!(b.max_wait(), Duration::from_secs(60));
    assert!(b.next_delay(0, Some(Duration::from_secs(60))).is_some());
    assert_eq!(b.next_delay(0, Some(Duration::from_secs(61))), None);
    assert!(b.delay(0, Some(Duration::from_secs(59))) <= Duration::from_secs(60));
    let huge = b.with_max_wait(Duration::MAX);
    assert_eq!(huge.max_wait(), portero_http::MAX_WAIT_LIMIT);
}
