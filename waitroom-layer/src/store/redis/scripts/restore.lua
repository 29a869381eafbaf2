if redis.call('HEXISTS', KM, 'cap') == 1 then
  -- Known, but behind the room's view (a failover to a replica that lagged): the numbers it lost stay free
  -- for their owners, who are taken back from their cookies as after a restore; no later join takes one. The live
  -- line's versions move above any a room instance may have cached from the writes the replica lost.
  local m = meta()
  local last, floor = int(m.last), int(ARGV[10])
  if ARGV[22] == '1' and floor > last then
    local gap = math.min(floor - last, int(ARGV[23]))
    redis.call('HSET', KM, 'last', fmt(last + gap), 'rupto', fmt(last + gap), 'runtil', ARGV[20],
      'rlate', ARGV[21], 'lver', fmt(math.max(int(m.lver), int(ARGV[20]))))
  end
  return settings(meta())
end
-- Whatever is left of the on-sale's line goes: the line is rebuilt from the room's view and the reclaims. The live
-- line's versions start above any a room instance may have cached from before (the hold's end, in ms).
-- The sets of `line` are found from the live line's blocks (each covers 4096 / LINE_BLOCK of them).
local blk = redis.call('HKEYS', KBLK)
for _, b in ipairs(blk) do
  for j = 0, 4096 / LINE_BLOCK - 1 do redis.call('DEL', KL .. ':' .. fmt(int(b) * 4096 / LINE_BLOCK + j)) end
end
redis.call('DEL', KS, KL, KA, KC, KR, KP, KB, KT, KAGAIN, KX, KX .. ':unrep', KFRONT, KMOVED, KHELD, KBLK)
local served = int(ARGV[11])
-- A `last` left alone in `meta` (a room's `line_tickets` `HINCRBY` after the loss) is a floor too: numbers may have
-- been handed out from it.
local last = math.max(int(ARGV[10]), served, int(redis.call('HGET', KM, 'last')))
-- Finishes still in the stream were applied before the loss (or are gone with it): read on from the newest.
local fcur, top = '0-0', redis.call('XREVRANGE', KF, '+', '-', 'COUNT', 1)
if #top > 0 then fcur = top[1][1] end
redis.call('HSET', KM, 'cap', ARGV[1], 'apm', ARGV[2], 'paused', ARGV[3], 'closed', ARGV[4],
  'opens', ARGV[5], 'sched', ARGV[5], 'random', ARGV[6], 'inv', ARGV[7], 'dbits', ARGV[8], 'drawn', ARGV[9],
  'dbase', '0', 'dcount', '0', 'last', fmt(last), 'served', fmt(served), 'joined', ARGV[12],
  'admitted', ARGV[13], 'finished', ARGV[14], 'expired', ARGV[15], 'abandoned', ARGV[16], 'turned', ARGV[17],
  'orders', ARGV[18], 'seats', ARGV[19], 'fcur', fcur, 'rupto', fmt(last), 'runtil', ARGV[20], 'rlate', ARGV[21],
  'pqopens', ARGV[24], 'closes', ARGV[25], 'lver', ARGV[20])
return settings(meta())
