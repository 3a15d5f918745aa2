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

use crate::admission::{Admission, Seen, Settlement};
use crate::decision::{check_range, CheckError, Decision};
use crate::refund_log::{behind_of, record_in, Span};

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
        self.settle_in(algorithm, admission, real, now, None)
    }

    /// [`settle`](Self::settle), with the places the word's settlements gave back
    /// from (kept beside the word, and started afresh with it): settlements in any
    /// order then give back what a twin would have, exactly when no time passed (see
    /// [`KeptPlaces`]).
    ///
    /// ```
    /// use portero::algorithm::kept::{KeptPlaces, KeptWord};
    /// use portero::{Gcra, Quota};
    ///
    /// let tokens = Gcra::new(Quota::per_minute(1_000)?);
    /// let (mut word, mut places) = (KeptWord::new(&tokens), KeptPlaces::new());
    /// let first = word.check(&tokens, 0, 100)?.1.unwrap();
    /// let second = word.check(&tokens, 0, 100)?.1.unwrap();
    /// // Settled at 10 each, the later first: 180 back, as if each had cost 10.
    /// word.settle_placed(&mut places, &tokens, second, 10, 0)?;
    /// let after = word.settle_placed(&mut places, &tokens, first, 10, 0)?;
    /// assert_eq!(after.remaining(), 1_000 - 20);
    /// // Kept as text beside the word, read back the same.
    /// assert_eq!(places.to_string().parse::<KeptPlaces>()?, places);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle_placed<A: Algorithm + ?Sized>(
        &mut self,
        places: &mut KeptPlaces,
        algorithm: &A,
        admission: Admission,
        real: u64,
        now: u64,
    ) -> Result<Decision, CheckError> {
        self.settle_in(algorithm, admission, real, now, Some(places))
    }

    fn settle_in<A: Algorithm + ?Sized>(
        &mut self,
        algorithm: &A,
        admission: Admission,
        real: u64,
        now: u64,
        places: Option<&mut KeptPlaces>,
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
                // One update at a time: nothing ran between the admission's note of
                // the ledger and its write, so its place is known.
                let back = back.placed_if(places.is_some());
                let place = back.place();
                let behind = match (&places, place) {
                    (Some(p), Some((_, end, true))) if back.noted_total() != Some(self.ledger) => {
                        behind_of(p.spans().iter().map(|s| (s.start, s.given)), end)
                    }
                    _ => 0,
                };
                let seen = Seen {
                    total: self.ledger,
                    behind,
                };
                let given = back.give_back_ledgered(algorithm, self.state, now, Some(seen));
                if let Some((next, exact)) = given {
                    // An exact undo returns the word to one it held since the
                    // admission: nothing a later settlement must count.
                    let moved = if exact { 0 } else { self.state.abs_diff(next) };
                    self.ledger = self.ledger.saturating_add(u128::from(moved));
                    if let (Some(p), Some((start, end, _)), true) = (places, place, moved > 0) {
                        p.record(start, end, moved);
                    }
                    self.state = next;
                }
            }
            Settlement::Kept => {}
        }
        standing(algorithm, self.state, now)
    }
}

/// Where a kept word's settlements gave back from: the log of places beside its
/// ledger (see [`admission`](crate::admission): an admission holds the place
/// `[before + R, after + R)` among its word's admissions; a settlement subtracts
/// what was given back from places at or after its own end, which moved the word but
/// not its slot). At most 64 runs (a kept word's log lives in its store, not in a
/// table's memory: four times a limiter's, so that 64 settlements in flight landing
/// in any order seldom fill it): a full log merges its closest runs downward, which
/// only makes a settlement give back less. Kept as text beside the word
/// (`start:end:given` runs, comma-separated, in lowercase hexadecimal — which an edge
/// module formats without 128-bit division; empty when nothing was given back), and
/// started afresh with the word. Like the word and its ledger it is trusted: a log
/// claiming more than the ledger moved is not read, but one made up within it can
/// give back more, as a made-up ledger can — keep the three together, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptPlaces {
    // One more than a log holds: the new run before any merge. Unused runs stay
    // zero, so that two logs of the same runs are equal.
    runs: [Span; KEPT_RUNS + 1],
    len: usize,
}

/// The most runs a [`KeptPlaces`] keeps.
const KEPT_RUNS: usize = 64;

impl Default for KeptPlaces {
    fn default() -> Self {
        Self::new()
    }
}

impl KeptPlaces {
    /// No settlement has given anything back.
    pub const fn new() -> Self {
        Self {
            runs: [Span {
                start: 0,
                end: 0,
                given: 0,
            }; KEPT_RUNS + 1],
            len: 0,
        }
    }

    /// Whether nothing was given back (nothing to keep).
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The log as words, five a run: its start's and its end's high and low halves,
    /// and what it gave back (for a store that keeps numbers rather than text).
    pub fn to_words(&self) -> impl Iterator<Item = u64> + '_ {
        self.spans().iter().flat_map(|run| {
            let (start, end) = (run.start, run.end);
            [
                (start >> 64) as u64,
                start as u64,
                (end >> 64) as u64,
                end as u64,
                run.given,
            ]
        })
    }

    /// The log [`to_words`](Self::to_words) wrote.
    pub fn from_words(words: &[u64]) -> Result<Self, KeptPlacesError> {
        let mut places = Self::new();
        if words.len() % 5 != 0 {
            return Err(KeptPlacesError);
        }
        for run in words.chunks_exact(5) {
            let wide = |high: u64, low: u64| (u128::from(high) << 64) + u128::from(low);
            places.push(wide(run[0], run[1]), wide(run[2], run[3]), run[4])?;
        }
        Ok(places)
    }

    fn spans(&self) -> &[Span] {
        &self.runs[..self.len]
    }

    /// Appends a run read from a store: after the last, not empty, room left.
    fn push(&mut self, start: u128, end: u128, given: u64) -> Result<(), KeptPlacesError> {
        let after_last = self.spans().last().is_none_or(|last| last.end <= start);
        if self.len == KEPT_RUNS || start >= end || !after_last {
            return Err(KeptPlacesError);
        }
        self.runs[self.len] = Span { start, end, given };
        self.len += 1;
        Ok(())
    }

    fn record(&mut self, start: u128, end: u128, given: u64) {
        record_in(&mut self.runs, &mut self.len, (start, end, given));
        for unused in &mut self.runs[self.len..] {
            *unused = Span::default();
        }
    }
}

impl core::fmt::Display for KeptPlaces {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (i, run) in self.spans().iter().enumerate() {
            let comma = if i > 0 { "," } else { "" };
            write!(f, "{comma}{:x}:{:x}:{:x}", run.start, run.end, run.given)?;
        }
        Ok(())
    }
}

/// Text that is not a [`KeptPlaces`]' (more than 64 runs, runs out of order or
/// overlapping, a number that is not one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeptPlacesError;

impl core::fmt::Display for KeptPlacesError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(
            "not a log of places: up to 64 `start:end:given` runs in order, comma-separated",
        )
    }
}

impl core::error::Error for KeptPlacesError {}

impl core::str::FromStr for KeptPlaces {
    type Err = KeptPlacesError;

    fn from_str(text: &str) -> Result<Self, KeptPlacesError> {
        let mut places = Self::new();
        if text.is_empty() {
            return Ok(places);
        }
        for run in text.split(',') {
            let mut parts = run.split(':');
            let mut number = || parts.next().and_then(digits).ok_or(KeptPlacesError);
            let (start, end, given) = (number()?, number()?, number()?);
            let given = u64::try_from(given).map_err(|_| KeptPlacesError)?;
            if parts.next().is_some() {
                return Err(KeptPlacesError);
            }
            places.push(start, end, given)?;
        }
        Ok(places)
    }
}

/// Lowercase hexadecimal digits as a number (no sign, no spaces, no prefix), if it
/// fits.
fn digits(text: &str) -> Option<u128> {
    let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    if text.is_empty() || !text.bytes().all(hex) {
        return None;
    }
    u128::from_str_radix(text, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::{KeptPlaces, KeptPlacesError, KeptWord};
    use crate::admission::Admission;
    use crate::algorithm::gcra::Gcra;
    use crate::quota::Quota;

    /// 1,000 a second (T = 1 ms), a burst of 1,000.
    fn gcra() -> Gcra {
        Gcra::new(Quota::per_second(1_000).unwrap().with_burst(1_000).unwrap())
    }

    /// What `word` has left at `now`.
    fn left(word: &KeptWord, now: u64) -> u64 {
        crate::algorithm::Algorithm::decide(&gcra(), word.state, now, 1)
            .unwrap()
            .decision
            .remaining()
    }

    #[test]
    fn only_an_admission_of_units_is_kept_to_settle() {
        let g = Gcra::new(Quota::per_second(1).unwrap().with_burst(2).unwrap());
        let mut word = KeptWord::new(&g);
        assert!(
            word.check(&g, 0, 0).unwrap().1.is_none(),
            "no units, nothing to settle"
        );
        let (d, taken) = word.check(&g, 0, 2).unwrap();
        assert!(d.is_allowed() && taken.is_some_and(|a| a.cost() == 2));
        let (d, taken) = word.check(&g, 0, 1).unwrap();
        assert!(!d.is_allowed() && taken.is_none(), "refused: nothing taken");
    }

    #[test]
    fn settled_in_reverse_with_no_time_passing_a_word_is_its_twin() {
        let g = gcra();
        let (mut word, mut places) = (KeptWord::new(&g), KeptPlaces::new());
        let mut twin = KeptWord::new(&g);
        let now = 10_000_000;
        let mut taken = Vec::new();
        for _ in 0..16 {
            let noted = word.ledger;
            let a = word.check(&g, now, 10).unwrap().1.unwrap();
            let rebuilt =
                Admission::of_word(now, 10, a.before().unwrap(), a.after().unwrap(), noted);
            taken.push(rebuilt);
            twin.check(&g, now, 3).unwrap();
        }
        for a in taken.into_iter().rev() {
            word.settle_placed(&mut places, &g, a, 3, now).unwrap();
        }
        assert_eq!(left(&word, now), left(&twin, now));
        assert_eq!(
            left(&word, now),
            1_000 - 48 - 1,
            "48 used, and the one asked"
        );
        assert!(!places.is_empty(), "what was given back is logged");
        assert_eq!(
            places.to_string().split(',').count(),
            1,
            "adjacent places: one run"
        );
    }

    #[test]
    fn a_settlement_that_gives_nothing_back_logs_nothing() {
        let g = gcra();
        let (mut word, mut places) = (KeptWord::new(&g), KeptPlaces::new());
        let a = word.check(&g, 0, 10).unwrap().1.unwrap();
        word.settle_placed(&mut places, &g, a, 10, 0).unwrap();
        assert!(places.is_empty());
        // An exact undo moves nothing the ledger counts: nothing logged either.
        let b = word.check(&g, 0, 10).unwrap().1.unwrap();
        word.settle_placed(&mut places, &g, b, 0, 0).unwrap();
        assert!(places.is_empty() && word.ledger == 0);
    }

    #[test]
    fn places_beyond_two_to_the_sixty_four_keep_their_high_halves() {
        let mut places = KeptPlaces::new();
        let high = 5u128 << 64;
        places.record(high + 10, high + 20, 3);
        let words: Vec<u64> = places.to_words().collect();
        assert_eq!(words, [5, 10, 5, 20, 3]);
        assert_eq!(KeptPlaces::from_words(&words), Ok(places.clone()));
        assert_eq!(places.to_string(), "5000000000000000a:50000000000000014:3");
        assert_eq!(
            KeptPlacesError.to_string(),
            "not a log of places: up to 64 `start:end:given` runs in order, comma-separated"
        );
    }

    #[test]
    fn places_read_back_as_written_and_refuse_what_no_log_writes() {
        let mut places = KeptPlaces::new();
        assert_eq!(places.to_string(), "");
        assert_eq!("".parse(), Ok(places.clone()));
        places.record(10, 20, 3);
        places.record(40, 50, 4);
        places.record(20, 30, 5); // joins the run before it
        assert_eq!(places.to_string(), "a:1e:8,28:32:4");
        assert_eq!(places.to_string().parse(), Ok(places.clone()));
        let max = u128::MAX;
        assert!(format!("0:{max:x}:{:x}", u64::MAX)
            .parse::<KeptPlaces>()
            .is_ok());
        let too_many: Vec<String> = (0..65)
            .map(|k| format!("{:x}:{:x}:1", 2 * k, 2 * k + 1))
            .collect();
        for bad in [
            "1:2",
            "1:2:3:4",
            "2:1:3",
            "1:1:3",
            "5:9:1,1:3:1",
            "1:5:1,4:9:1",
            "+1:2:3",
            " 1:2:3",
            "1:2:-3",
            "1:2:3,",
            ",1:2:3",
            "1:2:10000000000000000",
            "1:100000000000000000000000000000000:3",
            "1:A:3",
            "1:0x5:3",
            "1:g:3",
            &too_many.join(","),
        ] {
            assert_eq!(bad.parse::<KeptPlaces>(), Err(KeptPlacesError), "{bad:?}");
        }
        assert!(too_many[..64].join(",").parse::<KeptPlaces>().is_ok());
        // As words, the same log; words no log writes are refused as text is.
        let words: Vec<u64> = places.to_words().collect();
        assert_eq!(words, [0, 10, 0, 30, 8, 0, 40, 0, 50, 4]);
        assert_eq!(KeptPlaces::from_words(&words), Ok(places));
        for bad in [
            &words[..4],
            &[0, 5, 0, 5, 1][..],
            &[0, 9, 0, 12, 1, 0, 1, 0, 3, 1][..],
        ] {
            assert_eq!(KeptPlaces::from_words(bad), Err(KeptPlacesError), "{bad:?}");
        }
    }
}
