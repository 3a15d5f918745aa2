//! envoyproxy/ratelimit's README examples, each as its configuration and requests:
//! the same file and descriptors give the codes, limits and remaining the README
//! describes. Decided at fixed instants (ns since the Unix epoch) through the library.

mod support;

use portero_server::config::unit::Unit;
use portero_server::decide::{Answer, Code, Descriptor, Request};
use portero_server::gateway::Gateway;
use support::{descriptor, gateway, NOW};

fn ask(g: &Gateway, domain: &str, descriptors: Vec<Descriptor>) -> Answer {
    g.decide_at(
        &Request {
            domain: domain.into(),
            descriptors,
        },
        NOW,
    )
    .expect("decided")
}

/// How many of `n` requests of `descriptors` are admitted.
fn admitted(g: &Gateway, domain: &str, n: usize, descriptors: &[&[(&str, &str)]]) -> usize {
    (0..n)
        .filter(|_| {
            ask(
                g,
                domain,
                descriptors.iter().map(|d| descriptor(d)).collect(),
            )
            .code
                == Code::Ok
        })
        .count()
}

#[test]
fn example_1_two_values_each_their_own_limit() {
    let g = gateway(
        "domain: mongo_cps\ndescriptors:\n  - key: database\n    value: users\n    rate_limit:\n      unit: second\n      requests_per_unit: 500\n\n  - key: database\n    value: default\n    rate_limit:\n      unit: second\n      requests_per_unit: 500\n",
    );
    assert_eq!(
        admitted(&g, "mongo_cps", 600, &[&[("database", "users")]]),
        500
    );
    let a = ask(
        &g,
        "mongo_cps",
        vec![descriptor(&[("database", "default")])],
    );
    assert_eq!(a.code, Code::Ok);
    let s = &a.statuses[0];
    let limit = s.limit.as_ref().expect("a limit");
    assert_eq!((limit.requests_per_unit, limit.unit), (500, Unit::Second));
    assert_eq!(s.remaining, 499);
    assert_eq!(s.until_reset, Some(std::time::Duration::from_secs(1)));
    // A value the file does not name is not limited.
    let other = ask(&g, "mongo_cps", vec![descriptor(&[("database", "other")])]);
    assert_eq!(
        (other.code, other.statuses[0].limit.clone()),
        (Code::Ok, None)
    );
}

const MESSAGING: &str = "domain: messaging\ndescriptors:\n  # Only allow 5 marketing messages a day\n  - key: message_type\n    value: marketing\n    descriptors:\n      - key: to_number\n        rate_limit:\n          unit: day\n          requests_per_unit: 5\n\n  # Only allow 100 messages a day to any unique phone number\n  - key: to_number\n    rate_limit:\n      unit: day\n      requests_per_unit: 100\n";

#[test]
fn example_2_nested_descriptors_and_a_value_per_number() {
    let g = gateway(MESSAGING);
    let marketing: &[(&str, &str)] = &[("message_type", "marketing"), ("to_number", "2061111111")];
    assert_eq!(admitted(&g, "messaging", 8, &[marketing]), 5);
    // Each number its own counter.
    let other: &[(&str, &str)] = &[("message_type", "marketing"), ("to_number", "2062222222")];
    assert_eq!(admitted(&g, "messaging", 8, &[other]), 5);
    // Both descriptors in one request: OK only while both are.
    let g = gateway(MESSAGING);
    let any: &[(&str, &str)] = &[("to_number", "2061111111")];
    assert_eq!(admitted(&g, "messaging", 10, &[marketing, any]), 5);
    let a = ask(
        &g,
        "messaging",
        vec![descriptor(marketing), descriptor(any)],
    );
    assert_eq!(a.code, Code::OverLimit);
    assert_eq!(a.statuses[0].code, Code::OverLimit);
    assert_eq!(a.statuses[1].code, Code::Ok);
    // All or none: the refused requests were charged to no rule.
    assert_eq!(a.statuses[1].remaining, 95, "5 admitted of 100");
}

#[test]
fn example_3_the_most_specific_match_and_a_blocked_address() {
    let g = gateway("domain: edge_proxy_per_ip\ndescriptors:\n  - key: remote_address\n    rate_limit:\n      unit: second\n      requests_per_unit: 10\n\n  # Black list IP\n  - key: remote_address\n    value: 50.0.0.5\n    rate_limit:\n      unit: second\n      requests_per_unit: 0\n");
    assert_eq!(
        admitted(
            &g,
            "edge_proxy_per_ip",
            12,
            &[&[("remote_address", "50.0.0.1")]]
        ),
        10
    );
    assert_eq!(
        admitted(
            &g,
            "edge_proxy_per_ip",
            3,
            &[&[("remote_address", "50.0.0.5")]]
        ),
        0
    );
}

#[test]
fn example_4_the_request_has_as_many_entries_as_the_tree_levels() {
    let flat = gateway("domain: example4\ndescriptors:\n  - key: key\n    value: value\n    rate_limit:\n      requests_per_unit: 300\n      unit: second\n");
    let two: &[(&str, &str)] = &[("key", "value"), ("subkey", "subvalue")];
    let a = ask(&flat, "example4", vec![descriptor(two)]);
    assert_eq!(
        a.statuses[0].limit, None,
        "two entries do not match one level"
    );
    let nested = gateway("domain: example4\ndescriptors:\n  - key: key\n    value: value\n    descriptors:\n      - key: subkey\n        rate_limit:\n          requests_per_unit: 300\n          unit: second\n");
    let a = ask(&nested, "example4", vec![descriptor(two)]);
    assert_eq!(
        a.statuses[0].limit.as_ref().map(|l| l.requests_per_unit),
        Some(300)
    );
    assert_eq!(a.statuses[0].remaining, 299);
}

#[test]
fn example_5_unlimited_answers_ok_with_everything_remaining() {
    let g = gateway("domain: internal\ndescriptors:\n  - key: ldap\n    rate_limit:\n      unlimited: true\n\n  - key: azure\n    rate_limit:\n      unit: minute\n      requests_per_unit: 100\n");
    assert_eq!(admitted(&g, "internal", 1_000, &[&[("ldap", "x")]]), 1_000);
    let a = ask(&g, "internal", vec![descriptor(&[("ldap", "x")])]);
    assert_eq!(
        (a.statuses[0].code, a.statuses[0].remaining),
        (Code::Ok, u32::MAX)
    );
    assert_eq!(admitted(&g, "internal", 120, &[&[("azure", "x")]]), 100);
}

#[test]
fn example_6_shadow_mode_counts_but_never_refuses() {
    let g = gateway("domain: example6\ndescriptors:\n  - key: service\n    descriptors:\n      - key: user\n        value: user-a\n        rate_limit:\n          requests_per_unit: 10\n          unit: second\n        shadow_mode: true\n      - key: user\n        value: user-b\n        rate_limit:\n          requests_per_unit: 20\n          unit: second\n");
    assert_eq!(
        admitted(
            &g,
            "example6",
            30,
            &[&[("service", "auth-service"), ("user", "user-a")]]
        ),
        30
    );
    assert_eq!(
        admitted(
            &g,
            "example6",
            30,
            &[&[("service", "auth-service"), ("user", "user-b")]]
        ),
        20
    );
    let [total, over, _, within, shadow] = g
        .stats()
        .of("example6.service.user_user-a")
        .expect("counted");
    assert_eq!((total, over, within, shadow), (30, 20, 10, 20));
}

#[test]
fn example_7_replaces_drops_the_replaced_rule() {
    let g = gateway("domain: example7\ndescriptors:\n  - key: key_1\n    value: value_1\n    descriptors:\n      - key: user\n        value: bkthomps\n        rate_limit:\n          name: specific_limit\n          requests_per_unit: 5\n          unit: second\n  - key: key_2\n    value: value_2\n    descriptors:\n      - key: user\n        value: bkthomps\n        rate_limit:\n          replaces:\n            - name: specific_limit\n          requests_per_unit: 10\n          unit: second\n");
    let one: &[(&str, &str)] = &[("key_1", "value_1"), ("user", "bkthomps")];
    let two: &[(&str, &str)] = &[("key_2", "value_2"), ("user", "bkthomps")];
    // Both matched: only the replacing rule counts (10), and the replaced one is untouched.
    assert_eq!(admitted(&g, "example7", 12, &[one, two]), 10);
    assert_eq!(admitted(&g, "example7", 8, &[one]), 5);
}

#[test]
fn example_8_detailed_metric_names_each_value() {
    let g = gateway("domain: example8\ndescriptors:\n  - key: key1\n    detailed_metric: true\n    rate_limit:\n      unit: minute\n      requests_per_unit: 10\n  - key: key1\n    value: value1\n    rate_limit:\n      unit: minute\n      requests_per_unit: 20\n");
    assert_eq!(
        admitted(&g, "example8", 12, &[&[("key1", "unspecified_value")]]),
        10
    );
    assert_eq!(
        admitted(&g, "example8", 12, &[&[("key1", "unspecified_value2")]]),
        10
    );
    assert_eq!(admitted(&g, "example8", 22, &[&[("key1", "value1")]]), 20);
    assert_eq!(
        g.stats()
            .of("example8.key1_unspecified_value")
            .map(|c| c[0]),
        Some(12)
    );
    assert_eq!(
        g.stats()
            .of("example8.key1_unspecified_value2")
            .map(|c| c[0]),
        Some(12)
    );
    assert_eq!(g.stats().of("example8.key1_value1").map(|c| c[0]), Some(22));
}

#[test]
fn example_9_wildcards_trailing_middle_and_multiple() {
    let g = gateway("domain: example9\ndescriptors:\n  - key: key1\n    value: value*\n    rate_limit:\n      unit: minute\n      requests_per_unit: 20\n  - key: path\n    value: /api/*/action\n    rate_limit:\n      unit: minute\n      requests_per_unit: 20\n  - key: route\n    value: /api/*/resource/*/action\n    rate_limit:\n      unit: minute\n      requests_per_unit: 20\n");
    let limited = |entries: &[(&str, &str)]| {
        ask(&g, "example9", vec![descriptor(entries)]).statuses[0]
            .limit
            .is_some()
    };
    assert!(limited(&[("key1", "value1")]) && limited(&[("key1", "valueXYZ")]));
    assert!(!limited(&[("key1", "valu")]));
    assert!(limited(&[("path", "/api/123/action")]) && limited(&[("path", "/api/user-id/action")]));
    assert!(!limited(&[("path", "/api/123/other")]));
    assert!(limited(&[("route", "/api/v1/resource/123/action")]));
    assert!(!limited(&[("route", "/api/v1/resource/123")]));
    // Without share_threshold each value counts apart.
    assert_eq!(admitted(&g, "example9", 25, &[&[("key1", "value7")]]), 20);
    assert_eq!(admitted(&g, "example9", 25, &[&[("key1", "value8")]]), 20);
}

#[test]
fn example_10_value_to_metric_names_the_runtime_values() {
    let g = gateway("domain: example10\ndescriptors:\n  - key: route\n    value_to_metric: true\n    descriptors:\n      - key: http_method\n        value_to_metric: true\n        descriptors:\n          - key: subject_id\n            rate_limit:\n              unit: minute\n              requests_per_unit: 60\n");
    ask(
        &g,
        "example10",
        vec![descriptor(&[
            ("route", "api"),
            ("http_method", "GET"),
            ("subject_id", "123"),
        ])],
    );
    assert!(g
        .stats()
        .of("example10.route_api.http_method_GET.subject_id")
        .is_some());
}

#[test]
fn example_11_share_threshold_makes_one_counter_for_a_wildcard() {
    let g = gateway("domain: example11\ndescriptors:\n  - key: files\n    value: files/*\n    share_threshold: true\n    rate_limit:\n      unit: hour\n      requests_per_unit: 10\n\n  - key: files_no_share\n    value: files_no_share/*\n    share_threshold: false\n    rate_limit:\n      unit: hour\n      requests_per_unit: 10\n");
    assert_eq!(
        admitted(&g, "example11", 5, &[&[("files", "files/a.pdf")]]),
        5
    );
    assert_eq!(
        admitted(&g, "example11", 5, &[&[("files", "files/b.csv")]]),
        5
    );
    assert_eq!(
        admitted(&g, "example11", 1, &[&[("files", "files/c.txt")]]),
        0
    );
    assert_eq!(
        admitted(
            &g,
            "example11",
            12,
            &[&[("files_no_share", "files_no_share/a.pdf")]]
        ),
        10
    );
    assert_eq!(
        admitted(
            &g,
            "example11",
            12,
            &[&[("files_no_share", "files_no_share/b.csv")]]
        ),
        10
    );
}

#[test]
fn hits_addend_a_limit_override_and_a_window_that_ends() {
    let g = gateway(MESSAGING);
    let mut d = descriptor(&[("to_number", "1")]);
    d.hits = 60;
    assert_eq!(
        ask(&g, "messaging", vec![d.clone()]).statuses[0].remaining,
        40
    );
    assert_eq!(ask(&g, "messaging", vec![d.clone()]).code, Code::OverLimit);
    // 0 hits only asks.
    d.hits = 0;
    assert_eq!(ask(&g, "messaging", vec![d]).statuses[0].remaining, 40);
    // A request's own limit, counted apart from the rule's.
    let mut o = descriptor(&[("to_number", "1")]);
    o.limit = Some((2, Unit::Minute));
    assert_eq!(
        ask(&g, "messaging", vec![o.clone()]).statuses[0].remaining,
        1
    );
    ask(&g, "messaging", vec![o.clone()]);
    assert_eq!(ask(&g, "messaging", vec![o.clone()]).code, Code::OverLimit);
    // The next minute is a new window.
    let later = g
        .decide_at(
            &Request {
                domain: "messaging".into(),
                descriptors: vec![o],
            },
            NOW + 60_000_000_000,
        )
        .unwrap();
    assert_eq!(later.code, Code::Ok);
}
