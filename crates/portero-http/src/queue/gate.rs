//! The slots and the line in front of them, behind one short lock.
//!
//! Invariant: `in_flight ≤ capacity` always, and a slot released while requests wait
//! goes straight to the next one the line serves (the count does not change), so no
//! newcomer can jump a waiting request and no slot is lost: a handed-over slot whose
//! waiter has just left is dropped by the channel and released again.
//!
//! Unlike the lock-free [`ConcurrencyLimit`](portero::ConcurrencyLimit) this takes a
//! mutex on every entry and release: a line of waiters needs one consistent view of
//! the count and the line together, and the lock is held for a few instructions.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::order::{DeadlineQueue, Order};

#[derive(Debug)]
pub(super) struct Gate {
    capacity: usize,
    line: Mutex<Line>,
}

#[derive(Debug)]
struct Line {
    in_flight: usize,
    waiting: DeadlineQueue<Instant, oneshot::Sender<Slot>>,
}

/// One request's right to run; the next waiter gets it when it is dropped.
#[derive(Debug)]
pub(super) struct Slot {
    // `None` once handed back without a release (its waiter had left).
    gate: Option<Arc<Gate>>,
}

pub(super) enum Entry {
    Now(Slot),
    Wait(oneshot::Receiver<Slot>),
    Full,
}

impl Gate {
    pub(super) fn new(capacity: usize, queue: usize, order: Order) -> Self {
        Self {
            capacity,
            line: Mutex::new(Line {
                in_flight: 0,
                waiting: DeadlineQueue::new(queue, order),
            }),
        }
    }

    pub(super) fn enter(self: &Arc<Self>, deadline: Instant) -> Entry {
        let mut line = self.lock();
        if line.in_flight < self.capacity {
            line.in_flight += 1;
            return Entry::Now(Slot {
                gate: Some(self.clone()),
            });
        }
        let (tx, rx) = oneshot::channel();
        match line.waiting.push(deadline, tx) {
            Ok(()) => Entry::Wait(rx),
            Err(tx) => {
                // Full of waiters, some of which may have left already.
                line.waiting.retain(|w| !w.is_closed());
                match line.waiting.push(deadline, tx) {
                    Ok(()) => Entry::Wait(rx),
                    Err(_) => Entry::Full,
                }
            }
        }
    }

    fn release(self: &Arc<Self>) {
        let mut line = self.lock();
        let now = Instant::now();
        // Waiters past their deadline are dropped here: their request answers 503.
        while let Some(waiter) = line.waiting.pop(now, drop) {
            let slot = Slot {
                gate: Some(self.clone()),
            };
            match waiter.send(slot) {
                Ok(()) => return,
                // The waiter left: keep the slot for the next one (disarmed, or its
                // drop would release again under this lock).
                Err(mut slot) => drop(slot.gate.take()),
            }
        }
        line.in_flight -= 1;
    }

    pub(super) fn in_flight(&self) -> usize {
        self.lock().in_flight
    }

    pub(super) fn waiting(&self) -> usize {
        self.lock().waiting.len()
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
