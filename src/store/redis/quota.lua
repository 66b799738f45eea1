-- Sliding-window quota logs, prepended to every script that enforces a quota. A log is a
-- sorted set of event tokens scored by their time in ms; `rules` is a flat list
-- {limit1, window1_ms, limit2, window2_ms, ...}: at most `limit` events in any `window`.

-- A number as Redis reads it, formatted as an integer: Lua would format it with '%.14g', whose
-- floating-point path was the largest single cost of these scripts in a profile of Redis.
local function int(n)
  return string.format('%d', n)
end

local function quota_longest(rules)
  local longest = 0
  for i = 2, #rules, 2 do
    if rules[i] > longest then longest = rules[i] end
  end
  return longest
end

-- 0 if every rule has room for one more event now, else the ms until one does.
local function quota_wait(key, now, rules)
  local longest = quota_longest(rules)
  if longest == 0 then return 0 end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - longest))
  local wait = 0
  for i = 1, #rules, 2 do
    local limit, window = rules[i], rules[i + 1]
    local since = '(' .. int(now - window)
    local count = redis.call('ZCOUNT', key, since, '+inf')
    if count >= limit then
      -- The window has room again once this event leaves it.
      local freeing = redis.call('ZRANGEBYSCORE', key, since, '+inf', 'WITHSCORES', 'LIMIT', count - limit, 1)
      wait = math.max(wait, tonumber(freeing[2]) + window - now)
    end
  end
  return wait
end

local function quota_record(key, now, rules, token)
  local longest = quota_longest(rules)
  if longest == 0 then return end
  redis.call('ZADD', key, int(now), token)
  redis.call('PEXPIRE', key, int(longest))
end

-- Reads rules from ARGV[first..last] (last: the end of ARGV if nil): pairs of limit, window_ms.
local function quota_rules(first, last)
  local rules = {}
  for i = first, last or #ARGV do rules[#rules + 1] = tonumber(ARGV[i]) end
  return rules
end

