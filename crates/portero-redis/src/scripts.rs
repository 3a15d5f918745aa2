//! The Lua scripts. Each runs atomically in Redis (no other command runs between its
//! read, its decision and its write) and reads the time with `TIME`, Redis's own
//! clock, so instances whose clocks disagree still share one time axis.
//!
//! Every script takes `ARGV[1]` = a deadline in µs on Redis's clock (0: none) and
//! returns `{outcome, remaining, retry_after_us, reset_after_us, now_us}`: outcome 1
//! admitted, 0 rejected, 2 too late (the caller had already given up and answered
//! with its outage policy, so the script does nothing at all). A rejection writes
//! nothing. Times are microseconds: Lua numbers are doubles, exact for integers below
//! 2^53 µs (285 years), which nanoseconds since 1970 are not.
//!
//! Work per call: O(1) commands for GCRA, the fixed window and the sliding counter;
//! for the sliding log O(log E + x + min(E, cost)) where `E` is the key's live entry
//! count (at most one entry per admitted request, never one per unit) and `x` the
//! entries that expired since the last call (each entry is added once and expires
//! once, so x is amortised O(1)).

/// GCRA. `KEYS[1]` holds the TAT in µs; `ARGV` = deadline, interval T (µs), burst B,
/// cost n. Admit iff `TAT ≤ now + B·T − n·T`; then `TAT ← max(TAT, now) + n·T`, and
/// the key expires when the limiter would be full again (an idle key holds no
/// information).
pub(crate) const GCRA: &str = concat!(
    include_str!("lua/preamble.lua"),
    include_str!("lua/gcra.lua")
);

/// Fixed window starting at a key's first admitted request (`INCR` + `EXPIRE` on
/// first use, made exact for weighted costs: the count is checked before it is raised,
/// so a rejection writes nothing). `ARGV` = deadline, limit, window (ms), cost.
pub(crate) const FIXED_WINDOW: &str = concat!(
    include_str!("lua/preamble.lua"),
    include_str!("lua/fixed_window.lua")
);

/// Sliding window counter, windows aligned on Redis's clock: `KEYS[1]` is a hash
/// `{i: window index, p: previous count, c: current count}`; `ARGV` = deadline,
/// limit L, window W (µs), cost n. The same exact integer rule as portero's
/// `SlidingWindowCounter`: admit iff `p·(W − elapsed) + c·W < (L − n + 1)·W`, and the
/// same retry-after (later in this window as `p`'s weight falls, else in the next,
/// where `c` becomes `p`). Every product stays below 2^53 because `L·W ≤ 2^52` is
/// checked before.
pub(crate) const SLIDING_COUNTER: &str = concat!(
    include_str!("lua/preamble.lua"),
    include_str!("lua/sliding_counter.lua")
);

/// Sliding log: `KEYS[1]` is a sorted set with **one entry per admitted request**,
/// scored by its time (µs), its member `"time:seq:cost"`; `KEYS[2]` is a hash `{n: live
/// units, s: sequence}`. `ARGV` = deadline, limit L, window W (µs), cost. Entries at
/// or before `now − W` have expired (the window is `(now − W, now]`); admit iff the
/// live units plus the cost are at most `L`. Exact — never more than L in any window.
/// A rejection writes nothing except dropping expired entries.
pub(crate) const SLIDING_LOG: &str = concat!(
    include_str!("lua/preamble.lua"),
    include_str!("lua/sliding_log.lua")
);
