//! The blocked-key cache: when Redis answers "rejected, retry after t", the key is
//! answered locally until then, without a round trip — an abusive client hammering one
//! key costs Redis one script call per refusal period instead of one per request.
//!
//! Invariant: the cache only ever **refuses**; every admission comes from Redis. It
//! refuses a request only while the refusal Redis gave lasts (its retry-after, on this
//! process's clock from when the answer arrived) and only for a cost at least the
//! refused one (a smaller request may fit earlier). So it never admits anything Redis
//! would have refused; it can refuse a request Redis would have admitted only if
//! another instance's units came back meanwhile (a reset, a refund), never through
//! time. Memory is the core's keyed table with its key cap: a full table caches no new
//! keys (they go to Redis), and keys whose refusal has passed are reclaimed.

use portero::{Algorithm, CheckError, Decision, KeyedLimiter, Transition};

/// Bit set in a "cost" that is really an instruction to block.
const BLOCK: u64 = 1 << 63;
const COST_BITS: u32 = 20;
const COST_MASK: u64 = (1 << COST_BITS) - 1;
const NANOS_PER_MS: u64 = 1_000_000;

/// One key's refusal as one word: `until_ms << 20 | smallest refused cost`.
#[derive(Debug, Clone, Copy)]
struct BlockedUntil;

impl Algorithm for BlockedUntil {
    fn capacity(&self) -> u64 {
        u64::MAX
    }

    fn decide(&self, state: u64, now: u64, op: u64) -> Result<Transition, CheckError> {
        let (until_ms, floor) = (state >> COST_BITS, state & COST_MASK);
        let left_ns = until_ms.saturating_mul(NANOS_PER_MS).saturating_sub(now);
        if op & BLOCK != 0 {
            // Keep the later refusal (another answer may already have extended it).
            let next = op & !BLOCK;
            let keep = until_ms >= next >> COST_BITS && left_ns > 0;
            let d = Decision::admitted(u64::MAX, 0, left_ns);
            return Ok(if keep {
                Transition::keep(d)
            } else {
                Transition::write(d, next)
            });
        }
        let blocked = left_ns > 0 && op > 0 && op >= floor;
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
}

impl BlockedKeys {
    pub(crate) fn new(max_keys: usize) -> Self {
        Self {
            table: KeyedLimiter::new(BlockedUntil, max_keys),
        }
    }

    /// How long `key` is still refused for `cost` units, if it is.
    pub(crate) fn refused_for(&self, key: &str, cost: u64) -> Option<u64> {
        let d = self.table.check_n(key, cost.min(COST_MASK)).ok()?;
        (!d.is_allowed()).then(|| d.retry_after_nanos())
    }

    /// Redis refused `cost` units of `key` for `retry_after_ns` from now.
    pub(crate) fn block(&self, key: &str, cost: u64, retry_after_ns: u64) {
        let now = portero::Clock::now(self.table.clock());
        // Whole ms, rounded down: the cache never refuses past Redis's own answer.
        let until_ms = now.saturating_add(retry_after_ns) / NANOS_PER_MS;
        if until_ms > now / NANOS_PER_MS && cost > 0 {
            let op = BLOCK | (until_ms << COST_BITS) | cost.min(COST_MASK);
            let _ = self.table.check_n(key, op);
        }
    }
}
