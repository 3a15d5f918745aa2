//! The embedded experiments. Times are nanoseconds on an axis whose windows start at 0.

const MS: u64 = 1_000_000;
const S: u64 = 1_000 * MS;

/// A named experiment: arrivals, limit and window.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Short name.
    pub name: &'static str,
    /// What it shows.
    pub description: &'static str,
    /// Arrival instants, ns, sorted.
    pub arrivals: Vec<u64>,
    /// Requests per window (bucket capacity and rate per window).
    pub limit: u64,
    /// Window, ns.
    pub window: u64,
}

fn every(start: u64, step: u64, count: u64) -> impl Iterator<Item = u64> {
    (0..count).map(move |i| start + i * step)
}

/// The burst experiment: 80 requests, limit 10, window 1 s.
///
/// Phase 1 straddles the boundary at 1 s: 20 requests every 5 ms from 0.900 s and 20
/// every 5 ms from 1.000 s. The fixed window takes 10 on each side (20 within 0.2 s);
/// the sliding counter, whose previous window holds 10, lets one more in just after the
/// boundary (11); the log holds at 10.
///
/// Phase 2, after every limiter has recovered: 21 requests at once at 5 s, one every
/// 100 ms from 5.1 s to 5.9 s (exactly when a token comes back), and one at each
/// midpoint 5.05 s … 5.95 s. The full token bucket spends its 10 saved tokens and then
/// earns 9 more while the burst goes on (19 in one second); the queue takes 10 and
/// releases them one every 100 ms (10 in any second).
///
/// Expected maxima in any 1 s: fixed window 20, sliding log 10, sliding counter 11,
/// token bucket 19, leaky bucket 10.
pub fn burst() -> Scenario {
    let mut a: Vec<u64> = every(900 * MS, 5 * MS, 20)
        .chain(every(S, 5 * MS, 20))
        .chain(std::iter::repeat_n(5 * S, 21))
        .chain(every(5 * S + 100 * MS, 100 * MS, 9))
        .chain(every(5 * S + 50 * MS, 100 * MS, 10))
        .collect();
    a.sort_unstable();
    Scenario {
        name: "burst",
        description:
            "80 requests, limit 10 per 1 s: a burst across a window boundary, then a long burst",
        arrivals: a,
        limit: 10,
        window: S,
    }
}

/// The boundary experiment: limit 100 per 60 s; 150 requests every 2 ms just
/// before the boundary at 60 s and 150 just after. Expected: fixed window 200, sliding
/// log 100, sliding counter 101.
pub fn boundary() -> Scenario {
    let a = every(59_700 * MS, 2 * MS, 150)
        .chain(every(60 * S, 2 * MS, 150))
        .collect();
    Scenario {
        name: "boundary",
        description: "300 requests around the boundary at 60 s, limit 100 per 60 s",
        arrivals: a,
        limit: 100,
        window: 60 * S,
    }
}

/// "10 per second" meets 20 requests in 200 ms (one every 10 ms from 0): the guide's
/// first question, answered by each algorithm.
pub fn twenty() -> Scenario {
    Scenario {
        name: "twenty",
        description: "20 requests in 200 ms under 10 per second",
        arrivals: every(0, 10 * MS, 20).collect(),
        limit: 10,
        window: S,
    }
}

/// The quiz, limit 10 per 60 s aligned to the minute (t = 0 is 12:00:00).
pub mod quiz {
    use super::{every, MS, S};

    /// Q1: 10 requests at 12:00:59 and 10 at 12:01:01.
    pub fn q1() -> Vec<u64> {
        every(59 * S, MS, 10).chain(every(61 * S, MS, 10)).collect()
    }

    /// Q2: 10 requests at 12:00:00, then one at 12:00:30.
    pub fn q2() -> Vec<u64> {
        every(0, MS, 10).chain([30 * S]).collect()
    }
}
