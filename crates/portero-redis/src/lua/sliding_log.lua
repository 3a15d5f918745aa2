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
