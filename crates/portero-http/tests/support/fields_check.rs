//! The properties of the header fields over any input, shared by the property test
//! (`tests/fields.rs`) and the cargo-fuzz target (`fuzz/fuzz_targets/fields.rs`).

use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue};
use portero::Decision;
use portero_http::headers::{insert, parse_ratelimit, Policy, MAX_ADVERTISED_SECS, RATELIMIT};
use portero_http::{retry_after, Backoff};

/// Whatever bytes a server sent as `Retry-After` or `RateLimit`: no panic, every wait
/// bounded (and adding it to the clock cannot overflow).
pub fn parse_any(bytes: &[u8], attempt: u32) {
    let Ok(value) = HeaderValue::from_bytes(bytes) else {
        return;
    };
    let mut h = HeaderMap::new();
    h.insert("retry-after", value.clone());
    let b = Backoff::new(Duration::from_millis(100), Duration::from_secs(30)).unwrap();
    let wait = b.delay(attempt, retry_after(&h, SystemTime::UNIX_EPOCH));
    assert!(wait <= b.max_wait(), "{wait:?}");
    let _ = std::time::Instant::now() + wait;
    if let Some(items) = parse_ratelimit(&value) {
        assert!(items.iter().all(|i| i.reset_secs <= MAX_ADVERTISED_SECS));
    }
}

/// Whatever a limiter decided: the fields built from it parse back, bounded.
pub fn build_any(allowed: bool, limit: u64, remaining: u64, retry: u64, reset: u64) {
    let d = Decision::new(allowed, limit, remaining, 1, retry, reset);
    let mut h = HeaderMap::new();
    insert(&mut h, &d, &Policy::new("p", limit, 60).unwrap());
    // The draft's integers have at most 15 digits; larger counts do not parse back
    // (and no limiter holds 10^15 units).
    if remaining < 1_000_000_000_000_000 {
        let items = parse_ratelimit(&h[RATELIMIT]).expect("our own field parses");
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].remaining, remaining);
        assert!(items[0].reset_secs <= MAX_ADVERTISED_SECS);
    }
    if let Some(wait) = retry_after(&h, SystemTime::UNIX_EPOCH) {
        assert!(!allowed && (1..=MAX_ADVERTISED_SECS).contains(&wait.as_secs()));
    }
}
