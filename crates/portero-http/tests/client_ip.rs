//! Client identity over a real loopback socket (axum with `ConnectInfo`, a raw HTTP/1.1
//! client), and the address parsing over any header bytes.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::{routing::get, Router};
use http::{HeaderMap, HeaderValue, Request};
use portero::{Gcra, KeyedLimiter, Overflow, Quota};
use portero_http::client::{ForwardedField, Prefixes};
use portero_http::{ClientAddr, ClientIp, Limit, LimitLayer, Policy, TrustedProxies, WhenNoKey};
use proptest::prelude::*;
use tower::ServiceExt;

fn per_minute(n: u64) -> Quota {
    Quota::per_minute(n).unwrap()
}

mod support {
    pub mod loopback;
}

/// A server on a free loopback port that limits 5 per minute per client, keyed by
/// `ClientIp` (trusting `trusted`), answering "ok".
async fn serve(trusted: TrustedProxies) -> SocketAddr {
    let limiter = Arc::new(KeyedLimiter::new(Gcra::new(per_minute(5)), 1_000));
    let resolve = ClientIp::new(trusted);
    let policy = Policy::for_quota("per-ip", &per_minute(5)).unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(LimitLayer::new(Limit::new(
            limiter,
            policy,
            move |req: &Request<axum::body::Body>| resolve.key(req),
        )));
    support::loopback::serve(app).await
}

async fn admitted_of(
    addr: SocketAddr,
    n: usize,
    fields: impl Fn(usize) -> Vec<(String, String)>,
) -> usize {
    let mut ok = 0;
    for i in 0..n {
        let f = fields(i);
        let borrowed: Vec<(&str, &str)> = f.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        ok += usize::from(support::loopback::status(addr, "GET", "/", &borrowed).await == 200);
    }
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spoofed_forwarded_for_from_an_untrusted_peer_never_changes_the_key() {
    let addr = serve(TrustedProxies::none()).await;
    let xff = |i: usize| {
        vec![(
            "X-Forwarded-For".to_owned(),
            format!("203.0.113.{}", i % 250),
        )]
    };
    assert_eq!(
        admitted_of(addr, 20, xff).await,
        5,
        "20 rotated headers, one peer: 5"
    );
    let fwd = |i: usize| vec![("Forwarded".to_owned(), format!("for=198.51.100.{i}"))];
    assert_eq!(
        admitted_of(addr, 5, fwd).await,
        0,
        "still the same peer, already spent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_proxy_chain_names_the_client() {
    // The test client on 127.0.0.1 plays the load balancer.
    let addr = serve(TrustedProxies::new(["127.0.0.1"]).unwrap()).await;
    let client = |who: &'static str| {
        move |_| vec![("X-Forwarded-For".to_owned(), format!("{who}, 127.0.0.1"))]
    };
    assert_eq!(admitted_of(addr, 8, client("198.51.100.1")).await, 5);
    assert_eq!(
        admitted_of(addr, 8, client("198.51.100.2")).await,
        5,
        "another client"
    );
    // One IPv6 /64 is one client, whatever address in it the request came from.
    let rotating_v6 =
        |i: usize| vec![("X-Forwarded-For".to_owned(), format!("2001:db8:1:2::{i:x}"))];
    assert_eq!(admitted_of(addr, 20, rotating_v6).await, 5);
    // A field nobody can read is charged to a bucket of its own, never the proxy's:
    // the proxy's own requests (its health checks) are still admitted afterwards.
    let bad = |_| vec![("X-Forwarded-For".to_owned(), "not-an-address".to_owned())];
    assert_eq!(admitted_of(addr, 8, bad).await, 5);
    // 3 KB of garbage the client wrote, then the address the proxy appended: the
    // client is charged under that address (before: the proxy's, 5 and then 429).
    let huge = |_| {
        let garbage = "x".repeat(3_000);
        vec![(
            "X-Forwarded-For".to_owned(),
            format!("{garbage}, 198.51.100.3"),
        )]
    };
    assert_eq!(admitted_of(addr, 8, huge).await, 5);
    assert_eq!(
        admitted_of(addr, 5, |_| vec![]).await,
        5,
        "the proxy's own key is untouched"
    );
}

/// A proxy that copies the client's Host into `host=`: a client smuggling its own
/// `for=` inside the quoted value got a fresh key on every request (20 of 20 at a limit
/// of 5). Read by the grammar, the quoted value is text: one client, 5 of 20.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_for_smuggled_in_a_quoted_string_is_text() {
    let addr = serve(
        TrustedProxies::new(["127.0.0.1"])
            .unwrap()
            .writing(ForwardedField::Forwarded),
    )
    .await;
    let smuggled = |i: usize| {
        let value = format!("for=203.0.113.50;host=\"x,for=198.51.100.{i};y\"");
        vec![("Forwarded".to_owned(), value)]
    };
    assert_eq!(admitted_of(addr, 20, smuggled).await, 5);
    let valid = |_| {
        vec![(
            "Forwarded".to_owned(),
            "for=\"192.0.2.43\";ext=\"a,b\"".to_owned(),
        )]
    };
    assert_eq!(
        admitted_of(addr, 8, valid).await,
        5,
        "keyed as 192.0.2.43, not the proxy"
    );
    assert_eq!(
        admitted_of(addr, 5, |_| vec![]).await,
        5,
        "the proxy's own key is untouched"
    );
}

/// Bytes that are not UTF-8 on the left of a chain, from a trusted proxy: the hop the
/// proxy appended on the right is still read (before: the whole field was refused and
/// the request charged to the proxy).
#[test]
fn non_utf8_on_the_left_does_not_hide_the_hop_the_proxy_appended() {
    let resolve = ClientIp::new(trusted());
    let proxy: IpAddr = "10.0.0.1".parse().unwrap();
    let mut h = HeaderMap::new();
    h.append(
        "x-forwarded-for",
        HeaderValue::from_bytes(b"\xff\xfe garbage").unwrap(),
    );
    h.append("x-forwarded-for", HeaderValue::from_static("198.51.100.9"));
    assert_eq!(resolve.resolve(proxy, &h).to_string(), "198.51.100.9");
    let mut one_line = HeaderMap::new();
    one_line.insert(
        "x-forwarded-for",
        HeaderValue::from_bytes(b"\xff\xfe, 198.51.100.9").unwrap(),
    );
    assert_eq!(
        resolve.resolve(proxy, &one_line).to_string(),
        "198.51.100.9"
    );
    let mut hidden = HeaderMap::new();
    hidden.insert("x-forwarded-for", HeaderValue::from_static("unknown"));
    assert_eq!(resolve.resolve(proxy, &hidden), ClientAddr::UNIDENTIFIED);
}

/// A proxy that appends `, for=…` to the client's own `Forwarded` line (a common
/// nginx recipe): a malformed client part does not hide what the proxy appended
/// (before: the whole line was unreadable and the client moved to the shared
/// unidentified bucket at will).
#[test]
fn a_forwarded_line_appended_to_by_the_proxy_names_the_client() {
    let resolve = ClientIp::new(trusted().writing(ForwardedField::Forwarded));
    let proxy: IpAddr = "10.0.0.1".parse().unwrap();
    for client_part in [
        "garbage",
        "for=1.1.1.1;for=2.2.2.2",
        "for=\"unterminated",
        "=;=,",
    ] {
        let mut h = HeaderMap::new();
        let line = format!("{client_part}, for=203.0.113.9");
        h.insert("forwarded", HeaderValue::from_str(&line).unwrap());
        assert_eq!(
            resolve.resolve(proxy, &h).to_string(),
            "203.0.113.9",
            "{line}"
        );
    }
}

/// A proxy on IPv6 loopback (a sidecar): `::1` groups to `::` at /64, and the
/// unidentified bucket must not be that group (before it was `::` itself, so a client
/// sending garbage through the sidecar drained the sidecar's own health checks).
#[test]
fn the_unidentified_bucket_is_no_peer_group() {
    let resolve = ClientIp::new(TrustedProxies::new(["::1"]).unwrap());
    let sidecar: IpAddr = "::1".parse().unwrap();
    let own = resolve.resolve(sidecar, &HeaderMap::new());
    let mut garbage = HeaderMap::new();
    garbage.insert("x-forwarded-for", HeaderValue::from_static("unknown"));
    let unreadable = resolve.resolve(sidecar, &garbage);
    assert_eq!(unreadable, ClientAddr::UNIDENTIFIED);
    assert_ne!(own, ClientAddr::UNIDENTIFIED, "the proxy's own key");
    let direct = ClientIp::new(TrustedProxies::none()).resolve(sidecar, &HeaderMap::new());
    assert_ne!(direct, ClientAddr::UNIDENTIFIED);
    assert_eq!(unreadable.to_string(), "unidentified");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_a_key_share_one_bucket_by_default() {
    let quota = per_minute(5);
    let layer = |when| {
        LimitLayer::new(Limit::new(
            Arc::new(KeyedLimiter::new(Gcra::new(quota), 100)),
            Policy::for_quota("per-client", &quota).unwrap(),
            |req: &Request<axum::body::Body>| {
                req.headers()
                    .get("x-client-id")?
                    .to_str()
                    .ok()
                    .map(str::to_owned)
            },
        ))
        .when_no_key(when)
    };
    for (when, want) in [
        (WhenNoKey::SharedBucket, 5),
        (WhenNoKey::Reject, 0),
        (WhenNoKey::Allow, 20),
    ] {
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer(when));
        let mut admitted = 0;
        for _ in 0..20 {
            let req = Request::get("/").body(axum::body::Body::empty()).unwrap();
            let status = app.clone().oneshot(req).await.unwrap().status();
            admitted += usize::from(status == 200);
        }
        assert_eq!(admitted, want, "{when:?}");
    }
}

/// 200,000 addresses through a trusted proxy against a 1,000-key table: the table
/// stays at its cap; refusing new keys keeps the clients already tracked exact.
#[test]
fn a_flood_of_addresses_through_a_trusted_proxy_stays_at_the_cap() {
    let resolve = ClientIp::new(TrustedProxies::new(["10.0.0.0/8"]).unwrap());
    let proxy: IpAddr = "10.0.0.1".parse().unwrap();
    for policy in [Overflow::RejectNewKeys, Overflow::EvictSoonestFull] {
        let limiter = KeyedLimiter::<ClientAddr, _, _>::with_clock(
            Gcra::new(per_minute(5)),
            1_000,
            portero::ManualClock::new(),
        )
        .overflow(policy);
        let mut headers = HeaderMap::new();
        let (mut admitted, mut refused) = (0u32, 0u32);
        for i in 0..200_000u32 {
            let ip = std::net::Ipv4Addr::from(0xC000_0000 | i);
            headers.insert(
                "x-forwarded-for",
                HeaderValue::from_str(&ip.to_string()).unwrap(),
            );
            match limiter.check_at(&resolve.resolve(proxy, &headers), 0, 1) {
                Ok(d) => admitted += u32::from(d.is_allowed()),
                Err(_) => refused += 1,
            }
            assert!(limiter.len() <= 1_000);
        }
        // A legitimate client arriving after the flood, within the flood keys' minute:
        headers.insert(
            "x-forwarded-for",
            HeaderValue::from_static("198.51.100.200"),
        );
        let newcomer = limiter.check_at(&resolve.resolve(proxy, &headers), 1, 1);
        match policy {
            Overflow::RejectNewKeys => {
                assert!(admitted <= 1_000 && refused >= 199_000);
                // refused (the layer answers 429 for a second) until flood keys expire;
                // the clients tracked before the flood keep their exact state.
                assert!(newcomer.is_err());
            }
            _ => {
                assert_eq!(
                    admitted, 200_000,
                    "every newcomer is tracked, evicting another"
                );
                assert!(
                    newcomer.unwrap().is_allowed(),
                    "tracked, evicting a flood key"
                );
            }
        }
    }
}

fn trusted() -> TrustedProxies {
    TrustedProxies::new(["10.0.0.0/8", "2001:db8::/32"]).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Any bytes in the forwarding fields: no panic, and from an untrusted peer the key
    /// is always the peer.
    #[test]
    fn any_field_bytes_never_panic_and_never_move_an_untrusted_peer(
        bytes in prop::collection::vec(any::<u8>(), 0..120),
        peer_bits in any::<u32>(),
        from_proxy in any::<bool>(),
        forwarded in any::<bool>(),
    ) {
        let peer: IpAddr = if from_proxy {
            std::net::Ipv4Addr::from(0x0A00_0000 | (peer_bits & 0xFF_FFFF)).into()
        } else {
            std::net::Ipv4Addr::from(0xC633_6400 | (peer_bits & 0xFF)).into()
        };
        let field = if forwarded { ForwardedField::Forwarded } else { ForwardedField::XForwardedFor };
        let name = if forwarded { "forwarded" } else { "x-forwarded-for" };
        let mut headers = HeaderMap::new();
        if let Ok(v) = HeaderValue::from_bytes(&bytes) {
            headers.insert(name, v);
        }
        let key = ClientIp::new(trusted().writing(field)).resolve(peer, &headers);
        if !from_proxy {
            prop_assert_eq!(key, Prefixes::default().group(peer));
        }
    }

    /// Fields mixing real addresses, obfuscated names and garbage, from a trusted proxy:
    /// the key is the peer or one of the addresses the field named — never anything else.
    #[test]
    fn the_key_is_the_peer_or_an_address_the_field_named(
        hops in prop::collection::vec(prop_oneof![
            any::<u32>().prop_map(|b| std::net::Ipv4Addr::from(b).to_string()),
            any::<u16>().prop_map(|b| format!("10.0.{}.{}", b >> 8, b & 0xFF)),
            any::<u128>().prop_map(|b| format!("[{}]:443", std::net::Ipv6Addr::from(b))),
            Just("unknown".to_owned()),
            Just("_hidden".to_owned()),
            "[ -~]{0,12}",
        ], 0..8),
        forwarded in any::<bool>(),
    ) {
        let (field, name, text) = if forwarded {
            let elements: Vec<String> = hops.iter().map(|h| format!("for=\"{h}\";proto=https")).collect();
            (ForwardedField::Forwarded, "forwarded", elements.join(", "))
        } else {
            (ForwardedField::XForwardedFor, "x-forwarded-for", hops.join(", "))
        };
        let mut headers = HeaderMap::new();
        if let Ok(v) = HeaderValue::from_str(&text) {
            headers.insert(name, v);
        }
        let peer: IpAddr = "10.1.1.1".parse().unwrap();
        let key = ClientIp::new(trusted().writing(field)).resolve(peer, &headers);
        let p = Prefixes::default();
        // A generated hop may itself hold a comma ("::,"): the field then names each part.
        let named: Vec<ClientAddr> = hops
            .iter()
            .flat_map(|h| h.split(','))
            .map(str::trim)
            .filter_map(|h| h.trim_start_matches('[').split("]:").next()?.parse::<IpAddr>().ok())
            .map(|ip| p.group(ip))
            .collect();
        prop_assert!(
            key == p.group(peer) || named.contains(&key) || key == ClientAddr::UNIDENTIFIED,
            "{} from {:?}", key, text
        );
    }

    /// A chain of hops ending at the proxy: the rightmost untrusted one is the client.
    #[test]
    fn the_first_untrusted_hop_from_the_right_is_the_client(
        clients in prop::collection::vec(any::<u32>(), 1..5),
        proxies in prop::collection::vec(any::<u16>(), 0..4),
    ) {
        let mut hops: Vec<String> = clients.iter().map(|c| std::net::Ipv4Addr::from(0xC000_0000 | (c & 0xFF_FFFF)).to_string()).collect();
        hops.extend(proxies.iter().map(|p| format!("10.0.{}.{}", p >> 8, p & 0xFF)));
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", HeaderValue::from_str(&hops.join(", ")).unwrap());
        let key = ClientIp::new(trusted()).resolve("10.9.9.9".parse().unwrap(), &headers);
        let want: IpAddr = hops[clients.len() - 1].parse().unwrap();
        prop_assert_eq!(key.ip(), want);
    }

    /// `Forwarded` fields generated by RFC 7239's grammar, honest and hostile: nodes
    /// (IPv4, bracketed IPv6 with ports, `unknown`, obfuscated names and ports), other
    /// pairs whose quoted-strings carry `,` `;` `=` `"` `\` and a smuggled `for=`, in one
    /// line or several. The key is exactly what a reader of the grammar gets: the
    /// first untrusted `for` from the right, `UNIDENTIFIED` when a hidden or missing
    /// one comes first, the leftmost when all are trusted. A smuggled `for=` inside a
    /// quoted value never counts.
    #[test]
    fn forwarded_is_read_by_its_grammar(
        chain in prop::collection::vec((
            prop_oneof![
                any::<u32>().prop_map(|b| Node::Ip(std::net::Ipv4Addr::from(b).into())),
                any::<u16>().prop_map(|b| Node::Ip(format!("10.0.{}.{}", b >> 8, b & 0xFF).parse().unwrap())),
                any::<u128>().prop_map(|b| Node::Ip(std::net::Ipv6Addr::from(b).into())),
                Just(Node::Hidden("unknown")),
                Just(Node::Hidden("_hidden-1")),
                Just(Node::Missing),
            ],
            prop::option::of(1u16..=65535),
            prop::collection::vec("[ -~]{0,10}", 0..3),
            any::<bool>(),
        ), 0..6),
        smuggled in any::<u32>(),
    ) {
        let smuggle = std::net::Ipv4Addr::from(smuggled);
        let mut lines: Vec<String> = vec![String::new()];
        for (node, port, extras, new_line) in &chain {
            let mut pairs = Vec::new();
            match node {
                Node::Ip(IpAddr::V4(v4)) => pairs.push(match port {
                    Some(p) => format!("for=\"{v4}:{p}\""),
                    None => format!("for={v4}"),
                }),
                Node::Ip(IpAddr::V6(v6)) => pairs.push(match port {
                    Some(p) => format!("for=\"[{v6}]:{p}\""),
                    None => format!("for=\"[{v6}]\""),
                }),
                Node::Hidden(name) => pairs.push(format!("for={name}")),
                Node::Missing => {}
            }
            pairs.push("proto=https".to_owned());
            for (i, extra) in extras.iter().enumerate() {
                let hostile = format!("{extra},for={smuggle};x=\"");
                let quoted = hostile.replace('\\', "\\\\").replace('"', "\\\"");
                pairs.push(format!("ext{i}=\"{quoted}\""));
            }
            if *new_line && !lines.last().unwrap().is_empty() {
                lines.push(String::new());
            }
            let line = lines.last_mut().unwrap();
            if !line.is_empty() {
                line.push_str(", ");
            }
            line.push_str(&pairs.join(";"));
        }
        let mut headers = HeaderMap::new();
        for line in lines.iter().filter(|l| !l.is_empty()) {
            headers.append("forwarded", HeaderValue::from_str(line).unwrap());
        }
        let peer: IpAddr = "10.1.1.1".parse().unwrap();
        let key = ClientIp::new(trusted().writing(ForwardedField::Forwarded)).resolve(peer, &headers);
        let t = trusted();
        let group = |ip| Prefixes::default().group(ip);
        let mut want = if chain.is_empty() { Some(group(peer)) } else { None };
        let mut leftmost = peer;
        for (node, ..) in chain.iter().rev() {
            match node {
                Node::Ip(ip) if !t.contains(*ip) => { want = Some(group(*ip)); break; }
                Node::Ip(ip) => leftmost = *ip,
                _ => { want = Some(ClientAddr::UNIDENTIFIED); break; }
            }
        }
        let want = want.unwrap_or_else(|| group(leftmost));
        prop_assert_eq!(key, want, "{:?}", lines);
    }
}

#[derive(Debug, Clone)]
enum Node {
    Ip(IpAddr),
    Hidden(&'static str),
    Missing,
}
