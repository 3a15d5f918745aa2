//! The goodput experiment: a service for 100 requests per second is offered 150, and
//! its clients give up after 2 seconds. With an unbounded first-in-first-out line the
//! line grows without end, every answer comes too late, and the server stays busy
//! serving clients who already left: full throughput, goodput near zero. A bounded
//! line with a deadline per request and early refusal keeps goodput at capacity.

use std::collections::VecDeque;
use std::sync::Arc;

use portero::{ConcurrencyLimit, OwnedPermit};
use portero_http::queue::{DeadlineQueue, Order};

use super::{poisson, rng, Events, SEC};

/// Workers, each serving one request in [`SERVICE`]: 100 requests per second.
pub const WORKERS: u64 = 10;
/// Service time of one request.
pub const SERVICE: u64 = SEC / 10;
/// Requests offered per second (Poisson).
pub const OFFERED: f64 = 150.0;
/// How long a client waits for its answer.
pub const PATIENCE: u64 = 2 * SEC;
/// Length of the run.
pub const SECONDS: u64 = 60;
/// The bounded line: one second of work.
pub const QUEUE: usize = 100;

/// How the server treats requests it cannot start at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// Every request waits, first in first out, however long.
    Unbounded,
    /// At most [`QUEUE`] wait, each until its client's deadline; the rest get 503.
    Bounded(Order),
}

impl Line {
    /// The row label.
    pub fn name(self) -> &'static str {
        match self {
            Self::Unbounded => "unbounded FIFO",
            Self::Bounded(Order::OldestFirst) => "bounded, oldest first",
            Self::Bounded(Order::NewestFirst) => "bounded, newest first",
        }
    }

    /// The three lines compared.
    pub const ALL: [Self; 3] = [
        Self::Unbounded,
        Self::Bounded(Order::OldestFirst),
        Self::Bounded(Order::NewestFirst),
    ];
}

/// What one line did.
#[derive(Debug, Clone)]
pub struct Run {
    /// The line.
    pub line: Line,
    /// Answers delivered within the client's patience, per second of the run.
    pub goodput: Vec<u32>,
    /// Requests served (in time or not).
    pub served: u64,
    /// Requests answered 503 at once (line full).
    pub refused: u64,
    /// Requests dropped unserved because their deadline passed in line.
    pub expired: u64,
}

impl Run {
    /// Mean goodput per second over the second half of the run.
    pub fn goodput_second_half(&self) -> f64 {
        let half = &self.goodput[self.goodput.len() / 2..];
        half.iter().map(|&g| f64::from(g)).sum::<f64>() / half.len() as f64
    }
}

enum Waiting {
    Fifo(VecDeque<u64>),
    Deadlines(DeadlineQueue<u64, u64>),
}

/// Runs every line on the same arrivals (seeded).
pub fn run(seed: u64) -> Vec<Run> {
    let arrivals = poisson(OFFERED, SECONDS, &mut rng(seed));
    Line::ALL
        .iter()
        .map(|&line| run_line(line, &arrivals))
        .collect()
}

fn run_line(line: Line, arrivals: &[u64]) -> Run {
    let workers = Arc::new(ConcurrencyLimit::new(WORKERS));
    let mut waiting = match line {
        Line::Unbounded => Waiting::Fifo(VecDeque::new()),
        Line::Bounded(order) => Waiting::Deadlines(DeadlineQueue::new(QUEUE, order)),
    };
    let mut run = Run {
        line,
        goodput: vec![0; SECONDS as usize],
        served: 0,
        refused: 0,
        expired: 0,
    };
    // A completion carries its request's arrival and the worker it frees.
    let mut done: Events<(u64, OwnedPermit)> = Events::default();
    let finish = |run: &mut Run, arrived: u64, at: u64| {
        run.served += 1;
        if at - arrived <= PATIENCE && at < SECONDS * SEC {
            run.goodput[(at / SEC) as usize] += 1;
        }
    };
    for &t in arrivals.iter().chain(std::iter::once(&(SECONDS * SEC))) {
        while let Some((at, (arrived, permit))) = done.pop_until(t) {
            finish(&mut run, arrived, at);
            let next = match &mut waiting {
                Waiting::Fifo(q) => q.pop_front(),
                Waiting::Deadlines(q) => q.pop(at, |_| run.expired += 1),
            };
            match next {
                // The freed worker goes straight to the next request.
                Some(next) => done.push(at + SERVICE, (next, permit)),
                None => drop(permit),
            }
        }
        if t == SECONDS * SEC {
            break;
        }
        match workers.try_acquire_owned() {
            Ok(permit) => done.push(t + SERVICE, (t, permit)),
            Err(_) => match &mut waiting {
                Waiting::Fifo(q) => q.push_back(t),
                Waiting::Deadlines(q) => {
                    if q.push(t + PATIENCE, t).is_err() {
                        run.refused += 1;
                    }
                }
            },
        }
    }
    run
}
