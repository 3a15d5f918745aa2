//! The blocked-key cache: when Redis answers "rejected, retry after t", the key is
//! answered locally until then, without a round trip — an abusive client hammering one
//! key costs Redis one script call per refusal period instead of one per request.
//!
//! # Bound
//!
//! The cache only ever **refuses**; every admission comes from Redis. And it never
//! refuses a request that Redis would admit at that moment, unless another instance
//! gave units back meanwhile (another instance's reset; this limiter's own
//! [`reset`](crate::RedisLimiter::reset) clears the key here first):
//!
//! - **Time.** Redis decided at some instant after the request was sent, so its
//!   refusal lasts at least `retry_after` from the *send*; the cache refuses only
//!   until `sent + retry_after` on this process's clock (rounded down to whole ms).
//! - **Cost.** A refusal of `c` units means that no cost of at least `c` fits before
//!   it ends (every algorithm here needs longer for more units), so the cache refuses
//!   only costs at least the smallest refused one. That floor is exact below 2^23
//!   units and rounded **up** above (23 significant bits), never down: a cost between
//!   the true floor and the rounded one goes to Redis. Costs are compared unclamped,
//!   up to the quota's maximum.
//!
//! Memory is the core's keyed table with its key cap: a full table caches no new keys
//! (they go to Redis), and keys whose refusal has passed are reclaimed.

use std::sync::atomic::{AtomicU64, Ordering};

use portero::{Algorithm, CheckError, Clock, Decision, KeyedLimiter, Transition};

/// Bit set in a "cost" that is really an instruction to block.
const BLOCK: u64 = 1 << 63;
/// The word: `until` (ms after the cache's epoch, 36 bits: 795 days) | floor (28 bits).
const FLOOR_BITS: u32 = 28;
const FLOOR_MASK: u64 = (1 << FLOOR_BITS) - 1;
const UNTIL_LIMIT_MS: u64 = 1 << (64 - 1 - FLOOR_BITS);
/// A floor is `mantissa << exponent`: 23 bits of mantissa, 5 of exponent.
const MANTISSA_BITS: u32 = 23;
const NANOS_PER_MS: u64 = 1_000_000;

/// `cost` rounded up to a floor the word can hold (exact below 2^23); `None` beyond
/// its range (about 2^54 units: no refusal that large is cached).
fn floor_of(cost: u64) -> Option<u64> {
    let exponent = (u64::BITS - cost.leading_zeros()).saturating_sub(MANTISSA_BITS);
    let mut mantissa = cost.div_ceil(1 << exponent);
    let mut exponent = exponent;
    if mantissa >> MANTISSA_BITS != 0 {
        mantissa = mantissa.div_ceil(2);
        exponent += 1;
    }
    (exponent < 32).then(|| (u64::from(exponent) << MANTISSA_BITS) | mantissa)
}

/// The smallest cost a stored floor refuses.
fn floor_cost(floor: u64) -> u64 {
    let mantissa = floor & ((1 << MANTISSA_BITS) - 1);
    mantissa << (floor >> MANTISSA_BITS)
}

/// One key's refusal as one word: `until_ms << 28 | floor`, `until_ms` counted from
/// `epoch` (the clock's reading when the cache was made).
#[derive(Debug, Clone, Copy)]
struct BlockedUntil {
    epoch: u64,
}

impl Algorithm for BlockedUntil {
    fn capacity(&self) -> u64 {
        u64::MAX
    }

    fn decide(&self, state: u64, now: u64, op: u64) -> Result<Transition, CheckError> {
        let (until_ms, floor) = (state >> FLOOR_BITS, state & FLOOR_MASK);
        let until = self
            .epoch
            .saturating_add(until_ms.saturating_mul(NANOS_PER_MS));
        let left_ns = until.saturating_sub(now);
        if op & BLOCK != 0 {
            // Keep the later refusal (another answer may already have extended it).
            let next = op & !BLOCK;
            let keep = until_ms >= next >> FLOOR_BITS && left_ns > 0;
            let d = Decision::admitted(u64::MAX, 0, left_ns);
            return Ok(if keep {
                Transition::keep(d)
            } else {
                Transition::write(d, next)
            });
        }
        let blocked = left_ns > 0 && op > 0 && op >= floor_cost(floor);
        Ok(Transition::keep(if blocked {
            Decision::rejected(u64::MAX, 0, left_ns, left_ns)
        } else {
            Decision::admitted(u64::MAX, 0, left_ns)
        }))
    }
}

/// The cache; see the [module docs](self).
#[derive(Debug)]
pub(crate) struct BlockedKeys {
    table: KeyedLimiter<str, BlockedUntil>,
    epoch: u64,
    // Resets so far: a refusal Redis gave to a request sent before a reset is not
    // cached (Redis may have forgotten the key since).
    resets: AtomicU64,
}

/// When a request was sent, as the cache needs to know: the time and the resets.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sent {
    at: u64,
    resets: u64,
}

impl BlockedKeys {
    pub(crate) fn new(max_keys: usize) -> Self {
        let epoch = portero::DefaultClock::default().now();
        Self {
            table: KeyedLimiter::new(BlockedUntil { epoch }, max_keys),
            epoch,
            resets: AtomicU64::new(0),
        }
    }

    /// Now on the cache's clock (ns).
    fn now(&self) -> u64 {
        self.table.clock().now()
    }

    /// Read just before a request is sent.
    pub(crate) fn sent(&self) -> Sent {
        Sent {
            resets: self.resets.load(Ordering::SeqCst),
            at: self.now(),
        }
    }

    /// How long `key` is still refused for `cost` units, if it is.
    pub(crate) fn refused_for(&self, key: &str, cost: u64) -> Option<u64> {
        // The top bit marks a block instruction; no real cost reaches it.
        let d = self.table.check_n(key, cost.min(BLOCK - 1)).ok()?;
        (!d.is_allowed()).then(|| d.retry_after_nanos())
    }

    /// Redis refused `cost` units of `key` for `retry_after_ns`, answering a request
    /// [`sent`](Self::sent) then.
    pub(crate) fn block(&self, key: &str, cost: u64, retry_after_ns: u64, sent: Sent) {
        let Some(floor) = floor_of(cost) else {
            return;
        };
        let sent_resets = sent.resets;
        if self.resets.load(Ordering::SeqCst) != sent_resets {
            return; // a reset since the send: the refusal may no longer hold
        }
        let sent = sent.at;
        // Whole ms, rounded down: the cache never refuses past Redis's own answer. A
        // refusal past the word's range is cut short (refusing less is safe).
        let until_ms = (sent
            .saturating_add(retry_after_ns)
            .saturating_sub(self.epoch)
            / NANOS_PER_MS)
            .min(UNTIL_LIMIT_MS - 1);
        let now_ms = self.now().saturating_sub(self.epoch) / NANOS_PER_MS;
        if until_ms > now_ms && cost > 0 {
            let op = BLOCK | (until_ms << FLOOR_BITS) | floor;
            let _ = self.table.check_n(key, op);
            // A reset between the check above and this write: undo it. (A reset after
            // this point clears the key itself.)
            if self.resets.load(Ordering::SeqCst) != sent_resets {
                self.table.reset(key);
            }
        }
    }

    /// Forgets `key`'s refusal (its limit was reset), and every refusal still on its
    /// way from a request sent before now.
    pub(crate) fn forget(&self, key: &str) {
        self.resets.fetch_add(1, Ordering::SeqCst);
        self.table.reset(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Floors are exact below 2^23, round up (never down) above, and stay within
    /// 1/2^22 of the cost.
    #[test]
    fn floors_are_exact_then_round_up_within_one_part_in_2_to_the_22() {
        let mut costs: Vec<u64> = (0..70_000).chain((1 << 23) - 10..(1 << 23) + 10).collect();
        costs.extend((23..54).flat_map(|b| [(1u64 << b) - 1, 1 << b, (1 << b) + 1]));
        costs.extend([
            5_000_000,
            1_050_000,
            1_048_575,
            1_048_576,
            (1 << 54) - (1 << 31),
        ]);
        for cost in costs {
            let floor = floor_of(cost).unwrap();
            assert!(floor <= FLOOR_MASK, "{cost}");
            let back = floor_cost(floor);
            assert!(back >= cost, "{cost} -> {back}");
            if cost < 1 << 23 {
                assert_eq!(back, cost, "exact");
            }
            assert!(back - cost <= cost / (1 << 22) + 1, "{cost} -> {back}");
        }
        assert_eq!(
            floor_of((1 << 54) - 1),
            None,
            "beyond the range: not cached"
        );
        assert_eq!(floor_of(u64::MAX), None);
    }
}
