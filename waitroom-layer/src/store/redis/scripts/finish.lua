local m = meta()
if not m then return redis.error_reply(NOEVENT) end
local sid, seats = ARGV[1], int(ARGV[2])
-- The finish ends the record now (by the room's clock), not at the last tick.
if int(ARGV[3]) > NOW then NOW = int(ARGV[3]) end
if not finish(m, sid, seats) then return 0 end
-- Tell every room instance and verifier replica (see "Finishing across processes").
announce(sid, seats, ARGV[3], ARGV[4])
return 1
