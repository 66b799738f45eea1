-- Takes an admitted send back out: uncounts it, gives its attribution back the mark it held
-- before (if it still holds this send's: a concurrent send of the same code may have marked
-- it since), and counts a refusal if the guard refused it.
-- KEYS (one hash tag, {guard}): 1 the attribution, 2 the prefix's, 3 the country's and 4 the
-- service's minutes of the send's hour, 5/6 the prefix's and the service's running tallies.
-- ARGV: 1 the send's minute, 2 the attribution's previous mark or '', 3 refused (1/0),
-- 4 counters' ttl (ms), 5 this send's mark ('<minute>:<token>').
local field = 's' .. ARGV[1]
if fraud_uncount(KEYS[2], field) then tally_adjust(KEYS[5], 's', ARGV[1], '-1') end
fraud_uncount(KEYS[3], field)
if fraud_uncount(KEYS[4], field) then tally_adjust(KEYS[6], 's', ARGV[1], '-1') end
if ARGV[3] == '1' then
  redis.call('HINCRBY', KEYS[4], 'r' .. ARGV[1], '1')
  redis.call('PEXPIRE', KEYS[4], ARGV[4])
end
if redis.call('GET', KEYS[1]) == ARGV[5] then
  if ARGV[2] == '' then
    redis.call('DEL', KEYS[1])
  else
    redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
  end
end
return 0
