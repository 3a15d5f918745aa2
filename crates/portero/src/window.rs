//! Window arithmetic shared by the window algorithms: indices stored as `bits`-wide
//! tags that wrap, compared as signed differences.

/// Signed difference `current − stored` of two `bits`-wide tags (two's complement in
/// `bits` bits). Negative means the stored tag is ahead: time went backwards.
#[inline]
pub(crate) fn tag_delta(current: u64, stored: u64, bits: u32) -> i64 {
    let mask = (1u64 << bits) - 1;
    let d = current.wrapping_sub(stored) & mask;
    // Sign-extend from `bits` bits.
    ((d << (64 - bits)) as i64) >> (64 - bits)
}

#[inline]
pub(crate) fn tag(index: u64, bits: u32) -> u64 {
    index & ((1u64 << bits) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_wrap_and_sign() {
        assert_eq!(tag_delta(5, 5, 24), 0);
        assert_eq!(tag_delta(6, 5, 24), 1);
        assert_eq!(tag_delta(4, 5, 24), -1);
        assert_eq!(tag_delta(tag(1 << 24, 24), (1 << 24) - 1, 24), 1);
        assert_eq!(tag_delta(0, 1 << 23, 24), -(1 << 23));
    }
}
