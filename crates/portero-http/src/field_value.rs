//! A field value written in place: the `RateLimit` members of one response, built on
//! the stack (a heap buffer only past 128 bytes) with integers written by `itoa`, and
//! copied once into the `HeaderValue`. A response then allocates only that copy for
//! each field, where `format!` into a `String` grew its buffer and handed it over.

use http::HeaderValue;

/// Bytes of a field value kept on the stack before it moves to the heap: a member
/// with a name of up to 80 bytes and two 20-digit numbers. (Every response zeroes
/// them: 256 cost it a memset call of 147 instructions, counted by cachegrind.)
const INLINE: usize = 128;

/// A field value being written. Only tokens, integers and the separators of the
/// `RateLimit` grammar go in, so the result is always a valid field value.
pub(crate) struct FieldValue {
    inline: [u8; INLINE],
    len: usize,
    spilled: Vec<u8>,
}

impl FieldValue {
    pub(crate) fn new() -> Self {
        Self {
            inline: [0; INLINE],
            len: 0,
            spilled: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) -> &mut Self {
        if !self.spilled.is_empty() || self.len + bytes.len() > INLINE {
            if self.spilled.is_empty() {
                self.spilled.extend_from_slice(&self.inline[..self.len]);
            }
            self.spilled.extend_from_slice(bytes);
        } else {
            self.inline[self.len..self.len + bytes.len()].copy_from_slice(bytes);
            self.len += bytes.len();
        }
        self
    }

    pub(crate) fn number(&mut self, n: u64) -> &mut Self {
        self.push(itoa::Buffer::new().format(n).as_bytes())
    }

    /// One `RateLimit` member: `"name";r=R;t=T`.
    pub(crate) fn member(&mut self, name: &str, remaining: u64, t: u64) -> &mut Self {
        self.push(b"\"")
            .push(name.as_bytes())
            .push(b"\";r=")
            .number(remaining)
            .push(b";t=")
            .number(t)
    }

    fn bytes(&self) -> &[u8] {
        if self.spilled.is_empty() {
            &self.inline[..self.len]
        } else {
            &self.spilled
        }
    }

    /// A whole number as a field value (`Retry-After`, the legacy fields): one
    /// copy, where `HeaderValue::from(n)` makes two (a buffer, then its freeze).
    pub(crate) fn integer(n: u64) -> HeaderValue {
        HeaderValue::from_bytes(itoa::Buffer::new().format(n).as_bytes())
            .expect("digits are a valid field value")
    }

    /// The value (one copy).
    pub(crate) fn value(&self) -> HeaderValue {
        HeaderValue::from_bytes(self.bytes())
            .expect("tokens, integers and separators are a valid field value")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_read_as_format_would_write_them_on_the_stack_and_past_it() {
        let mut v = FieldValue::new();
        v.member("api", 0, 60)
            .push(b", ")
            .member("tenant", u64::MAX, 1);
        assert_eq!(
            v.value(),
            format!("\"api\";r=0;t=60, \"tenant\";r={};t=1", u64::MAX)
        );
        // At the stack buffer's end, one byte short of it, and one past it.
        for len in [INLINE - 1, INLINE, INLINE + 1] {
            let name = "m".repeat(len - "\"\";r=1;t=2".len());
            let mut v = FieldValue::new();
            v.member(&name, 1, 2);
            assert_eq!(v.value(), format!("\"{name}\";r=1;t=2"), "{len} bytes");
        }
        let long = "n".repeat(300);
        let mut v = FieldValue::new();
        v.member("a", 1, 2).push(b", ").member(&long, 3, 4);
        assert_eq!(v.value(), format!("\"a\";r=1;t=2, \"{long}\";r=3;t=4"));
    }
}
