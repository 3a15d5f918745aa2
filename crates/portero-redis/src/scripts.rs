//! The Lua scripts. Each runs atomically in Redis (no other command runs between its
//! read, its decision and its write) and reads the time with `TIME`, Redis's own
//! clock, so instances whose clocks disagree still share one time axis.
//!
//! Every script returns `{allowed, remaining, retry_after_us, reset_after_us}`; a
//! rejection writes nothing. Times are microseconds: Lua numbers are doubles, exact
//! for integers below 2^53 µs (285 years), which nanoseconds since 1970 are not.

/// GCRA. `KEYS[1]` holds the TAT in µs; `ARGV` = interval T (µs), burst B, cost n.
/// Admit iff `TAT ≤ now + B·T − n·T`; then `TAT ← max(TAT, now) + n·T`, and the key
/// expires when the limiter would be full again (an idle key holds no information).
pub(crate) const GCRA: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local span = interval * burst
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
local limit = now + span - interval * cost
if tat > limit then
  local backlog = tat - now
  return {0, math.floor(math.max(span - backlog, 0) / interval), tat - limit, backlog}
end
local new_tat = math.max(tat, now) + interval * cost
local ahead = new_tat - now
if ahead > 0 then
  redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', math.ceil(ahead / 1000))
end
return {1, math.floor((span - ahead) / interval), 0, ahead}
"#;

/// Fixed window starting at a key's first admitted request (the seeds' `INCR` +
/// `EXPIRE` form, made exact for weighted costs: the count is checked before it is
/// raised, so a rejection writes nothing). `ARGV` = limit, window (ms), cost.
pub(crate) const FIXED_WINDOW: &str = r#"
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used + cost > limit then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl < 0 then ttl = window end
  return {0, math.max(limit - used, 0), ttl * 1000, ttl * 1000}
end
local n = redis.call('INCRBY', KEYS[1], cost)
if n == cost then
  redis.call('PEXPIRE', KEYS[1], window)
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then ttl = window end
return {1, math.max(limit - n, 0), 0, ttl * 1000}
"#;

/// Sliding window counter, windows aligned on Redis's clock: `KEYS[1]` is a hash
/// `{i: window index, p: previous count, c: current count}`; `ARGV` = limit L, window
/// W (µs), cost n. The same exact integer rule as portero's `SlidingWindowCounter`:
/// admit iff `p·(W − elapsed) + c·W < (L − n + 1)·W`, and the same retry-after (later
/// in this window as `p`'s weight falls, else in the next, where `c` becomes `p`).
/// Every product stays below 2^53 because `L·W ≤ 2^52` is checked before.
pub(crate) const SLIDING_COUNTER: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local l = tonumber(ARGV[1])
local w = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
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
  return {1, remaining, 0, reset}
end
if weighted < k * w then
  c = c + cost
  redis.call('HSET', KEYS[1], 'i', string.format('%d', index), 'p', string.format('%d', p), 'c', string.format('%d', c))
  redis.call('PEXPIRE', KEYS[1], math.ceil((to_end + w) / 1000))
  local left = math.floor(math.max(l * w - (p * (w - elapsed) + c * w), 0) / w)
  return {1, left, 0, to_end + w}
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
return {0, remaining, math.max(retry, 1), reset}
"#;

/// Sliding log: `KEYS[1]` is a sorted set of admitted units scored by their time (µs);
/// `ARGV` = limit L, window W (µs), cost n. Entries at or before `now − W` have
/// expired (the window is `(now − W, now]`); admit iff the live count plus `n` is at
/// most `L`. Exact — never more than L in any window — at the price of up to L entries
/// per key. A rejection writes nothing except dropping expired entries.
pub(crate) const SLIDING_LOG: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local l = tonumber(ARGV[1])
local w = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now - w))
local n = redis.call('ZCARD', KEYS[1])
local function expires(rank)
  local e = redis.call('ZRANGE', KEYS[1], rank, rank, 'WITHSCORES')
  return tonumber(e[2]) + w - now
end
if n + cost > l then
  -- The (n + cost − L)-th oldest entry must expire first; all of them, for a full reset.
  return {0, math.max(l - n, 0), expires(n + cost - l - 1), expires(n - 1)}
end
if cost == 0 then
  local reset = 0
  if n > 0 then reset = expires(n - 1) end
  return {1, l - n, 0, reset}
end
for i = 1, cost do
  redis.call('ZADD', KEYS[1], string.format('%d', now), string.format('%d:%d', now, n + i))
end
redis.call('PEXPIRE', KEYS[1], math.ceil(w / 1000))
return {1, l - n - cost, 0, w}
"#;
