//! The fields a server writes and a client reads, over any input: the parsers never
//! panic, the builder's output always parses back, every number is bounded. (The same
//! properties as the cargo-fuzz target `fuzz/fuzz_targets/fields.rs`.)

use http::HeaderValue;
use portero_http::headers::{parse_ratelimit, MAX_ADVERTISED_SECS};
use proptest::prelude::*;

mod support {
    pub mod fields_check;
}
use support::fields_check::{build_any, parse_any};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn any_field_bytes_parse_without_panic(bytes in prop::collection::vec(any::<u8>(), 0..80), attempt in any::<u32>()) {
        parse_any(&bytes, attempt);
    }

    #[test]
    fn fields_built_from_any_decision_parse_back_bounded(
        allowed in any::<bool>(),
        (limit, remaining, retry, reset) in (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()),
    ) {
        build_any(allowed, limit, remaining, retry, reset);
    }
}

#[test]
fn hostile_ratelimit_fields_are_refused() {
    let parse = |s: &'static str| parse_ratelimit(&HeaderValue::from_static(s));
    assert_eq!(
        parse(r#""a";r=1;t=2, "b";r=3;t=4"#).map(|v| v.len()),
        Some(2)
    );
    assert_eq!(
        parse(r#""a";r=1;t=99999999999999"#).unwrap()[0].reset_secs,
        MAX_ADVERTISED_SECS
    );
    for bad in [
        r#""a";r=1"#,
        r#"a;r=1;t=2"#,
        r#""a";r=-1;t=2"#,
        r#""a";r=1;t=1e9"#,
        r#""a";r=99999999999999999999;t=2"#,
        r#""a b";r=1;t=2"#,
        "",
    ] {
        assert_eq!(parse(bad), None, "{bad}");
    }
    let many = vec![r#""a";r=1;t=1"#; 17].join(",");
    assert_eq!(
        parse_ratelimit(&HeaderValue::from_str(&many).unwrap()),
        None
    );
}
