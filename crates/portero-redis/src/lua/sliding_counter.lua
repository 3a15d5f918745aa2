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
