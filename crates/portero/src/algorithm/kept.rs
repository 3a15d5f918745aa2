//! A state word its caller keeps ([`KeptWord`]): for a store that holds each key's
//! word itself (a Durable Object's storage, a database row) and applies one update at
//! a time, the checks and settlements a [`RateLimiter`](super::limiter::RateLimiter)
//! makes on its own word, with the same refund ledger.
//!
//! Invariant: the word and its ledger change together, one update at a time, and the
//! ledger only grows — by how far a settlement moved the word back other than by the
//! exact undo (the [`admission`](crate::admission) rule's `R`). Kept so, a settlement
//! here is exactly what the limiter's would be on the same word: never more generous
//! than a twin charged the real cost at the start (the rule's bound), since no other
//! update can land between its reading of the ledger and its write.

use crate::admission::{Admission, Settlement};
use crate::decision::{check_range, CheckError, Decision};

use super::charge::{saturates, standing};
use super::Algorithm;

/// One key's state word and its refund ledger, kept by the caller.
///
/// ```
/// use portero::algorithm::kept::KeptWord;
/// use portero::{Gcra, Quota};
///
/// let tokens = Gcra::new(Quota::per_minute(10_000)?);
/// let mut word = KeptWord::new(&tokens);
/// // Admitted on an estimate of 1,000 at t = 0; store `word` and `admission`.
/// let (decision, admission) = word.check(&tokens, 0, 1_000)?;
/// assert!(decision.is_allowed());
/// // The response said 1,938: the 938 above the estimate are charged.
/// let after = word.settle(&tokens, admission.unwrap(), 1_938, 0)?;
/// assert_eq!(after.remaining(), 10_000 - 1_938);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeptWord {
    /// The algorithm's state word.
    pub state: u64,
    /// The total by which settlements moved the word back other than by the exact
    /// undo (it only grows; a word starts at 0, and a word dropped and started again
    /// starts its ledger again).
    pub ledger: u128,
}

impl KeptWord {
    /// The word of a key that has used nothing.
    pub fn new<A: Algorithm + ?Sized>(algorithm: &A) -> Self {
        Self {
            state: algorithm.initial_state(),
            ledger: 0,
        }
    }

    /// Decides `cost` units at `now`, taking them if admitted: the decision, and for an
    /// admission of a positive cost, what settles it later.
    pub fn check<A: Algorithm + ?Sized>(
        &mut self,
        algorithm: &A,
        now: u64,
        cost: u64,
    ) -> Result<(Decision, Option<Admission>), CheckError> {
        let transition = algorithm.decide(self.state, now, cost)?;
        let before = self.state;
        if let Some(next) = transition.next {
            self.state = next;
        }
        // As a limiter's: a positive cost admitted is the one write that took units
        // (an excess-counting window also writes its refusals), and one admitted
        // without a write is known by its time and cost.
        let admitted = transition.decision.is_allowed() && cost > 0;
        let admission = admitted.then(|| match transition.next {
            Some(next) => Admission::of_word(now, cost, before, next, self.ledger),
            None => Admission::new(now, cost),
        });
        Ok((transition.decision, admission))
    }

    /// Settles `admission` (one of this word's, rebuilt with
    /// [`Admission::of_word`] if it was stored) at its real cost `real` at `now` (no
    /// earlier than any update applied since it): units not used go back by the refund
    /// rule, units above the estimate are charged into debt. Returns how the word
    /// stands afterwards for a request of one unit. An algorithm that cannot charge
    /// after the fact answers [`CheckError::CannotCharge`] for a real cost above the
    /// estimate, and the word is unchanged.
    pub fn settle<A: Algorithm + ?Sized>(
        &mut self,
        algorithm: &A,
        admission: Admission,
        real: u64,
        now: u64,
    ) -> Result<Decision, CheckError> {
        check_range(now, 0, 0)?;
        let now = now.max(admission.at());
        match admission.settled_at(real) {
            Settlement::Charge(units) => {
                let dropped = saturates(algorithm, self.state, now, units);
                self.state = algorithm
                    .charge(self.state, now, units)
                    .ok_or(CheckError::CannotCharge)?;
                // Units the word could not hold: no admission from before gives
                // anything back (as the limiters' ledgers are told).
                if dropped {
                    self.ledger = self.ledger.saturating_add(u128::from(u64::MAX));
                }
            }
            Settlement::GiveBack(back) => {
                let given = back.give_back_ledgered(
                    algorithm,
                    self.state,
                    now,
                    Some(crate::admission::Seen::total(self.ledger)),
                );
                if let Some((next, exact)) = given {
                    // An exact undo returns the word to one it held since the
                    // admission: nothing a later settlement must count.
                    if !exact {
                        let moved = u128::from(self.state.abs_diff(next));
                        self.ledger = self.ledger.saturating_add(moved);
                    }
                    self.state = next;
                }
            }
            Settlement::Kept => {}
        }
        standing(algorithm, self.state, now)
    }
}
