if redis.call('HEXISTS', KM, 'cap') == 0 then return redis.error_reply(NOEVENT) end
-- ARGV: now, idle timeout, tickets, then the sessions (up to ACTIVE_CHUNK): an active one's idle deadline moves; an
-- admitted one claims its pass (turns active, keeping when it was let in), as CLAIM does. Their records in one
-- HMGET, the deadlines in one ZADD, the claimed records in one HSET. `tickets`: tickets the room gave out since its
-- last flush that no call counted (`line_tickets`' numbers, pre-queue tickets from its snapshot), added to
-- `meta.tickets`.
local now, idle, tickets = int(ARGV[1]), int(ARGV[2]), int(ARGV[3])
if tickets > 0 then redis.call('HINCRBY', KM, 'tickets', tickets) end
if #ARGV < 4 then return 1 end
local deadline = fmt(now + idle)
local sids = {}
for i = 4, #ARGV do sids[#sids + 1] = ARGV[i] end
local got = redis.call('HMGET', KS, unpack(sids))
local zs, claimed = {}, {}
for i, sid in ipairs(sids) do
  local st, n, t = unpacked(got[i])
  if st == 'A' or st == 'a' then
    zs[#zs + 1], zs[#zs + 2] = deadline, sid
    if st == 'a' then claimed[#claimed + 1], claimed[#claimed + 2] = sid, 'A' .. struct.pack('>I5>I6', n, t) end
  end
end
if #claimed > 0 then
  redis.call('HSET', KS, unpack(claimed))
  -- Claimed: no longer let in again from the returning queue (see the tick).
  local ids = {}
  for i = 1, #claimed, 2 do ids[#ids + 1] = claimed[i] end
  redis.call('SREM', KAGAIN, unpack(ids))
end
if #zs > 0 then redis.call('ZADD', KA, 'XX', 'GT', unpack(zs)) end
return 1
