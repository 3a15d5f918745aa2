//! Waits in line (feature `tokio`): `RateLimiter::until_ready*`,
//! `SlidingLog::until_ready_within` and `KeyedLimiter::until_key_ready`; the rule they
//! keep is stated in the [module docs](super).

use crate::wait_line::{InLine, WaitLine};
use core::hash::Hash;
use core::time::Duration;

use crate::algorithm::limiter::RateLimiter;
use crate::algorithm::sliding_log::SlidingLog;
use crate::algorithm::Algorithm;
use crate::clock::Clock;
use crate::decision::{CheckError, Decision};
use crate::keyed::limiter::KeyedLimiter;
use crate::wait::keyed::WaitError;
use crate::wait::reserve::wait_cap;
use crate::wait::reserve::ReserveError;

/// A limit that can be waited on in line (feature `tokio`): checked and peeked now,
/// on its own clock. Implemented by [`RateLimiter`] (every one-word algorithm) and
/// [`SlidingLog`]; what `portero_http::ThrottleLayer` waits on.
pub trait Waitable: Send + Sync {
    /// Decides `cost` units now (the limit's clock), taking them if admitted.
    fn check_now(&self, cost: u64) -> Result<Decision, CheckError>;
    /// What [`check_now`](Self::check_now) would answer, taking nothing.
    fn peek_now(&self, cost: u64) -> Result<Decision, CheckError>;
    /// The most units one check may cost.
    fn most(&self) -> u64;
    /// The limit's line of waiters.
    fn line(&self) -> &WaitLine;
    /// How long until `units` (possibly more than one check may cost: the waiters in
    /// line and a newcomer) could all have been admitted, at the soonest. The default:
    /// the wait for as many as one check may cost (a lower bound).
    fn soonest(&self, units: u64) -> Result<Duration, CheckError> {
        Ok(self.peek_now(units.min(self.most()))?.retry_after())
    }
}

impl<A: Algorithm + Send + Sync, C: Clock + Send + Sync> Waitable for RateLimiter<A, C> {
    #[inline]
    fn check_now(&self, cost: u64) -> Result<Decision, CheckError> {
        self.check_at(self.clock().now(), cost)
    }
    fn peek_now(&self, cost: u64) -> Result<Decision, CheckError> {
        self.peek_at(self.clock().now(), cost)
    }
    fn most(&self) -> u64 {
        self.algorithm().capacity()
    }
    #[inline]
    fn line(&self) -> &WaitLine {
        &self.line
    }
    /// A schedule (GCRA) says exactly: the instant `units` more conform.
    fn soonest(&self, units: u64) -> Result<Duration, CheckError> {
        let now = self.clock().now();
        let capped = units.min(self.most());
        let d = self.peek_at(now, capped)?;
        match self.algorithm().book(self.state_word(), now, units) {
            Some((ready_at, _)) => Ok(Duration::from_nanos(ready_at.saturating_sub(now))),
            None => Ok(d.retry_after()),
        }
    }
}

impl<C: Clock + Send + Sync> Waitable for SlidingLog<C> {
    fn check_now(&self, cost: u64) -> Result<Decision, CheckError> {
        self.check_n(cost)
    }
    fn peek_now(&self, cost: u64) -> Result<Decision, CheckError> {
        self.peek_at(self.clock().now(), cost)
    }
    fn most(&self) -> u64 {
        self.limit()
    }
    fn line(&self) -> &WaitLine {
        self.line()
    }
}

/// Waits in `limit`'s line until `cost` units are admitted, at most `max_wait` in all
/// (see the [module docs](super)); a waiter that had to wait also waits a random part
/// of `jitter` after its admission. The admission's decision, or why there is none: a
/// cost that can never fit (at once), or a wait past `max_wait` (at once when the line
/// and the limiter say so already, else when it would be; nothing is taken either way).
///
/// The future's first poll is one check when nobody is in line (where most waits end:
/// no state machine runs, and nothing is allocated); a wait that must queue runs the
/// line's loop, in a box.
pub fn until_admitted<W: Waitable + ?Sized>(
    limit: &W,
    cost: u64,
    max_wait: Duration,
    jitter: Duration,
) -> UntilAdmitted<'_, W> {
    UntilAdmitted {
        limit,
        cost,
        max_wait,
        jitter,
        answer: core::marker::PhantomData,
        queued: None,
    }
}

/// What a wait answers when admitted (`T` of [`UntilAdmitted`]): the admission's
/// [`Decision`], or nothing (`()`). Sealed: a type parameter, so that the answer is
/// made in the caller's own code (a function pointer in the future cost a plain loop
/// of waits a call it could not inline).
pub trait WaitAnswer: sealed::Sealed {
    /// The answer for the admission `decision`.
    fn of(decision: Decision) -> Self;
}

impl WaitAnswer for Decision {
    #[inline]
    fn of(decision: Decision) -> Self {
        decision
    }
}

impl WaitAnswer for () {
    #[inline]
    fn of(_: Decision) -> Self {}
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Decision {}
    impl Sealed for () {}
}

/// A wait in line ([`until_admitted`], `RateLimiter::until_ready*`): what the
/// admission gave (`T`: its [`Decision`], or nothing), or why there is none.
#[must_use = "a wait does nothing until awaited"]
pub struct UntilAdmitted<'a, W: ?Sized, T = Decision> {
    limit: &'a W,
    cost: u64,
    max_wait: Duration,
    jitter: Duration,
    answer: core::marker::PhantomData<fn() -> T>,
    // The line's loop, once the first check found the limit refusing or a line ahead.
    queued: Option<Queued<'a>>,
}

type Queued<'a> = core::pin::Pin<
    Box<dyn core::future::Future<Output = Result<Decision, ReserveError>> + Send + 'a>,
>;

impl<'a, W: Waitable + ?Sized, T> UntilAdmitted<'a, W, T> {
    /// The same wait, answering `U` when admitted.
    fn answering<U: WaitAnswer>(self) -> UntilAdmitted<'a, W, U> {
        UntilAdmitted {
            limit: self.limit,
            cost: self.cost,
            max_wait: self.max_wait,
            jitter: self.jitter,
            answer: core::marker::PhantomData,
            queued: None,
        }
    }
}

impl<W: Waitable + ?Sized, T: WaitAnswer> core::future::Future for UntilAdmitted<'_, W, T> {
    type Output = Result<T, ReserveError>;

    #[inline]
    fn poll(
        mut self: core::pin::Pin<&mut Self>,
        cx: &mut core::task::Context<'_>,
    ) -> core::task::Poll<Self::Output> {
        use core::task::Poll;
        let this = &mut *self;
        if this.queued.is_none() {
            // Nobody in line: one check, and most waits end here.
            if this.limit.line().waiting() == 0 {
                match this.limit.check_now(this.cost) {
                    Err(e) => return Poll::Ready(Err(ReserveError::Check(e))),
                    Ok(d) if d.is_allowed() => return Poll::Ready(Ok(T::of(d))),
                    Ok(_) => {}
                }
            }
            this.queued = Some(Box::pin(in_line(
                this.limit,
                this.cost,
                this.max_wait,
                this.jitter,
            )));
        }
        match this.queued.as_mut().map(|q| q.as_mut().poll(cx)) {
            Some(Poll::Ready(answer)) => Poll::Ready(answer.map(T::of)),
            _ => Poll::Pending,
        }
    }
}

impl<W: ?Sized, T> core::fmt::Debug for UntilAdmitted<'_, W, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("UntilAdmitted")
            .field("cost", &self.cost)
            .field("queued", &self.queued.is_some())
            .finish_non_exhaustive()
    }
}

/// The line's loop: past `max_wait` already, or joined and waited for the head, then
/// checks until admitted (see [`until_admitted`]).
async fn in_line<W: Waitable + ?Sized>(
    limit: &W,
    cost: u64,
    max_wait: Duration,
    jitter: Duration,
) -> Result<Decision, ReserveError> {
    let line = limit.line();
    // Past the fast path: join the line.
    let max_wait = Duration::from_nanos(wait_cap(max_wait));
    let started = tokio::time::Instant::now();
    // Past `max_wait` already: when the units ahead in line and these could all have
    // been admitted, at the soonest.
    let ahead = line.waiting();
    let soonest = limit
        .soonest(ahead.saturating_add(cost))
        .map_err(ReserveError::Check)?;
    if soonest > max_wait {
        return Err(ReserveError::TooLong { wait: soonest });
    }
    let in_line = InLine::join(line, cost);
    let head = match tokio::time::timeout(max_wait, line.head()).await {
        Ok(head) => head,
        Err(_) => {
            return Err(ReserveError::TooLong {
                wait: started.elapsed(),
            })
        }
    };
    loop {
        let d = limit.check_now(cost).map_err(ReserveError::Check)?;
        if d.is_allowed() {
            // Out of the line before the jitter: the next waiter's turn is not late.
            drop((head, in_line));
            if !jitter.is_zero() {
                let mut seed =
                    started.elapsed().as_nanos() as u64 ^ (line as *const WaitLine as u64);
                tokio::time::sleep(full_jitter(jitter, &mut seed)).await;
            }
            return Ok(d);
        }
        let wait = started.elapsed().saturating_add(d.retry_after());
        if wait > max_wait {
            return Err(ReserveError::TooLong { wait });
        }
        // At least a microsecond: a refusal always names a later instant.
        tokio::time::sleep(d.retry_after().max(Duration::from_micros(1))).await;
    }
}

impl<A: Algorithm + Send + Sync, C: Clock + Send + Sync> RateLimiter<A, C> {
    /// Waits until one unit is admitted: [`until_ready_n`](Self::until_ready_n)`(1)`.
    pub fn until_ready(&self) -> UntilAdmitted<'_, Self, ()> {
        self.until_ready_with_jitter(1, Duration::ZERO)
    }

    /// Waits in line until `cost` units are admitted, however long that is; a cost
    /// that can never fit (above the capacity) is an error at once, waiting nothing.
    ///
    /// # Bound: first come, first served, nothing taken until admitted
    ///
    /// Waiters stand in one line (see the [module docs](crate::wait)): the one at its
    /// head checks when it wakes and sleeps the refusal's `retry_after` between
    /// checks. So on GCRA a waiter of `n` units that asks when the limiter owes `b`
    /// units (`⌈(TAT − ask) / T⌉`: what was admitted and has not refilled yet) and
    /// finds `u` units waiting in line ahead of it is admitted at most
    /// `(b + u + n − B)⁺ · T` after it asked, plus how late the runtime's timer wakes
    /// it (a millisecond or two on tokio), unless checks outside the line take units
    /// meanwhile. `N` tasks asking for one unit each at once from a full GCRA limiter
    /// are admitted `B` at once, then the `k`-th (`k > B`: `b = B`, `u = k − B − 1`)
    /// exactly `(k − B) · T` later. A wait dropped anywhere in the line took
    /// nothing and leaves no turn unused: the next waiter moves up. And every unit is
    /// checked at the instant it is used, so the limiter's bound holds for real start
    /// times (never more than `B + t / T` in any interval `t` for GCRA).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), portero::ReserveError> {
    /// use std::time::Duration;
    /// use portero::{Quota, RateLimiter};
    ///
    /// let provider = RateLimiter::gcra(Quota::per_second(100).unwrap());
    /// provider.until_ready_n(5).await?; // within the burst: at once
    /// assert!(provider.until_ready_n(101).await.is_err()); // can never fit
    /// # Ok(()) }
    /// ```
    pub fn until_ready_n(&self, cost: u64) -> UntilAdmitted<'_, Self, ()> {
        self.until_ready_with_jitter(cost, Duration::ZERO)
    }

    /// [`until_ready_n`](Self::until_ready_n), at most `max_wait` in all: the
    /// admission's decision, or [`ReserveError::TooLong`] (at once when the line and
    /// the limiter already say the units cannot fit in time; nothing is taken).
    pub async fn until_ready_within(
        &self,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Decision, ReserveError> {
        until_admitted(self, cost, max_wait, Duration::ZERO).await
    }

    /// [`until_ready_n`](Self::until_ready_n), and a waiter that has to wait at all
    /// also waits a uniformly random part of `jitter` after its admission ("full
    /// jitter": tasks admitted one after another do not all call the dependency at
    /// the same instant); each waiter is late by at most `jitter`.
    pub fn until_ready_with_jitter(
        &self,
        cost: u64,
        jitter: Duration,
    ) -> UntilAdmitted<'_, Self, ()> {
        until_admitted(self, cost, Duration::MAX, jitter).answering()
    }
}

impl<C: Clock + Send + Sync> SlidingLog<C> {
    /// Waits in line until `cost` units fit the log, at most `max_wait` in all (see
    /// the [module docs](crate::wait)): every start is checked against the log at the
    /// instant it happens, so no window `W` of the clock's time ever holds more than
    /// `N` starts — what a provider that allows "N per W" enforces.
    pub async fn until_ready_within(
        &self,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Decision, ReserveError> {
        until_admitted(self, cost, max_wait, Duration::ZERO).await
    }
}

/// Waiting on a keyed limiter. For an algorithm that books ([`Algorithm::book`]:
/// GCRA, or an [`AnyAlgorithm`](crate::algorithm::any::AnyAlgorithm) holding it) the wait books its
/// key's turn in the key's own word ([`KeyedLimiter::reserve_key_at`]): waiters of one
/// key are served first come, first served, with the bound of
/// [`RateLimiter::until_ready_n`] per key. Unlike the direct limiter's line, a keyed
/// wait holds its booking while it sleeps (a line per key would be memory per key):
/// dropped while a later booking of its key is still to start, its turn stays unused —
/// at most the dropped wait's units, never an over-admission — and it gives its units
/// back when it was the last. Other algorithms retry: each try takes
/// nothing unless it is admitted, and between tries it sleeps the refusal's own
/// `retry_after` (never polling faster than the limiter can admit) plus, if asked, a
/// random part of `jitter`; there is no order among those waiters, so one can lose
/// every try to others and is bounded only by its `max_wait` (it then fails with
/// [`WaitError::TooLong`], never waits past it).
impl<K: Hash + ?Sized, A: Algorithm + Copy, C: Clock> KeyedLimiter<K, A, C> {
    /// Waits until `cost` units of `key` are admitted, at most `max_wait` in all;
    /// the admission, or why it could not be (a cost that can never fit is an error at
    /// once; a full table or a turn past `max_wait` too). A booking waiter that has to
    /// wait also waits a random part of `jitter` past its turn (never past
    /// `max_wait`).
    ///
    /// ```
    /// # async fn demo() {
    /// use std::time::Duration;
    /// use portero::{Gcra, KeyedLimiter, Quota};
    ///
    /// let per_tenant = KeyedLimiter::new(Gcra::new(Quota::per_second(100).unwrap()), 1_000);
    /// let d = per_tenant
    ///     .until_key_ready(&"acme", 1, Duration::from_secs(5), Duration::from_millis(10))
    ///     .await
    ///     .unwrap();
    /// assert!(d.is_allowed());
    /// # }
    /// ```
    pub async fn until_key_ready(
        &self,
        key: &K,
        cost: u64,
        max_wait: Duration,
        jitter: Duration,
    ) -> Result<Decision, WaitError> {
        let mut seed = self.clock().now() ^ (key as *const K as *const u8 as u64);
        let now = self.clock().now();
        if let Some(booked) = self.book_key(key, now, cost, wait_cap(max_wait)) {
            let turn = booked?;
            let wait = turn.wait_from(now);
            if !wait.is_zero() {
                seed ^= turn.ready_at();
                let pause = wait
                    .saturating_add(full_jitter(jitter, &mut seed))
                    .min(max_wait.max(wait));
                tokio::time::sleep(pause).await;
            }
            let ready_at = turn.ready_at();
            turn.commit();
            // What is left at the turn (later bookings counted): an admission.
            let left = self
                .peek_at(key, ready_at, 0)
                .unwrap_or_else(|_| Decision::never(self.algorithm().capacity()));
            let limit = self.algorithm().capacity();
            return Ok(Decision::admitted(
                limit,
                left.remaining(),
                left.reset_after_nanos(),
            ));
        }
        let started = tokio::time::Instant::now();
        loop {
            let d = self.check_n(key, cost).map_err(WaitError::Keyed)?;
            if d.is_allowed() {
                return Ok(d);
            }
            let pause = d
                .retry_after()
                .saturating_add(full_jitter(jitter, &mut seed));
            let waited = started.elapsed();
            if waited.saturating_add(d.retry_after()) > max_wait {
                return Err(WaitError::TooLong {
                    wait: waited.saturating_add(d.retry_after()),
                });
            }
            tokio::time::sleep(pause.min(max_wait.saturating_sub(waited))).await;
        }
    }
}

/// A random part of `bound` (SplitMix64 on `seed`): uniform in `[0, bound]`.
pub(crate) fn full_jitter(bound: Duration, seed: &mut u64) -> Duration {
    let bound = u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX);
    if bound == 0 {
        return Duration::ZERO;
    }
    *seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *seed;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    Duration::from_nanos(z % bound.saturating_add(1).max(1))
}
