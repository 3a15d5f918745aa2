//! One way to build every algorithm from a [`Quota`]: `TryFrom<Quota>`, with
//! [`QuotaError`] as the error, so code that switches algorithms keeps its shape
//! (`Gcra::try_from(quota)?` and `SlidingWindowCounter::try_from(quota)?` alike).
//!
//! Why the inherent `new`s differ: GCRA, the token bucket and the leaky buckets keep a
//! time in their word and accept every `Quota` (`new` returns `Self`); the fixed window
//! and the sliding window counter pack counts and a window index into one 64-bit word,
//! so a limit too large for the bits left is refused (`new` returns a `Result`).
//!
//! ```
//! use portero::{Gcra, Quota, SlidingWindowCounter};
//! let quota = Quota::per_minute(100)?;
//! let gcra = Gcra::try_from(quota)?;
//! let counter = SlidingWindowCounter::try_from(quota)?;
//! # let _ = (gcra, counter);
//! # Ok::<(), portero::QuotaError>(())
//! ```

use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::leaky_bucket::{LeakyMeter, LeakyQueue};
use crate::algorithm::sliding_counter::SlidingWindowCounter;
use crate::algorithm::token_bucket::TokenBucket;
use crate::quota::{Quota, QuotaError};

macro_rules! infallible {
    ($($t:ty),*) => {$(
        impl TryFrom<Quota> for $t {
            type Error = QuotaError;
            /// Every quota fits: the same as `new`.
            fn try_from(quota: Quota) -> Result<Self, QuotaError> {
                Ok(Self::new(quota))
            }
        }
    )*};
}
infallible!(Gcra, TokenBucket, LeakyMeter, LeakyQueue);

macro_rules! packed {
    ($($t:ty),*) => {$(
        impl TryFrom<Quota> for $t {
            type Error = QuotaError;
            /// `new`: a limit too large for the packed word is refused.
            fn try_from(quota: Quota) -> Result<Self, QuotaError> {
                Self::new(quota)
            }
        }
    )*};
}
packed!(SlidingWindowCounter, FixedWindow);
