//! Waiting until admitted, on tokio's paused clock (exact instants): the direct GCRA
//! waits, their fairness bound with many tasks, the keyed wait's booking (and what
//! holds for algorithms that cannot book), and the throttled stream.
#![cfg(not(target_os = "wasi"))] // tokio's test clock

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use portero::wait::stream::{NeverFits, Throttled};
use portero::{CheckError, Clock, Gcra, RateLimiter, ReserveError, TokenBucket, WaitError};
use tokio::time::Instant;

mod support {
    pub mod quota;
    pub mod tokio_clock;
}
use support::quota::quota;
use support::tokio_clock::{assert_jittered, keyed_on_tokio_clock, TokioClock};

const MS: u64 = 1_000_000;

fn gcra(per_second: u64, burst: u64) -> Arc<RateLimiter<Gcra, TokioClock>> {
    Arc::new(RateLimiter::gcra(quota(per_second, burst)).with_clock(TokioClock::new()))
}

/// 10 per second with a burst of 1 (T = 100 ms), its burst spent now: the limiter
/// and the instant.
async fn burst_spent() -> (Arc<RateLimiter<Gcra, TokioClock>>, Instant) {
    let l = gcra(10, 1);
    let start = Instant::now();
    l.until_ready().await.unwrap();
    (l, start)
}

/// No more than `B + t / T` admissions in any closed interval `t` of the sorted
/// instants (ns): the limiter's own bound, checked pairwise.
fn assert_never_over(at: &[u64], burst: u64, t: u64) {
    for i in 0..at.len() {
        for j in i..at.len() {
            let admitted = (j - i + 1) as u64;
            assert!(
                admitted <= burst + (at[j] - at[i]) / t,
                "{admitted} admitted in [{}, {}] ns",
                at[i],
                at[j]
            );
        }
    }
}

/// `until_ready` waits exactly until its turn; a cost that can never fit fails at once
/// (no time passes); a wait dropped while asleep gives its booking back; jitter makes a
/// waiter late by at most its bound, never early.
#[tokio::test(start_paused = true)]
async fn until_ready_wakes_at_its_turn_and_a_dropped_wait_gives_back() {
    let l = gcra(10, 2); // T = 100 ms
    let start = Instant::now();
    l.until_ready().await.unwrap();
    l.until_ready_n(1).await.unwrap();
    assert_eq!(start.elapsed(), Duration::ZERO, "the burst: at once");
    l.until_ready().await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(100));
    assert_eq!(
        l.until_ready_n(3).await,
        Err(ReserveError::Check(CheckError::CostExceedsCapacity {
            cost: 3,
            capacity: 2
        }))
    );
    assert_eq!(start.elapsed(), Duration::from_millis(100), "no wait");
    // Dropped 30 ms into a 100 ms wait: the turn at 200 ms comes back.
    let dropped = tokio::time::timeout(Duration::from_millis(30), l.until_ready()).await;
    assert!(dropped.is_err());
    l.until_ready().await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(200));
    // A never-polled wait books nothing.
    drop(l.until_ready_n(2));
    let before = Instant::now();
    l.until_ready_with_jitter(1, Duration::from_millis(40))
        .await
        .unwrap();
    assert_jittered(before.elapsed(), 100, 40);
}

/// The fairness bound: 300 tasks ask at once for one unit of a limiter with burst 5
/// and T = 10 ms. Every task is admitted, the k-th booking (k > 5) exactly (k − 5)·T
/// after it asked — at most k intervals beyond the burst, however many came after it —
/// and never more than `B + t / T` in any interval. Then tasks arriving at twice the
/// rate, each at its own instant: each admitted exactly at `max(arrival, (i + 1 − B)·T)`,
/// so within `(i + 1 − B)⁺·T` of its arrival (`i` waiters ahead of it).
#[tokio::test(start_paused = true)]
async fn many_waiters_are_each_admitted_within_their_bound_and_never_over() {
    let (burst, t) = (5u64, 10 * MS);
    let l = gcra(100, burst);
    // Tasks first run (and book) in spawn order: task i makes the (i + 1)-th booking.
    let tasks: Vec<_> = (0..300u64)
        .map(|_| {
            let l = l.clone();
            tokio::spawn(async move {
                l.until_ready().await.unwrap();
                l.clock().now()
            })
        })
        .collect();
    let mut at = Vec::new();
    for task in tasks {
        at.push(task.await.unwrap());
    }
    assert_eq!(at.len(), 300, "nobody starves");
    let want: Vec<u64> = (1..=300u64).map(|k| k.saturating_sub(burst) * t).collect();
    assert_eq!(
        at, want,
        "the k-th booking at (k − B)·T, each task by its own bound"
    );
    assert_never_over(&at, burst, t);

    // Arrivals every T / 2 on a fresh limiter: twice the rate.
    let l = gcra(100, burst);
    let tasks: Vec<_> = (0..100u64)
        .map(|i| {
            let l = l.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_nanos(i * t / 2)).await;
                let arrival = l.clock().now();
                l.until_ready().await.unwrap();
                (i, arrival, l.clock().now())
            })
        })
        .collect();
    let mut admitted = Vec::new();
    for task in tasks {
        let (i, arrival, at) = task.await.unwrap();
        assert_eq!(arrival, i * t / 2);
        assert_eq!(
            at,
            arrival.max((i + 1).saturating_sub(burst) * t),
            "task {i}"
        );
        assert!(at - arrival <= (i + 1).saturating_sub(burst) * t);
        admitted.push(at);
    }
    admitted.sort_unstable();
    assert_never_over(&admitted, burst, t);
}

/// Keyed waits book too (GCRA keys): 200 tasks wait on one key and 50 on another at
/// once. Each key's waiters are admitted in booking order exactly at `(k − B)⁺·T`, the
/// two keys independently, never over either key's bound; a dropped keyed wait gives
/// its turn back; a turn past `max_wait` fails at once.
#[tokio::test(start_paused = true)]
async fn keyed_waiters_of_one_key_are_admitted_within_their_bound() {
    let (burst, t) = (3u64, 10 * MS);
    let keyed = keyed_on_tokio_clock(Gcra::new(quota(100, burst)), 100);
    let long = Duration::from_secs(60);
    let tasks: Vec<_> = (0..250u64)
        .map(|i| {
            let k = keyed.clone();
            let key = if i % 5 == 4 { "b" } else { "a" };
            tokio::spawn(async move {
                let d = k
                    .until_key_ready(key, 1, long, Duration::ZERO)
                    .await
                    .unwrap();
                assert!(d.is_allowed());
                (key, k.clock().now())
            })
        })
        .collect();
    // Each task's instant, in spawn (= booking) order per key: the k-th at (k − B)⁺·T.
    let mut by_key: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
    for task in tasks {
        let (key, at) = task.await.unwrap();
        by_key[usize::from(key == "b")].push(at);
    }
    for (at, n) in by_key.iter().zip([200u64, 50]) {
        let want: Vec<u64> = (1..=n).map(|k| k.saturating_sub(burst) * t).collect();
        assert_eq!(*at, want);
        assert_never_over(at, burst, t);
    }
    // Key "a" is booked up to 1.97 s: a wait dropped 5 ms in gives its turn back.
    let start = Instant::now();
    let turn = keyed.reserve_key("a", 1, long).unwrap();
    let next = turn.wait_from(keyed.clock().now());
    drop(turn);
    let dropped = tokio::time::timeout(
        Duration::from_millis(5),
        keyed.until_key_ready("a", 1, long, Duration::ZERO),
    );
    assert!(dropped.await.is_err());
    keyed
        .until_key_ready("a", 1, long, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(start.elapsed(), next, "the dropped turn came back");
    assert!(matches!(
        keyed
            .until_key_ready("a", 1, Duration::from_millis(5), Duration::ZERO)
            .await,
        Err(WaitError::TooLong { .. })
    ));
    assert!(matches!(
        keyed.until_key_ready("a", 4, long, Duration::ZERO).await,
        Err(WaitError::Keyed(_))
    ));
}

/// An algorithm that cannot book (a token bucket) retries instead: what holds there is
/// only that every waiter is admitted or refused within its `max_wait` (never later,
/// never early: each try sleeps the refusal's retry-after) and that the limit is never
/// exceeded — not an order among waiters.
#[tokio::test(start_paused = true)]
async fn keyed_waits_that_cannot_book_retry_within_max_wait_and_never_over() {
    let (burst, t) = (2u64, 10 * MS);
    let keyed = keyed_on_tokio_clock(TokenBucket::new(quota(100, burst)), 10);
    let max_wait = Duration::from_millis(200);
    let tasks: Vec<_> = (0..40)
        .map(|_| {
            let k = keyed.clone();
            tokio::spawn(async move {
                let r = k.until_key_ready("x", 1, max_wait, Duration::ZERO).await;
                (r.map(|d| d.is_allowed()), k.clock().now())
            })
        })
        .collect();
    let mut admitted = Vec::new();
    for task in tasks {
        let (r, at) = task.await.unwrap();
        assert!(at <= 200 * MS, "past max_wait: {at} ns");
        match r {
            Ok(allowed) => {
                assert!(allowed);
                admitted.push(at);
            }
            Err(e) => assert!(matches!(e, WaitError::TooLong { .. }), "{e}"),
        }
    }
    admitted.sort_unstable();
    assert!(admitted.len() >= 20, "{} admitted", admitted.len());
    assert_never_over(&admitted, burst, t);
}

/// An iterator as a stream that is always ready.
struct Iter<I>(I);

impl<I: Iterator + Unpin> Stream for Iter<I> {
    type Item = I::Item;
    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<I::Item>> {
        Poll::Ready(self.0.next())
    }
}

async fn next<S: Stream + Unpin>(s: &mut S) -> Option<S::Item> {
    std::future::poll_fn(|cx| Pin::new(&mut *s).poll_next(cx)).await
}

/// A throttled stream yields each item exactly at its turn, with a per-item cost; two
/// streams sharing one limiter interleave first come, first served; an item that can
/// never fit comes back at once; a stream dropped while an item waits gives the turn
/// back.
#[tokio::test(start_paused = true)]
async fn a_throttled_stream_yields_each_item_at_its_turn() {
    let l = gcra(10, 4); // T = 100 ms
    let start = Instant::now();
    let sizes = Iter([1u64, 3, 2, 9, 1].into_iter());
    let mut s = Throttled::new(sizes, l.clone()).cost(|n: &u64| *n);
    let mut seen = Vec::new();
    while let Some(item) = next(&mut s).await {
        seen.push((item, start.elapsed().as_millis()));
    }
    // 1 + 3 fit the burst; 2 at 200 ms; 9 can never fit (burst 4); 1 at 300 ms.
    let never = NeverFits {
        item: 9,
        error: ReserveError::Check(CheckError::CostExceedsCapacity {
            cost: 9,
            capacity: 4,
        }),
    };
    assert_eq!(
        seen,
        [
            (Ok(1), 0),
            (Ok(3), 0),
            (Ok(2), 200),
            (Err(never), 200),
            (Ok(1), 300)
        ]
    );

    // Two cost-1 streams on one fresh limiter, polled by two tasks: 8 items in all,
    // 4 at once, then one per 100 ms, never two at one turn.
    let l = gcra(10, 4);
    let start = Instant::now();
    let tasks: Vec<_> = (0..2)
        .map(|_| {
            let l = l.clone();
            tokio::spawn(async move {
                let mut s = Throttled::new(Iter(0..4), l);
                let mut at = Vec::new();
                while let Some(item) = next(&mut s).await {
                    item.unwrap();
                    at.push(u64::try_from(start.elapsed().as_nanos()).unwrap());
                }
                at
            })
        })
        .collect();
    let mut at = Vec::new();
    for task in tasks {
        at.extend(task.await.unwrap());
    }
    at.sort_unstable();
    assert_eq!(at, [0, 0, 0, 0, 100 * MS, 200 * MS, 300 * MS, 400 * MS]);

    // Dropped while its second item waits (turn at 500 ms): that turn comes back.
    let mut s = Throttled::new(Iter(0..2), l.clone());
    assert_eq!(next(&mut s).await, Some(Ok(0))); // its turn: 500 ms
    let waiting = tokio::time::timeout(Duration::from_millis(10), next(&mut s)).await;
    assert!(waiting.is_err());
    drop(s);
    let turn = l.reserve(1, Duration::from_secs(1)).unwrap();
    assert_eq!(
        turn.ready_at(),
        600 * MS,
        "the dropped item's turn came back"
    );
}

/// Twenty waits time out at once on a paused clock (exact instants): none of them
/// held a turn, so the next caller is admitted at the limiter's own next instant —
/// where, when each wait booked its turn, only the last of twenty gave it back and the
/// next caller waited behind nineteen dead turns.
#[tokio::test(start_paused = true)]
async fn twenty_timed_out_waits_leave_no_dead_turn() {
    let (l, start) = burst_spent().await;
    let waits: Vec<_> = (0..20)
        .map(|_| {
            let l = l.clone();
            tokio::spawn(async move {
                tokio::time::timeout(Duration::from_millis(30), l.until_ready()).await
            })
        })
        .collect();
    for w in waits {
        assert!(w.await.unwrap().is_err(), "each gave up at 30 ms");
    }
    assert_eq!(start.elapsed(), Duration::from_millis(30));
    l.until_ready().await.unwrap();
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(100),
        "the next turn, not the 21st"
    );
}

/// A waiter's jitter delays only itself: it leaves the line when admitted, so the
/// waiter behind it is admitted at its own turn (it waited out the other's jitter
/// while the head held the line through it).
#[tokio::test(start_paused = true)]
async fn a_waiters_jitter_does_not_delay_the_next_turn() {
    let (l, start) = burst_spent().await;
    let jittered = {
        let l = l.clone();
        tokio::spawn(async move { l.until_ready_with_jitter(1, Duration::from_secs(10)).await })
    };
    tokio::task::yield_now().await; // the jittered waiter takes the head of the line
    l.until_ready().await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(200), "its own turn");
    jittered.await.unwrap().unwrap();
}

/// The bound `until_ready_n` states: a waiter that asks `n` units when the limiter's
/// debt is `b` units (⌈(TAT − ask)/T⌉, here a spent burst) and `u` units wait in line
/// ahead of it is admitted `(b + u + n − B)⁺ · T` after it asked, on GCRA, exactly
/// (on tokio's paused clock). The bound stated before, `(u + n − B)⁺ · T`, left out
/// the debt: it said 0 for the first waiter here, which waits 200 ms.
#[tokio::test(start_paused = true)]
async fn a_waiter_is_admitted_by_the_stated_bound_debt_included() {
    const T: u64 = 100 * MS;
    let l = gcra(10, 3); // B = 3, T = 100 ms
    assert!(l.check_n(3).unwrap().is_allowed()); // b = 3: the burst spent now
    let start = Instant::now();
    let first = tokio::spawn({
        let l = l.clone();
        async move {
            l.until_ready_n(2).await.unwrap(); // b = 3, u = 0, n = 2
            start.elapsed()
        }
    });
    tokio::task::yield_now().await; // the first is in line before the second asks
    let second = tokio::spawn({
        let l = l.clone();
        async move {
            l.until_ready_n(1).await.unwrap(); // b = 3, u = 2, n = 1
            start.elapsed()
        }
    });
    let (first, second) = (first.await.unwrap(), second.await.unwrap());
    let bound = |b: u64, u: u64, n: u64| Duration::from_nanos((b + u + n).saturating_sub(3) * T);
    assert_eq!(first, bound(3, 0, 2));
    assert_eq!(second, bound(3, 2, 1));
}
