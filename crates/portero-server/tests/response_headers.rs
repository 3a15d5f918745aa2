//! The headers answers ask Envoy to add: envoyproxy/ratelimit's three from the
//! tightest limited descriptor, and the IETF fields (one member per limited
//! descriptor, `Retry-After` on a refusal).

use portero_server::decide::Request;
use portero_server::headers::HeaderStyle;

mod support;
use support::{descriptor, gateway, NOW};

const FILE: &str = "
domain: api
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 5 }
  - key: tenant
    rate_limit: { unit: minute, requests_per_unit: 2, name: tenant }
";

fn both() -> Request {
    Request {
        domain: "api".into(),
        descriptors: vec![
            descriptor(&[("user", "ann")]),
            descriptor(&[("tenant", "acme")]),
            descriptor(&[("nobody", "x")]),
        ],
    }
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn envoy_style_reports_the_descriptor_with_the_fewest_remaining() {
    let g = gateway(FILE)
        .with_headers(HeaderStyle::from_name("envoy", HeaderStyle::envoy_names()).unwrap());
    // 10.5 s into the minute: the tenant's window ends in 49.5 s, said as 50 (rounded
    // up, as the IETF `t` is: never a 0 while the window still refuses).
    let at = NOW + 10_500_000_000;
    let answer = g.decide_at(&both(), at).unwrap();
    assert_eq!(
        g.headers_of(&answer),
        pairs(&[
            ("RateLimit-Limit", "2"),
            ("RateLimit-Remaining", "1"),
            ("RateLimit-Reset", "50"),
        ])
    );
    // Renamed as envoyproxy/ratelimit's LIMIT_*_HEADER variables rename them.
    let names = [
        "X-RateLimit-Limit",
        "X-RateLimit-Remaining",
        "X-RateLimit-Reset",
    ]
    .map(String::from);
    let renamed = HeaderStyle::from_name("envoy", names).unwrap();
    assert_eq!(renamed.of(&answer)[0].0, "X-RateLimit-Limit");
    // Nothing limited, nothing added.
    let free = Request {
        domain: "api".into(),
        descriptors: vec![descriptor(&[("nobody", "x")])],
    };
    assert!(g.headers_of(&g.decide_at(&free, at).unwrap()).is_empty());
}

#[test]
fn ietf_style_has_a_member_per_limited_descriptor_and_retry_after_on_a_refusal() {
    let g = gateway(FILE)
        .with_headers(HeaderStyle::from_name("ietf", HeaderStyle::envoy_names()).unwrap());
    let at = NOW + 10_000_000_000;
    let answer = g.decide_at(&both(), at).unwrap();
    assert_eq!(
        g.headers_of(&answer),
        pairs(&[
            ("ratelimit-policy", "\"d0\";q=5;w=3600, \"tenant\";q=2;w=60"),
            ("ratelimit", "\"d0\";r=4;t=3590, \"tenant\";r=1;t=50"),
        ])
    );
    g.decide_at(&both(), at).unwrap();
    let refused = g.decide_at(&both(), at).unwrap();
    let headers = g.headers_of(&refused);
    assert!(
        headers.contains(&("retry-after".into(), "50".into())),
        "{headers:?}"
    );
    assert!(
        headers.contains(&(
            "ratelimit".into(),
            "\"d0\";r=3;t=3590, \"tenant\";r=0;t=50".into()
        )),
        "{headers:?}"
    );
}

#[test]
fn no_style_adds_nothing_and_unknown_names_are_refused() {
    let g = gateway(FILE);
    let answer = g.decide_at(&both(), NOW).unwrap();
    assert!(g.headers_of(&answer).is_empty());
    assert!(HeaderStyle::from_name("x-ratelimit", HeaderStyle::envoy_names()).is_none());
}
