local m = meta()
if not m then return redis.error_reply(NOEVENT) end
local sid, now = ARGV[1], int(ARGV[4])
-- Known already (redeemed before, or a copy of the ticket came back first): its place, unchanged.
local p = place(m, sid)
if p then return out(p) end
-- Closed or sold out, or a ticket older than the grace: no place (the room gives a new ticket, at the back).
if turning_away(m) or int(ARGV[3]) + int(ARGV[5]) < now then return false end
local st, n = 'w', 0
if ARGV[2] == '' then
  -- A pre-queue ticket: into the pre-queue before the draw; after it, no place.
  if m.drawn == '1' then return false end
  st, n = 'p', enqueue(m, sid, ARGV[6])
else
  n = int(ARGV[2])
  if n <= 0 then return false end
  local last, served = int(m.last), int(m.served)
  local dlo = int(m.dbase)
  if m.drawn == '1' and n > dlo and n <= dlo + int(m.dcount) then return false end
  if n > last then
    -- A Redis that lost its latest writes: the number is taken, and no later ticket gets it.
    if n - last - 1 > int(ARGV[7]) then return false end
    line_put(m, n, sid, now)
    redis.call('HSET', KM, 'last', fmt(n))
  elseif n > served then
    if not line_put(m, n, sid, now) then return false end
  else
    -- The head passed it while the ticket was out: ahead of the line.
    if #redis.call('ZRANGEBYSCORE', KB, n, n) > 0 then return false end
    redis.call('ZADD', KB, n, sid)
  end
end
put(sid, st, n, now)
redis.call('HINCRBY', KM, 'joined', 1)
redis.call('HINCRBY', KM, 'redeemed', 1)
if st == 'p' then n = 0 end
return {sid, st, n}
