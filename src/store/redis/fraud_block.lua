-- Records a prefix's block unless it has an active one.
-- KEYS[1] blocks ({guard}); ARGV: 1 prefix, 2 the block (JSON), 3 now (ms); with events on
-- (one node), the outbox's KEYS and ARGV follow (events.lua).
-- Returns 1 if recorded, else 0.
local current = redis.call('HGET', KEYS[1], ARGV[1])
if current and cjson.decode(current).until_ms > tonumber(ARGV[3]) then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
outbox_append('prefix_blocked', tonumber(ARGV[3]), tonumber(ARGV[3]))
return 1
