local NOEVENT = 'WRNOEVENT the on-sale was not initialised'
-- A pre-queued session's record holds its draw bucket where others hold their number. After the draw its number
-- is implicit: where its bucket starts in the drawn segment, plus how many of the bucket already left the head,
-- plus its rank in what is left.
local function bucket(b) return KD .. ':' .. fmt(b) end
-- Whether the waiting session at number n (a `w` record) was passed by the head while away and is not written
-- missed yet: the head passes a run of people away at once and writes them missed behind it, a run at a time
-- (the tick's `sweep`); until then their number is below `served` with its bit still set in `line:held`.
local function passed(m, n)
  return n > 0 and n <= int(m.served) and redis.call('GETBIT', KHELD, fmt(n)) == 1
end
local function place(m, sid)
  local st, n, t = rec(sid)
  if not st then return nil end
  if st == 'p' then
    local b = n
    n = 0
    if m.drawn == '1' then
      local key = bucket(b)
      local r = redis.call('ZRANK', key, sid)
      if r then
        local lo, hi = struct.unpack('>I4>I4', redis.call('GETRANGE', KP, 4 * b, 4 * b + 7))
        n = int(m.dbase) + lo + (hi - lo - redis.call('ZCARD', key)) + r + 1
        st = 'w'
      end
    end
  end
  -- `X`: abandoned, and told so (see COME_BACK).
  if st == 'X' then st = 'x' end
  if st == 'w' and passed(m, n) then st = 'm' end
  return {sid, st, n, t}
end
local function out(p) return {p[1], p[2], p[3]} end
-- Closed or sold out: joins take no place, the tick turns away whoever is still in line.
local function turning_away(m)
  if m.closed == '1' then return true end
  local total, sold = inv(m)
  return total ~= nil and total > 0 and sold >= total
end
local function draw_due(m, now) return m.drawn ~= '1' and (m.opens == '' or now >= int(m.opens)) end
-- How many sessions each pre-queue bucket holds, kept as they join and leave: a big-endian u32 per bucket in the
-- string `draw:n` (beside the buckets `draw:<b>`), so the draw reads them in one GET instead of one ZCARD each.
local function counted(b, by)
  redis.call('BITFIELD', KD .. ':n', 'OVERFLOW', 'SAT', 'INCRBY', 'u32', '#' .. fmt(b), fmt(by))
end
-- The draw: freeze the buckets and write where each starts (2^dbits + 1 big-endian u32s). No session is touched.
-- `meta.dat`: when it ran (no `seen` slot before it holds a drawn number's mark).
-- A draw before the opening first configured (the door opened early) counts every drawn session as seen now
-- (`dfloor`): rooms mark pre-queue polls only shortly before the scheduled opening. The buckets' sizes come from
-- `draw:n` (one GET), read and written DRAW_RUN buckets to a `struct` call: a call per bucket made the draw of the
-- default 16,384 buckets 9-14 ms, where the running sums themselves are a few hundred microseconds of Lua. A
-- pre-queue without `draw:n` (written by an older version) is counted bucket by bucket.
local DRAW_RUN = 256
local function draw(m, now)
  local parts, c = {}, 0
  local nb = 2 ^ int(m.dbits)
  local counts = redis.call('GET', KD .. ':n')
  if not counts and int(m.joined) - int(m.turned) > 0 then
    for b = 0, nb - 1 do
      parts[b + 1] = struct.pack('>I4', c)
      c = c + redis.call('ZCARD', bucket(b))
    end
  else
    -- `draw:n` ends at the last bucket anyone joined: the rest count 0.
    counts = counts or ''
    if #counts < 4 * nb then counts = counts .. string.rep('\0', 4 * nb - #counts) end
    local run = math.min(nb, DRAW_RUN)
    local shape = '>' .. string.rep('I4', run)
    for b = 0, nb - 1, run do
      local v = {struct.unpack(shape, counts, 4 * b + 1)}
      for i = 1, run do
        local size = v[i]
        v[i] = c
        c = c + size
      end
      parts[#parts + 1] = struct.pack(shape, unpack(v, 1, run))
    end
  end
  parts[#parts + 1] = struct.pack('>I4', c)
  redis.call('SET', KP, table.concat(parts))
  redis.call('DEL', KD .. ':n')
  local last = int(m.last)
  m.drawn, m.dbase, m.dcount, m.last = '1', fmt(last), fmt(c), fmt(last + c)
  m.dfloor = (m.sched == nil or m.sched == '' or now < int(m.sched)) and fmt(now) or ''
  m.dat = fmt(now)
  redis.call('HSET', KM, 'drawn', '1', 'dbase', m.dbase, 'dcount', m.dcount, 'last', m.last, 'dfloor', m.dfloor,
    'dat', m.dat)
end
local function settings(m)
  return {m.cap, m.apm, m.paused, m.closed, m.opens, m.random, m.inv, m.pqopens or '', m.closes or ''}
end
-- The live line: bit n of `line:held` is set while a session waits in `line` at number n (never in the drawn
-- segment, whose numbers are held by its buckets). `line:blk` has a field per block of LIVE_BLOCK numbers with a
-- bit set: a version from the one counter `meta.lver`, new at each change, so a room instance re-reads only the
-- blocks that changed since its last snapshot. A block whose last bit clears loses its field.
local LIVE_BLOCK = 4096
-- Block b's bits changed (`cleared`: some were cleared): a new version, or its field gone with its last bit.
local function block_changed(b, cleared)
  local from = b * LIVE_BLOCK / 8
  if cleared and redis.call('BITCOUNT', KHELD, fmt(from), fmt(from + LIVE_BLOCK / 8 - 1)) == 0 then
    redis.call('HDEL', KBLK, fmt(b))
  else
    redis.call('HSET', KBLK, fmt(b), redis.call('HINCRBY', KM, 'lver', 1))
  end
end
local function held(n, v)
  redis.call('SETBIT', KHELD, fmt(n), v)
  block_changed(math.floor(n / LIVE_BLOCK), v == 0)
end
-- `line` is a prefix: the sessions waiting with a number outside the drawn segment are kept in small sorted
-- sets of LINE_BLOCK numbers each (`line:<n / LINE_BLOCK>`, member the session, score `n % LINE_BLOCK`), so a set
-- never outgrows Redis's compact listpack encoding and a number nobody holds costs nothing in them.
local LINE_BLOCK = 128
local function line_set(n) return KL .. ':' .. fmt(math.floor(n / LINE_BLOCK)) end
-- `missed` is kept a second a set (`missed:<second>`, member the session, score when it missed its turn in ms), so
-- no set holds more than a second of the door's work. (It was made so for `ZADD`s of 10 to 16 ms logged while one
-- set of everyone missed grew past 2^19 members; run again with the kernel's real-time throttling lifted, the one
-- set showed none over 3.7 ms: those were the throttling's. BENCHMARKS.md, "The drawn segment's people away".)
-- `meta.xlo`: the oldest second that may hold anyone (the tick's report reads from there). `missed` itself, as
-- versions before kept it, is still read and emptied.
local function xkey(t) return KX .. ':' .. fmt(math.floor(t / 1000)) end
-- Sessions let in from the returning queue that have not claimed their pass yet: one whose admission lapses
-- expires (a lapsed admission keeps its turn once; see the tick); a claim takes it out.
local KAGAIN = KT .. ':again'
-- Score/member pairs `zs` into the set of the second of `t` (the scores are when each missed, at `t` or before).
local function missed_add(m, t, zs)
  redis.call('ZADD', xkey(t), unpack(zs))
  local sec = math.floor(t / 1000)
  if not m.xlo or m.xlo == '' or int(m.xlo) > sec then
    m.xlo = fmt(sec)
    redis.call('HSET', KM, 'xlo', m.xlo)
  end
end
-- `pseen` (a pre-queued session's last poll, ms) is kept in PSEEN_SHARDS hashes, `pseen:<k>`, k the sum of the
-- session id's bytes modulo PSEEN_SHARDS (`PSEEN_SHARDS` and `pseen_shard` in mod.rs, which the rooms' marks
-- use), so no hash grows to the pre-queue's size: Redis doubles a hash's table in the command that fills it, and
-- one `pseen` of the seed's 600,000 took an `HSET` of 64 fields 6.8 ms at 2^20 (the new table's pages met one fault
-- at a time; BENCHMARKS.md).
local PSEEN_SHARDS = 64
local function pseen_of(sid)
  local sum = 0
  for i = 1, #sid do sum = sum + string.byte(sid, i) end
  return KQ .. ':' .. fmt(sum % PSEEN_SHARDS)
end
-- Length of a liveness slot in ms (`SEEN_SLOT_MS` in mod.rs): a poll of the session numbered n sets bit n of
-- `seen:<now / SEEN_SLOT>`.
local SEEN_SLOT = 10000
-- Number n written into `line` at `now`: its bit in the joins' bitmaps of its slot, `seen:j:<now / SEEN_SLOT>`, and
-- of its second, `seen:js:<now / 1000>` (the head reads the seconds for the oldest slot the grace covers, so a join
-- counts for at most a second past the grace, not a whole slot). They live the abandon grace and two slots more,
-- as the rooms' marks do, and only the head's look over runs (the tick's `next_live`) reads them: whether a
-- session is away is decided by its join time and its marks, exactly as before. They are kept per block of
-- JOIN_BLOCK numbers (`<key>:<n / JOIN_BLOCK>`, bit `n % JOIN_BLOCK`): a second's joins hold numbers near the back
-- of the line, so each is one or two keys of at most 8 KB whatever the line's length, where one bitmap from number
-- 0 would be as long as the line in bits.
local JOIN_BLOCK = 65536
local function mark_joined(m, n, now)
  -- The grace as the last tick had it (`meta.abn`); before any tick, the keep time's default.
  local ttl = (tonumber(m.abn) or KEEP or 600000) + 2 * SEEN_SLOT
  local blk = ':' .. fmt(math.floor(n / JOIN_BLOCK))
  local slot_key = KN .. ':j:' .. fmt(math.floor(now / SEEN_SLOT)) .. blk
  for _, key in ipairs({slot_key, KN .. ':js:' .. fmt(math.floor(now / 1000)) .. blk}) do
    redis.call('SETBIT', key, fmt(n % JOIN_BLOCK), 1)
    if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, fmt(ttl)) end
  end
end
-- Writes sid at number n (after the head, outside the drawn segment), and marks it joined now: a session in `line`
-- that joined or polled within the grace has its bit set in one of the slots covering it (joins' or marks'), which
-- lets the head pass a run of people away by bit operations alone (the tick's `next_live`). False when n holds
-- someone.
local function line_put(m, n, sid, now)
  if redis.call('GETBIT', KHELD, fmt(n)) == 1 then return false end
  redis.call('ZADD', line_set(n), fmt(n % LINE_BLOCK), sid)
  held(n, 1)
  mark_joined(m, n, now)
  return true
end
-- Puts a session in its pre-queue bucket: the key's top `dbits` bits pick the bucket; the rest of its top 53 bits
-- (exact in a double) order it there. Returns the bucket.
local function enqueue(m, sid, hexkey)
  local bits = int(m.dbits)
  local top = tonumber(string.sub(hexkey, 1, 4), 16)
  local low = tonumber(string.sub(hexkey, 5, 16), 16)
  local b = math.floor(top / 2 ^ (16 - bits))
  local score = (top % 2 ^ (16 - bits)) * 2 ^ 37 + math.floor(low / 2048)
  if redis.call('ZADD', bucket(b), score, sid) == 1 then counted(b, 1) end
  return b
end
