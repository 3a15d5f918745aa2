//! # portero — a doorman in front of your service
//!
//! Every request asks the doorman one question: *has this client used up its share?*
//! portero answers it with lock-free limiters whose whole state is **one atomic word**,
//! updated by a single compare-and-swap loop. Each algorithm is a pure
//! transition `(state, now, cost) -> (new state, Decision)` that can be tested without
//! atomics; [`RateLimiter`] owns the atomic word and the clock.
//!
//! ```
//! use portero::{Quota, RateLimiter};
//!
//! // 10 requests per second, bursts of up to 10.
//! let limiter = RateLimiter::gcra(Quota::per_second(10)?);
//! let decision = limiter.check();
//! assert!(decision.is_allowed());
//! assert_eq!(decision.remaining(), 9);
//! # Ok::<(), portero::QuotaError>(())
//! ```
//!
//! Edge runtimes freeze their clock during a request, so every limiter also takes the
//! time as an argument (nanoseconds on the caller's own axis):
//!
//! ```
//! use portero::{Quota, RateLimiter};
//! let bucket = RateLimiter::token_bucket(Quota::per_second(2)?.with_burst(4)?);
//! let t0 = 1_000_000_000;
//! for _ in 0..4 {
//!     assert!(bucket.check_at(t0, 1)?.is_allowed());
//! }
//! let rejected = bucket.check_at(t0, 1)?;
//! assert!(!rejected.is_allowed());
//! // One token comes back every 500 ms: exactly then, not a nanosecond earlier.
//! assert_eq!(rejected.retry_after().as_millis(), 500);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## What is here
//!
//! - One-word algorithms ([`Algorithm`] implementations, driven by [`RateLimiter`]):
//!   [`Gcra`], [`TokenBucket`], [`FixedWindow`], [`SlidingWindowCounter`],
//!   [`LeakyMeter`], [`LeakyQueue`] (a shaper: admitted requests get a delay), and
//!   [`CalendarQuota`] (per day / per month). [`AnyAlgorithm`] holds any one-word
//!   algorithm chosen at run time by its [`AlgorithmName`] (the one spelling of each
//!   name).
//! - [`SlidingLog`]: exact, up to `L` timestamps behind a mutex.
//! - [`KeyedLimiter`]: a limiter per key in a fixed-size table; [`Policies`] maps
//!   operations to keyed limits; [`keyed::stack::check_all`] checks several limits all or none
//!   with refunds; [`ConcurrencyLimit`] counts requests in flight, [`PriorityLimit`] refuses
//!   lower priorities first, [`AdaptiveConcurrency`] finds the limit from latency; [`CircuitBreaker`]
//!   stops calling a failing dependency; [`Striped`] spreads
//!   one hot global limit over cache lines with zero over-admission.
//!
//! ## Features
//! - `std` (default): [`StdClock`], [`CoarseClock`], [`UnixClock`], [`SlidingLog`],
//!   [`Policies`], [`Striped`], seeded [`KeyedLimiter`] construction.
//! - `quanta` (default): [`QuantaClock`], the default clock; [`RecentClock`], quanta's
//!   cached time (one atomic load a reading; an upkeep thread keeps it).
//! - `alloc`: [`KeyedLimiter`] without `std` (seed it with `with_hasher`).
//! - `tokio`: async waits on tokio's timer: `RateLimiter::until_ready` and
//!   `until_ready_within` (every one-word algorithm) and `SlidingLog::until_ready_within`,
//!   in one line per limiter ([`wait`]: first come, first served, nothing taken until
//!   admitted), `KeyedLimiter::until_key_ready`, `Reservation::ready`, the
//!   [`LeakyQueue`] shaper's `acquire`, and `stream::Throttled` (a stream whose items
//!   wait their turn).
//! - `testing`: views of internal state (`raw_state`, `state_of`, `count_slots`) for
//!   this workspace's tests and loom models; not a stable API.
//! - Without default features the crate is `no_std` and builds for
//!   `wasm32-unknown-unknown`; 64-bit (and the keyed table's 128-bit) atomics come from
//!   `portable-atomic` on targets that lack them.
#![cfg_attr(not(feature = "std"), no_std)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs, missing_debug_implementations)]
#![deny(unsafe_code)]

#[cfg(feature = "alloc")]
extern crate alloc;

// The foundations: everything else stands on these, and they import nothing above.
pub mod admission;
pub mod clock;
mod decision;
mod quota;
mod refund_ledger;
mod refund_log;
mod sync;
#[cfg(feature = "tokio")]
mod wait_line;
mod window;
mod word;

// The layers, each importing only from the ones listed before it.
pub mod algorithm;
pub mod keyed;
pub mod overload;
pub mod wait;

pub use admission::{Acquired, Admission};
pub use algorithm::any::{AlgorithmName, AnyAlgorithm, AnyAlgorithmError};
pub use algorithm::calendar::{CalendarQuota, Period};
pub use algorithm::fixed_window::{FixedWindow, Placement};
pub use algorithm::gcra::Gcra;
pub use algorithm::leaky_bucket::{LeakyMeter, LeakyQueue};
pub use algorithm::limiter::RateLimiter;
pub use algorithm::sliding_counter::SlidingWindowCounter;
#[cfg(feature = "std")]
pub use algorithm::sliding_log::SlidingLog;
pub use algorithm::token_bucket::TokenBucket;
pub use algorithm::Algorithm;
pub use clock::{Clock, DefaultClock, ManualClock};
#[cfg(feature = "std")]
pub use clock::{CoarseClock, StdClock, UnixClock};
#[cfg(feature = "quanta")]
pub use clock::{QuantaClock, RecentClock, UpkeepGuard};
pub use decision::{CheckError, Decision, KeyedError, DENY_FOR_NANOS};
#[cfg(feature = "alloc")]
pub use keyed::log::{KeyedLog, KeyedLogError, KeyedLogLimit, MAX_LOG_ENTRIES};
#[cfg(feature = "std")]
pub use keyed::policies::{Policies, PolicyError};
#[cfg(feature = "std")]
pub use keyed::striped::Striped;
#[cfg(feature = "alloc")]
pub use keyed::{Fingerprint, KeyedLimit, KeyedLimiter, Overflow, SlotHint};
#[cfg(feature = "alloc")]
pub use overload::OwnedPermit;
#[cfg(feature = "alloc")]
pub use overload::{AdaptiveConcurrency, AdaptiveConfig, AdaptiveConfigError, AdaptivePermit};
pub use overload::{
    BreakerCall, BreakerError, BreakerOpen, CircuitBreaker, ConcurrencyLimit, Permit, Trip,
    MAX_RATE_WINDOW,
};
#[cfg(feature = "alloc")]
pub use overload::{Priority, PriorityError, PriorityLimit, MAX_CLASSES};
pub use quota::{Quota, QuotaError, MAX_SPAN_NANOS, MAX_TIME_NANOS};
#[cfg(feature = "tokio")]
pub use wait::reserve::Ready;
pub use wait::reserve::{Reservation, ReserveError};
#[cfg(feature = "alloc")]
pub use wait::{KeyedReservation, WaitError};
pub use word::Transition;

// The crate's README (its crates.io page) is checked as a doc test too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
