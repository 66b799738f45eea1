-- Removes one TOTP record (a field of an identity's hash, factors.rs) and, if it was there,
-- appends its event in the same step (EVENTS_PRELUDE is prepended).
-- KEYS[1] the hash; ARGV[1] the field, ARGV[2] the fact ('' for none), ARGV[3] when (unix ms).
-- Returns 1 if removed.
local removed = redis.call('HDEL', KEYS[1], ARGV[1])
if removed == 1 and ARGV[2] ~= '' then
  local at = tonumber(ARGV[3])
  outbox_append(ARGV[2], at, at)
end
return removed
