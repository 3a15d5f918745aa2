//! The outbound experiment's two other halves, in simulated time through portero's
//! own limiters.
//!
//! *Callers that give up*: 200 tasks call a provider allowing 100 per second (burst
//! 10) for 3 s, each call waiting for its turn at most 1–150 ms (drawn per call), then
//! giving up and calling again. Three ways to wait: book a turn up front and cancel it
//! on giving up (a reservation), wait in line and check on waking (portero's
//! `until_ready`), or check and sleep until the refusal's earliest instant without
//! any order (governor's `until_ready`); timers fire 0–2 ms late. Counted: the turns
//! used of the schedule, how long a newcomer waits on the limiter everyone left, and
//! how often a call overtakes one that started earlier.
//!
//! *A provider's window*: the provider allows 20 calls in any sliding second and
//! refuses the 21st; 200 tasks send 5 calls each; timers fire 0–2 ms late (drawn per
//! wake). Booked GCRA turns (the rate as a quota, with its default burst and with a
//! burst of 1) are kept at their booked instants, late by the timer; the exact window
//! checks each start against a log of the last second's starts when the waiter wakes.

use std::collections::VecDeque;
use std::time::Duration;

use portero::{ManualClock, Quota, RateLimiter, SlidingLog};
use rand::Rng;

use super::{Events, SEC};

const MS: u64 = 1_000_000;

/// How callers wait for a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// Book a turn up front; a caller that gives up cancels its booking.
    Book,
    /// Wait in line, checked on waking (portero's `until_ready`).
    Line,
    /// Check, sleep until the earliest instant, check again; no order (governor's
    /// `until_ready`).
    Retry,
}

impl Waiting {
    /// The row label.
    pub fn name(self) -> &'static str {
        match self {
            Self::Book => "book a turn, cancel",
            Self::Line => "wait in line",
            Self::Retry => "retry at the earliest",
        }
    }
}

/// What one way of waiting did with callers that give up.
#[derive(Debug, Clone)]
pub struct Patience {
    /// The way of waiting.
    pub waiting: Waiting,
    /// Calls admitted.
    pub admitted: u64,
    /// The turns the schedule had (burst + duration × rate).
    pub turns: u64,
    /// How long a newcomer waited after everyone left (s).
    pub newcomer_wait: f64,
    /// Admissions of a call while one that started earlier was still waiting (no
    /// first come, first served).
    pub overtaken: u64,
}

/// 200 tasks, 100 per second with a burst of 10, for 3 s.
pub const TASKS: u64 = 200;
/// The run's length.
pub const RUN: u64 = 3 * SEC;

fn patience_quota() -> Quota {
    Quota::per_second(100)
        .and_then(|q| q.with_burst(10))
        .expect("a valid quota")
}

/// Each way of waiting, with the same draws (`seed`).
pub fn patience(seed: u64) -> [Patience; 3] {
    [Waiting::Book, Waiting::Line, Waiting::Retry].map(|w| patience_one(w, seed))
}

/// A caller's events.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Task `t` makes a call.
    Call(u64),
    /// Task `t`'s wait for call number `n` ends (its turn, or its patience).
    Wake(u64, u64),
}

fn patience_one(waiting: Waiting, seed: u64) -> Patience {
    let mut rng = super::rng(seed);
    let limiter = RateLimiter::gcra(patience_quota()).with_clock(ManualClock::new());
    let mut events: Events<Step> = Events::default();
    for t in 0..TASKS {
        events.push(0, Step::Call(t));
    }
    let n = TASKS as usize;
    // Per task: its call number, whether that call still waits, its deadline, and its
    // booking (for `Book`).
    let (mut call_of, mut waits, mut deadline) = (vec![0u64; n], vec![false; n], vec![0u64; n]);
    let mut started = vec![0u64; n];
    let mut overtaken = 0;
    let mut booked: Vec<Option<portero::Reservation<'_, ManualClock>>> =
        (0..n).map(|_| None).collect();
    let mut line: VecDeque<u64> = VecDeque::new();
    let mut admitted = 0;
    while let Some((now, step)) = events.pop_until(RUN) {
        match step {
            Step::Call(t) => {
                let i = t as usize;
                call_of[i] += 1;
                waits[i] = true;
                started[i] = now;
                deadline[i] = now + rng.random_range(1..=150) * MS;
                let call = call_of[i];
                match waiting {
                    Waiting::Book => {
                        let r = limiter
                            .reserve_at(now, 1, Duration::from_secs(3_600))
                            .expect("room");
                        events.push(r.ready_at().min(deadline[i]), Step::Wake(t, call));
                        booked[i] = Some(r);
                    }
                    Waiting::Line => {
                        line.push_back(t);
                        if line.len() == 1 {
                            events.push(now, Step::Wake(t, call));
                        }
                        events.push(deadline[i], Step::Wake(t, call));
                    }
                    Waiting::Retry => events.push(now, Step::Wake(t, call)),
                }
            }
            Step::Wake(t, call) => {
                let i = t as usize;
                if call != call_of[i] || !waits[i] {
                    continue; // a wake for a call that already ended
                }
                let gave_up = now >= deadline[i];
                // Whether a call that started before this one still waits.
                let earlier_waits = (0..n).any(|j| j != i && waits[j] && started[j] < started[i]);
                // The call ends now (admitted, or given up): the task calls again.
                let mut end = |events: &mut Events<Step>, at: u64| {
                    waits[i] = false;
                    events.push(at, Step::Call(t));
                };
                match waiting {
                    Waiting::Book => {
                        let r = booked[i].take().expect("a booking");
                        if r.ready_at() <= now {
                            r.commit();
                            admitted += 1;
                            overtaken += u64::from(earlier_waits);
                        } else {
                            r.cancel_at(now);
                        }
                        end(&mut events, now);
                    }
                    Waiting::Line if line.front() == Some(&t) => {
                        let d = limiter.check_at(now, 1).expect("in range");
                        if d.is_allowed() || gave_up {
                            admitted += u64::from(d.is_allowed());
                            overtaken += u64::from(d.is_allowed() && earlier_waits);
                            line.pop_front();
                            end(&mut events, now);
                            if let Some(&next) = line.front() {
                                events.push(now, Step::Wake(next, call_of[next as usize]));
                            }
                        } else {
                            let late = rng.random_range(0..=2 * MS);
                            let wake = (now + d.retry_after_nanos() + late).min(deadline[i]);
                            events.push(wake, Step::Wake(t, call));
                        }
                    }
                    Waiting::Line => {
                        if gave_up {
                            line.retain(|&w| w != t);
                            end(&mut events, now);
                        }
                    }
                    Waiting::Retry => {
                        let d = limiter.check_at(now, 1).expect("in range");
                        if d.is_allowed() {
                            admitted += 1;
                            overtaken += u64::from(earlier_waits);
                            end(&mut events, now);
                        } else if now + d.retry_after_nanos() > deadline[i] {
                            end(&mut events, deadline[i]); // its timeout fires first
                        } else {
                            let late = rng.random_range(0..=2 * MS);
                            events.push(now + d.retry_after_nanos() + late, Step::Wake(t, call));
                        }
                    }
                }
            }
        }
    }
    // Everyone left at the end (a booking still held is cancelled); a newcomer asks
    // 100 ms later.
    for r in booked.into_iter().flatten() {
        r.cancel_at(RUN);
    }
    let later = RUN + 100 * MS;
    let wait = match waiting {
        Waiting::Book => limiter
            .reserve_at(later, 1, Duration::from_secs(3_600))
            .map_or(u64::MAX, |r| r.ready_at() - later),
        Waiting::Line | Waiting::Retry => limiter
            .peek_at(later, 1)
            .expect("in range")
            .retry_after_nanos(),
    };
    Patience {
        waiting,
        admitted,
        turns: 10 + RUN / (SEC / 100),
        newcomer_wait: wait as f64 / SEC as f64,
        overtaken,
    }
}

/// How calls to a provider with a window are timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// Booked GCRA turns, `Quota::per_second(20)` (burst 20).
    Rate,
    /// Booked GCRA turns, burst 1.
    RateBurstOne,
    /// The exact window: each start checked against the last second's starts on
    /// waking (`ThrottleLayer::window`).
    Window,
}

impl Timing {
    /// The row label.
    pub fn name(self) -> &'static str {
        match self {
            Self::Rate => "rate 20/s (burst 20)",
            Self::RateBurstOne => "rate 20/s, burst 1",
            Self::Window => "window 20 per 1 s",
        }
    }
}

/// What one timing did against the provider's window.
#[derive(Debug, Clone)]
pub struct Window {
    /// The timing.
    pub timing: Timing,
    /// Calls the provider refused.
    pub refused: u64,
    /// The most calls that arrived in any sliding second.
    pub busiest_second: u64,
    /// Calls delivered per second, from the first to the last.
    pub delivered_per_second: f64,
}

/// Calls each task sends.
pub const CALLS: u64 = 5;
/// The provider's window: `N` per second.
pub const N: u64 = 20;

/// Each timing, with the same timer draws (`seed`).
pub fn window(seed: u64) -> [Window; 3] {
    [Timing::Rate, Timing::RateBurstOne, Timing::Window].map(|t| window_one(t, seed))
}

fn window_one(timing: Timing, seed: u64) -> Window {
    let mut rng = super::rng(seed ^ 0x5eed);
    let late = |rng: &mut rand::rngs::StdRng| rng.random_range(0..=2 * MS);
    let mut starts = Vec::new();
    match timing {
        Timing::Rate | Timing::RateBurstOne => {
            let mut q = Quota::per_second(N).expect("a valid quota");
            if timing == Timing::RateBurstOne {
                q = q.with_burst(1).expect("a valid burst");
            }
            let limiter = RateLimiter::gcra(q).with_clock(ManualClock::new());
            // Every call books at once, in order, and starts when its timer fires.
            for _ in 0..TASKS * CALLS {
                let r = limiter
                    .reserve_at(0, 1, Duration::from_secs(3_600))
                    .expect("room");
                starts.push(r.ready_at() + late(&mut rng));
                r.commit();
            }
        }
        Timing::Window => {
            let log = SlidingLog::with_clock(
                Quota::new(N, Duration::from_secs(1)).expect("a valid quota"),
                ManualClock::new(),
            );
            // The line's head checks when its timer fires (late), and sleeps the
            // refusal's retry-after otherwise.
            let mut now = 0;
            for _ in 0..TASKS * CALLS {
                loop {
                    let d = log.check_at(now, 1).expect("in range");
                    if d.is_allowed() {
                        starts.push(now);
                        break;
                    }
                    now += d.retry_after_nanos() + late(&mut rng);
                }
            }
        }
    }
    starts.sort_unstable();
    // The provider: at most N in any sliding second, refusing the rest.
    let (mut window, mut refused, mut busiest) = (VecDeque::new(), 0, 0);
    let mut arrived: VecDeque<u64> = VecDeque::new();
    for &t in &starts {
        while window.front().is_some_and(|&s| t - s >= SEC) {
            window.pop_front();
        }
        while arrived.front().is_some_and(|&s| t - s >= SEC) {
            arrived.pop_front();
        }
        arrived.push_back(t);
        busiest = busiest.max(arrived.len() as u64);
        if (window.len() as u64) < N {
            window.push_back(t);
        } else {
            refused += 1;
        }
    }
    let span = starts.last().copied().unwrap_or(0) as f64 / SEC as f64;
    Window {
        timing,
        refused,
        busiest_second: busiest,
        delivered_per_second: (starts.len() as u64 - refused) as f64 / span.max(1e-9),
    }
}
