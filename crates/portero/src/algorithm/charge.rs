//! Taking units after the fact: [`Charging`] runs an algorithm's
//! [`charge`](super::Algorithm::charge) through the paths a check takes (one
//! compare-and-swap on a limiter's word, a keyed table's lookup and insert), so a
//! settlement needs no second copy of them.
//!
//! Invariant: a charge only moves a word forward, as a check does (never back), so
//! every admission's refund rule holds across it; and it never refuses.

use crate::admission::Admission;
use crate::decision::{CheckError, Decision};
use crate::word::Transition;

use super::Algorithm;

/// `algorithm` whose every decision is a charge: `decide(state, now, cost)` takes
/// `cost` units at `now` into debt and answers how the word stands afterwards (a
/// request of one unit's answer, `allowed` or not).
pub(crate) struct Charging<'a, A: ?Sized>(pub(crate) &'a A);

/// Whether charging `cost` at `now` saturates the word (a schedule's debt at its
/// 146-year cap, a window's count at its bits): one more unit would leave the same
/// word, so units are dropped that the word can no longer hold. An admission from
/// before could then give back what the word no longer counts, so the limiters
/// charge such a word under its ledger's lock and let no earlier admission give
/// anything back (a charge that takes nothing, with no window open, counts too:
/// nothing of the window is left to give back).
pub(crate) fn saturates<A: Algorithm + ?Sized>(a: &A, state: u64, now: u64, cost: u64) -> bool {
    a.charge(state, now, cost) == a.charge(state, now, cost.saturating_add(1))
}

impl<A: Algorithm + ?Sized> Algorithm for Charging<'_, A> {
    fn initial_state(&self) -> u64 {
        self.0.initial_state()
    }

    fn capacity(&self) -> u64 {
        u64::MAX
    }

    fn decide(&self, state: u64, now: u64, cost: u64) -> Result<Transition, CheckError> {
        crate::decision::check_range(now, 0, 0)?;
        let next = self
            .0
            .charge(state, now, cost)
            .ok_or(CheckError::CannotCharge)?;
        let after = standing(self.0, next, now)?;
        Ok(if next == state {
            Transition::keep(after)
        } else {
            Transition::write(after, next)
        })
    }

    fn refund(&self, _: u64, _: &Admission, _: u64) -> Option<u64> {
        None
    }
}

/// How the word `state` stands at `now`: while one unit fits, admitted with what is
/// left (a peek of no units); otherwise a one-unit request's refusal, whose
/// `retry_after` is exactly when it fits (a key in debt).
pub(crate) fn standing<A: Algorithm + ?Sized>(
    algorithm: &A,
    state: u64,
    now: u64,
) -> Result<Decision, CheckError> {
    let one = algorithm.decide(state, now, 1)?.decision;
    if !one.is_allowed() {
        return Ok(one);
    }
    algorithm.decide(state, now, 0).map(|t| t.decision)
}
