local m = meta()
if not m then return redis.error_reply(NOEVENT) end
local o = settings(m)
local pq = 0
-- Before the draw every join went to the pre-queue; those turned away left it.
if m.drawn ~= '1' then pq = int(m.joined) - int(m.turned) end
local rest = {m.drawn, pq, m.last, m.served, redis.call('ZCARD', KA), m.joined, m.admitted, m.finished,
  m.expired, m.abandoned, fmt(int(m.turned)), m.orders, m.seats, m.rupto or '', redis.call('LLEN', KT),
  fmt(int(m.missed)), fmt(int(m.returned)), fmt(int(m.retlate))}
for _, v in ipairs(rest) do o[#o + 1] = v end
-- Sessions moved to the front whose old number the head has not passed.
o[#o + 1] = redis.call('ZRANGEBYSCORE', KMOVED, '(' .. m.served, '+inf', 'LIMIT', 0, 1000)
o[#o + 1] = fmt(int(m.tickets))
o[#o + 1] = fmt(int(m.redeemed))
-- The live line ("The numbers count the living"): the version counter, the drawn segment (`dbase`, `dcount`: its
-- numbers are held by its buckets), the old numbers in it of sessions moved out of it to the front, then, for
-- each block of `line:held` with a bit set, its index, its version and its bytes, or '' when ARGV (pairs of
-- block, version: what the caller holds already) names that version.
o[#o + 1] = fmt(int(m.lver))
o[#o + 1] = fmt(int(m.dbase))
o[#o + 1] = fmt(int(m.dcount))
local dlo = math.max(int(m.served), int(m.dbase))
o[#o + 1] = redis.call('ZRANGEBYSCORE', KMOVED, '(' .. fmt(dlo), fmt(int(m.dbase) + int(m.dcount)), 'WITHSCORES',
  'LIMIT', 0, 1000)
local known = {}
for i = 3, #ARGV, 2 do known[ARGV[i]] = ARGV[i + 1] end
local blocks, blk = {}, redis.call('HGETALL', KBLK)
for i = 1, #blk, 2 do
  local b, v = blk[i], blk[i + 1]
  local bytes = ''
  if known[b] ~= v then
    local from = int(b) * LIVE_BLOCK / 8
    bytes = redis.call('GETRANGE', KHELD, fmt(from), fmt(from + LIVE_BLOCK / 8 - 1))
  end
  blocks[#blocks + 1] = b
  blocks[#blocks + 1] = v
  blocks[#blocks + 1] = bytes
end
o[#o + 1] = blocks
-- Sessions let in since the caller's last snapshot: `active` from the caller's cursor (ARGV[1], a score; ARGV[2]
-- members at that score read already) up to the deadline an admission of the last tick has (`meta.tnow` plus the
-- arrival window it was given, `meta.arr`): a claimed session's deadline is the idle timeout away, beyond it. A page
-- of at most 250 (ADMITTED_PER_SNAPSHOT): session, deadline, line number (0 for none), in deadline order.
local upto = int(m.tnow) + int(m.arr)
local page = redis.call('ZRANGEBYSCORE', KA, ARGV[1] or '-inf', fmt(upto), 'WITHSCORES', 'LIMIT', int(ARGV[2]), 250)
local adm = {}
if #page > 0 then
  local sids = {}
  for i = 1, #page, 2 do sids[#sids + 1] = page[i] end
  local got = redis.call('HMGET', KS, unpack(sids))
  for i, sid in ipairs(sids) do
    local _, n = unpacked(got[i])
    adm[#adm + 1], adm[#adm + 2], adm[#adm + 3] = sid, page[2 * i], n or 0
  end
end
o[#o + 1] = adm
return o
