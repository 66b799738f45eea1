-- Verify a code under one verification id: compare only while the id is pending and bound to
-- the pending code; a match deletes the code (for every id) and approves this id; a mismatch
-- counts in this id's attempts (and the phone's and the (phone, client)'s failure logs) and
-- spends the id at the limit. Guesses never destroy the code: under its own id, its owner can
-- still verify it. One step, so of concurrent verifies at most one succeeds.
-- KEYS[1] code hash (its record starts with the code's digest), KEYS[2] the phone's failure
-- log, KEYS[3] the (phone, client)'s (quota.lua), KEYS[4] the id's verification (issue.lua),
-- KEYS[5] its name before (verification_prelude.lua)
-- ARGV as verify.lua's. With events on, the outbox's KEYS and ARGV follow (events.lua).
-- Returns {1} verified, {0, remaining_attempts} wrong, {-1} the id's
--         code is no longer pending (or the id expired, or it was approved), {-2} the id is
--         spent, {-3, retry_after_ms} a failure quota is used up (nothing compared),
--         {-4} canceled.
-- A code's record starts with its digest of this many bytes (CodeDigest::LEN; tested).
local DIGEST_BYTES = 16
local time = redis.call('TIME')
local now = num(time[1]) * 1000 + math.floor(num(time[2]) / 1000)
local phone_rules, client_rules, separator = verify_arguments()
if not separator then
  return redis.error_reply('verify_id.lua: no | before the candidate digests')
end

local verification_key, verification = find_verification(KEYS[4], KEYS[5], 'g', 'e', 's')
if not verification[1] then
  return {-1}
end
if verification[3] == 'c' then
  return {-4}
elseif verification[3] == 'm' then
  return {-2}
elseif verification[3] or tonumber(verification[2]) <= now then
  return {-1}
end
local wait = math.max(quota_wait(KEYS[2], now, phone_rules), quota_wait(KEYS[3], now, client_rules))
if wait > 0 then
  return {-3, wait}
end
local record = redis.call('HGET', KEYS[1], 'h')
if not binds(verification[1], record) then
  return {-1}
end
-- Bound: the candidates are compared with the code's whole digest.
local stored = string.sub(record, 1, DIGEST_BYTES)
for i = separator + 1, OWN_ARGV do
  if stored == ARGV[i] then
    redis.call('DEL', KEYS[1])
    redis.call('HSET', verification_key, 's', 'a')
    outbox_append('ended=approved', now, now, '')
    return {1}
  end
end
quota_record(KEYS[2], now, phone_rules, ARGV[2])
quota_record(KEYS[3], now, client_rules, ARGV[2])
local failed = redis.call('HINCRBY', verification_key, 'a', '1')
local limit = num(ARGV[1])
if OUTBOX then
  outbox_append('attempt_failed', now, now, 'attempts=' .. int(failed))
end
if failed >= limit then
  redis.call('HSET', verification_key, 's', 'm')
  if OUTBOX then
    outbox_append('ended=max_attempts_reached', now, now, 'attempts=' .. int(failed))
  end
  return {-2}
end
return {0, limit - failed}
