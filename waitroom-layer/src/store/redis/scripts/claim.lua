local m = meta()
if not m then return redis.error_reply(NOEVENT) end
local sid, now, idle = ARGV[1], int(ARGV[2]), int(ARGV[3])
local p = place(m, sid)
if not p then return false end
if p[2] == 'a' or p[2] == 'A' then
  if p[2] == 'a' then redis.call('SREM', KAGAIN, sid) end
  put(sid, 'A', p[3], p[4])
  redis.call('ZADD', KA, 'XX', 'GT', fmt(now + idle), sid)
  p[2] = 'A'
end
return out(p)
