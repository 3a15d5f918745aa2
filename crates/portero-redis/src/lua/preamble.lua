-- Shared by every script: Redis's clock, and the caller's deadline on it (ARGV[1]).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local deadline = tonumber(ARGV[1])
if deadline > 0 and now > deadline then
  return {2, 0, 0, 0, now}
end
