-- Record a solved proof-of-work challenge unless it is recorded already; nothing if run after
-- the caller gave up waiting (it answered 503, and its retry must find the payload unused).
-- KEYS[1] the challenge's record, ARGV[1] TTL ms, ARGV[2] not after (unix ms)
-- Returns 1 when recorded, 0 when recorded already, -1 when run too late.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if now > tonumber(ARGV[2]) then
  return -1
end
if redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then
  return 1
end
return 0
