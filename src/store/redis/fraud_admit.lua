-- The fraud guard's step for one send: refuse it if its prefix is blocked (and the guard
-- enforces), else count it (prefix, country, service) and answer the counts over the window.
-- KEYS (one hash tag, {guard}): 1 blocks, 2 prefixes (prefix -> country), 3 countries,
-- 4 the send's attribution, 5/6 the prefix's minutes of this hour and the one before,
-- 7 the country's of this hour, 8/9 the service's of this hour and the one before, 10/11 the
-- prefix's and the service's running tallies (fraud_tally.lua).
-- ARGV[1]: the step's ten fields, space-separated (fraud_step in fraud_tally.lua): prefix,
-- country, now (ms), minute, window's first minute, first minute within grace, enforce (1/0),
-- attribution ttl (ms), counters' ttl (ms), this send's mark ('<minute>:<token>').
-- Returns {1, block} when refused; else {0, fraud_count's string: the prefix's judged sends,
-- conversions, unjudged sends, conversions and the service's four alike, comma-separated,
-- '|', the attribution's previous mark or '', '|', the block or ''}.
local step = fraud_step(0)
if step.err then
  return step
end
local refused, block = fraud_refusal(0, step)
if refused then
  return {1, block}
end
return {0, fraud_count(0, step, block)}
