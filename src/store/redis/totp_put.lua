-- A compare-and-set of one TOTP record (factors.rs), a field of a hash kept as
-- '<revision>:<body>', and its event in the same step (EVENTS_PRELUDE is prepended).
-- KEYS[1] the hash; ARGV[1] the field, ARGV[2] the revision the writer read (0: none), ARGV[3]
-- the body, ARGV[4] the fact ('' for none), ARGV[5] when it happened (unix ms).
-- Returns 1 if written, 0 if the record is not at the revision read.
local field, expected = ARGV[1], tonumber(ARGV[2])
local current = redis.call('HGET', KEYS[1], field)
local revision = 0
if current then
  revision = tonumber(string.match(current, '^(%d+):'))
end
if revision ~= expected then
  return 0
end
redis.call('HSET', KEYS[1], field, (expected + 1) .. ':' .. ARGV[3])
if ARGV[4] ~= '' then
  local at = tonumber(ARGV[5])
  outbox_append(ARGV[4], at, at)
end
return 1
