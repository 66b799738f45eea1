-- Verify a code: compare digests and delete on a match, or count a failure (in the code, the
-- phone's and the (phone, client)'s failure logs) and destroy the code at the limit. One step,
-- so two verifies of one code never both succeed and only the matching code is ever deleted.
-- KEYS[1] code hash (its record starts with the code's digest), KEYS[2] the phone's failure log, KEYS[3] the (phone, client)'s (quota.lua)
-- ARGV[1] max failed attempts, ARGV[2] quota token, ARGV[3] how many phone rule numbers
-- follow (n), ARGV[4..3+n] the phone's rules, ARGV[4+n..] the client's rules, then the
-- candidate digests (one per key in use) after a '|' separator.
-- On one node, the fraud guard's conversion keys of fraud_convert.lua follow KEYS[3] and its
-- three arguments end ARGV: a match converts the code's send in this same step.
-- Returns {1, minute converted or -1} verified, {0, remaining_attempts} wrong, {-1} missing,
--         {-2} destroyed, {-3, retry_after_ms} a failure quota is used up (nothing compared).
-- A code's record starts with its digest of this many bytes (CodeDigest::LEN; tested).
local DIGEST_BYTES = 16
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local phone_rules, client_rules, separator = verify_arguments()
if not separator then
  return redis.error_reply('verify.lua: no | before the candidate digests')
end
local converting = #KEYS > 3
local last_candidate = converting and #ARGV - 3 or #ARGV

local wait = math.max(quota_wait(KEYS[2], now, phone_rules), quota_wait(KEYS[3], now, client_rules))
if wait > 0 then
  return {-3, wait}
end
local record = redis.call('HGET', KEYS[1], 'h')
if not record then
  return {-1}
end
-- The record starts with the digest; a sealed code may follow.
local stored = string.sub(record, 1, DIGEST_BYTES)
for i = separator + 1, last_candidate do
  if stored == ARGV[i] then
    redis.call('DEL', KEYS[1])
    return {1, converting and fraud_convert(3, last_candidate) or -1}
  end
end
quota_record(KEYS[2], now, phone_rules, ARGV[2])
quota_record(KEYS[3], now, client_rules, ARGV[2])
local failed = redis.call('HINCRBY', KEYS[1], 'a', 1)
local limit = tonumber(ARGV[1])
if failed >= limit then
  redis.call('DEL', KEYS[1])
  return {-2}
end
return {0, limit - failed}
