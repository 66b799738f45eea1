-- Verify a code: compare and delete on a match, or count a failure (in the code and in the
-- phone's failure log) and destroy the code at the limit. One step, so two verifies of one
-- code never both succeed and only the matching code is ever deleted.
-- KEYS[1] code hash, KEYS[2] the phone's failure log (quota.lua)
-- ARGV[1] submitted code, ARGV[2] max failed attempts, ARGV[3] quota token, ARGV[4..] quota rules
-- Returns {1} verified, {0, remaining_attempts} wrong, {-1} missing, {-2} destroyed,
--         {-3, retry_after_ms} failure quota used up (nothing compared).
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local rules = quota_rules(4)

local wait = quota_wait(KEYS[2], now, rules)
if wait > 0 then
  return {-3, wait}
end
local stored = redis.call('HGET', KEYS[1], 'c')
if not stored then
  return {-1}
end
if stored == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return {1}
end
quota_record(KEYS[2], now, rules, ARGV[3])
local failed = redis.call('HINCRBY', KEYS[1], 'a', 1)
local limit = tonumber(ARGV[2])
if failed >= limit then
  redis.call('DEL', KEYS[1])
  return {-2}
end
return {0, limit - failed}
