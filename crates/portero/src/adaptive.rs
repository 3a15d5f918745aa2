//! An adaptive concurrency limit: the limit follows the service's measured latency
//! instead of a fixed `C`, so a service that slows down is protected without anyone
//! reconfiguring it.
//!
//! By Little's law a concurrency limit `C` admits `C / S` per second for a service time
//! `S`; the right `C` is the service's own parallelism, which nobody knows for sure and
//! which changes. This limit finds it the way Envoy's adaptive concurrency filter does:
//!
//! 1. **Baseline.** With the limit pinned low, so nothing queues, the mean latency of
//!    one batch of calls is the no-load latency. At start the limit is pinned to
//!    `min_limit`; later measurements pin it to half the current limit (at least
//!    `min_limit`): the gradient below keeps the limit under
//!    `(1 + tolerance) × capacity + √limit`, which is under twice the capacity, so half
//!    of it never queues, and the measurement costs at most half the throughput for
//!    one batch.
//! 2. **Gradient.** After every batch of `batch` completed calls, with `L` their mean
//!    latency: `gradient = clamp(baseline × (1 + tolerance) / L, 0.5, 2)` and
//!    `limit = gradient × limit + √limit`, within `[min_limit, max_limit]`. While calls
//!    take no longer than the baseline allows, the limit grows by `√limit` per batch;
//!    once they queue inside the service, `L` rises and the limit falls until the queue
//!    is gone. The `√limit` headroom keeps probing for more capacity.
//! 3. **Re-baseline** every `rebaseline_every` batches, because the no-load latency
//!    itself drifts (a cold cache, a slower dependency).
//!
//! # Invariant
//!
//! `in_flight` and `limit` share one atomic word: a permit is granted by one
//! compare-and-swap that checks `in_flight < limit` against the same value it
//! increments, so at the moment of every admission at most `limit` calls are in flight
//! (a limit lowered afterwards lets the calls already in flight finish). A batch is
//! closed by exactly one caller — the one whose compare-and-swap on the sample word
//! counted its last sample — and only that caller moves the limit. Both claims are
//! checked by loom models.

use core::time::Duration;

use alloc::sync::Arc;
use crossbeam_utils::CachePadded;

use crate::word::{AtomicWord, Transition};
use crate::Decision;

const LOW_32: u64 = u32::MAX as u64;
const PROBING: u64 = 1 << 63;
const COUNT_SHIFT: u32 = 48;
const COUNT_MASK: u64 = (1 << 15) - 1;
const SUM_MASK: u64 = (1 << COUNT_SHIFT) - 1;
/// Latencies above this (µs, about 71 minutes) are counted as this.
const MAX_SAMPLE_US: u64 = u32::MAX as u64;

/// The tuning of an [`AdaptiveConcurrency`] limit. `Default` gives Envoy-like values:
/// start at 20, between 3 and 1,000, batches of 50, 25 % tolerance, re-baseline every
/// 20 batches (1,000 calls; at most one batch in 20 runs at half the limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdaptiveConfig {
    /// The limit after the first baseline.
    pub initial_limit: u32,
    /// The lowest limit, and the limit while the baseline is measured.
    pub min_limit: u32,
    /// The highest limit.
    pub max_limit: u32,
    /// Completed calls per update (and per baseline measurement), 1–32,767.
    pub batch: u16,
    /// Extra latency over the baseline that still counts as no queueing, in percent.
    pub tolerance_percent: u16,
    /// Batches between two baseline measurements.
    pub rebaseline_every: u32,
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        Self {
            initial_limit: 20,
            min_limit: 3,
            max_limit: 1000,
            batch: 50,
            tolerance_percent: 25,
            rebaseline_every: 20,
        }
    }
}

/// Why an [`AdaptiveConfig`] was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdaptiveConfigError;

impl core::fmt::Display for AdaptiveConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(
            "adaptive limit needs 1 <= min_limit <= initial_limit <= max_limit, \
             a batch of 1-32767 calls and rebaseline_every >= 1",
        )
    }
}

impl core::error::Error for AdaptiveConfigError {}

/// A concurrency limit that follows latency: a no-load baseline is measured with the
/// limit pinned low, then after every batch of calls the limit moves by
/// `baseline × (1 + tolerance) / latency` (clamped to ½–2×) plus `√limit`, and the
/// baseline is measured again every `rebaseline_every` batches. In-flight count and
/// limit share one atomic word: every admission sees fewer than `limit` in flight.
///
/// ```
/// use std::{sync::Arc, time::Duration};
/// use portero::{AdaptiveConcurrency, AdaptiveConfig};
///
/// let limit = Arc::new(AdaptiveConcurrency::new(AdaptiveConfig::default())?);
/// let permit = limit.try_acquire_owned().expect("below the limit");
/// // ... call the service ...
/// permit.completed(Duration::from_millis(12)); // the latency is the signal
/// # Ok::<(), portero::AdaptiveConfigError>(())
/// ```
#[derive(Debug)]
pub struct AdaptiveConcurrency {
    // limit (high 32 bits) | in flight (low 32 bits)
    word: CachePadded<AtomicWord>,
    // probing (bit 63) | samples (15 bits) | latency sum in µs (48 bits)
    samples: CachePadded<AtomicWord>,
    // baseline latency in µs (high 32 bits) | batches since it was measured (low 32)
    baseline: AtomicWord,
    // the limit to restore when a baseline measurement ends
    saved_limit: AtomicWord,
    config: AdaptiveConfig,
}

/// One call in flight under an [`AdaptiveConcurrency`] limit. Report its latency with
/// [`completed`](Self::completed); dropping it unreported (a cancelled call) frees the
/// slot without a sample.
#[derive(Debug)]
#[must_use = "the slot is freed as soon as the permit is dropped"]
pub struct AdaptivePermit {
    limit: Arc<AdaptiveConcurrency>,
    // Admitted while the baseline was being measured: only these calls measure it.
    in_probe: bool,
}

impl AdaptiveConcurrency {
    /// A limit tuned by `config`; it starts by measuring its baseline.
    pub fn new(config: AdaptiveConfig) -> Result<Self, AdaptiveConfigError> {
        let ok = 1 <= config.min_limit
            && config.min_limit <= config.initial_limit
            && config.initial_limit <= config.max_limit
            && (1..=COUNT_MASK).contains(&u64::from(config.batch))
            && config.rebaseline_every >= 1;
        if !ok {
            return Err(AdaptiveConfigError);
        }
        Ok(Self {
            word: CachePadded::new(AtomicWord::new(u64::from(config.min_limit) << 32)),
            samples: CachePadded::new(AtomicWord::new(PROBING)),
            baseline: AtomicWord::new(0),
            saved_limit: AtomicWord::new(u64::from(config.initial_limit)),
            config,
        })
    }

    /// Takes a slot if fewer than the current limit are in flight; otherwise the
    /// rejection (retry-after 0: nobody knows when a call will finish).
    pub fn try_acquire_owned(self: &Arc<Self>) -> Result<AdaptivePermit, Decision> {
        let Ok(d) = self.word.apply::<_, core::convert::Infallible>(|w| {
            let (limit, in_flight) = (w >> 32, w & LOW_32);
            Ok(if in_flight < limit {
                Transition::write(Decision::admitted(limit, limit - in_flight - 1, 0), w + 1)
            } else {
                Transition::keep(Decision::rejected(limit, 0, 0, 0))
            })
        });
        if !d.is_allowed() {
            return Err(d);
        }
        Ok(AdaptivePermit {
            limit: self.clone(),
            in_probe: self.samples.load() & PROBING != 0,
        })
    }

    /// The current limit.
    pub fn limit(&self) -> u64 {
        self.word.load() >> 32
    }

    /// Calls in flight now.
    pub fn in_flight(&self) -> u64 {
        self.word.load() & LOW_32
    }

    /// The measured no-load latency (zero until the first measurement ends).
    pub fn baseline(&self) -> Duration {
        Duration::from_micros(self.baseline.load() >> 32)
    }

    fn release(&self) {
        self.word.update(|w| (w & LOW_32 > 0).then(|| w - 1));
    }

    fn sample(&self, latency: Duration, in_probe: bool) {
        let us = u64::try_from(latency.as_micros())
            .unwrap_or(MAX_SAMPLE_US)
            .min(MAX_SAMPLE_US);
        let batch = u64::from(self.config.batch);
        let Ok(closed) = self.samples.apply::<_, core::convert::Infallible>(|s| {
            let probing = s & PROBING != 0;
            if probing && !in_probe {
                // Called before the measurement began: it may have queued.
                return Ok(Transition::keep(None));
            }
            let count = ((s >> COUNT_SHIFT) & COUNT_MASK) + 1;
            let sum = (s & SUM_MASK) + us;
            Ok(if count >= batch {
                Transition::write(Some((sum / count, probing)), s & PROBING)
            } else {
                Transition::write(None, (s & PROBING) | (count << COUNT_SHIFT) | sum)
            })
        });
        match closed {
            Some((mean, true)) => self.end_probe(mean),
            Some((mean, false)) => self.adjust(mean),
            None => {}
        }
    }

    fn end_probe(&self, mean_us: u64) {
        self.baseline.store(mean_us.max(1) << 32);
        let limit = self.saved_limit.load();
        self.set_limit(limit);
        self.samples.update(|s| Some(s & !PROBING));
    }

    fn adjust(&self, mean_us: u64) {
        let c = &self.config;
        let base = self.baseline.load();
        let limit = self.limit();
        // Integer arithmetic (no floating point in `no_std`): the gradient in 1/1000.
        let allowed_us = (base >> 32) * (100 + u64::from(c.tolerance_percent)) / 100;
        let gradient = (allowed_us * 1000 / mean_us.max(1)).clamp(500, 2000);
        let next = limit * gradient / 1000 + isqrt(limit);
        let next = next.clamp(u64::from(c.min_limit), u64::from(c.max_limit));
        if (base & LOW_32) + 1 >= u64::from(c.rebaseline_every) {
            // Measure the baseline again: pin the limit low so nothing queues.
            self.saved_limit.store(next);
            self.set_limit((next / 2).max(u64::from(c.min_limit)));
            self.baseline.store(base & !LOW_32);
            self.samples.store(PROBING);
        } else {
            self.baseline.store(base + 1);
            self.set_limit(next);
        }
    }

    fn set_limit(&self, limit: u64) {
        self.word.update(|w| Some((limit << 32) | (w & LOW_32)));
    }
}

/// ⌊√n⌋ for the headroom (n is a limit, below 2^32).
fn isqrt(n: u64) -> u64 {
    let mut root = 0u64;
    let mut bit = 1u64 << 31;
    while bit > 0 {
        if (root + bit) * (root + bit) <= n {
            root += bit;
        }
        bit >>= 1;
    }
    root
}

impl AdaptivePermit {
    /// The call finished after `latency`: one sample for the limit.
    pub fn completed(self, latency: Duration) {
        self.limit.sample(latency, self.in_probe);
    }
}

impl Drop for AdaptivePermit {
    fn drop(&mut self) {
        self.limit.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(batch: u16) -> AdaptiveConfig {
        AdaptiveConfig {
            initial_limit: 10,
            min_limit: 2,
            max_limit: 100,
            batch,
            tolerance_percent: 25,
            rebaseline_every: 1000,
        }
    }

    fn run_batch(limit: &Arc<AdaptiveConcurrency>, n: u16, latency_ms: u64) {
        for _ in 0..n {
            let p = limit.try_acquire_owned().unwrap();
            p.completed(Duration::from_millis(latency_ms));
        }
    }

    #[test]
    fn measures_a_baseline_then_grows_while_latency_holds_and_falls_when_it_rises() {
        let limit = Arc::new(AdaptiveConcurrency::new(config(4)).unwrap());
        assert_eq!(
            limit.limit(),
            2,
            "pinned low while the baseline is measured"
        );
        let a = limit.try_acquire_owned().unwrap();
        let _b = limit.try_acquire_owned().unwrap();
        assert!(limit.try_acquire_owned().is_err());
        drop(a);
        run_batch(&limit, 4, 100);
        assert_eq!(limit.baseline(), Duration::from_millis(100));
        assert_eq!(limit.limit(), 10);
        run_batch(&limit, 4, 100); // gradient clamps to 1.25: 10 × 1.25 + √10
        assert_eq!(limit.limit(), 15);
        run_batch(&limit, 4, 500); // five times slower: halve, plus headroom: 7 + 3
        assert_eq!(limit.limit(), 10);
        for _ in 0..20 {
            run_batch(&limit, 4, 10_000);
        }
        // L / 2 + √L = L at L = 4: where the halving meets the headroom.
        assert_eq!(limit.limit(), 4);
        for _ in 0..40 {
            run_batch(&limit, 4, 1);
        }
        assert_eq!(limit.limit(), 100, "never above the maximum");
    }

    #[test]
    fn calls_admitted_before_a_measurement_do_not_count_in_it() {
        let c = AdaptiveConfig {
            rebaseline_every: 1,
            ..config(2)
        };
        let limit = Arc::new(AdaptiveConcurrency::new(c).unwrap());
        run_batch(&limit, 2, 100); // baseline 100 ms
        let queued = limit.try_acquire_owned().unwrap();
        run_batch(&limit, 1, 100);
        run_batch(&limit, 1, 100); // a batch closed: a new measurement starts
        assert_eq!(limit.limit(), 7, "half of the next limit, 10 × 1.25 + √10");
        queued.completed(Duration::from_secs(60)); // admitted before it: ignored
        run_batch(&limit, 2, 200);
        assert_eq!(limit.baseline(), Duration::from_millis(200));
    }

    #[test]
    fn the_integer_square_root_is_exact() {
        for n in (0..10_000).chain([u64::from(u32::MAX) - 1, u64::from(u32::MAX)]) {
            let r = isqrt(n);
            assert!(r * r <= n && (r + 1) * (r + 1) > n, "{n}");
        }
    }

    #[test]
    fn bad_configurations_and_absurd_latencies_are_refused_or_clamped() {
        for bad in [
            AdaptiveConfig {
                min_limit: 0,
                ..config(4)
            },
            AdaptiveConfig {
                initial_limit: 1,
                ..config(4)
            },
            AdaptiveConfig {
                max_limit: 5,
                ..config(4)
            },
            AdaptiveConfig {
                batch: 0,
                ..config(4)
            },
            AdaptiveConfig {
                batch: u16::MAX,
                ..config(4)
            },
            AdaptiveConfig {
                rebaseline_every: 0,
                ..config(4)
            },
        ] {
            assert_eq!(
                AdaptiveConcurrency::new(bad).unwrap_err(),
                AdaptiveConfigError
            );
        }
        let limit = Arc::new(AdaptiveConcurrency::new(config(32_767)).unwrap());
        for _ in 0..100 {
            let p = limit.try_acquire_owned().unwrap();
            p.completed(Duration::MAX); // no overflow of the 48-bit sum
        }
        assert_eq!(limit.in_flight(), 0);
    }
}
