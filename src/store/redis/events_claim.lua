-- Claims up to ARGV[1] due events: walks the oldest ARGV[2] entries of the pending index placed
-- by now (an expiry timer of a later time is neither due nor ahead of anything due) in order
-- and takes the first of each subject if it is due, leasing it for ARGV[3] ms under the
-- token ARGV[4] (another claim skips it until then). One step: two claims never take one.
-- KEYS[1] the outbox's entries, KEYS[2] its pending index (events.lua)
-- Returns {field, entry, ...} as leased.
local now = clock_ms()
local limit = tonumber(ARGV[1])
local seen, claimed = {}, {}
local placed = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', string.format('%d', now), 'LIMIT', '0',
  ARGV[2])
for _, field in ipairs(placed) do
  if #claimed >= 2 * limit then break end
  local entry = redis.call('HGET', KEYS[1], field)
  if entry then
    local fields = entry_fields(entry)
    local subject = fields[6]
    if not seen[subject] then
      seen[subject] = true
      if tonumber(fields[1]) <= now then
        fields[1] = string.format('%d', now + tonumber(ARGV[3]))
        fields[4] = ARGV[4]
        entry = entry_of(fields)
        redis.call('HSET', KEYS[1], field, entry)
        claimed[#claimed + 1] = field
        claimed[#claimed + 1] = entry
      end
    end
  end
end
return claimed
