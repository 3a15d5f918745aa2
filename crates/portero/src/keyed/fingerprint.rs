//! What a caller may keep about a key to check it again cheaply: its fingerprint
//! (no hashing) and a hint of its slot (no lookup).
//!
//! Invariant: neither is trusted. A fingerprint names a key only under the seed of
//! the limiter that made it, and a hint is compared with the slot's fingerprint before
//! the slot's state is used, so a wrong value costs time, never a wrong decision.

/// A key's 64-bit fingerprint under one [`KeyedLimiter`](super::limiter::KeyedLimiter)'s seed
/// (never 0, which marks an empty slot). Keep it to check the same key again without
/// hashing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(u64);

impl Fingerprint {
    /// The fingerprint as 64 bits, to carry it where Rust types do not go (JavaScript,
    /// say).
    #[inline]
    pub fn to_bits(self) -> u64 {
        self.0
    }

    /// A fingerprint from [`to_bits`](Self::to_bits). Any value is safe: 0 (the empty
    /// slot's mark) becomes 1, as a hash of 0 does.
    ///
    /// ```
    /// use portero::Fingerprint;
    /// assert_eq!(Fingerprint::from_bits(0), Fingerprint::from_bits(1));
    /// assert_eq!(Fingerprint::from_bits(u64::MAX).to_bits(), u64::MAX);
    /// ```
    #[inline]
    pub fn from_bits(bits: u64) -> Self {
        Self(bits.max(1))
    }
}

/// Where a key was last found in a [`KeyedLimiter`](super::limiter::KeyedLimiter)'s table, for
/// [`check_hinted_at`](super::limiter::KeyedLimiter::check_hinted_at). Keys move (evicted,
/// reset, inserted again elsewhere), so it is only ever a place to look first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SlotHint(u32);

impl SlotHint {
    /// No hint: the check looks the key up.
    pub const NONE: SlotHint = SlotHint(u32::MAX);

    /// The hint as 32 bits, to carry it where Rust types do not go.
    #[inline]
    pub fn to_bits(self) -> u32 {
        self.0
    }

    /// A hint from [`to_bits`](Self::to_bits). Any value is safe: one that names no
    /// slot of the key costs a lookup.
    #[inline]
    pub fn from_bits(bits: u32) -> Self {
        Self(bits)
    }

    /// The hint for slot `i`, or `NONE`.
    #[inline]
    pub(crate) fn at(i: Option<usize>) -> Self {
        Self(
            i.and_then(|i| u32::try_from(i).ok())
                .unwrap_or(Self::NONE.0),
        )
    }

    /// The slot index; `NONE` is past every table's end (a hint addresses the first
    /// 2^32 − 1 slots; a key beyond them gets `NONE` and is looked up).
    #[inline]
    pub(crate) fn index(self) -> usize {
        if self == Self::NONE {
            usize::MAX
        } else {
            self.0 as usize
        }
    }
}

impl Default for SlotHint {
    fn default() -> Self {
        Self::NONE
    }
}
