//! The storm experiments: what retries do to a server that is already refusing.
//!
//! **Amplification.** 100 requests per second meet a server that refuses everything
//! for 10 seconds. Clients that retry each refusal 3 times at once send it 400 per
//! second while it is down. Clients using [`Backoff`] (exponential, full jitter, never
//! before the server's `Retry-After`, at most 3 retries) send less while it is down
//! and land their retries after it recovers.
//!
//! **Herd.** 200 clients are refused at the same instant. Waiting exactly the backoff
//! ceiling (1 s, 2 s, 4 s) brings all 200 back in the same instant each time; drawing
//! the wait uniformly below the ceiling (full jitter) spreads them.
//!
//! How much backoff cuts the load while the server is down depends on how long the
//! first waits are, against the 10 s outage: a 1 s base after the server's
//! `Retry-After: 1` pushes most retries out of the first seconds, while a short base
//! without `Retry-After` brings them back within the outage, to be refused again.
//! [`base_curve`] moves the base, with and without `Retry-After`.

use std::time::Duration;

use portero_http::Backoff;

use super::{even, rng, Events, SEC};

/// Requests per second in the amplification experiment.
pub const RATE: u64 = 100;
/// The server refuses everything before this time.
pub const DOWN_UNTIL: u64 = 10 * SEC;
/// Length of the amplification run.
pub const SECONDS: u64 = 20;
/// Retries per request.
pub const RETRIES: u32 = 3;
/// The `Retry-After` the refusing server sends.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);
/// Clients refused at once in the herd experiment.
pub const HERD: usize = 200;
/// The window the herd's peak is counted in.
pub const WINDOW: u64 = SEC / 10;

/// The backoff both experiments use: 1 s base, 30 s cap, 3 retries.
pub fn backoff() -> Backoff {
    Client::EXPERIMENT.backoff()
}

/// How a backing-off client waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Client {
    /// The first retry's ceiling.
    pub base: Duration,
    /// The largest ceiling.
    pub cap: Duration,
    /// Whether it waits the server's `Retry-After` before the jittered wait.
    pub honours_retry_after: bool,
}

impl Client {
    /// The experiment's client: 1 s base, 30 s cap, after `Retry-After`.
    pub const EXPERIMENT: Self = Self {
        base: Duration::from_secs(1),
        cap: Duration::from_secs(30),
        honours_retry_after: true,
    };
    /// A shorter-tempered client: 0.5 s base, 10 s cap, `Retry-After` not read.
    pub const QUICK: Self = Self {
        base: Duration::from_millis(500),
        cap: Duration::from_secs(10),
        honours_retry_after: false,
    };

    /// Its [`Backoff`], at most [`RETRIES`] retries.
    pub fn backoff(self) -> Backoff {
        Backoff::new(self.base, self.cap)
            .expect("valid")
            .with_max_retries(RETRIES)
    }
}

/// The bases [`base_curve`] tries: every [`BASE_STEP`] up to this.
pub const LONGEST_BASE: Duration = Duration::from_secs(3);
/// The step between them.
pub const BASE_STEP: Duration = Duration::from_millis(100);

/// The experiment's client with every base from [`BASE_STEP`] to [`LONGEST_BASE`]:
/// `(base, after Retry-After, without it)`.
pub fn base_curve(seed: u64) -> Vec<(Duration, Amplification, Amplification)> {
    let steps = (LONGEST_BASE.as_millis() / BASE_STEP.as_millis()) as u32;
    (1..=steps)
        .map(|k| {
            let base = BASE_STEP * k;
            let client = |honours_retry_after| Client {
                base,
                honours_retry_after,
                ..Client::EXPERIMENT
            };
            (
                base,
                backing_off(client(true), seed),
                backing_off(client(false), seed),
            )
        })
        .collect()
}

/// How clients retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// At once.
    Immediate,
    /// [`Backoff`] with full jitter after the server's `Retry-After`.
    Backoff,
}

/// The amplification experiment's result.
#[derive(Debug, Clone, Copy)]
pub struct Amplification {
    /// How clients retried.
    pub retry: Retry,
    /// Requests per second reaching the server while it refuses (mean).
    pub load_while_down: f64,
    /// Requests that got an answer in the end.
    pub answered: u64,
}

/// Runs the amplification experiment for both retry policies (seeded).
pub fn amplification(seed: u64) -> [Amplification; 2] {
    [
        amplify(Retry::Immediate, Client::EXPERIMENT, seed),
        backing_off(Client::EXPERIMENT, seed),
    ]
}

/// The amplification experiment with clients backing off as `client` does.
pub fn backing_off(client: Client, seed: u64) -> Amplification {
    amplify(Retry::Backoff, client, seed)
}

fn amplify(retry: Retry, client: Client, seed: u64) -> Amplification {
    let mut rng = rng(seed);
    let policy = client.backoff();
    let retry_after = client.honours_retry_after.then_some(RETRY_AFTER);
    let mut attempts: Events<u32> = Events::default();
    for t in even(RATE, SECONDS) {
        attempts.push(t, 0);
    }
    let mut per_second = vec![0u64; 64];
    let mut answered = 0;
    while let Some((t, attempt)) = attempts.pop_until(u64::MAX) {
        let second = (t / SEC) as usize;
        if second >= per_second.len() {
            per_second.resize(second + 1, 0);
        }
        per_second[second] += 1;
        if t >= DOWN_UNTIL {
            answered += 1;
            continue;
        }
        let wait = match retry {
            Retry::Immediate => (attempt < RETRIES).then_some(Duration::ZERO),
            Retry::Backoff => {
                (attempt < RETRIES).then(|| policy.delay_with(attempt, retry_after, &mut rng))
            }
        };
        if let Some(wait) = wait {
            attempts.push(t + wait.as_nanos() as u64, attempt + 1);
        }
    }
    let down = (DOWN_UNTIL / SEC) as usize;
    Amplification {
        retry,
        load_while_down: per_second[..down].iter().sum::<u64>() as f64 / down as f64,
        answered,
    }
}

/// The herd experiment's result: the most retries in any [`WINDOW`].
#[derive(Debug, Clone, Copy)]
pub struct Herd {
    /// Without jitter (every client waits exactly the ceiling).
    pub peak_without_jitter: u64,
    /// With full jitter.
    pub peak_with_jitter: u64,
}

/// Runs the herd experiment (seeded): 200 clients refused at 0, each retry refused too.
pub fn herd(seed: u64) -> Herd {
    let mut rng = rng(seed);
    let policy = backoff();
    let mut peak = |jittered: bool| {
        let mut times = Vec::new();
        for _ in 0..HERD {
            let mut t = 0;
            for attempt in 0..RETRIES {
                let wait = if jittered {
                    policy.delay_with(attempt, None, &mut rng)
                } else {
                    policy.ceiling(attempt)
                };
                t += wait.as_nanos() as u64;
                times.push(t);
            }
        }
        times.sort_unstable();
        crate::sim::max_in_window(&times, WINDOW)
    };
    Herd {
        peak_without_jitter: peak(false),
        peak_with_jitter: peak(true),
    }
}
