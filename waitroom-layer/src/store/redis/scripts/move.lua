local m = meta()
if not m then return redis.error_reply(NOEVENT) end
local sid, now, maxmoved = ARGV[1], int(ARGV[2]), int(ARGV[3])
local p = place(m, sid)
if not p or p[2] ~= 'w' or p[3] <= int(m.served) then return false end
if redis.call('ZCOUNT', KMOVED, '(' .. m.served, '+inf') >= maxmoved then return false end
local n = p[3]
local st, raw = rec(sid)
if st == 'p' then
  -- In a drawn bucket: an empty member with the same score keeps everyone else's number; the head skips it.
  local key = bucket(raw)
  local score = redis.call('ZSCORE', key, sid)
  if not score then return false end
  redis.call('ZREM', key, sid)
  redis.call('ZADD', key, score, '\0' .. sid)
else
  -- In `line`, behind the drawn segment: out of its set; the head passes the number as one nobody holds.
  if not redis.call('ZSCORE', line_set(n), sid) then return false end
  redis.call('ZREM', line_set(n), sid)
  held(n, 0)
end
put(sid, 'w', 0, now)
redis.call('RPUSH', KFRONT, sid)
redis.call('ZADD', KMOVED, n, sid)
return {sid, 'w', 0}
