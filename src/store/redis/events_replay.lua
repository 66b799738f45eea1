-- Puts failed events back as due now, their tries counted anew: the fields ARGV (none: all).
-- KEYS[1] entries, KEYS[2] pending index, KEYS[3] failed index, KEYS[4] errors (events.lua)
-- Returns how many.
local now = string.format('%d', clock_ms())
local chosen = ARGV
if #chosen == 0 then
  chosen = redis.call('ZRANGE', KEYS[3], '0', '-1')
end
local replayed = 0
for _, field in ipairs(chosen) do
  local entry = redis.call('HGET', KEYS[1], field)
  if entry and redis.call('ZREM', KEYS[3], field) == 1 then
    local fields = entry_fields(entry)
    fields[1] = now
    fields[2] = '0'
    fields[4] = '0'
    redis.call('HSET', KEYS[1], field, entry_of(fields))
    redis.call('ZADD', KEYS[2], fields[10], field)
    redis.call('HDEL', KEYS[4], field)
    replayed = replayed + 1
  end
end
return replayed
