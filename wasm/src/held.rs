//! Admissions a keyed table handed out and has not seen settled yet, by handle: what
//! JavaScript holds to give units back (or charge more) once a response says what a
//! request really cost.
//!
//! Invariant: a handle settles at most once, and only the admission it was given for.
//! Handles are sequence numbers (below 2^53, exact in a JavaScript number); the ring
//! keeps the last [`MOST_HELD`] admissions, so an admission `MOST_HELD` acquisitions
//! old is forgotten and its handle settles nothing: the request keeps its units,
//! which can never admit more than a table that saw it (never an invention).

use std::cell::RefCell;

use portero::{Admission, Fingerprint};

/// The most admissions held at once.
pub(crate) const MOST_HELD: usize = 65_536;

/// One held admission: its handle, the key it was taken from, and what it took.
struct Entry {
    handle: u64,
    key: Fingerprint,
    admission: Admission,
}

/// The ring of held admissions.
#[derive(Default)]
pub(crate) struct Held {
    entries: RefCell<Vec<Option<Entry>>>,
    next: std::cell::Cell<u64>,
}

impl Held {
    /// Holds `admission` of `key`; returns its handle.
    pub(crate) fn hold(&self, key: Fingerprint, admission: Admission) -> u64 {
        let handle = self.next.get();
        self.next.set(handle + 1);
        let mut entries = self.entries.borrow_mut();
        let slot = (handle % MOST_HELD as u64) as usize;
        let entry = Some(Entry {
            handle,
            key,
            admission,
        });
        if slot < entries.len() {
            entries[slot] = entry;
        } else {
            entries.push(entry);
        }
        handle
    }

    /// The admission `handle` names, taken out (it settles once); `None` for a handle
    /// never given, already settled, or forgotten.
    pub(crate) fn take(&self, handle: u64) -> Option<(Fingerprint, Admission)> {
        let mut entries = self.entries.borrow_mut();
        let slot = entries.get_mut((handle % MOST_HELD as u64) as usize)?;
        match slot {
            Some(e) if e.handle == handle => slot.take().map(|e| (e.key, e.admission)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_settles_once_and_an_old_one_never() {
        let held = Held::default();
        let f = Fingerprint::from_bits(7);
        let first = held.hold(f, Admission::new(1, 1));
        assert!(held.take(first).is_some());
        assert!(held.take(first).is_none(), "settled once");
        let old = held.hold(f, Admission::new(2, 1));
        for _ in 0..MOST_HELD {
            held.hold(f, Admission::new(3, 1));
        }
        assert!(held.take(old).is_none(), "forgotten, not another's");
        assert!(held.take(u64::MAX).is_none());
    }
}
