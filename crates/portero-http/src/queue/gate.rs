//! The slots and the line in front of them, behind one short lock.
//!
//! Invariant: `in_flight ≤ capacity` always, and a slot released while requests wait
//! goes straight to the next one the line serves (the count does not change), so no
//! newcomer can jump a waiting request and no slot is lost: a handed-over slot whose
//! waiter has just left is dropped by the channel and released again.
//!
//! Waiters whose client left are counted (`left`) when they leave, under the lock, and
//! removed lazily: a newcomer is refused when `waiting − left` live waiters fill the
//! queue, which costs O(1) however many have left; the line holds at most twice the
//! queue's length, and is compacted only when it reaches that, which removes at least
//! a queue's worth of departed waiters per scan (amortised O(1) per departure).
//!
//! Unlike the lock-free [`ConcurrencyLimit`](portero::ConcurrencyLimit) this takes a
//! mutex on every entry and release: a line of waiters needs one consistent view of
//! the count and the line together, and the lock is held for a few instructions.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::order::{DeadlineQueue, Order};

#[derive(Debug)]
pub(super) struct Gate {
    capacity: usize,
    queue: usize,
    line: Mutex<Line>,
    // Mean service time of the requests run, in µs (exponentially weighted, 1/8).
    service_us: AtomicU64,
}

#[derive(Debug)]
struct Line {
    in_flight: usize,
    // Waiters still in `waiting` whose client has left.
    left: usize,
    waiting: DeadlineQueue<Instant, oneshot::Sender<Slot>>,
    #[cfg(test)]
    scanned: usize,
}

/// One request's right to run; the next waiter gets it when it is dropped.
#[derive(Debug)]
pub(super) struct Slot {
    // `None` once handed back without a release (its waiter had left).
    gate: Option<Arc<Gate>>,
}

/// A place in line: resolves to a slot, or to an error when the line dropped it as
/// expired. Dropping it before then counts its client as gone.
#[derive(Debug)]
pub(super) struct Waiting {
    gate: Arc<Gate>,
    rx: Option<oneshot::Receiver<Slot>>,
}

pub(super) enum Entry {
    Now(Slot),
    Wait(Waiting),
    Full,
}

impl Gate {
    pub(super) fn new(capacity: usize, queue: usize, order: Order) -> Self {
        Self {
            capacity,
            queue,
            line: Mutex::new(Line {
                in_flight: 0,
                left: 0,
                waiting: DeadlineQueue::new(queue.saturating_mul(2), order),
                #[cfg(test)]
                scanned: 0,
            }),
            service_us: AtomicU64::new(0),
        }
    }

    /// A slot now, a place in line until `deadline`, or a refusal.
    pub(super) fn enter(self: &Arc<Self>, deadline: Instant) -> Entry {
        let mut line = self.lock();
        if line.in_flight < self.capacity {
            line.in_flight += 1;
            return Entry::Now(Slot {
                gate: Some(self.clone()),
            });
        }
        if line.waiting.len() - line.left >= self.queue {
            return Entry::Full; // live waiters fill the queue: no scan
        }
        if line.waiting.len() >= self.queue.saturating_mul(2) {
            // At least a queue's worth have left: drop them all in one pass.
            #[cfg(test)]
            {
                line.scanned += line.waiting.len();
            }
            line.waiting.retain(|w| !w.is_closed());
            line.left = 0;
        }
        let (tx, rx) = oneshot::channel();
        match line.waiting.push(deadline, tx) {
            Ok(()) => Entry::Wait(Waiting {
                gate: self.clone(),
                rx: Some(rx),
            }),
            Err(_) => Entry::Full,
        }
    }

    fn release(self: &Arc<Self>) {
        let mut line = self.lock();
        let now = Instant::now();
        let mut gone = 0;
        // Waiters past their deadline are dropped here: their request answers 503.
        let next = line
            .waiting
            .pop(now, |w| gone += usize::from(w.is_closed()));
        let mut next = next;
        while let Some(waiter) = next {
            let slot = Slot {
                gate: Some(self.clone()),
            };
            match waiter.send(slot) {
                Ok(()) => {
                    line.left -= gone;
                    return;
                }
                // The waiter left (and was counted): keep the slot for the next one
                // (disarmed, or its drop would release again under this lock).
                Err(mut slot) => {
                    gone += 1;
                    drop(slot.gate.take());
                }
            }
            next = line
                .waiting
                .pop(now, |w| gone += usize::from(w.is_closed()));
        }
        line.left -= gone;
        line.in_flight -= 1;
    }

    /// The service-time estimate: what a request must have left before it starts.
    pub(super) fn mean_service_time(&self) -> Duration {
        Duration::from_micros(self.service_us.load(Ordering::Relaxed))
    }

    /// One more request ran for `took`.
    pub(super) fn record_service_time(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX / 8);
        let us = us.min(u64::MAX / 8);
        let _ = self
            .service_us
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |mean| {
                Some(if mean == 0 {
                    us
                } else {
                    mean - mean / 8 + us / 8
                })
            });
    }

    pub(super) fn in_flight(&self) -> usize {
        self.lock().in_flight
    }

    pub(super) fn waiting(&self) -> usize {
        let line = self.lock();
        line.waiting.len() - line.left
    }

    // Every update under the lock is a single field change, so a panic elsewhere
    // cannot leave it half-done: a poisoned lock is still consistent.
    fn lock(&self) -> MutexGuard<'_, Line> {
        self.line.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(gate) = self.gate.take() {
            gate.release();
        }
    }
}

impl Future for Waiting {
    type Output = Result<Slot, oneshot::error::RecvError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(rx) = self.rx.as_mut() else {
            return Poll::Pending; // polled after it finished
        };
        let out = std::task::ready!(Pin::new(rx).poll(cx));
        self.rx = None;
        Poll::Ready(out)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let Some(mut rx) = self.rx.take() else {
            return;
        };
        let handed = {
            let mut line = self.gate.lock();
            // Under the lock, the line cannot pop this waiter meanwhile: either it is
            // still in line (its sender waits there), or it was served or dropped.
            let handed = match rx.try_recv() {
                Ok(slot) => Some(slot),
                Err(oneshot::error::TryRecvError::Empty) => {
                    line.left += 1;
                    None
                }
                Err(oneshot::error::TryRecvError::Closed) => None,
            };
            drop(rx); // closed while the lock is held: counted and closed together
            handed
        };
        // A slot handed over just now is released outside the lock.
        drop(handed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full queue refuses newcomers without looking at its waiters, however many of
    /// them have left; departed waiters are dropped a queue's worth at a time.
    #[tokio::test]
    async fn a_full_queue_refuses_in_constant_time() {
        let gate = Arc::new(Gate::new(1, 100, Order::OldestFirst));
        let far = Instant::now() + Duration::from_secs(60);
        let running = match gate.enter(far) {
            Entry::Now(slot) => slot,
            _ => unreachable!(),
        };
        let mut waiting: Vec<_> = (0..100)
            .map(|_| match gate.enter(far) {
                Entry::Wait(w) => w,
                _ => panic!("room in line"),
            })
            .collect();
        waiting.truncate(60); // 40 clients leave
        assert_eq!(gate.waiting(), 60);
        for _ in 0..40 {
            match gate.enter(far) {
                Entry::Wait(w) => waiting.push(w),
                _ => panic!("room again: 40 left"),
            }
        }
        for _ in 0..10_000 {
            assert!(matches!(gate.enter(far), Entry::Full));
        }
        assert_eq!(gate.lock().scanned, 0, "no refusal scanned the line");
        drop(running);
        assert_eq!(gate.in_flight(), 1, "the slot went to the oldest waiter");
    }
}
