//! A concurrency limit: at most `C` requests in flight, each holding a permit.
//!
//! By Little's law the average number in flight is arrival rate × time in the system,
//! so `C` permits with a service time `S` admit at most `C / S` requests per second
//! (`C = 30`, `S = 0.25 s`: 120 per second). When the server slows down and `S` grows,
//! the admitted rate falls in proportion — exactly when a struggling server needs it —
//! while a fixed rate limit would keep admitting the same rate and let work pile up.
//!
//! The permit count is one atomic word updated through the crate's CAS helper; a
//! [`Permit`] gives its slot back when dropped, also when the holder panics.
//!
//! ```
//! use portero::ConcurrencyLimit;
//! let limit = ConcurrencyLimit::new(2);
//! let a = limit.try_acquire().unwrap();
//! let _b = limit.try_acquire().unwrap();
//! assert!(limit.try_acquire().is_err());
//! drop(a);
//! assert!(limit.try_acquire().is_ok());
//! ```

use crossbeam_utils::CachePadded;

use crate::decision::Decision;
use crate::word::{AtomicWord, Transition};

/// At most `max` permits held at once.
#[derive(Debug)]
pub struct ConcurrencyLimit {
    in_use: CachePadded<AtomicWord>,
    max: u64,
}

/// A [`Permit`] that owns a share of its limit, for holders that outlive a borrow (a
/// request's future, a spawned task); released on drop.
#[cfg(feature = "alloc")]
#[derive(Debug)]
#[must_use = "the permit is released as soon as it is dropped"]
pub struct OwnedPermit {
    limit: alloc::sync::Arc<ConcurrencyLimit>,
}

/// One held slot of a [`ConcurrencyLimit`]; released on drop.
#[derive(Debug)]
#[must_use = "the permit is released as soon as it is dropped"]
pub struct Permit<'a> {
    limit: &'a ConcurrencyLimit,
}

impl ConcurrencyLimit {
    /// A limit of `max` concurrent permits (0 admits nothing).
    pub fn new(max: u64) -> Self {
        Self {
            in_use: CachePadded::new(AtomicWord::new(0)),
            max,
        }
    }

    /// Takes a permit if one is free; otherwise the rejection (retry-after is 0: the
    /// limit cannot know when a holder will finish).
    pub fn try_acquire(&self) -> Result<Permit<'_>, Decision> {
        self.take().map(|()| Permit { limit: self })
    }

    /// [`try_acquire`](Self::try_acquire) for a shared limit: the permit keeps the
    /// limit alive and may move to another task.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use portero::ConcurrencyLimit;
    /// let limit = Arc::new(ConcurrencyLimit::new(1));
    /// let permit = limit.try_acquire_owned().unwrap();
    /// assert!(limit.try_acquire_owned().is_err());
    /// std::thread::spawn(move || drop(permit)).join().unwrap();
    /// assert_eq!(limit.in_use(), 0);
    /// ```
    #[cfg(feature = "alloc")]
    pub fn try_acquire_owned(self: &alloc::sync::Arc<Self>) -> Result<OwnedPermit, Decision> {
        self.take().map(|()| OwnedPermit {
            limit: self.clone(),
        })
    }

    /// [`try_acquire_owned`](Self::try_acquire_owned), but only while fewer than
    /// `ceiling` (at most the limit) are held: lower priorities get lower ceilings.
    #[cfg(feature = "alloc")]
    pub(crate) fn try_acquire_owned_below(
        self: &alloc::sync::Arc<Self>,
        ceiling: u64,
    ) -> Result<OwnedPermit, Decision> {
        self.take_below(ceiling.min(self.max))
            .map(|()| OwnedPermit {
                limit: self.clone(),
            })
    }

    fn take(&self) -> Result<(), Decision> {
        self.take_below(self.max)
    }

    fn take_below(&self, ceiling: u64) -> Result<(), Decision> {
        let max = self.max;
        let Ok(d) = self.in_use.apply::<_, core::convert::Infallible>(|n| {
            Ok(if n < ceiling {
                Transition::write(Decision::admitted(max, max - n - 1, 0), n + 1)
            } else {
                Transition::keep(Decision::rejected(max, 0, 0, 0))
            })
        });
        if d.is_allowed() {
            Ok(())
        } else {
            Err(d)
        }
    }

    fn release(&self) {
        self.in_use.update(|n| Some(n.saturating_sub(1)));
    }

    /// Permits held now.
    pub fn in_use(&self) -> u64 {
        self.in_use.load()
    }

    /// The most permits held at once.
    pub fn max(&self) -> u64 {
        self.max
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.limit.release();
    }
}

#[cfg(feature = "alloc")]
impl Drop for OwnedPermit {
    fn drop(&mut self) {
        self.limit.release();
    }
}
