-- Verify a code: compare digests and delete on a match, or count a failure (in the code, the
-- phone's and the (phone, client)'s failure logs) and destroy the code at the limit. One step,
-- so two verifies of one code never both succeed and only the matching code is ever deleted.
-- The verification of the code's latest send (the code hash's `v`, issue.lua), while it is
-- pending and bound to this code, takes the outcome in this same step, as a verify under its
-- id would: approved, its failed attempts (the code's), spent with the code; and its events.
-- KEYS[1] code hash (its record starts with the code's digest), KEYS[2] the phone's failure log, KEYS[3] the (phone, client)'s (quota.lua)
-- ARGV[1] max failed attempts, ARGV[2] quota token, ARGV[3] how many phone rule numbers
-- follow (n), ARGV[4..3+n] the phone's rules, ARGV[4+n..] the client's rules, then after a
-- '|' separator what the names of the phone's verifications start with (`…{<E.164>}:`, the
-- code's tag: the verification is read under it, `v:<id>` or `verification:<id>`,
-- verification_prelude.lua) and the candidate digests (one per key in use).
-- With events on, the outbox's KEYS and ARGV follow those (events.lua; its subject is left
-- empty by the caller and is the verification's id found here).
-- Returns {1} verified, {0, remaining_attempts} wrong, {-1} missing,
--         {-2} destroyed, {-3, retry_after_ms} a failure quota is used up (nothing compared).
-- A code's record starts with its digest of this many bytes (CodeDigest::LEN; tested).
local DIGEST_BYTES = 16
local time = redis.call('TIME')
local now = num(time[1]) * 1000 + math.floor(num(time[2]) / 1000)
local phone_rules, client_rules, separator = verify_arguments()
if not separator then
  return redis.error_reply('verify.lua: no | before the candidate digests')
end

local wait = math.max(quota_wait(KEYS[2], now, phone_rules), quota_wait(KEYS[3], now, client_rules))
if wait > 0 then
  return {-3, wait}
end
local pending = redis.call('HMGET', KEYS[1], 'h', 'v')
local record = pending[1]
if not record then
  return {-1}
end
-- The record starts with the digest; a sealed code may follow.
local stored = string.sub(record, 1, DIGEST_BYTES)

-- The latest send's verification key and its failed attempts, while it is pending and bound to
-- this code (a canceled or spent one, or one rolled back, takes nothing); the events are its.
local function latest_verification()
  if not pending[2] then return nil end
  -- The one key a script here names itself (keys.rs's test allows exactly this): the id is
  -- only known inside the step, and the key is under the code's own hash tag, so the step
  -- stays in KEYS[1]'s slot on a Cluster.
  local latest_key, verification = find_verification(ARGV[separator + 1] .. 'v:' .. pending[2],
    ARGV[separator + 1] .. 'verification:' .. pending[2], 'g', 's', 'a')
  if not verification[1] or not binds(verification[1], stored) or verification[2] then
    return nil
  end
  if OUTBOX then OUTBOX.subject = pending[2] end
  return latest_key, tonumber(verification[3] or 0)
end

for i = separator + 2, OWN_ARGV do
  if stored == ARGV[i] then
    redis.call('DEL', KEYS[1])
    local latest_key = latest_verification()
    if latest_key then
      redis.call('HSET', latest_key, 's', 'a')
      outbox_append('ended=approved', now, now, '')
    end
    return {1}
  end
end
quota_record(KEYS[2], now, phone_rules, ARGV[2])
quota_record(KEYS[3], now, client_rules, ARGV[2])
local failed = redis.call('HINCRBY', KEYS[1], 'a', '1')
local limit = num(ARGV[1])
local latest_key, counted = latest_verification()
if latest_key then
  -- The code's count (a verify under the id may have counted more on the id).
  local attempts = int(math.max(failed, counted + 1))
  redis.call('HSET', latest_key, 'a', attempts)
  outbox_append('attempt_failed', now, now, 'attempts=' .. attempts)
  if failed >= limit then
    redis.call('HSET', latest_key, 's', 'm')
    outbox_append('ended=max_attempts_reached', now, now, 'attempts=' .. attempts)
  end
end
if failed >= limit then
  redis.call('DEL', KEYS[1])
  return {-2}
end
return {0, limit - failed}
