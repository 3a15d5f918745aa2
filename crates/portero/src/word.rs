//! The one atomic word a limiter's state lives in, and the one compare-and-swap loop.
//!
//! Invariant: the word only ever changes through [`AtomicWord::apply`], which hands
//! the current value to a pure transition and publishes the transition's new value with
//! a single compare-and-swap against exactly the value it was computed from. A
//! transition that returns no new value (a rejection, a peek) writes nothing, so
//! rejections cost one load and never contend for the cache line.
//!
//! Because every successful update is one CAS from the value the decision was based
//! on, the sequence of successful CASes is a serial history: concurrent checks decide
//! exactly as if they had run one after another in that order (no lost update). The
//! loom models in `tests/` check this claim for every algorithm.

use crate::sync::{AtomicU64, Ordering};

use crate::decision::Decision;

/// What a pure transition returns: the decision (for algorithms, a [`Decision`];
/// for updates that decide nothing, `()`), and the state to publish if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition<T = Decision> {
    /// The answer for this request.
    pub decision: T,
    /// `Some(state)` to publish; `None` leaves the word untouched.
    pub next: Option<u64>,
}

impl<T> Transition<T> {
    /// A decision that changes the state to `next`.
    #[inline]
    pub const fn write(decision: T, next: u64) -> Self {
        Self {
            decision,
            next: Some(next),
        }
    }

    /// A decision that leaves the state as it is.
    #[inline]
    pub const fn keep(decision: T) -> Self {
        Self {
            decision,
            next: None,
        }
    }
}

/// A 64-bit atomic state word (`portable-atomic`, so targets without native 64-bit
/// atomics work too; loom's atomic under `--cfg loom`, through [`crate::sync`]).
#[derive(Debug)]
pub struct AtomicWord(AtomicU64);

impl AtomicWord {
    /// A word holding `state`.
    pub fn new(state: u64) -> Self {
        Self(AtomicU64::new(state))
    }

    /// The current state.
    #[inline]
    pub fn load(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// Replaces the state unconditionally (reset, reconfiguration).
    pub fn store(&self, state: u64) {
        self.0.store(state, Ordering::Release)
    }

    /// Replaces the state with `f(state)` by compare-and-swap, retrying on contention;
    /// `None` leaves it untouched. For updates that decide nothing (refunds, releases).
    pub fn update(&self, mut f: impl FnMut(u64) -> Option<u64>) {
        let _ = self.apply::<(), core::convert::Infallible>(|state| {
            Ok(match f(state) {
                Some(next) => Transition::write((), next),
                None => Transition::keep(()),
            })
        });
    }

    /// Runs `transition` on the current state and publishes its result with one CAS,
    /// retrying with the fresh value if another thread got there first.
    ///
    /// `transition` must be pure: it may run several times under contention. A
    /// `Some(next)` is published even when it equals the loaded value (comparing the two
    /// would put one more instruction between the load and the CAS on every admission);
    /// transitions return [`Transition::keep`] when they mean to write nothing.
    #[inline]
    pub fn apply<T, E>(
        &self,
        mut transition: impl FnMut(u64) -> Result<Transition<T>, E>,
    ) -> Result<T, E> {
        let mut current = self.0.load(Ordering::Acquire);
        loop {
            let t = transition(current)?;
            let next = match t.next {
                Some(next) => next,
                // Deciding on the loaded value is linearizable at the load: no write.
                None => return Ok(t.decision),
            };
            match self
                .0
                .compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok(t.decision),
                Err(actual) => current = actual,
            }
        }
    }
}
