local m = meta()
if not m then return redis.error_reply(NOEVENT) end
local now = int(ARGV[1])
-- How many first contacts this call numbers (a room's batch, or one).
local count = int(ARGV[2])
-- Closed or sold out: no place, nothing counted.
if turning_away(m) then return -1 end
if draw_due(m, now) then draw(m, now) end
redis.call('HINCRBY', KM, 'tickets', count)
-- Before the draw: pre-queue tickets (no number). After it (or without a draw): the next `count` numbers, the
-- last of which is returned, and nothing else written.
if m.drawn ~= '1' then return 0 end
return redis.call('HINCRBY', KM, 'last', count)
