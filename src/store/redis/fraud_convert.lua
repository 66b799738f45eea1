-- A verified code: takes its send's attribution (once) and counts a conversion in the send's
-- minute for the prefix, the country and the service.
-- KEYS (one hash tag, {guard}): 1 the attribution, 2/3 the prefix's and the service's running
-- tallies (fraud_tally.lua), then for each hour from ARGV[1] on, three keys: the prefix's, the
-- country's and the service's minutes of that hour (the hours the attribution can still be
-- from).
-- ARGV: 1 the first of those hours, 2 the first minute still counted, 3 counters' ttl (ms).
-- Returns the minute converted, or -1.
return fraud_convert(0, 0)
