//! Giving an admission back: what a check that took units wrote, and the one rule
//! by which every refund, cancel and drop returns them.
//!
//! # The contract
//!
//! A limiter `A` admits a request `X` and later gives it back; its twin `B` sees every
//! request `A` admitted except `X` (and except any other request given back). After
//! the refund, `A` must never admit a request that `B` would refuse, at any time and
//! any cost. Giving back *less* than `X` took is allowed; giving back more is an
//! over-admission.
//!
//! # The rule
//!
//! 1. **Nothing since.** While the state word still holds exactly what `X`'s own update
//!    wrote and no refund has moved the word since ([`Admission::undo`]), the word goes
//!    back to what `X` found: `A` is `B` again, exactly. Checks only move a word
//!    forward, so the same word means no check since — unless a refund moved it back
//!    meanwhile (then a later check can write the very word `X` wrote), which is why
//!    the undo also asks the word's refund ledger (below).
//! 2. **Something since.** Each algorithm gives back what can still be `X`'s
//!    ([`Algorithm::refund`](crate::algorithm::Algorithm::refund)):
//!    - a schedule (GCRA, token bucket, leaky meter: the state is the instant `TAT`
//!      the debt is paid off) is a work-conserving queue: taking `X` (its debt
//!      `w = n·T`) out of its past lowers today's `TAT` by the smaller of `w` and the
//!      lowest backlog `TAT(s) − s` since `X` came. Checks only push `TAT` forward;
//!      only refunds pull it back, and the ledger sums by how much (`R`). So for
//!      every `s` since `X` wrote `W`: `TAT(s) ≥ W − M`, where `M` is what refunds
//!      of slots *ahead* of `X` gave back since — `R_now − R_X`, less what the
//!      ledger's log of places (below) shows came from slots behind `X`, which moved
//!      the word but not `X`'s slot. The refund gives back
//!      `g = min(w, W − M − now)`, never below 0 and never pulling the word below
//!      `now`. **Exact** when the refund comes at `X`'s own time, in any order of
//!      refunds while the log holds their places (sixteen settled in reverse leave
//!      the twin; with `R` alone they kept 42 of 112 units); **shortfall** otherwise at most the time since `X`'s
//!      admission plus, where the log lost track (a place not known because a refund
//!      ran while `X` wrote, runs merged in a full log, a table's log taken over by
//!      another key), what refunds gave back since. Under load the shortfall
//!      is spent on the first refunds while the key's backlog is small; once the
//!      backlog exceeds what the in-flight refunds give back, each refund returns
//!      its whole debt (see `tests/tests/refund_load.rs`). And nothing while a
//!      booking's turn is still ahead (the word more than `B·T` past the refund's
//!      time, which no check can leave): a waiter booked behind `X` was told its
//!      instant, and the slot `X` freed before it cannot be handed to anyone without
//!      letting a start squeeze in next to that instant.
//!    - a window count (fixed windows, calendar quotas, the sliding window counter)
//!      gives `X`'s units back to the window that counted them while it is still
//!      counted (the current or, for the sliding counter, the previous window), and
//!      nothing once it is gone: exact, since those windows do not move — except for
//!      a request that *opened* its window once others came since. Where a window
//!      opens at its first request, the window lies where `X` put it: the twin's
//!      would have opened at the next request, which the word does not keep, and
//!      no placement of the window is safe against every such twin. So the opener is
//!      **kept**: the refund gives nothing back and says so (`refund` returns
//!      `false`), and the limiter stands exactly as the twin that saw `X`. An aligned
//!      window opened over the previous window's counts is kept the same way (checks
//!      dated back into that window, time going backwards, counted in `X`'s).
//!      **Shortfall:** at most one request's units per window.
//!
//!    A refund that gives nothing back keeps the request: the contract above then
//!    compares the limiter with the twin that saw `X`, which it is.
//!    - a queue ([`LeakyQueue`](crate::algorithm::leaky_bucket::LeakyQueue)) gives back nothing: the requests
//!      behind `X` were told when they leave, and the freed slot lies between them.
//!
//! # The ledger, and why refunds of one word take turns
//!
//! Each word has a refund ledger (`RefundLedger`: a limiter's own; in a keyed
//! table, one per few buckets, shared by the keys there — a neighbour's refund only
//! makes a refund here give back less). `R` is the total a refund moved a word back
//! by, other than by an exact undo; an admission notes it before it writes. A
//! refund reads `R` and compares and swaps the word under the ledger's lock, and
//! adds what it moved before it lets go: so no other refund can move the word
//! between its reading of `R` and its compare-and-swap (the race in which another
//! refund and a check put back the very word `X` wrote), and a check in between
//! fails the compare-and-swap (checks only move the word forward). Checks never
//! take the lock and never write the ledger.
//!
//! Beside the ledger, a short log of places: `V = TAT + R` never goes back (a check
//! moves `TAT` on; a refund moves `TAT` back and `R` on by as much), so an admission
//! that found `b`, wrote `a` and noted `R_X` holds the place `[b + R_X, a + R_X)`
//! among its word's admissions, and one admitted after it starts at or after its
//! end. A refund logs the place it gave back from; a later refund of `X` subtracts
//! what was given back from places starting at or after `X`'s end. An admission
//! knows its place only if no refund ran between its note and its write (the
//! ledger's turn, read before and after); otherwise it subtracts nothing. Runs of
//! adjacent places merge, and a full log merges its closest runs downward: the log
//! can only make a refund give back less than the places say.
//!
//! # Time
//!
//! The refund's time must be no earlier than any check the limiter applied since
//! `X`; a limiter refunding on its own clock reads it after it loads the word, which
//! guarantees that for a clock that never goes back. A refund dated earlier than a
//! check since by `δ` can give back up to `δ` of time debt too much; the time used is
//! never earlier than `X`'s own.

use crate::quota::Quota;

/// What one admission took and wrote, for giving it back (a stack whose later limit
/// refuses, a reservation cancelled, a request dropped while it waited).
///
/// An admission is one claim on the units it took: it is neither `Copy` nor `Clone`,
/// and a refund or a settlement consumes it, so it gives back at most once. A
/// [`Clock`](crate::clock::Clock) or an
/// [`Algorithm::refund`](crate::algorithm::Algorithm::refund) of your own must not
/// itself give back to the same limiter: refunds of one word take turns, and it
/// would wait for its own.
///
/// ```
/// use portero::{Quota, RateLimiter};
/// let limiter = RateLimiter::gcra(Quota::per_second(2)?);
/// let taken = limiter.acquire_at(0, 2)?;
/// assert!(taken.decision.is_allowed());
/// assert!(limiter.refund_at(taken.admission.unwrap(), 0));
/// assert_eq!(limiter.peek_at(0, 1)?.remaining(), 1); // both units back
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A second refund of the same units would leave the key more generous than if the
/// request had never come, so the compiler refuses both a second use and a copy:
///
/// ```compile_fail,E0599
/// use portero::{Quota, RateLimiter};
/// let limiter = RateLimiter::gcra(Quota::per_hour(10)?);
/// let admission = limiter.acquire_at(0, 3)?.admission.unwrap();
/// limiter.refund_at(admission.clone(), 0); // error: no method named `clone`
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// ```compile_fail,E0382
/// use portero::{Quota, RateLimiter};
/// let limiter = RateLimiter::gcra(Quota::per_hour(10)?);
/// let admission = limiter.acquire_at(0, 3)?.admission.unwrap();
/// limiter.refund_at(admission, 0);
/// limiter.refund_at(admission, 0); // error: use of moved value
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, PartialEq, Eq)]
pub struct Admission {
    at: u64,
    cost: u64,
    /// The state word the admission found and the one it wrote (known unless the
    /// ledger says [`NO_WORD`]).
    word: [u64; 2],
    /// What a refund knows of the word's ledger (see `RefundLedger`), in two words
    /// so that an admission stays small (it travels inside every check's answer):
    /// the total `R` noted before the admission wrote (`[4·high + 8, low]`, plus one
    /// for a [`part`](Admission::part), plus two when no refund ran while it was
    /// noted and written, so that its place is known: see
    /// [`refund_log`](crate::refund_log)); or, in the admission a refund hands to the
    /// algorithm, `[SEEN, moved]` — how far refunds of slots ahead of it moved the
    /// word since (`u64::MAX`: not known), `[SEEN_QUIET, 0]` when no refund moved it
    /// at all; or `[NO_WORD, _]`. The high half is never 0, which leaves
    /// `Option<Admission>` no larger.
    ledger: (core::num::NonZeroU64, u64),
    /// Which limiter's word (and which key's, in a table) took the units: only that
    /// word gives them back ([`ANY_ORIGIN`]: one rebuilt by its caller, which says).
    origin: u64,
}

/// An [`Admission`] of [`ANY_ORIGIN`], kept by whoever knows which limiter it came
/// from (a reservation holds its limiter): the same fields less the origin.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Unstamped {
    at: u64,
    cost: u64,
    word: [u64; 2],
    ledger: (core::num::NonZeroU64, u64),
}

impl Unstamped {
    /// The admission it was ([`ANY_ORIGIN`]).
    pub(crate) const fn admission(&self) -> Admission {
        Admission {
            at: self.at,
            cost: self.cost,
            word: self.word,
            ledger: self.ledger,
            origin: ANY_ORIGIN,
        }
    }

    /// When it was taken (what a waiting future compares its turn with).
    #[cfg(feature = "tokio")]
    pub(crate) const fn at(&self) -> u64 {
        self.at
    }
}

/// The origin of an admission a caller made or rebuilt itself ([`Admission::new`],
/// [`Admission::of_word`]): its store vouches for the word it settles on.
const ANY_ORIGIN: u64 = 0;

/// The origin of what the word of ledger `ledger` (a limiter's, or a table's
/// share) holds for the key `tag` (0 for a limiter's one word): never
/// [`ANY_ORIGIN`].
pub(crate) const fn origin_of(ledger: u64, tag: u64) -> u64 {
    // A multiply spreads the ledger's number over the bits the tag fills, so two
    // tables' keys collide only by chance (2^-64).
    let mixed = ledger.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ tag;
    if mixed == ANY_ORIGIN {
        1
    } else {
        mixed
    }
}

/// The ledger's high half in an admission without a word.
const NO_WORD: u64 = 1;
/// The ledger's high half in an admission a refund has read the ledger for.
const SEEN: u64 = 2;
/// [`SEEN`], for a part of an admission whose request stays ([`Admission::part`]).
const SEEN_PART: u64 = 3;
/// [`SEEN`], when no refund moved the word since the admission wrote it.
const SEEN_QUIET: u64 = 4;
/// [`SEEN_QUIET`], for a part of an admission whose request stays.
const SEEN_QUIET_PART: u64 = 5;
/// What a noted total's high half is stored above, times four: the lowest bit says
/// whether this is a part ([`Admission::part`]), the next whether its place is known.
/// (A multiple of four, so a tag's two lowest bits are its flags.)
const NOTED: u64 = 8;
/// The bit of every tag but [`NO_WORD`] saying the admission is a part whose request
/// stays: [`SEEN_PART`] is `SEEN | PART`, [`SEEN_QUIET_PART`] is `SEEN_QUIET | PART`.
const PART: u64 = 1;
/// The bit of a noted tag saying the admission's place is known.
const PLACED: u64 = 2;
/// How far other refunds moved a word when no ledger says: as far as can be.
const UNKNOWN: u64 = u64::MAX;

/// The ledger pair `(tag, low)`; a tag is never 0.
const fn tagged(tag: u64, low: u64) -> (core::num::NonZeroU64, u64) {
    match core::num::NonZeroU64::new(tag) {
        Some(tag) => (tag, low),
        None => (core::num::NonZeroU64::MIN, UNKNOWN),
    }
}

impl Admission {
    /// An admission known only by its time and cost (a store of your own that keeps
    /// no state word): refunds follow the "something since" rule, never the undo.
    pub const fn new(at: u64, cost: u64) -> Self {
        Self {
            at,
            cost,
            word: [0, 0],
            ledger: tagged(NO_WORD, UNKNOWN),
            origin: ANY_ORIGIN,
        }
    }

    /// An exact log's admission at `at` of `cost` entries, its shard having dropped
    /// `drops` keys before it (kept where a word would be: a log has none).
    pub(crate) const fn of_log(at: u64, cost: u64, drops: u64) -> Self {
        Self {
            word: [drops, 0],
            ..Self::new(at, cost)
        }
    }

    /// The drops an exact log's admission noted ([`of_log`](Self::of_log)).
    pub(crate) const fn log_drops(&self) -> u64 {
        self.word[0]
    }

    /// This admission, taken from the word whose origin is `origin`
    /// ([`origin_of`]).
    pub(crate) const fn taken_from(self, origin: u64) -> Self {
        Self { origin, ..self }
    }

    /// Whether a limiter stamped this admission with its origin (not one its caller
    /// made or rebuilt).
    pub(crate) const fn is_stamped(&self) -> bool {
        self.origin != ANY_ORIGIN
    }

    /// Whether the word whose origin is `origin` may give this admission back: the
    /// one it was taken from (or any, for one its caller rebuilt).
    pub(crate) const fn is_from(&self, origin: u64) -> bool {
        self.origin == ANY_ORIGIN || self.origin == origin
    }

    /// An admission at `at` of `cost` units that turned the word `before` into `after`,
    /// when the word's refund ledger stood at `noted`: how a store that keeps its words
    /// and their ledgers itself rebuilds one it stored, to settle it
    /// ([`KeptWord`](crate::algorithm::kept::KeptWord)).
    pub const fn of_word(at: u64, cost: u64, before: u64, after: u64, noted: u128) -> Self {
        // A total this large (2^128 ns given back) cannot be reached; read it as
        // unknown.
        let high = (noted >> 64) as u64;
        let ledger = match high.checked_mul(4) {
            Some(four) if four <= u64::MAX - NOTED - 3 => tagged(four + NOTED, noted as u64),
            _ => tagged(SEEN, UNKNOWN),
        };
        Self {
            at,
            cost,
            word: [before, after],
            ledger,
            origin: ANY_ORIGIN,
        }
    }

    /// This admission, its place among its word's admissions known (no refund of the
    /// word ran while its total was noted and the word written: `known`).
    pub(crate) const fn placed_if(self, known: bool) -> Self {
        let ledger = match self.ledger {
            (tag, low) if known && tag.get() >= NOTED => tagged(tag.get() | PLACED, low),
            other => other,
        };
        Self { ledger, ..self }
    }

    /// The admission without its origin (one a caller holds for its own limiter, as a
    /// reservation does: one word less to move).
    pub(crate) const fn unstamped(self) -> Unstamped {
        Unstamped {
            at: self.at,
            cost: self.cost,
            word: self.word,
            ledger: self.ledger,
        }
    }

    /// The noted total of the word's ledger, if the admission noted one.
    pub(crate) const fn noted_total(&self) -> Option<u128> {
        match self.ledger {
            // The flags below bit 2; the high half above (disjoint halves: `+`).
            (tag, low) if tag.get() >= NOTED => {
                Some(((((tag.get() - NOTED) >> 2) as u128) << 64) + low as u128)
            }
            _ => None,
        }
    }

    /// Where the admission lies among its word's admissions (see
    /// [`refund_log`](crate::refund_log)): the word it found and the one it wrote,
    /// plus the noted total, and whether that place is known exactly (no refund ran
    /// between the note and the write; otherwise it may lie lower).
    pub(crate) const fn place(&self) -> Option<(u128, u128, bool)> {
        match (self.noted_total(), self.word()) {
            (Some(noted), Some((before, after))) => Some((
                noted + before as u128,
                noted + after as u128,
                self.ledger.0.get() & PLACED != 0,
            )),
            _ => None,
        }
    }

    /// This admission's request settled for less than it took: giving the part back
    /// returns at most `units` (of [`cost`](Self::cost)) by the same rule, never by
    /// the exact undo, and keeps the request — so a window's opener gives its part
    /// back too (the twin that was charged the real cost at the start opened the
    /// window at the same place). `units` above the cost are the cost. It consumes
    /// the admission: a part is the admission's one claim (two parts of one admission
    /// gave back more than it took).
    ///
    /// ```
    /// use portero::{Quota, RateLimiter};
    /// let limiter = RateLimiter::gcra(Quota::per_second(10)?);
    /// let taken = limiter.acquire_at(0, 8)?.admission.unwrap(); // the estimate
    /// assert!(limiter.refund_at(taken.part(5), 0)); // it used 3
    /// assert!(limiter.peek_at(0, 7)?.is_allowed() && !limiter.peek_at(0, 8)?.is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// Two parts of one admission would give back more than it took (found by an
    /// outside harness), so a part consumes it:
    ///
    /// ```compile_fail,E0382
    /// use portero::{Quota, RateLimiter};
    /// let limiter = RateLimiter::gcra(Quota::per_second(10)?);
    /// let taken = limiter.acquire_at(0, 8)?.admission.unwrap();
    /// limiter.refund_at(taken.part(5), 0);
    /// limiter.refund_at(taken.part(5), 0); // error: use of moved value
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub const fn part(self, units: u64) -> Self {
        let cost = if units < self.cost { units } else { self.cost };
        // Every tag's part is the tag with `PART` set (`NO_WORD` has it already).
        let (tag, low) = self.ledger;
        Self {
            cost,
            ledger: tagged(tag.get() | PART, low),
            ..self
        }
    }

    /// What settling this admission at its real cost `real` asks of its limiter: the
    /// units above the estimate to charge, or what to give back below it — a part,
    /// the request kept, or the whole admission for a real cost of 0 (a refund, a
    /// window's opener kept by its rule).
    pub(crate) fn settled_at(self, real: u64) -> Settlement {
        match real {
            r if r > self.cost => Settlement::Charge(r - self.cost),
            r if r == self.cost => Settlement::Kept,
            0 => Settlement::GiveBack(self),
            r => {
                let back = self.cost - r;
                Settlement::GiveBack(self.part(back))
            }
        }
    }

    /// Whether this is a [`part`](Self::part) of an admission whose request stays.
    pub const fn keeps_request(&self) -> bool {
        let tag = self.ledger.0.get();
        tag != NO_WORD && tag & PART == PART
    }

    /// Whether another refund may have moved the word back since this admission wrote
    /// it (always, when that is not known): then a schedule gives back at most what
    /// the ledger says can still lie ahead, and never the exact undo.
    pub const fn others_given_back(&self) -> bool {
        !matches!(self.ledger.0.get(), SEEN_QUIET | SEEN_QUIET_PART)
    }

    /// How far (in the state word's units: nanoseconds of debt for a schedule) other
    /// refunds moved this admission's slot back since it wrote its word — refunds of
    /// slots ahead of it, as the word's refund ledger and its log tell a refund in
    /// progress (a refund of a slot behind it moved the word, not the slot); `None`
    /// when that is not known (an admission not being given back by its limiter, or
    /// one without a word).
    pub const fn moved_since(&self) -> Option<u64> {
        match self.ledger {
            (tag, moved)
                if matches!(tag.get(), SEEN | SEEN_PART | SEEN_QUIET | SEEN_QUIET_PART)
                    && moved != UNKNOWN =>
            {
                Some(moved)
            }
            _ => None,
        }
    }

    /// The state word the admission found and the one it wrote, if known.
    const fn word(&self) -> Option<(u64, u64)> {
        match self.ledger.0.get() {
            NO_WORD => None,
            _ => Some((self.word[0], self.word[1])),
        }
    }

    /// When the units were taken (ns, on the limiter's axis; for the exact log, the
    /// time the entries were recorded at).
    pub const fn at(&self) -> u64 {
        self.at
    }

    /// The units taken.
    pub const fn cost(&self) -> u64 {
        self.cost
    }

    /// The state word the admission found, if known.
    pub const fn before(&self) -> Option<u64> {
        match self.word() {
            Some((before, _)) => Some(before),
            None => None,
        }
    }

    /// The state word the admission wrote, if known.
    pub const fn after(&self) -> Option<u64> {
        match self.word() {
            Some((_, after)) => Some(after),
            None => None,
        }
    }

    /// The word to restore if `state` still holds what this admission wrote: the word
    /// it found. Checks only ever move a word forward, so the same word means no check
    /// happened since; a refund that moved it (other than by an undo) can make the same
    /// word come back, which is why the limiters' own refunds also ask their ledger.
    pub const fn undo(&self, state: u64) -> Option<u64> {
        match self.word() {
            Some((before, after)) if after == state => Some(before),
            _ => None,
        }
    }

    /// This admission as a refund sees it with its word's ledger as `seen` tells
    /// (`None`: no ledger): how far refunds of slots ahead of it moved the word since
    /// it wrote — what refunds gave back since, less what the log shows lay behind.
    fn seen_at(&self, seen: Option<Seen>) -> Self {
        let (quiet, moved) = match (self.noted_total(), seen) {
            // A total below the noted one cannot happen; read it as unknown.
            (Some(noted), Some(seen)) => match seen.total.checked_sub(noted) {
                Some(0) => (true, 0),
                // What lay behind was given back since the note, so within `d`: a log
                // claiming more is not this word's (a kept log damaged or made up)
                // and is not read (found by an outside harness: it gave back more).
                Some(d) => match d.checked_sub(seen.behind).unwrap_or(d) {
                    ahead if ahead < UNKNOWN as u128 => (false, ahead as u64),
                    _ => (false, UNKNOWN),
                },
                None => (false, UNKNOWN),
            },
            _ => (false, UNKNOWN),
        };
        let ledger = match self.ledger.0.get() {
            NO_WORD => self.ledger,
            _ if self.keeps_request() && quiet => tagged(SEEN_QUIET_PART, 0),
            _ if self.keeps_request() => tagged(SEEN_PART, moved),
            _ if quiet => tagged(SEEN_QUIET, 0),
            _ => tagged(SEEN, moved),
        };
        Self { ledger, ..*self }
    }

    /// The state after giving this admission back at `now` (see the [module
    /// docs](self)), the algorithm's own refund being `refund`: the undo while nothing
    /// happened since, otherwise `refund` of what the ledger tells (`ledger`).
    /// What [`Admission::give_back`] runs, beside the [`Algorithm`] trait. The second
    /// value says whether it is the exact undo (which moves nothing the ledger
    /// counts).
    ///
    /// [`Algorithm`]: crate::algorithm::Algorithm
    pub(crate) fn give_back_with(
        &self,
        state: u64,
        now: u64,
        ledger: Option<Seen>,
        refund: impl FnOnce(&Admission, u64) -> Option<u64>,
    ) -> Option<(u64, bool)> {
        let seen = self.seen_at(ledger);
        let late = refund(&seen, now.max(self.at))?;
        Some(match seen.exact_undo(state) {
            Some(undone) => (undone, true),
            None => (late, false),
        })
    }

    /// The undo, but only while no refund moved the word since: an earlier
    /// admission's refund and a later admission can put back the very word this one
    /// wrote, and undoing then would give back the later one's units.
    fn exact_undo(&self, state: u64) -> Option<u64> {
        // A part is not the whole: the word it found is not the word to restore.
        if self.others_given_back() || self.keeps_request() {
            return None;
        }
        self.undo(state)
    }
}

/// What a refund in progress reads of its word's ledger: the total given back, and
/// what the log shows was given back behind the admission (0 when its place is not
/// known exactly).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seen {
    pub(crate) total: u128,
    pub(crate) behind: u128,
}

impl Seen {
    /// The total alone (nothing known to lie behind).
    #[cfg(test)]
    pub(crate) const fn total(total: u128) -> Self {
        Self { total, behind: 0 }
    }
}

/// What a settlement asks of a limiter ([`Admission::settled_at`]).
pub(crate) enum Settlement {
    /// Charge these units into debt.
    Charge(u64),
    /// Give this (the admission, or a part of it) back by the refund rule.
    GiveBack(Admission),
    /// The estimate was the real cost.
    Kept,
}

/// A decision, and what gives its units back when it admitted something.
#[derive(Debug, PartialEq, Eq)]
pub struct Acquired {
    /// The answer.
    pub decision: crate::decision::Decision,
    /// `Some` when units were taken (an admission of a positive cost).
    pub admission: Option<Admission>,
}

/// The "something since" rule of a schedule (a word holding the instant its debt is
/// paid off, `span` = `B·T` the most debt a check may leave): give back the part of
/// the admission's `increment` of debt that must still lie after `now` — what it
/// wrote, less what other refunds moved the word back by since (`W − (R_now − R_X)`
/// in the module docs) — and never pull the word below `now` (a word below `now`
/// admits what one at `now` does, and less is all a refund can lose by that).
///
/// Nothing when the ledger does not say how far others moved the word, and nothing
/// while the word lies more than `span` after `now`: only a booking (a reservation, a
/// wait) leaves that much debt, and one whose turn is still ahead has been told its
/// instant, placed after the admission's slot. The slot freed before it could only
/// be used by starts that squeeze in before that turn, which one word cannot tell
/// apart from starts after it: so it stays unused until the bookings ahead have
/// started.
pub(crate) fn schedule_refund(
    state: u64,
    admission: &Admission,
    now: u64,
    increment: u64,
    span: u64,
) -> u64 {
    let Some(moved) = admission.moved_since() else {
        return state;
    };
    if state.saturating_sub(now) > span {
        return state;
    }
    // The instant the admission's own debt ended (an admission the ledger speaks
    // for has its word).
    let Some(wrote) = admission.after() else {
        return state;
    };
    let still_ahead = wrote.saturating_sub(moved).saturating_sub(now);
    let ahead = increment.min(still_ahead);
    state.saturating_sub(ahead).max(state.min(now))
}

/// The most debt a charge leaves a schedule with, past `now`: 2^62 ns (146 years),
/// so a word stays below `2^63 + 2^62` as every check's arithmetic assumes.
pub(crate) const MAX_DEBT_NANOS: u64 = 1 << 62;

/// A schedule of `quota` (GCRA, the token bucket, the leaky meter and queue) after
/// taking `cost` units at `now` whether or not they fit: the word moves on by
/// `cost·T` from where it stands (or from `now`, if it is paid off), into debt past
/// the burst, up to [`MAX_DEBT_NANOS`] past `now`. Later checks wait the debt out,
/// their `retry_after` exact as ever.
pub(crate) fn quota_charge(quota: &Quota, state: u64, now: u64, cost: u64) -> u64 {
    let increment = cost.saturating_mul(quota.interval_nanos());
    state
        .max(now)
        .saturating_add(increment)
        .min(now.saturating_add(MAX_DEBT_NANOS))
        .max(state)
}

/// [`schedule_refund`] for a schedule of `quota` (GCRA, the token bucket, the leaky
/// meter): the admission's cost times the emission interval, within the burst's span.
pub(crate) fn quota_refund(quota: &Quota, state: u64, admission: &Admission, now: u64) -> u64 {
    let increment = admission.cost().saturating_mul(quota.interval_nanos());
    schedule_refund(state, admission, now, increment, quota.capacity_nanos())
}

#[cfg(test)]
mod tests;
