//! Any bytes as `X-Forwarded-For` or `Forwarded`, from a trusted proxy or from a
//! stranger: no panic, and a stranger is always keyed by its own address.
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
    let _ = resolve.resolve("10.0.0.1".parse().unwrap(), &headers);
    let stranger: IpAddr = "198.51.100.7".parse().unwrap();
    assert_eq!(resolve.resolve(stranger, &headers), Prefixes::default().group(stranger));
});
