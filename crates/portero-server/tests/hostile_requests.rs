//! What an outside review sent the gateway, each a test that failed before: two
//! descriptors on one counter in one request (they were checked apart, each fit, and
//! nothing was charged yet the answer was OK — without end), statistics names grown
//! by the size of the values sent, a set of limit overrides that once full refused
//! every new one for the life of the process, an override enforced in a domain the
//! configuration does not know, and a replaced rule reported as unlimited.

mod support;

use portero_server::config::unit::Unit;
use portero_server::decide::{Answer, Code, Descriptor, Request};
use portero_server::gateway::Gateway;
use portero_server::limits::MOST_OVERRIDES;
use portero_server::stats::MOST_NAME_BYTES;
use support::{descriptor, gateway, NOW};

fn ask_at(g: &Gateway, domain: &str, descriptors: Vec<Descriptor>, now: u64) -> Answer {
    g.decide_at(
        &Request {
            domain: domain.into(),
            descriptors,
        },
        now,
    )
    .expect("decided")
}

fn ask(g: &Gateway, descriptors: Vec<Descriptor>) -> Answer {
    ask_at(g, "d", descriptors, NOW)
}

const SHARED: &str = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n  - key: w\n    value: \"a*\"\n    share_threshold: true\n    rate_limit: {unit: minute, requests_per_unit: 1}\n";

#[test]
fn two_descriptors_on_one_counter_count_together() {
    let g = gateway(SHARED);
    for _ in 0..5 {
        let a = ask(
            &g,
            vec![descriptor(&[("k", "x")]), descriptor(&[("k", "x")])],
        );
        assert_eq!(a.code, Code::OverLimit, "2 on a counter of 1: {a:?}");
    }
    // Nothing was charged by the refused requests.
    let one = ask(&g, vec![descriptor(&[("k", "x")])]);
    assert_eq!((one.code, one.statuses[0].remaining), (Code::Ok, 0));
    // Two values a shared wildcard joins are one counter too.
    let a = ask(
        &g,
        vec![descriptor(&[("w", "a1")]), descriptor(&[("w", "a2")])],
    );
    assert_eq!(a.code, Code::OverLimit);
    assert_eq!(ask(&g, vec![descriptor(&[("w", "a3")])]).code, Code::Ok);
    assert_eq!(
        ask(&g, vec![descriptor(&[("w", "a4")])]).code,
        Code::OverLimit
    );
}

#[test]
fn statistics_names_stay_short_whatever_the_values() {
    let g = gateway("domain: d\ndescriptors:\n  - key: user\n    detailed_metric: true\n    rate_limit: {unit: minute, requests_per_unit: 5}\n");
    let huge = "v".repeat(64 * 1024);
    for i in 0..50 {
        ask(&g, vec![descriptor(&[("user", &format!("{i}{huge}"))])]);
    }
    let rendered = g.stats().render();
    assert!(
        rendered.len() < 50 * 6 * (MOST_NAME_BYTES + 100),
        "{} bytes",
        rendered.len()
    );
    assert!(
        g.stats().of(&format!("d.user_0{huge}")).is_some(),
        "found by its full name"
    );
    // The same for a request's own limit override (no configuration needed).
    let mut o = descriptor(&[("o", &huge)]);
    o.limit = Some((3, Unit::Minute));
    ask(&g, vec![o]);
    assert!(g.stats().render().len() < rendered.len() + 6 * (MOST_NAME_BYTES + 100));
}

#[test]
fn a_full_set_of_overrides_limits_the_rest_and_frees_itself_once_idle() {
    let g = gateway(SHARED);
    for i in 0..MOST_OVERRIDES as u32 {
        let mut o = descriptor(&[("o", "x")]);
        o.limit = Some((1_000 + i, Unit::Minute));
        assert_eq!(ask(&g, vec![o]).code, Code::Ok);
    }
    // One more override, beside a rule at its limit: not an error (Envoy would let
    // the whole request by), and the rule still refuses.
    ask(&g, vec![descriptor(&[("k", "y")])]);
    let mut o = descriptor(&[("o", "new")]);
    o.limit = Some((7, Unit::Minute));
    let a = ask(&g, vec![o.clone(), descriptor(&[("k", "y")])]);
    assert_eq!(a.code, Code::OverLimit, "{a:?}");
    assert_eq!(
        a.statuses[0].limit, None,
        "the override that could not be kept"
    );
    // A minute later every override's window is full again: room is made.
    let later = ask_at(&g, "d", vec![o], NOW + 61_000_000_000);
    assert_eq!(
        later.statuses[0]
            .limit
            .as_ref()
            .map(|l| l.requests_per_unit),
        Some(7)
    );
}

#[test]
fn an_unknown_domain_limits_nothing_and_a_replaced_rule_is_not_unlimited() {
    let g = gateway(SHARED);
    let mut o = descriptor(&[("o", "x")]);
    o.limit = Some((1, Unit::Minute));
    for _ in 0..3 {
        let a = ask_at(&g, "elsewhere", vec![o.clone()], NOW);
        assert_eq!((a.code, a.statuses[0].limit.clone()), (Code::Ok, None));
    }
    let g = gateway("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {name: first, unit: minute, requests_per_unit: 5}\n  - key: b\n    rate_limit: {unit: minute, requests_per_unit: 9, replaces: [{name: first}]}\n");
    let a = ask(
        &g,
        vec![descriptor(&[("a", "1")]), descriptor(&[("b", "1")])],
    );
    assert_eq!(
        (a.statuses[0].limit.clone(), a.statuses[0].remaining),
        (None, 0)
    );
    assert_eq!(a.statuses[1].remaining, 8);
}
