//! The breaker experiment: a dependency is down for 60 seconds while its caller calls
//! it 50 times a second. Without a breaker every call reaches the dead dependency (and
//! waits for its timeout); with the usual breaker (5 failures in a row, 30 s open, one
//! probe) a handful do, the rest get the fallback at once, and the first probe after
//! the dependency heals closes the circuit.

use std::time::Duration;

use portero::{CircuitBreaker, ManualClock};

use super::SEC;

/// Calls per second.
pub const RATE: u64 = 50;
/// The dependency is down from here...
pub const DOWN_FROM: u64 = 10 * SEC;
/// ...to here.
pub const DOWN_UNTIL: u64 = 70 * SEC;
/// Length of the run.
pub const SECONDS: u64 = 100;
/// Failures in a row that open the breaker.
pub const FAILURES: u32 = 5;
/// How long it stays open.
pub const OPEN_FOR: Duration = Duration::from_secs(30);

/// What the caller saw, with or without the breaker.
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
}

/// Runs the caller without and with a breaker.
pub fn run() -> [Run; 2] {
    [false, true].map(run_one)
}

fn run_one(with_breaker: bool) -> Run {
    let breaker = CircuitBreaker::new(FAILURES, OPEN_FOR)
        .expect("valid")
        .with_clock(ManualClock::new());
    let mut run = Run {
        with_breaker,
        reached_while_down: 0,
        fallbacks: 0,
        recovered_after_ms: 0,
    };
    let mut recovered = None;
    for i in 0..RATE * SECONDS {
        let t = i * SEC / RATE;
        let down = (DOWN_FROM..DOWN_UNTIL).contains(&t);
        let call = if with_breaker {
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
        if down {
            run.reached_while_down += 1;
        } else if t >= DOWN_UNTIL && recovered.is_none() {
            recovered = Some(t - DOWN_UNTIL);
        }
        if let Some(call) = call {
            if down {
                call.failure_at(t)
            } else {
                call.success_at(t)
            }
        }
    }
    run.recovered_after_ms = recovered.unwrap_or(u64::MAX) / 1_000_000;
    run
}
