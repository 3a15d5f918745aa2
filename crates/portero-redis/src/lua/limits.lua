-- The one script: check (or peek at) one or more limits, all or none.
--
-- ARGV[1] the caller's deadline on Redis's clock (µs; 0: none). ARGV[2] the time to
-- decide at (µs): 0 in production, where the script reads Redis's TIME; only tests set
-- it. ARGV[3] the mode: 0 check, 1 peek (decide, write nothing), 2 lease (one limit:
-- take as many units as fit, up to the cost). Then four per limit: algorithm
-- (1 GCRA, 2 fixed window, 3 sliding counter, 4 sliding log), its two parameters, the
-- cost. KEYS: two per limit.
--
-- Returns {status, now, then five per limit: outcome, remaining, retry-after, reset,
-- units taken}: status 2 = too late (nothing done), 1 = decided. Every limit is decided
-- before any is charged; only if all admit are they charged, so a rejection by one
-- writes nothing anywhere.
local now = tonumber(ARGV[2])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local deadline = tonumber(ARGV[1])
if deadline > 0 and now > deadline then
  return {2, now}
end
local algorithms = {gcra, fixed_window, sliding_counter, sliding_log}
local limits = (#ARGV - 3) / 4
local mode = ARGV[3]
local out = {1, now}
local function limit(i, cost, write)
  local a = 3 + (i - 1) * 4
  local decide = algorithms[tonumber(ARGV[a + 1])]
  local r = decide(KEYS[2 * i - 1], KEYS[2 * i], tonumber(ARGV[a + 2]),
    tonumber(ARGV[a + 3]), cost or tonumber(ARGV[a + 4]), now, write)
  for j = 1, 4 do out[2 + (i - 1) * 5 + j] = r[j] end
  out[2 + (i - 1) * 5 + 5] = 0
  if write and r[1] == 1 then out[2 + (i - 1) * 5 + 5] = cost or tonumber(ARGV[a + 4]) end
  return r[1] == 1
end
if mode == '2' then
  -- A lease: the most units up to the cost that fit now (binary search), all taken.
  local lo, hi = 0, tonumber(ARGV[7])
  while lo < hi do
    local mid = math.floor((lo + hi + 1) / 2)
    if limit(1, mid, false) then lo = mid else hi = mid - 1 end
  end
  if lo > 0 then limit(1, lo, true) else limit(1, 1, false) end
  return out
end
local all = true
for i = 1, limits do
  if not limit(i, nil, false) then all = false end
end
if all and mode == '0' then
  for i = 1, limits do limit(i, nil, true) end
end
return out
