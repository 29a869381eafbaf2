if redis.call('HEXISTS', KM, 'cap') == 0 then
  redis.call('HSET', KM, 'cap', ARGV[1], 'apm', ARGV[2], 'paused', ARGV[3], 'closed', ARGV[4],
    'opens', ARGV[5], 'sched', ARGV[5], 'random', ARGV[6], 'inv', ARGV[7], 'drawn', (ARGV[6] == '1') and '0' or '1',
    'dbase', '0', 'dcount', '0', 'last', '0', 'served', '0', 'joined', '0', 'admitted', '0',
    'finished', '0', 'expired', '0', 'abandoned', '0', 'turned', '0', 'missed', '0', 'returned', '0', 'retlate', '0',
    'orders', '0', 'seats', '0', 'dbits', ARGV[8], 'fcur', '0-0', 'pqopens', ARGV[9], 'closes', ARGV[10])
end
return settings(meta())
