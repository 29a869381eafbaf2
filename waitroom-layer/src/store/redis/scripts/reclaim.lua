local m = meta()
if not m then return redis.error_reply(NOEVENT) end
local sid, now = ARGV[1], int(ARGV[3])
local p = place(m, sid)
if p then return out(p) end
if turning_away(m) then return false end
if ARGV[2] == '' then
  -- A pre-queue mark: back into the pre-queue before the draw (the draw is random: nothing is lost).
  if m.drawn == '1' then return false end
  put(sid, 'p', enqueue(m, sid, ARGV[4]), now)
  return {sid, 'p', 0}
end
local n = int(ARGV[2])
if n <= 0 then return false end
local last, served = int(m.last), int(m.served)
local dlo = int(m.dbase)
local dhi = dlo + int(m.dcount)
if n > last then
  -- After everyone: the numbers between stay free for their owners, and no later join takes this one.
  if n - last - 1 > int(ARGV[5]) then return false end
  line_put(m, n, sid, now)
  redis.call('HSET', KM, 'last', fmt(n))
elseif n > served then
  -- A free number ahead: its entry in `line` (which holds the numbers after the head outside the drawn segment).
  if m.drawn == '1' and n > dlo and n <= dhi then return false end
  if not line_put(m, n, sid, now) then return false end
else
  -- The head passed it while the store did not know it: ahead of the line, within the late window only.
  if not m.rupto or n > int(m.rupto) or now > int(m.rlate) then return false end
  if #redis.call('ZRANGEBYSCORE', KB, n, n) > 0 then return false end
  redis.call('ZADD', KB, n, sid)
end
put(sid, 'w', n, now)
return {sid, 'w', n}
