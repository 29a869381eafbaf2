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
return o
