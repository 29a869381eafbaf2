local m = meta()
if not m then return redis.error_reply(NOEVENT) end
local op, v = ARGV[1], ARGV[2]
if op == 'cap' then redis.call('HSET', KM, 'cap', v)
elseif op == 'apm' then redis.call('HSET', KM, 'apm', v)
elseif op == 'pause' then redis.call('HSET', KM, 'paused', '1')
elseif op == 'resume' then redis.call('HSET', KM, 'paused', '0')
elseif op == 'open' then
  if m.opens == '' or int(m.opens) > int(v) then redis.call('HSET', KM, 'opens', v) end
elseif op == 'close' then redis.call('HSET', KM, 'closed', '1')
elseif op == 'inv' then redis.call('HSET', KM, 'inv', v)
-- The timetable: the opening (also the scheduled opening the draw's liveness rule reads), the pre-queue, the close.
elseif op == 'sched' then redis.call('HSET', KM, 'opens', v, 'sched', v, 'pqopens', ARGV[3], 'closes', ARGV[4])
end
return settings(meta())
