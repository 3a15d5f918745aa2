//! A rule's lease (`rate_limit.portero.lease`, `lease_ms`): with Redis, an instance
//! borrows `lease` of a counter's units in one script call and spends them here, so a
//! hot counter costs one round trip per batch instead of one per request
//! (`portero_redis::LeasedLimiter`, whose bounds hold: never more admitted across the
//! fleet than the limit allows over any window lengthened by `lease_ms`, and at most
//! a batch a counter left unspent on each instance when its lease ends). In memory
//! there is nothing to borrow from: the key is read and ignored there.

use std::time::Duration;

/// The longest a lease may be spent for: an hour.
pub const MOST_LEASE_MS: u64 = 3_600_000;

/// How long a lease is spent for when the rule does not say: one second.
pub const DEFAULT_LEASE_MS: u64 = 1_000;

/// A rule's lease: units borrowed at once, and how long they may be spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lease {
    /// Units borrowed in one script call.
    pub batch: u64,
    /// How long they may be spent, from when they were asked for.
    pub lasts: Duration,
}

impl Lease {
    /// The lease `lease` and `lease_ms` ask for (no `lease`: none) for a rule that
    /// admits at most `capacity` at once.
    pub fn read(
        lease: Option<u64>,
        lease_ms: Option<u64>,
        capacity: u64,
    ) -> Result<Option<Self>, String> {
        let Some(batch) = lease else {
            return match lease_ms {
                Some(_) => Err("lease_ms without a lease".into()),
                None => Ok(None),
            };
        };
        if batch == 0 || batch > capacity {
            return Err(format!(
                "lease {batch}: from 1 to what the rule admits at once ({capacity})"
            ));
        }
        let ms = lease_ms.unwrap_or(DEFAULT_LEASE_MS);
        if ms == 0 || ms > MOST_LEASE_MS {
            return Err(format!(
                "lease_ms {ms}: from 1 to {MOST_LEASE_MS} (an hour)"
            ));
        }
        Ok(Some(Self {
            batch,
            lasts: Duration::from_millis(ms),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_read_or_refused_by_name() {
        assert_eq!(Lease::read(None, None, 10), Ok(None));
        assert_eq!(
            Lease::read(Some(5), None, 10),
            Ok(Some(Lease {
                batch: 5,
                lasts: Duration::from_secs(1)
            }))
        );
        let hour = Lease::read(Some(5), Some(MOST_LEASE_MS), 10)
            .unwrap()
            .unwrap();
        assert_eq!(hour.lasts, Duration::from_secs(3_600), "an hour is allowed");
        for (lease, ms, says) in [
            (Some(0), None, "lease 0"),
            (Some(11), None, "lease 11"),
            (Some(5), Some(0), "lease_ms 0"),
            (Some(5), Some(u64::MAX), "lease_ms"),
            (None, Some(5), "without a lease"),
        ] {
            let e = Lease::read(lease, ms, 10).unwrap_err();
            assert!(e.contains(says), "{lease:?} {ms:?}: {e}");
        }
    }
}
