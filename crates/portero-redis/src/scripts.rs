//! The Lua script. It runs atomically in Redis (no other command runs between its
//! reads, its decisions and its writes) and reads the time with `TIME`, Redis's own
//! clock, so instances whose clocks disagree still share one time axis.
//!
//! One script serves every call: a check of one limit, a peek (decide, write nothing),
//! and a stack of limits checked all or none — every limit is decided first, and only
//! if all admit is any charged, so a rejection writes nothing anywhere. Each algorithm
//! is one Lua function (`lua/algorithms.lua`) with the same rule as portero's
//! in-memory algorithm of the same name:
//!
//! - **GCRA.** The key holds the TAT in µs. Admit iff `TAT ≤ now + B·T − n·T`; then
//!   `TAT ← max(TAT, now) + n·T`, and the key expires when the limiter would be full
//!   again (an idle key holds no information).
//! - **Fixed window** from a key's first admitted request, or aligned on the clock
//!   (each window starts at a whole multiple of its length since the epoch): a hash
//!   `{s: start, n: used}`, checked before it is raised (a rejection writes nothing),
//!   expiring with the window.
//! - **Sliding window counter**, windows aligned on the clock: a hash `{i: window
//!   index, p: previous count, c: current count}`; admit iff
//!   `p·(W − elapsed) + c·W < (L − n + 1)·W`, with the same exact retry-after as portero's
//!   `SlidingWindowCounter`. Every product stays below 2^53 because `L·W ≤ 2^52` is
//!   checked before.
//! - **Sliding log**: a sorted set with one entry per admitted request (member
//!   `"time:seq:cost"`) and a hash `{n: live units, s: sequence}`; the window is
//!   `(now − W, now]`; admit iff live units plus the cost are at most `L`. Exact.
//!
//! Arguments (`lua/limits.lua`): a deadline in µs on Redis's clock (0: none; the
//! script does nothing past it, so a check the caller already answered with its outage
//! policy is not charged), the time to decide at (0 in production: Redis's `TIME`; only
//! the differential tests set it), the mode (check, peek, lease, settle), then four per
//! limit. The reply is `{status, now_us, then outcome, remaining, retry_after_us,
//! reset_after_us, units taken, mark per limit}`; the mark is what a settlement finds
//! the admission by (`settle.rs`). Times are microseconds: Lua numbers are doubles, exact for integers below
//! 2^53 µs (285 years), which nanoseconds since 1970 are not.
//!
//! Work per limit: O(1) commands for GCRA, the fixed window and the sliding counter;
//! for the sliding log O(log E + x + min(E, cost)) where `E` is the key's live entry
//! count (at most one entry per admitted request, never one per unit) and `x` the
//! entries that expired since the last call (each entry is added once and expires
//! once, so x is amortised O(1)). A stack decides each limit twice (once to decide,
//! once to charge).

/// The script: the algorithms, then the dispatcher.
pub(crate) const LIMITS: &str = concat!(
    include_str!("lua/algorithms.lua"),
    include_str!("lua/limits.lua")
);

/// A reset of a key whose life is told by a generation (GCRA, the sliding counter):
/// the key's state is dropped and, for a second, its generation plus one is kept in
/// its place, so that a new life made within the same microsecond is another
/// generation and an admission from before the reset gives it nothing (a plain `DEL`
/// let a check, a reset and a check in one microsecond share one: found by an outside
/// harness). A key of an older portero (a plain number) is dropped.
pub(crate) const RESET: &str = r#"
local g = redis.pcall('HGET', KEYS[1], 'g')
redis.call('DEL', KEYS[1])
if type(g) == 'string' and tonumber(g) then
  redis.call('HSET', KEYS[1], 'g', string.format('%d', tonumber(g) + 1))
  redis.call('PEXPIRE', KEYS[1], 1000)
end
return 1
"#;
