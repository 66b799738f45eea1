-- Verify a code: compare and delete on a match, or count a failure and destroy the code at the
-- limit. One step, so two verifies of one code never both succeed and only the matching code
-- is ever deleted.
-- KEYS[1] code hash; ARGV[1] submitted code, ARGV[2] max failed attempts
-- Returns {1} verified, {0, remaining_attempts} wrong, {-1} missing, {-2} destroyed.
local stored = redis.call('HGET', KEYS[1], 'c')
if not stored then
  return {-1}
end
if stored == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return {1}
end
local failed = redis.call('HINCRBY', KEYS[1], 'a', 1)
local limit = tonumber(ARGV[2])
if failed >= limit then
  redis.call('DEL', KEYS[1])
  return {-2}
end
return {0, limit - failed}
