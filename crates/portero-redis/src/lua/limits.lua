-- The one script: check (or peek at) one or more limits, all or none.
--
-- ARGV[1] the caller's deadline on Redis's clock (µs; 0: none). ARGV[2] the time to
-- decide at (µs): 0 in production, where the script reads Redis's TIME; only tests set
-- it. ARGV[3] the mode: 0 check, 1 peek (decide, write nothing), 2 lease (one limit:
-- take as many units as fit, up to the cost), 3 settle (one limit: an admission's
-- estimate, its cost, moved to the real cost; five more arguments after the limit's
-- four: the real cost, the admission's mark, its time, the ledger total it noted and
-- its key's generation), 4 debit (one limit: its cost
-- charged now, past the limit: what a settlement charges above its estimate when the
-- admission is not in Redis, a lease's units spent by an instance). Then four per limit: algorithm
-- (1 GCRA, 2 fixed window, 3 sliding counter, 4 sliding log, 5 aligned fixed window), its two parameters, the
-- cost. KEYS: one per limit, two for the sliding log (its log and its index): a call
-- declares only keys it uses, since Redis Cluster refuses multi-key calls while a slot
-- migrates.
--
-- Returns {status, now, then eight per limit: outcome, remaining, retry-after, reset,
-- units taken, the admission's mark, ledger note and generation (for a settlement; 0
-- if none)}: status 2 = too late (nothing done), 1 = decided. Every limit is decided
-- before any is charged; only if all admit are they charged, so a rejection by one
-- writes nothing anywhere, and then every limit that would have admitted reports how it
-- stands (decided again for no units), not what the refused request would have left.
local now = tonumber(ARGV[2])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local deadline = tonumber(ARGV[1])
if deadline > 0 and now > deadline then
  return {2, now}
end
local algorithms = {gcra, fixed_window, sliding_counter, sliding_log, aligned_window}
local settles = {gcra_settle, fixed_window_settle, sliding_counter_settle, sliding_log_settle,
  fixed_window_settle}
local mode = ARGV[3]
local limits = (mode == '3') and 1 or (#ARGV - 3) / 4
local out = {1, now}
-- Each limit's keys, in order: the sliding log (algorithm 4) takes two.
local first_key, next_key = {}, 1
for i = 1, limits do
  first_key[i] = next_key
  next_key = next_key + ((tonumber(ARGV[3 + (i - 1) * 4 + 1]) == 4) and 2 or 1)
end
-- Decides limit i for `cost` units (its own cost if nil), reading only; its four
-- figures go in the reply (units taken, mark, note and generation: 0 until charged).
-- Returns whether it admits, and its commit.
local function decide(i, cost)
  local a, o = 3 + (i - 1) * 4, 2 + (i - 1) * 8
  local ok, remaining, retry, reset, commit = algorithms[tonumber(ARGV[a + 1])](
    KEYS[first_key[i]], KEYS[first_key[i] + 1], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]),
    cost or tonumber(ARGV[a + 4]), now)
  out[o + 1], out[o + 2], out[o + 3], out[o + 4] = ok, remaining, retry, reset
  out[o + 5], out[o + 6], out[o + 7], out[o + 8] = 0, 0, 0, 0
  return ok == 1, commit
end
-- Charges what decide found (the units taken, the mark, note and generation go in
-- the reply).
local function charge(i, commit, cost)
  local mark, noted, gen
  if commit then mark, noted, gen = commit() end
  local o = 2 + (i - 1) * 8
  out[o + 5] = cost or tonumber(ARGV[3 + (i - 1) * 4 + 4])
  out[o + 6], out[o + 7], out[o + 8] = mark or 0, noted or 0, gen or 0
end
if mode == '3' then
  -- A settlement, then how the key stands (decided for no units).
  settles[tonumber(ARGV[4])](KEYS[1], KEYS[2], tonumber(ARGV[5]), tonumber(ARGV[6]),
    tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10]), now,
    tonumber(ARGV[11]), tonumber(ARGV[12]))
  decide(1, 0)
  return out
end
if mode == '4' then
  -- A debit, then how the key stands: GCRA's the settlement's charge (at most 2^51 µs
  -- ahead), a window's its own check with no limit, committed.
  local algorithm, a, b, cost = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
  if algorithm == 1 then
    gcra_settle(KEYS[1], KEYS[2], a, b, 0, cost, 0, 0, now)
  else
    local _, _, _, _, commit = algorithms[algorithm](KEYS[1], KEYS[2], 2 ^ 52, b, cost, now)
    if commit then commit() end
  end
  decide(1, 0)
  return out
end
if mode == '2' then
  -- A lease: the most units up to the cost that fit now (binary search), all taken.
  local lo, hi = 0, tonumber(ARGV[7])
  while lo < hi do
    local mid = math.floor((lo + hi + 1) / 2)
    if decide(1, mid) then lo = mid else hi = mid - 1 end
  end
  if lo > 0 then
    local _, commit = decide(1, lo)
    charge(1, commit, lo)
  else
    decide(1, 1)
  end
  return out
end
local commits, all = {}, true
for i = 1, limits do
  local ok, commit = decide(i, nil)
  commits[i] = commit or false
  all = all and ok
end
if all and mode == '0' then
  for i = 1, limits do charge(i, commits[i], nil) end
elseif mode == '0' then
  for i = 1, limits do
    if out[2 + (i - 1) * 8 + 1] == 1 then decide(i, 0) end
  end
end
return out
