-- The fraud guard's step for one send: refuse it if its prefix is blocked (and the guard
-- enforces), else count it (prefix, country, service) and answer the counts over the window.
-- KEYS (one hash tag, {guard}): 1 blocks, 2 prefixes (prefix -> country), 3 countries,
-- 4 the send's attribution, 5/6 the prefix's minutes of this hour and the one before,
-- 7 the country's of this hour, 8/9 the service's of this hour and the one before, 10/11 the
-- prefix's and the service's running tallies (fraud_tally.lua).
-- ARGV: 1 prefix, 2 country, 3 now (ms), 4 minute, 5 window's first minute, 6 first minute
-- within grace, 7 enforce (1/0), 8 attribution ttl (ms), 9 counters' ttl (ms), 10 this
-- send's mark ('<minute>:<token>').
-- Returns {1, block} when refused; else {0, block or '', 'prefix's judged sends,conversions,
-- unjudged sends,conversions,the service's four alike', the attribution's previous mark or
-- ''}.
local refused, block = fraud_refusal(0, 0)
if refused then
  return {1, block}
end
local counted = fraud_count(0, 0, block)
table.insert(counted, 1, 0)
return counted
