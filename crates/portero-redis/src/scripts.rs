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
