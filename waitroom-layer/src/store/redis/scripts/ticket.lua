local m = meta()
if not m then return redis.error_reply(NOEVENT) end
local now = int(ARGV[1])
-- Closed or sold out: no place, nothing counted.
if turning_away(m) then return -1 end
if draw_due(m, now) then draw(m, now) end
redis.call('HINCRBY', KM, 'tickets', 1)
-- Before the draw: a pre-queue ticket (no number). After it (or without a draw): the next number, and nothing
-- else written.
if m.drawn ~= '1' then return 0 end
return redis.call('HINCRBY', KM, 'last', 1)
