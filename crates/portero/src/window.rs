//! Window arithmetic shared by the window algorithms and the calendar quota.
//!
//! Invariant: a state word stores the **whole** window (or period) index
//! `⌊now / unit⌋`, never one truncated to fewer bits, for every `now` up to
//! [`MAX_TIME_NANOS`](crate::quota::MAX_TIME_NANOS). Each layout gives the index the bits
//! [`index_bits`] says it needs and the counts what is left, so no idle gap in the
//! supported range can make an old window look current, or ahead of now: a stored
//! index ahead of now means only that time really went backwards.

/// Bits that hold `⌊now / unit⌋` for every `now ≤ MAX_TIME_NANOS` (`unit ≥ 1`).
#[inline]
pub(crate) const fn index_bits(unit: u64) -> u32 {
    64 - (crate::quota::MAX_TIME_NANOS / unit).leading_zeros()
}

/// `current − stored` for two whole indices (both below `2^63`, so it cannot overflow).
/// Negative means the stored window is ahead: time went backwards.
#[inline]
pub(crate) const fn index_delta(current: u64, stored: u64) -> i64 {
    current as i64 - stored as i64
}

/// A mask of the low `bits` bits (`bits ≤ 63`).
#[inline]
pub(crate) const fn mask(bits: u32) -> u64 {
    (1u64 << bits) - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_bits_cover_the_whole_time_range() {
        assert_eq!(index_bits(1), 63);
        assert_eq!(index_bits(1_000_000_000), 34);
        for unit in [1, 2, 3, 1_000, 999_999_937, 1 << 40, 1 << 62] {
            let top = crate::quota::MAX_TIME_NANOS / unit;
            assert!(top <= mask(index_bits(unit)), "{unit}");
            assert!(
                top > mask(index_bits(unit) - 1) || index_bits(unit) == 1,
                "{unit}"
            );
        }
        assert_eq!(index_delta(5, 7), -2);
        assert_eq!(index_delta(crate::quota::MAX_TIME_NANOS, 0), i64::MAX);
    }
}
