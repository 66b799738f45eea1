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
local budgets, at = {}, 3
for i = 1, #KEYS do
  local count = tonumber(ARGV[at])
  budgets[i] = quota_rules(at + 1, at + 2 * count)
  at = at + 1 + 2 * count
end
local refused, wait = 0, 0
for i = 1, #KEYS do
  local budget_wait = quota_wait(KEYS[i], now, budgets[i])
  if budget_wait > 0 then
    if refused == 0 then refused = i end
    wait = math.max(wait, budget_wait)
  end
end
if refused > 0 then return {refused, wait} end
for i = 1, #KEYS do
  quota_record(KEYS[i], now, budgets[i], ARGV[2])
end
return {0, 0}
