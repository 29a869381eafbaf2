local m = meta()
if not m then return redis.error_reply(NOEVENT) end
local p = place(m, ARGV[1])
if not p then return false end
-- Admitted and active records keep when they were let in; others their join time, which is not reported.
local at = 0
if p[2] == 'a' or p[2] == 'A' then at = p[4] end
return {p[1], p[2], p[3], at}
