//! Clocks: where a limiter gets "now" from.
//!
//! A [`Clock`] returns nanoseconds since its own epoch as a `u64`. Only differences
//! matter to the limiters, and every limiter also has an explicit-time entry point
//! (`check_at`), so a caller whose runtime freezes time (CDN workers) or that replays a
//! recorded trace never needs a clock at all.
//!
//! Invariant shared by every implementation here: readings start near 0 when the clock
//! is created and never decrease (monotonic), so a process would need to run for
//! [`MAX_TIME_NANOS`](crate::quota::MAX_TIME_NANOS) (about 292 years) before a reading leaves the
//! range the limiters accept.
//!
//! | clock | resolution | cost on the reference VM | notes |
//! |---|---|---|---|
//! | [`QuantaClock`] (default with `quanta`) | ~ns (TSC) | see `BENCHMARKS.md` | calibrated TSC, falls back to the OS clock |
//! | [`StdClock`] | ns | see `BENCHMARKS.md` | `std::time::Instant` |
//! | [`CoarseClock`] | 1–4 ms (a kernel tick) | see `BENCHMARKS.md` | `CLOCK_MONOTONIC_COARSE` on Linux |
//! | [`ManualClock`] | whatever you set | one atomic load | tests and simulations |

use portable_atomic::{AtomicU64, Ordering};

/// A monotonic source of time in nanoseconds since the clock's own epoch.
pub trait Clock {
    /// Nanoseconds since this clock's epoch. Must never decrease.
    fn now(&self) -> u64;
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> u64 {
        (**self).now()
    }
}

#[cfg(feature = "alloc")]
impl<C: Clock + ?Sized> Clock for alloc::sync::Arc<C> {
    fn now(&self) -> u64 {
        (**self).now()
    }
}

/// The clock [`RateLimiter::new`](crate::algorithm::limiter::RateLimiter::new) uses.
///
/// [`QuantaClock`] when the `quanta` feature is on (the default): the cheapest
/// nanosecond-resolution clock measured (see `BENCHMARKS.md`). [`StdClock`] with `std`
/// alone, and [`ManualClock`] without `std`, where time must come from the caller.
#[cfg(feature = "quanta")]
pub type DefaultClock = QuantaClock;
/// The clock [`RateLimiter::new`](crate::algorithm::limiter::RateLimiter::new) uses (`std` without `quanta`).
#[cfg(all(feature = "std", not(feature = "quanta")))]
pub type DefaultClock = StdClock;
/// The clock [`RateLimiter::new`](crate::algorithm::limiter::RateLimiter::new) uses (`no_std`: time comes
/// from the caller, through `check_at` or [`ManualClock::set`]).
#[cfg(not(feature = "std"))]
pub type DefaultClock = ManualClock;

/// A clock moved by hand: for tests, simulations and callers that own the time axis.
///
/// ```
/// use portero::{Clock, ManualClock};
/// let clock = ManualClock::new();
/// clock.advance(1_500);
/// assert_eq!(clock.now(), 1_500);
/// ```
#[derive(Debug, Default)]
pub struct ManualClock {
    nanos: AtomicU64,
}

impl ManualClock {
    /// A clock that reads 0 until moved.
    pub const fn new() -> Self {
        Self::starting_at(0)
    }

    /// A clock that reads `nanos` until moved.
    pub const fn starting_at(nanos: u64) -> Self {
        Self {
            nanos: AtomicU64::new(nanos),
        }
    }

    /// Moves the clock forward by `nanos` (saturating at `u64::MAX`).
    pub fn advance(&self, nanos: u64) {
        let _ = self
            .nanos
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                Some(t.saturating_add(nanos))
            });
    }

    /// Sets the reading. Setting it backwards is allowed: limiters must (and do) cope.
    pub fn set(&self, nanos: u64) {
        self.nanos.store(nanos, Ordering::Release);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.nanos.load(Ordering::Acquire)
    }
}

/// `std::time::Instant`, counted from the clock's creation.
#[cfg(feature = "std")]
#[derive(Debug, Clone, Copy)]
pub struct StdClock {
    epoch: std::time::Instant,
}

#[cfg(feature = "std")]
impl StdClock {
    /// A clock whose epoch is now.
    pub fn new() -> Self {
        Self {
            epoch: std::time::Instant::now(),
        }
    }
}

#[cfg(feature = "std")]
impl Clock for StdClock {
    fn now(&self) -> u64 {
        // u64 nanoseconds last 584 years; saturate rather than wrap.
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// Wall-clock Unix time in nanoseconds (`SystemTime`), for calendar quotas whose
/// periods are UTC days and months. Not monotonic: if the system clock steps back,
/// limiters see time going backwards, which they tolerate (never admitting more).
#[cfg(feature = "std")]
#[derive(Debug, Clone, Copy, Default)]
pub struct UnixClock;

#[cfg(feature = "std")]
impl Clock for UnixClock {
    fn now(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

/// quanta's cached "recent" time: one atomic load per reading, updated by an upkeep
/// thread every `interval` (so readings lag by up to that interval — admissions happen
/// at most `interval` late, never early: time still only moves forward).
///
/// Some upkeep thread must run for the time to move: [`RecentClock::start_upkeep`]
/// starts quanta's (one per process; another library's, such as governor's
/// `QuantaUpkeepClock`, serves too). Without one the clock stands still, and a limiter
/// on it admits its burst and then nothing: it never over-admits.
#[cfg(feature = "quanta")]
#[derive(Debug, Clone, Copy)]
pub struct RecentClock {
    epoch: quanta::Instant,
}

/// Keeps quanta's upkeep thread running; dropping it stops the thread.
#[cfg(feature = "quanta")]
#[derive(Debug)]
pub struct UpkeepGuard(#[allow(dead_code)] quanta::Handle);

#[cfg(feature = "quanta")]
impl RecentClock {
    /// A clock whose epoch is the current recent time.
    pub fn new() -> Self {
        Self {
            epoch: quanta::Instant::recent(),
        }
    }

    /// Starts quanta's upkeep thread, updating the recent time every `interval`. Fails
    /// if one is already running in this process (then that one keeps the time).
    pub fn start_upkeep(interval: core::time::Duration) -> Result<UpkeepGuard, quanta::Error> {
        quanta::Upkeep::new(interval).start().map(UpkeepGuard)
    }
}

#[cfg(feature = "quanta")]
impl Clock for RecentClock {
    #[inline]
    fn now(&self) -> u64 {
        nanos_of(quanta::Instant::recent().saturating_duration_since(self.epoch))
    }
}

/// A `Duration` that quanta made from a u64 of nanoseconds, back to that u64. Put
/// together in u64 (it always fits), the division into seconds and the multiplication
/// back fold away, where a u128 `as_nanos` kept both (≈ 1 ns of a keyed check).
#[cfg(feature = "quanta")]
#[inline]
fn nanos_of(d: core::time::Duration) -> u64 {
    d.as_secs()
        .wrapping_mul(1_000_000_000)
        .wrapping_add(u64::from(d.subsec_nanos()))
}

/// The TSC clock of the `quanta` crate, counted from the clock's creation.
///
/// Reads the CPU's time-stamp counter and scales it with a calibration done once per
/// process; where the TSC is not usable, quanta falls back to the OS monotonic clock.
#[cfg(feature = "quanta")]
#[derive(Debug, Clone)]
pub struct QuantaClock {
    clock: quanta::Clock,
    epoch: u64,
}

#[cfg(feature = "quanta")]
impl QuantaClock {
    /// A clock whose epoch is now.
    pub fn new() -> Self {
        let clock = quanta::Clock::new();
        let epoch = clock.raw();
        Self { clock, epoch }
    }
}

#[cfg(feature = "quanta")]
impl Clock for QuantaClock {
    #[inline]
    fn now(&self) -> u64 {
        self.clock.delta_as_nanos(self.epoch, self.clock.raw())
    }
}

/// A cheap clock with the resolution of one kernel tick (typically 1–4 ms).
///
/// On Linux it reads `CLOCK_MONOTONIC_COARSE` from the vDSO; elsewhere it is
/// [`StdClock`]. Coarse time never over-admits (time only moves in bigger steps), but
/// retry-after figures are only as fine as the tick.
#[cfg(feature = "std")]
#[derive(Debug, Clone, Copy)]
pub struct CoarseClock {
    #[cfg(target_os = "linux")]
    epoch: u64,
    #[cfg(not(target_os = "linux"))]
    inner: StdClock,
}

#[cfg(feature = "std")]
impl CoarseClock {
    /// A clock whose epoch is now.
    pub fn new() -> Self {
        #[cfg(target_os = "linux")]
        {
            Self {
                epoch: coarse::monotonic_coarse_nanos(),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            Self {
                inner: StdClock::new(),
            }
        }
    }
}

#[cfg(feature = "std")]
impl Clock for CoarseClock {
    #[inline]
    fn now(&self) -> u64 {
        #[cfg(target_os = "linux")]
        {
            coarse::monotonic_coarse_nanos().saturating_sub(self.epoch)
        }
        #[cfg(not(target_os = "linux"))]
        {
            self.inner.now()
        }
    }
}

#[cfg(all(feature = "std", target_os = "linux"))]
mod coarse {
    /// `clock_gettime(CLOCK_MONOTONIC_COARSE)` in nanoseconds.
    #[allow(unsafe_code)]
    pub(super) fn monotonic_coarse_nanos() -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec; the clock id is a Linux constant.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
        debug_assert_eq!(rc, 0);
        (ts.tv_sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(ts.tv_nsec as u64)
    }
}

// Each clock's `Default` is its `new`: its epoch is the instant it was made.
#[cfg(feature = "std")]
macro_rules! default_is_new {
    ($($clock:ty),*) => {$(
        impl Default for $clock {
            fn default() -> Self {
                Self::new()
            }
        }
    )*};
}
#[cfg(feature = "std")]
default_is_new!(StdClock, CoarseClock);
#[cfg(feature = "quanta")]
default_is_new!(RecentClock, QuantaClock);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_both_ways() {
        let c = ManualClock::starting_at(10);
        c.advance(5);
        assert_eq!(c.now(), 15);
        c.set(3);
        assert_eq!(c.now(), 3);
        c.set(u64::MAX - 1);
        c.advance(10);
        assert_eq!(c.now(), u64::MAX);
    }

    #[cfg(feature = "std")]
    #[test]
    fn real_clocks_are_monotonic() {
        let clocks: [&dyn Clock; 2] = [&StdClock::new(), &CoarseClock::new()];
        for c in clocks {
            let a = c.now();
            let b = c.now();
            assert!(b >= a);
        }
        #[cfg(feature = "quanta")]
        {
            let q = QuantaClock::new();
            let a = q.now();
            std::thread::sleep(std::time::Duration::from_millis(2));
            let b = q.now();
            assert!(b >= a + 1_000_000, "quanta advanced {} ns over 2 ms", b - a);
        }
    }

    #[cfg(feature = "quanta")]
    #[test]
    fn the_recent_clock_reads_whole_nanoseconds() {
        use core::time::Duration;
        assert_eq!(super::nanos_of(Duration::new(5, 123)), 5_000_000_123);
        assert_eq!(super::nanos_of(Duration::from_nanos(u64::MAX)), u64::MAX);
        assert_eq!(super::nanos_of(Duration::ZERO), 0);
    }

    #[cfg(feature = "quanta")]
    #[test]
    fn the_recent_clock_moves_with_its_upkeep_and_never_backwards() {
        let _upkeep = RecentClock::start_upkeep(std::time::Duration::from_millis(1));
        let clock = RecentClock::new();
        let mut last = clock.now();
        let start = std::time::Instant::now();
        while clock.now() < 5_000_000 {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(5),
                "the time never moved"
            );
            let now = clock.now();
            assert!(now >= last);
            last = now;
        }
    }
}
