-- Undo an issue whose SMS failed, only while the hash still holds exactly what that issue
-- wrote (same code, send time and delivery count): a later send's code is never touched.
-- KEYS[1] code hash
-- ARGV[1] code, ARGV[2] sent_at_ms, ARGV[3] deliveries written by the issue;
-- ARGV[4..6] previous code, sent_at_ms, expires_at_ms (absent when the issue created the hash)
-- Returns 1 if rolled back, 0 if the hash had moved on.
local pending = redis.call('HMGET', KEYS[1], 'c', 't', 'n')
if pending[1] ~= ARGV[1]
    or tonumber(pending[2]) ~= tonumber(ARGV[2])
    or tonumber(pending[3]) ~= tonumber(ARGV[3]) then
  return 0
end
if not ARGV[4] then
  redis.call('DEL', KEYS[1])
  return 1
end
redis.call('HSET', KEYS[1], 'c', ARGV[4], 't', ARGV[5], 'n', tonumber(pending[3]) - 1)
-- An expiry already in the past deletes the hash, as the old code would have expired.
redis.call('PEXPIREAT', KEYS[1], ARGV[6])
return 1
