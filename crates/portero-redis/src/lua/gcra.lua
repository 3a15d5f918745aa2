local interval = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local span = interval * burst
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
local limit = now + span - interval * cost
if tat > limit then
  local backlog = tat - now
  return {0, math.floor(math.max(span - backlog, 0) / interval), tat - limit, backlog, now}
end
local new_tat = math.max(tat, now) + interval * cost
local ahead = new_tat - now
if ahead > 0 then
  redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', math.ceil(ahead / 1000))
end
return {1, math.floor((span - ahead) / interval), 0, ahead, now}
