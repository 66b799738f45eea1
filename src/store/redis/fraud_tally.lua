-- Prelude of the fraud guard's scripts: a running tally per scope (prefix, service), so that a
-- send reads four numbers instead of summing the window's sixty minutes. The tally is kept
-- for one window (its first minute, its first minute within grace, its last minute: 'w'),
-- which moves at most twice a minute; a step in another window sums the minutes afresh.
-- Every change to a minute's sends or conversions also changes the tally that covers it.
-- Fields: w, js/jc (judged sends, conversions), us/uc (within grace).

-- Adds `by` to the tally at `key` for a send ('s') or a conversion ('c') of minute `m`, if
-- that minute is in the tally's window.
local function tally_adjust(key, kind, m, by)
  local w = redis.call('HGET', key, 'w')
  if not w then return end
  local first, judged_before, last = string.match(w, '^(%d+):(%d+):(%d+)$')
  if not first or m < tonumber(first) or m > tonumber(last) then return end
  local side = (m < tonumber(judged_before)) and 'j' or 'u'
  redis.call('HINCRBY', key, side .. kind, by)
end
