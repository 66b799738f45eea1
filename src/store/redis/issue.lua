-- Issue a code for one (phone, purpose): create it, or apply the resend policy to the pending
-- one once its cooldown has passed, within the phone's SMS quota. One step, so concurrent
-- sends make exactly one code and one SMS. The hash holds the code's keyed digest and, for the
-- `reuse` policy, the code sealed by the service: never the code.
-- KEYS[1] code hash {h = digest, s = sealed code, a = failed attempts, n = deliveries,
--         t = last sent (ms)}
-- KEYS[2] the phone's SMS log (quota.lua)
-- ARGV[1] candidate digest, ARGV[2] candidate sealed ('' if none), ARGV[3] TTL ms,
-- ARGV[4] cooldown ms, ARGV[5] 'reuse' | 'rotate', ARGV[6] quota token, ARGV[7] not after (unix
-- ms: the caller has given up by then), ARGV[8..] quota rules
-- Returns {-2} when run too late (nothing written: a send its caller already answered with a
--         timeout must leave no code, cooldown or quota event behind),
--         {0, retry_after_ms} while cooling down, {-1, retry_after_ms} over quota, or
--         {kind, digest, sealed, sent_at_ms, deliveries[, previous_digest, previous_sealed,
--          previous_sent_at_ms, previous_expires_at_ms]}
--         with kind 1 created, 2 redelivered, 3 rotated.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if now > tonumber(ARGV[7]) then
  return {-2}
end
local ttl = tonumber(ARGV[3])
local rules = quota_rules(8)

local pending = redis.call('HMGET', KEYS[1], 'h', 'n', 't', 's')
if pending[1] then
  local wait = tonumber(pending[3]) + tonumber(ARGV[4]) - now
  if wait > 0 then
    return {0, wait}
  end
end
local wait = quota_wait(KEYS[2], now, rules)
if wait > 0 then
  return {-1, wait}
end
quota_record(KEYS[2], now, rules, ARGV[6])

local function write(digest, sealed)
  redis.call('HSET', KEYS[1], 'h', digest)
  if sealed and sealed ~= '' then
    redis.call('HSET', KEYS[1], 's', sealed)
  else
    redis.call('HDEL', KEYS[1], 's')
  end
end

if pending[1] then
  local expires_at = now + redis.call('PTTL', KEYS[1])
  local previous_sealed = pending[4] or ''
  local digest, sealed, kind = pending[1], previous_sealed, 2
  if ARGV[5] == 'rotate' then
    digest, sealed, kind = ARGV[1], ARGV[2], 3
    write(digest, sealed)
  end
  local deliveries = tonumber(pending[2]) + 1
  redis.call('HSET', KEYS[1], 'n', deliveries, 't', now)
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {kind, digest, sealed, now, deliveries, pending[1], previous_sealed,
          tonumber(pending[3]), expires_at}
end

write(ARGV[1], ARGV[2])
redis.call('HSET', KEYS[1], 'a', 0, 'n', 1, 't', now)
redis.call('PEXPIRE', KEYS[1], ttl)
return {1, ARGV[1], '', now, 1}
