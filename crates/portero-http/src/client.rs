//! Who the client is: the address a rate limit should count under.
//!
//! A request carries two kinds of address. The **peer** is the other end of the TCP
//! connection: the client itself, or a proxy in front of the service. Request fields
//! such as `X-Forwarded-For` and `Forwarded` (RFC 7239) are text that *whoever sent
//! the request* wrote — a proxy you run appends the address it saw, but a client can
//! write anything there, and a limiter that believes it hands an attacker a fresh key
//! per request.
//!
//! [`ClientIp`] therefore believes a forwarded address only from a peer in its
//! [`TrustedProxies`], and reads the list **from the right** (each proxy appends the
//! address it saw), skipping only trusted hops: the first untrusted hop is the client.
//! A malformed, obfuscated (`unknown`, `_hidden`) or oversized field falls back to the
//! peer, so a proxy that cannot say who its client is counts as that client itself.
//!
//! Invariant: the address returned is always the peer, or an address that a trusted
//! hop wrote — never one that only an untrusted party vouched for.
//!
//! Addresses are grouped before they become keys ([`Prefixes`]): one machine owns a
//! whole IPv6 `/64`, so keying each IPv6 address apart would give it 2^64 keys.
//! IPv4-mapped IPv6 addresses (`::ffff:203.0.113.7`) count as their IPv4 address.

use core::fmt;
use core::str::FromStr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use http::{HeaderMap, HeaderName, Request};

/// The most bytes of forwarding fields read; more falls back to the peer.
pub const MAX_FORWARDED_BYTES: usize = 2_048;
/// The most hops read from a forwarding field; more falls back to the peer.
pub const MAX_HOPS: usize = 32;

/// A client address grouped by its prefix: a `Copy` key that allocates nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientAddr(IpAddr);

impl ClientAddr {
    /// The grouped address (the prefix, with the host bits zero).
    pub fn ip(&self) -> IpAddr {
        self.0
    }
}

impl fmt::Display for ClientAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// How many leading bits of an address identify a client: IPv4 `/32` and IPv6 `/64`
/// by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefixes {
    v4: u8,
    v6: u8,
}

impl Default for Prefixes {
    fn default() -> Self {
        Self { v4: 32, v6: 64 }
    }
}

impl Prefixes {
    /// `v4` bits of IPv4 (1–32) and `v6` bits of IPv6 (1–128) per client; `None` if
    /// either is out of range.
    pub fn new(v4: u8, v6: u8) -> Option<Self> {
        ((1..=32).contains(&v4) && (1..=128).contains(&v6)).then_some(Self { v4, v6 })
    }

    /// `ip` as a key: IPv4-mapped IPv6 as IPv4, then the host bits cleared.
    pub fn group(&self, ip: IpAddr) -> ClientAddr {
        ClientAddr(match canonical(ip) {
            IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask32(self.v4))),
            IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask128(self.v6))),
        })
    }
}

/// The top `bits` bits set (0 for 0).
fn mask32(bits: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0)
}

fn mask128(bits: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0)
}

/// IPv4-mapped IPv6 (`::ffff:a.b.c.d`) as the IPv4 address it carries.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// A network in CIDR notation (`10.0.0.0/8`, `2001:db8::/32`, or one address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    bits: u8,
}

/// A CIDR that did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CidrError(String);

impl fmt::Display for CidrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not an address or a network in CIDR notation",
            self.0
        )
    }
}

impl std::error::Error for CidrError {}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(s: &str) -> Result<Self, CidrError> {
        let bad = || CidrError(s.to_owned());
        let (addr, bits) = match s.split_once('/') {
            Some((a, b)) => (a, Some(b.parse::<u8>().map_err(|_| bad())?)),
            None => (s, None),
        };
        let network = canonical(addr.parse::<IpAddr>().map_err(|_| bad())?);
        let max = if network.is_ipv4() { 32 } else { 128 };
        let bits = bits.unwrap_or(max);
        if bits > max {
            return Err(bad());
        }
        Ok(Self { network, bits })
    }
}

impl Cidr {
    /// Whether `ip` lies in this network.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, canonical(ip)) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let m = mask32(self.bits);
                u32::from(n) & m == u32::from(a) & m
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let m = mask128(self.bits);
                u128::from(n) & m == u128::from(a) & m
            }
            _ => false,
        }
    }
}

/// The proxies whose forwarding fields are believed (none by default), and the field
/// they write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    nets: Vec<Cidr>,
    field: ForwardedField,
}

impl TrustedProxies {
    /// No proxy is trusted: the key is always the peer.
    pub fn none() -> Self {
        Self::default()
    }

    /// The networks `cidrs` (e.g. `["10.0.0.0/8", "2001:db8::/32"]`).
    ///
    /// ```
    /// let proxies = portero_http::TrustedProxies::new(["10.0.0.0/8", "192.0.2.7"])?;
    /// assert!(proxies.contains("10.1.2.3".parse()?));
    /// assert!(!proxies.contains("192.0.2.8".parse()?));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new<I, S>(cidrs: I) -> Result<Self, CidrError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let nets = cidrs
            .into_iter()
            .map(|c| c.as_ref().parse())
            .collect::<Result<_, _>>()?;
        Ok(Self {
            nets,
            field: ForwardedField::default(),
        })
    }

    /// The field these proxies write (default `X-Forwarded-For`); the other is
    /// ignored, so a client cannot add it.
    pub fn writing(mut self, field: ForwardedField) -> Self {
        self.field = field;
        self
    }

    /// Whether `ip` is a trusted proxy.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.nets.iter().any(|c| c.contains(ip))
    }
}

/// Which forwarding field a trusted proxy writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ForwardedField {
    /// `X-Forwarded-For: client, proxy1, proxy2` (the default).
    #[default]
    XForwardedFor,
    /// `Forwarded: for=client, for=proxy1` (RFC 7239).
    Forwarded,
}

/// Finds the address a request should be limited under. See the [module](self) docs.
///
/// ```
/// use std::net::IpAddr;
/// use portero_http::{ClientIp, TrustedProxies};
///
/// let resolve = ClientIp::new(TrustedProxies::new(["10.0.0.0/8"])?);
/// let mut h = http::HeaderMap::new();
/// h.insert("x-forwarded-for", "198.51.100.9, 203.0.113.5, 10.0.0.2".parse()?);
/// // From the load balancer at 10.0.0.1: skip the trusted 10.0.0.2, stop at the client.
/// let peer: IpAddr = "10.0.0.1".parse()?;
/// assert_eq!(resolve.resolve(peer, &h).to_string(), "203.0.113.5");
/// // The same field from anyone else is ignored.
/// let stranger: IpAddr = "198.51.100.77".parse()?;
/// assert_eq!(resolve.resolve(stranger, &h).to_string(), "198.51.100.77");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct ClientIp {
    trusted: TrustedProxies,
    prefixes: Prefixes,
}

impl ClientIp {
    /// Believes forwarding fields from `trusted` (use [`TrustedProxies::none`] when the
    /// service faces clients directly).
    pub fn new(trusted: TrustedProxies) -> Self {
        Self {
            trusted,
            ..Self::default()
        }
    }

    /// Groups clients by `prefixes` (default IPv4 /32, IPv6 /64).
    pub fn prefixes(mut self, prefixes: Prefixes) -> Self {
        self.prefixes = prefixes;
        self
    }

    /// The client behind a request from `peer` with `headers`, grouped.
    pub fn resolve(&self, peer: IpAddr, headers: &HeaderMap) -> ClientAddr {
        self.prefixes.group(self.client_of(peer, headers))
    }

    /// The client of a request, from the peer address the server recorded in its
    /// extensions (a `SocketAddr`, or axum's `ConnectInfo<SocketAddr>` with the `axum`
    /// feature). `None` if the server recorded none.
    pub fn key<B>(&self, request: &Request<B>) -> Option<ClientAddr> {
        let peer = peer_of(request)?;
        Some(self.resolve(peer, request.headers()))
    }

    fn client_of(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.trusted.contains(peer) {
            return peer;
        }
        let name = match self.trusted.field {
            ForwardedField::XForwardedFor => HeaderName::from_static("x-forwarded-for"),
            ForwardedField::Forwarded => http::header::FORWARDED,
        };
        let mut fields = Vec::new();
        let mut bytes = 0;
        for value in headers.get_all(&name) {
            bytes += value.len() + 1;
            match value.to_str() {
                Ok(text) if bytes <= MAX_FORWARDED_BYTES => fields.push(text),
                _ => return peer,
            }
        }
        let mut hops = 0;
        let mut client = peer;
        // Lines in order, each read right to left: the rightmost hop is the newest.
        for element in fields.iter().rev().flat_map(|f| f.rsplit(',')) {
            hops += 1;
            if hops > MAX_HOPS {
                return peer;
            }
            let hop = match self.trusted.field {
                ForwardedField::XForwardedFor => parse_node(element.trim()),
                ForwardedField::Forwarded => forwarded_for(element),
            };
            let Some(hop) = hop else {
                return peer;
            };
            client = hop;
            if !self.trusted.contains(hop) {
                return hop;
            }
        }
        client
    }
}

/// The peer address a server put in the request's extensions.
fn peer_of<B>(request: &Request<B>) -> Option<IpAddr> {
    let ext = request.extensions();
    #[cfg(feature = "axum")]
    if let Some(info) = ext.get::<axum::extract::ConnectInfo<SocketAddr>>() {
        return Some(info.0.ip());
    }
    ext.get::<SocketAddr>()
        .map(SocketAddr::ip)
        .or_else(|| ext.get::<IpAddr>().copied())
}

/// One node of a forwarding list: `192.0.2.1`, `192.0.2.1:8080`, `2001:db8::1`,
/// `[2001:db8::1]:8080`, with optional quotes; `None` for anything else (including
/// RFC 7239's `unknown` and obfuscated `_names`).
fn parse_node(s: &str) -> Option<IpAddr> {
    let s = s
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(s);
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (v6, port) = rest.split_once(']')?;
        if !(port.is_empty() || port.strip_prefix(':').is_some_and(is_port)) {
            return None;
        }
        return v6.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    let (v4, port) = s.split_once(':')?;
    is_port(port)
        .then(|| v4.parse::<Ipv4Addr>().ok().map(IpAddr::V4))
        .flatten()
}

fn is_port(p: &str) -> bool {
    !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
}

/// The `for=` node of one `Forwarded` element (`for=192.0.2.60;proto=http`).
fn forwarded_for(element: &str) -> Option<IpAddr> {
    element.split(';').find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        key.trim()
            .eq_ignore_ascii_case("for")
            .then(|| parse_node(value.trim()))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn nodes_parse_as_the_rfc_writes_them() {
        assert_eq!(parse_node("192.0.2.60"), Some(ip("192.0.2.60")));
        assert_eq!(parse_node("192.0.2.60:8080"), Some(ip("192.0.2.60")));
        assert_eq!(
            parse_node("\"[2001:db8:cafe::17]:4711\""),
            Some(ip("2001:db8:cafe::17"))
        );
        assert_eq!(parse_node("2001:db8::1"), Some(ip("2001:db8::1")));
        for bad in [
            "unknown",
            "_hidden",
            "",
            "1.2.3",
            "[::1",
            "1.2.3.4:",
            "1.2.3.4:999999",
            "x:1",
        ] {
            assert_eq!(parse_node(bad), None, "{bad}");
        }
        assert_eq!(
            forwarded_for("for=\"[2001:db8::17]:4711\";proto=https;by=203.0.113.43"),
            Some(ip("2001:db8::17"))
        );
        assert_eq!(
            forwarded_for("proto=https;For=192.0.2.1"),
            Some(ip("192.0.2.1"))
        );
        assert_eq!(forwarded_for("for=unknown"), None);
    }

    #[test]
    fn prefixes_group_and_normalise() {
        let p = Prefixes::default();
        assert_eq!(
            p.group(ip("2001:db8:1:2:aaaa::1")).ip(),
            ip("2001:db8:1:2::")
        );
        assert_eq!(p.group(ip("::ffff:203.0.113.7")).ip(), ip("203.0.113.7"));
        let coarse = Prefixes::new(24, 48).unwrap();
        assert_eq!(coarse.group(ip("203.0.113.77")).ip(), ip("203.0.113.0"));
        assert!(Prefixes::new(0, 64).is_none() && Prefixes::new(32, 129).is_none());
    }

    #[test]
    fn cidrs_contain_what_they_should() {
        let c: Cidr = "10.0.0.0/8".parse().unwrap();
        assert!(c.contains(ip("10.255.0.1")) && !c.contains(ip("11.0.0.1")));
        assert!(c.contains(ip("::ffff:10.0.0.1")));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("198.51.100.1")) && !all.contains(ip("::1")));
        let one: Cidr = "2001:db8::1".parse().unwrap();
        assert!(one.contains(ip("2001:db8::1")) && !one.contains(ip("2001:db8::2")));
        for bad in ["10.0.0.0/33", "10.0.0/8", "nonsense", "::/129"] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }
}
