-- Ends a prefix's active block now and notes the lift; its strikes stay.
-- KEYS[1] blocks ({guard}); ARGV: 1 prefix, 2 now (ms); with events on (one node), the
-- outbox's KEYS and ARGV follow (events.lua).
-- Returns 1 if a block was active, else 0.
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then return 0 end
local block = cjson.decode(current)
local now = tonumber(ARGV[2])
if block.until_ms <= now then return 0 end
-- Written back as text, so a large millisecond count keeps every digit.
local lifted = string.gsub(current, '"until_ms":%d+', '"until_ms":' .. ARGV[2], 1)
lifted = string.gsub(lifted, '"lifted_ms":%d+', '"lifted_ms":' .. ARGV[2], 1)
redis.call('HSET', KEYS[1], ARGV[1], lifted)
outbox_append('prefix_lifted', now, now, 'country=' .. block.country .. ';reason=' .. block.reason
  .. ';until_ms=' .. ARGV[2] .. ';strikes=' .. string.format('%d', block.strikes))
return 1
