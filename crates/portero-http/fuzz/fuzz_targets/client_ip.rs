//! Any bytes as `X-Forwarded-For` or `Forwarded`, from a trusted proxy or from a
//! stranger: no panic, a stranger is always keyed by its own address, and whatever a
//! field says the trusted proxy is never charged for it (unless the field names it).
#![no_main]

use std::net::IpAddr;

use http::{HeaderMap, HeaderValue};
use libfuzzer_sys::fuzz_target;
use portero_http::client::{ForwardedField, Prefixes};
use portero_http::{ClientIp, TrustedProxies};

fuzz_target!(|input: (&[u8], bool)| {
    let (bytes, forwarded) = input;
    let Ok(value) = HeaderValue::from_bytes(bytes) else {
        return;
    };
    let (field, name) = if forwarded {
        (ForwardedField::Forwarded, "forwarded")
    } else {
        (ForwardedField::XForwardedFor, "x-forwarded-for")
    };
    let mut headers = HeaderMap::new();
    headers.append(name, value.clone());
    headers.append(name, value);
    let resolve = ClientIp::new(
        TrustedProxies::new(["10.0.0.0/8", "2001:db8::/32"])
            .unwrap()
            .writing(field),
    );
    let proxy: IpAddr = "10.0.0.1".parse().unwrap();
    // A field that names the proxy (an all-trusted chain ends at its leftmost hop)
    // or says nothing at all (only separators) is the proxy's own request.
    let names_proxy = bytes.windows(8).any(|w| w == b"10.0.0.1")
        || bytes.windows(6).any(|w| w.eq_ignore_ascii_case(b"a00:1]"))
        || bytes.windows(5).any(|w| w.eq_ignore_ascii_case(b"a00:1"));
    let says_nothing = bytes.iter().all(|b| b" \t,;".contains(b));
    if !names_proxy && !says_nothing {
        assert_ne!(resolve.resolve(proxy, &headers), Prefixes::default().group(proxy));
    }
    let stranger: IpAddr = "198.51.100.7".parse().unwrap();
    assert_eq!(resolve.resolve(stranger, &headers), Prefixes::default().group(stranger));
});
