-- The fraud guard's step for one send: refuse it if its prefix is blocked (and the guard
-- enforces), else count it (prefix, country, service) and answer the counts over the window.
-- KEYS (one hash tag, {guard}): 1 blocks, 2 prefixes (prefix -> country), 3 countries,
-- 4 the send's attribution, 5/6 the prefix's minutes of this hour and the one before,
-- 7 the country's of this hour, 8/9 the service's of this hour and the one before, 10/11 the
-- prefix's and the service's running tallies (fraud_tally.lua).
-- ARGV: 1 prefix, 2 country, 3 now (ms), 4 minute, 5 window's first minute, 6 first minute
-- within grace, 7 enforce (1/0), 8 attribution ttl (ms), 9 counters' ttl (ms), 10 this
-- send's mark ('<minute>:<token>').
-- Returns {1, block} when refused; else {0, block or '', prefix's judged sends, conversions,
-- unjudged sends, conversions, the service's four alike, the attribution's previous mark or
-- ''}.
local prefix, country = ARGV[1], ARGV[2]
local now, minute = tonumber(ARGV[3]), tonumber(ARGV[4])
local from, judged_before = tonumber(ARGV[5]), tonumber(ARGV[6])
local retention = ARGV[9]
local hour = math.floor(minute / 60)

-- Counts one in `field` of the hourly hash at `key`; true for the field's first (the hash's
-- expiry is set then: every field of the hour is counted within its retention).
local function count(key, field)
  if redis.call('HINCRBY', key, field, 1) == 1 then
    redis.call('PEXPIRE', key, retention)
    return true
  end
  return false
end

local block = redis.call('HGET', KEYS[1], prefix)
if block and ARGV[7] == '1' and cjson.decode(block).until_ms > now then
  count(KEYS[8], 'r' .. minute)
  return {1, block}
end
-- The prefix and country registries change at most once a minute per prefix and country.
if count(KEYS[5], 's' .. minute) then redis.call('HSET', KEYS[2], prefix, country) end
if count(KEYS[7], 's' .. minute) then redis.call('HSET', KEYS[3], country, 1) end
count(KEYS[8], 's' .. minute)
local previous = redis.call('SET', KEYS[4], ARGV[10], 'PX', ARGV[8], 'GET')

local function read(key, fields)
  if #fields == 0 then return {} end
  return redis.call('HMGET', key, unpack(fields))
end

-- {judged sends, judged conversions, unjudged sends, unjudged conversions} of one scope,
-- whose minutes are in two hourly hashes.
local function tally(this_hour, hour_before)
  local fields, minutes = {{}, {}}, {{}, {}}
  for m = from, minute do
    local side = (math.floor(m / 60) == hour) and 1 or 2
    table.insert(fields[side], 's' .. m)
    table.insert(fields[side], 'c' .. m)
    table.insert(minutes[side], m)
  end
  local totals = {0, 0, 0, 0}
  local hashes = {this_hour, hour_before}
  for side = 1, 2 do
    local values = read(hashes[side], fields[side])
    for i, m in ipairs(minutes[side]) do
      local at = (m < judged_before) and 0 or 2
      totals[at + 1] = totals[at + 1] + (tonumber(values[2 * i - 1]) or 0)
      totals[at + 2] = totals[at + 2] + (tonumber(values[2 * i]) or 0)
    end
  end
  return totals
end

-- The running tally of the window, with this send counted (in its minute, within grace), or
-- the window summed afresh when the tally is of another window.
local window = from .. ':' .. judged_before .. ':' .. minute
local function current(key, this_hour, hour_before)
  local kept = redis.call('HMGET', key, 'w', 'js', 'jc', 'us', 'uc')
  if kept[1] == window then
    local unjudged = redis.call('HINCRBY', key, 'us', 1)
    return {tonumber(kept[2]), tonumber(kept[3]), unjudged, tonumber(kept[5])}
  end
  local totals = tally(this_hour, hour_before)
  redis.call('HSET', key, 'w', window, 'js', totals[1], 'jc', totals[2], 'us', totals[3],
    'uc', totals[4])
  redis.call('PEXPIRE', key, retention)
  return totals
end

local p = current(KEYS[10], KEYS[5], KEYS[6])
local s = current(KEYS[11], KEYS[8], KEYS[9])
return {0, block or '', p[1], p[2], p[3], p[4], s[1], s[2], s[3], s[4], previous or ''}
