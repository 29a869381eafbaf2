local m = meta()
if not m then return redis.error_reply(NOEVENT) end
local now, arrival, abandon, maxscan, slot = int(ARGV[1]), int(ARGV[2]), int(ARGV[3]), int(ARGV[4]), int(ARGV[5])
local turnmax, window = int(ARGV[6]), int(ARGV[7])
-- Ended records are kept for the return window (at least an abandon grace) by the clock of the last tick (`rec`).
local keep = math.max(window, abandon)
if now > REF or KEEP ~= keep or m.arr ~= ARGV[2] or m.abn ~= ARGV[3] then
  REF, KEEP = math.max(REF, now), keep
  NOW = REF
  redis.call('HSET', KM, 'tnow', fmt(REF), 'keep', fmt(keep), 'arr', ARGV[2], 'abn', ARGV[3])
end
-- One call's budget: at most `maxscan` steps in all (a finish read from the stream, an expired session, one let in,
-- skipped, turned away or ended, an empty pre-queue bucket passed), so no call's work grows with the line, the
-- pre-queue or the capacity. A part that stops at the budget sets `more`: the room calls again.
local left, more = maxscan, 0
-- The most sessions one run of the head takes (one ZPOPMIN, one HMGET) and one HSET or ZADD writes.
local RUN = 256
-- Whether session sid, number n, polled within the grace: its mark in `pseen` (pre-queue; one read, and the
-- drawn who polled before the opening are found at once), or its bit in one of the `seen` slots covering
-- [now - abandon, now] (rounded out to whole slots, in the session's favour; newest first).
local function seen(sid, n)
  if int(redis.call('HGET', pseen_of(sid), sid)) + abandon >= now then return true end
  for s = math.floor(now / slot), math.floor((now - abandon) / slot), -1 do
    if redis.call('GETBIT', KN .. ':' .. fmt(s), n) == 1 then return true end
  end
  return false
end
local drew = 0
if draw_due(m, now) then draw(m, now); drew = 1 end
-- Finishes recorded by others as bare stream entries since the last tick: they leave the active count now.
local fcur = m.fcur or '0-0'
local count = math.min(1000, left)
local fin = redis.call('XRANGE', KF, '(' .. fcur, '+', 'COUNT', count)
left = left - #fin
if #fin == count then more = 1 end
if #fin > 0 then
  for _, e in ipairs(fin) do
    local f = {}
    for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
    -- `a 1`: the writer applied it already (the room's finish, the verifier's sink script).
    if f.s and f.a ~= '1' then finish(m, f.s, int(f.n)) end
  end
  redis.call('HSET', KM, 'fcur', fin[#fin][1])
end
local expired = {}
local admitted, abandoned, turned, missed = {}, {}, {}, {}
-- Let in and not come within the arrival window (a phone asleep as its turn came, a tab throttled to a poll a
-- minute): the place frees, and the turn is kept for the return window as for one passed while away (a missed
-- record, counted missed and named with them, ended by the report when the window passes): back within it, the
-- person goes in at the next free place. Once: one let in again from the returning queue (in KAGAIN until it
-- claims) that does not come either expires, as an idle active session does; so a page that polls within the
-- grace but never comes for its pass cannot hold a place at the front again and again.
if left > 0 then expired = redis.call('ZRANGEBYSCORE', KA, '-inf', fmt(now), 'LIMIT', 0, left) end
if #expired > 0 then
  local ended, zs = {}, {}
  for _, sid in ipairs(expired) do
    local st, n = rec(sid)
    if st == 'a' and redis.call('SREM', KAGAIN, sid) == 0 then
      put(sid, 'm', n, now)
      missed[#missed + 1] = sid
      zs[#zs + 1], zs[#zs + 2] = fmt(now), sid
    else
      if st then put(sid, 'e', n, 0) end
      ended[#ended + 1] = sid
    end
  end
  if #zs > 0 then missed_add(m, now, zs) end
  -- The lowest scores are the ones just read.
  redis.call('ZREMRANGEBYRANK', KA, 0, #expired - 1)
  if #ended > 0 then redis.call('HINCRBY', KM, 'expired', #ended) end
  left = left - #expired
  if left == 0 then more = 1 end
  expired = ended
end
-- The sessions the drawn head passed while away beside the budget (`drawn_run`): written missed when passed, kept
-- in this list until a call names them, out of what is left of its budget.
local KU = KX .. ':unrep'
-- Last in every call: the missed sessions whose return window has passed (what is left of the budget, oldest
-- first) end abandoned. The `missed` sets hold only sessions still missed (a return takes its entry out).
local function report()
  -- First those passed while away and not yet named (RUN at a time, within what is left of the budget): named
  -- now, and those still missed go into this second's `missed` set, scored by when they were passed (the
  -- record's time, no later than now). This second's, not their own: a set then holds what the calls of a second
  -- name (out of their budgets), where a tick passes tens of thousands at one time. So the report, reading the sets oldest first, ends them a return window after they
  -- were named, late by as long as the naming waited (the door passes up to PASS_MAX a call, the calls name what
  -- their budgets leave: 600,000 passed at the opening are named over some 30 ticks); a come-back is judged by
  -- the record's time all the same. A come-back looks in the record's second and misses the entry, which the
  -- report then lets go (the record says who is still missed).
  while left > 0 do
    local ask = math.min(left, RUN)
    local u = redis.call('LPOP', KU, ask)
    if not u then break end
    local got, zs = redis.call('HMGET', KS, unpack(u)), {}
    for i, sid in ipairs(u) do
      missed[#missed + 1] = sid
      local st, _, t = unpacked(got[i])
      if st == 'm' then zs[#zs + 1], zs[#zs + 2] = fmt(math.min(t, now)), sid end
    end
    if #zs > 0 then missed_add(m, now, zs) end
    left = left - #u
    if #u < ask then break end
  end
  if left == 0 and redis.call('EXISTS', KU) == 1 then more = 1 end
  local cutoff, want = now - window, math.max(left, 1)
  local due, taken = {}, {}
  -- The lowest entries of `key` up to the cutoff, as many as are still wanted (ZRANGEBYSCORE reads them in
  -- score order, so they are its first ranks). Returns how many.
  local function take(key)
    local z = redis.call('ZRANGEBYSCORE', key, '-inf', fmt(cutoff), 'LIMIT', 0, want - #due)
    if #z > 0 then taken[#taken + 1] = {key, #z} end
    for _, sid in ipairs(z) do due[#due + 1] = sid end
    return #z
  end
  take(KX)
  -- The seconds' sets from the oldest that may hold anyone: one passed wholly and read to its end is empty once
  -- these are ended, and the next report starts after it. At most 64 seconds a call (empty ones after a quiet
  -- spell cost a read each); the next call goes on.
  local xlo = (m.xlo and m.xlo ~= '') and int(m.xlo) or nil
  local upto, steps = math.floor(cutoff / 1000), 0
  while xlo and xlo <= upto and #due < want and steps < 64 do
    steps = steps + 1
    local asked = want - #due
    if take(xkey(xlo * 1000)) < asked and xlo < upto then xlo = xlo + 1 else break end
  end
  if xlo and steps == 64 and xlo <= upto then more = 1 end
  if xlo and fmt(xlo) ~= m.xlo then
    m.xlo = fmt(xlo)
    redis.call('HSET', KM, 'xlo', m.xlo)
  end
  -- With no budget left, one is read only to say whether there is more.
  if #due > left then due, taken, more = {}, {}, 1 end
  if left > 0 and #due == left then more = 1 end
  for _, sid in ipairs(due) do
    local st, n, t = rec(sid)
    -- Missed at the entry's time or before it: an entry older than the record (left in an earlier second by a
    -- come-back of a version before, which took it out of `missed` only) does not end a session missed again
    -- since; it only goes.
    if st == 'm' and t <= cutoff then
      put(sid, 'x', n, 0)
      abandoned[#abandoned + 1] = sid
    end
  end
  for _, k in ipairs(taken) do redis.call('ZREMRANGEBYRANK', k[1], 0, k[2] - 1) end
  if #abandoned > 0 then redis.call('HINCRBY', KM, 'abandoned', #abandoned) end
  -- Whoever this call wrote missed: at the head (`decide`) and behind it (`sweep`).
  if #missed > 0 then redis.call('HINCRBY', KM, 'missed', #missed) end
  return {drew, admitted, missed, abandoned, expired, turned, more}
end
local served, last = int(m.served), int(m.last)
-- A missed record: number n, missed now.
local function missed_rec(n) return 'm' .. struct.pack('>I5>I6', n, now) end
-- A run of the line from held number h to hi (one LINE_BLOCK at most): the held numbers in order, at most k, and
-- each one's session (`''`: held with no entry, passed as `take` passes it), from the held bits in one GETRANGE
-- and the sessions in one ZRANGEBYSCORE; and the first number not looked at.
local function held_run(h, hi, k)
  local base = h - h % LINE_BLOCK
  local b0 = math.floor(h / 8)
  local bits = redis.call('GETRANGE', KHELD, fmt(b0), fmt(math.floor(hi / 8)))
  local z = redis.call('ZRANGEBYSCORE', line_set(h), fmt(h % LINE_BLOCK), fmt(hi % LINE_BLOCK), 'WITHSCORES')
  local at = {}
  for i = 1, #z, 2 do
    local n = base + tonumber(z[i + 1])
    if at[n] == nil then at[n] = z[i] end
  end
  local ns, sids = {}, {}
  local n = h
  while n <= hi and #ns < k do
    local byte = string.byte(bits, math.floor(n / 8) - b0 + 1) or 0
    if math.floor(byte / 2 ^ (7 - n % 8)) % 2 == 1 then
      ns[#ns + 1] = n
      sids[#sids + 1] = at[n] or ''
    end
    n = n + 1
  end
  return ns, sids, n
end
-- The first `count` (at least one) of a run from `held_run` leave `line`: out of its set in one ZREM, their held
-- bits cleared in one BITFIELD, and one version of their block of the live line (a LINE_BLOCK lies within one;
-- instances only compare versions, so one a run makes no difference).
local function leave_run(ns, sids, count)
  local clear, gone = {}, {}
  for i = 1, count do
    clear[#clear + 1], clear[#clear + 2], clear[#clear + 3], clear[#clear + 4] = 'SET', 'u1', fmt(ns[i]), 0
    if sids[i] ~= '' then gone[#gone + 1] = sids[i] end
  end
  if #gone > 0 then redis.call('ZREM', line_set(ns[1]), unpack(gone)) end
  redis.call('BITFIELD', KHELD, unpack(clear))
  block_changed(math.floor(ns[1] / LIVE_BLOCK), true)
end
-- Behind the head: the people the door passed while away in a run (`next_live`) are written missed here, as the
-- door writes one it finds away itself (record `m`, `missed`, out of `line` and `line:held`), a block's run at a
-- time, with what is left of the call's budget (the door went first: it never waits for them); the rest by the
-- next calls. `meta.swept`: how far behind the head it got (every bit still set in `line:held` up to `served` is
-- such a person). A session among them that polls first is written missed by COME_BACK. Returns the budget used.
local function sweep(budget)
  local swept, given = int(m.swept), budget
  while budget > 0 and swept < served do
    local h = redis.call('BITPOS', KHELD, 1, fmt(swept + 1), fmt(served), 'BIT')
    if h < 0 then
      swept = served
      break
    end
    local hi = math.min(h - h % LINE_BLOCK + LINE_BLOCK - 1, served)
    local ns, sids, next_n = held_run(h, hi, math.min(budget, RUN))
    local got = redis.call('HMGET', KS, unpack(sids))
    local recs, zs = {}, {}
    for i, sid in ipairs(sids) do
      local st, rn = unpacked(got[i])
      if st == 'w' and rn == ns[i] then
        recs[#recs + 1], recs[#recs + 2] = sid, missed_rec(rn)
        zs[#zs + 1], zs[#zs + 2] = fmt(now), sid
        missed[#missed + 1] = sid
      end
    end
    if #recs > 0 then
      redis.call('HSET', KS, unpack(recs))
      missed_add(m, now, zs)
    end
    leave_run(ns, sids, #ns)
    budget = budget - #ns
    -- On from the last one taken, or from the block's end when the run took all it held.
    swept = next_n > hi and hi or ns[#ns]
  end
  if budget == 0 and swept < served then more = 1 end
  if swept ~= int(m.swept) then redis.call('HSET', KM, 'swept', fmt(swept)) end
  return given - budget
end
local dlo = int(m.dbase)
local dhi = dlo + int(m.dcount)
local drawn = m.drawn == '1'
local index, cur, cur_end = nil, -1, -1
local function starts(b) return (struct.unpack('>I4', index, 4 * b + 1)) end
-- Takes the next place at the head, from number n on. In the drawn segment: the first of the bucket holding
-- position n (found by binary search in `drawidx`). Elsewhere: the lowest number someone holds in `line`, found
-- with one BITPOS over `line:held` (bounded by the drawn segment when it lies ahead); the numbers nobody holds
-- before it (tickets not redeemed, places kept after a restore, old places of sessions moved to the front) are
-- passed in that one step: they have no entry anywhere, so they cost no scan and no time per number. Returns the number taken and its session, or nil when nobody holds a number from n on (the head
-- stays where it is, as when the line is empty).
-- The bucket holding position pos of the drawn segment becomes `cur` (it ends at `cur_end`); the head only moves on.
local function reach(pos)
  if pos < cur_end then return end
  index = index or redis.call('GET', KP)
  local lo, hi = 0, 2 ^ int(m.dbits) - 1
  while lo < hi do
    local mid = math.floor((lo + hi + 1) / 2)
    if starts(mid) <= pos then lo = mid else hi = mid - 1 end
  end
  cur, cur_end = lo, starts(lo + 1)
end
local function take(n)
  if drawn and n > dlo and n <= dhi then
    reach(n - dlo - 1)
    local sid = redis.call('ZPOPMIN', bucket(cur))[1]
    if not sid then return nil end
    return n, sid
  end
  local upto = last
  if drawn and n <= dlo and dhi > dlo then upto = dlo end
  local h = redis.call('BITPOS', KHELD, 1, fmt(n), fmt(upto), 'BIT')
  if h < 0 then
    if upto == last then return nil end
    -- Nobody holds a number before the drawn segment: passed, and the segment's first is next.
    return take(upto + 1)
  end
  local key, s = line_set(h), fmt(h % LINE_BLOCK)
  local sid = redis.call('ZRANGEBYSCORE', key, s, s, 'LIMIT', 0, 1)[1]
  if sid then redis.call('ZREM', key, sid) end
  held(h, 0)
  return h, sid or ''
end
if turning_away(m) then
  -- Closed or sold out: turn away up to `turnmax` sessions, those standing ahead of the line first (below), then
  -- the head of the line (each number counts as served, as a skip does), then the pre-queue (before the draw every join is in a bucket, so the pre-queue holds
  -- `joined - turned` sessions; empty buckets are passed over, at most 2^dbits of them per tick).
  local budget = math.min(turnmax, left)
  -- Those moved to the front first.
  while budget > 0 do
    local sid = redis.call('LPOP', KFRONT)
    if not sid then break end
    local st, n = rec(sid)
    if st == 'w' and n == 0 then
      put(sid, 't', 0, 0)
      turned[#turned + 1] = sid
      budget = budget - 1
    end
  end
  -- Then those taken back after the head passed them, then the returning queue: they stand ahead of the head.
  local z = redis.call('ZPOPMIN', KB, budget)
  for i = 1, #z, 2 do
    put(z[i], 't', int(z[i + 1]), 0)
    turned[#turned + 1] = z[i]
    budget = budget - 1
  end
  while budget > 0 do
    local sid = redis.call('LPOP', KT)
    if not sid then break end
    local st, n = rec(sid)
    if st == 'r' then
      put(sid, 't', n, 0)
      turned[#turned + 1] = sid
      budget = budget - 1
    end
  end
  while budget > 0 and served < last do
    local n, sid = take(served + 1)
    if not n then break end
    served = n
    budget = budget - 1
    if rec(sid) then
      put(sid, 't', n, 0)
      turned[#turned + 1] = sid
    end
  end
  if not drawn then
    -- The buckets from where the last call stopped (`meta.tcur`; the ones before it were emptied, and joins take
    -- no place while turning away), round to the start again should someone have joined one meanwhile (seats came
    -- back, then went). An empty bucket passed costs a sixteenth of a step (one ZPOPMIN that finds nothing, against
    -- a pop and a record written for a session turned away).
    local pq = int(m.joined) - int(m.turned)
    local b, nb, steps = int(m.tcur), 2 ^ int(m.dbits), 16 * left
    while budget > 0 and pq > 0 and steps > 0 do
      if b >= nb then b = 0 end
      local z = redis.call('ZPOPMIN', bucket(b), math.min(budget, pq))
      if #z > 0 then counted(b, -#z / 2) end
      for i = 1, #z, 2 do
        put(z[i], 't', 0, 0)
        turned[#turned + 1] = z[i]
        budget, pq = budget - 1, pq - 1
      end
      if #z == 0 then b = b + 1 end
      steps = steps - 1
    end
    if pq > 0 and (budget == 0 or steps == 0) then more = 1 end
    redis.call('HSET', KM, 'tcur', fmt(b))
  end
  if budget == 0 then more = 1 end
  left = left - (math.min(turnmax, left) - budget)
  if served ~= int(m.served) then redis.call('HSET', KM, 'served', fmt(served)) end
  if #turned > 0 then redis.call('HINCRBY', KM, 'turned', #turned) end
  left = left - sweep(left)
  return report()
end
local open = m.paused ~= '1' and m.closed ~= '1' and (m.opens == '' or now >= int(m.opens))
local total, sold, held = inv(m)
if open and total and total <= sold + held then open = false end
-- Just restored after Redis forgot the on-sale: nobody is let in while the owners of the numbers come back.
if m.runtil and now < int(m.runtil) then open = false end
if not open then
  left = left - sweep(left)
  return report()
end
local room = int(m.cap) - redis.call('ZCARD', KA)
local now_s = math.floor(now / 1000)
local recent = 0
local r = redis.call('HGETALL', KR)
for i = 1, #r, 2 do
  if int(r[i]) + 60 <= now_s then redis.call('HDEL', KR, r[i]) else recent = recent + int(r[i + 1]) end
end
if m.apm ~= '' then room = math.min(room, int(m.apm) - recent) end
-- Never more people let in within a minute than there are seats to pick from.
if total then room = math.min(room, total - sold - held - recent) end
local scanned, nadm = 0, 0
-- Sessions an operator moved to the front go first (no number; their old places are empty and skipped).
while nadm < room and scanned < left do
  local sid = redis.call('LPOP', KFRONT)
  if not sid then break end
  scanned = scanned + 1
  local st, n = rec(sid)
  if st == 'w' and n == 0 then
    put(sid, 'a', 0, now)
    redis.call('ZADD', KA, fmt(now + arrival), sid)
    nadm = nadm + 1
    admitted[#admitted + 1] = sid
  end
end
-- Those taken back after the head passed them were in front of everyone in line: they go first. Then the returning
-- queue (those who came back after missing their turn), then the head of the line. Whoever is away when taken is
-- missed (keeps the turn for the return window) and the next present one goes in. (The queues' lengths are read
-- once: no pop per admission while they are empty, as they nearly always are.)
local nreclaimed = redis.call('ZCARD', KB)
local nback = redis.call('LLEN', KT)
-- Decides for the session at number n, record time t, whether it is let in or missed (away), and collects the
-- writes: one HSET of the records, one ZADD of the admissions and one of the misses for up to RUN sessions.
local recs, adm_zs, miss_zs, unrep = {}, {}, {}, {}
local function write()
  if #recs > 0 then redis.call('HSET', KS, unpack(recs)) end
  if #adm_zs > 0 then redis.call('ZADD', KA, unpack(adm_zs)) end
  if #miss_zs > 0 then missed_add(m, now, miss_zs) end
  if #unrep > 0 then redis.call('RPUSH', KU, unpack(unrep)) end
  recs, adm_zs, miss_zs, unrep = {}, {}, {}, {}
end
-- `known`: whether it was seen within the grace, when the caller read it already (nil: not read). `quiet`: one
-- found away is named by a later call (`KU`), not this one. Returns whether it was let in.
local function decide(sid, n, t, known, quiet)
  local away = t + abandon < now
  if away then
    if known == nil then away = not seen(sid, n) else away = not known end
  end
  if away then
    recs[#recs + 1], recs[#recs + 2] = sid, missed_rec(n)
    if quiet then
      -- Into its `missed` set when named (`report`).
      unrep[#unrep + 1] = sid
    else
      miss_zs[#miss_zs + 1], miss_zs[#miss_zs + 2] = fmt(now), sid
      missed[#missed + 1] = sid
    end
  else
    -- An admitted record keeps when it was let in (for an operator's lookup).
    recs[#recs + 1], recs[#recs + 2] = sid, 'a' .. struct.pack('>I5>I6', n, now)
    adm_zs[#adm_zs + 1], adm_zs[#adm_zs + 2] = fmt(now + arrival), sid
    nadm = nadm + 1
    admitted[#admitted + 1] = sid
  end
  -- Commands of a bounded size (Lua's stack, and Redis's own work per command).
  if #recs >= 2 * RUN then write() end
  return not away
end
-- A run of sessions at the head (`sids[i]` at number `number(i)`; `''`: a number with nobody's entry): their
-- records in one HMGET (times no earlier than `floor`), and for those whose last sign of life is older than the
-- grace, whether they were seen within it: their `pseen` marks in one HMGET, then, for the ones without a fresh
-- mark, their bits in each `seen` slot covering the grace, one GETRANGE a slot (as `seen` reads them one GETBIT at
-- a time). Returns the states, the times and the marks (nil: not read, the time is within the grace).
local function run_states(sids, number, floor, since)
  local got = redis.call('HMGET', KS, unpack(sids))
  local st, ts, stale = {}, {}, {}
  for i, sid in ipairs(sids) do
    local s, _, t = unpacked(got[i])
    if not s and sid ~= '' then s, _, t = rec(sid) end
    st[i], ts[i] = s, math.max(t or 0, floor)
    if s and ts[i] + abandon < now then stale[#stale + 1] = i end
  end
  local marks = {}
  if #stale == 0 then return st, ts, marks end
  -- Their marks, one HMGET a `pseen` hash they fall in.
  local q, by = {}, {}
  for j, i in ipairs(stale) do
    local k = pseen_of(sids[i])
    local g = by[k]
    if not g then g = {}; by[k] = g end
    g[#g + 1] = j
  end
  for k, g in pairs(by) do
    local ask = {}
    for x, j in ipairs(g) do ask[x] = sids[stale[j]] end
    local got = redis.call('HMGET', k, unpack(ask))
    for x, j in ipairs(g) do q[j] = got[x] end
  end
  local unseen = {}
  for j, i in ipairs(stale) do
    marks[i] = int(q[j]) + abandon >= now
    if not marks[i] then unseen[#unseen + 1] = i end
  end
  -- A run's numbers lie within a few hundred of each other (a block of `line`, or a bucket's consecutive
  -- numbers): each slot's bits for them are one GETRANGE of a few dozen bytes, tested here.
  local lo, hi = math.huge, 0
  for _, i in ipairs(unseen) do
    local n = number(i)
    if n < lo then lo = n end
    if n > hi then hi = n end
  end
  local b0 = math.floor(lo / 8)
  for sl = math.floor(now / slot), math.max(math.floor((now - abandon) / slot), since), -1 do
    if #unseen == 0 then break end
    local bytes = redis.call('GETRANGE', KN .. ':' .. fmt(sl), fmt(b0), fmt(math.floor(hi / 8)))
    local still = {}
    for _, i in ipairs(unseen) do
      local n = number(i)
      local byte = string.byte(bytes, math.floor(n / 8) - b0 + 1) or 0
      if math.floor(byte / 2 ^ (7 - n % 8)) % 2 == 1 then marks[i] = true else still[#still + 1] = i end
    end
    unseen = still
  end
  return st, ts, marks
end
-- The head in the drawn segment, a run at a time: the bucket's front (the segment's next numbers) read with one
-- ZRANGE, their records in one HMGET and, for those whose last sign of life is older than the grace, their
-- pre-queue marks in another (`run_states`); those decided leave the bucket in one ZREMRANGEBYRANK. People away
-- cost the door none of its budget: only those let in count against it, and at most PASS_MAX away a call are
-- passed beside it (each written missed at once, and named by a later call out of its budget: `KU`). A drawn
-- person's number comes from their bucket's position (they joined before anyone knew it), so unlike `line`'s the
-- drawn segment has no bitmaps by number to pass a run by; this costs Redis a few microseconds a person away,
-- and PASS_MAX bounds what a call does. Each run reads up to `peek` past what the room and the budget allow (8 at
-- first, four times more after each run that passed someone), so a door that lets in a few at a time reads a few.
-- Returns false when the head is not in the drawn segment (or its bucket is empty), 'stop' when this call passed
-- as many as it may.
local PASS_MAX = 128
local npassed, peek = 0, 8
-- No `seen` slot before the draw's holds a drawn number's mark (the numbers did not exist): run_states reads the
-- slots from the one before the draw's on (all of the grace's for an on-sale drawn by a version that did not keep `meta.dat`).
-- A slot's margin: the draw's time is the clock of whichever caller ran it, and another instance's clock a little
-- behind marks a drawn number in the slot before.
local dslot = (m.dat and m.dat ~= '') and math.floor(int(m.dat) / slot) - 1 or -1
local function drawn_run()
  local n0 = served + 1
  if not (drawn and n0 > dlo and n0 <= dhi) then return false end
  if npassed >= PASS_MAX then return 'stop' end
  local pos = n0 - dlo - 1
  reach(pos)
  local want = math.min(room - nadm, left - scanned)
  local k = math.min(want + peek, cur_end - pos, RUN)
  if want < 1 or k < 1 then return false end
  local sids = redis.call('ZRANGE', bucket(cur), 0, k - 1)
  if #sids == 0 then return false end
  local floor = (m.dfloor and m.dfloor ~= '') and int(m.dfloor) or 0
  local first = served
  local st, ts, marks = run_states(sids, function(i) return first + i end, floor, dslot)
  local taken, before = 0, npassed
  for i, sid in ipairs(sids) do
    if nadm >= room or scanned >= left or npassed >= PASS_MAX then break end
    served = served + 1
    taken = i
    if st[i] and decide(sid, served, ts[i], marks[i], true) then
      scanned = scanned + 1
    else
      npassed = npassed + 1
    end
  end
  redis.call('ZREMRANGEBYRANK', bucket(cur), 0, taken - 1)
  if npassed > before then peek = math.min(4 * peek, PASS_MAX) end
  return true
end
-- People away in a row cost the door nothing a person. A number in `line` may be live when it is held and its bit
-- is set in one of the bitmaps covering the grace, of the marks (`seen:<slot>`) or of the joins (`seen:j:<slot>`
-- and `seen:js:<second>`, per block, written by `line_put`): whoever `decide` would find present has one (a
-- session's join time is in a joins' second and slot, its marks in the marks' slots), so a number without one is
-- away, and one with one is decided as before (bitmaps round the grace up: such a number may still be away).
-- `next_live` finds the first such number in from..upto with bit operations over whole windows of LIVE_WIN numbers
-- (each bitmap's bytes and the held bytes copied into two scratch keys, OR-ed and AND-ed by Redis, then one
-- BITPOS): a few commands on strings of at most 8 KB a bitmap, whoever holds the window's numbers, where writing
-- one person missed is a record, a `missed` entry and a `line` entry. At most `wins_left` windows a call. Returns
-- the number, or nil and the first number not looked at.
local LIVE_WIN = JOIN_BLOCK
local wins_left = 16
-- The bitmaps covering the grace, newest first: the marks' slots (as `seen` reads them), the joins' slots but the
-- oldest, and for that one the joins' seconds from the grace's start (a join is exact to its time in the record,
-- where a mark is only to its slot: a whole slot would keep a run who joined and went quiet looking present for up
-- to 10 s more, to be decided one by one). Each with whether it is kept per block (the joins').
local live_keys = {}
local oldest = math.floor((now - abandon) / slot)
for sl = math.floor(now / slot), oldest, -1 do
  live_keys[#live_keys + 1] = {KN .. ':' .. fmt(sl), false}
  if sl > oldest then live_keys[#live_keys + 1] = {KN .. ':j:' .. fmt(sl), true} end
end
for sec = math.floor((now - abandon) / 1000), (oldest + 1) * slot / 1000 - 1 do
  live_keys[#live_keys + 1] = {KN .. ':js:' .. fmt(sec), true}
end
local function live_at(n)
  local blk, off = ':' .. fmt(math.floor(n / LIVE_WIN)), fmt(n % LIVE_WIN)
  for _, k in ipairs(live_keys) do
    local bit
    if k[2] then bit = redis.call('GETBIT', k[1] .. blk, off) else bit = redis.call('GETBIT', k[1], fmt(n)) end
    if bit == 1 then return true end
  end
  return false
end
-- A window is a block of LIVE_WIN numbers (from `from` on in the first): bytes s0..e0 of it.
local function next_live(from, upto)
  local acc, tmp = KHELD .. ':live', KHELD .. ':tmp'
  local n, found = from, nil
  while wins_left > 0 and n <= upto do
    wins_left = wins_left - 1
    local b = math.floor(n / LIVE_WIN)
    local base = b * LIVE_WIN
    local hi = math.min(upto, base + LIVE_WIN - 1)
    local s0, e0 = math.floor((n - base) / 8), math.floor((hi - base) / 8)
    local first = true
    for _, k in ipairs(live_keys) do
      local bytes
      if k[2] then
        bytes = redis.call('GETRANGE', k[1] .. ':' .. fmt(b), fmt(s0), fmt(e0))
      else
        bytes = redis.call('GETRANGE', k[1], fmt(base / 8 + s0), fmt(base / 8 + e0))
      end
      if first then
        redis.call('SET', acc, bytes)
        first = false
      elseif #bytes > 0 then
        redis.call('SET', tmp, bytes)
        redis.call('BITOP', 'OR', acc, acc, tmp)
      end
    end
    redis.call('SET', tmp, redis.call('GETRANGE', KHELD, fmt(base / 8 + s0), fmt(base / 8 + e0)))
    redis.call('BITOP', 'AND', acc, acc, tmp)
    local from_bit = base + 8 * s0
    local p = redis.call('BITPOS', acc, 1, fmt(n - from_bit), fmt(hi - from_bit), 'BIT')
    if p >= 0 then
      found = from_bit + p
      break
    end
    n = base + LIVE_WIN
  end
  redis.call('DEL', acc, tmp)
  return found, n
end
-- The head in `line` (outside the drawn segment), a run at a time, as `take` would go one number at a time: from
-- the next held number (one BITPOS), the numbers of its block of LINE_BLOCK (so at most 128) up to what the budget
-- allows (stopping at the admission that fills the room: people away take no place), their held bits in one
-- GETRANGE, their sessions in one ZRANGEBYSCORE, their records in one HMGET and their marks as drawn_run reads
-- them, and the writes (one ZREM, one BITFIELD of the bits cleared, one version of their block of the live line):
-- a few commands a run instead of a dozen a session, so the door crosses people who went quiet faster. Returns
-- false when the head is not there (the caller goes one at a time).
local function fifo_run()
  local n0 = served + 1
  if served >= last or (drawn and n0 > dlo and n0 <= dhi) then return false end
  local upto = last
  if drawn and n0 <= dlo and dhi > dlo then upto = dlo end
  local h = redis.call('BITPOS', KHELD, 1, fmt(n0), fmt(upto), 'BIT')
  if h < 0 then return false end
  if not live_at(h) then
    -- Away: the door passes the whole run of people away from h on in one look, writing nothing for them (the
    -- sweep below writes them missed behind the head), and goes on from the first one here.
    local p, stop = next_live(h + 1, upto)
    if not p then
      served = math.min(stop, upto + 1) - 1
      if stop <= upto then return 'stop' end
      return true
    end
    served, h = p - 1, p
  end
  local hi = math.min(h - h % LINE_BLOCK + LINE_BLOCK - 1, upto)
  -- Up to the budget: people away take no place, so the run stops at the admission that fills the room instead.
  local k = math.min(left - scanned, RUN)
  if k < 1 or nadm >= room then return false end
  local ns, sids = held_run(h, hi, k)
  local st, ts, marks = run_states(sids, function(i) return ns[i] end, 0, -1)
  local taken = 0
  for i, sid in ipairs(sids) do
    if nadm >= room then break end
    served = ns[i]
    scanned = scanned + 1
    taken = i
    if st[i] then decide(sid, ns[i], ts[i], marks[i]) end
  end
  leave_run(ns, sids, taken)
  return true
end
while nadm < room and scanned < left do
  local sid, n, t
  local again = false
  local dr = nreclaimed == 0 and nback == 0 and drawn_run()
  if dr == 'stop' then
    more = 1
    break
  elseif dr then
    -- done above
  elseif nreclaimed > 0 then
    local z = redis.call('ZPOPMIN', KB)
    nreclaimed = nreclaimed - 1
    scanned = scanned + 1
    local st, _, lt = rec(z[1])
    if st then sid, n, t = z[1], int(z[2]), lt end
  elseif nback > 0 then
    local back = redis.call('LPOP', KT)
    nback = nback - 1
    scanned = scanned + 1
    if back then
      local st, bn, bt = rec(back)
      if st == 'r' then sid, n, t, again = back, bn, bt, true end
    end
  else
    local fr = fifo_run()
    -- The door looked as far as one call may: the next call goes on.
    if fr == 'stop' then
      more = 1
      break
    end
    if not fr then
      if served >= last then break end
      n, sid = take(served + 1)
      if not n then break end
      served = n
      scanned = scanned + 1
      local st, _, lt = rec(sid)
      t = lt
      if not st then sid = nil end
      if sid and drawn and n > dlo and n <= dhi and m.dfloor and m.dfloor ~= '' then t = math.max(t, int(m.dfloor)) end
    end
  end
  if sid and decide(sid, n, t) and again then redis.call('SADD', KAGAIN, sid) end
end
write()
if nadm < room and scanned >= left then more = 1 end
left = left - scanned
left = left - sweep(left)
if served ~= int(m.served) then
  redis.call('HSET', KM, 'served', fmt(served))
  -- Moved sessions whose old number the head has passed are ordinary again.
  redis.call('ZREMRANGEBYSCORE', KMOVED, '-inf', fmt(served))
end
if nadm > 0 then
  redis.call('HINCRBY', KM, 'admitted', nadm)
  redis.call('HINCRBY', KR, fmt(now_s), nadm)
end
return report()
