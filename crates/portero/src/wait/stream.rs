//! [`Throttled`]: a stream whose items each wait their turn on a shared GCRA limiter
//! (feature `tokio`) — messages to a provider, pages of a crawl, rows to an API.
//!
//! Invariant: an item is taken from the inner stream only when the one before it has
//! been yielded, booked at once ([`RateLimiter::reserve_owned`], one CAS) for its cost,
//! and yielded at its turn, not before: so the items of every stream and every other
//! caller sharing the limiter are admitted first come, first served, never more than
//! `B + t / T` units in any interval `t` (the bound of
//! [`RateLimiter::until_ready_n`]). Dropped while an item waits, the stream drops the
//! item and cancels its booking (given back if nothing was booked after it). An item
//! whose cost can never fit is handed back at once as [`NeverFits`], booking nothing.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::future::Future as _;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use futures_core::Stream;

use crate::algorithm::gcra::Gcra;
use crate::algorithm::limiter::RateLimiter;
use crate::clock::Clock;
use crate::wait::reserve::{Reservation, ReserveError};

/// An item that can never be admitted (its cost is above the burst), handed back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeverFits<T> {
    /// The item, unsent.
    pub item: T,
    /// Why it cannot be admitted.
    pub error: ReserveError,
}

/// A stream whose items each wait for `cost(item)` units of a shared limiter (one by
/// default). See the [module docs](self) for the order and the bound.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), portero::QuotaError> {
/// use std::{pin::pin, sync::Arc, time::Duration};
/// use futures_core::Stream;
/// use portero::{wait::stream::Throttled, Quota, RateLimiter};
///
/// # struct Iter<I>(I);
/// # impl<I: Iterator + Unpin> Stream for Iter<I> {
/// #     type Item = I::Item;
/// #     fn poll_next(mut self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<Option<I::Item>> {
/// #         std::task::Poll::Ready(self.0.next())
/// #     }
/// # }
/// # let messages = Iter(["a", "bb", "ccc"].into_iter());
/// let provider = Arc::new(RateLimiter::gcra(Quota::per_second(10)?.with_burst(3)?));
/// // One unit per byte: 3 at once, then 1 per 100 ms.
/// let mut sends = pin!(Throttled::new(messages, provider).cost(|m: &&str| m.len() as u64));
/// let start = tokio::time::Instant::now();
/// let mut at = Vec::new();
/// while let Some(m) = std::future::poll_fn(|cx| sends.as_mut().poll_next(cx)).await {
///     at.push((m.unwrap(), start.elapsed()));
/// }
/// let ms = Duration::from_millis;
/// assert_eq!(at, [("a", ms(0)), ("bb", ms(0)), ("ccc", ms(300))]);
/// # Ok(()) }
/// ```
pub struct Throttled<S: Stream, C: Clock + 'static, F = fn(&<S as Stream>::Item) -> u64> {
    inner: Pin<Box<S>>,
    limiter: Arc<RateLimiter<Gcra, C>>,
    cost: F,
    // The item taken, its booking, and its timer while its turn is ahead.
    waiting: Option<Waiting<S::Item, C>>,
}

struct Waiting<T, C: Clock + 'static> {
    item: T,
    turn: Reservation<'static, C>,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

// No field is ever pinned in place except through its own box: moving a `Throttled`
// moves no pinned data.
impl<S: Stream, C: Clock + 'static, F> Unpin for Throttled<S, C, F> {}

impl<S: Stream, C: Clock + 'static, F> core::fmt::Debug for Throttled<S, C, F> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Throttled")
            .field("waiting", &self.waiting.as_ref().map(|w| w.turn.ready_at()))
            .finish_non_exhaustive()
    }
}

fn one<T>(_: &T) -> u64 {
    1
}

impl<S: Stream, C: Clock + 'static> Throttled<S, C> {
    /// `stream`'s items, each waiting for one unit of `limiter`.
    pub fn new(stream: S, limiter: Arc<RateLimiter<Gcra, C>>) -> Self {
        Self {
            inner: Box::pin(stream),
            limiter,
            cost: one::<S::Item>,
            waiting: None,
        }
    }
}

impl<S: Stream, C: Clock + 'static, F> Throttled<S, C, F> {
    /// Each item waits for `cost(&item)` units instead of one.
    pub fn cost<G: FnMut(&S::Item) -> u64>(self, cost: G) -> Throttled<S, C, G> {
        Throttled {
            inner: self.inner,
            limiter: self.limiter,
            cost,
            waiting: None,
        }
    }
}

impl<S: Stream, C: Clock + 'static, F: FnMut(&S::Item) -> u64> Stream for Throttled<S, C, F> {
    type Item = Result<S::Item, NeverFits<S::Item>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(w) = this.waiting.as_mut() {
                if let Some(sleep) = w.sleep.as_mut() {
                    if sleep.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                }
                if let Some(w) = this.waiting.take() {
                    w.turn.commit();
                    return Poll::Ready(Some(Ok(w.item)));
                }
            }
            let item = match this.inner.as_mut().poll_next(cx) {
                Poll::Ready(Some(item)) => item,
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            };
            let cost = (this.cost)(&item);
            let turn = match this.limiter.reserve_owned(cost, Duration::MAX) {
                Ok(turn) => turn,
                Err(error) => return Poll::Ready(Some(Err(NeverFits { item, error }))),
            };
            let wait = turn.wait_from(this.limiter.clock().now());
            let sleep = (!wait.is_zero()).then(|| Box::pin(tokio::time::sleep(wait)));
            this.waiting = Some(Waiting { item, turn, sleep });
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let held = usize::from(self.waiting.is_some());
        let (low, high) = self.inner.size_hint();
        (
            low.saturating_add(held),
            high.and_then(|h| h.checked_add(held)),
        )
    }
}
