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
