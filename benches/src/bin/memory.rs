//! Memory per key, measured with a counting allocator: portero's keyed table against
//! governor's keyed limiter at 1,000,000 u64 keys, and a flood of 10,000,000 distinct
//! keys against a 100,000-key portero table.
//!
//! `cargo run --release -p portero-benches --bin memory`

use std::alloc::{GlobalAlloc, Layout, System};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};

use portero::{Gcra, KeyedLimiter, ManualClock, Overflow, Quota};

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: defers to the system allocator, only counting bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new, Ordering::Relaxed);
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

fn main() {
    const KEYS: u64 = 1_000_000;
    let q = Quota::per_second(10).unwrap();

    let before = live();
    let portero = KeyedLimiter::with_clock(Gcra::new(q), KEYS as usize, ManualClock::new());
    for k in 0..KEYS {
        portero.check_at(&k, 0, 1).unwrap();
    }
    let p_bytes = live() - before;
    println!(
        "portero keyed, {KEYS} u64 keys: {p_bytes} bytes, {:.1} bytes/key ({} keys held)",
        p_bytes as f64 / KEYS as f64,
        portero.len()
    );
    drop(portero);

    let before = live();
    let gov =
        governor::RateLimiter::keyed(governor::Quota::per_second(NonZeroU32::new(10).unwrap()));
    for k in 0..KEYS {
        let _ = gov.check_key(&k);
    }
    let g_bytes = live() - before;
    println!(
        "governor keyed, {KEYS} u64 keys: {g_bytes} bytes, {:.1} bytes/key",
        g_bytes as f64 / KEYS as f64
    );
    drop(gov);

    let before = live();
    let flood = KeyedLimiter::with_clock(
        Gcra::new(Quota::per_hour(1).unwrap()),
        100_000,
        ManualClock::new(),
    )
    .overflow(Overflow::EvictSoonestFull);
    let table = live() - before;
    let mut peak = 0;
    for k in 0..10_000_000u64 {
        let _ = flood.check_at(&k, 0, 1);
        if k % 100_000 == 0 {
            peak = peak.max(live() - before);
        }
    }
    println!(
        "flood: 10,000,000 distinct keys into a 100,000-key table: {} keys held, table {table} bytes, peak {peak} bytes",
        flood.len()
    );
    assert_eq!(peak, table, "memory grew during the flood");
}
