-- Record one event in a quota log if every rule has room, in one step, so instances sharing
-- this Redis never let one event over the limit.
-- KEYS[1] the log (quota.lua), ARGV[1] token, ARGV[2..] quota rules
-- Returns 0 when recorded, else the ms until there is room.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local rules = quota_rules(2)
local wait = quota_wait(KEYS[1], now, rules)
if wait == 0 then
  quota_record(KEYS[1], now, rules, ARGV[1])
end
return wait
