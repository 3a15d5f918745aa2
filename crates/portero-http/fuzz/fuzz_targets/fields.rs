//! Any bytes a peer sends as `Retry-After` or `RateLimit`, and any decision a limiter
//! builds fields from (the properties live in `tests/support/fields_check.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/support/fields_check.rs"]
mod fields_check;

fuzz_target!(|input: (&[u8], [u64; 4], u32, bool)| {
    let (bytes, [limit, remaining, retry, reset], attempt, allowed) = input;
    fields_check::parse_any(bytes, attempt);
    fields_check::build_any(allowed, limit, remaining, retry, reset);
});
