-- A verified code: takes its send's attribution (once) and counts a conversion in the send's
-- minute for the prefix, the country and the service.
-- KEYS (one hash tag, {guard}): 1 the attribution, 2/3 the prefix's and the service's running
-- tallies (fraud_tally.lua), then for each hour from ARGV[1] on, three keys: the prefix's, the
-- country's and the service's minutes of that hour (the hours the attribution can still be
-- from).
-- ARGV: 1 the first of those hours, 2 the first minute still counted, 3 counters' ttl (ms).
-- Returns the minute converted, or -1.
local mark = redis.call('GET', KEYS[1])
if not mark then return -1 end
-- '<minute>:<token>'
local minute = tonumber(string.match(mark, '^(%d+):'))
if not minute then return -1 end
redis.call('DEL', KEYS[1])
local base = (math.floor(minute / 60) - tonumber(ARGV[1])) * 3 + 3
if minute < tonumber(ARGV[2]) or base < 1 or base + 3 > #KEYS then return -1 end

local function convert(key)
  redis.call('HINCRBY', key, 'c' .. minute, 1)
  redis.call('PEXPIRE', key, ARGV[3])
end

for i = 1, 3 do
  convert(KEYS[base + i])
end
tally_adjust(KEYS[2], 'c', minute, 1)
tally_adjust(KEYS[3], 'c', minute, 1)
return minute
