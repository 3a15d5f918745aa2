//! A concurrency limit that refuses lower priorities first: each class may only take a
//! permit while fewer than its ceiling are in flight, so as work nears capacity the
//! least important requests are refused and the most important keep a reserve.
//!
//! Invariant: the ceilings never increase with the class number (class 0 is the most
//! important and its ceiling is the whole capacity), and a permit is taken by one
//! compare-and-swap on the shared in-flight count, which checks the caller's ceiling
//! against the same count it increments. So at every admission fewer than the class's
//! ceiling were in flight, and at most `capacity` are in flight at once.

use alloc::sync::Arc;

use crate::decision::Decision;
use crate::overload::concurrency::{ConcurrencyLimit, OwnedPermit};

/// The most priority classes a [`PriorityLimit`] distinguishes.
pub const MAX_CLASSES: usize = 8;

/// A request's priority class: 0 is the most important.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Priority(pub u8);

impl Priority {
    /// Work that must be served (health checks, payments, the login page).
    pub const CRITICAL: Self = Self(0);
    /// Ordinary requests.
    pub const DEFAULT: Self = Self(1);
    /// Work that can be refused first (prefetches, batch jobs, analytics).
    pub const SHEDDABLE: Self = Self(2);
}

/// Why a [`PriorityLimit`] was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriorityError;

impl core::fmt::Display for PriorityError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(
            "priority ceilings: 1-8 classes, the first 100 %, each 1-100 % and none above the one before",
        )
    }
}

impl core::error::Error for PriorityError {}

/// A concurrency limit with a ceiling per priority class: class `i` takes a permit only
/// while fewer than its ceiling are in flight (class 0's ceiling is the capacity),
/// checked and taken in one compare-and-swap on the shared in-flight count.
///
/// ```
/// use std::sync::Arc;
/// use portero::{Priority, PriorityLimit};
///
/// // 10 in flight; default work up to 9, sheddable work up to 7.
/// let limit = Arc::new(PriorityLimit::new(10, &[100, 90, 70])?);
/// let held: Vec<_> = (0..7).map(|_| limit.try_acquire(Priority::SHEDDABLE).unwrap()).collect();
/// assert!(limit.try_acquire(Priority::SHEDDABLE).is_err()); // the cut starts here
/// assert!(limit.try_acquire(Priority::CRITICAL).is_ok());
/// # Ok::<(), portero::PriorityError>(())
/// ```
#[derive(Debug)]
pub struct PriorityLimit {
    limit: Arc<ConcurrencyLimit>,
    ceilings: [u64; MAX_CLASSES],
    classes: usize,
}

impl PriorityLimit {
    /// `capacity` permits; class `i` may take one while fewer than `ceilings_percent[i]`
    /// % of `capacity` (rounded down, at least 1) are in flight. Classes past the last
    /// get the last ceiling.
    pub fn new(capacity: u64, ceilings_percent: &[u8]) -> Result<Self, PriorityError> {
        let valid = !ceilings_percent.is_empty()
            && ceilings_percent.len() <= MAX_CLASSES
            && ceilings_percent[0] == 100
            && ceilings_percent.windows(2).all(|w| w[1] <= w[0])
            && ceilings_percent.iter().all(|&p| p >= 1);
        if !valid {
            return Err(PriorityError);
        }
        let mut ceilings = [0; MAX_CLASSES];
        for (ceiling, &percent) in ceilings.iter_mut().zip(ceilings_percent) {
            let share =
                u64::try_from(u128::from(capacity) * u128::from(percent) / 100).unwrap_or(u64::MAX);
            *ceiling = share.max(1).min(capacity);
        }
        Ok(Self {
            limit: Arc::new(ConcurrencyLimit::new(capacity)),
            ceilings,
            classes: ceilings_percent.len(),
        })
    }

    /// Three classes ([`Priority::CRITICAL`], [`DEFAULT`](Priority::DEFAULT),
    /// [`SHEDDABLE`](Priority::SHEDDABLE)) with ceilings of 100 %, 90 % and 70 %.
    pub fn three_classes(capacity: u64) -> Self {
        Self::new(capacity, &[100, 90, 70]).expect("valid ceilings")
    }

    /// Takes a permit for a request of class `priority`, or the rejection.
    pub fn try_acquire(&self, priority: Priority) -> Result<OwnedPermit, Decision> {
        let class = usize::from(priority.0).min(self.classes - 1);
        self.limit.try_acquire_owned_below(self.ceilings[class])
    }

    /// The in-flight count at which `priority` starts being refused.
    pub fn ceiling(&self, priority: Priority) -> u64 {
        self.ceilings[usize::from(priority.0).min(self.classes - 1)]
    }

    /// Permits held now.
    pub fn in_use(&self) -> u64 {
        self.limit.in_use()
    }

    /// The most permits held at once.
    pub fn capacity(&self) -> u64 {
        self.limit.max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_class_stops_at_its_ceiling_and_bad_ceilings_are_refused() {
        let limit = PriorityLimit::new(100, &[100, 90, 50]).unwrap();
        let mut held = alloc::vec::Vec::new();
        while let Ok(p) = limit.try_acquire(Priority(7)) {
            held.push(p); // class 7 gets the last ceiling
        }
        assert_eq!(held.len(), 50);
        while let Ok(p) = limit.try_acquire(Priority::DEFAULT) {
            held.push(p);
        }
        assert_eq!(held.len(), 90);
        while let Ok(p) = limit.try_acquire(Priority::CRITICAL) {
            held.push(p);
        }
        assert_eq!(held.len(), 100);
        held.truncate(49);
        assert!(limit.try_acquire(Priority::SHEDDABLE).is_ok());
        for bad in [&[][..], &[90], &[100, 0], &[100, 50, 60], &[100; 9]] {
            assert_eq!(PriorityLimit::new(10, bad).unwrap_err(), PriorityError);
        }
        assert_eq!(
            PriorityLimit::new(3, &[100, 10])
                .unwrap()
                .ceiling(Priority(1)),
            1
        );
        assert_eq!(
            PriorityLimit::new(u64::MAX, &[100]).unwrap().capacity(),
            u64::MAX
        );
    }
}
