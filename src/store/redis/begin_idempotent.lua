-- Claim an Idempotency-Key for a first request, or answer the record that holds it; nothing if
-- run after the caller gave up waiting (it answered 503, and its retry must run at once).
-- KEYS[1] the key's record, ARGV[1] the running record, ARGV[2] lease ms,
-- ARGV[3] not after (unix ms: the caller has given up by then)
-- Returns false when claimed, the record that holds the key, or -1 when run too late.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if now > tonumber(ARGV[3]) then
  return -1
end
return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'GET', 'PX', ARGV[2])
