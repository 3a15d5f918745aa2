//! The keyed sliding log as a store: exact per-key windows (logins, payments) in
//! memory, decided at once, with refunds when a later limit refuses.

use std::hash::Hash;

use portero::{Clock, Decision, KeyedLog};

use super::store::{Checked, Checking, Source, Store, StoreError, Ticket};

// In memory, like `KeyedLimiter`'s: a full table is `StoreError::Unavailable`, a cost
// above the limit `StoreError::CostAboveCapacity`.
super::store::in_memory_store!(
    KeyedLog<K, C>,
    capacity = |log| log.limit(),
    C: Clock + Send + Sync + 'static,
);

#[cfg(test)]
mod tests {
    use portero::{KeyedLog, ManualClock, Quota};

    use super::super::store::{Checking, Source, Store, StoreError};

    fn done(c: Checking) -> Result<crate::limit::store::Checked, StoreError> {
        match c {
            Checking::Done(d) => d,
            Checking::Pending(_) => panic!("a memory store answers at once"),
        }
    }

    #[test]
    fn checks_at_once_and_refunds_its_tickets() {
        let log =
            KeyedLog::with_clock(Quota::per_minute(2).unwrap(), 1, ManualClock::new()).unwrap();
        assert!(!Store::<&str>::is_remote(&log));
        let first = done(Store::check_key(&log, Some("ann"), 1)).unwrap();
        assert!(first.decision.is_allowed());
        assert_eq!(first.source, Source::Memory);
        let ticket = first.ticket.unwrap();
        assert_eq!(ticket.fingerprint, log.fingerprint_of(&"ann"));
        let after = Store::<&str>::refund_ticket(&log, ticket).unwrap();
        assert_eq!(after.remaining(), 2);
        assert!(done(Store::check_key(&log, Some("ann"), 2))
            .unwrap()
            .decision
            .is_allowed());
        assert!(!done(Store::check_key(&log, Some("ann"), 1))
            .unwrap()
            .decision
            .is_allowed());
        // One key fits: a newcomer (and the no-key log) find the table full.
        assert!(matches!(
            done(Store::check_key(&log, Some("bo"), 1)),
            Err(StoreError::Unavailable { .. })
        ));
        assert!(matches!(
            done(Store::check_key(&log, None, 1)),
            Err(StoreError::Unavailable { .. })
        ));
        assert!(matches!(
            done(Store::check_key(&log, Some("ann"), 3)),
            Err(StoreError::CostAboveCapacity)
        ));
    }
}
