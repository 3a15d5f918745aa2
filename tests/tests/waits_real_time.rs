//! Waits in real time, with callers that behave like real callers: they give up. 200
//! tasks loop `timeout(1..150 ms, until_ready())` on one limiter (100 per second,
//! burst 10) for 3 s. Waiters take nothing until admitted and stand in one line, so a
//! wait that times out leaves no dead turn: at least 90 % of the schedule's turns are
//! used (bookings that stayed charged when their waiter left used 115 of 310); after
//! everyone left, a newcomer waits no longer than the quota says (it waited 39 s on an
//! idle limiter); and the instants the limiter admitted at never break its bound.
#![cfg(not(target_os = "wasi"))] // threads and tokio's timer

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use portero::{Clock, Quota, RateLimiter};

mod support {
    pub mod quota;
}
use support::quota::over_the_bound;

thread_local! {
    /// The last instant the limiter's clock gave on this thread.
    static LAST: Cell<u64> = const { Cell::new(0) };
}

/// Real time (ns since the test started), remembering the last reading per thread: on
/// a current-thread runtime, the reading just before a wait returns is the instant of
/// the check that admitted it.
#[derive(Debug, Clone, Copy)]
struct Recorded(Instant);

impl Clock for Recorded {
    fn now(&self) -> u64 {
        let t = u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        LAST.with(|last| last.set(t));
        t
    }
}

#[tokio::test(flavor = "current_thread")]
async fn cancelled_waits_leave_no_dead_turns() {
    let quota = Quota::per_second(100).unwrap().with_burst(10).unwrap();
    let limiter = Arc::new(RateLimiter::gcra(quota).with_clock(Recorded(Instant::now())));
    let run = Duration::from_secs(3);
    let tasks: Vec<_> = (0..200u64)
        .map(|i| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let mut admitted = Vec::new();
                let mut seed = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                while limiter.clock().0.elapsed() < run {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let patience = Duration::from_millis(1 + seed % 150);
                    if let Ok(Ok(())) = tokio::time::timeout(patience, limiter.until_ready()).await
                    {
                        admitted.push(LAST.with(Cell::get));
                    }
                }
                admitted
            })
        })
        .collect();
    let mut at: Vec<u64> = Vec::new();
    for t in tasks {
        at.extend(t.await.unwrap());
    }
    let elapsed = limiter.clock().0.elapsed();
    // The schedule: the burst, then one turn every 10 ms.
    let turns = 10 + elapsed.as_millis() as u64 / 10;
    assert!(
        at.len() as u64 * 10 >= turns * 9,
        "{} of {turns} turns used",
        at.len()
    );
    // Every admission at its check's instant, replayed in time order: within the bound.
    assert_eq!(
        over_the_bound(&mut at, quota),
        0,
        "admissions over burst + t/T"
    );
    // Everyone left; 100 ms later a newcomer finds ten units refilled: no wait.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let asked = Instant::now();
    limiter.until_ready().await.unwrap();
    assert!(
        asked.elapsed() < Duration::from_millis(20),
        "a newcomer on an idle limiter waited {:?}",
        asked.elapsed()
    );
}
