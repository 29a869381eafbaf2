local m = meta()
if not m then return redis.error_reply(NOEVENT) end
local p = place(m, ARGV[1])
if not p then return false end
return out(p)
