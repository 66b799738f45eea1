-- Record one event in every budget's log (the client's, the global one) if each of their rules
-- has room, in one step: instances sharing this Redis never let one event over a limit, and a
-- refusal records nothing anywhere.
-- KEYS[1..n] the logs (quota.lua), under one hash tag; ARGV[1] not after (unix ms: the caller
-- has given up by then), ARGV[2] token, then for each log the number of its rules followed by
-- those rules.
-- Returns {0, 0} when recorded, {-1, 0} when run too late (nothing recorded), else {i, ms}:
-- KEYS[i] is the first log without room, and every log has room again in ms.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if now > tonumber(ARGV[1]) then
  return {-1, 0}
end
local budgets = quota_budgets(1, 3)
local refused, wait = quota_budgets_wait(budgets, now)
if refused > 0 then return {refused, wait} end
quota_budgets_record(budgets, now, ARGV[2])
return {0, 0}
