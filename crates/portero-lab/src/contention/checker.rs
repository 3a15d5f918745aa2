//! What the study asks of a subject ([`Checker`]), and the bound a GCRA's audit holds
//! each key to ([`gcra_allowance`]): shared by the subjects and the peers.

use std::time::Duration;

use portero::Quota;

/// A limit every measuring thread checks: `check(i, thread)` is the thread's `i`-th
/// check, true when admitted.
pub trait Checker: Send + Sync + 'static {
    /// The thread's `i`-th check.
    fn check(&self, i: usize, thread: usize) -> bool;
    /// The quota it claims for each key (`None`: no quota, the floor).
    fn quota(&self) -> Option<Quota>;
    /// Which key the thread's `i`-th check counts against (`0..keys()`).
    fn key(&self, i: usize, thread: usize) -> usize {
        let _ = (i, thread);
        0
    }
    /// How many keys its checks are spread over.
    fn keys(&self) -> usize {
        1
    }
    /// The most one key may admit in a run of `span` that starts now-ish (`None`:
    /// no quota): `burst + ⌊span / T⌋` ([`gcra_allowance`]) unless its rule is
    /// another (a window's, see `peers`).
    fn allowance(&self, span: Duration) -> Option<u64> {
        self.quota().map(|q| gcra_allowance(&q, span))
    }
}

/// `burst + ⌊elapsed / T⌋`: the most GCRA (and a token bucket, and `Striped`) may
/// admit for one key of `quota` in any span of `elapsed`, from full — no slack: a
/// limiter that admits one unit more somewhere fails the audit.
pub fn gcra_allowance(quota: &Quota, elapsed: Duration) -> u64 {
    let earned = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX) / quota.interval_nanos();
    quota.burst().saturating_add(earned)
}

/// `Checker` for a keyed subject: a struct with `keys` (each thread's key stream, a
/// power of two long), `distinct` (the keys in play) and `quota`; `check` is
/// `|subject, key| admitted`, and a subject held to another rule than
/// [`gcra_allowance`] gives `allowance: |subject| its allowance`.
macro_rules! keyed_checker {
    ($($subject:ty: |$s:ident, $k:ident| $admits:expr $(, allowance: |$a:ident| $allow:expr)?;)*) => {$(
        impl $crate::contention::checker::Checker for $subject {
            #[inline]
            fn check(&self, i: usize, thread: usize) -> bool {
                let ($s, $k) = (self, self.key(i, thread) as u64);
                $admits
            }
            fn quota(&self) -> Option<portero::Quota> {
                Some(self.quota)
            }
            $(fn allowance(&self, _: std::time::Duration) -> Option<u64> {
                let $a = self;
                Some($allow)
            })?
            #[inline]
            fn key(&self, i: usize, thread: usize) -> usize {
                let keys = &self.keys[thread];
                keys[i & (keys.len() - 1)] as usize
            }
            fn keys(&self) -> usize {
                self.distinct as usize
            }
        }
    )*};
}
pub(crate) use keyed_checker;
