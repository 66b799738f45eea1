-- Records how a claimed event's try ended, if the claim (ARGV[2]) still holds its lease:
-- 'done' removes it; 'retry' makes it due at ARGV[4]; 'failed' moves it to the failed index
-- with the error ARGV[6]. ARGV[5]: the endpoints that took it so far.
-- KEYS[1] entries, KEYS[2] pending index, KEYS[3] failed index, KEYS[4] errors (events.lua)
-- ARGV[1] the entry's field. Returns {0} if the lease was no longer this claim's, else
-- {1, next}: next is the earliest placement left in this outbox's pending index (ms), or -1
-- when it holds none, so that a Cluster's dispatcher looks at this slot again only then.
local entry = redis.call('HGET', KEYS[1], ARGV[1])
if not entry or not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  return {0}
end
local fields = entry_fields(entry)
if fields[4] ~= ARGV[2] then
  return {0}
end
local function settled()
  local first = redis.call('ZRANGE', KEYS[2], '0', '0', 'WITHSCORES')
  return {1, first[2] and math.floor(tonumber(first[2])) or -1}
end
if ARGV[3] == 'done' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  return settled()
end
fields[2] = string.format('%d', tonumber(fields[2]) + 1)
fields[3] = ARGV[5]
fields[4] = '0'
if ARGV[3] == 'retry' then
  fields[1] = ARGV[4]
else
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('ZADD', KEYS[3], string.format('%d', clock_ms()), ARGV[1])
  redis.call('HSET', KEYS[4], ARGV[1], ARGV[6])
end
redis.call('HSET', KEYS[1], ARGV[1], entry_of(fields))
return settled()
