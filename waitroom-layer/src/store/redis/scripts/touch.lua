if redis.call('EXISTS', KM) == 0 then return redis.error_reply(NOEVENT) end
-- ARGV: now, idle timeout, then the sessions (up to TOUCH_CHUNK): an active one's idle deadline moves; an admitted
-- one claims its pass (turns active, keeping when it was let in), as CLAIM does. Their records in one HMGET, the
-- deadlines in one ZADD, the claimed records in one HSET.
local now, idle = int(ARGV[1]), int(ARGV[2])
if #ARGV < 3 then return 1 end
local deadline = fmt(now + idle)
local sids = {}
for i = 3, #ARGV do sids[#sids + 1] = ARGV[i] end
local got = redis.call('HMGET', KS, unpack(sids))
local zs, claimed = {}, {}
for i, sid in ipairs(sids) do
  local st, n, t = unpacked(got[i])
  if st == 'A' or st == 'a' then
    zs[#zs + 1], zs[#zs + 2] = deadline, sid
    if st == 'a' then claimed[#claimed + 1], claimed[#claimed + 2] = sid, 'A' .. struct.pack('>I5>I6', n, t) end
  end
end
if #claimed > 0 then redis.call('HSET', KS, unpack(claimed)) end
if #zs > 0 then redis.call('ZADD', KA, 'XX', 'GT', unpack(zs)) end
return 1
