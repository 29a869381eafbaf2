if redis.call('EXISTS', KM) == 0 then return redis.error_reply(NOEVENT) end
local now, idle = int(ARGV[1]), int(ARGV[2])
local deadline = fmt(now + idle)
for i = 3, #ARGV do
  local sid = ARGV[i]
  if rec(sid) == 'A' then redis.call('ZADD', KA, 'XX', 'GT', deadline, sid) end
end
return 1
