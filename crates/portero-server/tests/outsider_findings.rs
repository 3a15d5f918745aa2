//! What an outside attack on the server found, each a test: rules whose statistics'
//! paths collide keep their own counters through a reload; a limit above a billion a
//! second is refused with the file, not silently refusing every request; a table that
//! cannot be allocated is an error, never an abort.

use portero_server::config;
use portero_server::decide::{Code, Request};
use portero_server::gateway::Gateway;

mod support;
use support::{descriptor, gateway, NOW};

/// `a: b_c` and `a_b: c` are both `d.a_b_c`; `x.y` and `x` → `y` both `d.x.y`.
const COLLIDING: &str = "
domain: d
descriptors:
  - key: a
    value: b_c
    rate_limit: { unit: hour, requests_per_unit: 2 }
  - key: a_b
    value: c
    rate_limit: { unit: hour, requests_per_unit: 2 }
  - key: x.y
    rate_limit: { unit: hour, requests_per_unit: 2 }
  - key: x
    descriptors:
      - key: y
        rate_limit: { unit: hour, requests_per_unit: 2 }
";

fn one(entries: &[(&str, &str)]) -> Request {
    Request {
        domain: "d".into(),
        descriptors: vec![descriptor(entries)],
    }
}

#[test]
fn rules_whose_paths_collide_keep_their_own_counters_through_a_reload() {
    let g = gateway(COLLIDING);
    let second = one(&[("a_b", "c")]);
    let nested = one(&[("x", "1"), ("y", "2")]);
    for r in [&second, &nested] {
        assert_eq!(g.decide_at(r, NOW).unwrap().code, Code::Ok);
        assert_eq!(g.decide_at(r, NOW).unwrap().code, Code::Ok);
        assert_eq!(g.decide_at(r, NOW).unwrap().code, Code::OverLimit);
    }
    let more =
        format!("{COLLIDING}  - key: z\n    rate_limit: {{ unit: hour, requests_per_unit: 9 }}\n");
    let tree = config::from_texts(&[("d.yaml".into(), more)]).unwrap();
    assert_eq!(
        g.reload(tree),
        Ok(4),
        "every unchanged rule kept its counters"
    );
    for r in [&second, &nested] {
        assert_eq!(g.decide_at(r, NOW).unwrap().code, Code::OverLimit, "{r:?}");
    }
    // The colliding twins never shared a count.
    assert_eq!(
        g.decide_at(&one(&[("a", "b_c")]), NOW).unwrap().code,
        Code::Ok
    );
    assert_eq!(
        g.decide_at(&one(&[("x.y", "1")]), NOW).unwrap().code,
        Code::Ok
    );
}

#[test]
fn a_limit_beyond_a_billion_a_second_is_refused_with_the_file() {
    for (unit, per_unit) in [("second", 1_000_000_001u64), ("second", 4_294_967_295)] {
        let file = format!("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {{ unit: {unit}, requests_per_unit: {per_unit} }}\n");
        let e = config::from_texts(&[("big.yaml".into(), file)]).unwrap_err();
        let said = e.to_string();
        assert!(
            said.contains("big.yaml") && said.contains("more than 1,000,000,000 a second"),
            "{said}"
        );
    }
    // A billion a second, and the most a minute holds, are limits like any other.
    for (unit, per_unit) in [("second", 1_000_000_000u64), ("minute", 4_294_967_295)] {
        let file = format!("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {{ unit: {unit}, requests_per_unit: {per_unit} }}\n");
        let g = gateway(&file);
        let answer = g.decide_at(&one(&[("k", "v")]), NOW).unwrap();
        assert_eq!(answer.code, Code::Ok);
        assert_eq!(u64::from(answer.statuses[0].remaining), per_unit - 1);
    }
}

#[test]
fn a_request_s_own_limit_beyond_a_billion_a_second_is_malformed() {
    let g = gateway("domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n");
    let mut r = one(&[("k", "v")]);
    r.descriptors[0].limit = Some((2_000_000_000, config::unit::Unit::Second));
    let e = g.decide_at(&r, NOW).unwrap_err();
    assert!(e.to_string().contains("1,000,000,000 a second"), "{e}");
}

#[test]
fn tables_that_cannot_be_allocated_are_errors_not_aborts() {
    let file = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n";
    let tree = config::from_texts(&[("d.yaml".into(), file.into())]).unwrap();
    // Far more keys than any machine holds: refused, said, never an abort.
    let e = Gateway::try_new(tree, usize::MAX / 64, false).unwrap_err();
    assert!(e.contains("memory"), "{e}");
}
