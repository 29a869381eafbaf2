-- A page of the random draw's numbers, for a room instance to keep: the sessions still waiting in the drawn
-- buckets from bucket ARGV[1] on (within it after score ARGV[2] and member ARGV[3], both empty: from its start), at
-- most ARGV[4] of them, each with the number `place` gives it (the same arithmetic, read in this one call: the
-- bucket's start in `drawidx`, the members already let in from its front, the rank). Reply: {next bucket, next
-- score, next member, first number, count, sessions, first number, count, sessions, ...}, a run a bucket: its
-- `count` members in number order joined by newlines (one bulk string a bucket rather than two replies a session,
-- which Redis formats and the instance parses one by one; joined by one `table.concat`, with no Lua loop over the
-- members: by hand on an idle Redis, 370 ns a member read and joined against 730 ns with the loop that wrote each
-- member's length), the k-th (from 0) holding the first number plus k; an empty one or one that starts with a zero
-- byte (the old number of someone moved to the front) is a number nobody holds. The instance checks that a run
-- splits into `count` pieces (a member holding a newline, which no session id of the room's does, would make it
-- more, and the page is refused). A next bucket of -1: no more pages. {-2}: not drawn. The work is bounded: at
-- most ARGV[4] members read, and at most BUCKETS buckets looked at (a page of a small crowd in many buckets, or
-- past buckets the door emptied, ends there: a page may hold no one).
-- A bucket costs one ZRANGE: read to its end, its size is what was read. A page holds whole buckets: one that may
-- not fit in what is left of the page (it held more at the draw, `drawidx` says) is left for the next page, which
-- starts at its front, unread here; so no bucket is counted (ZCARD) or searched for a cursor (ZCOUNT), but for one
-- bucket alone larger than a page. The buckets' starts come from `drawidx` SPAN buckets to a GETRANGE.
-- Each room instance reads every page, from the same first cursor and with the same page size, within seconds of
-- the draw: so a page worked out here is kept for PAGE_KEEP_MS under its cursor (and the draw's segment), and the
-- next instance asking for it gets it back with one GET instead of the buckets' ZRANGEs. A page kept a few seconds
-- holds what it held when worked out: its numbers stay exact (numbers do not change while people wait), and
-- people let in since, moved to the front or gone are in it as they were, which a reader already meets in a page
-- it keeps for minutes (the room answers nobody at or below the head from the pages, and asks the store about
-- anyone moved). So Redis works the draw's pages out once, not once a room instance. The key names the draw (its
-- time, `meta.dat`, and its segment) and the page's format, so a page of an earlier draw of an on-sale purged and
-- made again, or of another version, is never read. Keeping is best effort: a Redis that refuses the write (full,
-- with `noeviction`) still answers the page.
local PAGE_KEEP_MS = 60000
local m = meta()
if not m then return redis.error_reply(NOEVENT) end
if m.drawn ~= '1' then return {-2} end
local kept_at = KD .. ':page:2:' .. (m.dat or '') .. ':' .. m.dbase .. ':' .. m.dcount .. ':' .. ARGV[1] .. ':'
  .. ARGV[4] .. ':' .. ARGV[2] .. ':' .. ARGV[3]
local kept = redis.call('GET', kept_at)
if kept then return cmsgpack.unpack(kept) end
local function keep(page)
  redis.pcall('SET', kept_at, cmsgpack.pack(page), 'PX', PAGE_KEEP_MS)
  return page
end
local b, after, member, most = int(ARGV[1]), ARGV[2], ARGV[3], int(ARGV[4])
local nb = 2 ^ int(m.dbits)
local dbase = int(m.dbase)
local out = {-1, '', ''}
local got = 0
local SPAN = 64
local BUCKETS = 256
local looked = 0
-- Whether a <= b byte by byte, as Redis orders a sorted set's members of one score (Lua's `<=` on strings follows
-- the locale Redis runs under, which may order them otherwise).
local function bytes_le(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a <= #b
end
local span, span_from = '', -1
-- Where bucket b starts and ends in the drawn segment (as `place` reads them).
local function bounds(b)
  if span_from < 0 or b >= span_from + SPAN then
    span_from = b
    span = redis.call('GETRANGE', KP, 4 * b, 4 * (b + SPAN) + 3)
    if #span < 8 then return nil end
  end
  local at = 4 * (b - span_from) + 1
  if #span < at + 7 then return nil end
  return struct.unpack('>I4>I4', span, at)
end
while b < nb do
  if got >= most or (after == '' and looked >= BUCKETS) then
    out[1], out[2], out[3] = b, after, member
    return keep(out)
  end
  looked = looked + 1
  local lo, hi = bounds(b)
  -- No index (a store that lost it): nothing to read.
  if not lo then return {-1, '', ''} end
  -- A bucket held its size at the draw (`hi - lo`) and only loses people since (from its front, to the door): one
  -- that held more than what is left of the page may not fit, and the next page takes it whole, from its front,
  -- without a ZRANGE here of what would not be kept (a page's last bucket was read in part and left: about one in
  -- seven of the ZRANGEs of the seed's pages). One the door took people from since may have fitted; it goes whole
  -- next page. (A bucket it fits is still read as before: one found larger than its size at the draw says, as a
  -- pre-queue whose counts lost a member would make it, is counted and read on from a cursor.)
  if after == '' and got > 0 and hi - lo > most - got then
    out[1], out[2], out[3] = b, '', ''
    return keep(out)
  end
  local key = bucket(b)
  local first, ties = 0, 0
  if after ~= '' then
    first = redis.call('ZCOUNT', key, '-inf', '(' .. after)
    ties = redis.call('ZCOUNT', key, after, after)
  end
  local want = most - got + ties
  local z, step
  if after == '' then
    -- From a bucket's front (nearly always: a page holds whole buckets) only the members are read; the scores,
    -- which Redis would format as text one by one, are needed only for the cursor of a bucket larger than a page.
    z, step = redis.call('ZRANGE', key, first, first + want - 1), 1
  else
    z, step = redis.call('ZRANGE', key, first, first + want - 1, 'WITHSCORES'), 2
  end
  local whole = #z / step < want
  local card = whole and first + #z / step or redis.call('ZCARD', key)
  local base = dbase + lo + (hi - lo - card) + first + 1
  -- The bucket's members as one run: its first number, their count, then the members in number order joined by
  -- newlines (the k-th from 0 holds the first number plus k). A member that starts with a zero byte keeps the
  -- number of someone an operator moved to the front: the instance keeps no one at it. From a bucket's front
  -- (nearly every run) the members go as `ZRANGE` read them, with no loop here over them; from a cursor, those
  -- at its score up to its member are left out.
  local run, run_from, last_score = z, base, nil
  if step == 2 then
    run, run_from = {}, nil
    for i = 1, #z, 2 do
      local sid, score = z[i], z[i + 1]
      if not (score == after and bytes_le(sid, member)) then
        last_score = score
        run_from = run_from or base + (i - 1) / 2
        run[#run + 1] = sid
      end
    end
  end
  local last_sid = run[#run]
  if last_sid then
    out[#out + 1] = run_from
    out[#out + 1] = #run
    out[#out + 1] = table.concat(run, '\n')
    got = got + #run
  end
  if whole or first + want >= card then
    b, after, member = b + 1, '', ''
  elseif last_sid then
    -- A bucket larger than a page, read from its front: the cursor needs its last member's score.
    after, member = last_score or redis.call('ZSCORE', key, last_sid), last_sid
  else
    b, after, member = b + 1, '', ''
  end
end
return keep(out)
