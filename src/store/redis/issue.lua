-- Issue a code for one (phone, purpose): create it, or apply the resend policy to the pending
-- one once its cooldown has passed, within the phone's SMS quota. One step, so concurrent
-- sends make exactly one code and one SMS.
-- KEYS[1] code hash {c = code, a = failed attempts, n = deliveries, t = last sent (ms)}
-- KEYS[2] the phone's SMS log (quota.lua)
-- ARGV[1] candidate code, ARGV[2] TTL ms, ARGV[3] cooldown ms, ARGV[4] 'reuse' | 'rotate',
-- ARGV[5] quota token, ARGV[6..] quota rules
-- Returns {0, retry_after_ms} while cooling down, {-1, retry_after_ms} over quota, or
--         {kind, code, sent_at_ms, deliveries[, previous_code, previous_sent_at_ms, previous_expires_at_ms]}
--         with kind 1 created, 2 redelivered, 3 rotated.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local ttl = tonumber(ARGV[2])
local rules = quota_rules(6)

local pending = redis.call('HMGET', KEYS[1], 'c', 'n', 't')
if pending[1] then
  local wait = tonumber(pending[3]) + tonumber(ARGV[3]) - now
  if wait > 0 then
    return {0, wait}
  end
end
local wait = quota_wait(KEYS[2], now, rules)
if wait > 0 then
  return {-1, wait}
end
quota_record(KEYS[2], now, rules, ARGV[5])

if pending[1] then
  local expires_at = now + redis.call('PTTL', KEYS[1])
  local code, kind = pending[1], 2
  if ARGV[4] == 'rotate' then
    code, kind = ARGV[1], 3
  end
  local deliveries = tonumber(pending[2]) + 1
  redis.call('HSET', KEYS[1], 'c', code, 'n', deliveries, 't', now)
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {kind, code, now, deliveries, pending[1], tonumber(pending[3]), expires_at}
end

redis.call('HSET', KEYS[1], 'c', ARGV[1], 'a', 0, 'n', 1, 't', now)
redis.call('PEXPIRE', KEYS[1], ttl)
return {1, ARGV[1], now, 1}
