-- The fraud guard's levels (issue 39), shared by levels.lua and issue.lua (which counts a send's
-- levels in its own step on one node). Each record is one string, 't rs rc ru hs hc hu': the
-- last change (ms) and the recent and history sends, conversions and undelivered in
-- millionths. Integers: formatting a float ('%.17g') costs Redis several times what an
-- integer's does, and a send writes six per scope; one string is one GET and one SET with its
-- expiry, where a hash took three commands.
-- Decays each record of KEYS[first..first + n - 1] to `now`, adds `add` (three numbers, in
-- millionths: sends, conversions, undelivered), keeps it `ttl` ms (a string) and answers the
-- records after the change.
local function levels_count(first, n, now, recent_half, history_half, add, ttl)
  local answer = {}
  for i = first, first + n - 1 do
    local kept = redis.call('GET', KEYS[i])
    local t, values = now, {0, 0, 0, 0, 0, 0}
    if kept then
      local fields = {string.match(kept, '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+)$')}
      if fields[1] then
        t = tonumber(fields[1])
        for j = 1, 6 do
          values[j] = tonumber(fields[j + 1])
        end
      end
    end
    -- A clock behind the record's (instances differ by a little) decays nothing.
    local age = now - t
    local recent, history = 1, 1
    if age > 0 then
      recent, history = 2 ^ (-age / recent_half), 2 ^ (-age / history_half)
    end
    for j = 1, 3 do
      values[j] = math.floor(values[j] * recent + add[j] + 0.5)
      values[j + 3] = math.floor(values[j + 3] * history + add[j] + 0.5)
    end
    local record = string.format('%d %d %d %d %d %d %d', math.max(now, t), values[1],
      values[2], values[3], values[4], values[5], values[6])
    redis.call('SET', KEYS[i], record, 'PX', ttl)
    answer[#answer + 1] = record
  end
  return answer
end
