-- Each algorithm is a function of (k1, k2, a, b, cost, now) that only reads, returning
-- outcome, remaining, retry_after_us, reset_after_us, commit (five values, not a
-- table: a table per limit cost more than the arithmetic): outcome 1 admitted, 0
-- rejected; commit, for an admission that changes the state, is a function that
-- writes it and returns the admission's mark (what its settlement finds it by: the
-- TAT it left, its window's start or index, its log entry's sequence), then, where
-- the algorithm keeps them, the ledger total it noted and the key's generation.
-- Deciding is separate from charging, so a stack can decide every limit before it
-- charges any, without reading anything twice.
--
-- Each algorithm's settle function (at the end) moves an admitted request's units
-- from its estimate to its real cost, toward a twin that was charged the real cost
-- at the start: units not used come back only while they are still the request's
-- (never more than that twin would have), units above the estimate are charged past
-- the limit (debt that later requests wait out). A key's generation is the instant
-- (µs) it was created: an admission from an earlier life of the key (reset, or
-- expired and created again) gives nothing back to the new one.

-- GCRA: k1 is a hash {t: the TAT, r: the ledger R, g: the generation, l: the log}
-- (µs). As in portero's core, R is the total by which settlements moved the TAT back,
-- and an admission notes it. `V = TAT + R` never goes back (a check moves the TAT on,
-- a settlement moves the TAT back and R on by as much), so an admission's place
-- `P = mark + noted` orders it among the others, and its slot is
-- `[P − cost·T, P)`. The log holds what settlements gave back, as runs of adjacent
-- slots `S,P,given` (at most 128; the two closest runs merged into one from the lower
-- one's start when there are more, which only gives back less). A key that is a
-- plain number is an older portero's TAT: generation 0, nothing given back yet.
-- a = interval T, b = burst B.
local GCRA_RUNS = 128

-- The TAT, R and generation (nil: no key), and whether the key is an older TAT.
local function gcra_read(k1)
  local st = redis.pcall('HMGET', k1, 't', 'r', 'g')
  if st.err then return tonumber(redis.call('GET', k1)) or 0, 0, 0, true end
  local g = tonumber(st[3])
  if g == nil then return 0, 0, nil, false end
  -- A reset's mark holds the generation alone (see `RESET` in scripts.rs).
  return tonumber(st[1]) or 0, tonumber(st[2]) or 0, g, false
end

-- Kept until the TAT is paid off, and at least a millisecond: a TAT a settlement
-- pulled back to now keeps its generation, so nothing admitted before is given back
-- to a key created again within the same microsecond.
local function gcra_write(k1, tat, r, g, legacy, now, log)
  if legacy then redis.call('DEL', k1) end
  local t, rr, gg = string.format('%d', tat), string.format('%d', r), string.format('%d', g)
  if log then
    redis.call('HSET', k1, 't', t, 'r', rr, 'g', gg, 'l', log)
  else
    redis.call('HSET', k1, 't', t, 'r', rr, 'g', gg)
  end
  redis.call('PEXPIRE', k1, math.max(math.ceil((tat - now) / 1000), 1))
end

local function gcra(k1, _, interval, burst, cost, now)
  local span = interval * burst
  local tat, r, g, legacy = gcra_read(k1)
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
      g = g or now
      gcra_write(k1, new_tat, r, g, legacy, now)
      return new_tat, r, g
    end
  end
  return 1, math.floor((span - ahead) / interval), 0, ahead, commit
end

-- Fixed window from a key's first admitted request, or (aligned) from the last whole
-- multiple of W on the clock: k1 is a hash {s: start, n: used}. a = limit, b = window
-- W (µs).
local function fixed_window(k1, _, limit, w, cost, now, aligned)
  local st = redis.call('HMGET', k1, 's', 'n')
  local s, used = tonumber(st[1]), tonumber(st[2]) or 0
  if s == nil or now >= s + w then
    s, used = nil, 0
  end
  -- Where a window opened now starts: at this request, or (aligned) at the last
  -- whole multiple of w. A stored start ahead of it (the clock went back in a
  -- failover) stays the window, as at its start.
  local opens = aligned and (now - now % w) or now
  -- Full again when the open window ends (an admitted request opens one).
  local reset = 0
  if s ~= nil then reset = s + w - now elseif cost > 0 then reset = opens + w - now end
  if used + cost > limit then
    return 0, math.max(limit - used, 0), reset, reset
  end
  local commit = nil
  if cost > 0 then
    local start = s or opens
    commit = function()
      redis.call('HSET', k1, 's', string.format('%d', start), 'n', string.format('%d', used + cost))
      redis.call('PEXPIRE', k1, math.ceil((start + w - now) / 1000))
      return start
    end
  end
  return 1, limit - used - cost, 0, reset, commit
end

-- The fixed window with windows aligned on the clock's epoch (algorithm 5).
local function aligned_window(k1, k2, limit, w, cost, now)
  return fixed_window(k1, k2, limit, w, cost, now, true)
end

-- Sliding window counter, windows aligned on the clock: k1 is a hash
-- {i: window index, p: previous count, c: current count, g: generation (absent in an
-- older portero's key: 0)}. a = limit L, b = window W.
local function sliding_counter(k1, _, l, w, cost, now)
  local index = math.floor(now / w)
  local st = redis.call('HMGET', k1, 'i', 'p', 'c', 'g')
  local si = tonumber(st[1])
  local g = tonumber(st[4]) or ((si ~= nil) and 0 or now)
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
      redis.call('HSET', k1, 'i', string.format('%d', index), 'p', string.format('%d', p), 'c', string.format('%d', c), 'g', string.format('%d', g))
      redis.call('PEXPIRE', k1, math.ceil((to_end + w) / 1000))
      return index, 0, g
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

-- GCRA's log (see `gcra`) as a list of runs {S, P, given}, by start.
local function gcra_runs(log)
  local runs = {}
  for a, b, c in string.gmatch(log or '', '(%d+),(%d+),(%d+)') do
    runs[#runs + 1] = {tonumber(a), tonumber(b), tonumber(c)}
  end
  return runs
end

-- The log with the slot [s, p) that gave back `given` added: joined to the runs it
-- touches, and the two closest runs merged while there are too many.
local function gcra_logged(runs, s, p, given)
  local i = 1
  while i <= #runs and runs[i][1] < s do i = i + 1 end
  table.insert(runs, i, {s, p, given})
  if i < #runs and runs[i + 1][1] == p then
    runs[i][2], runs[i][3] = runs[i + 1][2], runs[i][3] + runs[i + 1][3]
    table.remove(runs, i + 1)
  end
  if i > 1 and runs[i - 1][2] == s then
    runs[i - 1][2], runs[i - 1][3] = runs[i][2], runs[i - 1][3] + runs[i][3]
    table.remove(runs, i)
  end
  while #runs > GCRA_RUNS do
    local j = 1
    for k = 2, #runs - 1 do
      if runs[k + 1][1] - runs[k][2] < runs[j + 1][1] - runs[j][2] then j = k end
    end
    runs[j][2], runs[j][3] = runs[j + 1][2], runs[j][3] + runs[j + 1][3]
    table.remove(runs, j + 1)
  end
  local out = {}
  for k, run in ipairs(runs) do
    out[k] = string.format('%d,%d,%d', run[1], run[2], run[3])
  end
  return table.concat(out, ';')
end

-- GCRA (mark: the TAT the admission left, having noted the ledger at `noted`, in
-- generation `gen`). Back: the request's units still ahead of now,
-- `min((e − r)·T, mark − moved − now)`, never below now (its units already drained
-- came back by themselves), where `moved` is what settlements gave back since it was
-- admitted from slots ahead of its own: R − noted, less what the log shows came from
-- slots behind it (runs starting at or after its place), which never moved it.
-- Exact, in any order, while no time passes; nothing from an earlier generation or
-- when the ledger is below the note (a failover lost writes). Past 2^51 µs given back
-- in all, the key gives nothing back until it expires (doubles stay exact).
-- Charged: `(r − e)·T` more, past the burst.
local function gcra_settle(k1, _, interval, _, estimate, real, mark, _, now, noted, gen)
  if real == estimate then return end
  local tat, r, g, legacy = gcra_read(k1)
  if real > estimate then
    -- At most 2^51 µs (71 years) ahead: beyond that doubles stop being exact. A
    -- charge cut short there drops units the TAT no longer holds, and an admission
    -- from before could give back what is no longer counted: the key's generation
    -- moves on, so none of them gives anything back.
    local wanted = math.max(tat, now) + (real - estimate) * interval
    local new_tat = math.min(wanted, math.max(tat, now + 2 ^ 51))
    g = g or now
    if new_tat < wanted then g = g + 1 end
    gcra_write(k1, math.max(new_tat, now), r, g, legacy, now)
    return
  end
  if g == nil or g ~= gen or r < noted or tat <= now then return end
  local runs = gcra_runs(redis.call('HGET', k1, 'l'))
  local place = mark + noted
  local behind = 0
  for _, run in ipairs(runs) do
    if run[1] >= place then behind = behind + run[3] end
  end
  local moved = math.max(r - noted - behind, 0)
  local back = math.min((estimate - real) * interval, math.max(mark - moved - now, 0))
  if back <= 0 then return end
  local new_tat = math.max(tat - back, now)
  local given = tat - new_tat
  if r + given > 2 ^ 51 then return end
  local log = gcra_logged(runs, place - estimate * interval, place, given)
  gcra_write(k1, new_tat, r + given, g, legacy, now, log)
end

-- Fixed window (mark: the window's start): the count of that window, while it is
-- open. The window's opener given back whole (a real cost of 0) is kept: the twin that
-- never saw it opened its window at the next request, which the key does not keep, and
-- no placement is safe against every such twin (portero's core keeps it too) — unless
-- nothing else counts in the window, when the window goes (exact: nothing opened it).
local function fixed_window_settle(k1, _, _, w, estimate, real, mark, at, now)
  local st = redis.call('HMGET', k1, 's', 'n')
  local s, used = tonumber(st[1]), tonumber(st[2])
  if s ~= mark or used == nil or now >= s + w then return end
  if real == 0 and at == s then
    if used == estimate then redis.call('DEL', k1) end
    return
  end
  redis.call('HSET', k1, 'n', count_after(used, estimate, real))
end

-- Sliding counter (mark: the window's index, in generation `gen`): that window's
-- count, current or previous.
local function sliding_counter_settle(k1, _, _, _, estimate, real, mark, _, _, _, gen)
  local st = redis.call('HMGET', k1, 'i', 'p', 'c', 'g')
  local si = tonumber(st[1])
  if si == nil or (tonumber(st[4]) or 0) ~= gen then return end
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
