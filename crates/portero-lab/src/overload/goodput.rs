//! The goodput experiment: a service for 100 requests per second is offered 150, and
//! its clients give up after 2 seconds. With an unbounded first-in-first-out line the
//! line grows without end, every answer comes too late, and the server stays busy
//! serving clients who already left: full throughput, goodput near zero. A bounded
//! line with a deadline per request and early refusal keeps goodput at capacity.
//!
//! What saves goodput at a line of 100 is the bound: 100 requests are one second of
//! work, less than the clients' 2 s, so everyone queued is served in time and no
//! deadline ever passes. [`queue_curve`] lengthens the line. Past 200 (the clients'
//! patience times the capacity) an oldest-first line whose deadline is only the
//! client's keeps starting requests with almost no time left, which answer too late;
//! starting a request only while its deadline leaves the service time, as
//! `DeadlineQueueLayer` does with its estimate, keeps every started request in time
//! whatever the length.

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

/// When a waiting request is given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Once its client's deadline has passed (the line alone).
    BeforeDeadline,
    /// Once its deadline leaves less than the service time, so every request started
    /// can still answer in time (`DeadlineQueueLayer` with its service-time estimate,
    /// here exact: every request takes [`SERVICE`]).
    LeavingServiceTime,
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
    let arrivals = arrivals(seed);
    Line::ALL
        .iter()
        .map(|&line| run_line(line, QUEUE, Start::BeforeDeadline, &arrivals))
        .collect()
}

/// The seeded arrivals every run of the experiment shares.
fn arrivals(seed: u64) -> Vec<u64> {
    poisson(OFFERED, SECONDS, &mut rng(seed))
}

/// The line lengths [`queue_curve`] tries: 0 to 500 in steps of 10.
pub const QUEUES: std::ops::RangeInclusive<usize> = 0..=50;
/// The step between [`QUEUES`].
pub const QUEUE_STEP: usize = 10;

/// Goodput over the second half of the run at one line length.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueuePoint {
    /// Requests allowed to wait.
    pub queue: usize,
    /// Oldest first, given up once the client's deadline passed.
    pub oldest: f64,
    /// Newest first, the same.
    pub newest: f64,
    /// Oldest first, started only while the deadline leaves the service time.
    pub oldest_checked: f64,
    /// Newest first, the same.
    pub newest_checked: f64,
}

/// Goodput for every line length in [`QUEUES`] (same arrivals as [`run`]).
pub fn queue_curve(seed: u64) -> Vec<QueuePoint> {
    let arrivals = arrivals(seed);
    let at = |queue, order, start| {
        run_line(Line::Bounded(order), queue, start, &arrivals).goodput_second_half()
    };
    QUEUES
        .map(|k| {
            let queue = k * QUEUE_STEP;
            QueuePoint {
                queue,
                oldest: at(queue, Order::OldestFirst, Start::BeforeDeadline),
                newest: at(queue, Order::NewestFirst, Start::BeforeDeadline),
                oldest_checked: at(queue, Order::OldestFirst, Start::LeavingServiceTime),
                newest_checked: at(queue, Order::NewestFirst, Start::LeavingServiceTime),
            }
        })
        .collect()
}

/// One line of length `queue` (ignored when unbounded) on `arrivals`.
pub fn run_line(line: Line, queue: usize, start: Start, arrivals: &[u64]) -> Run {
    let workers = Arc::new(ConcurrencyLimit::new(WORKERS));
    let mut waiting = match line {
        Line::Unbounded => Waiting::Fifo(VecDeque::new()),
        Line::Bounded(order) => Waiting::Deadlines(DeadlineQueue::new(queue, order)),
    };
    // The line's deadline: the client's, or the last moment a start can answer in time.
    let start_by = match start {
        Start::BeforeDeadline => PATIENCE,
        Start::LeavingServiceTime => PATIENCE - SERVICE,
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
                    if q.push(t + start_by, t).is_err() {
                        run.refused += 1;
                    }
                }
            },
        }
    }
    run
}
