//! The overload experiments: what happens to a server offered more than it can serve,
//! and what shedding, deadlines, fairness, adaptive limits, breakers and backoff do
//! about it. Each one is a seeded, simulated-time run through portero's own types
//! (the concurrency limits, the deadline queue, the fair share, the breaker, the
//! backoff), so its numbers are the same on every machine.

pub mod breaker;
pub mod goodput;
pub mod little;
pub mod outbound;
pub mod outbound_waits;
pub mod priority;
pub mod storm;
pub mod tenants;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One second in nanoseconds, the time axis of every experiment.
pub const SEC: u64 = 1_000_000_000;

/// The seed the README's figures were produced with.
pub const DEFAULT_SEED: u64 = 2026;

/// Arrival times (ns) of a Poisson process of `rate` per second over `[0, seconds)`.
pub fn poisson(rate: f64, seconds: u64, rng: &mut StdRng) -> Vec<u64> {
    let mut out = Vec::new();
    let mut t = 0.0;
    loop {
        let u: f64 = rng.random_range(f64::EPSILON..1.0);
        t += -u.ln() / rate;
        if t >= seconds as f64 {
            return out;
        }
        out.push((t * 1e9) as u64);
    }
}

/// `rate` evenly spaced arrivals per second over `[0, seconds)`.
pub fn even(rate: u64, seconds: u64) -> Vec<u64> {
    (0..rate * seconds).map(|i| i * SEC / rate).collect()
}

/// A seeded generator: the same experiment gives the same numbers everywhere.
pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// Future events in time order (ties in insertion order).
#[derive(Debug)]
pub struct Events<E> {
    heap: BinaryHeap<Reverse<(u64, u64)>>,
    items: Vec<Option<E>>,
}

impl<E> Default for Events<E> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
            items: Vec::new(),
        }
    }
}

impl<E> Events<E> {
    /// Schedules `event` at `time`.
    pub fn push(&mut self, time: u64, event: E) {
        self.heap.push(Reverse((time, self.items.len() as u64)));
        self.items.push(Some(event));
    }

    /// The earliest event at or before `until`, removed.
    pub fn pop_until(&mut self, until: u64) -> Option<(u64, E)> {
        let Reverse((time, _)) = *self.heap.peek()?;
        if time > until {
            return None;
        }
        let Reverse((time, index)) = self.heap.pop()?;
        Some((time, self.items[index as usize].take()?))
    }
}
