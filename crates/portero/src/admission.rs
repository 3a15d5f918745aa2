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
//!    wrote ([`Admission::undo`]), the word goes back to what `X` found: `A` is `B`
//!    again, exactly. Checks only move a word forward, so the same word means no check
//!    since — unless a refund moved it back meanwhile: then a later check can write
//!    the very word `X` wrote (a bug an outside review found), so the undo also needs
//!    the limiter's count of refunds unchanged since `X` wrote (see rule 2).
//! 2. **Something since.** Each algorithm gives back what can still be `X`'s
//!    ([`Algorithm::refund`](crate::algorithm::Algorithm::refund)):
//!    - a schedule (GCRA, token bucket, leaky meter: the state is the instant the
//!      debt is paid off) gives back the part of `X`'s debt that lies after the
//!      refund's time: `min(n·T, W − now)`, where `W` is the instant `X`'s update
//!      wrote. Later admissions could have absorbed only debt that was already being
//!      paid off, so what lies ahead is still owed to `X`. **Shortfall:** at most the
//!      time between `X`'s admission and the refund (the part of `X`'s debt that
//!      drained meanwhile while later requests were queued behind it); none when the
//!      refund comes at `X`'s own time. Nothing but the undo when another refund has
//!      moved the word since `X` (it shifted `X`'s debt by an amount one word does not
//!      keep; each limiter counts such refunds, and `X` notes the count when it
//!      writes). And nothing while a booking's turn is still
//!      ahead (the word more than `B·T` past the refund's time, which no check can
//!      leave): a waiter booked behind `X` was told its instant, and the slot `X`
//!      freed before it cannot be handed to anyone without letting a start squeeze in
//!      next to that instant. So the bound holds for the instants requests actually
//!      start at, waits included.
//!    - a window count (fixed windows, calendar quotas, the sliding window counter)
//!      gives `X`'s units back to the window that counted them while it is still
//!      counted (the current or, for the sliding counter, the previous window), and
//!      nothing once it is gone: exact, since those windows do not move — except for
//!      a request that *opened* its window: where a window opens at its first
//!      request, the window lies where `X` put it, and an aligned window opened over
//!      the previous window's counts made checks dated back into that window (time
//!      going backwards) count in `X`'s; neither can be made as if `X` had never come,
//!      so such an opener gives nothing back once others came since. **Shortfall:**
//!      at most one request's units per window.
//!    - a queue ([`LeakyQueue`](crate::algorithm::leaky_bucket::LeakyQueue)) gives back nothing: the requests
//!      behind `X` were told when they leave, and the freed slot lies between them.
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
/// ```
/// use portero::{Quota, RateLimiter};
/// let limiter = RateLimiter::gcra(Quota::per_second(2)?);
/// let taken = limiter.acquire_at(0, 2)?;
/// assert!(taken.decision.is_allowed());
/// assert!(limiter.refund_at(&taken.admission.unwrap(), 0));
/// assert_eq!(limiter.peek_at(0, 1)?.remaining(), 1); // both units back
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    at: u64,
    cost: u64,
    /// The state word the admission found and the one it wrote, when known.
    word: Option<(u64, u64)>,
    /// How many refunds had moved the limiter's word before this admission wrote
    /// (see [`RefundCount`]); [`MOVED`] when that is not known, or when the refund
    /// rule found another refund moved the word since (so where this admission's debt
    /// ends is no longer what it wrote). One word, not two: an admission travels
    /// inside every check's answer.
    epoch: u64,
}

/// The epoch of an admission whose debt may have moved: a count never reaches it.
const MOVED: u64 = u64::MAX;

impl Admission {
    /// An admission known only by its time and cost (a store of your own that keeps
    /// no state word): refunds follow the "something since" rule, never the undo.
    pub const fn new(at: u64, cost: u64) -> Self {
        Self {
            at,
            cost,
            word: None,
            epoch: MOVED,
        }
    }

    /// An admission at `at` of `cost` units that turned the word `before` into `after`,
    /// after `epoch` refunds had moved it.
    pub(crate) const fn wrote(at: u64, cost: u64, before: u64, after: u64, epoch: u64) -> Self {
        Self {
            at,
            cost,
            word: Some((before, after)),
            epoch,
        }
    }

    /// Whether another refund may have moved the word since this admission wrote it
    /// (always, when that is not known): then where its debt ends is no longer what it
    /// wrote, and a schedule gives back nothing but the exact undo.
    pub const fn others_given_back(&self) -> bool {
        self.epoch == MOVED
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
        match self.word {
            Some((before, _)) => Some(before),
            None => None,
        }
    }

    /// The state word the admission wrote, if known.
    pub const fn after(&self) -> Option<u64> {
        match self.word {
            Some((_, after)) => Some(after),
            None => None,
        }
    }

    /// The word to restore if `state` still holds what this admission wrote: the word
    /// it found. Checks only ever move a word forward, so the same word means no check
    /// happened since; a refund that moved it (other than by an undo) can make the same
    /// word come back, which is why the limiters' own refunds also ask their count.
    pub const fn undo(&self, state: u64) -> Option<u64> {
        match self.word {
            Some((before, after)) if after == state => Some(before),
            _ => None,
        }
    }

    /// The state after giving this admission back at `now` (see the [module
    /// docs](self)), the algorithm's own refund being `refund`: the undo while nothing
    /// happened since, otherwise `refund` of what the limiter knows (an admission
    /// whose refund count no longer matches `refunds` reads as one whose debt moved).
    /// What [`Admission::give_back`] runs, beside the [`Algorithm`] trait.
    ///
    /// [`Algorithm`]: crate::algorithm::Algorithm
    pub(crate) fn give_back_with(
        &self,
        state: u64,
        now: u64,
        refunds: Option<u64>,
        refund: impl FnOnce(&Admission, u64) -> Option<u64>,
    ) -> Option<u64> {
        let mut seen = *self;
        if refunds != Some(self.epoch) {
            seen.epoch = MOVED;
        }
        let late = refund(&seen, now.max(self.at))?;
        Some(seen.exact_undo(state).unwrap_or(late))
    }

    /// Whether giving back at `state` with `refunds` counted is an exact undo (one
    /// that moves nothing the count must note).
    pub(crate) fn undoes(&self, state: u64, refunds: u64) -> bool {
        refunds == self.epoch && self.exact_undo(state).is_some()
    }

    /// The undo, but only while no refund moved the word since (counted): an earlier
    /// admission's refund and a later admission can put back the very word this one
    /// wrote, and undoing then would give back the later one's units.
    fn exact_undo(&self, state: u64) -> Option<u64> {
        if self.others_given_back() {
            return None;
        }
        self.undo(state)
    }
}

/// How many refunds have moved a limiter's word other than by an exact undo: each
/// admission notes the count before it writes, and a refund that finds it changed
/// knows that the debt it would give back may have moved (the instant the admission
/// wrote is then no longer where its debt ends), so a schedule gives back only an
/// exact undo. Refunds are rare next to checks, and checks never touch the count.
#[derive(Debug)]
pub(crate) struct RefundCount(crate::sync::AtomicU64);

impl RefundCount {
    /// No refund yet.
    pub(crate) fn new() -> Self {
        Self(crate::sync::AtomicU64::new(0))
    }

    /// The count now (read before an admission writes, and after a refund loads).
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.0.load(crate::sync::Ordering::Acquire)
    }

    /// Counts a refund that is about to move the word other than by an exact undo
    /// (before its compare-and-swap, so whoever sees its word sees the count too).
    pub(crate) fn moving(&self) {
        self.0.fetch_add(1, crate::sync::Ordering::AcqRel);
    }
}

/// A decision, and what gives its units back when it admitted something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    /// The answer.
    pub decision: crate::decision::Decision,
    /// `Some` when units were taken (an admission of a positive cost).
    pub admission: Option<Admission>,
}

/// The "something since" rule of a schedule (a word holding the instant its debt is
/// paid off, `span` = `B·T` the most debt a check may leave): give back the part of
/// the admission's `increment` of debt that lies after `now`, and never pull the word
/// below `now` (a word below `now` admits what one at `now` does, and less is all a
/// refund can lose by that).
///
/// Nothing when another refund moved the word since the admission (an earlier
/// admission's refund shifts this one's debt earlier by what it gave back, so the
/// instant this one wrote overstates what is still ahead), and nothing while the word
/// lies more than `span` after `now`: only a booking (a
/// reservation, a wait) leaves that much debt, and one whose turn is still ahead has
/// been told its instant, placed after the admission's slot. The slot freed before it
/// could only be used by starts that squeeze in before that turn, which one word
/// cannot tell apart from starts after it: so it stays unused until the bookings
/// ahead have started.
pub(crate) fn schedule_refund(
    state: u64,
    admission: &Admission,
    now: u64,
    increment: u64,
    span: u64,
) -> u64 {
    // Another refund moved the debt since: where this admission's ends is unknown.
    if admission.others_given_back() || state.saturating_sub(now) > span {
        return state;
    }
    // The instant the admission's own debt ended; without the word, the earliest it
    // can have been (no backlog ahead of it), which only gives back less.
    let wrote = admission
        .after()
        .unwrap_or(admission.at.saturating_add(increment));
    let ahead = increment.min(wrote.saturating_sub(now));
    state.saturating_sub(ahead).max(state.min(now))
}

/// [`schedule_refund`] for a schedule of `quota` (GCRA, the token bucket, the leaky
/// meter): the admission's cost times the emission interval, within the burst's span.
pub(crate) fn quota_refund(quota: &Quota, state: u64, admission: &Admission, now: u64) -> u64 {
    let increment = admission.cost().saturating_mul(quota.interval_nanos());
    schedule_refund(state, admission, now, increment, quota.capacity_nanos())
}
