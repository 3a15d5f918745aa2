//! Shared pieces of the benchmarks: key sequences and the "floor" operations every
//! result is compared with.
#![deny(missing_docs)]

use std::sync::atomic::{AtomicU64, Ordering};

use std::num::NonZeroU32;

use portero::Quota;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};

/// One uncontended compare-and-swap: the hardware floor of any one-word limiter.
#[inline]
pub fn cas_once(word: &AtomicU64) -> bool {
    let v = word.load(Ordering::Relaxed);
    word.compare_exchange(v, v.wrapping_add(1), Ordering::AcqRel, Ordering::Relaxed)
        .is_ok()
}

/// `n` keys drawn uniformly from `0..keys`, reproducibly.
pub fn uniform_keys(keys: u64, n: usize) -> Vec<u64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    (0..n).map(|_| rng.random_range(0..keys)).collect()
}

/// `n` keys from `0..keys` with Zipf(1.0) popularity (a few hot keys), reproducibly.
pub fn zipf_keys(keys: u64, n: usize) -> Vec<u64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let zipf = Zipf::new(keys as f64, 1.0).expect("valid Zipf parameters");
    (0..n).map(|_| zipf.sample(&mut rng) as u64 - 1).collect()
}

/// A quota that never runs out at benchmark speed: 10^9 per second, burst 2^30, so
/// every check measured is an admission.
pub fn open_quota() -> Quota {
    Quota::per_second(1_000_000_000)
        .unwrap()
        .with_burst(1 << 30)
        .unwrap()
}

/// [`open_quota`] as governor spells it.
pub fn governor_open_quota() -> governor::Quota {
    governor::Quota::per_second(NonZeroU32::new(1_000_000_000).unwrap())
        .allow_burst(NonZeroU32::new(1 << 30).unwrap())
}
