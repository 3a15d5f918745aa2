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
//! `Forwarded` is read by RFC 7239's grammar (quoted-strings, escapes, bracketed IPv6,
//! ports, obfuscated nodes), so a `,` a client smuggles into a quoted value is not a
//! separator. Reading stops at the first hop that cannot be read — malformed, hidden
//! (`unknown`, `_obfuscated`), past [`MAX_HOPS`] or [`MAX_FORWARDED_BYTES`] from the
//! right. Since proxies append on the right, a client's own garbage on the left is
//! never reached: the address its proxy appended after it is read first, and the
//! client is charged under it. A hop that cannot be read before any untrusted one
//! (a proxy hiding its client as `for=unknown`, a field that no tail of parses)
//! charges [`ClientAddr::UNIDENTIFIED`], a bucket of its own —
//! never the proxy: a client sending 3 KB or non-UTF-8 garbage through the proxy
//! would otherwise exhaust the proxy's own key (its health checks included).
//!
//! Invariant: the address returned is the peer (an untrusted one, or a trusted one
//! that forwarded no field), an address that a trusted hop wrote, or
//! [`ClientAddr::UNIDENTIFIED`] — never one that only an untrusted party vouched for,
//! and never a trusted proxy's own address because of what its client wrote.
//!
//! Addresses are grouped before they become keys ([`Prefixes`]): one machine owns a
//! whole IPv6 `/64`, so keying each IPv6 address apart would give it 2^64 keys.
//! IPv4-mapped IPv6 addresses (`::ffff:203.0.113.7`) count as their IPv4 address.

use core::fmt;
use core::str::FromStr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use http::{HeaderMap, Request};

pub(crate) mod forwarded;

pub use forwarded::ForwardedField;
use forwarded::{hops_from_right, Hop};
pub use forwarded::{MAX_FORWARDED_BYTES, MAX_HOPS};

/// A client address grouped by its prefix: a `Copy` key that allocates nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientAddr {
    ip: IpAddr,
    // The unidentified bucket is told apart by this flag, not by an address: every
    // address, `::` included, is some peer's group (`::1` groups to `::` at /64).
    unidentified: bool,
}

impl ClientAddr {
    /// The key of clients behind a trusted proxy whose forwarding field could not be
    /// read at all (the proxy's own hop malformed or hidden): they share this bucket,
    /// which equals no grouped address (its [`ip`](Self::ip) reads `::`).
    pub const UNIDENTIFIED: Self = Self {
        ip: IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        unidentified: true,
    };

    /// The grouped address (the prefix, with the host bits zero); `::` for
    /// [`UNIDENTIFIED`](Self::UNIDENTIFIED).
    pub fn ip(&self) -> IpAddr {
        self.ip
    }

    /// Whether this is [`UNIDENTIFIED`](Self::UNIDENTIFIED).
    pub fn is_unidentified(&self) -> bool {
        self.unidentified
    }
}

impl fmt::Display for ClientAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.unidentified {
            return f.write_str("unidentified");
        }
        self.ip.fmt(f)
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
        let ip = match canonical(ip) {
            IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask32(self.v4))),
            IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask128(self.v6))),
        };
        ClientAddr {
            ip,
            unidentified: false,
        }
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
        match self.client_of(peer, headers) {
            Some(ip) => self.prefixes.group(ip),
            None => ClientAddr::UNIDENTIFIED,
        }
    }

    /// The client's address, or `None` for an unreadable chain (unidentified).
    fn client_of(&self, peer: IpAddr, headers: &HeaderMap) -> Option<IpAddr> {
        if !self.trusted.contains(peer) {
            return Some(peer);
        }
        let hops = hops_from_right(headers, self.trusted.field);
        if hops.is_empty() {
            return Some(peer); // the proxy forwarded no field: its own request
        }
        let mut leftmost = peer;
        for hop in hops {
            match hop {
                Hop::Addr(ip) if !self.trusted.contains(ip) => return Some(ip),
                Hop::Addr(ip) => leftmost = ip,
                // Only trusted hops so far, then one nobody can read: charging the
                // last of them would charge a proxy for what its client wrote.
                Hop::Unreadable => return None,
            }
        }
        Some(leftmost) // every hop trusted: the request came from inside
    }
}

/// The peer address a server put in the request's extensions.
pub(crate) fn peer_of<B>(request: &Request<B>) -> Option<IpAddr> {
    let ext = request.extensions();
    #[cfg(feature = "axum")]
    if let Some(info) = ext.get::<axum::extract::ConnectInfo<SocketAddr>>() {
        return Some(info.0.ip());
    }
    // What tests put in place of a real connection (axum's own extractor reads it too).
    #[cfg(feature = "axum")]
    if let Some(mock) = ext.get::<axum::extract::connect_info::MockConnectInfo<SocketAddr>>() {
        return Some(mock.0.ip());
    }
    ext.get::<SocketAddr>()
        .map(SocketAddr::ip)
        .or_else(|| ext.get::<IpAddr>().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
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
