-- The traffic report's shared minutes: adds what one instance counted since its last flush
-- (fraud::traffic), one call a flush. The report only: no send waits for it, no verdict reads it.
-- KEYS (one hash tag, {guard}): 1 prefixes (prefix -> country) and 2 countries (country -> 1),
-- the registries fraud_traffic reads the scopes from, then three per change: the prefix's, the
-- country's and the service's minutes of the change's hour (fields s/c/x/r<minute>, keys.rs).
-- ARGV: 1 the counters' ttl (ms), then seven per change: prefix, country, minute, and the
-- signed deltas of s (sends that were not undelivered), c (conversions), x (undelivered) and
-- r (refusals, the service's only); '0' adds nothing.
-- Returns the number of changes.
-- Every argument to redis.call is a string as received: no number is formatted here.
local changes = (#KEYS - 2) / 3
if changes % 1 ~= 0 or #ARGV ~= 1 + 7 * changes then
  return redis.error_reply('fraud_traffic.lua: keys and arguments do not match')
end
-- Each touched hash gets its expiry once, after every change.
local touched = {}
-- Adds `by` to `field` of the hash at `key`; whether it added anything.
local function add(key, field, by)
  if by == '0' then return false end
  redis.call('HINCRBY', key, field, by)
  touched[key] = true
  return true
end
for i = 0, changes - 1 do
  local k, a = 2 + 3 * i, 1 + 7 * i
  local minute = ARGV[a + 3]
  local fields = {'s' .. minute, 'c' .. minute, 'x' .. minute}
  local counted = false
  for f = 1, 3 do
    local by = ARGV[a + 3 + f]
    -- The prefix's, the country's and the service's minute alike.
    for scope = 1, 3 do
      if add(KEYS[k + scope], fields[f], by) then counted = true end
    end
  end
  add(KEYS[k + 3], 'r' .. minute, ARGV[a + 7])
  -- A prefix or country is reported once the registries name it.
  if counted then
    redis.call('HSET', KEYS[1], ARGV[a + 1], ARGV[a + 2])
    redis.call('HSET', KEYS[2], ARGV[a + 2], '1')
  end
end
for key in pairs(touched) do
  redis.call('PEXPIRE', key, ARGV[1])
end
return changes
