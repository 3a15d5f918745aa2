//! The shared header cases (`tests/fixtures/header_cases.json`, also read by the npm
//! package's tests): the Rust builder writes exactly the fields listed, no more.

use http::HeaderMap;
use portero::Decision;
use portero_http::headers::{insert, Policy};
use serde_json::Value;

const CASES: &str = include_str!("../../../tests/fixtures/header_cases.json");

fn nanos(ms: &Value) -> u64 {
    let ms = ms.as_u64().expect("whole milliseconds");
    ms.saturating_mul(1_000_000)
}

#[test]
fn every_shared_case_gives_exactly_its_fields() {
    let all: Value = serde_json::from_str(CASES).unwrap();
    let cases = all["cases"].as_array().unwrap();
    assert!(cases.len() >= 6);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let quota = case["quota"].as_u64().unwrap();
        let policy = Policy::new(
            case["policy"].as_str().unwrap(),
            quota,
            case["windowSeconds"].as_u64().unwrap(),
        )
        .unwrap();
        let d = &case["decision"];
        let decision = Decision::new(
            d["allowed"].as_bool().unwrap(),
            quota,
            d["remaining"].as_u64().unwrap(),
            1,
            nanos(&d["retryAfterMs"]),
            nanos(&d["resetAfterMs"]),
        );
        let mut got = HeaderMap::new();
        insert(&mut got, &decision, &policy);
        let want = case["headers"].as_object().unwrap();
        assert_eq!(got.len(), want.len(), "{name}: {got:?}");
        for (field, value) in want {
            assert_eq!(
                got[field.as_str()],
                value.as_str().unwrap(),
                "{name}: {field}"
            );
        }
    }
}
