//! Rules that name their algorithm (`rate_limit.portero.algorithm`, `burst`): GCRA
//! and the sliding window counter answer with their own exact figures — what is
//! left, when the count is whole again, when a refused request would fit — where
//! envoyproxy/ratelimit's fixed window would answer with its window's end. A file
//! that asks for what the gateway does not keep is refused by name.

use std::time::Duration;

use portero_server::config;
use portero_server::decide::{Code, Request, Status};
use portero_server::headers::HeaderStyle;

mod support;
use support::{descriptor, gateway, NOW};

const FILE: &str = "
domain: api
descriptors:
  - key: smooth
    rate_limit: { unit: minute, requests_per_unit: 60, portero: { algorithm: gcra, burst: 2 } }
  - key: slide
    rate_limit: { unit: minute, requests_per_unit: 10, portero: { algorithm: sliding-window-counter } }
  - key: fixed
    rate_limit: { unit: minute, requests_per_unit: 10 }
";

const S: u64 = 1_000_000_000;

fn one(key: &str, hits: u64) -> Request {
    let mut d = descriptor(&[(key, "ann")]);
    d.hits = hits;
    Request {
        domain: "api".into(),
        descriptors: vec![d],
    }
}

fn status(g: &portero_server::gateway::Gateway, key: &str, hits: u64, at: u64) -> Status {
    g.decide_at(&one(key, hits), at).unwrap().statuses.remove(0)
}

#[test]
fn gcra_spreads_the_unit_and_says_when_a_request_fits() {
    let g = gateway(FILE);
    let at = NOW + 30 * S;
    let first = status(&g, "smooth", 1, at);
    assert_eq!((first.code, first.remaining), (Code::Ok, 1));
    assert_eq!(
        first.until_reset,
        Some(Duration::from_secs(1)),
        "one second's worth spent"
    );
    let second = status(&g, "smooth", 1, at);
    assert_eq!((second.code, second.remaining), (Code::Ok, 0));
    assert_eq!(second.until_reset, Some(Duration::from_secs(2)));
    // The burst of 2 is spent: the next request fits in one emission interval (1 s),
    // not at the minute's end as a fixed window would say.
    let third = status(&g, "smooth", 1, at);
    assert_eq!(third.code, Code::OverLimit);
    assert_eq!(third.retry_after, Some(Duration::from_secs(1)));
    assert_eq!(third.until_reset, Some(Duration::from_secs(2)));
    assert_eq!(status(&g, "smooth", 1, at + S - 1).code, Code::OverLimit);
    assert_eq!(status(&g, "smooth", 1, at + S).code, Code::Ok);
    // More than the burst at once never fits: refused, nothing charged.
    assert_eq!(status(&g, "smooth", 3, at + 10 * S).code, Code::OverLimit);
    assert_eq!(status(&g, "smooth", 2, at + 10 * S).code, Code::Ok);
    let limit = third.limit.unwrap();
    assert_eq!(
        (limit.requests_per_unit, limit.shape.name().as_str()),
        (60, "gcra")
    );
}

#[test]
fn the_sliding_counter_has_no_burst_at_the_window_edge() {
    let g = gateway(FILE);
    let late = NOW + 59 * S;
    for key in ["slide", "fixed"] {
        assert_eq!(status(&g, key, 10, late).code, Code::Ok, "{key}");
    }
    // A second later the next window begins: the fixed window admits ten more at
    // once, the sliding counter still counts the last window's ten.
    let next = NOW + 60 * S;
    assert_eq!(status(&g, "fixed", 10, next).code, Code::Ok);
    let slid = status(&g, "slide", 1, next);
    assert_eq!(slid.code, Code::OverLimit);
    let retry = slid.retry_after.expect("a refusal says when");
    assert!(
        retry > Duration::ZERO && retry <= Duration::from_secs(60),
        "{retry:?}"
    );
    // It fits when it said it would, not a nanosecond before.
    let fits = u64::try_from(retry.as_nanos())
        .ok()
        .and_then(|wait| next.checked_add(wait))
        .expect("a wait of at most a minute");
    assert_eq!(status(&g, "slide", 1, fits - 1).code, Code::OverLimit);
    assert_eq!(status(&g, "slide", 1, fits).code, Code::Ok);
}

#[test]
fn retry_after_is_the_algorithms_own() {
    let g = gateway(FILE)
        .with_headers(HeaderStyle::from_name("ietf", HeaderStyle::envoy_names()).unwrap());
    let at = NOW + 30 * S;
    for _ in 0..2 {
        g.decide_at(&one("smooth", 1), at).unwrap();
    }
    let refused = g.decide_at(&one("smooth", 1), at).unwrap();
    let headers = g.headers_of(&refused);
    let retry = headers
        .iter()
        .find(|(k, _)| k == "retry-after")
        .map(|(_, v)| v.as_str());
    assert_eq!(retry, Some("1"), "{headers:?}");
    let fields = headers.iter().find(|(k, _)| k == "ratelimit").unwrap();
    // `t` on a refusal is the wait, as portero-http writes it for every limit.
    assert_eq!(fields.1, "\"d0\";r=0;t=1");
}

#[test]
fn a_changed_algorithm_counts_afresh_and_an_unchanged_rule_keeps_its_count() {
    let g = gateway(FILE);
    let at = NOW + 30 * S;
    for key in ["smooth", "fixed"] {
        status(&g, key, 2, at);
    }
    let changed = FILE.replace("burst: 2", "burst: 3");
    let tree = config::from_texts(&[("test.yaml".into(), changed)]).unwrap();
    assert_eq!(
        g.reload(tree).unwrap(),
        2,
        "the sliding and fixed rules carried"
    );
    assert_eq!(
        status(&g, "smooth", 3, at).code,
        Code::Ok,
        "a fresh GCRA of burst 3"
    );
    assert_eq!(status(&g, "fixed", 1, at).remaining, 7, "10 - 2 - 1: kept");
}

#[test]
fn what_the_gateway_does_not_keep_is_refused_by_name() {
    for (portero, says) in [
        ("{ algorithm: token-bucket }", "not kept by the gateway"),
        ("{ algorithm: sliding-log }", "not kept by the gateway"),
        (
            "{ algorithm: Gcra }",
            "expected fixed-window, sliding-window-counter or gcra",
        ),
        ("{ algorithm: gcra, burst: 0 }", "burst 0"),
        ("{ burst: 5 }", "burst is GCRA's"),
        ("{ algorithm: gcra, burst: -1 }", "test.yaml"),
        ("{ algorithm: gcra, burst: 4294967295 }", "too large"),
        (
            "{ lease: 2 }",
            "lease 2: from 1 to what the rule admits at once (1)",
        ),
        ("{ lease: 1, lease_ms: 0 }", "lease_ms 0"),
        ("{ lease_ms: 10 }", "lease_ms without a lease"),
        ("UNLIMITED", "unlimited counts nothing"),
    ] {
        let limit = if portero == "UNLIMITED" {
            "unlimited: true, portero: { algorithm: gcra, burst: 3 }".to_string()
        } else {
            format!("unit: year, requests_per_unit: 1, portero: {portero}")
        };
        let yaml =
            format!("domain: api\ndescriptors:\n  - key: k\n    rate_limit: {{ {limit} }}\n");
        let e = config::from_texts(&[("test.yaml".into(), yaml)]).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains(says) && text.contains("test.yaml"),
            "{portero}: {text}"
        );
    }
}

#[test]
fn retry_after_waits_for_the_slowest_refusing_descriptor() {
    // Two GCRA rules refuse one request: 1 a second and 1 every 10 s, burst 1 each.
    // The request fits again only after 10 s (outside review: it said 1).
    let file = "
domain: api
descriptors:
  - key: a
    rate_limit: { unit: minute, requests_per_unit: 60, portero: { algorithm: gcra, burst: 1 } }
  - key: b
    rate_limit: { unit: minute, requests_per_unit: 6, portero: { algorithm: gcra, burst: 1 } }
";
    let g = gateway(file)
        .with_headers(HeaderStyle::from_name("ietf", HeaderStyle::envoy_names()).unwrap());
    let both = Request {
        domain: "api".into(),
        descriptors: vec![descriptor(&[("a", "v")]), descriptor(&[("b", "v")])],
    };
    let at = NOW + 30 * S;
    assert_eq!(g.decide_at(&both, at).unwrap().code, Code::Ok);
    let refused = g.decide_at(&both, at).unwrap();
    assert_eq!(refused.code, Code::OverLimit);
    let headers = g.headers_of(&refused);
    let retry = headers
        .iter()
        .find(|(k, _)| k == "retry-after")
        .map(|(_, v)| v.as_str());
    assert_eq!(retry, Some("10"), "{headers:?}");
    assert_eq!(
        g.decide_at(&both, at + 10 * S - 1).unwrap().code,
        Code::OverLimit
    );
    assert_eq!(g.decide_at(&both, at + 10 * S).unwrap().code, Code::Ok);
}

#[test]
fn hits_beyond_the_burst_are_refused_with_the_counters_own_figures() {
    // A fresh GCRA key of burst 2 asked for 3: refused, nothing charged, and what it
    // reports is the counter's (2 left, whole now) — not a fixed window's "0 left
    // until the minute ends" (outside review) — asked back after a unit of time.
    let g = gateway(FILE);
    let at = NOW + 51 * S;
    let never = status(&g, "smooth", 3, at);
    assert_eq!(never.code, Code::OverLimit);
    assert_eq!(never.remaining, 2);
    assert_eq!(never.until_reset, Some(Duration::ZERO));
    assert_eq!(never.retry_after, Some(Duration::from_secs(60)));
    assert_eq!(
        status(&g, "smooth", 2, at).code,
        Code::Ok,
        "nothing was charged"
    );
}

#[test]
fn a_fixed_window_answers_as_envoyproxy_ratelimit_does() {
    // Only asking (0 hits) on a fresh key, and asking for more than a window holds:
    // the aligned window's end (30 s into the minute: 30 s), nothing left for the
    // latter — envoyproxy/ratelimit's figures, whatever the counter holds.
    let g = gateway(FILE);
    let at = NOW + 30 * S;
    let asked = status(&g, "fixed", 0, at);
    assert_eq!((asked.code, asked.remaining), (Code::Ok, 10));
    assert_eq!(asked.until_reset, Some(Duration::from_secs(30)));
    let beyond = status(&g, "fixed", 11, at);
    assert_eq!((beyond.code, beyond.remaining), (Code::OverLimit, 0));
    assert_eq!(beyond.retry_after, Some(Duration::from_secs(30)));
}

#[test]
fn a_shadow_rule_over_its_limit_asks_no_one_to_wait() {
    let file = "
domain: api
descriptors:
  - key: probe
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1, portero: { algorithm: gcra } }
";
    let g = gateway(file);
    let at = NOW + 30 * S;
    let mut d = descriptor(&[("probe", "x")]);
    d.hits = 1;
    let r = Request {
        domain: "api".into(),
        descriptors: vec![d],
    };
    g.decide_at(&r, at).unwrap();
    let over = g.decide_at(&r, at).unwrap();
    assert_eq!(over.code, Code::Ok, "a shadow rule never refuses");
    assert_eq!(over.statuses[0].retry_after, None);
}
