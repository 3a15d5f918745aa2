//! Keys as text, for stores that name a key by a string (Redis): every key type a
//! key function returns writes itself, behind a tag of its type (`s:` text, `h:`
//! header bytes, `ip:` an address, `addr:` a resolved client address (an IPv6 one is
//! its /64), `u32:`, `i64:`… each integer type, `t:` pairs, `e1:` / `e2:` either side,
//! `global`), so no two different keys write the same text — not within a type, and
//! not across types sharing one remote limiter (an API-key header whose text is an
//! address never spends that address's bucket, a user id 7 never an org id 7 of
//! another integer type).

use std::fmt::Write;
use std::net::IpAddr;

use http::HeaderValue;

use crate::client::ClientAddr;
use crate::keys::Either;

/// A key a remote store can name: writes itself into `out`, one text per key.
/// Injective across the types here (each writes its tag first): header bytes outside
/// printable ASCII and `%` are percent-encoded; a pair's first part is
/// length-prefixed. A type of your own should start with a tag of its own.
///
/// ```
/// use portero_http::StoreKey;
///
/// /// A tenant id from a verified token.
/// struct Tenant(u32);
///
/// impl StoreKey for Tenant {
///     fn write_key(&self, out: &mut String) {
///         out.push_str("tenant:"); // a tag no other key type writes
///         out.push_str(&self.0.to_string());
///     }
/// }
///
/// let mut text = String::new();
/// Tenant(7).write_key(&mut text);
/// assert_eq!(text, "tenant:7");
/// let mut pair = String::new();
/// ("ann".to_owned(), 7u64).write_key(&mut pair); // tuples: the first part length-prefixed
/// assert_eq!(pair, "t:5:s:annu64:7");
/// ```
pub trait StoreKey {
    /// Appends this key's text to `out`.
    fn write_key(&self, out: &mut String);
}

impl StoreKey for str {
    fn write_key(&self, out: &mut String) {
        out.push_str("s:");
        out.push_str(self);
    }
}

impl StoreKey for String {
    fn write_key(&self, out: &mut String) {
        self.as_str().write_key(out);
    }
}

impl<T: StoreKey + ?Sized> StoreKey for &T {
    fn write_key(&self, out: &mut String) {
        (**self).write_key(out);
    }
}

impl<T: StoreKey + ?Sized> StoreKey for std::sync::Arc<T> {
    fn write_key(&self, out: &mut String) {
        (**self).write_key(out);
    }
}

impl StoreKey for HeaderValue {
    fn write_key(&self, out: &mut String) {
        out.push_str("h:");
        for &b in self.as_bytes() {
            if b.is_ascii_graphic() && b != b'%' || b == b' ' {
                out.push(char::from(b));
            } else {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
}

impl StoreKey for ClientAddr {
    fn write_key(&self, out: &mut String) {
        // `Display` writes the address (an IPv6 client's /64), or "unidentified",
        // which no address writes; tagged apart from a plain `IpAddr`, which names
        // one address where this may name a network.
        let _ = write!(out, "addr:{self}");
    }
}

impl StoreKey for IpAddr {
    fn write_key(&self, out: &mut String) {
        let _ = write!(out, "ip:{self}");
    }
}

/// Each integer type its own tag (`u32:7`, `u64:7`): two limits keyed by ids of
/// different types on one limiter never share a bucket.
macro_rules! numbers {
    ($($t:ty),*) => {$(
        impl StoreKey for $t {
            fn write_key(&self, out: &mut String) {
                let _ = write!(out, concat!(stringify!($t), ":{}"), self);
            }
        }
    )*};
}
numbers!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize);

/// One key for every request ([`keys::global`](crate::keys::global)).
impl StoreKey for () {
    fn write_key(&self, out: &mut String) {
        out.push_str("global");
    }
}

impl<X: StoreKey, Y: StoreKey> StoreKey for (X, Y) {
    fn write_key(&self, out: &mut String) {
        out.push_str("t:");
        length_prefixed(&self.0, out);
        self.1.write_key(out);
    }
}

impl<X: StoreKey, Y: StoreKey> StoreKey for Either<X, Y> {
    fn write_key(&self, out: &mut String) {
        match self {
            Self::First(x) => {
                out.push_str("e1:");
                x.write_key(out);
            }
            Self::Second(y) => {
                out.push_str("e2:");
                y.write_key(out);
            }
        }
    }
}

/// `len:text`, so the part after it cannot shift the boundary: the text written in
/// place, its length put before it once known (no buffer of its own).
fn length_prefixed<T: StoreKey + ?Sized>(part: &T, out: &mut String) {
    let at = out.len();
    part.write_key(out);
    let len = out.len() - at;
    let mut digits = [0u8; 24];
    let room = {
        let mut cursor = &mut digits[..];
        let _ = std::io::Write::write_fmt(&mut cursor, format_args!("{len}:"));
        cursor.len()
    };
    let head = core::str::from_utf8(&digits[..digits.len() - room]).unwrap_or("0:");
    out.insert_str(at, head);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text<T: StoreKey>(key: T) -> String {
        let mut s = String::new();
        key.write_key(&mut s);
        s
    }

    #[test]
    fn different_keys_write_different_texts() {
        let v = |s: &'static [u8]| HeaderValue::from_bytes(s).unwrap();
        assert_ne!(text(v(b"a%41")), text(v(b"aA")));
        assert_eq!(text(v(b"a b")), "h:a b");
        assert_eq!(text(v(b"caf\xc3\xa9")), "h:caf%C3%A9");
        assert_ne!(
            text(("ab".to_owned(), "c".to_owned())),
            text(("a".to_owned(), "bc".to_owned()))
        );
        assert_ne!(
            text(Either::<u64, u64>::First(1)),
            text(Either::<u64, u64>::Second(1))
        );
        assert_ne!(
            text(ClientAddr::UNIDENTIFIED),
            text(ClientAddr::UNIDENTIFIED.ip())
        );
        // Across types: a header whose text is an address, a string that looks like a
        // tagged number.
        let addr: IpAddr = "198.51.100.7".parse().unwrap();
        assert_ne!(text(v(b"198.51.100.7")), text(addr));
        assert_ne!(text("u64:5".to_owned()), text(5u64));
        assert_ne!(text("198.51.100.7".to_owned()), text(addr));
        // Integers of different types, an address and a client address.
        assert_ne!(text(7u32), text(7u64));
        assert_ne!(text(7i64), text(7u64));
        assert_eq!(text(7u32), "u32:7");
        let mut request = http::Request::new(());
        request
            .extensions_mut()
            .insert(std::net::SocketAddr::new(addr, 4000));
        let client = crate::client::ClientIp::new(crate::client::TrustedProxies::none())
            .key(&request)
            .unwrap();
        assert_eq!(client.ip(), addr);
        assert_ne!(text(client), text(addr));
        // A pair's first part is length-prefixed, in place.
        assert_eq!(text(("ab".to_owned(), 7u64)), "t:4:s:abu64:7");
        assert_eq!(
            text(((1u8, 2u8), 3u8)),
            "t:12:t:4:u8:1u8:2u8:3",
            "nested pairs"
        );
    }
}
