-- Prelude of the fraud guard's scripts (and of issue.lua, verify.lua and verify_id.lua, which
-- take the guard's steps on one node): a running tally per scope (prefix, service), so that a
-- send reads four numbers instead of summing the window's sixty minutes. The tally is kept
-- for one window (its first minute, its first minute within grace, its last minute: 'w'),
-- which moves at most twice a minute; a step in another window sums the minutes afresh.
-- Every change to a minute's sends or conversions also changes the tally that covers it.
-- Fields: w, js/jc (judged sends, conversions), us/uc (within grace).
-- Every redis.call argument here is a string and no number is concatenated on the hot path:
-- Redis 7.0 writes a number argument with '%.17g' and Lua concatenates one with '%.14g', whose
-- floating-point path was a quarter of the guard's instructions in Redis on a send.

-- Adds `by` (a string: '1', '-1') to the tally at `key` for a send ('s') or a conversion ('c')
-- of `minute` (its digits), if that minute is in the tally's window.
local function tally_adjust(key, kind, minute, by)
  local w = redis.call('HGET', key, 'w')
  if not w then return end
  local side
  if string.sub(w, -#minute - 1) == ':' .. minute then
    -- The window's last minute (a code verified within the minute it was sent, the common
    -- case), always within grace: no window to parse.
    side = 'u'
  else
    local first, judged_before, last = string.match(w, '^(%d+):(%d+):(%d+)$')
    local m = tonumber(minute)
    if not first or m < tonumber(first) or m > tonumber(last) then return end
    side = (m < tonumber(judged_before)) and 'j' or 'u'
  end
  redis.call('HINCRBY', key, side .. kind, by)
end

-- Takes one send back out of `field` of the minutes at `key`, if one is counted there (a
-- minute past retention is gone: nothing to take); whether it did.
local function fraud_uncount(key, field)
  if (tonumber(redis.call('HGET', key, field)) or 0) > 0 then
    redis.call('HINCRBY', key, field, '-1')
    return true
  end
  return false
end

-- The guard's steps take their keys and arguments from KEYS[k + 1..] and ARGV[a + 1..], so that
-- a code script can run them on the keys and arguments it appends to its own.

-- The send's step's one argument, ARGV[a + 1]: its ten fields separated by spaces (one
-- argument for the caller to write and Redis to read instead of ten), as a table: prefix (digits,
-- or a mail domain's '@domain', which has no space),
-- country, now (ms), minute, from (the window's first minute), judged_before (its first minute
-- within grace), enforce ('1' or '0'), attribution_ttl (ms), retention (the counters' ttl, ms),
-- mark (this send's, '<minute>:<token>'); or an error reply (`err`) if it is not that.
local function fraud_step(a)
  local prefix, country, now, minute, from, judged_before, enforce, attribution_ttl, retention,
    mark = string.match(ARGV[a + 1] or '',
      '^(%S+) (%w+) (%d+) (%d+) (%d+) (%d+) ([01]) (%d+) (%d+) (%d+:%d+)$')
  if not mark then
    return redis.error_reply('fraud guard: a malformed step')
  end
  -- One constructor: setting the fields one by one on an empty table rehashed it as it grew,
  -- which cost Redis as much as the match.
  return {prefix = prefix, country = country, now = now, minute = minute, from = from,
    judged_before = judged_before, enforce = enforce, attribution_ttl = attribution_ttl,
    retention = retention, mark = mark}
end

-- Counts one in `field` of the hourly hash at `key`; true for the field's first (the hash's
-- expiry, `retention` ms, is set then: every field of the hour is counted within it).
local function fraud_count_one(key, field, retention)
  if redis.call('HINCRBY', key, field, '1') == 1 then
    redis.call('PEXPIRE', key, retention)
    return true
  end
  return false
end

-- The admission's first half, before anything of the send is written: true and the block
-- when the prefix's block refuses the send (the refusal is counted), else false and the
-- prefix's block record, if any. KEYS as fraud_admit.lua's, `step` from fraud_step.
local function fraud_refusal(k, step)
  local block = redis.call('HGET', KEYS[k + 1], step.prefix)
  if block and step.enforce == '1' and cjson.decode(block).until_ms > tonumber(step.now) then
    fraud_count_one(KEYS[k + 8], 'r' .. step.minute, step.retention)
    return true, block
  end
  return false, block
end

-- The admission's second half: counts the send (prefix, country, service), marks its
-- attribution and answers one string (one reply value to read instead of three): the
-- prefix's judged sends, conversions, unjudged sends, conversions and the service's four
-- alike, comma-separated, then '|', the attribution's previous mark or '', '|' and the block
-- or '' (last: its JSON is the rest of the string).
local function fraud_count(k, step, block)
  local prefix, country = step.prefix, step.country
  local minute = tonumber(step.minute)
  local from, judged_before = tonumber(step.from), tonumber(step.judged_before)
  local retention = step.retention
  local hour = math.floor(minute / 60)
  local function count(key, field)
    return fraud_count_one(key, field, retention)
  end
  local sends = 's' .. step.minute
  -- The prefix and country registries change at most once a minute per prefix and country.
  if count(KEYS[k + 5], sends) then redis.call('HSET', KEYS[k + 2], prefix, country) end
  if count(KEYS[k + 7], sends) then redis.call('HSET', KEYS[k + 3], country, '1') end
  count(KEYS[k + 8], sends)
  local previous = redis.call('SET', KEYS[k + 4], step.mark, 'PX', step.attribution_ttl, 'GET')

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
      local text = string.format('%d', m)
      table.insert(fields[side], 's' .. text)
      table.insert(fields[side], 'c' .. text)
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

  -- The running tally of the window, with this send counted (in its minute, within grace),
  -- or the window summed afresh when the tally is of another window: its four counts as
  -- text, comma-separated (a kept count is read as text and answered as read).
  local window = step.from .. ':' .. step.judged_before .. ':' .. step.minute
  local function current(key, this_hour, hour_before)
    -- Not 'us': the increment answers it (every field read costs Redis a reply to parse).
    local kept = redis.call('HMGET', key, 'w', 'js', 'jc', 'uc')
    if kept[1] == window then
      local unjudged = redis.call('HINCRBY', key, 'us', '1')
      return kept[2] .. ',' .. kept[3] .. ',' .. string.format('%d', unjudged) .. ',' .. kept[4]
    end
    local totals = tally(this_hour, hour_before)
    for i = 1, 4 do
      totals[i] = string.format('%d', totals[i])
    end
    redis.call('HSET', key, 'w', window, 'js', totals[1], 'jc', totals[2], 'us', totals[3],
      'uc', totals[4])
    redis.call('PEXPIRE', key, retention)
    return table.concat(totals, ',')
  end

  return current(KEYS[k + 10], KEYS[k + 5], KEYS[k + 6]) .. ',' ..
    current(KEYS[k + 11], KEYS[k + 8], KEYS[k + 9]) .. '|' .. (previous or '') .. '|' ..
    (block or '')
end

-- A verified code: takes its send's attribution (once) and counts a conversion in the send's
-- minute for the prefix, the country and the service. KEYS and ARGV as fraud_convert.lua's;
-- its keys end at KEYS[last_key] (default: the last; other keys, the event outbox's, may follow).
-- Returns the minute converted, or -1.
local function fraud_convert(k, a, last_key)
  last_key = last_key or #KEYS
  -- Taken: one command (GETDEL, Redis 6.2+, as SET's GET the send uses).
  local mark = redis.call('GETDEL', KEYS[k + 1])
  if not mark then return -1 end
  -- '<minute>:<token>'
  local minute_text = string.match(mark, '^(%d+):')
  if not minute_text then return -1 end
  local minute = tonumber(minute_text)
  local base = k + (math.floor(minute / 60) - tonumber(ARGV[a + 1])) * 3 + 3
  if minute < tonumber(ARGV[a + 2]) or base < k + 1 or base + 3 > last_key then return -1 end
  local field = 'c' .. minute_text
  for i = 1, 3 do
    -- The hour's hash lives for the retention from its last new minute, the send's included.
    fraud_count_one(KEYS[base + i], field, ARGV[a + 3])
  end
  tally_adjust(KEYS[k + 2], 'c', minute_text, '1')
  tally_adjust(KEYS[k + 3], 'c', minute_text, '1')
  return minute
end
