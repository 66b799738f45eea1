-- Sliding-window quota logs, prepended to every script that enforces a quota. A log is a
-- sorted set of event tokens scored by their time in ms; `rules` is a flat list
-- {limit1, window1_ms, limit2, window2_ms, ...}: at most `limit` events in any `window`.

-- A number as Redis reads it, formatted as an integer: Lua would format it with '%.14g', whose
-- floating-point path was the largest single cost of these scripts in a profile of Redis. (So
-- every number these scripts pass to redis.call is text, literals too: `'0'` where `0` cost
-- Redis 250 ns an argument, measured in a loop of EVAL, 2026-12-07.)
local function int(n)
  return string.format('%d', n)
end

-- A number from a string that holds one (an argument, a reply of Redis): `tonumber` converts
-- it twice (Lua 5.1 checks that it is one, then converts it: 137 ns), arithmetic once (65 ns
-- with this call; measured in a loop of EVAL, 2026-12-07).
local function num(s)
  return s + 0
end

-- The largest of every other number of `rules` from `first`: limits from 1, windows from 2.
local function quota_max(rules, first)
  local largest = 0
  for i = first, #rules, 2 do
    if rules[i] > largest then largest = rules[i] end
  end
  return largest
end

local function quota_longest(rules)
  return quota_max(rules, 2)
end

-- A log whose limits are all at most this holds few events: it is read whole in one call and
-- counted here. Each call a script makes costs Redis more than such a read (a send with the
-- default limits made 14 calls); a larger log is counted by Redis instead.
local QUOTA_SMALL_LOG = 32

-- 0 if every rule has room for one more event now, else the ms until one does. Events at or
-- before the longest window's start are dropped.
local function quota_wait(key, now, rules)
  local longest = quota_longest(rules)
  if longest == 0 then return 0 end
  local horizon = now - longest
  local wait = 0
  if quota_max(rules, 1) > QUOTA_SMALL_LOG then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', int(horizon))
    for i = 1, #rules, 2 do
      local limit, window = rules[i], rules[i + 1]
      local since = '(' .. int(now - window)
      local count = redis.call('ZCOUNT', key, since, '+inf')
      if count >= limit then
        -- The window has room again once this event leaves it.
        local freeing = redis.call('ZRANGEBYSCORE', key, since, '+inf', 'WITHSCORES', 'LIMIT', int(count - limit), '1')
        wait = math.max(wait, num(freeing[2]) + window - now)
      end
    end
    return wait
  end
  -- {token, time, ...}, oldest first.
  local events = redis.call('ZRANGE', key, '0', '-1', 'WITHSCORES')
  local times, stale = {}, false
  for i = 2, #events, 2 do
    local at = num(events[i])
    if at > horizon then times[#times + 1] = at else stale = true end
  end
  if stale then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', int(horizon))
  end
  for i = 1, #rules, 2 do
    local limit, window = rules[i], rules[i + 1]
    local since = now - window
    local first = #times + 1
    while first > 1 and times[first - 1] > since do first = first - 1 end
    local count = #times - first + 1
    if count >= limit then
      -- The window has room again once this event leaves it.
      wait = math.max(wait, times[first + count - limit] + window - now)
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
  for i = first, last or #ARGV do rules[#rules + 1] = num(ARGV[i]) end
  return rules
end

-- A script's budgets: KEYS[first_key..last_key] (the last of KEYS if nil), each with its rules
-- read from ARGV[at..] (the number of its rules, then those rules).
local function quota_budgets(first_key, at, last_key)
  local budgets = {}
  for i = first_key, last_key or #KEYS do
    local count = num(ARGV[at])
    budgets[#budgets + 1] = {key = KEYS[i], rules = quota_rules(at + 1, at + 2 * count)}
    at = at + 1 + 2 * count
  end
  return budgets
end

-- 0, 0 if every budget has room for one more event now; else the position of the first
-- without and the ms until every one has.
local function quota_budgets_wait(budgets, now)
  local refused, wait = 0, 0
  for i, budget in ipairs(budgets) do
    local budget_wait = quota_wait(budget.key, now, budget.rules)
    if budget_wait > 0 then
      if refused == 0 then refused = i end
      wait = math.max(wait, budget_wait)
    end
  end
  return refused, wait
end

local function quota_budgets_record(budgets, now, token)
  for _, budget in ipairs(budgets) do
    quota_record(budget.key, now, budget.rules, token)
  end
end

-- The arguments verify.lua and verify_id.lua share: ARGV[3] how many phone rule numbers follow
-- (n), ARGV[4..3+n] the phone's failure rules, then the client's, then '|' and the candidate
-- digests. Returns the two rule lists and the separator's index, or nothing without a '|'.
local function verify_arguments()
  local phone_last = 3 + num(ARGV[3])
  local separator = phone_last + 1
  while ARGV[separator] ~= '|' do
    separator = separator + 1
    -- Arguments without the separator would spin here, and a busy script blocks all of Redis.
    if separator > #ARGV then
      return nil
    end
  end
  return quota_rules(4, phone_last), quota_rules(phone_last + 1, separator - 1), separator
end
