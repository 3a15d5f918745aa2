//! The hops of a forwarding field, newest first: `X-Forwarded-For` (comma-separated
//! nodes) and `Forwarded` (RFC 7239: elements of `;`-separated pairs whose values are
//! tokens or quoted-strings with `\` escapes).
//!
//! Invariant: hops are read **from the right**, field line by field line from the
//! last, and reading stops at the first hop that cannot be read (malformed, hidden
//! as `unknown` or `_obfuscated`, past [`MAX_HOPS`] or [`MAX_FORWARDED_BYTES`]) —
//! nothing left of it is ever looked at. A trusted proxy appends what it saw on the
//! right, so whatever a client wrote on the left (3 KB of garbage, bytes that are not
//! UTF-8, an unterminated quote on a line of its own) cannot hide the hops the
//! proxies wrote after it. A `Forwarded` line is parsed whole by the grammar, so a
//! `,` or `;` inside a quoted-string (a copied `host="x,for=…"`) is text, not a
//! separator; a line that does not parse (a proxy that appended `, for=…` to the
//! client's malformed line) is read from its longest tail that does, and stops there.

use std::borrow::Cow;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use http::HeaderMap;

/// The most bytes of forwarding fields read from the right; reading stops there.
pub const MAX_FORWARDED_BYTES: usize = 2_048;
/// The most hops read from the right; reading stops there.
pub const MAX_HOPS: usize = 32;

/// One hop, as read from the right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Hop {
    /// An address a proxy (or the client) wrote.
    Addr(IpAddr),
    /// Malformed, hidden, or past the limits: reading stops here.
    Unreadable,
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

/// The hops of `field` in `headers`, newest first, ending with at most one
/// [`Hop::Unreadable`]; empty when the field is absent.
pub(super) fn hops_from_right(headers: &HeaderMap, field: ForwardedField) -> Vec<Hop> {
    let name = match field {
        ForwardedField::XForwardedFor => http::header::HeaderName::from_static("x-forwarded-for"),
        ForwardedField::Forwarded => http::header::FORWARDED,
    };
    let lines: Vec<&[u8]> = headers
        .get_all(&name)
        .iter()
        .map(|v| v.as_bytes())
        .collect();
    let mut hops = Vec::new();
    let mut budget = MAX_FORWARDED_BYTES;
    let push = |hop: Hop, hops: &mut Vec<Hop>| {
        let stop = hop == Hop::Unreadable || hops.len() == MAX_HOPS;
        hops.push(if hops.len() == MAX_HOPS {
            Hop::Unreadable
        } else {
            hop
        });
        !stop
    };
    for line in lines.iter().rev() {
        match field {
            ForwardedField::XForwardedFor => {
                for element in line.rsplit(|&b| b == b',') {
                    let trimmed = element.trim_ascii();
                    if trimmed.is_empty() {
                        continue; // an empty list element (RFC 9110 §5.6.1) says nothing
                    }
                    let Some(left) = budget.checked_sub(element.len() + 1) else {
                        push(Hop::Unreadable, &mut hops);
                        return hops;
                    };
                    budget = left;
                    let hop = std::str::from_utf8(trimmed)
                        .ok()
                        .and_then(parse_node)
                        .map_or(Hop::Unreadable, Hop::Addr);
                    if !push(hop, &mut hops) {
                        return hops;
                    }
                }
            }
            ForwardedField::Forwarded => {
                let Some(left) = budget.checked_sub(line.len() + 1) else {
                    push(Hop::Unreadable, &mut hops);
                    return hops;
                };
                budget = left;
                // The whole line by the grammar; failing that (a proxy that appends
                // to the client's own malformed line), its longest tail that parses.
                let (elements, whole) = match forwarded_line(line) {
                    Some(elements) => (elements, true),
                    None => (forwarded_tail(line), false),
                };
                for node in elements.iter().rev() {
                    let hop = node
                        .as_deref()
                        .and_then(forwarded_node)
                        .map_or(Hop::Unreadable, Hop::Addr);
                    if !push(hop, &mut hops) {
                        return hops;
                    }
                }
                if !whole {
                    push(Hop::Unreadable, &mut hops);
                    return hops;
                }
            }
        }
    }
    hops
}

/// One `Forwarded` field line by RFC 7239's grammar: for each element its `for`
/// value (unescaped), or `None` for an element without one; `None` for the whole line
/// if it does not follow the grammar (a pair without `=`, a bad token, an unterminated
/// quoted-string, two `for` in one element).
fn forwarded_line(line: &[u8]) -> Option<Vec<Option<Cow<'_, str>>>> {
    let mut elements = Vec::new();
    let mut current: Option<Cow<'_, str>> = None;
    // Whether the element has a pair at all: empty list elements are skipped.
    let mut any_pair = false;
    let mut i = 0;
    loop {
        i = skip_ows(line, i);
        if i < line.len() && line[i] != b',' && line[i] != b';' {
            any_pair = true;
            let name_end = token_end(line, i);
            if name_end == i || line.get(name_end) != Some(&b'=') {
                return None;
            }
            let name = &line[i..name_end];
            let (value, end) = pair_value(line, name_end + 1)?;
            if name.eq_ignore_ascii_case(b"for") {
                if current.is_some() {
                    return None;
                }
                current = Some(value);
            }
            i = skip_ows(line, end);
        }
        match line.get(i) {
            Some(b';') => i += 1,
            Some(b',') => {
                if std::mem::take(&mut any_pair) {
                    elements.push(current.take());
                }
                i += 1;
            }
            None => {
                if any_pair {
                    elements.push(current.take());
                }
                return Some(elements);
            }
            Some(_) => return None,
        }
    }
}

/// The elements of the longest tail of `line` after one of its last [`MAX_HOPS`]
/// commas that parses by the grammar (empty if none does). A proxy that appends
/// `, for=…` to the line it received writes its element after the client's text, so
/// the tail holds what the proxy wrote even when the client's part is malformed. A
/// comma inside a quoted value the proxy copied cannot fake a tail: the tail would
/// end with that value's closing quote, unopened.
fn forwarded_tail(line: &[u8]) -> Vec<Option<Cow<'_, str>>> {
    line.iter()
        .enumerate()
        .rev()
        .filter(|&(_, &b)| b == b',')
        .take(MAX_HOPS)
        .filter_map(|(comma, _)| forwarded_line(&line[comma + 1..]))
        .last()
        .unwrap_or_default()
}

/// A pair's value at `i`: a token, or a quoted-string unescaped; and where it ends.
fn pair_value(line: &[u8], i: usize) -> Option<(Cow<'_, str>, usize)> {
    if line.get(i) != Some(&b'"') {
        let end = token_end(line, i);
        if end == i {
            return None;
        }
        let token = std::str::from_utf8(&line[i..end]).ok()?;
        return Some((Cow::Borrowed(token), end));
    }
    let start = i + 1;
    let mut j = start;
    let mut unescaped: Option<Vec<u8>> = None;
    while j < line.len() {
        match line[j] {
            b'"' => {
                let text = match unescaped {
                    Some(bytes) => Cow::Owned(String::from_utf8(bytes).ok()?),
                    None => Cow::Borrowed(std::str::from_utf8(&line[start..j]).ok()?),
                };
                return Some((text, j + 1));
            }
            b'\\' => {
                let escaped = *line.get(j + 1)?;
                if !is_qd_or_escapable(escaped) {
                    return None;
                }
                unescaped
                    .get_or_insert_with(|| line[start..j].to_vec())
                    .push(escaped);
                j += 2;
            }
            b if is_qd_or_escapable(b) => {
                if let Some(bytes) = unescaped.as_mut() {
                    bytes.push(b);
                }
                j += 1;
            }
            _ => return None,
        }
    }
    None // unterminated
}

/// RFC 7230's qdtext and quoted-pair octets (HTAB, SP, VCHAR, obs-text; not `"` or
/// `\` unescaped, which the caller handles first).
fn is_qd_or_escapable(b: u8) -> bool {
    b == b'\t' || b == b' ' || (0x21..=0x7e).contains(&b) || b >= 0x80
}

fn token_end(line: &[u8], mut i: usize) -> usize {
    while line.get(i).is_some_and(|&b| is_tchar(b)) {
        i += 1;
    }
    i
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn skip_ows(line: &[u8], mut i: usize) -> usize {
    while matches!(line.get(i), Some(b' ' | b'\t')) {
        i += 1;
    }
    i
}

/// A `Forwarded` node (RFC 7239 §6): `IPv4[:port]` or `"[IPv6][:port]"`; `unknown`,
/// obfuscated `_names` and anything else give `None`. A port may be obfuscated too.
fn forwarded_node(node: &str) -> Option<IpAddr> {
    let (name, port) = if let Some(rest) = node.strip_prefix('[') {
        let (v6, port) = rest.split_once(']')?;
        let ip = v6.parse::<Ipv6Addr>().ok().map(IpAddr::V6)?;
        (ip, port)
    } else {
        let (v4, port) = node.split_at(node.find(':').unwrap_or(node.len()));
        (v4.parse::<Ipv4Addr>().ok().map(IpAddr::V4)?, port)
    };
    let port_ok = match port.strip_prefix(':') {
        None => port.is_empty(),
        Some(p) => is_port(p) || is_obfuscated(p),
    };
    port_ok.then_some(name)
}

fn is_obfuscated(s: &str) -> bool {
    s.len() > 1
        && s.starts_with('_')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// One node of `X-Forwarded-For`: `192.0.2.1`, `192.0.2.1:8080`, `2001:db8::1`,
/// `[2001:db8::1]:8080`, with optional quotes; `None` for anything else (including
/// `unknown` and obfuscated `_names`).
pub(super) fn parse_node(s: &str) -> Option<IpAddr> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn fors(line: &str) -> Option<Vec<Option<String>>> {
        forwarded_line(line.as_bytes())
            .map(|v| v.into_iter().map(|f| f.map(Cow::into_owned)).collect())
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
        assert_eq!(
            forwarded_node("[2001:db8::17]:4711"),
            Some(ip("2001:db8::17"))
        );
        assert_eq!(forwarded_node("192.0.2.43:_p1"), Some(ip("192.0.2.43")));
        // No address for either reader: unknown, obfuscated, an empty port.
        for bad in ["unknown", "_hidden", "1.2.3.4:"] {
            assert_eq!(parse_node(bad), None, "{bad}");
            assert_eq!(forwarded_node(bad), None, "{bad}");
        }
        for bad in ["", "1.2.3", "[::1", "1.2.3.4:999999", "x:1"] {
            assert_eq!(parse_node(bad), None, "{bad}");
        }
        // A Forwarded node must bracket an IPv6 address and give a port it can read.
        for bad in ["2001:db8::1", "[2001:db8::1", "1.2.3.4:x"] {
            assert_eq!(forwarded_node(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_proxy_appending_to_a_malformed_line_is_still_read() {
        let tail = |s: &str| {
            forwarded_tail(s.as_bytes())
                .into_iter()
                .map(|f| f.map(Cow::into_owned))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            tail("garbage, for=203.0.113.9"),
            [Some("203.0.113.9".to_owned())]
        );
        assert_eq!(
            tail("for=1.1.1.1;for=2.2.2.2, for=203.0.113.9"),
            [Some("203.0.113.9".to_owned())]
        );
        // A comma inside the proxy's copied host= cannot fake a tail.
        assert_eq!(
            tail("garbage, for=198.51.100.1;host=\"x,for=6.6.6.6\""),
            [Some("198.51.100.1".to_owned())]
        );
        assert!(tail("no commas \"").is_empty());
    }

    #[test]
    fn forwarded_follows_the_grammar() {
        let one = |s: &str| Some(vec![Some(s.to_owned())]);
        assert_eq!(fors("for=192.0.2.43"), one("192.0.2.43"));
        assert_eq!(
            fors("For=\"[2001:db8:cafe::17]:4711\""),
            one("[2001:db8:cafe::17]:4711")
        );
        assert_eq!(
            fors("for=192.0.2.60;proto=http;by=203.0.113.43"),
            one("192.0.2.60")
        );
        // Commas and semicolons inside a quoted-string are text.
        assert_eq!(fors("for=\"192.0.2.43\";ext=\"a,b\""), one("192.0.2.43"));
        assert_eq!(
            fors("for=203.0.113.50;host=\"x,for=198.51.100.1;y\""),
            one("203.0.113.50")
        );
        assert_eq!(fors("for=\"a\\\"b\""), one("a\"b"));
        assert_eq!(
            fors("for=192.0.2.43, for=198.51.100.17;by=203.0.113.60;proto=http"),
            Some(vec![
                Some("192.0.2.43".into()),
                Some("198.51.100.17".into())
            ])
        );
        assert_eq!(fors("proto=https"), Some(vec![None]));
        assert_eq!(
            fors(" , for=192.0.2.1 ,, "),
            one("192.0.2.1"),
            "empty elements"
        );
        for bad in [
            "for",
            "for=",
            "for=\"unterminated",
            "for=1.2.3.4 x",
            "for=1.2.3.4;for=5.6.7.8",
            "for=[::1]",
            "=x",
            "for=\"a\\",
        ] {
            assert_eq!(fors(bad), None, "{bad}");
        }
    }
}
