local t = redis.call('TIME')
local from = math.max(int(t[1]) * 1000 + math.floor(int(t[2]) / 1000) - int(ARGV[1]), 0)
local start = fmt(from) .. '-0'
return {start, redis.call('XRANGE', KF, start, '+', 'COUNT', ARGV[2])}
