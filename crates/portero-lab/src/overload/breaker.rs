//! The breaker experiment: a dependency is down for 60 seconds while its caller calls
//! it 50 times a second. Without a breaker every call reaches the dead dependency; with
//! the usual breaker (5 failures in a row, 30 s open, one probe) a handful do, the rest
//! get the fallback at once, and the first probe after the dependency heals closes the
//! circuit.
//!
//! Two parameters decide the headline, and both are swept:
//!
//! - **When the dependency heals.** Probes come one open period apart, so recovery
//!   waits for the next probe after the heal: anything from nothing to a whole open
//!   period. The 60 s outage is exactly twice the open period, so the second probe
//!   lands 80 ms after the heal (the five failures that opened the breaker took 80 ms);
//!   [`recovery_curve`] moves the heal.
//! - **How long a failing call takes.** Failures that arrive at once open the breaker
//!   after five calls. A dead dependency usually does not answer at all: each call
//!   hangs until the caller's timeout, and while the first ones hang the breaker,
//!   still closed, lets every call through. [`timeout_curve`] gives the calls a
//!   timeout.

use std::time::Duration;

use portero::{BreakerCall, CircuitBreaker, ManualClock};

use super::{Events, SEC};

/// Calls per second.
pub const RATE: u64 = 50;
/// The dependency is down from here...
pub const DOWN_FROM: u64 = 10 * SEC;
/// ...to here.
pub const DOWN_UNTIL: u64 = 70 * SEC;
/// Length of the run (longer when recovery comes later).
pub const SECONDS: u64 = 100;
/// Failures in a row that open the breaker.
pub const FAILURES: u32 = 5;
/// How long it stays open.
pub const OPEN_FOR: Duration = Duration::from_secs(30);
/// The open periods compared in the sweeps.
pub const OPEN_PERIODS: [Duration; 3] =
    [Duration::from_secs(10), OPEN_FOR, Duration::from_secs(60)];
/// The outages swept: every 100 ms up to this.
pub const LONGEST_OUTAGE: u64 = 120 * SEC;
/// The step of the outage sweep: finer than any probe's cycle, so every phase of it
/// is sampled.
pub const OUTAGE_STEP: u64 = SEC / 10;
/// The longest call timeout swept (in steps of [`TIMEOUT_STEP`]).
pub const LONGEST_TIMEOUT: u64 = 10 * SEC;
/// The step of the timeout sweep.
pub const TIMEOUT_STEP: u64 = SEC / 10;

/// One run's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    /// Whether a breaker is in front of the dependency.
    pub with_breaker: bool,
    /// How long the dependency is down, from [`DOWN_FROM`] (ns).
    pub outage: u64,
    /// The breaker's open period.
    pub open_for: Duration,
    /// How long a call to the dead dependency hangs before it counts as failed (ns;
    /// 0: it fails at once). Calls to a healthy one answer at once.
    pub call_timeout: u64,
}

impl Setup {
    /// The experiment's own: a 60 s outage, 30 s open, failures at once.
    pub const fn headline(with_breaker: bool) -> Self {
        Self {
            with_breaker,
            outage: DOWN_UNTIL - DOWN_FROM,
            open_for: OPEN_FOR,
            call_timeout: 0,
        }
    }
}

/// What the caller saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// Whether a breaker was in front of the dependency.
    pub with_breaker: bool,
    /// Calls that reached the dependency while it was down.
    pub reached_while_down: u64,
    /// Calls answered by the fallback without calling.
    pub fallbacks: u64,
    /// From the dependency's recovery to the first successful call, in ms.
    pub recovered_after_ms: u64,
    /// The same in ns.
    pub recovered_after: u64,
    /// The most calls hanging on the dead dependency at once (each one a thread or a
    /// connection held).
    pub most_hanging: u64,
}

/// Runs the caller without and with a breaker.
pub fn run() -> [Run; 2] {
    [false, true].map(|b| simulate(Setup::headline(b)))
}

/// Runs one caller: calls every `1 / RATE` s from 0 until the first success after the
/// heal. Nothing changes after that (the breaker is closed, the dependency answers,
/// and a failure still pending from an earlier cycle no longer counts), so the counts
/// are those of the whole [`SECONDS`] run.
pub fn simulate(setup: Setup) -> Run {
    let heal = DOWN_FROM + setup.outage;
    let breaker = CircuitBreaker::new(FAILURES, setup.open_for)
        .expect("valid")
        .with_clock(ManualClock::new());
    let mut run = Run {
        with_breaker: setup.with_breaker,
        reached_while_down: 0,
        fallbacks: 0,
        recovered_after_ms: 0,
        recovered_after: u64::MAX,
        most_hanging: 0,
    };
    // Calls hanging on the dead dependency, reported failed at their timeout.
    let mut hanging: Events<Option<BreakerCall<'_, ManualClock>>> = Events::default();
    let mut in_flight = 0u64;
    // The next probe comes within an open period (plus a hung probe's timeout) of the
    // heal; a bound, so no setup can run forever.
    let open = setup.open_for.as_nanos() as u64;
    let end = heal + 2 * (open + setup.call_timeout) + SEC;
    for i in 0.. {
        let t = i * SEC / RATE;
        if t > end || run.recovered_after != u64::MAX {
            break;
        }
        // A timeout at t is seen before the call at t.
        while let Some((at, call)) = hanging.pop_until(t) {
            in_flight -= 1;
            if let Some(call) = call {
                call.failure_at(at);
            }
        }
        let call = if setup.with_breaker {
            match breaker.try_call_at(t) {
                Ok(call) => Some(call),
                Err(_) => {
                    run.fallbacks += 1;
                    continue;
                }
            }
        } else {
            None
        };
        if (DOWN_FROM..heal).contains(&t) {
            run.reached_while_down += 1;
            if setup.call_timeout == 0 {
                if let Some(call) = call {
                    call.failure_at(t);
                }
            } else {
                hanging.push(t + setup.call_timeout, call);
                in_flight += 1;
                run.most_hanging = run.most_hanging.max(in_flight);
            }
        } else {
            if t >= heal && run.recovered_after == u64::MAX {
                run.recovered_after = t - heal;
            }
            if let Some(call) = call {
                call.success_at(t);
            }
        }
    }
    run.recovered_after_ms = run.recovered_after / 1_000_000;
    run
}

/// Recovery after the heal (ns) for every outage from [`OUTAGE_STEP`] to
/// [`LONGEST_OUTAGE`], with a breaker open for `open_for`: `(outage, recovery)`.
pub fn recovery_curve(open_for: Duration) -> Vec<(u64, u64)> {
    (1..=LONGEST_OUTAGE / OUTAGE_STEP)
        .map(|k| {
            let outage = k * OUTAGE_STEP;
            let run = simulate(Setup {
                outage,
                open_for,
                ..Setup::headline(true)
            });
            (outage, run.recovered_after)
        })
        .collect()
}

/// The mean recovery (ns) over a curve's outages: what a heal at a random moment costs.
pub fn mean_recovery(curve: &[(u64, u64)]) -> u64 {
    let sum: u128 = curve.iter().map(|&(_, r)| u128::from(r)).sum();
    (sum / curve.len().max(1) as u128) as u64
}

/// The headline outage with a call timeout from 0 to [`LONGEST_TIMEOUT`]:
/// `(timeout, without breaker, with breaker)`.
pub fn timeout_curve() -> Vec<(u64, Run, Run)> {
    (0..=LONGEST_TIMEOUT / TIMEOUT_STEP)
        .map(|k| {
            let call_timeout = k * TIMEOUT_STEP;
            let [without, with] = [false, true].map(|b| {
                simulate(Setup {
                    call_timeout,
                    ..Setup::headline(b)
                })
            });
            (call_timeout, without, with)
        })
        .collect()
}
