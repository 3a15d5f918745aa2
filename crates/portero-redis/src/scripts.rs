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

/// The time and the deadline, shared by every script.
macro_rules! preamble {
    () => {
        r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local deadline = tonumber(ARGV[1])
if deadline > 0 and now > deadline then
  return {2, 0, 0, 0, now}
end
"#
    };
}

/// GCRA. `KEYS[1]` holds the TAT in µs; `ARGV` = deadline, interval T (µs), burst B,
/// cost n. Admit iff `TAT ≤ now + B·T − n·T`; then `TAT ← max(TAT, now) + n·T`, and
/// the key expires when the limiter would be full again (an idle key holds no
/// information).
pub(crate) const GCRA: &str = concat!(
    preamble!(),
    r#"
local interval = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local span = interval * burst
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
local limit = now + span - interval * cost
if tat > limit then
  local backlog = tat - now
  return {0, math.floor(math.max(span - backlog, 0) / interval), tat - limit, backlog, now}
end
local new_tat = math.max(tat, now) + interval * cost
local ahead = new_tat - now
if ahead > 0 then
  redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', math.ceil(ahead / 1000))
end
return {1, math.floor((span - ahead) / interval), 0, ahead, now}
"#
);

/// Fixed window starting at a key's first admitted request (`INCR` + `EXPIRE` on
/// first use, made exact for weighted costs: the count is checked before it is raised,
/// so a rejection writes nothing). `ARGV` = deadline, limit, window (ms), cost.
pub(crate) const FIXED_WINDOW: &str = concat!(
    preamble!(),
    r#"
local limit = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used + cost > limit then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl < 0 then ttl = window end
  return {0, math.max(limit - used, 0), ttl * 1000, ttl * 1000, now}
end
local n = redis.call('INCRBY', KEYS[1], cost)
if n == cost then
  redis.call('PEXPIRE', KEYS[1], window)
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then ttl = window end
return {1, math.max(limit - n, 0), 0, ttl * 1000, now}
"#
);

/// Sliding window counter, windows aligned on Redis's clock: `KEYS[1]` is a hash
/// `{i: window index, p: previous count, c: current count}`; `ARGV` = deadline,
/// limit L, window W (µs), cost n. The same exact integer rule as portero's
/// `SlidingWindowCounter`: admit iff `p·(W − elapsed) + c·W < (L − n + 1)·W`, and the
/// same retry-after (later in this window as `p`'s weight falls, else in the next,
/// where `c` becomes `p`). Every product stays below 2^53 because `L·W ≤ 2^52` is
/// checked before.
pub(crate) const SLIDING_COUNTER: &str = concat!(
    preamble!(),
    r#"
local l = tonumber(ARGV[2])
local w = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local index = math.floor(now / w)
local st = redis.call('HMGET', KEYS[1], 'i', 'p', 'c')
local si = tonumber(st[1])
local p = tonumber(st[2]) or 0
local c = tonumber(st[3]) or 0
if si == nil or si < index - 1 then
  p, c = 0, 0
elseif si == index - 1 then
  p, c = c, 0
elseif si > index then
  -- Redis's clock went back (a failover): the stored window, as at its start.
  index = si
end
local start = index * w
local elapsed = math.max(now - start, 0)
local to_end = start + w - now
local weighted = p * (w - elapsed) + c * w
local remaining = math.floor(math.max(l * w - weighted, 0) / w)
local reset = 0
if c > 0 then reset = to_end + w elseif p > 0 then reset = to_end end
local k = l + 1 - cost
if cost == 0 then
  return {1, remaining, 0, reset, now}
end
if weighted < k * w then
  c = c + cost
  redis.call('HSET', KEYS[1], 'i', string.format('%d', index), 'p', string.format('%d', p), 'c', string.format('%d', c))
  redis.call('PEXPIRE', KEYS[1], math.ceil((to_end + w) / 1000))
  local left = math.floor(math.max(l * w - (p * (w - elapsed) + c * w), 0) / w)
  return {1, left, 0, to_end + w, now}
end
-- Smallest elapsed e >= 0 with prev·(W − e) < kk·W.
local function first_fit(prev, kk)
  local have, lim = prev * w, kk * w
  if have < lim then return 0 end
  return math.floor((have - lim) / prev) + 1
end
local retry = nil
if c < k then
  local e = first_fit(p, k - c)
  if e < w then retry = to_end - (w - elapsed) + (e - elapsed) end
end
if retry == nil then retry = to_end + first_fit(c, k) end
return {0, remaining, math.max(retry, 1), reset, now}
"#
);

/// Sliding log: `KEYS[1]` is a sorted set with **one entry per admitted request**,
/// scored by its time (µs), its member `"time:seq:cost"`; `KEYS[2]` is a hash `{n: live
/// units, s: sequence}`. `ARGV` = deadline, limit L, window W (µs), cost. Entries at
/// or before `now − W` have expired (the window is `(now − W, now]`); admit iff the
/// live units plus the cost are at most `L`. Exact — never more than L in any window.
/// A rejection writes nothing except dropping expired entries.
pub(crate) const SLIDING_LOG: &str = concat!(
    preamble!(),
    r#"
local l = tonumber(ARGV[2])
local w = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local function cost_of(member)
  return tonumber(string.match(member, ':(%d+)$'))
end
local cut = string.format('%d', now - w)
local used = tonumber(redis.call('HGET', KEYS[2], 'n') or '0')
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', cut)
if #gone > 0 then
  for _, m in ipairs(gone) do used = used - cost_of(m) end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', cut)
  if used <= 0 or redis.call('ZCARD', KEYS[1]) == 0 then
    used = 0
    redis.call('DEL', KEYS[2])
  else
    redis.call('HSET', KEYS[2], 'n', string.format('%d', used))
  end
end
-- When the newest entry expires, the log is empty.
local function reset_after()
  local e = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if #e == 0 then return 0 end
  return tonumber(e[2]) + w - now
end
if used + cost > l then
  -- Walk from the oldest entry until enough units have expired to fit the cost.
  local need, freed, rank = used + cost - l, 0, 0
  while true do
    local batch = redis.call('ZRANGE', KEYS[1], rank, rank + 63, 'WITHSCORES')
    if #batch == 0 then break end
    for i = 1, #batch, 2 do
      freed = freed + cost_of(batch[i])
      if freed >= need then
        return {0, math.max(l - used, 0), tonumber(batch[i + 1]) + w - now, reset_after(), now}
      end
    end
    rank = rank + 64
  end
  return {0, math.max(l - used, 0), w, reset_after(), now}
end
if cost == 0 then
  return {1, l - used, 0, reset_after(), now}
end
local seq = redis.call('HINCRBY', KEYS[2], 's', 1)
redis.call('ZADD', KEYS[1], string.format('%d', now), string.format('%d:%d:%d', now, seq, cost))
redis.call('HSET', KEYS[2], 'n', string.format('%d', used + cost))
redis.call('PEXPIRE', KEYS[1], math.ceil(w / 1000))
redis.call('PEXPIRE', KEYS[2], math.ceil(w / 1000))
return {1, l - used - cost, 0, w, now}
"#
);
