//! The Little's-law experiment: a server with 30 workers and a service time of 0.25 s
//! serves 120 requests per second; it is offered 150. Halfway through, the service
//! time doubles (a slow dependency), so it can serve only 60. A concurrency limit of
//! 30 admits `C / S`: 120, then 60 by itself. A fixed rate limit of 120 per second
//! keeps admitting 120, and the excess piles up in the server's line. The adaptive
//! limit was told neither number and follows the change from latency alone.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use portero::{
    AdaptiveConcurrency, AdaptiveConfig, ConcurrencyLimit, Gcra, ManualClock, Quota, RateLimiter,
};

use super::{even, Events, SEC};

/// The server's workers.
pub const WORKERS: usize = 30;
/// Service time before the slowdown.
pub const FAST: u64 = SEC / 4;
/// Service time after it.
pub const SLOW: u64 = SEC / 2;
/// Requests offered per second (evenly spaced).
pub const OFFERED: u64 = 150;
/// Length of each phase.
pub const PHASE: u64 = 60;
/// Seconds at the end of each phase that the table reports.
pub const MEASURED: u64 = 20;

/// The admission in front of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// A GCRA rate limit of 120 per second.
    Rate,
    /// A concurrency limit of 30.
    Concurrency,
    /// [`AdaptiveConcurrency`] with its default tuning, told nothing.
    Adaptive,
}

impl Admission {
    /// The row label.
    pub fn name(self) -> &'static str {
        match self {
            Self::Rate => "rate limit 120/s",
            Self::Concurrency => "concurrency limit 30",
            Self::Adaptive => "adaptive concurrency",
        }
    }

    /// The three compared.
    pub const ALL: [Self; 3] = [Self::Rate, Self::Concurrency, Self::Adaptive];
}

/// One phase as the table reports it (its last [`MEASURED`] seconds).
#[derive(Debug, Clone, Copy, Default)]
pub struct Phase {
    /// Admitted requests per second.
    pub admitted_per_second: f64,
    /// Mean time from admission to answer, in seconds.
    pub mean_latency: f64,
    /// Requests waiting in the server's line at the phase's end.
    pub line_at_end: usize,
}

/// What one admission did in both phases.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    /// The admission.
    pub admission: Admission,
    /// Service time 0.25 s, then 0.5 s.
    pub phases: [Phase; 2],
    /// The adaptive limit at each phase's end (0 for the others).
    pub limit_at_end: [u64; 2],
}

/// An admission's hold on a request, released when its answer is sent.
enum Ticket {
    None,
    // Held only for its drop, which frees the slot.
    Fixed { _held: portero::OwnedPermit },
    Adaptive(portero::AdaptivePermit),
}

/// Runs the three admissions.
pub fn run() -> Vec<Run> {
    Admission::ALL.iter().map(|&a| run_one(a)).collect()
}

fn run_one(admission: Admission) -> Run {
    let quota = Quota::per_second(120).expect("valid");
    let rate = RateLimiter::with_algorithm_and_clock(Gcra::new(quota), ManualClock::new());
    let fixed = Arc::new(ConcurrencyLimit::new(WORKERS as u64));
    let adaptive = Arc::new(AdaptiveConcurrency::new(AdaptiveConfig::default()).expect("valid"));
    let mut line: VecDeque<(u64, Ticket)> = VecDeque::new();
    let mut busy = 0;
    let mut done: Events<(u64, Ticket)> = Events::default();
    let mut admitted = [0u64; 2];
    let mut latency = [(0.0, 0u64); 2];
    let mut run = Run {
        admission,
        phases: [Phase::default(); 2],
        limit_at_end: [0; 2],
    };
    let end = 2 * PHASE * SEC;
    let measured = |t: u64| {
        let phase = (t / (PHASE * SEC)) as usize;
        (t % (PHASE * SEC) >= (PHASE - MEASURED) * SEC).then_some(phase.min(1))
    };
    let service = |t: u64| if t < PHASE * SEC { FAST } else { SLOW };
    let arrivals = even(OFFERED, 2 * PHASE);
    let mut next_phase_end = PHASE * SEC;
    for t in arrivals.into_iter().chain(std::iter::once(end)) {
        while let Some((at, (started, ticket))) = done.pop_until(t) {
            if let Some(p) = measured(at) {
                latency[p].0 += (at - started) as f64 / 1e9;
                latency[p].1 += 1;
            }
            match ticket {
                Ticket::Adaptive(permit) => permit.completed(Duration::from_nanos(at - started)),
                other => drop(other),
            }
            match line.pop_front() {
                Some((arrived, ticket)) => done.push(at + service(at), (arrived, ticket)),
                None => busy -= 1,
            }
        }
        while t >= next_phase_end && next_phase_end <= end {
            let p = (next_phase_end / (PHASE * SEC) - 1) as usize;
            run.phases[p].line_at_end = line.len();
            run.limit_at_end[p] = if admission == Admission::Adaptive {
                adaptive.limit()
            } else {
                0
            };
            next_phase_end += PHASE * SEC;
        }
        if t == end {
            break;
        }
        let ticket = match admission {
            Admission::Rate => rate
                .check_at(t, 1)
                .expect("cost 1")
                .is_allowed()
                .then_some(Ticket::None),
            Admission::Concurrency => fixed
                .try_acquire_owned()
                .ok()
                .map(|p| Ticket::Fixed { _held: p }),
            Admission::Adaptive => adaptive.try_acquire_owned().ok().map(Ticket::Adaptive),
        };
        let Some(ticket) = ticket else { continue };
        if let Some(p) = measured(t) {
            admitted[p] += 1;
        }
        if busy < WORKERS {
            busy += 1;
            done.push(t + service(t), (t, ticket));
        } else {
            line.push_back((t, ticket));
        }
    }
    for p in 0..2 {
        run.phases[p].admitted_per_second = admitted[p] as f64 / MEASURED as f64;
        run.phases[p].mean_latency = latency[p].0 / latency[p].1.max(1) as f64;
    }
    run
}
