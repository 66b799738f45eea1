-- A delivery receipt said a counted send never arrived: moves it, in its minute, from the sends
-- ('s', which the judgement and the running tallies read) to the undelivered ('x'), in each
-- scope that still counts a send then (a minute past retention is gone: nothing to move).
-- KEYS (one hash tag, {guard}): 1 the prefix's, 2 the country's and 3 the service's minutes of
-- the send's hour, 4/5 the prefix's and the service's running tallies.
-- ARGV: 1 the send's minute.
local sends, undelivered = 's' .. ARGV[1], 'x' .. ARGV[1]
-- Whether a send of the minute was moved in the scope's minutes at `key`.
local function move(key)
  if fraud_uncount(key, sends) then
    redis.call('HINCRBY', key, undelivered, '1')
    return true
  end
  return false
end
if move(KEYS[1]) then tally_adjust(KEYS[4], 's', ARGV[1], '-1') end
move(KEYS[2])
if move(KEYS[3]) then tally_adjust(KEYS[5], 's', ARGV[1], '-1') end
return 0
