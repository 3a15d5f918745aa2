//! The line of waiters every waitable limiter carries (feature `tokio`): the state of
//! waiting, kept below the limiters so that [`RateLimiter`] and [`SlidingLog`] can hold
//! one without importing the waits that use it ([`crate::wait`]).
//!
//! Invariant: `waiting` is the sum of the units of the [`InLine`] guards alive, so a
//! waiter dropped anywhere (cancelled, timed out) leaves no units counted.
//!
//! [`RateLimiter`]: crate::algorithm::limiter::RateLimiter
//! [`SlidingLog`]: crate::algorithm::sliding_log::SlidingLog

use core::sync::atomic::{AtomicU64, Ordering};

/// The line of waiters of one limiter (see [`crate::wait`]): held inside
/// the limiter, opaque.
#[derive(Debug, Default)]
pub struct WaitLine {
    // Fair: the lock is granted in the order it was asked for, and a request dropped
    // while queued leaves the queue.
    head: tokio::sync::Mutex<()>,
    // Units of the waiters in line (at the head or behind it).
    waiting: AtomicU64,
}

impl WaitLine {
    /// The units of the waiters in line now. Inlined: every wait's fast path reads it,
    /// from the caller's crate (a call here cost a plain loop of waits 1.4 % of its time).
    #[inline]
    pub(crate) fn waiting(&self) -> u64 {
        self.waiting.load(Ordering::Acquire)
    }

    /// Waits for the head of the line (fair: in the order asked for).
    pub(crate) async fn head(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.head.lock().await
    }
}

/// A waiter's units in line, counted from joining to leaving (admitted, refused or
/// dropped).
pub(crate) struct InLine<'a> {
    line: &'a WaitLine,
    cost: u64,
}

impl<'a> InLine<'a> {
    pub(crate) fn join(line: &'a WaitLine, cost: u64) -> Self {
        // At least one: a waiter of cost 0 is in line too.
        let cost = cost.max(1);
        line.waiting.fetch_add(cost, Ordering::AcqRel);
        Self { line, cost }
    }
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        self.line.waiting.fetch_sub(self.cost, Ordering::AcqRel);
    }
}
