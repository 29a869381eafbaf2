local m = meta()
if not m then return redis.error_reply(NOEVENT) end
local sid, now, window = ARGV[1], int(ARGV[2]), int(ARGV[3])
if now > NOW then NOW = now end
local st, n, t = rec(sid)
local counted = ''
if st == 'w' and passed(m, n) then
  -- Passed while away and not written missed yet (the tick writes such runs behind the head): missed now, and
  -- its window counts from now (in its favour: it was passed at most a few ticks ago).
  redis.call('ZREM', line_set(n), sid)
  held(n, 0)
  redis.call('HINCRBY', KM, 'missed', 1)
  st, t = 'm', now
end
if st == 'm' then
  redis.call('ZREM', xkey(t), sid)
  redis.call('ZREM', KX, sid)
  if t + window > now then
    -- Back within the window: to the back of the returning queue, seen now.
    put(sid, 'r', n, now)
    redis.call('RPUSH', KT, sid)
    redis.call('HINCRBY', KM, 'returned', 1)
    counted = 'r'
  else
    -- Back too late (no tick ended it yet): abandoned (and told: `X`), and this look counts as the late return.
    put(sid, 'X', n, 0)
    redis.call('HINCRBY', KM, 'abandoned', 1)
    redis.call('HINCRBY', KM, 'retlate', 1)
    counted = 'l'
  end
elseif st == 'x' then
  -- The first look at a session abandoned after its window: a late return (counted once; `X` marks it told). It
  -- keeps when it ended.
  ended(sid, 'X', n, t)
  redis.call('HINCRBY', KM, 'retlate', 1)
  counted = 'l'
end
local p = place(m, sid)
if not p then return false end
local o = out(p)
o[4] = counted
return o
