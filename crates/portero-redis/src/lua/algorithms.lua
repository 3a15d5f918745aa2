-- Each algorithm is a function of (k1, k2, a, b, cost, now) that only reads, returning
-- outcome, remaining, retry_after_us, reset_after_us, commit (five values, not a
-- table: a table per limit cost more than the arithmetic): outcome 1 admitted, 0
-- rejected; commit, for an admission that changes the state, is a function that
-- writes it and returns the admission's mark (what its settlement finds it by: the
-- TAT it left, its window's start or index, its log entry's sequence). Deciding is
-- separate from charging, so a stack can decide every limit before it charges any,
-- without reading anything twice.
--
-- Each algorithm's settle function (at the end) moves an admitted request's units
-- from its estimate to its real cost, toward a twin that was charged the real cost
-- at the start: units not used come back only while they are still the request's
-- (never more than that twin would have), units above the estimate are charged past
-- the limit (debt that later requests wait out).

-- GCRA: k1 holds the TAT (µs). a = interval T, b = burst B.
local function gcra(k1, _, interval, burst, cost, now)
  local span = interval * burst
  local tat = tonumber(redis.call('GET', k1) or '0')
  local limit = now + span - interval * cost
  if tat > limit then
    local backlog = tat - now
    return 0, math.floor(math.max(span - backlog, 0) / interval), tat - limit, backlog
  end
  local new_tat = math.max(tat, now) + interval * cost
  local ahead = new_tat - now
  local commit = nil
  if ahead > 0 and cost > 0 then
    commit = function()
      redis.call('SET', k1, string.format('%d', new_tat), 'PX', math.ceil(ahead / 1000))
      return new_tat
    end
  end
  return 1, math.floor((span - ahead) / interval), 0, ahead, commit
end

-- Fixed window from a key's first admitted request: k1 is a hash {s: start, n: used}.
-- a = limit, b = window W (µs).
local function fixed_window(k1, _, limit, w, cost, now)
  local st = redis.call('HMGET', k1, 's', 'n')
  local s, used = tonumber(st[1]), tonumber(st[2]) or 0
  if s == nil or now >= s + w then
    s, used = nil, 0
  end
  -- Full again when the open window ends (an admitted request opens one).
  local reset = 0
  if s ~= nil then reset = s + w - now elseif cost > 0 then reset = w end
  if used + cost > limit then
    return 0, math.max(limit - used, 0), reset, reset
  end
  local commit = nil
  if cost > 0 then
    local start = s or now
    commit = function()
      redis.call('HSET', k1, 's', string.format('%d', start), 'n', string.format('%d', used + cost))
      redis.call('PEXPIRE', k1, math.ceil((start + w - now) / 1000))
      return start
    end
  end
  return 1, limit - used - cost, 0, reset, commit
end

-- Sliding window counter, windows aligned on the clock: k1 is a hash
-- {i: window index, p: previous count, c: current count}. a = limit L, b = window W.
local function sliding_counter(k1, _, l, w, cost, now)
  local index = math.floor(now / w)
  local st = redis.call('HMGET', k1, 'i', 'p', 'c')
  local si = tonumber(st[1])
  local p = tonumber(st[2]) or 0
  local c = tonumber(st[3]) or 0
  if si == nil or si < index - 1 then
    p, c = 0, 0
  elseif si == index - 1 then
    p, c = c, 0
  elseif si > index then
    -- The clock went back (a failover): the stored window, as at its start.
    index = si
  end
  local start = index * w
  local elapsed = math.max(now - start, 0)
  local to_end = start + w - now
  local weighted = p * (w - elapsed) + c * w
  -- The largest cost that fits: c fits iff weighted < (l - c + 1)·w, so l - floor(weighted / w).
  local function largest_fit(weighted)
    return math.max(l - math.floor(weighted / w), 0)
  end
  local remaining = largest_fit(weighted)
  local reset = 0
  if c > 0 then reset = to_end + w elseif p > 0 then reset = to_end end
  local k = l + 1 - cost
  -- No units: admitted unless a settlement charged the key past its limit.
  if cost == 0 and weighted < k * w then
    return 1, remaining, 0, reset
  end
  if cost > 0 and weighted < k * w then
    c = c + cost
    local commit = function()
      redis.call('HSET', k1, 'i', string.format('%d', index), 'p', string.format('%d', p), 'c', string.format('%d', c))
      redis.call('PEXPIRE', k1, math.ceil((to_end + w) / 1000))
      return index
    end
    local left = largest_fit(p * (w - elapsed) + c * w)
    return 1, left, 0, to_end + w, commit
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
  return 0, remaining, math.max(retry, 1), reset
end

-- Sliding log: k1 is a sorted set with one entry per admitted request, scored by its
-- time, member "time:seq:cost"; k2 a hash {n: live units, s: sequence}.
-- a = limit L, b = window W. The window is (now − W, now].
local function sliding_log(k1, k2, l, w, cost, now)
  local function cost_of(member)
    return tonumber(string.match(member, ':(%d+)$'))
  end
  local cut = string.format('%d', now - w)
  local live = '(' .. cut
  local used = tonumber(redis.call('HGET', k2, 'n') or '0')
  local gone = redis.call('ZRANGEBYSCORE', k1, '-inf', cut)
  if #gone > 0 then
    for _, m in ipairs(gone) do used = used - cost_of(m) end
    if used <= 0 or redis.call('ZCARD', k1) == #gone then used = 0 end
  end
  -- When the newest live entry expires, the log is empty.
  local function reset_after()
    local e = redis.call('ZRANGEBYSCORE', k1, live, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    local newest = redis.call('ZRANGE', k1, -1, -1, 'WITHSCORES')
    if #e == 0 or #newest == 0 then return 0 end
    return tonumber(newest[2]) + w - now
  end
  if used + cost > l then
    -- Walk from the oldest live entry until enough units have expired to fit the cost.
    local need, freed, offset = used + cost - l, 0, 0
    while true do
      local batch = redis.call('ZRANGEBYSCORE', k1, live, '+inf', 'WITHSCORES', 'LIMIT', offset, 64)
      if #batch == 0 then break end
      for i = 1, #batch, 2 do
        freed = freed + cost_of(batch[i])
        if freed >= need then
          return 0, math.max(l - used, 0), tonumber(batch[i + 1]) + w - now, reset_after()
        end
      end
      offset = offset + 64
    end
    return 0, math.max(l - used, 0), w, reset_after()
  end
  if cost == 0 then
    return 1, l - used, 0, reset_after()
  end
  local commit = function()
    -- Expired entries leave with the admission that finds them (a rejection writes
    -- nothing; the next decision subtracts them again).
    if #gone > 0 then redis.call('ZREMRANGEBYSCORE', k1, '-inf', cut) end
    local seq = redis.call('HINCRBY', k2, 's', 1)
    redis.call('ZADD', k1, string.format('%d', now), string.format('%d:%d:%d', now, seq, cost))
    redis.call('HSET', k2, 'n', string.format('%d', used + cost))
    redis.call('PEXPIRE', k1, math.ceil(w / 1000))
    redis.call('PEXPIRE', k2, math.ceil(w / 1000))
    return seq
  end
  return 1, l - used - cost, 0, w, commit
end

-- Settlements: (k1, k2, a, b, estimate, real, mark, at, now), writing only. Counts
-- stay within [0, 2^52] (exact in a double).
local function count_after(count, estimate, real)
  return string.format('%d', math.min(math.max(count + real - estimate, 0), 2 ^ 52))
end

-- GCRA (mark: the TAT the admission left). Back: the request's units still ahead of
-- now, `min((e − r)·T, mark − now)`, never below now (its units already drained came
-- back by themselves). Charged: `(r − e)·T` more, past the burst.
local function gcra_settle(k1, _, interval, _, estimate, real, mark, _, now)
  local tat = tonumber(redis.call('GET', k1) or '0')
  local new_tat
  if real < estimate then
    local back = math.min((estimate - real) * interval, math.max(mark - now, 0))
    if back <= 0 or tat <= now then return end
    new_tat = math.max(tat - back, now)
  else
    -- At most 2^51 µs (71 years) ahead: beyond that doubles stop being exact.
    new_tat = math.min(math.max(tat, now) + (real - estimate) * interval, math.max(tat, now + 2 ^ 51))
  end
  if new_tat <= now then
    redis.call('DEL', k1)
  else
    redis.call('SET', k1, string.format('%d', new_tat), 'PX', math.ceil((new_tat - now) / 1000))
  end
end

-- Fixed window (mark: the window's start): the count of that window, while it is open.
local function fixed_window_settle(k1, _, _, w, estimate, real, mark, _, now)
  local st = redis.call('HMGET', k1, 's', 'n')
  local s, used = tonumber(st[1]), tonumber(st[2])
  if s ~= mark or used == nil or now >= s + w then return end
  redis.call('HSET', k1, 'n', count_after(used, estimate, real))
end

-- Sliding counter (mark: the window's index): that window's count, current or previous.
local function sliding_counter_settle(k1, _, _, _, estimate, real, mark, _, _)
  local st = redis.call('HMGET', k1, 'i', 'p', 'c')
  local si = tonumber(st[1])
  if si == nil then return end
  local field = nil
  if mark == si then field = 'c' elseif mark == si - 1 then field = 'p' end
  if field == nil then return end
  local count = tonumber(st[(field == 'c') and 3 or 2]) or 0
  redis.call('HSET', k1, field, count_after(count, estimate, real))
end

-- Sliding log (mark: the entry's sequence; at: its time): the entry rewritten at its
-- real cost (removed at 0), while it is in the window.
local function sliding_log_settle(k1, k2, _, w, estimate, real, mark, at, now)
  local member = string.format('%d:%d:%d', at, mark, estimate)
  local score = tonumber(redis.call('ZSCORE', k1, member))
  if score == nil or score <= now - w then return end
  redis.call('ZREM', k1, member)
  if real > 0 then
    redis.call('ZADD', k1, string.format('%d', at), string.format('%d:%d:%d', at, mark, real))
  end
  local used = tonumber(redis.call('HGET', k2, 'n') or '0')
  redis.call('HSET', k2, 'n', count_after(used, estimate, real))
end
