-- The one script: check (or peek at) one or more limits, all or none.
--
-- ARGV[1] the caller's deadline on Redis's clock (µs; 0: none). ARGV[2] the time to
-- decide at (µs): 0 in production, where the script reads Redis's TIME; only tests set
-- it. ARGV[3] 1 to peek (decide, write nothing). Then four per limit: algorithm
-- (1 GCRA, 2 fixed window, 3 sliding counter, 4 sliding log), its two parameters, the
-- cost. KEYS: two per limit.
--
-- Returns {status, now, then four per limit}: status 2 = too late (nothing done),
-- 1 = decided. Every limit is decided before any is charged; only if all admit are
-- they charged, so a rejection by one writes nothing anywhere.
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
local out = {1, now}
local function run(write)
  local all = true
  for i = 1, limits do
    local a = 3 + (i - 1) * 4
    local decide = algorithms[tonumber(ARGV[a + 1])]
    local r = decide(KEYS[2 * i - 1], KEYS[2 * i], tonumber(ARGV[a + 2]),
      tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), now, write)
    for j = 1, 4 do out[2 + (i - 1) * 4 + j] = r[j] end
    if r[1] ~= 1 then all = false end
  end
  return all
end
if run(false) and ARGV[3] ~= '1' then
  run(true)
end
return out
