//! A wait admitted at once, timed as a user's plain program times it: one task on a
//! current-thread runtime, the default release profile, a loop of `.await`s — no
//! harness around it. Each subject in turn, five rounds interleaved, the best round's
//! ns per wait. `cargo run --release -p portero-benches --example wait_loop`.
//!
//! A reservation is timed in the two ways a user writes it: booked in a statement of
//! its own (`let turn = …?;` or `.expect(…)`), then awaited; and awaited inside the
//! `match` on the booking's result. The second keeps the result's temporary alive
//! across the `.await`, so the compiler copies the reservation out of it into the
//! future (a store-forwarding stall: a few ns).

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Instant;

use portero::{Quota, RateLimiter};

const N: u32 = 5_000_000;

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    // Quotas that never run out at this speed.
    let open = Quota::per_second(1_000_000_000)
        .and_then(|q| q.with_burst(1 << 40))
        .expect("a quota");
    let portero = RateLimiter::gcra(open);
    let rate = NonZeroU32::new(1_000_000_000).expect("non-zero");
    let burst = NonZeroU32::new(u32::MAX).expect("non-zero");
    let governor =
        governor::RateLimiter::direct(governor::Quota::per_second(rate).allow_burst(burst));
    let forever = std::time::Duration::from_secs(3_600);
    let mut best = [f64::INFINITY; 6];
    let names = [
        "portero check()",
        "portero until_ready().await",
        "governor until_ready().await",
        "governor check()",
        "portero reserve(1) in a match",
        "portero let reserve(1); .ready()",
    ];
    rt.block_on(async {
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..N {
                black_box(portero.check().is_allowed());
            }
            best[0] = best[0].min(t.elapsed().as_nanos() as f64 / f64::from(N));
            let t = Instant::now();
            for _ in 0..N {
                black_box(portero.until_ready().await.is_ok());
            }
            best[1] = best[1].min(t.elapsed().as_nanos() as f64 / f64::from(N));
            let t = Instant::now();
            for _ in 0..N {
                governor.until_ready().await;
            }
            best[2] = best[2].min(t.elapsed().as_nanos() as f64 / f64::from(N));
            let t = Instant::now();
            for _ in 0..N {
                black_box(governor.check().is_ok());
            }
            best[3] = best[3].min(t.elapsed().as_nanos() as f64 / f64::from(N));
            let t = Instant::now();
            for _ in 0..N {
                match portero.reserve(1, forever) {
                    Ok(turn) => turn.ready().await,
                    Err(e) => panic!("{e}"),
                }
            }
            best[4] = best[4].min(t.elapsed().as_nanos() as f64 / f64::from(N));
            let t = Instant::now();
            for _ in 0..N {
                let turn = portero.reserve(1, forever).expect("an open quota");
                turn.ready().await;
            }
            best[5] = best[5].min(t.elapsed().as_nanos() as f64 / f64::from(N));
        }
    });
    for (name, ns) in names.iter().zip(best) {
        println!("{name:<32} {ns:>6.2} ns");
    }
    println!(
        "portero until_ready vs governor's: {:.2}x governor's speed",
        best[2] / best[1]
    );
    println!(
        "portero reserve(1) then ready() vs governor's until_ready: {:.2}x governor's speed \
         ({:.2}x inside a match)",
        best[2] / best[5],
        best[2] / best[4]
    );
}
