-- A compare-and-set of one record of the Twilio-compatible API, kept as '<revision>:<body>':
-- a field of a hash (a Service in its account's hash) or a string with a TTL (a send log).
-- KEYS[1] the hash or the string; ARGV[1] the field ('' for the string), ARGV[2] the revision
-- the writer read (0: none), ARGV[3] the body, ARGV[4] the string's TTL in ms.
-- Returns 1 if written, 0 if the record is not at the revision read.
local field, expected = ARGV[1], tonumber(ARGV[2])
local current
if field == '' then
  current = redis.call('GET', KEYS[1])
else
  current = redis.call('HGET', KEYS[1], field)
end
local revision = 0
if current then
  revision = tonumber(string.match(current, '^(%d+):'))
end
if revision ~= expected then
  return 0
end
local value = (expected + 1) .. ':' .. ARGV[3]
if field == '' then
  redis.call('SET', KEYS[1], value, 'PX', ARGV[4])
else
  redis.call('HSET', KEYS[1], field, value)
end
return 1
