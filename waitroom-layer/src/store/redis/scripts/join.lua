local m = meta()
if not m then return redis.error_reply(NOEVENT) end
local sid, acct, now = ARGV[1], ARGV[2], int(ARGV[3])
if acct ~= '' then
  local owner = redis.call('HGET', KC, acct)
  if owner then
    local p = place(m, owner)
    if p and not terminal(p[2]) then return out(p) end
  end
end
local p = place(m, sid)
if p and not terminal(p[2]) then return out(p) end
-- Closed or sold out: no place, nothing recorded, not counted.
if turning_away(m) then return {sid, 't', 0} end
if draw_due(m, now) then draw(m, now) end
local st, n = 'p', 0
if m.drawn == '1' then
  st, n = 'w', int(m.last) + 1
  redis.call('HSET', KM, 'last', fmt(n))
  line_put(m, n, sid, now)
else
  n = enqueue(m, sid, ARGV[4])
end
put(sid, st, n, now)
if st == 'p' then n = 0 end
if acct ~= '' then redis.call('HSET', KC, acct, sid) end
redis.call('HINCRBY', KM, 'joined', 1)
return {sid, st, n}
